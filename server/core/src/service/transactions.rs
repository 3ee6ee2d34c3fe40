//! The three transactions of [`super::RenderService`], each one blocking step under the
//! shared state's locks: create (validation, idempotency, ownership, quota, the durable write),
//! decide (the watermark approval, bound to the watermark's hash) and cancel.

use serde_json::Value;

use crate::args::{ValidateArgs, canonical_args_hash, watermark_params_hash};
use crate::error::ServiceError;
use crate::ids;
use crate::shared::Shared;
use crate::store::{
    AssetColor, AssetKind, AssetRecord, HdrPolicy, IdempotencyEntry, Inserted, NewKey, RenderArgs,
    RenderRecord, RenderState,
};
use crate::sync::lock;
use crate::telemetry::{SpeculationEnd, speculation_ended};
use crate::transitions::decisions;
use crate::transitions::speculative::Approved;

use super::work::WorkCost;
use super::{CreateOutcome, DecisionOutcome};

pub(super) fn create_blocking(
    shared: &Shared,
    principal: &str,
    args: RenderArgs,
    original_arguments: Value,
) -> Result<CreateOutcome, ServiceError> {
    args.validate()?;
    let args_hash = canonical_args_hash(&args);
    let _guard = lock(&shared.ledger.create_lock);
    let now = shared.ledger.now();

    let stale_before = match key_state(shared, principal, &args, &args_hash, now)? {
        KeyState::Replay(outcome) => return Ok(*outcome),
        KeyState::New { stale_before } => stale_before,
    };
    // A replay above costs nothing; a new render needs room to finish.
    shared.media.disk.check()?;

    let source = check_source(shared, principal, &args)?;
    let source_hdr = source.probe.color.as_ref().and_then(AssetColor::hdr);
    let hdr = match source_hdr {
        Some(_) => shared.config.hdr_policy_for(principal),
        None => HdrPolicy::ToSdr,
    };
    // Bound the work, not the bytes: a tiny upload may declare a long duration, and any
    // source may be asked for at 4k. Kept HDR weighs more (slower 10-bit encoders).
    let cost = WorkCost::of(hdr, args.output_format);
    let (probe, resolution) = (&source.probe, args.resolution);
    let estimate = super::work::check_size(&shared.config, probe, resolution, cost)?;
    check_watermark(shared, principal, &args)?;
    check_capacity(shared, principal)?;
    super::work::check_budget(shared, principal, (probe, resolution, cost), estimate, now)?;

    let mut rec = RenderRecord::new(
        ids::new_render_id(),
        principal,
        args,
        original_arguments,
        now,
    );
    rec.estimated_pixel_frames = estimate;
    rec.source_hdr = source_hdr.map(|d| d.as_str().to_string());
    rec.hdr = hdr;
    rec.measure_quality = rec
        .args
        .quality_report
        .unwrap_or(shared.config.quality_report);
    let key = rec.args.idempotency_key.as_deref().map(|key| NewKey {
        principal,
        key,
        entry: IdempotencyEntry {
            render_id: rec.id.clone(),
            args_hash: args_hash.clone(),
            created_at: now,
        },
        stale_before,
    });
    // Atomic with the key: of concurrent creators with one key (on any node) one writes; the
    // others replay its render.
    if let Inserted::KeyTaken(entry) = shared.ledger.store.insert_render(&rec, key.as_ref())? {
        return replay(shared, principal, &entry, &args_hash)?.ok_or_else(|| {
            ServiceError::Internal("an idempotency key names a missing render".into())
        });
    }
    shared.ledger.store.flush()?;
    start_new(shared, &rec);
    Ok(CreateOutcome {
        record: rec,
        replayed: false,
    })
}

/// What a create's idempotency key (if any) leads to.
enum KeyState {
    /// The key's render, replayed.
    Replay(Box<CreateOutcome>),
    /// A new render; an entry of the key created before `stale_before` is past its TTL.
    New { stale_before: u64 },
}

/// Looks the create's idempotency key up: a live entry replays its render; an entry past
/// its TTL, or one whose render is gone, lets the key start a new one.
fn key_state(
    shared: &Shared,
    principal: &str,
    args: &RenderArgs,
    args_hash: &str,
    now: u64,
) -> Result<KeyState, ServiceError> {
    let ttl_ms = shared.config.idempotency_ttl.as_millis() as u64;
    // An entry created before this is past its TTL: the key starts a new render.
    let mut stale_before = now.saturating_sub(ttl_ms).saturating_add(1);
    if let Some(key) = &args.idempotency_key
        && let Some(entry) = shared.ledger.store.get_idempotency(principal, key)?
        && entry.created_at >= stale_before
    {
        match replay(shared, principal, &entry, args_hash)? {
            Some(outcome) => return Ok(KeyState::Replay(Box::new(outcome))),
            // The render it pointed to is gone: the key starts a new one.
            None => stale_before = u64::MAX,
        }
    }
    Ok(KeyState::New { stale_before })
}

/// The source asset: visible to `principal`, a video, and not longer than
/// `max_source_seconds` (work per render is bounded: a tiny upload may not buy hours of the
/// render slots).
fn check_source(
    shared: &Shared,
    principal: &str,
    args: &RenderArgs,
) -> Result<AssetRecord, ServiceError> {
    let source = shared
        .media
        .assets
        .lookup(principal, &args.source_asset)?
        .ok_or_else(|| ServiceError::SourceNotFound {
            field: "source_asset_uri".into(),
            reason: "no asset with this URI is visible to this credential".into(),
        })?;
    if source.kind != AssetKind::Video {
        return Err(ServiceError::UnsupportedCodec {
            reason: "the source asset is a PNG image, not a video".into(),
        });
    }
    let max_seconds = shared.config.max_source_seconds;
    if let Some(d) = source.probe.duration_seconds
        && d > max_seconds as f64
    {
        return Err(ServiceError::invalid(
            "source_asset_uri",
            format!(
                "the source is {d:.0} s long; this server renders sources of at most {max_seconds} s"
            ),
        ));
    }
    Ok(source)
}

