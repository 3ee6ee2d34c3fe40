//! Upkeep's transitions: boot recovery of an interrupted render, and the sweeper's marks of
//! deleted files.

use crate::error::ServiceError;
use crate::shared::Shared;
use crate::store::{Change, RenderState};

use super::{Written, mark_cancelled, mark_crash_loop, write};

/// Boot recovery of one node's unfinished render, interrupted by the end of the last
/// process: queued again from the beginning (without its preview and approval unless
/// `approved`), cancelled if that was asked, or failed once `max_crashes` attempts ended
/// with their process. Not flushed (recovery flushes once).
pub(crate) fn restart(
    shared: &Shared,
    id: &str,
    approved: bool,
    max_crashes: u32,
) -> Result<Written<()>, ServiceError> {
    let now = shared.ledger.now();
    write(&shared.ledger, id, |r| {
        if r.is_terminal() {
            return Ok(Change::Keep(()));
        }
        // Claimed by a worker and never finished nor handed back at a clean shutdown: the
        // attempt ended with the process.
        let crashed = matches!(r.state, RenderState::Rendering | RenderState::Previewing);
        if crashed {
            r.crashes += 1;
        }
        if r.cancel_requested {
            mark_cancelled(r, now);
        } else if crashed && r.crashes >= max_crashes {
            mark_crash_loop(r, now);
        } else {
            r.state = RenderState::Queued;
            r.progress = None;
            if !approved {
                r.preview_path = None;
                r.approval = None;
            }
        }
        Ok(Change::Write(()))
    })
}

/// The sweeper deleted a finished render's result files (the record stays as a tombstone).
pub(crate) fn result_deleted(shared: &Shared, id: &str) -> Result<Written<()>, ServiceError> {
    write(&shared.ledger, id, |r| {
        r.result_deleted = true;
        Ok(Change::Write(()))
    })
}

/// The sweeper deleted the preview of a render that ended without a result.
pub(crate) fn preview_deleted(shared: &Shared, id: &str) -> Result<Written<()>, ServiceError> {
    write(&shared.ledger, id, |r| {
        r.preview_path = None;
        Ok(Change::Write(()))
    })
}
