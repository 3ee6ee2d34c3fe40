//! The engine: backend selection, renders, previews.
//!
//! Files: here the engine and its renders; `spec.rs` the compose spec of a job's source
//! (where the output's light is decided); `preview.rs` previews; `frames.rs` frames out
//! without encoding (tests, benchmarks); `truncation.rs` the checks that a source decoded
//! whole.

pub(crate) mod frames;
mod preview;
pub(crate) mod spec;
pub(crate) mod truncation;

pub(crate) use truncation::check_complete;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use ffmpeg::ffi;
use ffmpeg_next as ffmpeg;
use vidforge_gpu::{GpuContext, OutputLight};

use spec::compose_spec;
use truncation::{DeclaredLength, check_length};

use crate::compose::{ComposeSpec, Compositor, CpuCompositor, WgpuCompositor};
use crate::error::MediaError;
use crate::ffutil;
use crate::hardware::host::LiveHost;
use crate::hardware::{
    self, CompositorPlan, DecodePlan, H264Encoder, HardwareChoice, HardwarePlan, Workload,
};
use crate::hdr_out::HdrOutput;
use crate::hwdecode::CudaDevice;
use crate::muxer::{MuxTarget, Muxer};
use crate::pipeline::{self, FrameReader, PipelineOutcome};
use crate::quality::QualityReport;
use crate::segment::SegmentSpan;
use crate::source::{self, Source};
use crate::tempout::TempOutput;
use crate::types::{BackendChoice, OutputFormat, Progress, RenderJob, RenderReport, Stage};
use crate::video_out;
use crate::watermark;
use crate::zero_copy::{ZeroCopy, ZeroCopyPath};

/// Frames the GPU compositor keeps in flight (overlaps upload, compute and readback).
const GPU_FRAMES_IN_FLIGHT: usize = 3;

/// Renders videos. Cheap to clone; holds the GPU context (created once) when a GPU backend
/// is in use.
#[derive(Clone)]
pub struct Engine {
    /// The one wgpu device and queue of the process, shared by every render's compositor.
    gpu: Option<GpuContext>,
    choice: BackendChoice,
    /// The one CUDA device of the process for NVDEC decoding, shared by every decoder.
    cuda: Option<CudaDevice>,
    /// NVDEC's frames into the wgpu compositor without leaving the GPU: probed and
    /// self-tested once, when a render first needs it (at start for `--zero-copy on`).
    zero_copy: Arc<ZeroCopy>,
    h264: H264Encoder,
    /// What `auto` decided, and why.
    plan: HardwarePlan,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("choice", &self.choice)
            .field("backend", &self.backend_name())
            .field("decode", &self.plan.decode)
            .field("zero_copy", &self.zero_copy)
            .field("h264", &self.h264)
            .finish()
    }
}

impl Engine {
    /// `Auto`: the CPU compositor unless NVDEC's frames can stay on a hardware GPU (see
    /// `hardware/plan.rs`). `Wgpu`: any adapter, software included; an error when there
    /// is none. `Cpu`: no GPU at all.
    ///
    /// Hardware decoding and encoding are `auto`, for a service (see [`Engine::with_hardware`]).
    pub fn new(choice: BackendChoice) -> Result<Engine, MediaError> {
        Self::with_hardware(choice, HardwareChoice::default(), Workload::Service)
    }

    /// Like [`Engine::new`], with the decode and encode choices and the process's workload:
    /// the plan is decided here, once, probing only what it needs (a CUDA device, an NVENC
    /// session, a GPU context); forced choices that cannot be had are errors.
    pub fn with_hardware(
        choice: BackendChoice,
        hardware: HardwareChoice,
        workload: Workload,
    ) -> Result<Engine, MediaError> {
        ffutil::init();
        let mut host = LiveHost::new(workload == Workload::Service);
        let plan = hardware::plan(choice, hardware, workload, &mut host)?;
        for line in &plan.why {
            tracing::info!("{line}");
        }
        let gpu = match plan.compositor {
            CompositorPlan::Cpu => None,
            CompositorPlan::Wgpu(pref) => Some(host.gpu_context(pref).map_err(|e| {
                MediaError::failed(format!("the wgpu backend has no adapter: {e}"))
            })?),
        };
        let cuda = if plan.decode.uses_cuda() {
            Some(
                host.cuda_device()
                    .map_err(|reason| MediaError::HardwareUnavailable { reason })?,
            )
        } else {
            None
        };
        if let Some(ctx) = &gpu {
            let a = ctx.adapter();
            tracing::info!(
                adapter = %a.name, backend = %a.backend, device_type = %a.device_type,
                software = a.is_software, "GPU compositor ready"
            );
        }
        let zero_copy = Arc::new(ZeroCopy::decided(match plan.decode {
            DecodePlan::NvdecZeroCopy => host
                .zero_copy_path()
                .ok_or_else(|| "the plan chose a path that was never probed".to_string()),
            _ if gpu.is_none() => Err("no GPU compositor: the plan composes on the CPU".into()),
            DecodePlan::Software => {
                Err("no CUDA device in use: the plan decodes in software".into())
            }
            DecodePlan::Nvdec => Err(host.zero_copy_error().unwrap_or_else(|| {
                "frames are downloaded: the plan did not ask for zero-copy".into()
            })),
        }));
        Ok(Engine {
            gpu,
            choice,
            cuda,
            zero_copy,
            h264: plan.h264,
            plan,
        })
    }

