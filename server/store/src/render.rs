//! Renders, the records the store keeps (arguments, state, progress, approval, outcome,
//! speculation), and the idempotency entries that name them. Plain data with serde;
//! persistence is [`crate::Store`].

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::by_name;
use crate::catalog::ErrorCode;

/// The engine's vocabulary: one type per concept across the crates. Stored (and named on the
/// wire) by their canonical names (`mp4`, `720p`, `bottom_right`, ...), see [`crate::by_name`].
pub use vidforge_media::{DynamicRange, HdrPolicy, OutputFormat, Position, Resolution};

/// Watermark arguments, defaults applied (`position` bottom_right, `opacity` 1.0).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WatermarkArgs {
    /// Asset id (`a_…`) of a PNG image asset.
    pub image_asset: String,
    /// Where the watermark sits; stored by its wire name (`bottom_right`, ...).
    #[serde(with = "by_name")]
    pub position: Position,
    /// Within `vidforge_core::args::OPACITY`.
    pub opacity: f64,
}

/// The typed arguments of one render (the MCP front parses them from `vidforge_render_video`'s
/// arguments; `vidforge_core::args::ValidateArgs` holds the domain's rules).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RenderArgs {
    /// Asset id (`a_…`) of the source video.
    pub source_asset: String,
    #[serde(with = "by_name")]
    pub output_format: OutputFormat,
    #[serde(with = "by_name")]
    pub resolution: Resolution,
    pub watermark: Option<WatermarkArgs>,
    pub idempotency_key: Option<String>,
    /// Whether to measure the output's quality; `None`: the node's `quality_report` decides.
    /// Not part of the idempotency hash: it does not change the video.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality_report: Option<bool>,
}

/// Where a render is. Terminal: `Succeeded`, `Failed`, `Cancelled`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RenderState {
    /// Durably created, waiting for a worker.
    Queued,
    /// A worker is producing the final video.
    Rendering,
    /// A worker is composing the watermark preview frame.
    Previewing,
    /// Preview written; waiting for a human decision until `approval.deadline`.
    AwaitingApproval,
    /// `outcome` is `Outcome::Success`.
    Succeeded,
    /// `outcome` is `Outcome::Error` (tool-level failure: rejected watermark, timeout, codec…).
    Failed,
    /// Cancelled on request.
    Cancelled,
}

// Storage names (`awaiting_approval`, ...).
vidforge_names::enum_names!(RenderState {
    Queued => "queued",
    Rendering => "rendering",
    Previewing => "previewing",
    AwaitingApproval => "awaiting_approval",
    Succeeded => "succeeded",
    Failed => "failed",
    Cancelled => "cancelled",
});

impl RenderState {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RenderState::Succeeded | RenderState::Failed | RenderState::Cancelled
        )
    }

    /// Holds (or waits for) a worker: counts against the global queue capacity.
    pub fn uses_worker(self) -> bool {
        matches!(
            self,
            RenderState::Queued | RenderState::Rendering | RenderState::Previewing
        )
    }

    /// The state as clients read it, in error messages, the fallback status tool and the
    /// HTTP routes (`queued | rendering | awaiting_watermark_approval | succeeded | failed |
    /// cancelled`, the contract's render states); previewing reads as rendering.
    pub fn public_name(self) -> &'static str {
        match self {
            RenderState::Queued => "queued",
            RenderState::Rendering | RenderState::Previewing => "rendering",
            RenderState::AwaitingApproval => "awaiting_watermark_approval",
            RenderState::Succeeded => "succeeded",
            RenderState::Failed => "failed",
            RenderState::Cancelled => "cancelled",
        }
    }
}

/// Render stage names in progress snapshots: the engine's [`vidforge_media::Stage`], plus
/// `Previewing` (the watermark preview frame, before the render proper).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProgressStage {
    Preparing,
    Previewing,
    Rendering,
    Finalizing,
}

