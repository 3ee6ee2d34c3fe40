//! The seam between the service and the render engine.
//!
//! The worker pool talks to a [`Renderer`] and asset ingestion to a [`Prober`]; production
//! wires both to `vidforge-media` (`media_backend::MediaRenderer`, `media_backend::MediaProber`).
//! Keeping the seam narrow lets the scheduling, approval and recovery logic be tested without
//! encoding video.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use crate::store::AssetProbe;
pub use vidforge_media::SourceLimits;

/// The encoder settings of a [`RenderPlan`]: the media crate's own type.
pub use vidforge_media::EncoderSettings as PlanEncoder;
/// Failure classes the service maps to error codes: the media crate's own type.
/// `SourceNotFound` → `source_not_found`; `UnsupportedCodec` and `InvalidInput` →
/// `unsupported_codec`; `RenderFailed` → `render_failed` (temporary); `Cancelled`: the cancel
/// flag was observed.
pub use vidforge_media::ErrorKind as FailureKind;
/// What a [`RenderPlan`] does with an HDR source: the media crate's own type.
pub use vidforge_media::HdrPolicy;
/// A progress report from the engine: the media crate's own type.
pub use vidforge_media::Progress as EngineProgress;
/// One render job (input and output paths, resolution, format, watermark, encoder settings):
/// the media crate's own type, so the production renderer hands it over as it is.
pub use vidforge_media::RenderJob as RenderPlan;
/// What a finished render produced: the media crate's own type.
pub use vidforge_media::RenderReport as EngineReport;
/// What a rendered segment produced (its frames, and its quality when measured): the media
/// crate's own type.
pub use vidforge_media::SegmentReport as EngineSegmentReport;
/// The watermark of a [`RenderPlan`]: the media crate's own type.
pub use vidforge_media::WatermarkSpec as PlanWatermark;
/// A render's quality measurements (the whole, each segment's): the media crate's own types.
pub use vidforge_media::{QualityReport, SegmentQuality};
/// One segment of a source (a span of its frames, cut at a keyframe), one rendered for the
/// join (its file and its span), and how a source is cut: the media crate's own types.
pub use vidforge_media::{SegmentFile, SegmentPlanOptions, SegmentSpan};

/// An engine failure with its class and a human-readable reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct EngineError {
    pub kind: FailureKind,
    pub message: String,
}

impl EngineError {
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        EngineError {
            kind,
            message: message.into(),
        }
    }
}

/// What the render engine found and uses on this host (the capability summary, `serve`'s
/// banner and `/healthz` report it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HardwareInfo {
    /// The compositor: `cpu` or the GPU adapter's name.
    pub compositor: String,
    /// `software`, `nvdec` (codecs NVDEC supports decode on the GPU, each frame downloaded) or
    /// `nvdec-zero-copy` (their frames stay on the GPU for the compositor).
    pub decoder: String,
    /// The H.264 encoder of mp4/mov (`libx264` or `h264_nvenc`).
    pub h264_encoder: String,
    /// Why each was chosen, a sentence each (the banner and the logs).
    pub why: Vec<String>,
}

/// Renders videos and previews. Implementations block; the worker pool calls them from
/// dedicated threads.
pub trait Renderer: Send + Sync {
    /// Human-readable backend (adapter) name for logs.
    fn backend_name(&self) -> String;

    /// The hardware in use. By default: the backend, software decoding, libx264.
    fn hardware(&self) -> HardwareInfo {
        HardwareInfo {
            compositor: self.backend_name(),
            decoder: "software".into(),
            h264_encoder: "libx264".into(),
            why: Vec::new(),
        }
    }

    /// Renders `plan` to `plan.output`, reporting progress and checking `cancel` per frame.
    fn render(
        &self,
        plan: &RenderPlan,
        progress: &mut dyn FnMut(EngineProgress),
        cancel: &AtomicBool,
    ) -> Result<EngineReport, EngineError>;

    /// Composes one representative frame of `plan` at output size into a PNG at `png_out`,
    /// and a copy sized for a chat view at `view_out`; returns the full PNG's size.
    fn render_preview(
        &self,
        plan: &RenderPlan,
        png_out: &Path,
        view_out: &Path,
    ) -> Result<(u32, u32), EngineError>;

    /// The segments `plan` could be rendered in, cut as `options` say
    /// ([`crate::config::Config::segment_plan`]): at the source's keyframes near every target
    /// length; one span when the source is too short or cannot be cut. By default one span:
    /// every render runs in one pass.
    fn plan_segments(
        &self,
        plan: &RenderPlan,
        options: &SegmentPlanOptions,
    ) -> Result<Vec<SegmentSpan>, EngineError> {
        let _ = (plan, options);
        Ok(Vec::new())
    }

    /// Renders the video of one segment of `plan` into `out` (no audio); returns its
    /// frames and, when `plan` measures it, its quality. Progress and `cancel` as
    /// [`Renderer::render`].
    fn render_segment(
        &self,
        plan: &RenderPlan,
        span: &SegmentSpan,
        out: &Path,
        progress: &mut dyn FnMut(EngineProgress),
        cancel: &AtomicBool,
    ) -> Result<EngineSegmentReport, EngineError> {
        let _ = (plan, span, out, progress, cancel);
        Err(EngineError::new(
            FailureKind::RenderFailed,
            "this engine renders in one pass only",
        ))
    }

    /// Joins the rendered segments, in order, into `plan.output`: the video remuxed, the
    /// audio of the source encoded once over the whole duration; each segment checked
    /// against its span.
    fn join_segments(
        &self,
        plan: &RenderPlan,
        segments: &[SegmentFile],
        progress: &mut dyn FnMut(EngineProgress),
        cancel: &AtomicBool,
    ) -> Result<EngineReport, EngineError> {
        let _ = (plan, segments, progress, cancel);
        Err(EngineError::new(
            FailureKind::RenderFailed,
            "this engine renders in one pass only",
        ))
    }
}

/// Inspects uploaded video files.
pub trait Prober: Send + Sync {
    /// Probes a video file; an error means it is not a usable video (pictures over `limits`
    /// included, refused without being decoded).
    fn probe_video(&self, path: &Path, limits: &SourceLimits) -> Result<AssetProbe, EngineError>;
}
