//! Speculative rendering (`speculative = auto`): while a watermarked render waits for its
//! approval and a worker would otherwise sit idle, the worker renders it in full with the
//! previewed settings, so that approving it publishes the result at once.
//!
//! - **Claim.** The oldest awaiting render nobody renders yet ([`next_candidate`]: from the
//!   index on one node; in a cluster `Store::claim_speculative`, a lease like any other
//!   claim). The claim writes `speculation = running` durably and counts an attempt (the
//!   fencing token of every later write).
//! - **Never in the way.** The record stays `awaiting_approval`: it counts against no quota,
//!   and no read path shows anything of it. Its worker gives the slot up as soon as real
//!   work waits ([`work_waiting`]): it is abandoned, its files deleted and its speculation
//!   cleared, to be claimed again when a slot is idle.
//! - **Approve** ([`approve`]): a `done` speculation's outcome becomes the result at once
//!   (succeeded); a `running` one becomes the real render where it is (the record goes
//!   `rendering`, its worker goes on); otherwise the render is queued as usual.
//! - **Reject, timeout, cancel** ([`discard`]): a running attempt's cancel flag is raised (on
//!   another node its change listener does it) and its worker deletes what it wrote; a done
//!   one's output is deleted by whoever ended the render (the sweeper's orphan pass is the
//!   net under both).
//! - **Crash.** Boot recovery clears a `running` speculation of an awaiting render and its
//!   files ([`forget_interrupted`]); a promoted one is an ordinary interrupted render. In a
//!   cluster a dead node's claim runs out with its lease and another node claims it again.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::args::watermark_params_hash;
use crate::config::Speculative;
use crate::engine::{EngineReport, RenderPlan};
use crate::error::ServiceError;
use crate::render_end::{
    mark_succeeded, record_finished, store_output, success_outcome, taken_over, update_final,
};
use crate::shared::Shared;
use crate::store::{Change, RenderRecord, RenderState, Speculation, SpeculationState};
use crate::sync::lock;
use crate::telemetry::{SpeculationEnd, speculation_ended};

/// In a cluster, a render queued this long has found no idle worker on any node: a
/// speculative render gives its slot up to it (idle workers claim within half a second).
const CLUSTER_QUEUED_GRACE: Duration = Duration::from_secs(1);

/// Whether this node renders speculatively at all.
pub(crate) fn enabled(shared: &Shared) -> bool {
    shared.config.speculative == Speculative::Auto
}

/// The render an idle worker could speculate on: on one node the oldest candidate of the
/// index that no worker holds; in a cluster one whose lease this node now holds (the caller
/// releases it). `None` when speculation is off, the disk is under its floor, or there is
/// none.
pub(crate) fn next_candidate(shared: &Shared) -> Option<String> {
    if !enabled(shared) || shared.pool.stopping() {
        return None;
    }
    let mut candidates: Vec<(u64, String)> = lock(&shared.ledger.active)
        .iter()
        .filter(|(_, a)| a.speculate)
        .map(|(id, a)| (a.created_at, id.clone()))
        .collect();
    if candidates.is_empty() || !shared.media.disk.has_room() {
        return None;
    }
    if shared.ledger.store.is_shared() {
        // The index says there may be one (running ones count: the lease tells whether
        // their node still lives).
        return match shared
            .ledger
            .store
            .claim_speculative(&shared.pool.node, shared.config.lease_ttl)
        {
            Ok(claim) => claim.map(|c| c.id),
            Err(e) => {
                tracing::warn!(error = %e, "claiming a speculative render failed");
                None
            }
        };
    }
    candidates.sort();
    let running = lock(&shared.pool.running);
    candidates
        .into_iter()
        .map(|(_, id)| id)
        .find(|id| !running.contains_key(id))
}

/// Marks `id` as being rendered speculatively by this worker (durably, counting an
/// attempt). The record as claimed, or `None` when it is no longer a candidate.
pub(crate) fn claim(shared: &Shared, id: &str) -> Result<Option<RenderRecord>, ServiceError> {
    let now = shared.ledger.now();
    let clustered = shared.ledger.store.is_shared();
    let claimed = shared.ledger.update_durable(id, |r| {
        let stale_running = clustered
            && matches!(
                r.speculation.as_ref().map(|s| &s.state),
                Some(SpeculationState::Running)
            );
        let Some(watermark) = &r.args.watermark else {
            return Ok(Change::Keep(false));
        };
        if r.state != RenderState::AwaitingApproval
            || r.cancel_requested
            || r.decision().is_some()
            || (r.speculation.is_some() && !stale_running)
        {
            return Ok(Change::Keep(false));
        }
        r.attempts += 1;
        r.speculation = Some(Speculation {
            params_hash: watermark_params_hash(watermark),
            started_at: now,
            state: SpeculationState::Running,
        });
        Ok(Change::Write(true))
    })?;
    Ok(claimed.filter(|u| u.value).map(|u| u.record))
}

