//! How a step of a render ends: its output stored, the outcome it ends with (succeeded,
//! cancelled, failed, or handed back on shutdown) written through `crate::transitions::run`,
//! its metrics and log line.

use std::path::PathBuf;

use crate::catalog::ErrorCode;
use crate::engine::{EngineError, EngineReport, FailureKind, RenderPlan};
use crate::error::ServiceError;
use crate::shared::Shared;
use crate::store::{Outcome, QualityFigures, RenderRecord};

/// A finished render: its output stored, its outcome written (unless it ended meanwhile or
/// was taken over), its metrics recorded.
pub(crate) fn finish_succeeded(
    shared: &Shared,
    rec: &RenderRecord,
    plan: &RenderPlan,
    report: &EngineReport,
) -> Result<(), ServiceError> {
    let Some(stored) = store_output(shared, rec, plan)? else {
        return Ok(());
    };
    let outcome = success_outcome(rec, plan, report, stored, shared.ledger.now());
    crate::transitions::run::succeeded(shared, rec, &outcome)?;
    record_finished(rec, report, &outcome);
    Ok(())
}

/// The render's output made durable where media lives (uploaded, with retries, when that
/// is a bucket) before any record names it. `None`: it could not be, and the render ended
/// as the media store's failure says.
pub(crate) fn store_output(
    shared: &Shared,
    rec: &RenderRecord,
    plan: &RenderPlan,
) -> Result<Option<PathBuf>, ServiceError> {
    let stop = || shared.pool.stopping();
    match shared.media.store.publish_blocking(&plan.output, &stop) {
        Ok(stored) => Ok(Some(stored)),
        Err(e) => {
            if let Some(dir) = plan.output.parent() {
                let _ = std::fs::remove_dir_all(dir);
            }
            finish_media_error(shared, rec, &e)?;
            Ok(None)
        }
    }
}

/// The `Success` outcome of a render whose output is stored at `stored`.
pub(crate) fn success_outcome(
    rec: &RenderRecord,
    plan: &RenderPlan,
    report: &EngineReport,
    stored: PathBuf,
    now: u64,
) -> Outcome {
    Outcome::Success {
        video_path: stored,
        video_file_name: crate::uri::final_file_name(rec.args.output_format),
        mime_type: rec.args.output_format.mime_type().to_string(),
        // The engine's stat of the finished file (the local copy may be gone: uploaded).
        size_bytes: report.size_bytes,
        duration_seconds: report.duration_seconds,
        width: report.width,
        height: report.height,
        resolution: rec.args.resolution.as_str().to_string(),
        watermark_applied: plan.watermark.is_some(),
        finished_at: now,
        backend: report.backend.clone(),
        frames: report.frames,
        fps: report.fps,
        quality: report
            .quality
            .as_ref()
            .and_then(QualityFigures::of)
            .map(Box::new),
    }
}

/// The metrics and the log lines of a render the engine finished, whose output is stored
/// (its quality figures are the outcome's, worked out once by [`success_outcome`]).
pub(crate) fn record_finished(rec: &RenderRecord, report: &EngineReport, outcome: &Outcome) {
    if let Outcome::Success {
        quality: Some(q), ..
    } = outcome
    {
        crate::render_metrics::render_quality(rec, &q.whole);
        tracing::info!(render_id = %rec.id, frames_measured = q.whole.frames_measured, "quality: {}", q.whole.line());
    }
    crate::render_metrics::render_finished(
        rec,
        &report.backend,
        report.elapsed,
        report.fps,
        [
            ("decode", report.stage_times.decode),
            ("compose", report.stage_times.compose),
            ("encode", report.stage_times.encode),
        ],
    );
    tracing::info!(
        render_id = %rec.id,
        backend = %report.backend,
        width = report.width,
        height = report.height,
        frames = report.frames,
        size_bytes = report.size_bytes,
        fps = format!("{:.1}", report.fps),
        elapsed_ms = report.elapsed.as_millis() as u64,
        "render finished"
    );
}

