//! `vidforge render` and `vidforge probe`.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use vidforge_core::config::{parse_encoder, parse_hwdecode, parse_zero_copy};
use vidforge_media::{
    BackendChoice, EncoderChoice, EncoderSettings, Engine, HardwareChoice, HdrPolicy,
    HwDecodeChoice, OutputFormat, Position, Progress, RenderJob, RenderReport, Resolution, Stage,
    WatermarkSpec, Workload, ZeroCopyChoice,
};

fn parse_resolution(s: &str) -> Result<Resolution, String> {
    Resolution::parse(s).ok_or_else(|| format!("unknown resolution '{s}' (720p, 1080p, 4k)"))
}

fn parse_format(s: &str) -> Result<OutputFormat, String> {
    OutputFormat::parse(s).ok_or_else(|| format!("unknown format '{s}' (mp4, webm, mov)"))
}

fn parse_position(s: &str) -> Result<Position, String> {
    Position::parse(s).ok_or_else(|| {
        format!("unknown position '{s}' (top_left, top_right, bottom_left, bottom_right, center)")
    })
}

fn parse_backend(s: &str) -> Result<BackendChoice, String> {
    BackendChoice::parse(s).ok_or_else(|| format!("unknown backend '{s}' (auto, wgpu, cpu)"))
}

fn parse_opacity(s: &str) -> Result<f32, String> {
    let v: f32 = s
        .parse()
        .map_err(|_| format!("opacity '{s}' is not a number"))?;
    let range = vidforge_core::args::OPACITY;
    if !range.contains(&f64::from(v)) {
        return Err(format!(
            "opacity {v} is outside {}..={}",
            range.start(),
            range.end()
        ));
    }
    Ok(v)
}

#[derive(Debug, Args)]
pub struct RenderArgs {
    /// Input video (any container/codec FFmpeg reads).
    pub input: PathBuf,
    /// Output file; its extension picks the format when --format is not given.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Fit inside 720p, 1080p or 4k (vertical video stays vertical).
    #[arg(short, long, default_value = "1080p", value_parser = parse_resolution)]
    pub resolution: Resolution,
    /// mp4 (H.264/AAC), webm (VP9/Opus) or mov (H.264/AAC).
    #[arg(short, long, value_parser = parse_format)]
    pub format: Option<OutputFormat>,
    /// Watermark PNG (with alpha).
    #[arg(long)]
    pub watermark: Option<PathBuf>,
    /// Watermark position.
    #[arg(long, default_value = "bottom_right", value_parser = parse_position)]
    pub position: Position,
    /// Watermark opacity, 0..1.
    #[arg(long, default_value = "0.6", value_parser = parse_opacity)]
    pub opacity: f32,
    /// Keep an HDR (PQ or HLG) source HDR: 10-bit HEVC Main10 (mp4/mov) or VP9 profile 2
    /// (webm) with its transfer and mastering metadata, instead of tone-mapping it to SDR.
    #[arg(long)]
    pub keep_hdr: bool,
    /// Compositor: auto (one render: the CPU), wgpu (any adapter), cpu. See `probe --hardware`.
    #[arg(long, default_value = "auto", value_parser = parse_backend)]
    pub backend: BackendChoice,
    /// Decoding: auto (one render: NVDEC only where NVENC encodes), cuda, off.
    #[arg(long, default_value = "auto", value_parser = parse_hwdecode)]
    pub hwdecode: HwDecodeChoice,
    /// H.264 encoder for mp4/mov: auto (NVENC when a session opens, else x264), x264, nvenc.
    #[arg(long, default_value = "auto", value_parser = parse_encoder)]
    pub encoder: EncoderChoice,
    /// NVDEC frames to the wgpu compositor without leaving the GPU: auto (when its start-up
    /// self-test passes), on (required), off (download them, as the CPU compositor does).
    #[arg(long, default_value = "auto", value_parser = parse_zero_copy)]
    pub zero_copy: ZeroCopyChoice,
    /// x264 preset (mp4/mov).
    #[arg(long, default_value = "veryfast")]
    pub preset: String,
    /// Constant rate factor: x264 0..51 (default 23), VP9 0..63 (default 32).
    #[arg(long)]
    pub crf: Option<u8>,
    /// Encoder threads (0 = automatic).
    #[arg(long, default_value_t = 0)]
    pub threads: u32,
    /// Measure the output's quality: PSNR (Y and all planes) and SSIM of the encoded video
    /// against the frames the encoder was given, the mean and the worst second. Costs a
    /// decode and a comparison of every frame (docs/bench/quality.md).
    #[arg(long)]
    pub quality: bool,
    /// Write a watermark preview PNG of one frame here instead of rendering.
    #[arg(long)]
    pub preview: Option<PathBuf>,
    /// No progress line.
    #[arg(short, long)]
    pub quiet: bool,
}

/// A single carriage-return progress line on stderr, redrawn at most ten times a second.
struct ProgressLine {
    started: Instant,
    last_draw: Option<Instant>,
    enabled: bool,
}

