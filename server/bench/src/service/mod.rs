//! `vidforge bench --service`: what a host serves. One `vidforge serve` (this binary, the
//! settings it is given, its defaults otherwise) takes N watermarked renders at once over
//! MCP, as agents send them: upload once, create, wait for the preview, approve, wait for the
//! result. Beside it, on the same job and the same machine, N `ffmpeg` processes at once, and
//! ffmpeg's GPU pipeline where there is a CUDA device. Renders per hour from the wall time of
//! the whole batch (first request to last result), medians of `--repeats`, the tools taking
//! turns. Start-up is reported on its own line (`vidforge render` and `ffmpeg` on a 1 s clip;
//! the server's boot until it answers), never mixed into the throughput.
//! Writes `service.json` and `service.md`.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;
use vidforge_media::synthetic;
use vidforge_media::{OutputFormat, Resolution};

use crate::child::{Job, Peer, output_path, peer_cmd, spawn, wait_rss};
use crate::load::ServerChild;
use crate::measure::median;
use crate::quality::QualityCheck;

mod agents;
mod report;

use crate::report::{cpu_model, ffmpeg_version};
use crate::{LOGO_SIZE, OPACITY, fixture};
use agents::batch;

/// Runs of each start-up measurement.
pub(super) const STARTUP_RUNS: usize = 5;

/// What `--service` measures.
pub struct ServiceArgs<'a> {
    pub out: &'a Path,
    /// Renders at once.
    pub jobs: &'a [u32],
    pub resolutions: &'a [Resolution],
    pub repeats: u32,
    /// The source's length (1080p30 H.264 + AAC).
    pub seconds: f64,
    /// Extra `vidforge serve` arguments (none: its defaults).
    pub server_args: &'a [String],
    pub gpu_peer: Option<Peer>,
    pub gpu_peer_text: String,
}

/// One resolution at one concurrency, every tool.
#[derive(Debug, Serialize)]
struct Row {
    resolution: String,
    renders_at_once: u32,
    /// Wall seconds of the batch, median of the repeats.
    vidforge_s: f64,
    ffmpeg_s: f64,
    ffmpeg_gpu_s: Option<f64>,
    vidforge_per_hour: f64,
    ffmpeg_per_hour: f64,
    ffmpeg_gpu_per_hour: Option<f64>,
    /// vidforge's renders/hour ÷ the peer's.
    ratio: f64,
    ratio_gpu: Option<f64>,
    /// Median time from a render's create call to its result, seconds (approval included).
    vidforge_latency_s: f64,
    /// Of which: create → preview ready (`input_required`), median seconds.
    vidforge_preview_s: f64,
    /// Both outputs' PSNR against the same reference, checked before the speeds compare.
    quality: Option<QualityCheck>,
    ffmpeg_gpu_error: Option<String>,
}

#[derive(Debug, Serialize)]
struct Startup {
    /// `vidforge render` (defaults) on a 1 s clip, process wall time, median.
    vidforge_render_s: f64,
    /// `ffmpeg` on the same job, median.
    ffmpeg_s: f64,
    /// `vidforge serve` from spawn until it answers `/healthz`.
    serve_ready_s: f64,
}

#[derive(Debug, Serialize)]
pub(super) struct ServiceReport {
    vidforge_version: String,
    ffmpeg_version: String,
    cpus: usize,
    cpu_model: String,
    command: String,
    source: String,
    server_args: Vec<String>,
    /// The server's banner lines naming what it chose and why.
    server_hardware: Vec<String>,
    gpu_peer: String,
    repeats: u32,
    startup: Startup,
    rows: Vec<Row>,
    total_s: f64,
}

/// Which tool a batch runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tool {
    Vidforge,
    Peer(Peer),
}