impl ProgressStage {
    /// The stage as people read it in status messages.
    pub fn label(self) -> &'static str {
        match self {
            ProgressStage::Preparing => "Preparing",
            ProgressStage::Previewing => "Previewing",
            ProgressStage::Rendering => "Rendering",
            ProgressStage::Finalizing => "Finalizing",
        }
    }
}

impl From<vidforge_media::Stage> for ProgressStage {
    fn from(s: vidforge_media::Stage) -> Self {
        match s {
            vidforge_media::Stage::Preparing => ProgressStage::Preparing,
            vidforge_media::Stage::Rendering => ProgressStage::Rendering,
            vidforge_media::Stage::Finalizing => ProgressStage::Finalizing,
        }
    }
}

/// The last published progress of a render (published at most every
/// `catalog::PROGRESS_PUBLISH_INTERVAL`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProgressSnapshot {
    pub stage: ProgressStage,
    pub frames_done: u64,
    pub frames_total: Option<u64>,
    /// 0.0 ..= 100.0 when `frames_total` is known.
    pub percent: Option<f64>,
    /// Frames per second of wall time so far, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fps: Option<f64>,
    /// The compositor of this attempt (`cpu` or the GPU adapter's name), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
}

impl ProgressSnapshot {
    pub fn new(stage: ProgressStage, frames_done: u64, frames_total: Option<u64>) -> Self {
        let percent = frames_total
            .filter(|t| *t > 0)
            .map(|t| (frames_done as f64 / t as f64 * 100.0).clamp(0.0, 100.0));
        ProgressSnapshot {
            stage,
            frames_done,
            frames_total,
            percent,
            fps: None,
            backend: None,
        }
    }

    /// With the measured rate and the compositor that runs the render.
    pub fn with_rate(mut self, fps: f64, backend: impl Into<String>) -> Self {
        self.fps = fps.is_finite().then_some(fps);
        self.backend = Some(backend.into());
        self
    }

    /// Progress as a 0..1 fraction when known.
    pub fn fraction(&self) -> Option<f64> {
        self.percent.map(|p| p / 100.0)
    }
}

/// A recorded watermark decision, bound to the exact watermark parameters it saw.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub approved: bool,
    pub note: Option<String>,
    /// Unix ms.
    pub decided_at: u64,
    /// `vidforge_core::args::watermark_params_hash` of the watermark that was previewed.
    pub params_hash: String,
}

/// The approval gate of a watermarked render.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Approval {
    pub decision: Option<Decision>,
    /// Unix ms when the preview became available.
    pub requested_at: u64,
    /// Unix ms after which an undecided render ends with `watermark_approval_timeout`.
    pub deadline: u64,
}

/// How a render ended (set with the terminal state; `None` for `Cancelled`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Outcome {
    Success {
        /// Absolute path, or the media path in the bucket (see [`crate::AssetRecord::path`]).
        video_path: PathBuf,
        /// `final.<ext>`.
        video_file_name: String,
        mime_type: String,
        size_bytes: u64,
        duration_seconds: f64,
        width: u32,
        height: u32,
        /// Wire name (`1080p`).
        resolution: String,
        watermark_applied: bool,
        /// Unix ms.
        finished_at: u64,
        /// Compositor that ran (`wgpu: NVIDIA H200` / `cpu`).
        backend: String,
        frames: u64,
        fps: f64,
        /// The video's quality against the frames the encoder was given, when measured.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        quality: Option<Box<crate::QualityFigures>>,
    },
    Error {
        #[serde(with = "error_code_serde")]
        code: ErrorCode,
        message: String,
        reason: Option<String>,
        field: Option<String>,
        retry_after_ms: Option<u64>,
        /// Overrides the code's catalog `temporary` (a render that crashed the server
        /// repeatedly is `render_failed` but not worth retrying as is).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        temporary: Option<bool>,
    },
}

