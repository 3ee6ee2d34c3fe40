//! `vidforge bench`: vidforge and the ffmpeg CLI on identical jobs, side by side in one run.
//!
//! Every job runs in a child process (ours: this binary in a hidden single-render mode; theirs:
//! `ffmpeg`), alternating the two so machine noise hits both alike. Peak RSS comes from
//! `wait4`'s rusage of that child. Writes `report.json`, `report.md` and `fps.svg`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};
use vidforge_media::fixtures::{self, ClipSpec};
use vidforge_media::gpu::place_watermark;
use vidforge_media::{
    BackendChoice, EncoderSettings, Engine, OutputFormat, Position, RenderJob, Resolution,
    WatermarkSpec, output_size,
};

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
    /// Runs of each job per tool (vidforge and ffmpeg alternate); the median is reported.
    #[arg(long)]
    pub repeats: Option<u32>,
    /// Internal: run one render described by this JSON file and write its report.
    #[arg(long, hide = true)]
    pub run_one: Option<PathBuf>,
}

/// A single render, as handed to the child process.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct ChildJob {
    input: PathBuf,
    output: PathBuf,
    resolution: String,
    format: String,
    watermark: PathBuf,
    opacity: f32,
    backend: String,
    report: PathBuf,
}

/// What the child reports back about its render.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct ChildReport {
    frames: u64,
    backend: String,
    engine_init_s: f64,
    render_s: f64,
    decode_s: f64,
    compose_s: f64,
    encode_s: f64,
}

/// One measured run of one tool.
#[derive(Clone, Debug, Serialize)]
struct Run {
    wall_s: f64,
    fps: f64,
    max_rss_mb: f64,
    /// CPU seconds (user + system) per frame, in milliseconds.
    cpu_ms_per_frame: f64,
}

/// Per-stage throughput of one vidforge render (frames / busy time of that stage).
#[derive(Clone, Debug, Serialize)]
struct StageFps {
    demux_decode: f64,
    compose: f64,
    compose_ms_per_frame: f64,
    encode_mux: f64,
    /// Rendering fps inside the process (no process start, engine init excluded).
    render_only: f64,
    engine_init_ms: f64,
}

#[derive(Clone, Debug, Serialize)]
struct JobResult {
    label: String,
    source: String,
    output: String,
    width: u32,
    height: u32,
    format: String,
    backend: String,
    adapter: String,
    frames: u64,
    vidforge: Run,
    ffmpeg: Run,
    /// vidforge fps ÷ ffmpeg fps (end to end, process start included for both).
    ratio: f64,
    rss_ratio: f64,
    stages: StageFps,
    vidforge_runs: Vec<Run>,
    ffmpeg_runs: Vec<Run>,
}

#[derive(Clone, Debug, Serialize)]
struct ConcurrencyResult {
    tool: String,
    backend: String,
    renders_at_once: u32,
    wall_s: f64,
    renders_per_hour: f64,
    aggregate_fps: f64,
    max_rss_mb: f64,
}

#[derive(Clone, Debug, Serialize)]
struct Report {
    vidforge_version: String,
    ffmpeg_version: String,
    cpus: usize,
    cpu_model: String,
    quick: bool,
    command: String,
    repeats: u32,
    opacity: f32,
    jobs: Vec<JobResult>,
    concurrency: Vec<ConcurrencyResult>,
    concurrency_job: String,
    total_s: f64,
}

