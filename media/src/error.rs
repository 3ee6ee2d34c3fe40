//! Typed errors of the media engine.

use std::path::{Path, PathBuf};

/// The broad class of a [`MediaError`], stable for callers that map errors to wire codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The input (or watermark) file does not exist or cannot be read.
    SourceNotFound,
    /// No usable video: an unknown/undecodable codec, an audio-only file, a still image, text.
    UnsupportedCodec,
    /// Corrupt, truncated or empty media, absurd dimensions, a bad watermark or bad parameters.
    InvalidInput,
    /// The engine itself failed: encoder, muxer, GPU or filesystem fault.
    RenderFailed,
    /// The caller's cancellation flag was set.
    Cancelled,
}

vidforge_names::enum_names!(ErrorKind {
    SourceNotFound => "source_not_found",
    UnsupportedCodec => "unsupported_codec",
    InvalidInput => "invalid_input",
    RenderFailed => "render_failed",
    Cancelled => "cancelled",
});

/// Everything the media engine can fail with. Messages are complete sentences fragments meant
/// for people: they name the file, codec or stage involved.
#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    #[error("{what} not found or unreadable: {path}: {reason}")]
    SourceNotFound {
        what: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error("unsupported input: {reason}")]
    UnsupportedCodec { reason: String },
    #[error("invalid input: {reason}")]
    InvalidInput { reason: String },
    #[error("render failed: {reason}")]
    RenderFailed { reason: String },
    #[error("render cancelled")]
    Cancelled,
    /// A forced hardware choice (`--hwdecode cuda`, `--encoder nvenc`, `--backend wgpu`) that
    /// this machine cannot have: reported when the engine starts.
    #[error("{reason}")]
    HardwareUnavailable { reason: String },
}

impl MediaError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            MediaError::SourceNotFound { .. } => ErrorKind::SourceNotFound,
            MediaError::UnsupportedCodec { .. } => ErrorKind::UnsupportedCodec,
            MediaError::InvalidInput { .. } => ErrorKind::InvalidInput,
            MediaError::RenderFailed { .. } => ErrorKind::RenderFailed,
            MediaError::Cancelled => ErrorKind::Cancelled,
            MediaError::HardwareUnavailable { .. } => ErrorKind::RenderFailed,
        }
    }

    pub(crate) fn not_found(what: &'static str, path: &Path, reason: impl ToString) -> Self {
        MediaError::SourceNotFound {
            what,
            path: path.to_path_buf(),
            reason: reason.to_string(),
        }
    }

    pub(crate) fn unsupported(reason: impl Into<String>) -> Self {
        MediaError::UnsupportedCodec {
            reason: reason.into(),
        }
    }

    pub(crate) fn invalid(reason: impl Into<String>) -> Self {
        MediaError::InvalidInput {
            reason: reason.into(),
        }
    }

    pub(crate) fn failed(reason: impl Into<String>) -> Self {
        MediaError::RenderFailed {
            reason: reason.into(),
        }
    }

    /// An FFmpeg call failed while rendering; `context` says which one.
    pub(crate) fn ffmpeg(context: &str, err: ffmpeg_next::Error) -> Self {
        MediaError::failed(format!("{context}: {err}"))
    }
}

impl From<vidforge_gpu::GpuError> for MediaError {
    fn from(e: vidforge_gpu::GpuError) -> Self {
        MediaError::failed(format!("GPU compositor: {e}"))
    }
}