pub fn run(args: ServiceArgs<'_>) -> anyhow::Result<()> {
    if !synthetic::ffmpeg_available() {
        bail!("vidforge bench --service needs the ffmpeg CLI on PATH (the peer)");
    }
    if args.jobs.contains(&0) || args.jobs.is_empty() {
        bail!("--jobs: renders at once, each at least 1");
    }
    let started = Instant::now();
    std::fs::create_dir_all(args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let work = tempfile::tempdir().context("creating a temporary directory")?;
    let src = fixture(work.path(), 1920, 1080, args.seconds)?;
    let short_dir = work.path().join("short");
    std::fs::create_dir_all(&short_dir)?;
    let short = fixture(&short_dir, 1920, 1080, 1.0)?;
    let logo =
        synthetic::watermark_png(work.path(), LOGO_SIZE.0, LOGO_SIZE.1, [255, 255, 255, 200])
            .context("writing the watermark PNG")?;
    eprintln!("start-up: vidforge render and ffmpeg on a 1 s clip ...");
    let (vidforge_render_s, ffmpeg_s) = startup(work.path(), &short, &logo)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let extra: Vec<&str> = args.server_args.iter().map(String::as_str).collect();
    let boot = Instant::now();
    let mut server = ServerChild::start(&work.path().join("serve"), "auto", &extra)?;
    let measured = runtime.block_on(async {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()?;
        server.ready(&client).await?;
        let serve_ready_s = boot.elapsed().as_secs_f64();
        let clip = server.upload(&client, &src).await?;
        let wm = server.upload(&client, &logo).await?;
        eprintln!("warming the server up with one render ...");
        let warm = work.path().join("warm-up.mp4");
        batch(
            &client,
            &server.base,
            &clip,
            &wm,
            Resolution::P720,
            1,
            Some(&warm),
        )
        .await?;
        let rows = measure(
            &args,
            &client,
            &server.base,
            (&clip, &wm),
            work.path(),
            &src,
            &logo,
        )
        .await?;
        anyhow::Ok((serve_ready_s, rows))
    });
    let server_hardware = server.banner_hardware();
    server.stop();
    let (serve_ready_s, rows) = measured?;
    let report = ServiceReport {
        vidforge_version: env!("CARGO_PKG_VERSION").to_string(),
        ffmpeg_version: ffmpeg_version(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        cpu_model: cpu_model(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        source: format!(
            "1920x1080, {} s at 30 fps, H.264 + AAC (testsrc2); mp4 out, 400x200 watermark at \
             opacity {OPACITY}, libx264 veryfast CRF 23, audio copied",
            args.seconds
        ),
        server_args: args.server_args.to_vec(),
        server_hardware,
        gpu_peer: args.gpu_peer_text.clone(),
        repeats: args.repeats,
        startup: Startup {
            vidforge_render_s,
            ffmpeg_s,
            serve_ready_s,
        },
        rows,
        total_s: started.elapsed().as_secs_f64(),
    };
    std::fs::write(
        args.out.join("service.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    let md = report::markdown(&report);
    std::fs::write(args.out.join("service.md"), &md)?;
    println!("{md}");
    println!(
        "wrote {}/service.json and service.md in {:.0} s",
        args.out.display(),
        report.total_s
    );
    Ok(())
}

/// Start-up of one render as a process, each tool: medians of [`STARTUP_RUNS`].
fn startup(work: &Path, clip: &Path, logo: &Path) -> anyhow::Result<(f64, f64)> {
    let exe = std::env::current_exe().context("locating the vidforge binary")?;
    let log = work.join("startup.log");
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for i in 0..STARTUP_RUNS {
        let out = work.join(format!("startup-{i}.mp4"));
        let mut cmd = Command::new(&exe);
        cmd.arg("render")
            .arg(clip)
            .arg("-o")
            .arg(&out)
            .args(["-r", "720p", "--quiet", "--opacity", &OPACITY.to_string()])
            .arg("--watermark")
            .arg(logo)
            .env("RUST_LOG", "warn");
        let t = Instant::now();
        wait_rss(spawn(&mut cmd, &log)?, &log)?;
        ours.push(t.elapsed().as_secs_f64());
        let tag = format!("startup-{i}");
        let job = Job {
            work,
            tag: &tag,
            src: clip,
            res: Resolution::P720,
            format: OutputFormat::Mp4,
            logo,
        };
        let t = Instant::now();
        wait_rss(spawn(&mut peer_cmd(Peer::Cpu, &job)?, &log)?, &log)?;
        theirs.push(t.elapsed().as_secs_f64());
    }
    Ok((median(ours), median(theirs)))
}

/// Every resolution × concurrency, the tools taking turns run by run.
async fn measure(
    args: &ServiceArgs<'_>,
    client: &reqwest::Client,
    base: &str,
    (clip, wm): (&str, &str),
    work: &Path,
    src: &Path,
    logo: &Path,
) -> anyhow::Result<Vec<Row>> {
    let mut tools = vec![Tool::Vidforge, Tool::Peer(Peer::Cpu)];
    tools.extend(args.gpu_peer.map(Tool::Peer));
    let mut rows = Vec::new();
    for &res in args.resolutions {
        for &n in args.jobs {
            let mut walls: Vec<Vec<f64>> = tools.iter().map(|_| Vec::new()).collect();
            let mut latencies = Vec::new();
            let mut previews = Vec::new();
            let mut gpu_error = None;
            let vidforge_out = work.join(format!("{}-{n}-vidforge.mp4", res.as_str()));
            for run in 0..args.repeats {
                let mut order: Vec<usize> = (0..tools.len()).collect();
                order.rotate_left(run as usize % tools.len());
                for t in order {
                    let label = format!("{} × {n} run {}", res.as_str(), run + 1);
                    match tools[t] {
                        Tool::Vidforge => {
                            let keep = (run == 0).then_some(vidforge_out.as_path());
                            let (wall, times) = batch(client, base, clip, wm, res, n, keep).await?;
                            eprintln!("{label}: vidforge serve {wall:.2} s");
                            walls[t].push(wall);
                            latencies.extend(times.iter().map(|t| t.result));
                            previews.extend(times.iter().map(|t| t.preview));
                        }
                        Tool::Peer(peer) => {
                            let tag = format!("{}-{n}-{run}-{}", res.as_str(), peer.name());
                            match peers_at_once(peer, work, &tag, src, logo, res, n) {
                                Ok(wall) => {
                                    eprintln!("{label}: {} {wall:.2} s", peer.name());
                                    walls[t].push(wall);
                                }
                                Err(e) if matches!(peer, Peer::Gpu(_)) => {
                                    eprintln!("{label}: ffmpeg GPU pipeline failed: {e:#}");
                                    gpu_error = Some(format!("{e:#}"));
                                }
                                Err(e) => return Err(e),
                            }
                        }
                    }
                }
            }
            let mut row = row(res, n, &walls, median(latencies), gpu_error);
            row.vidforge_preview_s = median(previews);
            let gpu = args.gpu_peer.filter(|_| row.ffmpeg_gpu_s.is_some());
            row.quality = Some(quality(work, src, logo, res, n, &vidforge_out, gpu)?);
            rows.push(row);
        }
    }
    Ok(rows)
}

/// Both tools' first outputs of the row against the job's lossless reference (the peers'
/// files are named by [`peers_at_once`]'s tags: run 0, process 0).
fn quality(
    work: &Path,
    src: &Path,
    logo: &Path,
    res: Resolution,
    n: u32,
    vidforge: &Path,
    gpu_peer: Option<Peer>,
) -> anyhow::Result<QualityCheck> {
    let job = Job {
        work,
        tag: "quality",
        src,
        res,
        format: OutputFormat::Mp4,
        logo,
    };
    let peer_out = |peer: Peer| {
        let tag = format!("{}-{n}-0-{}-0", res.as_str(), peer.name());
        output_path(&Job { tag: &tag, ..job }, Some(peer))
    };
    let gpu = gpu_peer.map(peer_out);
    QualityCheck::of(&job, vidforge, &peer_out(Peer::Cpu), gpu.as_deref())
}

fn row(
    res: Resolution,
    n: u32,
    walls: &[Vec<f64>],
    latency: f64,
    gpu_error: Option<String>,
) -> Row {
    let per_hour = |s: f64| n as f64 * 3600.0 / s.max(1e-9);
    let vidforge_s = median(walls[0].clone());
    let ffmpeg_s = median(walls[1].clone());
    let ffmpeg_gpu_s = walls
        .get(2)
        .filter(|w| !w.is_empty() && gpu_error.is_none())
        .map(|w| median(w.clone()));
    Row {
        resolution: res.as_str().to_string(),
        renders_at_once: n,
        vidforge_s,
        ffmpeg_s,
        ffmpeg_gpu_s,
        vidforge_per_hour: per_hour(vidforge_s),
        ffmpeg_per_hour: per_hour(ffmpeg_s),
        ffmpeg_gpu_per_hour: ffmpeg_gpu_s.map(per_hour),
        ratio: ffmpeg_s / vidforge_s.max(1e-9),
        ratio_gpu: ffmpeg_gpu_s.map(|g| g / vidforge_s.max(1e-9)),
        vidforge_latency_s: latency,
        vidforge_preview_s: 0.0,
        quality: None,
        ffmpeg_gpu_error: gpu_error,
    }
}

/// The server's render threads run at nice [`RENDER_NICE`] (its `render_nice` default, so its
/// front answers first); the peers run there too, so that whatever else the machine runs
/// weighs on both alike.
const RENDER_NICE: &str = "10";

/// `cmd` run under `nice -n` [`RENDER_NICE`].
fn at_render_priority(cmd: Command) -> Command {
    let mut niced = Command::new("nice");
    niced
        .args(["-n", RENDER_NICE])
        .arg(cmd.get_program())
        .args(cmd.get_args());
    niced
}

/// `n` peer processes on the job at once; the wall time until the last one ends.
fn peers_at_once(
    peer: Peer,
    work: &Path,
    tag: &str,
    src: &Path,
    logo: &Path,
    res: Resolution,
    n: u32,
) -> anyhow::Result<f64> {
    let t = Instant::now();
    let mut children = Vec::new();
    for i in 0..n {
        let tag = format!("{tag}-{i}");
        let log = work.join(format!("{tag}.log"));
        let job = Job {
            work,
            tag: &tag,
            src,
            res,
            format: OutputFormat::Mp4,
            logo,
        };
        children.push((
            spawn(&mut at_render_priority(peer_cmd(peer, &job)?), &log)?,
            log,
        ));
    }
    for (child, log) in children {
        wait_rss(child, &log)?;
    }
    Ok(t.elapsed().as_secs_f64())
}