mod error_code_serde {
    use super::ErrorCode;
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(c: &ErrorCode, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(c.as_str())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ErrorCode, D::Error> {
        let s = String::deserialize(d)?;
        ErrorCode::from_name(&s).ok_or_else(|| D::Error::custom(format!("unknown error code {s}")))
    }
}

/// One render (= one MCP task). Kept until its result expires plus a tombstone grace period.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RenderRecord {
    /// `task_` + 26 chars; also the MCP `taskId`.
    pub id: String,
    /// Owner; every read re-checks it.
    pub principal: String,
    pub args: RenderArgs,
    /// The literal tool arguments, for `repair.arguments`.
    pub original_arguments: serde_json::Value,
    pub state: RenderState,
    pub progress: Option<ProgressSnapshot>,
    /// Unix ms.
    pub created_at: u64,
    /// Unix ms of the last change (state, progress, decision).
    pub updated_at: u64,
    pub approval: Option<Approval>,
    /// The watermark preview PNG: absolute path, or media path in the bucket.
    pub preview_path: Option<PathBuf>,
    /// The preview's size in pixels (for the approval page, without reading the PNG).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview_size: Option<(u32, u32)>,
    pub outcome: Option<Outcome>,
    /// Durable cancellation intent.
    pub cancel_requested: bool,
    /// Unix ms when the record became terminal.
    #[serde(default)]
    pub finished_at: Option<u64>,
    /// The sweeper deleted the result files; the record is a tombstone.
    #[serde(default)]
    pub result_deleted: bool,
    /// How many times a worker started this render (boot recovery restarts it).
    #[serde(default)]
    pub attempts: u32,
    /// How many of those attempts ended with the server process (found unfinished by boot
    /// recovery); at `Config::max_render_crashes` the render fails instead of restarting.
    #[serde(default)]
    pub crashes: u32,
    /// The render's estimated work at creation: output width × height × frames (source
    /// duration × frame rate). Summed over a principal's recent renders for the render budget;
    /// renders above `Config::long_render_seconds` of it run beside short ones, never ahead of
    /// them. 0 in records written before the estimate existed (counted as nothing).
    #[serde(default)]
    pub estimated_pixel_frames: u64,
    /// The full render made while the person decides (`speculative = auto`): never shown to
    /// a client; approval makes it the result (see `vidforge_core::speculation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculation: Option<Speculation>,
    /// The source's HDR transfer (`pq`, `hlg`) when it has one: the render tone-maps it to
    /// SDR, and its status says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_hdr: Option<String>,
    /// Whether the HDR source stays HDR (the operator's `keep_hdr` names the principal),
    /// decided at creation so that a restart or another node renders it the same. Stored as
    /// the flag `keep_hdr` (absent when tone-mapped).
    #[serde(
        rename = "keep_hdr",
        default,
        with = "keep_hdr_flag",
        skip_serializing_if = "keep_hdr_flag::absent"
    )]
    pub hdr: HdrPolicy,
    /// The render measures its output's quality (the argument, else the creating node's
    /// `quality_report`), decided at creation so that a restart or another node (every
    /// segment of a split render) measures it the same.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub measure_quality: bool,
}

/// A render made ahead of its approval, with exactly the previewed watermark.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Speculation {
    /// `vidforge_core::args::watermark_params_hash` of the watermark it renders.
    pub params_hash: String,
    /// Unix ms when this attempt started.
    pub started_at: u64,
    pub state: SpeculationState,
}

/// Where a speculative render stands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpeculationState {
    /// A worker is rendering it (in a cluster: the holder of the render's lease). Approval
    /// turns it into the real render, which goes on where it is.
    Running,
    /// Its output is stored (`outcome`'s `video_path`) but named by nothing a client can
    /// read; approval makes `outcome` the render's result at once.
    Done {
        outcome: Outcome,
        /// Wall-clock seconds the speculative render took.
        seconds: f64,
    },
    /// It failed: approval queues the render as usual (the failure is the real render's to
    /// report).
    Failed,
}

