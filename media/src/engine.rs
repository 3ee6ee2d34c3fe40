//! The engine: backend selection, renders, previews.

pub(crate) mod truncation;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ffmpeg::ffi;
use ffmpeg::format::Pixel;
use ffmpeg::frame;
use ffmpeg_next as ffmpeg;
use vidforge_gpu::frame::HdrSignal;
use vidforge_gpu::{AdapterPreference, GpuContext, Yuv420Frame};

use truncation::{DeclaredLength, check_complete, check_length};

use crate::compose::{ComposeSpec, Compositor, CpuCompositor, SourceConverter, WgpuCompositor};
use crate::error::MediaError;
use crate::ffutil;
use crate::hardware::{self, H264Encoder, HardwareChoice};
use crate::hdr_out::HdrOutput;
use crate::hwdecode::CudaDevice;
use crate::muxer::Muxer;
use crate::pipeline::{self, FrameReader};
use crate::scale::{Sws, SwsKey};
use crate::source::{self, Source};
use crate::tempout::TempOutput;
use crate::types::{
    BackendChoice, HdrPolicy, OutputFormat, Progress, RenderJob, RenderReport, Resolution, Stage,
};
use crate::video_out;
use crate::watermark;

/// Frames the GPU compositor keeps in flight (overlaps upload, compute and readback).
const GPU_FRAMES_IN_FLIGHT: usize = 3;

/// Output size for a display size: fit inside the resolution's box (turned upright for
/// vertical video), aspect preserved, even dimensions. Small sources are enlarged.
pub fn output_size(display_width: u32, display_height: u32, resolution: Resolution) -> (u32, u32) {
    let (bw, bh) = resolution.box_size();
    let (bw, bh) = if display_height > display_width {
        (bh, bw)
    } else {
        (bw, bh)
    };
    let (dw, dh) = (display_width.max(1) as f64, display_height.max(1) as f64);
    let s = (bw as f64 / dw).min(bh as f64 / dh);
    let even = |v: f64, max: u32| (((v / 2.0).round() as u32) * 2).clamp(2, max);
    (even(dw * s, bw), even(dh * s, bh))
}

/// Renders videos. Cheap to clone; holds the GPU context (created once) when a GPU backend
/// is in use.
#[derive(Clone)]
pub struct Engine {
    /// The one wgpu device and queue of the process, shared by every render's compositor.
    gpu: Option<GpuContext>,
    choice: BackendChoice,
    /// The one CUDA device of the process for NVDEC decoding, shared by every decoder.
    cuda: Option<CudaDevice>,
    h264: H264Encoder,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("choice", &self.choice)
            .field("backend", &self.backend_name())
            .field("nvdec", &self.cuda.is_some())
            .field("h264", &self.h264)
            .finish()
    }
}

impl Engine {
    /// `Auto`: a hardware adapter if any, else the CPU compositor. `Wgpu`: any adapter,
    /// software included; an error when there is none. `Cpu`: no GPU at all.
    ///
    /// Hardware decoding and encoding are `auto` (see [`Engine::with_hardware`]).
    pub fn new(choice: BackendChoice) -> Result<Engine, MediaError> {
        Self::with_hardware(choice, HardwareChoice::default())
    }

    /// Like [`Engine::new`], with the decode and encode choices: a CUDA device is opened and
    /// an NVENC session tried once, here; forced choices that cannot be had are errors.
    pub fn with_hardware(
        choice: BackendChoice,
        hardware: HardwareChoice,
    ) -> Result<Engine, MediaError> {
        ffutil::init();
        let cuda = hardware::select_decoder(hardware.decode, CudaDevice::open)?;
        let h264 = hardware::select_encoder(hardware.encoder, hardware::probe_nvenc)?;
        tracing::info!(
            nvdec = cuda.is_some(),
            h264 = h264.ffmpeg_name(),
            "decoder and encoder selected"
        );
        let gpu = match choice {
            BackendChoice::Cpu => None,
            BackendChoice::Wgpu => Some(
                GpuContext::new(AdapterPreference::AllowSoftware).map_err(|e| {
                    MediaError::failed(format!("the wgpu backend has no adapter: {e}"))
                })?,
            ),
            BackendChoice::Auto => match GpuContext::new(AdapterPreference::HardwareOnly) {
                Ok(ctx) => Some(ctx),
                Err(e) => {
                    tracing::info!("no hardware GPU adapter, using the CPU compositor ({e})");
                    None
                }
            },
        };
        if let Some(ctx) = &gpu {
            let a = ctx.adapter();
            tracing::info!(
                adapter = %a.name, backend = %a.backend, device_type = %a.device_type,
                software = a.is_software, "GPU compositor ready"
            );
        }
        Ok(Engine {
            gpu,
            choice,
            cuda,
            h264,
        })
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
        video_out::video_encoder_name(format, self.h264, false)
    }

