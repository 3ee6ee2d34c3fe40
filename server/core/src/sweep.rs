//! The sweeper: what has expired goes. Finished renders are found through the store's
//! expiry-ordered indexes ([`Store::expired_renders`](crate::store::Store::expired_renders)),
//! in batches of [`BATCH`] records, each made durable before the next is read; so a sweep
//! costs what has expired, never what is kept, holds one batch in memory, and stops between
//! two batches when the service stops. Then segments, assets (also by an expiry index),
//! idempotency keys, finished webhook events and the extensions' own records. All times come
//! from the injected clock. Run by the maintenance thread: on its first round (after boot, not
//! during it), then every `sweep_interval`.
//!
//! Orphaned media (directories no record names) is looked for at the cost of what may have
//! left it. A failed upload to a bucket (a request that timed out may still land) is known
//! where it fails: every sweep checks those directories for an hour. Segment scratch lives
//! only while its render runs, so every sweep lists it. A crash that left results, previews or
//! assets is not known: finding them means listing every directory kept, a week of them on a
//! busy host, so that walk runs with the first sweep after boot (when a crash may have left
//! some) and then once every [`ORPHAN_SCAN_INTERVAL`], not with every sweep.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::config::SEGMENTS_DIR;
use crate::error::ServiceError;
use crate::shared::Shared;
use crate::store::{AssetRecord, RenderRecord, Retained, StoreError};
use crate::sync::lock;
use crate::transitions;

/// Records a sweep reads (and holds) at a time.
pub(crate) const BATCH: usize = 256;

/// Directories younger than this are never treated as orphans (an upload or a render may be
/// about to record them).
const ORPHAN_MIN_AGE: Duration = Duration::from_secs(3600);

/// How often the maintenance thread's sweeps also walk the media for orphans (besides the
/// first sweep after boot).
pub(crate) const ORPHAN_SCAN_INTERVAL: Duration = Duration::from_secs(6 * 3600);

/// How long every sweep keeps checking the directory of an upload that failed (for what a
/// request that timed out may still leave in the bucket).
const SUSPECT_WINDOW: Duration = Duration::from_secs(3600);

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

/// One sweep; with `orphans`, the walk of the media for orphans too.
pub(crate) fn sweep(shared: &Shared, orphans: bool) -> Result<SweepReport, ServiceError> {
    let started = Instant::now();
    let now = shared.ledger.now();
    let cfg = &shared.config;
    let mut report = SweepReport::default();
    sweep_renders(shared, now, &mut report)?;
    report.segments_deleted = sweep_segments(shared)?;
    report.assets_deleted = sweep_assets(shared, now)?;
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
    // Cheap, so every sweep: what failed uploads may have left; segment scratch no render
    // claims (a segment's worker leaves it when the render ends elsewhere; the tree holds only
    // the segments in flight); multipart uploads a killed node never came back to abort.
    match remove_suspected_orphans(shared)
        .and_then(|()| remove_orphan_media(shared, &[SEGMENTS_DIR]))
        .and_then(|n| Ok(n + shared.media.store.abort_orphan_uploads_blocking(false)?))
    {
        Ok(n) => report.orphans_deleted += n,
        Err(e) => tracing::warn!(error = %e, "failed uploads' leftovers not swept"),
    }
    if orphans {
        match shared.media.assets.remove_orphans(ORPHAN_MIN_AGE) {
            Ok(n) => report.orphans_deleted += n,
            Err(e) => tracing::warn!(error = %e, "orphaned assets not swept"),
        }
        match remove_orphan_media(shared, &["results", "previews"]) {
            Ok(n) => report.orphans_deleted += n,
            // A bucket that cannot be reached: the next walk tries again.
            Err(e) => tracing::warn!(error = %e, "orphaned media not swept"),
        }
    }
    if report != SweepReport::default() {
        shared.ledger.store.flush()?;
    }
    let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
    if report == SweepReport::default() {
        tracing::debug!(elapsed_ms, "sweep found nothing expired");
    } else {
        tracing::info!(?report, elapsed_ms, "sweep removed expired data");
    }
    Ok(report)
}

/// Finished renders: results past `result_ttl` are deleted (the record stays a tombstone;
/// past the grace too, it goes at once), tombstones past `tombstone_grace` go (a batch's in
/// one write); then the previews of renders that ended without a result.
fn sweep_renders(shared: &Shared, now: u64, report: &mut SweepReport) -> Result<(), ServiceError> {
    let cfg = &shared.config;
    let results_until = now.checked_sub(cfg.result_ttl.as_millis() as u64);
    let records_until =
        results_until.and_then(|t| t.checked_sub(cfg.tombstone_grace.as_millis() as u64));
    if let Some(until) = results_until {
        by_expiry(shared, Retained::Result, until, |batch| {
            let mut gone = Vec::new();
            for rec in batch {
                if rec.result_deleted || !remove_files(shared, &rec.id) {
                    continue;
                }
                if records_until.is_some_and(|t| rec.retained_since() <= t) {
                    gone.push(rec.id.clone());
                } else {
                    transitions::upkeep::result_deleted(shared, &rec.id)?;
                    report.results_deleted += 1;
                }
            }
            delete(shared, &gone, report)
        })?;
    }
    if let Some(until) = records_until {
        by_expiry(shared, Retained::Tombstone, until, |batch| {
            let gone: Vec<String> = batch
                .iter()
                .filter(|r| remove_files(shared, &r.id))
                .map(|r| r.id.clone())
                .collect();
            delete(shared, &gone, report)
        })?;
    }
    // Previews only serve the approval: once a render ended without a result (rejected,
    // timed out, cancelled, failed), its preview goes.
    let store = &shared.ledger.store;
    in_batches(
        shared,
        |last: Option<&RenderRecord>| store.stale_previews(last.map(|r| r.id.as_str()), BATCH),
        |batch| {
            for rec in batch {
                let dir = format!("previews/{}", rec.id);
                if let Err(e) = shared.media.store.remove_dir_blocking(&dir) {
                    tracing::warn!(%dir, error = %e, "cannot delete a preview");
                    continue;
                }
                transitions::upkeep::preview_deleted(shared, &rec.id)?;
                report.previews_deleted += 1;
            }
            Ok(())
        },
    )
}