impl RenderRecord {
    /// A new render `id` of `principal`, queued at `created_at` (Unix ms) with nothing
    /// decided, run or estimated yet: the one way a record is made (the service's create,
    /// the tests' and benchmarks' samples), so a new field has one default.
    pub fn new(
        id: String,
        principal: &str,
        args: RenderArgs,
        original_arguments: serde_json::Value,
        created_at: u64,
    ) -> RenderRecord {
        RenderRecord {
            id,
            principal: principal.to_string(),
            args,
            original_arguments,
            state: RenderState::Queued,
            progress: None,
            created_at,
            updated_at: created_at,
            approval: None,
            preview_path: None,
            preview_size: None,
            outcome: None,
            cancel_requested: false,
            finished_at: None,
            result_deleted: false,
            attempts: 0,
            crashes: 0,
            estimated_pixel_frames: 0,
            speculation: None,
            source_hdr: None,
            hdr: HdrPolicy::ToSdr,
            measure_quality: false,
        }
    }

    pub fn is_terminal(&self) -> bool {
        self.state.is_terminal()
    }

    /// Awaiting a watermark decision, with none recorded, and no speculative render done or
    /// failed: one may be begun, or one is running (by a worker here, or in a cluster by a
    /// node whose lease decides whether it still lives).
    pub fn awaits_speculation(&self) -> bool {
        self.state == RenderState::AwaitingApproval
            && !self.cancel_requested
            && self.decision().is_none()
            && self.args.watermark.is_some()
            && matches!(
                self.speculation.as_ref().map(|s| &s.state),
                None | Some(SpeculationState::Running)
            )
    }

    /// The recorded watermark decision, if any.
    pub fn decision(&self) -> Option<&Decision> {
        self.approval.as_ref().and_then(|a| a.decision.as_ref())
    }

    /// Unix ms when the task handle expires (`created_at + task_ttl`).
    pub fn task_expires_at(&self, task_ttl: std::time::Duration) -> u64 {
        crate::clock::add_ms(self.created_at, task_ttl)
    }

    /// Unix ms the retention of the result and the status counts from: when the render
    /// finished (when it was created, before that). The sweeper's expiry order.
    pub fn retained_since(&self) -> u64 {
        retained_since(self.finished_at, self.created_at)
    }

    /// Unix ms when the result and the status expire: `finished_at + result_ttl` for
    /// terminal renders, `created_at + result_ttl` before that.
    pub fn result_expires_at(&self, result_ttl: std::time::Duration) -> u64 {
        crate::clock::add_ms(self.retained_since(), result_ttl)
    }

    /// `original_arguments` without `idempotency_key`: literally callable to start a new
    /// render with the same intent (for `repair.arguments`).
    pub fn repair_arguments(&self) -> serde_json::Value {
        without_idempotency_key(&self.original_arguments)
    }
}

/// [`RenderRecord::retained_since`] of a record with these times (also what the indexes
/// order finished renders by, `render_index.rs`).
pub(crate) fn retained_since(finished_at: Option<u64>, created_at: u64) -> u64 {
    finished_at.unwrap_or(created_at)
}

/// Render tool arguments without `idempotency_key`: callable as-is to start a new render with
/// the same intent.
pub fn without_idempotency_key(arguments: &serde_json::Value) -> serde_json::Value {
    let mut v = arguments.clone();
    if let Some(obj) = v.as_object_mut() {
        obj.remove("idempotency_key");
    }
    v
}

/// An idempotency key's memory: which render it created and with which arguments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdempotencyEntry {
    pub render_id: String,
    /// Hash of the canonical (defaults-applied) arguments without the key.
    pub args_hash: String,
    /// Unix ms.
    pub created_at: u64,
}

/// A render's [`HdrPolicy`] as its stored flag `keep_hdr`.
mod keep_hdr_flag {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::HdrPolicy;

    pub(super) fn absent(policy: &HdrPolicy) -> bool {
        !policy.keeps()
    }

    pub(super) fn serialize<S: Serializer>(policy: &HdrPolicy, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bool(policy.keeps())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<HdrPolicy, D::Error> {
        bool::deserialize(d).map(HdrPolicy::keeping)
    }
}
