//! A worker's run of a render: its claim, its preview, its progress, and how it ends
//! (succeeded, failed, cancelled, or handed back on shutdown). Every write after the claim
//! is fenced by the claim's attempt count ([`super::taken_over`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::args::watermark_params_hash;
use crate::error::ServiceError;
use crate::shared::Shared;
use crate::store::{
    Approval, Change, Outcome, ProgressSnapshot, ProgressStage, RenderRecord, RenderState,
};

use super::{
    Written, mark_cancelled, mark_crash_loop, mark_failed, mark_succeeded, taken_over, write,
    write_durable, write_final,
};

/// Claims a queued render for this worker (durably, counting an attempt): `Rendering` when
/// it needs no decision or holds an approval of its exact watermark, else `Previewing`. In
/// a cluster (`takeover`) a render left running by a node that stopped renewing its lease
/// is claimed too, counting a crash (failed past `max_crashes`). `None`: nothing to run
/// (a stale queue entry, or it ended here).
pub(crate) fn claim(
    shared: &Shared,
    id: &str,
    takeover: bool,
    max_crashes: u32,
) -> Result<Option<(RenderRecord, RenderState)>, ServiceError> {
    let now = shared.ledger.now();
    let claimed = write_durable(&shared.ledger, id, |r| {
        let orphaned = matches!(r.state, RenderState::Rendering | RenderState::Previewing);
        if takeover && orphaned {
            r.crashes += 1;
            tracing::warn!(render_id = %r.id, crashes = r.crashes, "taking over a render whose node stopped renewing its lease");
            if r.crashes >= max_crashes {
                mark_crash_loop(r, now);
                return Ok(Change::Write(None));
            }
        } else if r.state != RenderState::Queued {
            // Stale queue entry (cancelled, already running, awaiting a decision).
            return Ok(Change::Keep(None));
        }
        if r.cancel_requested {
            mark_cancelled(r, now);
            return Ok(Change::Write(None));
        }
        let approved = match &r.args.watermark {
            None => true,
            Some(w) => {
                let hash = watermark_params_hash(w);
                match r.decision() {
                    Some(d) if d.approved && d.params_hash == hash => true,
                    Some(_) => {
                        // A decision for other parameters does not count: ask again.
                        r.approval = None;
                        false
                    }
                    None => false,
                }
            }
        };
        let (state, stage) = if approved {
            (RenderState::Rendering, ProgressStage::Preparing)
        } else {
            (RenderState::Previewing, ProgressStage::Previewing)
        };
        r.state = state;
        r.attempts += 1;
        r.progress = Some(ProgressSnapshot::new(stage, 0, None));
        // A speculative render this one replaces (its node died) is gone with it.
        r.speculation = None;
        Ok(Change::Write(Some(state)))
    })?;
    Ok(claimed.and_then(|u| u.value.map(|state| (u.record, state))))
}

/// The preview of `claimed` is stored at `stored` (`size`, width × height): the render
/// awaits its approval until `deadline` (or ends, if cancelled meanwhile).
pub(crate) fn preview_ready(
    shared: &Shared,
    claimed: &RenderRecord,
    stored: PathBuf,
    size: (u32, u32),
    deadline: u64,
) -> Result<Written<()>, ServiceError> {
    let now = shared.ledger.now();
    write_final(&shared.ledger, &shared.pool, &claimed.id, |r| {
        if r.state != RenderState::Previewing || taken_over(r, claimed) {
            return Ok(Change::Keep(()));
        }
        if r.cancel_requested {
            mark_cancelled(r, now);
        } else {
            r.state = RenderState::AwaitingApproval;
            r.preview_path = Some(stored.clone());
            r.preview_size = Some(size);
            r.progress = None;
            r.approval = Some(Approval {
                decision: None,
                requested_at: now,
                deadline,
            });
        }
        Ok(Change::Write(()))
    })
}

/// The progress of a running render (not flushed: progress is advisory). Raises `cancel`
/// when the record says another node cancelled it.
pub(crate) fn progress(
    shared: &Shared,
    claimed: &RenderRecord,
    snap: &ProgressSnapshot,
    cancel: &AtomicBool,
) -> Result<Written<()>, ServiceError> {
    write(&shared.ledger, &claimed.id, |r| {
        if r.cancel_requested {
            // Cancelled on another node: the flag reaches this worker here too.
            cancel.store(true, Ordering::SeqCst);
        }
        if r.state != RenderState::Rendering || taken_over(r, claimed) {
            return Ok(Change::Keep(()));
        }
        r.progress = Some(snap.clone());
        Ok(Change::Write(()))
    })
}

/// The render succeeded with `outcome` (a `Success` whose output is stored), unless it
/// ended meanwhile or was taken over.
pub(crate) fn succeeded(
    shared: &Shared,
    claimed: &RenderRecord,
    outcome: &Outcome,
) -> Result<Written<()>, ServiceError> {
    end(shared, claimed, |r, now| {
        mark_succeeded(r, outcome.clone(), now)
    })
}

/// A render interrupted by shutdown is handed back durably, queued (so boot recovery does
/// not count a crash).
pub(crate) fn handed_back(
    shared: &Shared,
    claimed: &RenderRecord,
) -> Result<Written<()>, ServiceError> {
    write_final(&shared.ledger, &shared.pool, &claimed.id, |r| {
        if r.state != RenderState::Rendering || taken_over(r, claimed) {
            return Ok(Change::Keep(()));
        }
        r.state = RenderState::Queued;
        r.progress = None;
        Ok(Change::Write(()))
    })
}

/// The render ends cancelled (unless it ended meanwhile or was taken over).
pub(crate) fn cancelled(
    shared: &Shared,
    claimed: &RenderRecord,
) -> Result<Written<()>, ServiceError> {
    end(shared, claimed, mark_cancelled)
}

/// The render ends failed with `outcome` (unless it ended meanwhile or was taken over).
pub(crate) fn failed(
    shared: &Shared,
    claimed: &RenderRecord,
    outcome: &Outcome,
) -> Result<Written<()>, ServiceError> {
    end(shared, claimed, |r, now| {
        mark_failed(r, outcome.clone(), now)
    })
}

/// Ends the claimed render as `mark` says, at the ledger's now, unless it ended meanwhile
/// or was taken over.
fn end(
    shared: &Shared,
    claimed: &RenderRecord,
    mut mark: impl FnMut(&mut RenderRecord, u64),
) -> Result<Written<()>, ServiceError> {
    let now = shared.ledger.now();
    write_final(&shared.ledger, &shared.pool, &claimed.id, |r| {
        if r.is_terminal() || taken_over(r, claimed) {
            return Ok(Change::Keep(()));
        }
        mark(r, now);
        Ok(Change::Write(()))
    })
}