/// The watermark asset, when asked for: visible to `principal` and a PNG image.
fn check_watermark(
    shared: &Shared,
    principal: &str,
    args: &RenderArgs,
) -> Result<(), ServiceError> {
    let Some(w) = &args.watermark else {
        return Ok(());
    };
    let image = shared
        .media
        .assets
        .lookup(principal, &w.image_asset)?
        .ok_or_else(|| ServiceError::SourceNotFound {
            field: "watermark.image_asset_uri".into(),
            reason: "no asset with this URI is visible to this credential".into(),
        })?;
    if image.kind != AssetKind::Image {
        return Err(ServiceError::invalid(
            "watermark.image_asset_uri",
            "the watermark asset is a video, not a PNG image",
        ));
    }
    Ok(())
}

/// Room for one more render: the principal's concurrent renders, then the queue (a
/// cluster's shared queue, or this node's slots plus queue).
fn check_capacity(shared: &Shared, principal: &str) -> Result<(), ServiceError> {
    let active = lock(&shared.ledger.active);
    let limit = shared.config.per_principal_concurrent;
    let mine = active.values().filter(|a| a.principal == principal).count();
    if mine >= limit {
        return Err(ServiceError::quota(format!(
            "this credential has {mine} renders in progress (limit {limit})"
        )));
    }
    if shared.ledger.store.is_shared() {
        // A cluster's running renders are bounded by its nodes' slots; what is bounded
        // here is the shared queue (the index holds every node's renders).
        let capacity = shared.config.queue_capacity;
        let waiting = active
            .values()
            .filter(|a| a.state == RenderState::Queued)
            .count();
        if waiting >= capacity {
            return Err(ServiceError::quota(format!(
                "the cluster's queue is full ({waiting} renders wait for a worker)"
            )));
        }
    } else {
        let capacity = shared.config.render_slots + shared.config.queue_capacity;
        let busy = active.values().filter(|a| a.state.uses_worker()).count();
        if busy >= capacity {
            return Err(ServiceError::quota(format!(
                "all render slots and the queue are full ({busy} renders)"
            )));
        }
    }
    Ok(())
}

/// A durably created render: counted, indexed, queued, announced.
fn start_new(shared: &Shared, rec: &RenderRecord) {
    crate::telemetry::render_created();
    shared.ledger.index(rec);
    shared.enqueue(&rec.principal, &rec.id);
    shared.ledger.notify(&rec.id);
    tracing::info!(
        render_id = %rec.id,
        principal = %rec.principal,
        format = rec.args.output_format.as_str(),
        resolution = rec.args.resolution.as_str(),
        watermark = rec.args.watermark.is_some(),
        estimated_pixel_frames = rec.estimated_pixel_frames,
        "render created"
    );
}

/// The render an idempotency entry names, as a replay: `IdempotencyConflict` when the key
/// was used with other arguments, `None` when that render is gone.
fn replay(
    shared: &Shared,
    principal: &str,
    entry: &IdempotencyEntry,
    args_hash: &str,
) -> Result<Option<CreateOutcome>, ServiceError> {
    if entry.args_hash != args_hash {
        return Err(ServiceError::IdempotencyConflict);
    }
    Ok(shared
        .ledger
        .store
        .get_render(&entry.render_id)?
        .filter(|rec| rec.principal == principal)
        .map(|record| CreateOutcome {
            record,
            replayed: true,
        }))
}

pub(super) fn decide_blocking(
    shared: &Shared,
    principal: &str,
    id: &str,
    approved: bool,
    note: Option<String>,
) -> Result<DecisionOutcome, ServiceError> {
    let rec = shared.ledger.load_owned(principal, id)?;
    let Some(watermark) = rec.args.watermark.clone() else {
        return Err(ServiceError::ApprovalNotPending { state: rec.state });
    };
    let params_hash = watermark_params_hash(&watermark);
    let note = note.as_deref().and_then(crate::args::clean_note);
    let updated = decisions::decide(shared, id, approved, note.as_deref(), &params_hash)?;
    if updated.written {
        tracing::info!(render_id = %id, approved, "watermark decision recorded");
        match updated.value {
            _ if !approved => crate::transitions::speculative::discard(shared, &updated.record),
            Approved::Queue => shared.enqueue(&updated.record.principal, id),
            Approved::Continues => {
                tracing::info!(render_id = %id, "the speculative render goes on as the render");
            }
            Approved::Published { seconds } => {
                speculation_ended(SpeculationEnd::Used, seconds);
                tracing::info!(render_id = %id, "approved: the speculative render is the result");
            }
        }
    }
    Ok(DecisionOutcome {
        already_recorded_same: !updated.written,
        record: updated.record,
    })
}

pub(super) fn cancel_blocking(
    shared: &Shared,
    principal: &str,
    id: &str,
) -> Result<RenderRecord, ServiceError> {
    shared.ledger.load_owned(principal, id)?;
    let updated = decisions::request_cancel(shared, id)?;
    if updated.written {
        shared.pool.cancel_running(id);
        if updated.record.is_terminal() {
            crate::transitions::speculative::discard(shared, &updated.record);
        }
        tracing::info!(render_id = %id, state = updated.record.state.as_str(), "cancel requested");
    }
    Ok(updated.record)
}