    /// What this engine uses, and why (one line per decision).
    pub fn hardware_plan(&self) -> &HardwarePlan {
        &self.plan
    }

    /// Whether renders that decode on NVDEC hand their frames to the wgpu compositor without
    /// leaving the GPU (zero-copy), or why not (decided, and self-tested where it was asked,
    /// when the engine started).
    pub fn zero_copy(&self) -> Result<(), &str> {
        self.zero_copy.path().map(|_| ())
    }

    /// `cpu` or the GPU adapter's name.
    pub fn backend_name(&self) -> String {
        match &self.gpu {
            Some(ctx) => ctx.adapter().name.clone(),
            None => "cpu".to_string(),
        }
    }

    /// Whether renders decode on NVDEC (codecs it supports).
    pub fn hw_decode(&self) -> bool {
        self.cuda.is_some()
    }

    /// The H.264 encoder mp4/mov renders use.
    pub fn h264_encoder(&self) -> H264Encoder {
        self.h264
    }

    /// The FFmpeg encoder a render to `format` uses.
    pub fn video_encoder_name(&self, format: OutputFormat) -> &'static str {
        video_out::video_encoder_name(format, self.h264, &OutputLight::Sdr)
    }

    /// The GPU context in use, if any.
    pub fn gpu_context(&self) -> Option<&GpuContext> {
        self.gpu.as_ref()
    }

    /// A compositor of this engine's backend for `spec`.
    pub fn compositor(&self, spec: ComposeSpec) -> Box<dyn Compositor> {
        build_compositor(self.gpu.as_ref(), spec)
    }

    /// Renders `job.input` to `job.output`. Progress is reported on this thread; setting
    /// `cancel` stops the render within a few frames. On any error or cancel no output file
    /// (and no temporary file) is left behind.
    pub fn render(
        &self,
        job: &RenderJob,
        progress: &mut dyn FnMut(Progress),
        cancel: &AtomicBool,
    ) -> Result<RenderReport, MediaError> {
        let started = Instant::now();
        progress(Progress {
            stage: Stage::Preparing,
            frames_done: 0,
            frames_total: None,
        });
        let tmp = TempOutput::new(&job.output)?;
        let Rendered {
            outcome,
            out: (out_w, out_h),
            encoder,
            backend,
            nvdec,
            frames_declared,
            length_declared,
        } = self.render_into(job, tmp.path(), None, progress, cancel)?;
        check_complete(outcome.encode.frames, frames_declared)?;
        check_length(&outcome.decoded, length_declared)?;
        tmp.commit()?;
        let (size_bytes, duration_seconds) =
            output_facts(&job.output, outcome.encode.video_seconds);
        let elapsed = started.elapsed();
        let frames = outcome.encode.frames;
        let fps = frames as f64 / elapsed.as_secs_f64().max(1e-9);
        tracing::info!(
            output = %job.output.display(),
            frames,
            fps = format!("{fps:.1}"),
            elapsed_ms = elapsed.as_millis() as u64,
            size_bytes,
            decode_ms = outcome.stage_times.decode.as_millis() as u64,
            compose_ms = outcome.stage_times.compose.as_millis() as u64,
            encode_ms = outcome.stage_times.encode.as_millis() as u64,
            hops = %outcome.stage_times.hops.per_frame(frames),
            "render finished"
        );
        let quality = outcome.encode.quality.map(QualityReport::single);
        if let Some(q) = quality.as_ref().and_then(|q| q.whole.summary()) {
            tracing::info!(output = %job.output.display(), frames_measured = q.frames_measured, "quality: {}", q.line());
        }
        Ok(RenderReport {
            frames,
            duration_seconds,
            width: out_w,
            height: out_h,
            size_bytes,
            backend,
            decoder: if nvdec { "nvdec" } else { "software" }.to_string(),
            encoder: encoder.to_string(),
            elapsed,
            fps,
            stage_times: outcome.stage_times,
            quality,
        })
    }

    /// The render of `job` (of `span` of it when given, into a segment file) into `path`:
    /// opens the source and the output, runs the pipeline. The caller checks and commits.
    pub(crate) fn render_into(
        &self,
        job: &RenderJob,
        path: &Path,
        span: Option<&SegmentSpan>,
        progress: &mut dyn FnMut(Progress),
        cancel: &AtomicBool,
    ) -> Result<Rendered, MediaError> {
        if let Some(wm) = &job.watermark {
            watermark::check_opacity(wm.opacity)?;
        }
        let mut src = source::open(&job.input)?;
        let spec = compose_spec(job, &src, true)?;
        let (decoder, nvdec) = src.video_decoder_for_output(
            (spec.out_width, spec.out_height),
            self.cuda.as_ref(),
            job.encoder.threads,
        )?;
        let frames_total = span.map_or(src.video.frames_estimate, |s| Some(s.frames));
        let frames_declared = src.video.frames_declared;
        let length_declared = DeclaredLength {
            video: src.video.duration_declared,
            container: src.container_duration_declared,
        };
        let encoder = video_out::video_encoder_name(job.format, self.h264, &spec.light);
        let backend = self.backend_name();
        self.log_render_start(job, &src, &spec, &backend, nvdec);
        let target = MuxTarget {
            format: job.format,
            segment: span.is_some(),
        };
        let hdr = spec
            .light
            .kept_signal()
            .map(|signal| HdrOutput::new(*signal, &src.video.declared_color));
        let (out_w, out_h) = (spec.out_width, spec.out_height);
        let muxer = Muxer::open(
            path,
            target,
            &job.encoder,
            self.h264,
            (out_w, out_h),
            &src,
            hdr,
        )?;
        if let Some(span) = span {
            crate::segment::seek_to_span(&mut src, span)?;
        }
        if cancel.load(Ordering::Relaxed) {
            return Err(MediaError::Cancelled);
        }
        progress(Progress {
            stage: Stage::Rendering,
            frames_done: 0,
            frames_total,
        });
        let depths =
            pipeline::QueueDepths::for_sizes((src.video.width, src.video.height), (out_w, out_h));
        let mut reader = FrameReader::new(src, decoder, muxer.has_audio());
        if let Some(span) = span {
            reader.set_window(span.start_pts, span.end_pts);
        }
        // NVDEC's frames stay on the GPU when the compositor can take them there.
        let zero_copy = nvdec.then(|| self.zero_copy.path().ok().cloned()).flatten();
        reader.keep_on_gpu(zero_copy.is_some());
        let make = self.compositor_factory(spec, zero_copy);
        let outcome = pipeline::run(reader, make, muxer, cancel, progress, frames_total, depths)?;
        Ok(Rendered {
            outcome,
            out: (out_w, out_h),
            encoder,
            backend,
            nvdec,
            frames_declared,
            length_declared,
        })
    }

    fn log_render_start(
        &self,
        job: &RenderJob,
        src: &Source,
        spec: &ComposeSpec,
        backend: &str,
        nvdec: bool,
    ) {
        tracing::info!(
            input = %job.input.display(),
            output = %job.output.display(),
            source = %format!("{}x{} {}", src.video.width, src.video.height, src.video.codec_name),
            rotation = src.video.rotation.degrees(),
            out = %format!("{}x{} {}", spec.out_width, spec.out_height, job.format),
            watermark = spec.watermark.is_some(),
            backend = %backend,
            decode = if nvdec { "nvdec" } else { "software" },
            encoder = video_out::video_encoder_name(job.format, self.h264, &spec.light),
            keep_hdr = spec.light.kept_signal().is_some(),
            "render start"
        );
    }

    /// Builds this engine's compositor for `spec` on the compose thread (taking NVDEC's
    /// frames on the GPU through `zero_copy` when given).
    fn compositor_factory(
        &self,
        spec: ComposeSpec,
        zero_copy: Option<ZeroCopyPath>,
    ) -> Box<dyn FnOnce() -> Result<Box<dyn Compositor>, MediaError> + Send> {
        let gpu = self.gpu.clone();
        Box::new(move || {
            Ok(match (zero_copy, gpu) {
                (Some(path), _) => Box::new(
                    WgpuCompositor::new(path.gpu(), spec, GPU_FRAMES_IN_FLIGHT)
                        .with_zero_copy(path),
                ),
                (None, gpu) => build_compositor(gpu.as_ref(), spec),
            })
        })
    }
}