/// Assets past `asset_ttl` that no unfinished render uses, found through the store's expiry
/// index a batch at a time. Serialised with render creation: no render starts using an asset
/// being deleted.
fn sweep_assets(shared: &Shared, now: u64) -> Result<usize, ServiceError> {
    let Some(until) = now.checked_sub(shared.config.asset_ttl.as_millis() as u64) else {
        return Ok(0);
    };
    let store = &shared.ledger.store;
    let _creating = lock(&shared.ledger.create_lock);
    let in_use = shared.ledger.assets_in_use()?;
    let mut removed = 0;
    in_batches(
        shared,
        |last: Option<&AssetRecord>| {
            store.expired_assets(until, last.map(|a| (a.created_at, a.id.as_str())), BATCH)
        },
        |batch| {
            for asset in batch.iter().filter(|a| !in_use.contains_key(&a.id)) {
                shared.media.assets.remove(asset)?;
                removed += 1;
            }
            Ok(())
        },
    )?;
    Ok(removed)
}

/// Deletes the records `ids` (their files are gone) in one write.
fn delete(shared: &Shared, ids: &[String], report: &mut SweepReport) -> Result<(), ServiceError> {
    if !ids.is_empty() {
        shared.ledger.store.delete_renders(ids)?;
        report.records_deleted += ids.len();
    }
    Ok(())
}

/// [`in_batches`] over the finished renders in `stage` retained since `until` or before.
fn by_expiry(
    shared: &Shared,
    stage: Retained,
    until: u64,
    each: impl FnMut(&[RenderRecord]) -> Result<(), ServiceError>,
) -> Result<(), ServiceError> {
    let store = &shared.ledger.store;
    in_batches(
        shared,
        |last| {
            let after = last.map(|r| (r.retained_since(), r.id.as_str()));
            store.expired_renders(stage, until, after, BATCH)
        },
        each,
    )
}

/// Hands every batch `next` reads (each after the last record of the one before; a short
/// batch is the last) to `each`, then makes its writes durable before reading on. Stops
/// early, between two batches, when the service stops (the next sweep goes on).
fn in_batches<R>(
    shared: &Shared,
    mut next: impl FnMut(Option<&R>) -> Result<Vec<R>, StoreError>,
    mut each: impl FnMut(&[R]) -> Result<(), ServiceError>,
) -> Result<(), ServiceError> {
    let mut last: Option<R> = None;
    loop {
        let batch = next(last.as_ref())?;
        if batch.is_empty() {
            return Ok(());
        }
        each(&batch)?;
        shared.ledger.store.flush()?;
        if batch.len() < BATCH || shared.pool.stopping() {
            return Ok(());
        }
        last = batch.into_iter().next_back();
    }
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
        if ended && transitions::segments::remove(shared, &id) {
            removed += 1;
        }
    }
    Ok(removed)
}

/// The directories under `roots` (`results`, `previews`, segments) no record points at: the
/// record is gone (a crash between deleting the files and the record), or it ended without
/// them (an upload that timed out here but landed in the bucket later, a segment's scratch
/// when the render ended elsewhere). Lists every directory under them (for results and
/// previews, everything kept: see the module doc) and reads their records [`BATCH`] at a time.
fn remove_orphan_media(shared: &Shared, roots: &[&str]) -> Result<usize, ServiceError> {
    let mut removed = 0;
    for &root in roots {
        let names: Vec<String> = shared
            .media
            .store
            .list_dirs_blocking(root)?
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        for names in names.chunks(BATCH) {
            let records: HashMap<String, RenderRecord> = shared
                .ledger
                .store
                .renders_named(names)?
                .into_iter()
                .map(|r| (r.id.clone(), r))
                .collect();
            for name in names {
                if unclaimed(root, records.get(name))
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
    }
    Ok(removed)
}

/// Whether the render directory `root/name` (`results`, `previews`, segments) is named by no
/// record (`rec`, the render `name`'s, if it exists) and no unfinished render may still write it.
fn unclaimed(root: &str, rec: Option<&RenderRecord>) -> bool {
    match rec {
        None => true,
        Some(r) if !r.is_terminal() => false,
        Some(_) if root == SEGMENTS_DIR => true,
        Some(r) if root == "results" => {
            r.state != crate::store::RenderState::Succeeded || r.result_deleted
        }
        Some(r) => r.preview_path.is_none(),
    }
}

/// The directories of uploads that failed within [`SUSPECT_WINDOW`] (a request that timed out
/// may land in the bucket later, unnamed), each removed while no record names it: every
/// sweep, at the cost of what failed, not of what is kept.
fn remove_suspected_orphans(shared: &Shared) -> Result<(), ServiceError> {
    let store = &shared.ledger.store;
    for dir in shared.media.store.upload_suspects(SUSPECT_WINDOW) {
        let Some((root, name)) = dir.split_once('/') else {
            continue;
        };
        let gone = match root {
            "assets" => store.get_asset(name)?.is_none(),
            _ => unclaimed(root, store.get_render(name)?.as_ref()),
        };
        if gone {
            shared.media.store.remove_dir_blocking(&dir)?;
        }
    }
    Ok(())
}
