//! Segment-parallel rendering (`fanout = auto`): a render whose source is longer than
//! `segment_min_duration`, started while another slot is free (on this node; in a cluster,
//! any node's, by their heartbeats), is cut at its source's keyframes into segments of about
//! `segment_seconds`.
//!
//! - **Work items.** The segments are written to the store, durably, before any is rendered
//!   (`transitions/segments.rs`, where every write of theirs is). Idle workers anywhere claim them under a lease
//!   ([`super::segment_work`]); the render's own worker, the coordinator, renders its own
//!   render's segments too, so a busy farm still finishes it.
//! - **Join.** When every segment is done the coordinator joins them: the video remuxed
//!   (each segment is a closed GOP from an IDR, encoded with the same settings), the audio
//!   of the source encoded once over the whole duration, so no seam can click or gap.
//! - **One render.** Clients see one render whose progress counts every segment's frames;
//!   work estimates and budgets count the render once.
//! - **Failures.** A segment that fails is retried on its own. A split that cannot be
//!   finished (a segment failed `segment_attempts` times) or joined (a segment does not start
//!   where its span does, or holds other frames) is given up: its segments go and the render
//!   runs in one pass, which decides its outcome, so whether a render was split never decides
//!   whether it succeeds. A coordinator that dies leaves the segments in the store: whoever
//!   takes the render over (another node, or this one after a restart) goes on with them, and
//!   a speculative render that gave its slot up leaves its finished segments for the approved
//!   render to join.
//! - **Cleanup.** The segments' files (`segments/<id>/`, locally or in the bucket) and
//!   records go when the render ends, whatever its outcome; the sweeper removes those of
//!   renders that ended while nobody coordinated them.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::segment_work::{self, Outcome};
use crate::config::Fanout;
use crate::engine::{
    EngineError, EngineProgress, EngineReport, FailureKind, QualityReport, RenderPlan, SegmentFile,
    SegmentQuality,
};
use crate::shared::Shared;
use crate::store::{RenderRecord, SegmentRecord, SegmentState, StoreError};
use crate::transitions::segments as record;

/// How often a coordinator with nothing to render looks at its segments.
const POLL: Duration = Duration::from_millis(100);

/// Renders `plan`: split into segments when the render qualifies (or was split before),
/// else in one pass. Progress and `cancel` as [`crate::engine::Renderer::render`].
pub(super) fn render(
    shared: &Shared,
    rec: &RenderRecord,
    plan: &RenderPlan,
    progress: &mut dyn FnMut(EngineProgress),
    cancel: &AtomicBool,
) -> Result<EngineReport, EngineError> {
    let Some(segments) = split(shared, rec, plan)? else {
        return shared.renderer.render(plan, progress, cancel);
    };
    let result = coordinate(shared, rec, plan, segments, progress, cancel);
    let ended = match &result {
        Err(e) if e.kind == FailureKind::Cancelled => render_ended(shared, &rec.id),
        // Done (the output is written), or failed: given up for one pass.
        _ => true,
    };
    if shared.pool.is_lost(&rec.id) || !ended {
        return result;
    }
    record::remove(shared, &rec.id);
    let stopped = shared.pool.stopping() || cancel.load(Ordering::SeqCst);
    match result {
        Err(e) if e.kind != FailureKind::Cancelled && !stopped => {
            tracing::warn!(render_id = %rec.id, error = %e, "the split render cannot be finished; rendering it in one pass");
            crate::telemetry::split_given_up();
            shared.renderer.render(plan, progress, cancel)
        }
        result => result,
    }
}

/// The render's segments: those stored before (a takeover, or a speculative render's
/// work), or a new split when fan-out is on and a slot is free (decided here) and the engine
/// cuts the source in two or more (long enough and cuttable, by
/// [`crate::config::Config::segment_plan`]); `None`: one pass.
fn split(
    shared: &Shared,
    rec: &RenderRecord,
    plan: &RenderPlan,
) -> Result<Option<Vec<SegmentRecord>>, EngineError> {
    let store = &shared.ledger.store;
    let stored = store.segments(&rec.id).map_err(store_failed)?;
    if !stored.is_empty() {
        tracing::info!(render_id = %rec.id, segments = stored.len(), "going on with the render's stored segments");
        return Ok(Some(stored));
    }
    let cfg = &shared.config;
    if cfg.fanout == Fanout::Off || !free_slot(shared) {
        return Ok(None);
    }
    let spans = shared.renderer.plan_segments(plan, &cfg.segment_plan())?;
    if spans.len() < 2 {
        return Ok(None);
    }
    let created = record::create(shared, rec, spans).map_err(store_failed)?;
    tracing::info!(render_id = %rec.id, segments = created.len(), "render split into segments");
    crate::telemetry::render_split();
    Ok(Some(created))
}

/// Whether another render slot is free to take segments: a worker waiting for work on this
/// node, or in a cluster on any node (their heartbeats).
fn free_slot(shared: &Shared) -> bool {
    let store = &shared.ledger.store;
    if !store.is_shared() {
        return shared.pool.idle_workers.load(Ordering::SeqCst) >= 1;
    }
    // This node's last heartbeat may still count the slot this render now holds: say first
    // what is idle here now, so a one-slot node never counts itself.
    if let Err(e) = segment_work::report_idle_slots(shared) {
        tracing::warn!(error = %e, "reporting idle slots failed; rendering in one pass");
        return false;
    }
    match store.idle_slots() {
        Ok(n) => n >= 1,
        Err(e) => {
            tracing::warn!(error = %e, "cannot count the farm's idle slots; rendering in one pass");
            false
        }
    }
}

