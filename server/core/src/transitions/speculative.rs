//! Speculative rendering's transitions (the worker's `speculation` says when and why): the
//! claim, the parked output, the stop, the forgotten attempt after a crash, and what
//! approving does with a speculation.

use crate::args::watermark_params_hash;
use crate::error::ServiceError;
use crate::shared::Shared;
use crate::store::{Change, Outcome, RenderRecord, RenderState, Speculation, SpeculationState};
use crate::telemetry::{SpeculationEnd, speculation_ended};

use super::{
    Written, mark_cancelled, mark_succeeded, taken_over, write, write_durable, write_final,
};

/// Marks `id` as being rendered speculatively by this worker (durably, counting an
/// attempt). The record as claimed, or `None` when it is no longer a candidate.
pub(crate) fn claim(shared: &Shared, id: &str) -> Result<Option<RenderRecord>, ServiceError> {
    let now = shared.ledger.now();
    let clustered = shared.ledger.store.is_shared();
    let claimed = write_durable(&shared.ledger, id, |r| {
        let stale_running = clustered && is_running(r);
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

/// Whether `r` has a speculative render running.
pub(crate) fn is_running(r: &RenderRecord) -> bool {
    matches!(
        r.speculation.as_ref().map(|s| &s.state),
        Some(SpeculationState::Running)
    )
}

/// Boot recovery: the speculation that was running when the process ended is forgotten
/// (the render is a candidate again).
pub(crate) fn forget(shared: &Shared, id: &str) -> Result<Written<()>, ServiceError> {
    write(&shared.ledger, id, |r| {
        if r.state != RenderState::AwaitingApproval || !is_running(r) {
            return Ok(Change::Keep(()));
        }
        r.speculation = None;
        Ok(Change::Write(()))
    })
}

/// A finished speculative render whose output is stored (`outcome`, after `seconds`): parked
/// in the record for approval (`Some(false)`), or (approved meanwhile) the render's result
/// (`Some(true)`); `None` when the render ended meanwhile or was taken over.
pub(crate) fn park(
    shared: &Shared,
    claimed: &RenderRecord,
    outcome: &Outcome,
    seconds: f64,
) -> Result<Option<bool>, ServiceError> {
    let now = shared.ledger.now();
    let written = write_final(&shared.ledger, &shared.pool, &claimed.id, |r| {
        if taken_over(r, claimed) {
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
    Ok(written.and_then(|u| u.value))
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

/// A speculative render that stopped before its end: the record forgets it (a candidate
/// again), or marks it failed; one approved meanwhile is queued to render anew (or kept
/// rendering, when the engine failed: the caller ends it with that failure), and one
/// cancelled meanwhile ends cancelled.
pub(crate) fn abandon(
    shared: &Shared,
    claimed: &RenderRecord,
    stop: Stop,
) -> Result<Written<()>, ServiceError> {
    let now = shared.ledger.now();
    write_final(&shared.ledger, &shared.pool, &claimed.id, |r| {
        if taken_over(r, claimed) {
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
                mark_cancelled(r, now);
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
    })
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
pub(super) fn approve(r: &mut RenderRecord, params_hash: &str, now: u64) -> Approved {
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

/// Deletes a render's result files wherever media lives (the speculative output).
pub(crate) fn remove_output(shared: &Shared, id: &str) {
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
    use crate::store::{Approval, Decision};

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
            quality: None,
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