    /// The GPU context in use, if any.
    pub fn gpu_context(&self) -> Option<&GpuContext> {
        self.gpu.as_ref()
    }

    /// A compositor of this engine's backend for `spec`.
    pub fn compositor(&self, spec: ComposeSpec) -> Box<dyn Compositor> {
        build_compositor(self.gpu.as_ref(), spec)
    }

    /// What the compositor makes of `src` for `job`. `video`: for the video itself, whose
    /// HDR may be kept ([`HdrPolicy::Keep`]); previews (PNG) are always SDR.
    fn compose_spec(
        &self,
        job: &RenderJob,
        src: &Source,
        video: bool,
    ) -> Result<ComposeSpec, MediaError> {
        let (w, h) = output_size(
            src.video.display_width,
            src.video.display_height,
            job.resolution,
        );
        let tone_map = src.video.declared_color.tone_map();
        let keep_hdr = video && job.hdr == HdrPolicy::Keep && tone_map.is_some();
        let signal = tone_map.filter(|_| keep_hdr).map(|t| HdrSignal::of(&t));
        let wm = match &job.watermark {
            Some(spec) => watermark::prepare(spec, w, h, signal.as_ref())?,
            None => None,
        };
        Ok(ComposeSpec {
            out_width: w,
            out_height: h,
            rotation: src.video.rotation,
            watermark: wm,
            tone_map,
            keep_hdr,
        })
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
        if let Some(wm) = &job.watermark {
            watermark::check_opacity(wm.opacity)?;
        }
        let tmp = TempOutput::new(&job.output)?;
        let src = source::open(&job.input)?;
        let spec = self.compose_spec(job, &src, true)?;
        let (decoder, nvdec) =
            src.video_decoder_for_output((spec.out_width, spec.out_height), self.cuda.as_ref())?;
        let frames_total = src.video.frames_estimate;
        let frames_declared = src.video.frames_declared;
        let length_declared = DeclaredLength {
            video: src.video.duration_declared,
            container: src.container_duration_declared,
        };
        let encoder = video_out::video_encoder_name(job.format, self.h264, spec.keeps_hdr());
        let backend = self.backend_name();
        self.log_render_start(job, &src, &spec, &backend, nvdec);
        let muxer = Muxer::open(
            tmp.path(),
            job.format,
            &job.encoder,
            self.h264,
            (spec.out_width, spec.out_height),
            &src,
            spec.keeps_hdr()
                .then(|| HdrOutput::of(&src.video.declared_color))
                .flatten(),
        )?;
        if cancel.load(Ordering::Relaxed) {
            return Err(MediaError::Cancelled);
        }
        progress(Progress {
            stage: Stage::Rendering,
            frames_done: 0,
            frames_total,
        });
        let (out_w, out_h) = (spec.out_width, spec.out_height);
        let depths =
            pipeline::QueueDepths::for_sizes((src.video.width, src.video.height), (out_w, out_h));
        let reader = FrameReader::new(src, decoder, muxer.has_audio());
        let make = self.compositor_factory(spec);
        let outcome = pipeline::run(reader, make, muxer, cancel, progress, frames_total, depths)?;
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
            "render finished"
        );
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
            encoder = video_out::video_encoder_name(job.format, self.h264, spec.keeps_hdr()),
            keep_hdr = spec.keeps_hdr(),
            "render start"
        );
    }

    /// Builds this engine's compositor for `spec` on the compose thread.
    fn compositor_factory(
        &self,
        spec: ComposeSpec,
    ) -> Box<dyn FnOnce() -> Result<Box<dyn Compositor>, MediaError> + Send> {
        let gpu = self.gpu.clone();
        Box::new(move || Ok(build_compositor(gpu.as_ref(), spec)))
    }

    /// Writes a PNG of one representative frame (about a third into the video) at output
    /// size with the watermark applied, through the same compositor as renders. Returns the
    /// PNG's size.
    pub fn render_preview(
        &self,
        job: &RenderJob,
        png_out: &Path,
    ) -> Result<(u32, u32), MediaError> {
        if let Some(wm) = &job.watermark {
            watermark::check_opacity(wm.opacity)?;
        }
        let t0 = Instant::now();
        let tmp = TempOutput::new(png_out)?;
        let src = source::open(&job.input)?;
        let spec = self.compose_spec(job, &src, false)?;
        let t_open = t0.elapsed();
        let frame = preview_frame(src, &job.input)?;
        let t_decode = t0.elapsed();
        let out = self.compositor(spec).compose_single(&frame)?;
        let t_compose = t0.elapsed();
        write_png(&out, tmp.path())?;
        tmp.commit()?;
        let ms = |d: Duration| format!("{:.1}", d.as_secs_f64() * 1e3);
        tracing::debug!(
            open_ms = ms(t_open),
            decode_ms = ms(t_decode - t_open),
            compose_ms = ms(t_compose - t_decode),
            png_ms = ms(t0.elapsed() - t_compose),
            "preview written"
        );
        Ok((out.width, out.height))
    }

    /// Decodes the first `max_frames` frames of `job.input` and composes them as a render
    /// would (no encoding). For tests and benchmarks of the compositors.
    pub fn compose_frames(
        &self,
        job: &RenderJob,
        max_frames: usize,
    ) -> Result<Vec<Yuv420Frame>, MediaError> {
        let src = source::open(&job.input)?;
        let spec = self.compose_spec(job, &src, true)?;
        let decoder = src.video_decoder()?;
        let mut reader = FrameReader::new(src, decoder, false);
        let mut comp = self.compositor(spec);
        let mut out = Vec::new();
        let mut n = 0;
        while n < max_frames {
            let Some(f) = reader.next_video()? else { break };
            n += 1;
            out.extend(comp.push(&f)?);
        }
        out.extend(comp.finish()?);
        Ok(out)
    }
}

