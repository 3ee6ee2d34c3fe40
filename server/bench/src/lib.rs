//! `vidforge bench`: vidforge and the ffmpeg CLI on identical jobs, side by side in one run.
//! On a host with a CUDA device, ffmpeg's GPU pipeline (NVDEC, `scale_cuda`, `overlay_cuda`,
//! NVENC or `hwdownload` + libx264) is the second reference.
//!
//! Every job runs in a child process (ours: this binary in a hidden single-render mode; theirs:
//! `ffmpeg`), rotating the order so machine noise hits all alike. Peak RSS comes from
//! `wait4`'s rusage of that child. Writes `report.json`, `report.md` and `fps.svg`.
//!
//! - `child`: the child processes (the hidden `--run-one` mode, both tools' command lines,
//!   spawning and reaping with rusage);
//! - `measure`: one job measured per tool, concurrent throughput, medians;
//! - `report`: the report and its Markdown and SVG renderings;
//! - `human_wait`: `--human-wait`, the person's waits with speculative rendering on and off.

mod child;
mod human_wait;
pub mod load;
mod measure;
mod quality;
mod report;
mod service;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use vidforge_media::synthetic::{self, ClipSpec};
use vidforge_media::{
    BackendChoice, EncoderChoice, H264Encoder, HardwareChoice, HwDecodeChoice, OutputFormat,
    Resolution,
};

use child::{Peer, run_one};
use measure::{ConcurrencyResult, JobResult, measure_concurrent, measure_job};
use report::{Report, cpu_model, ffmpeg_version, markdown, svg_chart};
use vidforge_core::config::{parse_encoder, parse_hwdecode};

/// Watermark opacity used by every job (ours and ffmpeg's).
const OPACITY: f32 = 0.6;

/// Watermark PNG size before placement scales it.
const LOGO_SIZE: (u32, u32) = (400, 200);

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BenchBackend {
    Cpu,
    Wgpu,
    Both,
}

