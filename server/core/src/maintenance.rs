//! Boot recovery, the approval-deadline timer, and the thread that runs them and the sweeper
//! (`sweep.rs`).
//!
//! The store is the truth: at start every non-terminal render is resumed (queued, running and
//! previewing renders restart from the beginning, since they are deterministic from their
//! arguments; awaiting renders keep their stored deadline). They are read from the store's
//! index of unfinished renders, so a boot costs the renders in flight, not the records kept.
//! Every `tick_interval` undecided approvals past their deadline end with
//! `watermark_approval_timeout`; on the thread's first round, then every `sweep_interval`,
//! what has expired is swept (not at boot: a node down for a while starts at once and sweeps
//! its backlog while it serves). All times come from the injected clock.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::catalog::human_duration;
use crate::error::ServiceError;
use crate::shared::Shared;
use crate::store::{RenderRecord, RenderState};
use crate::sync::lock;
use crate::telemetry::{SpeculationEnd, speculation_ended};
use crate::transitions;

pub use crate::sweep::SweepReport;
pub(crate) use crate::sweep::sweep;

pub(crate) fn recover(shared: &Shared) -> Result<(), ServiceError> {
    if shared.ledger.store.is_shared() {
        return recover_node(shared);
    }
    // Oldest first, so the queue keeps its order.
    let records = shared.ledger.store.unfinished_renders()?;
    let mut requeue = Vec::new();
    let mut awaiting = 0usize;
    for rec in records {
        let approved = rec.decision().is_some_and(|d| d.approved);
        let restart = match rec.state {
            RenderState::Queued | RenderState::Rendering | RenderState::Previewing => true,
            RenderState::AwaitingApproval => approved,
            _ => false,
        };
        if !restart {
            awaiting += 1;
            shared.ledger.index(&rec);
            forget_interrupted(shared, &rec)?;
            continue;
        }
        let max_crashes = shared.config.max_render_crashes;
        let updated = transitions::upkeep::restart(shared, &rec.id, approved, max_crashes)?;
        let _ = std::fs::remove_dir_all(shared.media.result_dir(&rec.id));
        if !approved {
            let _ = std::fs::remove_dir_all(shared.media.preview_dir(&rec.id));
        }
        if let Some(u) = updated
            && u.record.state == RenderState::Queued
        {
            requeue.push((u.record.principal, u.record.id));
        }
    }
    transitions::segments::release_node(shared)?;
    shared.ledger.store.flush()?;
    for (principal, id) in &requeue {
        shared.enqueue(principal, id);
    }
    tracing::info!(
        requeued = requeue.len(),
        awaiting_approval = awaiting,
        "boot recovery done"
    );
    expire_due_approvals(shared)?;
    Ok(())
}

/// Boot recovery of one node: a speculative render that was running when the process
/// ended is forgotten (its files deleted); the render is a candidate again.
fn forget_interrupted(shared: &Shared, rec: &RenderRecord) -> Result<(), ServiceError> {
    if !transitions::speculative::is_running(rec) || rec.state != RenderState::AwaitingApproval {
        return Ok(());
    }
    let _ = std::fs::remove_dir_all(shared.media.result_dir(&rec.id));
    transitions::speculative::forget(shared, &rec.id)?;
    speculation_ended(SpeculationEnd::Interrupted, 0.0);
    tracing::info!(render_id = %rec.id, "speculative render interrupted by the last stop; it starts again when a slot is idle");
    Ok(())
}

/// Boot of a cluster node: the store is shared, so renders that look interrupted may be
/// running on other nodes; their leases decide who takes them over ([`crate::cluster`]).
/// This node only builds its index and ends the leases of its previous life, so its
/// interrupted renders are taken over at once rather than when those leases run out.
fn recover_node(shared: &Shared) -> Result<(), ServiceError> {
    let unfinished = shared.ledger.store.unfinished_renders()?;
    for rec in &unfinished {
        shared.ledger.index(rec);
    }
    let released = shared.ledger.store.release_node_leases(&shared.pool.node)?;
    transitions::segments::release_node(shared)?;
    tracing::info!(
        node = %shared.pool.node,
        unfinished = unfinished.len(),
        released_leases = released,
        "node joined the cluster"
    );
    expire_due_approvals(shared)?;
    Ok(())
}

pub(crate) fn spawn_maintenance(shared: &Arc<Shared>) -> Result<JoinHandle<()>, ServiceError> {
    let shared = shared.clone();
    std::thread::Builder::new()
        .name("vidforge-maintenance".into())
        .spawn(move || {
            // The first round sweeps (what expired while the node was down), after boot:
            // a backlog costs the sweep, never the start.
            let mut last_sweep: Option<Instant> = None;
            let mut last_orphan_walk: Option<Instant> = None;
            loop {
                let tick_start = Instant::now();
                while tick_start.elapsed() < shared.config.tick_interval {
                    if shared.pool.stopping() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                if let Err(e) = expire_due_approvals(&shared) {
                    tracing::error!(error = %e, "approval deadline check failed");
                }
                if last_sweep.is_none_or(|t| t.elapsed() >= shared.config.sweep_interval) {
                    last_sweep = Some(Instant::now());
                    let orphans = last_orphan_walk
                        .is_none_or(|t| t.elapsed() >= crate::sweep::ORPHAN_SCAN_INTERVAL);
                    if orphans {
                        last_orphan_walk = last_sweep;
                    }
                    if let Err(e) = sweep(&shared, orphans) {
                        tracing::error!(error = %e, "sweep failed");
                    }
                    // Space may be back (the sweep freed some, or an operator did).
                    let cfg = &shared.config;
                    crate::disk::refill_reserve(
                        &cfg.data_dir,
                        cfg.disk_reserve_bytes,
                        cfg.min_free_bytes,
                    );
                }
            }
        })
        .map_err(ServiceError::from)
}

pub(crate) fn expire_due_approvals(shared: &Shared) -> Result<usize, ServiceError> {
    let now = shared.ledger.now();
    let due: Vec<String> = lock(&shared.ledger.active)
        .iter()
        .filter(|(_, a)| {
            a.state == RenderState::AwaitingApproval && a.deadline.is_some_and(|d| now >= d)
        })
        .map(|(id, _)| id.clone())
        .collect();
    let timeout = human_duration(shared.config.approval_timeout);
    let mut expired = 0;
    for id in due {
        let updated = transitions::decisions::time_out_approval(shared, &id, &timeout)?;
        if let Some(u) = updated
            && u.value
        {
            tracing::info!(render_id = %id, "watermark approval timed out");
            transitions::speculative::discard(shared, &u.record);
            expired += 1;
        }
    }
    Ok(expired)
}