/// Decodes up to `max_frames` frames of `path` as 8-bit yuv420p at their coded size and in
/// their own colour (BT.601/BT.709 matrix and range kept; rotation not applied). For tests
/// and inspection of outputs.
pub fn decode_frames(path: &Path, max_frames: usize) -> Result<Vec<Yuv420Frame>, MediaError> {
    let src = source::open(path)?;
    let decoder = src.video_decoder()?;
    let mut reader = FrameReader::new(src, decoder, false);
    let mut conv: Option<SourceConverter> = None;
    let mut out = Vec::new();
    while out.len() < max_frames {
        let Some(f) = reader.next_video()? else { break };
        if conv.is_none() {
            conv = Some(SourceConverter::for_frame(&f)?);
        }
        let Some(c) = conv.as_mut() else { break };
        let (w, h) = c.size();
        let mut dst = crate::scale::blank_frame(w, h);
        c.convert(&f, &mut dst)?;
        out.push(dst);
    }
    Ok(out)
}

/// Decodes up to `max_frames` frames of `path` exactly as the decoder returns them (native
/// pixel format and size), for benchmarks of the compositors' `push`.
pub fn decode_raw_frames(path: &Path, max_frames: usize) -> Result<Vec<frame::Video>, MediaError> {
    let src = source::open(path)?;
    let decoder = src.video_decoder()?;
    let mut reader = FrameReader::new(src, decoder, false);
    let mut out = Vec::new();
    while out.len() < max_frames {
        let Some(f) = reader.next_video()? else { break };
        out.push(f);
    }
    Ok(out)
}

