//! Every write of a split render's segments (`worker/segments.rs`): created from the render
//! and media's spans, claimed under a lease, their progress, how a claim ends (done, failed,
//! given back), the leases renewed, a node's claims freed at its boot, and the segments
//! removed with their render. Each is one compare-and-swap in the store, the holder's fenced
//! by its claim ([`SegmentRecord::hold`]): one that lost its lease writes nothing. Nothing
//! outside this module changes a segment's record.

use crate::config::SEGMENTS_DIR;
use crate::engine::SegmentSpan;
use crate::shared::Shared;
use crate::store::{RenderRecord, SegmentRecord, StoreError, StoredTally};

type Stored<T> = Result<T, StoreError>;

/// Writes `render`'s segments, one per span, queued (durably), unless it has some: then
/// those, unchanged (a coordinator that took the render over goes on with them).
pub(crate) fn create(
    shared: &Shared,
    render: &RenderRecord,
    spans: Vec<SegmentSpan>,
) -> Stored<Vec<SegmentRecord>> {
    let (now, count) = (shared.ledger.now(), spans.len() as u32);
    let records: Vec<SegmentRecord> = spans
        .into_iter()
        .map(|span| SegmentRecord::new(render, span, count, now))
        .collect();
    shared.ledger.store.create_segments(&render.id, &records)
}

/// Claims a segment for this node under a lease of `lease_ttl`, within the retry budget
/// (`segment_attempts`): of `only_render` when given (its coordinator), else of any render.
pub(crate) fn claim(shared: &Shared, only_render: Option<&str>) -> Stored<Option<SegmentRecord>> {
    let (store, cfg) = (&shared.ledger.store, &shared.config);
    store.claim_segment(
        &shared.pool.node,
        cfg.lease_ttl,
        only_render,
        cfg.segment_attempts,
    )
}

/// Extends this node's leases on the `held` segments by `lease_ttl`; those it still holds.
pub(crate) fn renew(shared: &Shared, held: &[(String, u32)]) -> Stored<Vec<(String, u32)>> {
    let (store, lease) = (&shared.ledger.store, shared.config.lease_ttl);
    store.renew_segment_leases(&shared.pool.node, held, lease)
}

/// The holder's progress (not flushed); false when it lost its claim.
pub(crate) fn progress(shared: &Shared, seg: &SegmentRecord, frames_done: u64) -> Stored<bool> {
    let store = &shared.ledger.store;
    store.segment_progress(seg.hold(), frames_done)
}

/// Done: its file stored as `output`, `frames` rendered, its `quality` when measured
/// (durably); false when its holder lost its claim.
pub(crate) fn finish(
    shared: &Shared,
    seg: &SegmentRecord,
    output: &str,
    frames: u64,
    quality: Option<&StoredTally>,
) -> Stored<bool> {
    let store = &shared.ledger.store;
    let done = store.finish_segment(seg.hold(), output, frames, quality)?;
    if done {
        crate::telemetry::segment_ended("done");
    }
    Ok(done)
}

/// The attempt failed (`reason`): queued again, or failed for good past `segment_attempts`
/// (its render then fails), durably. A write the store refuses leaves the lease to run out.
pub(crate) fn fail(shared: &Shared, seg: &SegmentRecord, reason: &str) {
    tracing::warn!(render_id = %seg.render_id, segment = seg.span.index + 1, attempt = seg.attempts, %reason, "segment failed");
    crate::telemetry::segment_ended("failed");
    let max = shared.config.segment_attempts;
    if let Err(e) = shared.ledger.store.fail_segment(seg.hold(), reason, max) {
        tracing::warn!(render_id = %seg.render_id, error = %e, "cannot record a failed segment; its lease runs out instead");
    }
}

/// This node gives the segment back unfinished, if it still holds it (queued again, attempts
/// kept; durably). A write the store refuses leaves the lease to run out.
pub(crate) fn release(shared: &Shared, seg: &SegmentRecord) {
    crate::telemetry::segment_ended("stopped");
    let store = &shared.ledger.store;
    if let Err(e) = store.release_segment(&shared.pool.node, &seg.render_id, seg.span.index) {
        tracing::warn!(render_id = %seg.render_id, error = %e, "cannot hand a segment back; its lease runs out instead");
    }
}

/// At boot: the segments this node's previous life held are free to claim at once (their
/// finished siblings stay, for their renders to join).
pub(crate) fn release_node(shared: &Shared) -> Stored<()> {
    let n = shared
        .ledger
        .store
        .release_node_segments(&shared.pool.node)?;
    if n > 0 {
        tracing::info!(
            segments = n,
            "segments interrupted by the last stop are free to claim again"
        );
    }
    Ok(())
}

/// Deletes a render's segment files (locally or in the bucket), then their records; whether
/// both went. Files first: records kept on a failure let the sweeper try again.
pub(crate) fn remove(shared: &Shared, id: &str) -> bool {
    let dir = format!("{SEGMENTS_DIR}/{id}");
    if let Err(e) = shared.media.store.remove_dir_blocking(&dir) {
        tracing::warn!(render_id = %id, error = %e, "cannot delete the render's segment files yet");
        return false;
    }
    match shared.ledger.store.delete_segments(id) {
        Ok(n) => {
            if n > 0 {
                tracing::info!(render_id = %id, segments = n, "segments removed");
            }
            true
        }
        Err(e) => {
            tracing::warn!(render_id = %id, error = %e, "cannot delete the render's segments yet");
            false
        }
    }
}