/// Whether real work waits for a slot that a speculative render holds: on one node more
/// queued renders than idle workers; in a cluster a render queued for longer than
/// [`CLUSTER_QUEUED_GRACE`] anywhere.
pub(crate) fn work_waiting(shared: &Shared) -> bool {
    if shared.ledger.store.is_shared() {
        return lock(&shared.ledger.active).values().any(|a| {
            a.state == RenderState::Queued
                && a.queued_since
                    .is_some_and(|t| t.elapsed() >= CLUSTER_QUEUED_GRACE)
        });
    }
    shared.pool.queue.len() > shared.pool.idle_workers.load(Ordering::SeqCst)
}

/// Whether `id` is still only speculative in this node's index (not approved since).
pub(crate) fn still_speculative(shared: &Shared, id: &str) -> bool {
    lock(&shared.ledger.active)
        .get(id)
        .is_some_and(|a| a.state == RenderState::AwaitingApproval)
}

/// What approving a render did with its speculation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Approved {
    /// Its speculative output is the result: the render succeeded (after `seconds` of
    /// speculative rendering).
    Published { seconds: f64 },
    /// Its speculative render goes on as the real one.
    Continues,
    /// Nothing usable: queue it.
    Queue,
}

/// The approving transition of `r` (already holding the decision for `params_hash`).
pub(crate) fn approve(r: &mut RenderRecord, params_hash: &str, now: u64) -> Approved {
    let Some(spec) = r
        .speculation
        .clone()
        .filter(|s| s.params_hash == params_hash)
    else {
        r.speculation = None;
        r.state = RenderState::Queued;
        return Approved::Queue;
    };
    match spec.state {
        SpeculationState::Done { outcome, seconds } => {
            mark_succeeded(r, outcome, now);
            Approved::Published { seconds }
        }
        SpeculationState::Running => {
            r.state = RenderState::Rendering;
            Approved::Continues
        }
        SpeculationState::Failed => {
            r.speculation = None;
            r.state = RenderState::Queued;
            Approved::Queue
        }
    }
}

/// After a render ended unapproved (rejected, timed out, cancelled): stops its running
/// speculative render here, or deletes its finished one.
pub(crate) fn discard(shared: &Shared, rec: &RenderRecord) {
    let Some(spec) = &rec.speculation else {
        return;
    };
    match &spec.state {
        SpeculationState::Running => {
            shared.pool.cancel_running(&rec.id);
        }
        SpeculationState::Done { seconds, .. } => {
            remove_output(shared, &rec.id);
            speculation_ended(SpeculationEnd::Discarded, *seconds);
            tracing::info!(render_id = %rec.id, "speculative render discarded");
        }
        SpeculationState::Failed => {}
    }
}

/// Boot recovery of one node: a speculative render that was running when the process
/// ended is forgotten (its files deleted); the render is a candidate again.
pub(crate) fn forget_interrupted(shared: &Shared, rec: &RenderRecord) -> Result<(), ServiceError> {
    if !matches!(
        rec.speculation.as_ref().map(|s| &s.state),
        Some(SpeculationState::Running)
    ) || rec.state != RenderState::AwaitingApproval
    {
        return Ok(());
    }
    let _ = std::fs::remove_dir_all(shared.media.result_dir(&rec.id));
    shared.ledger.update(&rec.id, |r| {
        if r.state != RenderState::AwaitingApproval
            || !matches!(
                r.speculation.as_ref().map(|s| &s.state),
                Some(SpeculationState::Running)
            )
        {
            return Ok(Change::Keep(()));
        }
        r.speculation = None;
        Ok(Change::Write(()))
    })?;
    speculation_ended(SpeculationEnd::Interrupted, 0.0);
    tracing::info!(render_id = %rec.id, "speculative render interrupted by the last stop; it starts again when a slot is idle");
    Ok(())
}

