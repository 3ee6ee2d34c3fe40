//! What the pages show of a render, read once from its record: plain data the templates in
//! `pages.rs` lay out.

use std::path::Path;

use crate::envelope::Envelope;
use vidforge_core::clock::rfc3339;
use vidforge_core::store::{Outcome, RenderRecord, RenderState, SpeculationState};
use vidforge_core::uri;

/// One render as the dashboard and the approval page show it.
#[derive(Clone, Debug)]
pub struct RenderView {
    pub id: String,
    pub principal: String,
    /// The contract's state name (`awaiting_watermark_approval`, ...).
    pub state: &'static str,
    pub terminal: bool,
    pub created_at: String,
    /// Unix ms of the last change (the dashboard redraws a row when it moves).
    pub updated_ms: u64,
    pub resolution: &'static str,
    pub format: &'static str,
    pub watermark: Option<WatermarkView>,
    pub progress: Option<ProgressView>,
    pub approval: Option<ApprovalView>,
    /// Path of the approval page (watermarked renders).
    pub approval_path: Option<String>,
    /// Path of the preview image, once written.
    pub preview_path: Option<String>,
    /// The preview's pixel size, read from its PNG header: only where a page shows the
    /// preview ([`RenderView::with_preview_size`]), not for every row of a list.
    pub preview_size: Option<(u32, u32)>,
    pub result: Option<ResultView>,
    pub error: Option<ErrorView>,
    /// While it awaits a decision: how far its speculative render is (the approval page tells
    /// the person how soon approving gives them the video).
    pub ahead: Option<Ahead>,
}

/// A speculative render of an awaiting render.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ahead {
    /// Being rendered with the previewed settings.
    Rendering,
    /// Rendered: approving publishes it at once.
    Ready,
}

#[derive(Clone, Debug)]
pub struct WatermarkView {
    pub position: String,
    pub opacity: f64,
}

#[derive(Clone, Debug)]
pub struct ProgressView {
    pub stage: &'static str,
    pub percent: Option<f64>,
    pub frames_done: u64,
    pub frames_total: Option<u64>,
    pub fps: Option<f64>,
    pub backend: Option<String>,
}

#[derive(Clone, Debug)]
pub struct ApprovalView {
    /// Unix ms.
    pub deadline_ms: u64,
    pub decision: Option<DecisionView>,
}

#[derive(Clone, Debug)]
pub struct DecisionView {
    pub approved: bool,
    pub note: Option<String>,
    pub decided_at: String,
}

#[derive(Clone, Debug)]
pub struct ResultView {
    pub download_path: String,
    pub size_bytes: u64,
    pub duration_seconds: f64,
    pub width: u32,
    pub height: u32,
    pub backend: String,
    pub fps: f64,
    /// How faithful the video is, in one line (`PSNR 43.2 dB, worst 39.8 dB at 00:07, SSIM
    /// 0.987`), when the render measured it.
    pub quality: Option<String>,
}

#[derive(Clone, Debug)]
pub struct ErrorView {
    pub code: String,
    pub message: String,
    /// The envelope's repair, as people read it.
    pub repair: Option<String>,
}

impl RenderView {
    pub fn of(rec: &RenderRecord) -> RenderView {
        RenderView {
            id: rec.id.clone(),
            principal: rec.principal.clone(),
            state: rec.state.public_name(),
            terminal: rec.is_terminal(),
            created_at: rfc3339(rec.created_at),
            updated_ms: rec.updated_at,
            resolution: rec.args.resolution.as_str(),
            format: rec.args.output_format.as_str(),
            watermark: rec.args.watermark.as_ref().map(|w| WatermarkView {
                position: w.position.as_str().to_string(),
                opacity: w.opacity,
            }),
            progress: rec.progress.as_ref().map(|p| ProgressView {
                stage: p.stage.label(),
                percent: p.percent,
                frames_done: p.frames_done,
                frames_total: p.frames_total,
                fps: p.fps,
                backend: p.backend.clone(),
            }),
            approval: rec.approval.as_ref().map(|a| ApprovalView {
                deadline_ms: a.deadline,
                decision: a.decision.as_ref().map(|d| DecisionView {
                    approved: d.approved,
                    note: d.note.clone(),
                    decided_at: rfc3339(d.decided_at),
                }),
            }),
            approval_path: rec
                .args
                .watermark
                .is_some()
                .then(|| uri::approval_path(&rec.id)),
            preview_path: rec
                .preview_path
                .as_ref()
                .map(|_| uri::preview_http_path(&rec.id)),
            preview_size: None,
            ahead: match rec.speculation.as_ref().map(|s| &s.state) {
                _ if rec.state != RenderState::AwaitingApproval => None,
                Some(SpeculationState::Running) => Some(Ahead::Rendering),
                Some(SpeculationState::Done { .. }) => Some(Ahead::Ready),
                _ => None,
            },
            result: match &rec.outcome {
                Some(Outcome::Success {
                    size_bytes,
                    duration_seconds,
                    width,
                    height,
                    backend,
                    fps,
                    quality,
                    ..
                }) if !rec.result_deleted => Some(ResultView {
                    // The path alone: the pages work at whatever base URL they are served.
                    download_path: uri::download_url("", &rec.id, rec.args.output_format),
                    size_bytes: *size_bytes,
                    duration_seconds: *duration_seconds,
                    width: *width,
                    height: *height,
                    backend: backend.clone(),
                    fps: *fps,
                    quality: quality.as_ref().map(|q| q.whole.line()),
                }),
                _ => None,
            },
            error: Envelope::from_record(rec).map(|env| ErrorView {
                code: env.code.as_str().to_string(),
                message: env.message.clone(),
                repair: env.repair.as_ref().map(|r| match &r.alternative {
                    Some(alt) => alt.clone(),
                    None => format!("Next: call {} again.", r.tool),
                }),
            }),
        }
    }