/// Renders this render's segments beside the idle slots until all are done, then joins
/// them into `plan.output`.
fn coordinate(
    shared: &Shared,
    rec: &RenderRecord,
    plan: &RenderPlan,
    first: Vec<SegmentRecord>,
    progress: &mut dyn FnMut(EngineProgress),
    cancel: &AtomicBool,
) -> Result<EngineReport, EngineError> {
    let total: u64 = first.iter().map(|s| s.span.frames).sum();
    let report = |progress: &mut dyn FnMut(EngineProgress), frames_done: u64| {
        progress(EngineProgress {
            stage: vidforge_media::Stage::Rendering,
            frames_done: frames_done.min(total),
            frames_total: Some(total),
        })
    };
    let done = loop {
        if cancel.load(Ordering::SeqCst) {
            return Err(EngineError::new(FailureKind::Cancelled, "cancelled"));
        }
        let segments = shared
            .ledger
            .store
            .segments(&rec.id)
            .map_err(store_failed)?;
        check_segments(&segments)?;
        let frames_done: u64 = segments
            .iter()
            .map(|s| s.frames_done.min(s.span.frames))
            .sum();
        report(progress, frames_done);
        if segments.iter().all(|s| s.state == SegmentState::Done) {
            break segments;
        }
        match record::claim(shared, Some(&rec.id)).map_err(store_failed)? {
            Some(seg) => {
                let others = frames_done.saturating_sub(seg.frames_done.min(seg.span.frames));
                let mut own = |frames: u64| report(progress, others + frames);
                if segment_work::run(shared, plan, &seg, Some(cancel), &mut own) == Outcome::Stopped
                    && cancel.load(Ordering::SeqCst)
                {
                    return Err(EngineError::new(FailureKind::Cancelled, "cancelled"));
                }
            }
            None => std::thread::sleep(POLL),
        }
    };
    join(shared, plan, &done, progress, cancel)
}

/// A render whose segment failed for good fails with it; one whose segments vanished
/// (deleted under it) cannot go on.
fn check_segments(segments: &[SegmentRecord]) -> Result<(), EngineError> {
    if segments.is_empty() {
        return Err(EngineError::new(
            FailureKind::RenderFailed,
            "the render's segments were deleted while it ran",
        ));
    }
    match segments.iter().find(|s| s.state == SegmentState::Failed) {
        Some(s) => Err(EngineError::new(
            FailureKind::RenderFailed,
            format!(
                "segment {} of {} failed after {} attempts: {}",
                s.span.index + 1,
                s.count,
                s.attempts,
                s.error.as_deref().unwrap_or("unknown error")
            ),
        )),
        None => Ok(()),
    }
}

/// Joins the done segments (fetched from the bucket when media lives there).
fn join(
    shared: &Shared,
    plan: &RenderPlan,
    segments: &[SegmentRecord],
    progress: &mut dyn FnMut(EngineProgress),
    cancel: &AtomicBool,
) -> Result<EngineReport, EngineError> {
    let stop = || shared.pool.stopping() || cancel.load(Ordering::SeqCst);
    let files = segments
        .iter()
        .map(|s| {
            let stored = s.output.as_deref().ok_or_else(|| {
                EngineError::new(
                    FailureKind::RenderFailed,
                    format!("segment {} is done but names no file", s.span.index + 1),
                )
            })?;
            let path = shared
                .media
                .store
                .local_copy_blocking(Path::new(stored), &stop)
                .map_err(|e| {
                    EngineError::new(
                        FailureKind::RenderFailed,
                        format!("cannot fetch segment {}: {e}", s.span.index + 1),
                    )
                })?;
            Ok(SegmentFile {
                path,
                span: s.span.clone(),
            })
        })
        .collect::<Result<Vec<SegmentFile>, EngineError>>()?;
    let started = std::time::Instant::now();
    let mut report = shared
        .renderer
        .join_segments(plan, &files, progress, cancel)?;
    if plan.encoder.measure_quality {
        report.quality = merged_quality(segments);
    }
    crate::telemetry::segments_joined(started.elapsed());
    tracing::info!(
        output = %plan.output.display(),
        segments = files.len(),
        join_ms = started.elapsed().as_millis() as u64,
        "segments joined"
    );
    Ok(report)
}

/// The split render's quality: each segment's and their merge, when every segment has one
/// (one whose meter failed leaves the whole unmeasured rather than partly).
fn merged_quality(segments: &[SegmentRecord]) -> Option<QualityReport> {
    let parts: Option<Vec<SegmentQuality>> = segments
        .iter()
        .map(|s| {
            s.quality.as_ref().map(|t| SegmentQuality {
                index: s.span.index,
                start_seconds: s.span.start_seconds,
                end_seconds: s.span.end_seconds,
                tally: t.into(),
            })
        })
        .collect();
    match QualityReport::of_segments(parts?) {
        Ok(whole) => whole,
        Err(e) => {
            tracing::warn!(error = %e, "quality not reported");
            None
        }
    }
}

/// Whether the render ended (or is being cancelled), so its segments are of no more use.
fn render_ended(shared: &Shared, id: &str) -> bool {
    match shared.ledger.store.get_render(id) {
        Ok(Some(r)) => r.is_terminal() || r.cancel_requested,
        Ok(None) => true,
        // Unknown: keep them; the sweeper removes them once the render is seen ended.
        Err(_) => false,
    }
}

fn store_failed(e: StoreError) -> EngineError {
    EngineError::new(
        FailureKind::RenderFailed,
        format!("the store failed during a split render: {e}"),
    )
}