/// A speculative render the engine finished: its output stored, then parked in the record
/// for approval, or (approved meanwhile) the render's result, or (ended meanwhile) deleted.
pub(crate) fn finish(
    shared: &Shared,
    rec: &RenderRecord,
    plan: &RenderPlan,
    report: &EngineReport,
    started: Instant,
) -> Result<(), ServiceError> {
    record_finished(rec, report);
    let Some(stored) = store_output(shared, rec, plan)? else {
        return Ok(());
    };
    let seconds = started.elapsed().as_secs_f64();
    let now = shared.ledger.now();
    let outcome = success_outcome(rec, plan, report, stored, now);
    let written = update_final(shared, &rec.id, |r| {
        if taken_over(r, rec) {
            return Ok(Change::Keep(None));
        }
        match r.state {
            RenderState::AwaitingApproval => {
                if let Some(spec) = r.speculation.as_mut() {
                    spec.state = SpeculationState::Done {
                        outcome: outcome.clone(),
                        seconds,
                    };
                    return Ok(Change::Write(Some(false)));
                }
                Ok(Change::Keep(None))
            }
            RenderState::Rendering if !r.cancel_requested => {
                mark_succeeded(r, outcome.clone(), now);
                Ok(Change::Write(Some(true)))
            }
            _ => Ok(Change::Keep(None)),
        }
    })?;
    match written.and_then(|u| u.value) {
        Some(true) => {
            speculation_ended(SpeculationEnd::Used, seconds);
            tracing::info!(render_id = %rec.id, "speculative render approved while it ran: it is the result");
        }
        Some(false) => {
            tracing::info!(render_id = %rec.id, seconds = format!("{seconds:.1}"), "speculative render ready; approving publishes it at once");
        }
        None => {
            // Rejected, timed out or cancelled while it was being stored.
            remove_output(shared, &rec.id);
            speculation_ended(SpeculationEnd::Discarded, seconds);
        }
    }
    Ok(())
}

/// Why a speculative render stopped early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// Its slot went to real work.
    Preempted,
    /// Its render ended (rejected, timed out, cancelled) or the server is stopping.
    Ended,
    /// The engine failed.
    Failed,
}

/// A speculative render that stopped before its end (its files already deleted): the
/// record forgets it (a candidate again), or marks it failed; one approved meanwhile is
/// queued to render anew, and one cancelled meanwhile ends cancelled. `true`: it had been
/// approved and the engine failed, so the caller ends the render with that failure.
pub(crate) fn abandon(
    shared: &Shared,
    rec: &RenderRecord,
    stop: Stop,
    started: Instant,
) -> Result<bool, ServiceError> {
    let now = shared.ledger.now();
    let updated = update_final(shared, &rec.id, |r| {
        if taken_over(r, rec) {
            return Ok(Change::Keep(()));
        }
        match r.state {
            RenderState::AwaitingApproval if r.speculation.is_some() => {
                r.speculation = match stop {
                    Stop::Failed => r.speculation.take().map(|mut s| {
                        s.state = SpeculationState::Failed;
                        s
                    }),
                    Stop::Preempted | Stop::Ended => None,
                };
                Ok(Change::Write(()))
            }
            RenderState::Rendering if r.cancel_requested => {
                r.state = RenderState::Cancelled;
                r.finished_at = Some(now);
                Ok(Change::Write(()))
            }
            RenderState::Rendering if stop == Stop::Failed => Ok(Change::Keep(())),
            RenderState::Rendering => {
                r.speculation = None;
                r.state = RenderState::Queued;
                r.progress = None;
                Ok(Change::Write(()))
            }
            _ => Ok(Change::Keep(())),
        }
    })?;
    let record = updated.map(|u| u.record);
    if stop == Stop::Failed
        && let Some(r) = &record
        && r.state == RenderState::Rendering
    {
        speculation_ended(SpeculationEnd::Failed, started.elapsed().as_secs_f64());
        return Ok(true);
    }
    let end = match (&record, stop) {
        (Some(r), _) if r.is_terminal() => SpeculationEnd::Discarded,
        (_, Stop::Failed) => SpeculationEnd::Failed,
        (_, Stop::Preempted) => SpeculationEnd::Preempted,
        (_, Stop::Ended) if shared.pool.stopping() => SpeculationEnd::Interrupted,
        (_, Stop::Ended) => SpeculationEnd::Discarded,
    };
    speculation_ended(end, started.elapsed().as_secs_f64());
    if let Some(r) = record
        && r.state == RenderState::Queued
        && !shared.pool.stopping()
    {
        // Approved just as it stopped: the real render runs anew.
        shared.enqueue(&r.principal, &r.id);
    }
    tracing::info!(render_id = %rec.id, end = end.as_str(), "speculative render stopped");
    Ok(false)
}

