//! The seam between the service and the render engine.
//!
//! The worker pool talks to a [`Renderer`] and asset ingestion to a [`Prober`]; production
//! wires both to `vidforge-media` ([`MediaRenderer`], [`MediaProber`]). Keeping the seam narrow
//! lets the scheduling, approval and recovery logic be tested without encoding video.
//!
//! [`MediaRenderer`]: crate::media_backend::MediaRenderer
//! [`MediaProber`]: crate::media_backend::MediaProber

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use crate::store::{AssetProbe, OutputFormat, Resolution};
pub use vidforge_media::SourceLimits;

/// A progress report from the engine: the media crate's own type.
pub use vidforge_media::Progress as EngineProgress;
/// What a finished render produced: the media crate's own type.
pub use vidforge_media::RenderReport as EngineReport;
/// The watermark of a [`RenderPlan`]: the media crate's own type.
pub use vidforge_media::WatermarkSpec as PlanWatermark;

/// One render job in the service's terms.
#[derive(Clone, Debug, PartialEq)]
pub struct RenderPlan {
    pub input: PathBuf,
    /// Final path; the engine writes to a temporary name and renames on success.
    pub output: PathBuf,
    pub resolution: Resolution,
    pub format: OutputFormat,
    pub watermark: Option<PlanWatermark>,
}

/// Failure classes the service maps to error codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// The input file is gone or unreadable → `source_not_found`.
    SourceNotFound,
    /// The codec cannot be decoded → `unsupported_codec`.
    UnsupportedCodec,
    /// The input is not renderable (no video stream, bad dimensions) → `unsupported_codec`.
    InvalidInput,
    /// Engine fault → `render_failed` (temporary).
    RenderFailed,
    /// The cancel flag was observed.
    Cancelled,
}

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
    /// `nvdec` (CUDA device open: codecs NVDEC supports decode on the GPU) or `software`.
    pub decoder: String,
    /// The H.264 encoder of mp4/mov (`libx264` or `h264_nvenc`).
    pub h264_encoder: String,
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
        }
    }

    /// Renders `plan` to `plan.output`, reporting progress and checking `cancel` per frame.
    fn render(
        &self,
        plan: &RenderPlan,
        progress: &mut dyn FnMut(EngineProgress),
        cancel: &AtomicBool,
    ) -> Result<EngineReport, EngineError>;

    /// Composes one representative frame of `plan` at output size into a PNG at `png_out`;
    /// returns its size.
    fn render_preview(&self, plan: &RenderPlan, png_out: &Path) -> Result<(u32, u32), EngineError>;
}

/// Inspects uploaded video files.
pub trait Prober: Send + Sync {
    /// Probes a video file; an error means it is not a usable video (pictures over `limits`
    /// included, refused without being decoded).
    fn probe_video(&self, path: &Path, limits: &SourceLimits) -> Result<AssetProbe, EngineError>;
}
