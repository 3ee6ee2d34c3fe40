//! Boot recovery, the approval-deadline timer and the sweeper.
//!
//! The store is the truth: at start every non-terminal render is resumed (queued, running and
//! previewing renders restart from the beginning, since they are deterministic from their
//! arguments; awaiting renders keep their stored deadline). Every `tick_interval` undecided
//! approvals past their deadline end with `watermark_approval_timeout`; every `sweep_interval`
//! expired results, tombstones and idempotency keys are deleted. All times come from the
//! injected clock.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::catalog::human_duration;
use crate::clock::add_ms;
use crate::error::ServiceError;
use crate::shared::Shared;
use crate::store::{RenderRecord, RenderState};
use crate::sync::lock;
use crate::telemetry::{SpeculationEnd, speculation_ended};
use crate::transitions;

/// What one sweep removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Renders whose result and preview files were deleted (record kept as a tombstone).
    pub results_deleted: usize,
    /// Tombstones deleted after their grace period.
    pub records_deleted: usize,
    /// Idempotency keys past their TTL.
    pub idempotency_deleted: usize,
    /// Result/preview directories with no record.
    pub orphans_deleted: usize,
    /// Records the extra sweep steps ([`crate::shared::Sweeper`]) removed.
    pub extension_records_deleted: usize,
    /// Assets past their TTL that no unfinished render uses.
    pub assets_deleted: usize,
    /// Watermark previews of renders that ended without a result.
    pub previews_deleted: usize,
    /// Renders whose segments (records and files) were removed after the render ended
    /// without its coordinator removing them.
    pub segments_deleted: usize,
    /// Delivered and dropped webhook events past [`crate::webhook::FINISHED_RETENTION`].
    pub webhook_events_deleted: usize,
}

/// Directories younger than this are never treated as orphans (an upload or a render may be
/// about to record them).
const ORPHAN_MIN_AGE: Duration = Duration::from_secs(3600);