/// The preview's frame: the keyframe at or before a third into the video, else the first
/// frame. One seek and the pictures up to that keyframe's (the decoder's own delay), never
/// a decode forward through the GOP: the person waits for this, and a watermark's placement
/// shows on any frame.
fn preview_frame(src: Source, path: &Path) -> Result<frame::Video, MediaError> {
    let duration = src.duration_seconds;
    let start_us = src.start_time_us;
    let decoder = src.video_decoder()?;
    let mut reader = FrameReader::new(src, decoder, false);
    if duration > 0.5 {
        let ts_us = start_us + (duration / 3.0 * ffi::AV_TIME_BASE as f64) as i64;
        if reader.input_mut().seek(ts_us, ..ts_us).is_ok() {
            reader.reset_after_seek();
            if let Ok(Some(f)) = reader.next_video() {
                return Ok(f);
            }
        }
        // The seek went nowhere useful: start over from the beginning.
        let src = source::open(path)?;
        let decoder = src.video_decoder()?;
        reader = FrameReader::new(src, decoder, false);
    }
    reader
        .next_video()?
        .ok_or_else(|| MediaError::invalid(format!("{} has no decodable frame", path.display())))
}

/// BT.709 limited yuv420p -> RGB24 PNG.
fn write_png(img: &Yuv420Frame, path: &Path) -> Result<(), MediaError> {
    let (w, h) = (img.width, img.height);
    let key = SwsKey {
        src_fmt: Pixel::YUV420P,
        src_w: w,
        src_h: h,
        dst_fmt: Pixel::RGB24,
        dst_w: w,
        dst_h: h,
        flags: ffi::SWS_BICUBIC | ffi::SWS_FULL_CHR_H_INT | ffi::SWS_ACCURATE_RND,
        src_space: ffi::SWS_CS_ITU709,
        src_full: false,
        dst_space: ffi::SWS_CS_ITU709,
        dst_full: true,
    };
    let mut sws = Sws::new(key)?;
    let stride = w as usize * 3;
    let mut rgb = vec![0u8; stride * h as usize];
    sws.yuv420_to_packed(img, &mut rgb, stride)?;
    let io = |e: &dyn std::fmt::Display| {
        MediaError::failed(format!("writing preview PNG {}: {e}", path.display()))
    };
    let file = std::fs::File::create(path).map_err(|e| io(&e))?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), w, h);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    // Written once and shown at once: speed over the last few percent of size.
    enc.set_compression(png::Compression::Fast);
    let mut writer = enc.write_header().map_err(|e| io(&e))?;
    writer.write_image_data(&rgb).map_err(|e| io(&e))?;
    writer.finish().map_err(|e| io(&e))?;
    Ok(())
}

/// The committed output's size in bytes and duration in seconds (from its header, else
/// `fallback_seconds`: what the encoder saw).
fn output_facts(output: &Path, fallback_seconds: f64) -> (u64, f64) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_size_fits_the_box_and_keeps_orientation() {
        use Resolution::*;
        assert_eq!(output_size(1920, 1080, P720), (1280, 720));
        assert_eq!(output_size(3840, 2160, P1080), (1920, 1080));
        // Small sources are enlarged to the requested class.
        assert_eq!(output_size(640, 360, P4k), (3840, 2160));
        assert_eq!(output_size(320, 240, P1080), (1440, 1080));
        // Vertical stays vertical: the box turns with it.
        assert_eq!(output_size(1080, 1920, P720), (720, 1280));
        assert_eq!(output_size(1080, 1920, P4k), (2160, 3840));
        // Square uses the short side.
        assert_eq!(output_size(500, 500, P720), (720, 720));
        // Ultra-wide: width-bound, even height.
        let (w, h) = output_size(2560, 1080, P720);
        assert_eq!(w, 1280);
        assert_eq!(h % 2, 0);
        assert!((h as i32 - 540).abs() <= 2);
        // Odd sizes round to even and never exceed the box.
        for (sw, sh) in [(321, 241), (1, 1), (16384, 3), (3, 16384)] {
            let (w, h) = output_size(sw, sh, P720);
            assert_eq!((w % 2, h % 2), (0, 0));
            assert!(w >= 2 && h >= 2);
            assert!(w.max(h) <= 1280 && w.min(h) <= 720, "{sw}x{sh} -> {w}x{h}");
        }
    }
}