    /// With the preview's size read from its file (`None`, and no preview shown, when the
    /// file is gone).
    pub fn with_preview_size(mut self, rec: &RenderRecord) -> RenderView {
        // Recorded with the preview; older records have only the (local) file.
        self.preview_size = rec
            .preview_size
            .or_else(|| rec.preview_path.as_deref().and_then(png_size));
        if self.preview_size.is_none() {
            self.preview_path = None;
        }
        self
    }

    /// True while a human decision is awaited.
    pub fn awaiting(&self) -> bool {
        self.state == RenderState::AwaitingApproval.public_name()
    }

    /// A one-line account of where the render is.
    pub fn summary(&self, now_ms: u64) -> String {
        if let Some(e) = &self.error {
            return format!("Failed: {} ({})", e.message, e.code);
        }
        match self.state {
            "queued" => "Queued; starts when a worker is free.".into(),
            "awaiting_watermark_approval" => match &self.approval {
                Some(a) => format!(
                    "Waiting for a decision on the watermark; {} left.",
                    time_left(a.deadline_ms, now_ms)
                ),
                None => "Waiting for a decision on the watermark.".into(),
            },
            "rendering" => match &self.progress {
                Some(p) => match (p.percent, p.frames_total) {
                    (Some(pct), Some(total)) => {
                        format!("{}: {pct:.0}% (frame {}/{total})", p.stage, p.frames_done)
                    }
                    _ => format!("{}: frame {}", p.stage, p.frames_done),
                },
                None => "Starting.".into(),
            },
            "succeeded" => match &self.result {
                Some(r) => format!(
                    "Done: {}x{}, {:.1} s, {}.",
                    r.width,
                    r.height,
                    r.duration_seconds,
                    human_bytes(r.size_bytes)
                ),
                None => "Done; the result is no longer kept.".into(),
            },
            "cancelled" => "Cancelled.".into(),
            other => other.to_string(),
        }
    }
}

/// `12 min 5 s` until `deadline_ms` (or `none`).
pub fn time_left(deadline_ms: u64, now_ms: u64) -> String {
    let left = deadline_ms.saturating_sub(now_ms) / 1000;
    if left == 0 {
        return "no time".into();
    }
    let (m, s) = (left / 60, left % 60);
    if m > 0 {
        format!("{m} min {s} s")
    } else {
        format!("{s} s")
    }
}

/// `1.4 MB`, `930 kB`, `12 bytes`.
pub fn human_bytes(n: u64) -> String {
    match n {
        0..1_000 => format!("{n} bytes"),
        1_000..1_000_000 => format!("{:.0} kB", n as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} MB", n as f64 / 1e6),
        _ => format!("{:.2} GB", n as f64 / 1e9),
    }
}

/// Width and height from a PNG's header (the preview the pages show at its real size).
pub fn png_size(path: &Path) -> Option<(u32, u32)> {
    let file = std::fs::File::open(path).ok()?;
    let reader = png::Decoder::new(std::io::BufReader::new(file))
        .read_info()
        .ok()?;
    let info = reader.info();
    Some((info.width, info.height))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readable_amounts() {
        assert_eq!(time_left(10_000 + 125_000, 10_000), "2 min 5 s");
        assert_eq!(time_left(5, 10), "no time");
        assert_eq!(human_bytes(999), "999 bytes");
        assert_eq!(human_bytes(1_400_000), "1.4 MB");
    }
}

/// One webhook event as the admins' dashboard lists it (the last attempts per principal).
#[derive(Clone, Debug)]
pub struct HookView {
    pub id: String,
    pub principal: String,
    pub kind: &'static str,
    pub render_id: String,
    /// `pending`, `delivered` or `dropped`.
    pub status: &'static str,
    pub attempts: u32,
    /// The last attempt: when, and its outcome (`204`, `503`, `timeout`, ...).
    pub last: Option<(String, String)>,
    /// When the next attempt is due (pending events).
    pub next_at: Option<String>,
}

impl HookView {
    /// The newest events, at most `per_principal` of each principal, newest first.
    pub fn list(
        events: &[vidforge_core::store::OutboxEvent],
        per_principal: usize,
    ) -> Vec<HookView> {
        let mut shown = std::collections::HashMap::<&str, usize>::new();
        events
            .iter()
            .filter(|e| {
                let n = shown.entry(e.principal.as_str()).or_default();
                *n += 1;
                *n <= per_principal
            })
            .map(|e| HookView {
                id: e.id.clone(),
                principal: e.principal.clone(),
                kind: e.kind.as_str(),
                render_id: e.render.id.clone(),
                status: e.status.as_str(),
                attempts: e.attempts,
                last: e.last_attempts.last().map(|a| (rfc3339(a.at), a.outcome())),
                next_at: (e.status == vidforge_core::store::OutboxStatus::Pending)
                    .then(|| rfc3339(e.next_attempt_at)),
            })
            .collect()
    }
}