pub fn run_bench(args: BenchArgs) -> anyhow::Result<()> {
    if let Some(job) = &args.run_one {
        return run_one(job);
    }
    let started = Instant::now();
    if !fixtures::ffmpeg_available() {
        bail!("vidforge bench needs the ffmpeg CLI on PATH (it is the reference)");
    }
    let out = args.out.clone();
    let work = out.join("work");
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let repeats = args.repeats.unwrap_or(1).max(1);
    let backends: Vec<BackendChoice> = match args.backend {
        BenchBackend::Cpu => vec![BackendChoice::Cpu],
        BenchBackend::Wgpu => vec![BackendChoice::Wgpu],
        BenchBackend::Both => vec![BackendChoice::Cpu, BackendChoice::Wgpu],
    };

    // Fixtures: 30 fps testsrc2 with AAC stereo, H.264 (what users mostly upload).
    let (secs_1080, secs_4k) = if args.quick { (2.0, 1.0) } else { (6.0, 3.0) };
    eprintln!("generating fixtures in {} ...", work.display());
    let src1080 = fixture(&work, 1920, 1080, secs_1080)?;
    let src4k = fixture(&work, 3840, 2160, secs_4k)?;
    let logo = fixtures::watermark_png(&work, LOGO_SIZE.0, LOGO_SIZE.1, [255, 255, 255, 200])
        .context("writing the watermark PNG")?;
    let frames_of = |secs: f64| (secs * 30.0f64).round() as u64;

    let mut configs: Vec<(&str, &Path, u64, Resolution, OutputFormat)> = Vec::new();
    for (name, src, secs) in [("1080p", &src1080, secs_1080), ("4k", &src4k, secs_4k)] {
        for res in Resolution::ALL {
            configs.push((name, src.as_path(), frames_of(secs), res, OutputFormat::Mp4));
        }
        if !args.quick || name == "1080p" {
            configs.push((
                name,
                src.as_path(),
                frames_of(secs),
                Resolution::P720,
                OutputFormat::Webm,
            ));
        }
    }

    let mut jobs = Vec::new();
    for &backend in &backends {
        for &(src_name, src, frames, res, format) in &configs {
            let label = format!(
                "{src_name}→{} {} ({})",
                res.as_str(),
                format.as_str(),
                backend.as_str()
            );
            eprintln!("{label} ...");
            match measure_job(
                &work, src, src_name, frames, res, format, &logo, backend, repeats,
            ) {
                Ok(mut j) => {
                    j.label = label;
                    eprintln!(
                        "  vidforge {:.1} fps ({:.0} MB) | ffmpeg {:.1} fps ({:.0} MB) | ratio {:.2}",
                        j.vidforge.fps,
                        j.vidforge.max_rss_mb,
                        j.ffmpeg.fps,
                        j.ffmpeg.max_rss_mb,
                        j.ratio
                    );
                    jobs.push(j);
                }
                Err(e) if backend == BackendChoice::Wgpu => {
                    eprintln!("  skipped: {e:#}");
                }
                Err(e) => return Err(e.context(format!("benchmarking {label}"))),
            }
        }
    }

    // Concurrent throughput: the 1080p -> 720p mp4 job, N at once, each tool on its own.
    let mut concurrency = Vec::new();
    let levels: Vec<u32> = if args.quick {
        args.jobs.iter().copied().filter(|&n| n <= 2).collect()
    } else {
        args.jobs.clone()
    };
    let conc_backend = backends[0];
    for &n in levels.iter().filter(|&&n| n >= 1) {
        eprintln!("concurrency {n} ...");
        for tool in ["vidforge", "ffmpeg"] {
            let r = measure_concurrent(
                &work,
                &src1080,
                frames_of(secs_1080),
                &logo,
                conc_backend,
                tool,
                n,
            )
            .with_context(|| format!("{n} concurrent {tool} renders"))?;
            eprintln!(
                "  {tool}: {:.0} renders/h, {:.1} fps aggregate",
                r.renders_per_hour, r.aggregate_fps
            );
            concurrency.push(r);
        }
    }

    let report = Report {
        vidforge_version: env!("CARGO_PKG_VERSION").to_string(),
        ffmpeg_version: ffmpeg_version(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        cpu_model: cpu_model(),
        quick: args.quick,
        command: std::env::args().collect::<Vec<_>>().join(" "),
        repeats,
        opacity: OPACITY,
        jobs,
        concurrency,
        concurrency_job: format!(
            "1080p source ({} frames) → 720p mp4, watermark, {} backend",
            frames_of(secs_1080),
            conc_backend.as_str()
        ),
        total_s: started.elapsed().as_secs_f64(),
    };
    std::fs::write(
        out.join("report.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    let md = markdown(&report);
    std::fs::write(out.join("report.md"), &md)?;
    std::fs::write(out.join("fps.svg"), svg_chart(&report))?;
    // Fixtures and outputs are large; the reports are what is kept.
    let _ = std::fs::remove_dir_all(&work);
    println!("{md}");
    println!(
        "wrote {}/report.json, report.md, fps.svg in {:.0} s",
        out.display(),
        report.total_s
    );
    Ok(())
}

fn fixture(dir: &Path, w: u32, h: u32, secs: f64) -> anyhow::Result<PathBuf> {
    fixtures::clip(
        dir,
        &ClipSpec {
            seconds: secs,
            ..ClipSpec::h264(w, h)
        },
    )
    .with_context(|| format!("generating the {w}x{h} fixture"))
}

/// The hidden child mode: one in-process render, its report written as JSON.
fn run_one(path: &Path) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path:?}"))?;
    let job: ChildJob = serde_json::from_str(&text).context("parsing the bench job")?;
    let resolution = Resolution::parse(&job.resolution).context("bad resolution")?;
    let format = OutputFormat::parse(&job.format).context("bad format")?;
    let backend = BackendChoice::parse(&job.backend).context("bad backend")?;
    let t = Instant::now();
    let engine = Engine::new(backend)?;
    let engine_init_s = t.elapsed().as_secs_f64();
    let render = RenderJob {
        input: job.input.clone(),
        output: job.output.clone(),
        resolution,
        format,
        watermark: Some(WatermarkSpec {
            image: job.watermark.clone(),
            position: Position::BottomRight,
            opacity: job.opacity,
        }),
        encoder: EncoderSettings::default(),
    };
    let r = engine.render(&render, &mut |_| {}, &AtomicBool::new(false))?;
    let report = ChildReport {
        frames: r.frames,
        backend: r.backend,
        engine_init_s,
        render_s: r.elapsed.as_secs_f64(),
        decode_s: r.stage_times.decode.as_secs_f64(),
        compose_s: r.stage_times.compose.as_secs_f64(),
        encode_s: r.stage_times.encode.as_secs_f64(),
    };
    std::fs::write(&job.report, serde_json::to_string(&report)?)?;
    Ok(())
}

/// Spawns the child with stdout discarded and stderr to `log`.
fn spawn(cmd: &mut Command, log: &Path) -> anyhow::Result<Child> {
    let err = std::fs::File::create(log)?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(err))
        .spawn()
        .with_context(|| format!("starting {:?}", cmd.get_program()))
}