/// What [`Engine::render_into`] rendered, for the caller's checks and report.
pub(crate) struct Rendered {
    pub outcome: PipelineOutcome,
    /// The output's size.
    pub out: (u32, u32),
    /// The FFmpeg video encoder.
    pub encoder: &'static str,
    pub backend: String,
    pub nvdec: bool,
    /// What the source declares: its frame count and length.
    pub frames_declared: Option<u64>,
    pub length_declared: DeclaredLength,
}

/// The committed output's size in bytes and duration in seconds (from its header, else
/// `fallback_seconds`: what the encoder saw).
pub(crate) fn output_facts(output: &Path, fallback_seconds: f64) -> (u64, f64) {
    let size_bytes = std::fs::metadata(output).map(|m| m.len()).unwrap_or(0);
    let duration_seconds = ffmpeg::format::input(output)
        .ok()
        .map(|i| i.duration())
        .filter(|d| *d > 0)
        .map(|d| d as f64 / ffi::AV_TIME_BASE as f64)
        .unwrap_or(fallback_seconds);
    (size_bytes, duration_seconds)
}

/// The compositor for `spec`: the wgpu one when there is a GPU context, else the CPU one.
fn build_compositor(gpu: Option<&GpuContext>, spec: ComposeSpec) -> Box<dyn Compositor> {
    match gpu {
        Some(ctx) => Box::new(WgpuCompositor::new(ctx, spec, GPU_FRAMES_IN_FLIGHT)),
        None => Box::new(CpuCompositor::new(spec)),
    }
}
