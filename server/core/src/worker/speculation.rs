//! Speculative rendering (`speculative = auto`): while a watermarked render waits for its
//! approval and a worker would otherwise sit idle, the worker renders it in full with the
//! previewed settings, so that approving it publishes the result at once.
//!
//! - **Claim.** The oldest awaiting render nobody renders yet ([`next_candidate`]: from the
//!   index on one node; in a cluster `Store::claim_speculative`, a lease like any other
//!   claim; `transitions::speculative` writes it). The claim writes `speculation = running` durably and counts an attempt (the
//!   fencing token of every later write).
//! - **Never in the way.** The record stays `awaiting_approval`: it counts against no quota,
//!   and no read path shows anything of it. Its worker gives the slot up as soon as real
//!   work waits ([`work_waiting`]): it is abandoned, its files deleted and its speculation
//!   cleared, to be claimed again when a slot is idle.
//! - **Approve** (`transitions::speculative::approve`): a `done` speculation's outcome becomes the result at once
//!   (succeeded); a `running` one becomes the real render where it is (the record goes
//!   `rendering`, its worker goes on); otherwise the render is queued as usual.
//! - **Reject, timeout, cancel** (`transitions::speculative::discard`): a running attempt's cancel flag is raised (on
//!   another node its change listener does it) and its worker deletes what it wrote; a done
//!   one's output is deleted by whoever ended the render (the sweeper's orphan pass is the
//!   net under both).
//! - **Crash.** Boot recovery clears a `running` speculation of an awaiting render and its
//!   files (`maintenance`); a promoted one is an ordinary interrupted render. In a
//!   cluster a dead node's claim runs out with its lease and another node claims it again.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::finish::{record_finished, store_output, success_outcome};
use crate::config::Speculative;
use crate::engine::{EngineReport, RenderPlan};
use crate::error::ServiceError;
use crate::shared::Shared;
use crate::store::{RenderRecord, RenderState};
use crate::sync::lock;
use crate::telemetry::{SpeculationEnd, speculation_ended};
use crate::transitions::speculative::{self as transitions, Stop};

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

/// A speculative render the engine finished: its output stored, then parked in the record
/// for approval, or (approved meanwhile) the render's result, or (ended meanwhile) deleted.
pub(crate) fn finish(
    shared: &Shared,
    rec: &RenderRecord,
    plan: &RenderPlan,
    report: &EngineReport,
    started: Instant,
) -> Result<(), ServiceError> {
    let Some(stored) = store_output(shared, rec, plan)? else {
        return Ok(());
    };
    let seconds = started.elapsed().as_secs_f64();
    let outcome = success_outcome(rec, plan, report, stored, shared.ledger.now());
    record_finished(rec, report, &outcome);
    let written = transitions::park(shared, rec, &outcome, seconds)?;
    match written {
        Some(true) => {
            speculation_ended(SpeculationEnd::Used, seconds);
            tracing::info!(render_id = %rec.id, "speculative render approved while it ran: it is the result");
        }
        Some(false) => {
            tracing::info!(render_id = %rec.id, seconds = format!("{seconds:.1}"), "speculative render ready; approving publishes it at once");
        }
        None => {
            // Rejected, timed out or cancelled while it was being stored.
            transitions::remove_output(shared, &rec.id);
            speculation_ended(SpeculationEnd::Discarded, seconds);
        }
    }
    Ok(())
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
    let updated = transitions::abandon(shared, rec, stop)?;
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