/// Resources one child used, from the kernel's rusage for that child.
#[derive(Clone, Copy, Debug)]
struct Usage {
    max_rss_mb: f64,
    /// User + system CPU seconds: less sensitive to other load on the machine than wall time.
    cpu_s: f64,
}

/// Reaps `child`, returning what it used.
fn wait_rss(child: Child, log: &Path) -> anyhow::Result<Usage> {
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain old data; zeroed is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: valid pointers to locals; pid is our own unreaped child.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if r < 0 && e.kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        bail!("waiting for child {pid}: {e}");
    }
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        let tail = std::fs::read_to_string(log).unwrap_or_default();
        let tail: String = tail
            .chars()
            .rev()
            .take(1500)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        bail!("child failed (status {status}): {tail}");
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    // ru_maxrss is in KiB on Linux.
    Ok(Usage {
        max_rss_mb: ru.ru_maxrss as f64 / 1024.0,
        cpu_s: secs(ru.ru_utime) + secs(ru.ru_stime),
    })
}

#[allow(clippy::too_many_arguments)]
fn vidforge_cmd(
    work: &Path,
    tag: &str,
    src: &Path,
    res: Resolution,
    format: OutputFormat,
    logo: &Path,
    backend: BackendChoice,
) -> anyhow::Result<(Command, PathBuf)> {
    let exe = std::env::current_exe().context("locating the vidforge binary")?;
    let report = work.join(format!("{tag}.report.json"));
    let job = ChildJob {
        input: src.to_path_buf(),
        output: work.join(format!("{tag}.vf.{}", format.extension())),
        resolution: res.as_str().into(),
        format: format.as_str().into(),
        watermark: logo.to_path_buf(),
        opacity: OPACITY,
        backend: backend.as_str().into(),
        report: report.clone(),
    };
    let job_path = work.join(format!("{tag}.job.json"));
    std::fs::write(&job_path, serde_json::to_string(&job)?)?;
    let mut cmd = Command::new(exe);
    cmd.arg("bench").arg("--run-one").arg(&job_path);
    cmd.env("RUST_LOG", "warn");
    if backend == BackendChoice::Wgpu && std::env::var_os("WGPU_BACKEND").is_none() {
        cmd.env("WGPU_BACKEND", "vulkan");
    }
    Ok((cmd, report))
}