impl BenchBackend {
    /// The `--backend` of a server under measurement (`both`: the server's own `auto`).
    fn server_choice(self) -> &'static str {
        match self {
            BenchBackend::Cpu => "cpu",
            BenchBackend::Wgpu => "wgpu",
            BenchBackend::Both => "auto",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum GpuPeerChoice {
    Auto,
    On,
    Off,
}

/// ffmpeg's GPU pipeline, when the machine can run it: with NVENC where a session opens,
/// else with libx264 after `hwdownload`. The text says which, or why there is none.
fn gpu_peer(choice: GpuPeerChoice) -> anyhow::Result<(Option<Peer>, String)> {
    if choice == GpuPeerChoice::Off {
        return Ok((None, "not measured (--gpu-peer off)".into()));
    }
    let hw = vidforge_media::probe_hardware();
    match hw.cuda {
        Ok(_) => {
            let encoder = if hw.nvenc.is_ok() {
                H264Encoder::Nvenc
            } else {
                H264Encoder::X264
            };
            let how = match encoder {
                H264Encoder::Nvenc => "NVDEC → scale_cuda → overlay_cuda → h264_nvenc",
                H264Encoder::X264 => {
                    "NVDEC → scale_cuda → overlay_cuda → hwdownload → libx264 (no NVENC on this card)"
                }
            };
            Ok((Some(Peer::Gpu(encoder)), how.into()))
        }
        Err(e) if choice == GpuPeerChoice::On => {
            bail!("--gpu-peer on: ffmpeg's GPU pipeline needs a CUDA device: {e}")
        }
        Err(e) => Ok((None, format!("not measured: no CUDA device ({e})"))),
    }
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Short clips and fewer configurations (under 2 minutes on 2 cores); for CI.
    #[arg(long)]
    pub quick: bool,
    /// Where report.json, report.md, fps.svg (and the fixtures) go.
    #[arg(long, default_value = "bench-report")]
    pub out: PathBuf,
    /// Compositor backend(s) of vidforge to measure.
    #[arg(long, value_enum, default_value = "cpu")]
    pub backend: BenchBackend,
    /// Concurrency levels of the throughput test (renders at once).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    pub jobs: Vec<u32>,
    /// vidforge's decoding: auto (what `vidforge probe --hardware` says it picks), cuda, off.
    #[arg(long, default_value = "auto", value_parser = parse_hwdecode)]
    pub hwdecode: HwDecodeChoice,
    /// vidforge's H.264 encoder: auto (NVENC when a session opens), x264, nvenc.
    #[arg(long, default_value = "auto", value_parser = parse_encoder)]
    pub encoder: EncoderChoice,
    /// ffmpeg's GPU pipeline as a second reference: auto (when a CUDA device opens), on
    /// (fail without one), off.
    #[arg(long, value_enum, default_value = "auto")]
    pub gpu_peer: GpuPeerChoice,
    /// Runs of each job per tool (vidforge and ffmpeg alternate); the median is reported.
    #[arg(long)]
    pub repeats: Option<u32>,
    /// Instead of throughput: the person's two waits of a watermarked render (create →
    /// preview ready, approve → video ready) through real servers, speculative rendering on
    /// and off side by side (human-wait.json, human-wait.md).
    #[arg(long)]
    pub human_wait: bool,
    /// --human-wait (default 720p,1080p,4k) and --service (default 720p): output resolutions.
    #[arg(long, value_delimiter = ',')]
    pub resolutions: Option<Vec<String>>,
    /// --human-wait: how long the person looks at the preview before approving, in seconds.
    #[arg(long, default_value_t = 10.0)]
    pub think_seconds: f64,
    /// Instead of one process per render: what one `vidforge serve` serves. `--jobs` renders
    /// at once over MCP (created, previews approved, results awaited) against as many ffmpeg
    /// processes (and ffmpeg's GPU pipeline with a CUDA device), renders/hour side by side;
    /// start-up on its own line (service.json, service.md).
    #[arg(long)]
    pub service: bool,
    /// --service: the source's length in seconds (1080p30 H.264 + AAC); default 20, 2 with
    /// --quick.
    #[arg(long)]
    pub seconds: Option<f64>,
    /// --service: an argument for `vidforge serve` (repeatable, e.g.
    /// `--server-arg=--render-slots=16`); none: its defaults.
    #[arg(long, allow_hyphen_values = true)]
    pub server_arg: Vec<String>,
    /// Internal: run one render described by this JSON file and write its report.
    #[arg(long, hide = true)]
    pub run_one: Option<PathBuf>,
}

pub fn run_bench(args: BenchArgs) -> anyhow::Result<()> {
    if let Some(job) = &args.run_one {
        return run_one(job);
    }
    if args.human_wait {
        if !args.think_seconds.is_finite() || args.think_seconds < 0.0 {
            bail!("--think-seconds must be a number of seconds, 0 or more");
        }
        let resolutions = args
            .resolutions
            .clone()
            .unwrap_or_else(|| ["720p", "1080p", "4k"].map(String::from).to_vec());
        return human_wait::run(human_wait::HumanWaitArgs {
            out: &args.out,
            resolutions: &resolutions,
            runs: args.repeats.unwrap_or(5).max(1),
            think: std::time::Duration::from_secs_f64(args.think_seconds),
            backend: args.backend.server_choice(),
        });
    }
    if args.service {
        return run_service(&args);
    }
    let started = Instant::now();
    if !synthetic::ffmpeg_available() {
        bail!("vidforge bench needs the ffmpeg CLI on PATH (it is the reference)");
    }
    let out = args.out.clone();
    let work = out.join("work");
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let (gpu, gpu_peer_text) = gpu_peer(args.gpu_peer)?;
    eprintln!("ffmpeg GPU pipeline: {gpu_peer_text}");
    let setup = Setup {
        work,
        repeats: args.repeats.unwrap_or(1).max(1),
        hardware: HardwareChoice {
            decode: args.hwdecode,
            encoder: args.encoder,
        },
        gpu,
        backends: match args.backend {
            BenchBackend::Cpu => vec![BackendChoice::Cpu],
            BenchBackend::Wgpu => vec![BackendChoice::Wgpu],
            BenchBackend::Both => vec![BackendChoice::Cpu, BackendChoice::Wgpu],
        },
    };
    let sources = Sources::generate(&setup.work, args.quick)?;
    let jobs = run_jobs(&setup, &sources, args.quick)?;
    let concurrency = run_concurrency(&setup, &sources, &args)?;
    let report = Report {
        vidforge_version: env!("CARGO_PKG_VERSION").to_string(),
        ffmpeg_version: ffmpeg_version(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        cpu_model: cpu_model(),
        quick: args.quick,
        command: std::env::args().collect::<Vec<_>>().join(" "),
        repeats: setup.repeats,
        opacity: OPACITY,
        gpu_peer: gpu_peer_text,
        jobs,
        concurrency,
        concurrency_job: format!(
            "1080p source ({} frames) → 720p mp4, watermark, {} backend",
            frames_of(sources.secs_1080),
            setup.backends[0].as_str()
        ),
        total_s: started.elapsed().as_secs_f64(),
    };
    let md = write_report(&out, &report)?;
    // Fixtures and outputs are large; the reports are what is kept.
    let _ = std::fs::remove_dir_all(&setup.work);
    println!("{md}");
    println!(
        "wrote {}/report.json, report.md, fps.svg in {:.0} s",
        out.display(),
        report.total_s
    );
    Ok(())
}

/// `--service`: its arguments checked and defaulted, the run.
fn run_service(args: &BenchArgs) -> anyhow::Result<()> {
    let resolutions = match &args.resolutions {
        None => vec![Resolution::P720],
        Some(names) => names
            .iter()
            .map(|n| Resolution::parse(n).with_context(|| format!("--resolutions: {n}?")))
            .collect::<anyhow::Result<_>>()?,
    };
    let seconds = args.seconds.unwrap_or(if args.quick { 2.0 } else { 20.0 });
    if !seconds.is_finite() || !(0.5..=600.0).contains(&seconds) {
        bail!("--seconds must be between 0.5 and 600");
    }
    let (gpu_peer, gpu_peer_text) = gpu_peer(args.gpu_peer)?;
    eprintln!("ffmpeg GPU pipeline: {gpu_peer_text}");
    service::run(service::ServiceArgs {
        out: &args.out,
        jobs: &args.jobs,
        resolutions: &resolutions,
        repeats: args.repeats.unwrap_or(1).max(1),
        seconds,
        server_args: &args.server_arg,
        gpu_peer,
        gpu_peer_text,
    })
}

/// What every measurement of one bench run shares.
struct Setup {
    /// Fixtures and outputs (removed at the end).
    work: PathBuf,
    /// Runs of each job per tool.
    repeats: u32,
    /// vidforge's decoder and encoder choices.
    hardware: HardwareChoice,
    /// ffmpeg's GPU pipeline, when measured.
    gpu: Option<Peer>,
    /// vidforge's compositor backends (the first one for the concurrency test).
    backends: Vec<BackendChoice>,
}

/// The fixtures: 30 fps testsrc2 with AAC stereo, H.264 (what users mostly upload), at
/// 1080p and 4k, and the watermark PNG.
struct Sources {
    src1080: PathBuf,
    src4k: PathBuf,
    secs_1080: f64,
    secs_4k: f64,
    logo: PathBuf,
}

impl Sources {
    fn generate(work: &Path, quick: bool) -> anyhow::Result<Sources> {
        let (secs_1080, secs_4k) = if quick { (2.0, 1.0) } else { (6.0, 3.0) };
        eprintln!("generating fixtures in {} ...", work.display());
        let src1080 = fixture(work, 1920, 1080, secs_1080)?;
        let src4k = fixture(work, 3840, 2160, secs_4k)?;
        let logo = synthetic::watermark_png(work, LOGO_SIZE.0, LOGO_SIZE.1, [255, 255, 255, 200])
            .context("writing the watermark PNG")?;
        Ok(Sources {
            src1080,
            src4k,
            secs_1080,
            secs_4k,
            logo,
        })
    }

    /// The jobs measured per tool: source name, source, frames, output resolution, format.
    fn configs(&self, quick: bool) -> Vec<(&'static str, &Path, u64, Resolution, OutputFormat)> {
        let mut configs = Vec::new();
        for (name, src, secs) in [
            ("1080p", &self.src1080, self.secs_1080),
            ("4k", &self.src4k, self.secs_4k),
        ] {
            for res in Resolution::ALL {
                configs.push((name, src.as_path(), frames_of(secs), res, OutputFormat::Mp4));
            }
            if !quick || name == "1080p" {
                configs.push((
                    name,
                    src.as_path(),
                    frames_of(secs),
                    Resolution::P720,
                    OutputFormat::Webm,
                ));
            }
        }
        configs
    }
}

/// Frames of a 30 fps fixture of `secs` seconds.
fn frames_of(secs: f64) -> u64 {
    (secs * 30.0f64).round() as u64
}

/// Every job on every backend, one tool after the other; a wgpu job that cannot run is
/// skipped.
fn run_jobs(setup: &Setup, sources: &Sources, quick: bool) -> anyhow::Result<Vec<JobResult>> {
    let mut jobs = Vec::new();
    for &backend in &setup.backends {
        for (src_name, src, frames, res, format) in sources.configs(quick) {
            let label = format!(
                "{src_name}→{} {} ({})",
                res.as_str(),
                format.as_str(),
                backend.as_str()
            );
            eprintln!("{label} ...");
            match measure_job(
                &setup.work,
                src,
                src_name,
                frames,
                res,
                format,
                &sources.logo,
                backend,
                setup.hardware,
                setup.gpu,
                setup.repeats,
            ) {
                Ok(mut j) => {
                    j.label = label;
                    eprintln!("{}", job_line(&j));
                    jobs.push(j);
                }
                Err(e) if backend == BackendChoice::Wgpu => {
                    eprintln!("  skipped: {e:#}");
                }
                Err(e) => return Err(e.context(format!("benchmarking {label}"))),
            }
        }
    }
    Ok(jobs)
}

/// The progress line of a measured job.
fn job_line(j: &JobResult) -> String {
    format!(
        "  vidforge {:.1} fps ({:.0} MB, {} decode, {}) | ffmpeg {:.1} fps ({:.0} MB) | ratio {:.2}{} | PSNR {}",
        j.vidforge.fps,
        j.vidforge.max_rss_mb,
        j.decoder,
        j.encoder,
        j.ffmpeg.fps,
        j.ffmpeg.max_rss_mb,
        j.ratio,
        j.ffmpeg_gpu
            .as_ref()
            .map(|g| format!(
                " | ffmpeg GPU {:.1} fps ({:.0} MB) | ratio {:.2}",
                g.fps,
                g.max_rss_mb,
                j.ratio_gpu.unwrap_or(0.0)
            ))
            .unwrap_or_default(),
        j.quality.cell()
    )
}

/// Concurrent throughput: the 1080p -> 720p mp4 job, N at once, each tool on its own.
fn run_concurrency(
    setup: &Setup,
    sources: &Sources,
    args: &BenchArgs,
) -> anyhow::Result<Vec<ConcurrencyResult>> {
    let mut concurrency = Vec::new();
    let levels: Vec<u32> = if args.quick {
        args.jobs.iter().copied().filter(|&n| n <= 2).collect()
    } else {
        args.jobs.clone()
    };
    for &n in levels.iter().filter(|&&n| n >= 1) {
        eprintln!("concurrency {n} ...");
        let tools = [None, Some(Peer::Cpu)]
            .into_iter()
            .chain(setup.gpu.map(Some));
        for tool in tools {
            let name = tool.map_or("vidforge", Peer::name);
            let r = match measure_concurrent(
                &setup.work,
                &sources.src1080,
                frames_of(sources.secs_1080),
                &sources.logo,
                setup.backends[0],
                setup.hardware,
                tool,
                n,
            ) {
                Ok(r) => r,
                // The GPU pipeline's failures are reported (the job table has the error).
                Err(e) if matches!(tool, Some(Peer::Gpu(_))) => {
                    eprintln!("  {name}: failed: {e:#}");
                    continue;
                }
                Err(e) => return Err(e.context(format!("{n} concurrent {name} renders"))),
            };
            eprintln!(
                "  {name}: {:.0} renders/h, {:.1} fps aggregate",
                r.renders_per_hour, r.aggregate_fps
            );
            concurrency.push(r);
        }
    }
    Ok(concurrency)
}

/// Writes `report.json`, `report.md` and `fps.svg` into `out`; returns the Markdown.
fn write_report(out: &Path, report: &Report) -> anyhow::Result<String> {
    std::fs::write(
        out.join("report.json"),
        serde_json::to_string_pretty(report)?,
    )?;
    let md = markdown(report);
    std::fs::write(out.join("report.md"), &md)?;
    std::fs::write(out.join("fps.svg"), svg_chart(report))?;
    Ok(md)
}

pub(crate) fn fixture(dir: &Path, w: u32, h: u32, secs: f64) -> anyhow::Result<PathBuf> {
    synthetic::clip(
        dir,
        &ClipSpec {
            seconds: secs,
            ..ClipSpec::h264(w, h)
        },
    )
    .with_context(|| format!("generating the {w}x{h} fixture"))
}