impl ProgressLine {
    fn update(&mut self, p: Progress) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        let final_stage = p.stage == Stage::Finalizing;
        if !final_stage
            && self
                .last_draw
                .is_some_and(|t| now.duration_since(t) < Duration::from_millis(100))
        {
            return;
        }
        self.last_draw = Some(now);
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        let fps = p.frames_done as f64 / secs;
        let line = match (p.stage, p.frames_total) {
            (Stage::Preparing, _) => "preparing...".to_string(),
            (stage, Some(total)) if total > 0 => {
                let frac = (p.frames_done as f64 / total as f64).min(1.0);
                let width = 30;
                let filled = (frac * width as f64).round() as usize;
                let eta = if fps > 0.0 && total > p.frames_done {
                    format!(" eta {:.0}s", (total - p.frames_done) as f64 / fps)
                } else {
                    String::new()
                };
                format!(
                    "[{}{}] {:3.0}% {}/{} frames {:.1} fps{eta}{}",
                    "#".repeat(filled),
                    ".".repeat(width - filled),
                    frac * 100.0,
                    p.frames_done,
                    total,
                    fps,
                    if stage == Stage::Finalizing {
                        " finalizing"
                    } else {
                        ""
                    }
                )
            }
            (stage, _) => format!(
                "{} frames {:.1} fps{}",
                p.frames_done,
                fps,
                if stage == Stage::Finalizing {
                    " finalizing"
                } else {
                    ""
                }
            ),
        };
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K{line}");
        let _ = err.flush();
    }

    fn done(&mut self) {
        if self.enabled && self.last_draw.is_some() {
            let _ = writeln!(std::io::stderr());
        }
    }
}

/// Ctrl-C sets `cancel` (the engine then removes its partial output); a second one exits.
fn cancel_on_ctrl_c(cancel: Arc<AtomicBool>) {
    let _ = std::thread::Builder::new()
        .name("ctrl-c".into())
        .spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                if tokio::signal::ctrl_c().await.is_ok() {
                    cancel.store(true, Ordering::Relaxed);
                    eprintln!("\ncancelling...");
                    if tokio::signal::ctrl_c().await.is_ok() {
                        std::process::exit(130);
                    }
                }
            });
        });
}

/// `vidforge render`: one file rendered (or previewed) on this machine, with a progress line.
pub fn run_render(args: RenderArgs) -> anyhow::Result<()> {
    let job = render_job(&args)?;
    let hardware = HardwareChoice {
        decode: args.hwdecode,
        encoder: args.encoder,
        zero_copy: args.zero_copy,
    };
    let workload = Workload::One {
        h264: job.format != OutputFormat::Webm,
    };
    let engine = Engine::with_hardware(args.backend, hardware, workload)
        .context("starting the render engine")?;

    if let Some(png) = &args.preview {
        let (w, h) = engine
            .render_preview(&job, png, None)
            .with_context(|| format!("previewing {}", args.input.display()))?;
        println!("preview {w}x{h} written to {}", png.display());
        return Ok(());
    }

    let cancel = Arc::new(AtomicBool::new(false));
    cancel_on_ctrl_c(cancel.clone());
    let mut bar = ProgressLine {
        started: Instant::now(),
        last_draw: None,
        enabled: !args.quiet,
    };
    let result = engine.render(&job, &mut |p| bar.update(p), &cancel);
    bar.done();
    let report = result.with_context(|| {
        format!(
            "rendering {} -> {}",
            args.input.display(),
            args.output.display()
        )
    })?;
    print_report(&args, &job, &report);
    Ok(())
}

/// The finished render's summary line and its stages' busy times.
fn print_report(args: &RenderArgs, job: &RenderJob, report: &RenderReport) {
    let format = job.format;
    println!(
        "{}: {}x{} {}, {} frames, {:.2} s, {:.1} MB in {:.2} s ({:.1} fps, backend {}, {} decode, {})",
        args.output.display(),
        report.width,
        report.height,
        format,
        report.frames,
        report.duration_seconds,
        report.size_bytes as f64 / 1e6,
        report.elapsed.as_secs_f64(),
        report.fps,
        report.backend,
        report.decoder,
        report.encoder
    );
    println!(
        "  stage busy time: decode {:.2} s, compose {:.2} s, encode {:.2} s",
        report.stage_times.decode.as_secs_f64(),
        report.stage_times.compose.as_secs_f64(),
        report.stage_times.encode.as_secs_f64()
    );
    if let Some(q) = report.quality.as_ref().and_then(|q| q.whole.summary()) {
        println!(
            "  quality: {} (PSNR Y {:.1} dB, {} frames measured)",
            q.line(),
            q.psnr_y_db,
            q.frames_measured
        );
    }
    let hops = report.stage_times.hops.per_frame(report.frames);
    println!("  hops, {hops}");
}

/// The job the arguments describe: the format (from `--format` or the output's extension),
/// the encoder settings, the watermark and the HDR policy.
fn render_job(args: &RenderArgs) -> anyhow::Result<RenderJob> {
    let format = match args.format {
        Some(f) => f,
        None => OutputFormat::from_path(&args.output).with_context(|| {
            format!(
                "cannot tell the format from {}: pass --format mp4|webm|mov",
                args.output.display()
            )
        })?,
    };
    if let Some(ext_format) = OutputFormat::from_path(&args.output)
        && ext_format != format
    {
        tracing::warn!(
            "writing {format} into {} (extension says {ext_format})",
            args.output.display()
        );
    }
    let mut encoder = EncoderSettings {
        h264_preset: args.preset.clone(),
        threads: args.threads,
        measure_quality: args.quality,
        ..Default::default()
    };
    if let Some(crf) = args.crf {
        match format {
            OutputFormat::Webm if crf > 63 => bail!("--crf {crf}: VP9 takes 0..=63"),
            OutputFormat::Webm => encoder.vp9_crf = crf,
            _ if crf > 51 => bail!("--crf {crf}: x264 takes 0..=51"),
            _ => encoder.h264_crf = crf,
        }
    }
    Ok(RenderJob {
        input: args.input.clone(),
        output: args.output.clone(),
        resolution: args.resolution,
        format,
        watermark: args.watermark.as_ref().map(|image| WatermarkSpec {
            image: image.clone(),
            position: args.position,
            opacity: args.opacity,
        }),
        encoder,
        hdr: HdrPolicy::keeping(args.keep_hdr),
    })
}