/// The same job for the ffmpeg CLI: same decoder, scale filter, watermark placement and
/// opacity, encoder settings; audio copied to mp4, transcoded to Opus for webm (as we do).
fn ffmpeg_cmd(
    work: &Path,
    tag: &str,
    src: &Path,
    res: Resolution,
    format: OutputFormat,
    logo: &Path,
) -> anyhow::Result<Command> {
    let probe = vidforge_media::probe(src)?;
    let v = probe.video.context("fixture has no video")?;
    let (ow, oh) = output_size(v.display_width, v.display_height, res);
    let enlarging = (ow as u64 * oh as u64) > (v.width as u64 * v.height as u64);
    let flags = if enlarging { "bicubic" } else { "area" };
    let p = place_watermark(ow, oh, LOGO_SIZE.0, LOGO_SIZE.1, Position::BottomRight)
        .context("watermark does not fit")?;
    let graph = format!(
        "[0:v]scale={ow}:{oh}:flags={flags}[v];\
         [1:v]scale={}:{}:flags=area,format=rgba,colorchannelmixer=aa={OPACITY}[wm];\
         [v][wm]overlay={}:{}:format=yuv420[out]",
        p.width, p.height, p.x, p.y
    );
    let mut cmd = Command::new("ffmpeg");
    cmd.args(["-nostdin", "-hide_banner", "-v", "error", "-y", "-i"])
        .arg(src)
        .arg("-i")
        .arg(logo)
        .args(["-filter_complex", &graph, "-map", "[out]", "-map", "0:a?"]);
    match format {
        OutputFormat::Webm => {
            cmd.args([
                "-c:v",
                "libvpx-vp9",
                "-deadline",
                "realtime",
                "-cpu-used",
                "8",
                "-row-mt",
                "1",
                "-crf",
                "32",
                "-b:v",
                "0",
                "-c:a",
                "libopus",
                "-b:a",
                "96k",
            ]);
        }
        OutputFormat::Mp4 | OutputFormat::Mov => {
            cmd.args([
                "-c:v",
                "libx264",
                "-preset",
                "veryfast",
                "-crf",
                "23",
                "-c:a",
                "copy",
                "-movflags",
                "+faststart",
            ]);
        }
    }
    cmd.args(["-pix_fmt", "yuv420p"])
        .arg(work.join(format!("{tag}.ff.{}", format.extension())));
    Ok(cmd)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn summarize(runs: &[Run]) -> Run {
    let wall_s = median(runs.iter().map(|r| r.wall_s).collect());
    Run {
        wall_s,
        fps: median(runs.iter().map(|r| r.fps).collect()),
        max_rss_mb: median(runs.iter().map(|r| r.max_rss_mb).collect()),
        cpu_ms_per_frame: median(runs.iter().map(|r| r.cpu_ms_per_frame).collect()),
    }
}

#[allow(clippy::too_many_arguments)]
fn measure_job(
    work: &Path,
    src: &Path,
    src_name: &str,
    frames: u64,
    res: Resolution,
    format: OutputFormat,
    logo: &Path,
    backend: BackendChoice,
    repeats: u32,
) -> anyhow::Result<JobResult> {
    let tag = format!(
        "{src_name}-{}-{}-{}",
        res.as_str(),
        format.as_str(),
        backend.as_str()
    );
    let log = work.join(format!("{tag}.log"));
    let mut vf_runs = Vec::new();
    let mut ff_runs = Vec::new();
    let mut reports = Vec::new();
    for i in 0..repeats {
        // Alternate which tool goes first so drift in machine load is shared.
        let order: [bool; 2] = if i % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for ours in order {
            if ours {
                let (mut cmd, rep) = vidforge_cmd(work, &tag, src, res, format, logo, backend)?;
                let t = Instant::now();
                let child = spawn(&mut cmd, &log)?;
                let u = wait_rss(child, &log)?;
                let wall = t.elapsed().as_secs_f64();
                let r: ChildReport = serde_json::from_str(&std::fs::read_to_string(&rep)?)?;
                vf_runs.push(Run {
                    wall_s: wall,
                    fps: r.frames as f64 / wall,
                    max_rss_mb: u.max_rss_mb,
                    cpu_ms_per_frame: u.cpu_s * 1000.0 / r.frames.max(1) as f64,
                });
                reports.push(r);
            } else {
                let mut cmd = ffmpeg_cmd(work, &tag, src, res, format, logo)?;
                let t = Instant::now();
                let child = spawn(&mut cmd, &log)?;
                let u = wait_rss(child, &log)?;
                let wall = t.elapsed().as_secs_f64();
                ff_runs.push(Run {
                    wall_s: wall,
                    fps: frames as f64 / wall,
                    max_rss_mb: u.max_rss_mb,
                    cpu_ms_per_frame: u.cpu_s * 1000.0 / frames.max(1) as f64,
                });
            }
        }
    }
    let vf = summarize(&vf_runs);
    let ff = summarize(&ff_runs);
    let last = reports.last().context("no vidforge run")?;
    let per = |secs: Vec<f64>| {
        let s = median(secs);
        if s > 0.0 { last.frames as f64 / s } else { 0.0 }
    };
    let compose_s = median(reports.iter().map(|r| r.compose_s).collect());
    let stages = StageFps {
        demux_decode: per(reports.iter().map(|r| r.decode_s).collect()),
        compose: per(reports.iter().map(|r| r.compose_s).collect()),
        compose_ms_per_frame: compose_s * 1000.0 / last.frames.max(1) as f64,
        encode_mux: per(reports.iter().map(|r| r.encode_s).collect()),
        render_only: per(reports.iter().map(|r| r.render_s).collect()),
        engine_init_ms: median(reports.iter().map(|r| r.engine_init_s * 1000.0).collect()),
    };
    let probe = vidforge_media::probe(src)?;
    let v = probe.video.context("fixture has no video")?;
    let (w, h) = output_size(v.display_width, v.display_height, res);
    Ok(JobResult {
        label: String::new(),
        source: src_name.to_string(),
        output: res.as_str().to_string(),
        width: w,
        height: h,
        format: format.as_str().to_string(),
        backend: backend.as_str().to_string(),
        adapter: last.backend.clone(),
        frames: last.frames,
        ratio: vf.fps / ff.fps.max(1e-9),
        rss_ratio: vf.max_rss_mb / ff.max_rss_mb.max(1e-9),
        vidforge: vf,
        ffmpeg: ff,
        stages,
        vidforge_runs: vf_runs,
        ffmpeg_runs: ff_runs,
    })
}

fn measure_concurrent(
    work: &Path,
    src: &Path,
    frames: u64,
    logo: &Path,
    backend: BackendChoice,
    tool: &str,
    n: u32,
) -> anyhow::Result<ConcurrencyResult> {
    let mut children = Vec::new();
    let t = Instant::now();
    for i in 0..n {
        let tag = format!("conc-{tool}-{n}-{i}");
        let log = work.join(format!("{tag}.log"));
        let mut cmd = if tool == "vidforge" {
            vidforge_cmd(
                work,
                &tag,
                src,
                Resolution::P720,
                OutputFormat::Mp4,
                logo,
                backend,
            )?
            .0
        } else {
            ffmpeg_cmd(work, &tag, src, Resolution::P720, OutputFormat::Mp4, logo)?
        };
        children.push((spawn(&mut cmd, &log)?, log));
    }
    let mut max_rss: f64 = 0.0;
    for (child, log) in children {
        max_rss = max_rss.max(wait_rss(child, &log)?.max_rss_mb);
    }
    let wall = t.elapsed().as_secs_f64();
    Ok(ConcurrencyResult {
        tool: tool.to_string(),
        backend: if tool == "vidforge" {
            backend.as_str().to_string()
        } else {
            "ffmpeg".to_string()
        },
        renders_at_once: n,
        wall_s: wall,
        renders_per_hour: n as f64 * 3600.0 / wall.max(1e-9),
        aggregate_fps: (n as u64 * frames) as f64 / wall.max(1e-9),
        max_rss_mb: max_rss,
    })
}

fn ffmpeg_version() -> String {
    Command::new("ffmpeg")
        .arg("-version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(str::to_string)
        })
        .unwrap_or_default()
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn markdown(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "vidforge {} vs `{}` on {} × {} ({}; repeats {}, median; watermark at opacity {}).\n",
        r.vidforge_version,
        r.ffmpeg_version,
        r.cpus,
        r.cpu_model,
        if r.quick { "quick" } else { "full" },
        r.repeats,
        r.opacity
    );
    s.push_str(
        "| job | backend (adapter) | frames | vidforge fps | ffmpeg fps | ratio | vidforge RSS MB | ffmpeg RSS MB | vidforge CPU ms/frame | ffmpeg CPU ms/frame | decode fps | compose ms/frame | encode+mux fps |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for j in &r.jobs {
        let _ = writeln!(
            s,
            "| {} → {} {} ({}x{}) | {} ({}) | {} | {:.1} | {:.1} | **{:.2}×** | {:.0} | {:.0} | {:.1} | {:.1} | {:.0} | {:.2} | {:.0} |",
            j.source,
            j.output,
            j.format,
            j.width,
            j.height,
            j.backend,
            j.adapter,
            j.frames,
            j.vidforge.fps,
            j.ffmpeg.fps,
            j.ratio,
            j.vidforge.max_rss_mb,
            j.ffmpeg.max_rss_mb,
            j.vidforge.cpu_ms_per_frame,
            j.ffmpeg.cpu_ms_per_frame,
            j.stages.demux_decode,
            j.stages.compose_ms_per_frame,
            j.stages.encode_mux,
        );
    }
    if !r.concurrency.is_empty() {
        let _ = writeln!(s, "\nConcurrent throughput ({}):\n", r.concurrency_job);
        s.push_str(
            "| tool | renders at once | wall s | renders/hour | aggregate fps | peak RSS MB (one render) |\n|---|---:|---:|---:|---:|---:|\n",
        );
        for c in &r.concurrency {
            let _ = writeln!(
                s,
                "| {} | {} | {:.2} | {:.0} | {:.1} | {:.0} |",
                c.tool,
                c.renders_at_once,
                c.wall_s,
                c.renders_per_hour,
                c.aggregate_fps,
                c.max_rss_mb
            );
        }
    }
    let _ = writeln!(
        s,
        "\nfps = frames ÷ wall time of the whole process (start-up, probing, encoder flush and mux included) for both tools. Stage columns are vidforge's busy time per stage (stages run concurrently, so they overlap). Total benchmark time {:.0} s.",
        r.total_s
    );
    s
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Grouped bar chart: fps per job, one bar per vidforge backend and one for ffmpeg.
fn svg_chart(r: &Report) -> String {
    // Groups keyed by the job without the backend; ffmpeg measured with each backend's run:
    // take the first.
    let mut groups: Vec<(String, Vec<(String, f64)>)> = Vec::new();
    for j in &r.jobs {
        let key = format!("{}→{} {}", j.source, j.output, j.format);
        let idx = match groups.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                groups.push((key, vec![("ffmpeg".into(), j.ffmpeg.fps)]));
                groups.len() - 1
            }
        };
        groups[idx]
            .1
            .insert(0, (format!("vidforge {}", j.backend), j.vidforge.fps));
    }
    let series: Vec<String> = {
        let mut v: Vec<String> = Vec::new();
        for (_, bars) in &groups {
            for (name, _) in bars {
                if !v.contains(name) {
                    v.push(name.clone());
                }
            }
        }
        v.sort_by_key(|n| (n == "ffmpeg", n.clone()));
        v
    };
    let colors = ["#2b6cb0", "#38a169", "#d69e2e", "#e53e3e"];
    let color_of = |name: &str| {
        if name == "ffmpeg" {
            "#718096"
        } else {
            let i = series.iter().position(|s| s == name).unwrap_or(0);
            colors[i % colors.len()]
        }
    };
    let max = groups
        .iter()
        .flat_map(|(_, b)| b.iter().map(|(_, v)| *v))
        .fold(1.0f64, f64::max)
        * 1.1;
    let (left, top, plot_h, bar_w, gap) = (60.0, 50.0, 300.0, 22.0, 26.0);
    let group_w = series.len() as f64 * bar_w + gap;
    let width = left + groups.len() as f64 * group_w + 20.0;
    let height = top + plot_h + 90.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(
        s,
        r#"<rect width="100%" height="100%" fill="white"/><text x="{left}" y="20" font-size="14" font-weight="bold">End-to-end fps, vidforge vs ffmpeg CLI ({} cores, {})</text>"#,
        r.cpus,
        if r.quick { "quick" } else { "full" }
    );
    // Axis and grid.
    for k in 0..=5 {
        let v = max * k as f64 / 5.0;
        let y = top + plot_h - plot_h * k as f64 / 5.0;
        let _ = writeln!(
            s,
            r##"<line x1="{left}" x2="{:.0}" y1="{y:.1}" y2="{y:.1}" stroke="#e2e8f0"/><text x="{:.0}" y="{:.1}" text-anchor="end">{v:.0}</text>"##,
            width - 10.0,
            left - 5.0,
            y + 4.0
        );
    }
    for (gi, (key, bars)) in groups.iter().enumerate() {
        let gx = left + gi as f64 * group_w + gap / 2.0;
        for (si, name) in series.iter().enumerate() {
            let Some((_, v)) = bars.iter().find(|(n, _)| n == name) else {
                continue;
            };
            let h = plot_h * v / max;
            let x = gx + si as f64 * bar_w;
            let _ = writeln!(
                s,
                r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{h:.1}" fill="{}"><title>{} {}: {v:.1} fps</title></rect><text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="9">{v:.0}</text>"#,
                top + plot_h - h,
                bar_w - 2.0,
                color_of(name),
                xml_escape(name),
                xml_escape(key),
                x + bar_w / 2.0 - 1.0,
                top + plot_h - h - 3.0
            );
        }
        let cx = gx + series.len() as f64 * bar_w / 2.0;
        let _ = writeln!(
            s,
            r#"<text x="{cx:.1}" y="{:.1}" text-anchor="end" transform="rotate(-30 {cx:.1} {:.1})">{}</text>"#,
            top + plot_h + 14.0,
            top + plot_h + 14.0,
            xml_escape(key)
        );
    }
    for (si, name) in series.iter().enumerate() {
        let x = left + si as f64 * 130.0;
        let _ = writeln!(
            s,
            r#"<rect x="{x:.0}" y="30" width="10" height="10" fill="{}"/><text x="{:.0}" y="39">{}</text>"#,
            color_of(name),
            x + 14.0,
            xml_escape(name)
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_even_and_odd() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(vec![]), 0.0);
    }

    #[test]
    fn ffmpeg_command_reproduces_placement_and_settings() {
        let dir = tempfile::tempdir().unwrap();
        if !fixtures::ffmpeg_available() {
            eprintln!("NOTE: ffmpeg CLI missing; skipping");
            return;
        }
        let src = fixture(dir.path(), 320, 180, 0.2).unwrap();
        let logo = dir.path().join("logo.png");
        let cmd = ffmpeg_cmd(
            dir.path(),
            "t",
            &src,
            Resolution::P720,
            OutputFormat::Mp4,
            &logo,
        )
        .unwrap();
        let args: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let graph = &args[args.iter().position(|a| a == "-filter_complex").unwrap() + 1];
        // 320x180 -> 1280x720 enlarges: bicubic, like the CPU compositor.
        assert!(graph.contains("scale=1280:720:flags=bicubic"), "{graph}");
        let p =
            place_watermark(1280, 720, LOGO_SIZE.0, LOGO_SIZE.1, Position::BottomRight).unwrap();
        assert!(
            graph.contains(&format!("overlay={}:{}", p.x, p.y)),
            "{graph}"
        );
        assert!(graph.contains("colorchannelmixer=aa=0.6"), "{graph}");
        for want in ["libx264", "veryfast", "copy"] {
            assert!(args.iter().any(|a| a == want), "{want} missing: {args:?}");
        }
    }

    #[test]
    fn markdown_and_svg_render_a_report() {
        let run = Run {
            wall_s: 1.0,
            fps: 100.0,
            max_rss_mb: 50.0,
            cpu_ms_per_frame: 15.0,
        };
        let job = JobResult {
            label: "x".into(),
            source: "1080p".into(),
            output: "720p".into(),
            width: 1280,
            height: 720,
            format: "mp4".into(),
            backend: "cpu".into(),
            adapter: "cpu".into(),
            frames: 100,
            vidforge: run.clone(),
            ffmpeg: Run {
                fps: 80.0,
                ..run.clone()
            },
            ratio: 1.25,
            rss_ratio: 1.0,
            stages: StageFps {
                demux_decode: 300.0,
                compose: 900.0,
                compose_ms_per_frame: 1.1,
                encode_mux: 120.0,
                render_only: 110.0,
                engine_init_ms: 1.0,
            },
            vidforge_runs: vec![run.clone()],
            ffmpeg_runs: vec![run],
        };
        let report = Report {
            vidforge_version: "1".into(),
            ffmpeg_version: "ffmpeg version 5.1".into(),
            cpus: 2,
            cpu_model: "test".into(),
            quick: true,
            command: "vidforge bench --quick".into(),
            repeats: 1,
            opacity: OPACITY,
            jobs: vec![job],
            concurrency: vec![],
            concurrency_job: String::new(),
            total_s: 1.0,
        };
        let md = markdown(&report);
        assert!(md.contains("**1.25×**"), "{md}");
        assert!(md.contains("1080p → 720p mp4 (1280x720)"), "{md}");
        let svg = svg_chart(&report);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("vidforge cpu") && svg.contains("ffmpeg"));
    }
}
