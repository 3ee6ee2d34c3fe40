//! Recording the metric series about a render record (names and labels: the table in
//! `telemetry.rs`): its transitions and, when a worker finishes it, its timings.

use std::time::Duration;

use metrics::{counter, histogram};

use crate::catalog::ErrorCode;
use crate::store::{Figures, Outcome, RenderRecord, RenderState};

/// A stored render moved from `before` to `after.state` (called once per transition, by the
/// node that wrote it).
pub fn render_transition(before: RenderState, after: &RenderRecord, now_ms: u64) {
    if before == after.state {
        return;
    }
    if before == RenderState::AwaitingApproval
        && let Some(approval) = &after.approval
    {
        let outcome = match (&approval.decision, after.state) {
            (Some(d), _) if d.approved => "approved",
            (Some(_), _) => "rejected",
            (None, RenderState::Cancelled) => "cancelled",
            (None, _) => "timeout",
        };
        let waited = now_ms.saturating_sub(approval.requested_at) as f64 / 1000.0;
        histogram!("vidforge_approval_wait_seconds", "outcome" => outcome).record(waited);
    }
    if !before.is_terminal() && after.state.is_terminal() {
        let outcome = match &after.outcome {
            Some(Outcome::Success { .. }) => "succeeded",
            Some(Outcome::Error { code, .. }) => code_label(*code),
            None => "cancelled",
        };
        counter!(
            "vidforge_renders_finished_total",
            "state" => after.state.as_str(),
            "outcome" => outcome
        )
        .increment(1);
    }
}

fn code_label(code: ErrorCode) -> &'static str {
    code.as_str()
}

/// A render finished: its wall time, rate and per-stage busy time.
pub fn render_finished(
    rec: &RenderRecord,
    backend: &str,
    elapsed: Duration,
    fps: f64,
    stages: [(&'static str, Duration); 3],
) {
    let labels = [
        ("resolution", rec.args.resolution.as_str().to_string()),
        ("format", rec.args.output_format.as_str().to_string()),
        ("backend", backend.to_string()),
    ];
    histogram!("vidforge_render_duration_seconds", &labels).record(elapsed.as_secs_f64());
    if fps.is_finite() {
        histogram!("vidforge_render_fps", &labels).record(fps);
    }
    for (stage, busy) in stages {
        histogram!("vidforge_stage_busy_seconds", "stage" => stage).record(busy.as_secs_f64());
    }
}

/// A measured render's quality: its PSNR (all planes), over the whole and its worst second.
pub fn render_quality(rec: &RenderRecord, quality: &Figures) {
    let format = rec.args.output_format.as_str();
    for (window, db) in [
        ("whole", quality.psnr_db),
        ("worst_second", quality.worst.psnr_db),
    ] {
        histogram!("vidforge_render_psnr_db", "window" => window, "format" => format).record(db);
    }
}
