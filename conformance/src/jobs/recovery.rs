//! Boot recovery (jobs a previous process left unfinished end as `failed`) and the TTL sweep.

use vidforge_core::store::{Change, StoreError};

use super::handle::Jobs;
use super::record::{INTERRUPTED_CODE, INTERRUPTED_MESSAGE, JobFailure, JobState, end};

impl Jobs {
    /// Boot recovery: ends every job a previous process left unfinished as `failed`, durably.
    /// Returns how many.
    pub fn recover(&self) -> Result<usize, StoreError> {
        let now = self.inner.now();
        let mut ended = 0;
        for rec in self.inner.store.all()? {
            if rec.state.is_terminal() {
                continue;
            }
            self.inner.store.update(&rec.id, |r| {
                if r.state.is_terminal() {
                    return Ok::<_, StoreError>(Change::Keep(()));
                }
                end(r, now, JobState::Failed, INTERRUPTED_MESSAGE);
                r.failure = Some(JobFailure {
                    code: INTERRUPTED_CODE,
                    message: INTERRUPTED_MESSAGE.into(),
                });
                Ok(Change::Write(()))
            })?;
            ended += 1;
        }
        (self.inner.flush)()?;
        Ok(ended)
    }

    /// Deletes jobs past their TTL (cancelling any still running). Returns how many.
    pub fn sweep(&self) -> Result<usize, StoreError> {
        let mut removed = 0;
        for rec in self.inner.store.all()? {
            if self.inner.expired(&rec) {
                if let Some(live) = self.inner.live(&rec.id) {
                    live.cancel.cancel();
                }
                self.inner.store.delete(&rec.id)?;
                removed += 1;
            }
        }
        Ok(removed)
    }
}
