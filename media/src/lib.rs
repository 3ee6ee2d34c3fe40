//! vidforge's media engine: FFmpeg demux/decode/encode/mux, the CPU compositor, the staged
//! pipeline, probing and previews. Knows nothing of MCP, tasks or JSON.
//!
//! ```no_run
//! use std::sync::atomic::AtomicBool;
//! use vidforge_media::{
//!     BackendChoice, Engine, EncoderSettings, HdrPolicy, OutputFormat, RenderJob, Resolution,
//! };
//! let engine = Engine::new(BackendChoice::Auto)?;
//! let job = RenderJob {
//!     input: "in.mov".into(),
//!     output: "out.mp4".into(),
//!     resolution: Resolution::P720,
//!     format: OutputFormat::Mp4,
//!     watermark: None,
//!     encoder: EncoderSettings::default(),
//!     hdr: HdrPolicy::ToSdr,
//! };
//! let report = engine.render(&job, &mut |p| eprintln!("{p:?}"), &AtomicBool::new(false))?;
//! println!("{} frames at {:.0} fps", report.frames, report.fps);
//! # Ok::<(), vidforge_media::MediaError>(())
//! ```

mod area;
mod audio_out;
mod audio_transcode;
pub mod compose;
mod engine;
mod error;
mod ffutil;
mod hardware;
mod hdr_out;
mod hwdecode;
mod lend;
mod muxer;
mod pipeline;
mod probe;
pub mod quality;
mod scale;
mod segment;
mod source;
pub mod synthetic;
mod tempout;
mod tonemap;
mod types;
mod video_out;
mod watermark;
mod zero_copy;

pub use ffmpeg_next as ffmpeg;
pub use vidforge_gpu as gpu;
pub use vidforge_gpu::{ColorSpec, OutputLight, Position, Rotation, Yuv420Frame};

pub use compose::{ComposeSpec, Compositor, CpuCompositor, WgpuCompositor};
pub use engine::Engine;
pub use engine::frames::{decode_frames, decode_raw_frames};
pub use engine::spec::output_size;
pub use error::{ErrorKind, MediaError};
pub use ffutil::init;
pub use hardware::{
    CompositorPlan, DecodePlan, EncoderChoice, H264Encoder, HardwareChoice, HardwarePlan,
    HardwareReport, HwDecodeChoice, Workload, plan_hardware, probe_hardware,
};
pub use probe::{AudioStreamInfo, ProbeInfo, VideoStreamInfo, probe, probe_within};
pub use quality::{QualityReport, QualitySummary, QualityTally, SegmentQuality, WorstSecond};
pub use segment::{SegmentFile, SegmentPlanOptions, SegmentReport, SegmentSpan, segment_file_name};
pub use source::hdr::{ContentLight, DolbyVision, DynamicRange, MasteringDisplay, SourceColor};
pub use source::{MAX_DIMENSION, OverLimits, SourceLimits};
pub use tempout::{sync_dir, sync_parent_dirs};
pub use types::{
    BackendChoice, EncoderSettings, HdrPolicy, Hops, OutputFormat, Progress, RenderJob,
    RenderReport, Resolution, Stage, StageTimes, WatermarkSpec,
};
pub use watermark::load_watermark_png;
pub use zero_copy::ZeroCopyChoice;