/// A render stopped by its cancel flag on this node: a shutdown hands it back durably (so
/// boot recovery does not count a crash); a user's cancel ends it as cancelled.
pub(crate) fn finish_stopped(shared: &Shared, rec: &RenderRecord) -> Result<(), ServiceError> {
    let id = rec.id.as_str();
    let user_cancel = shared
        .ledger
        .store
        .get_render(id)?
        .is_some_and(|r| r.cancel_requested);
    if shared.pool.stopping() && !user_cancel {
        // Handed back durably, so boot recovery does not count a crash.
        crate::transitions::run::handed_back(shared, rec)?;
        tracing::info!(render_id = %id, "render interrupted by shutdown; it resumes on the next start");
        return Ok(());
    }
    finish_cancelled(shared, rec)
}

pub(crate) fn finish_cancelled(shared: &Shared, rec: &RenderRecord) -> Result<(), ServiceError> {
    crate::transitions::run::cancelled(shared, rec)?;
    tracing::info!(render_id = %rec.id, "render cancelled");
    Ok(())
}

/// The terminal outcome for an engine failure.
pub fn failure_outcome(e: &EngineError) -> Outcome {
    let (code, message) = match e.kind {
        FailureKind::SourceNotFound => (
            ErrorCode::SourceNotFound,
            "The source asset could not be read.",
        ),
        FailureKind::UnsupportedCodec | FailureKind::InvalidInput => (
            ErrorCode::UnsupportedCodec,
            "The source asset's codec cannot be rendered.",
        ),
        // The disk filled up under the render (FFmpeg reports ENOSPC as text).
        FailureKind::RenderFailed if e.message.contains("No space left on device") => (
            ErrorCode::StorageFull,
            "The server's disk filled up during the render; nothing was kept. Retry later.",
        ),
        FailureKind::RenderFailed | FailureKind::Cancelled => (
            ErrorCode::RenderFailed,
            "The renderer failed; re-calling starts a new render.",
        ),
    };
    Outcome::Error {
        code,
        message: message.to_string(),
        reason: Some(e.message.clone()),
        field: match code {
            ErrorCode::SourceNotFound | ErrorCode::UnsupportedCodec => {
                Some("source_asset_uri".into())
            }
            _ => None,
        },
        retry_after_ms: (code == ErrorCode::StorageFull)
            .then_some(crate::catalog::STORAGE_RETRY_AFTER.as_millis() as u64),
        temporary: None,
    }
}

/// A render ended because the media store failed it: its inputs could not be fetched or its
/// output could not be stored, after the retries. An unreachable bucket is
/// `service_unavailable` (temporary, with `retry_after_ms`); anything else `render_failed`.
pub(crate) fn finish_media_error(
    shared: &Shared,
    rec: &RenderRecord,
    e: &ServiceError,
) -> Result<(), ServiceError> {
    if shared.pool.stopping() {
        // Handed back: the next start (or another node) runs it again.
        return finish_stopped(shared, rec);
    }
    let outcome = match e {
        ServiceError::MediaUnavailable { .. } => Outcome::Error {
            code: ErrorCode::ServiceUnavailable,
            message: "The media store could not be reached, so the render's media could not \
                      be stored; nothing was kept. Retry later."
                .into(),
            reason: e.reason(),
            field: None,
            retry_after_ms: Some(crate::error::STORE_RETRY_AFTER_MS),
            temporary: None,
        },
        other => failure_outcome(&EngineError::new(
            FailureKind::RenderFailed,
            other.to_string(),
        )),
    };
    write_failed(shared, rec, outcome)?;
    tracing::warn!(render_id = %rec.id, error = %e, detail = e.internal_detail().unwrap_or_default(), "render failed: media store");
    Ok(())
}

/// Ends the render `Failed` with `outcome` (unless it ended meanwhile or was taken over).
fn write_failed(shared: &Shared, rec: &RenderRecord, outcome: Outcome) -> Result<(), ServiceError> {
    crate::transitions::run::failed(shared, rec, &outcome)?;
    Ok(())
}

pub(crate) fn finish_error(
    shared: &Shared,
    rec: &RenderRecord,
    e: &EngineError,
) -> Result<(), ServiceError> {
    write_failed(shared, rec, failure_outcome(e))?;
    tracing::warn!(render_id = %rec.id, kind = ?e.kind, error = %e, "render failed");
    Ok(())
}