/// Deletes a render's result files wherever media lives (the speculative output).
fn remove_output(shared: &Shared, id: &str) {
    // The local scratch copy (with a bucket), then the stored output: in a directory media
    // store the two are one directory, and the second removal finds it gone.
    let _ = std::fs::remove_dir_all(shared.media.result_dir(id));
    if let Err(e) = shared
        .media
        .store
        .remove_dir_blocking(&format!("results/{id}"))
    {
        tracing::warn!(render_id = %id, error = %e, "cannot delete a discarded speculative render; the sweeper will");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::sample;
    use crate::store::{Approval, Decision, Outcome};

    /// An approved render awaiting its decision's effect, with `spec` as its speculation.
    fn approved_with(spec: Option<SpeculationState>, hash: &str) -> RenderRecord {
        let mut r = sample("task_1");
        r.state = RenderState::AwaitingApproval;
        r.outcome = None;
        r.finished_at = None;
        r.approval = Some(Approval {
            decision: Some(Decision {
                approved: true,
                note: None,
                decided_at: 5,
                params_hash: "h".into(),
            }),
            requested_at: 1,
            deadline: 100,
        });
        r.speculation = spec.map(|state| Speculation {
            params_hash: hash.into(),
            started_at: 2,
            state,
        });
        r
    }

    fn success(finished_at: u64) -> Outcome {
        Outcome::Success {
            video_path: "results/task_1/final.webm".into(),
            video_file_name: "final.webm".into(),
            mime_type: "video/webm".into(),
            size_bytes: 10,
            duration_seconds: 1.0,
            width: 3840,
            height: 2160,
            resolution: "4k".into(),
            watermark_applied: true,
            finished_at,
            backend: "cpu".into(),
            frames: 25,
            fps: 12.5,
        }
    }

    #[test]
    fn approval_publishes_a_done_speculation_at_once() {
        let done = SpeculationState::Done {
            outcome: success(3),
            seconds: 2.5,
        };
        let mut r = approved_with(Some(done), "h");
        assert_eq!(
            approve(&mut r, "h", 9),
            Approved::Published { seconds: 2.5 }
        );
        assert_eq!(r.state, RenderState::Succeeded);
        assert_eq!(r.finished_at, Some(9));
        // The result is stamped with the approval's time, and its progress is complete.
        assert_eq!(r.outcome, Some(success(9)));
        assert_eq!(r.progress.as_ref().map(|p| p.frames_done), Some(25));
    }

    #[test]
    fn approval_turns_a_running_speculation_into_the_render() {
        let mut r = approved_with(Some(SpeculationState::Running), "h");
        assert_eq!(approve(&mut r, "h", 9), Approved::Continues);
        assert_eq!(r.state, RenderState::Rendering);
        assert!(r.speculation.is_some(), "its worker still holds it");
    }

    #[test]
    fn approval_queues_without_a_usable_speculation() {
        for (spec, hash) in [
            (None, "h"),
            (Some(SpeculationState::Failed), "h"),
            // Rendered for other watermark parameters: never published.
            (
                Some(SpeculationState::Done {
                    outcome: success(3),
                    seconds: 1.0,
                }),
                "other",
            ),
            (Some(SpeculationState::Running), "other"),
        ] {
            let mut r = approved_with(spec, hash);
            assert_eq!(approve(&mut r, "h", 9), Approved::Queue);
            assert_eq!(r.state, RenderState::Queued);
            assert_eq!(r.speculation, None);
            assert_eq!(r.outcome, None);
        }
    }

    #[test]
    fn only_undecided_awaiting_renders_are_candidates() {
        let mut r = approved_with(None, "h");
        assert!(!r.awaits_speculation(), "decided");
        r.approval.as_mut().unwrap().decision = None;
        assert!(r.awaits_speculation());
        r.speculation = Some(Speculation {
            params_hash: "h".into(),
            started_at: 2,
            state: SpeculationState::Running,
        });
        assert!(r.awaits_speculation(), "running: its lease decides");
        r.speculation.as_mut().unwrap().state = SpeculationState::Failed;
        assert!(!r.awaits_speculation(), "failed: not again");
        r.speculation = None;
        r.cancel_requested = true;
        assert!(!r.awaits_speculation(), "cancelled");
        r.cancel_requested = false;
        r.args.watermark = None;
        assert!(!r.awaits_speculation(), "no watermark, no approval");
    }
}