pub(crate) fn recover(shared: &Shared) -> Result<(), ServiceError> {
    if shared.ledger.store.is_shared() {
        return recover_node(shared);
    }
    let mut records = shared.ledger.store.renders()?;
    records.sort_by_key(|r| r.created_at);
    let mut requeue = Vec::new();
    let mut awaiting = 0usize;
    for rec in records.into_iter().filter(|r| !r.is_terminal()) {
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
    release_segments(shared)?;
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
    sweep(shared)?;
    Ok(())
}

/// At start this node renders no segment yet: those its previous life held are free to
/// claim at once (their finished siblings stay, for their renders to join).
fn release_segments(shared: &Shared) -> Result<(), ServiceError> {
    let released = shared
        .ledger
        .store
        .release_node_segments(&shared.pool.node)?;
    if released > 0 {
        tracing::info!(
            segments = released,
            "segments interrupted by the last stop are free to claim again"
        );
    }
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
    release_segments(shared)?;
    tracing::info!(
        node = %shared.pool.node,
        unfinished = unfinished.len(),
        released_leases = released,
        "node joined the cluster"
    );
    expire_due_approvals(shared)?;
    sweep(shared)?;
    Ok(())
}

pub(crate) fn spawn_maintenance(shared: &Arc<Shared>) -> Result<JoinHandle<()>, ServiceError> {
    let shared = shared.clone();
    std::thread::Builder::new()
        .name("vidforge-maintenance".into())
        .spawn(move || {
            let mut last_sweep = Instant::now();
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
                if last_sweep.elapsed() >= shared.config.sweep_interval {
                    last_sweep = Instant::now();
                    match sweep(&shared) {
                        Ok(r) if r != SweepReport::default() => {
                            tracing::info!(?r, "sweep removed expired data")
                        }
                        Ok(_) => {}
                        Err(e) => tracing::error!(error = %e, "sweep failed"),
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

/// Result and preview directories no record points at: the record is gone (a crash between
/// deleting the files and the record), or it ended without them (an upload that timed out
/// here but landed in the bucket later); and multipart uploads a killed node left and never
/// came back to abort.
fn remove_orphan_media(shared: &Shared) -> Result<usize, ServiceError> {
    let mut removed = 0;
    for root in ["results", "previews", "segments"] {
        for (name, _) in shared.media.store.list_dirs_blocking(root)? {
            let unclaimed = match shared.ledger.store.get_render(&name)? {
                None => true,
                Some(r) if !r.is_terminal() => false,
                Some(_) if root == "segments" => true,
                Some(r) if root == "results" => {
                    r.state != RenderState::Succeeded || r.result_deleted
                }
                Some(r) => r.preview_path.is_none(),
            };
            if unclaimed
                && shared
                    .media
                    .store
                    .remove_dir_blocking(&format!("{root}/{name}"))
                    .is_ok()
            {
                removed += 1;
            }
        }
    }
    Ok(removed + shared.media.store.abort_orphan_uploads_blocking(false)?)
}

/// Removes the segments of renders that ended (or are gone) while nobody coordinated them:
/// rejected, timed out or cancelled while no worker ran them, or whose coordinator died.
fn sweep_segments(shared: &Shared) -> Result<usize, ServiceError> {
    let mut removed = 0;
    for id in shared.ledger.store.segmented_renders()? {
        let ended = shared
            .ledger
            .store
            .get_render(&id)?
            .is_none_or(|r| r.is_terminal());
        if ended && crate::worker::segments::remove(shared, &id) {
            removed += 1;
        }
    }
    Ok(removed)
}

/// Deletes a render's result and preview wherever media lives; false if any stays (the next
/// sweep tries again).
fn remove_files(shared: &Shared, id: &str) -> bool {
    let mut all = true;
    for dir in [format!("results/{id}"), format!("previews/{id}")] {
        if let Err(e) = shared.media.store.remove_dir_blocking(&dir) {
            tracing::warn!(%dir, error = %e, "cannot delete expired files");
            all = false;
        }
    }
    all
}

pub(crate) fn sweep(shared: &Shared) -> Result<SweepReport, ServiceError> {
    let now = shared.ledger.now();
    let cfg = &shared.config;
    let mut report = SweepReport::default();
    let records = shared.ledger.store.renders()?;
    for rec in records.iter().filter(|r| r.is_terminal()) {
        let expires = rec.result_expires_at(cfg.result_ttl);
        if now >= add_ms(expires, cfg.tombstone_grace) {
            if !remove_files(shared, &rec.id) {
                continue;
            }
            shared.ledger.store.delete_render(&rec.id)?;
            report.records_deleted += 1;
        } else if now >= expires && !rec.result_deleted {
            if !remove_files(shared, &rec.id) {
                continue;
            }
            transitions::upkeep::result_deleted(shared, &rec.id)?;
            report.results_deleted += 1;
        }
    }
    // Previews only serve the approval: once a render ended without a result (rejected,
    // timed out, cancelled, failed), its preview goes.
    for rec in records.iter().filter(|r| {
        matches!(r.state, RenderState::Failed | RenderState::Cancelled) && r.preview_path.is_some()
    }) {
        let dir = format!("previews/{}", rec.id);
        if let Err(e) = shared.media.store.remove_dir_blocking(&dir) {
            tracing::warn!(%dir, error = %e, "cannot delete a preview");
            continue;
        }
        transitions::upkeep::preview_deleted(shared, &rec.id)?;
        report.previews_deleted += 1;
    }
    report.segments_deleted = sweep_segments(shared)?;
    // Serialised with render creation: no render starts using an asset being deleted.
    let creating = lock(&shared.ledger.create_lock);
    let in_use = shared.ledger.assets_in_use()?;
    for asset in shared.ledger.store.assets()? {
        if now >= add_ms(asset.created_at, cfg.asset_ttl) && !in_use.contains_key(&asset.id) {
            shared.media.assets.remove(&asset)?;
            report.assets_deleted += 1;
        }
    }
    drop(creating);
    match shared.media.assets.remove_orphans(ORPHAN_MIN_AGE) {
        Ok(n) => report.orphans_deleted += n,
        Err(e) => tracing::warn!(error = %e, "orphaned assets not swept"),
    }
    let cutoff = now.saturating_sub(cfg.idempotency_ttl.as_millis() as u64);
    report.idempotency_deleted = shared.ledger.store.remove_idempotency_before(cutoff)?;
    let cutoff = now.saturating_sub(crate::webhook::FINISHED_RETENTION.as_millis() as u64);
    report.webhook_events_deleted = shared
        .ledger
        .store
        .remove_finished_webhooks_before(cutoff)?;
    for sweeper in lock(&shared.ledger.sweepers).iter() {
        report.extension_records_deleted += sweeper()?;
    }

    match remove_orphan_media(shared) {
        Ok(n) => report.orphans_deleted += n,
        // A bucket that cannot be reached: the next sweep tries again.
        Err(e) => tracing::warn!(error = %e, "orphaned media not swept"),
    }
    if report != SweepReport::default() {
        shared.ledger.store.flush()?;
    }
    Ok(report)
}
