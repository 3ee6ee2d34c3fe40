//! Running a job: [`Jobs::spawn`] creates it durably and drives its future on the tokio
//! runtime through a [`JobContext`]; the outcome is recorded when the future ends.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use vidforge_core::ids;
use vidforge_core::store::{Change, StoreError};

use super::error::{JobError, Stop};
use super::handle::Jobs;
use super::record::{
    INTERRUPTED_CODE, JOB_ID_PREFIX, JobFailure, JobOutcome, JobRecord, JobState, end,
};
use super::shared::{Inner, Live, lock};

impl Jobs {
    /// Creates a job durably (flushed before returning), then runs `run` on the tokio runtime.
    /// The returned record is the job as created (`working`).
    pub async fn spawn<F, Fut>(
        &self,
        principal: &str,
        kind: &str,
        status_message: &str,
        run: F,
    ) -> Result<JobRecord, JobError>
    where
        F: FnOnce(JobContext) -> Fut + Send + 'static,
        Fut: Future<Output = Result<JobOutcome, Stop>> + Send + 'static,
    {
        let now = self.inner.now();
        let rec = JobRecord {
            id: ids::new_id(JOB_ID_PREFIX),
            principal: principal.to_string(),
            kind: kind.to_string(),
            state: JobState::Working,
            status_message: status_message.to_string(),
            input_requests: BTreeMap::new(),
            input_responses: BTreeMap::new(),
            result: None,
            failure: None,
            created_at: now,
            updated_at: now,
        };
        self.inner.store.put(&rec)?;
        self.inner.flush().await?;
        let live = Arc::new(Live {
            cancel: CancellationToken::new(),
            input: Notify::new(),
        });
        lock(&self.inner.live).insert(rec.id.clone(), live.clone());
        let ctx = JobContext {
            id: rec.id.clone(),
            inner: self.inner.clone(),
            live,
        };
        let inner = self.inner.clone();
        let id = rec.id.clone();
        tokio::spawn(async move {
            let outcome = run(ctx).await;
            if let Err(e) = finish(&inner, &id, outcome).await {
                tracing::error!(job = %id, error = %e, "could not record a job's outcome");
            }
            lock(&inner.live).remove(&id);
        });
        tracing::info!(job = %rec.id, kind, "job started");
        Ok(rec)
    }
}

async fn finish(
    inner: &Inner,
    id: &str,
    outcome: Result<JobOutcome, Stop>,
) -> Result<(), JobError> {
    let now = inner.now();
    let written = inner
        .store
        .update(id, |r| {
            if r.state.is_terminal() {
                return Ok::<_, StoreError>(Change::Keep(()));
            }
            match &outcome {
                Ok(JobOutcome::Completed(result)) => {
                    end(r, now, JobState::Completed, "Completed.");
                    r.result = Some(result.clone());
                }
                Ok(JobOutcome::Failed(failure)) => {
                    end(r, now, JobState::Failed, &failure.message);
                    r.failure = Some(failure.clone());
                }
                // A cancellation is recorded by `cancel` before the future stops.
                Err(Stop::Cancelled) => return Ok(Change::Keep(())),
                Err(Stop::Store(e)) => {
                    let message = format!("The job's state could not be stored: {e}");
                    end(r, now, JobState::Failed, &message);
                    r.failure = Some(JobFailure {
                        code: INTERRUPTED_CODE,
                        message,
                    });
                }
            }
            Ok(Change::Write(()))
        })?
        .is_some_and(|u| u.written);
    if written {
        inner.flush().await?;
        inner.publish(id);
    }
    Ok(())
}

/// What a running job can do: wait (cancellably) and ask its client for input.
pub struct JobContext {
    id: String,
    inner: Arc<Inner>,
    live: Arc<Live>,
}

impl JobContext {
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Sleeps `d`, or stops early with [`Stop::Cancelled`].
    pub async fn sleep(&self, d: Duration) -> Result<(), Stop> {
        tokio::select! {
            _ = tokio::time::sleep(d) => Ok(()),
            _ = self.live.cancel.cancelled() => Err(Stop::Cancelled),
        }
    }

    /// Puts the job in `input_required` with `requests` (durably), waits until every key is
    /// answered, then returns the answers by key.
    pub async fn ask(
        &self,
        requests: BTreeMap<String, Value>,
        status_message: &str,
    ) -> Result<BTreeMap<String, Value>, Stop> {
        let keys: Vec<String> = requests.keys().cloned().collect();
        let now = self.inner.now();
        let updated = self.inner.store.update(&self.id, |r| {
            if r.state.is_terminal() {
                return Ok::<_, StoreError>(Change::Keep(()));
            }
            for key in &keys {
                r.input_responses.remove(key);
            }
            r.input_requests = requests.clone();
            r.state = JobState::InputRequired;
            r.status_message = status_message.to_string();
            r.updated_at = now;
            Ok(Change::Write(()))
        })?;
        if !updated.is_some_and(|u| u.written) {
            return Err(Stop::Cancelled);
        }
        self.inner.flush().await?;
        self.inner.publish(&self.id);
        loop {
            let Some(rec) = self.inner.store.get(&self.id)? else {
                return Err(Stop::Cancelled);
            };
            if rec.state.is_terminal() {
                return Err(Stop::Cancelled);
            }
            if rec.state == JobState::Working {
                return Ok(keys
                    .iter()
                    .filter_map(|k| rec.input_responses.get(k).map(|v| (k.clone(), v.clone())))
                    .collect());
            }
            tokio::select! {
                _ = self.live.input.notified() => {}
                _ = self.live.cancel.cancelled() => return Err(Stop::Cancelled),
            }
        }
    }
}
