//! Measuring: one job per tool (alternating, median of the repeats) and N renders at once.

use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use serde::Serialize;
use vidforge_media::{BackendChoice, HardwareChoice, OutputFormat, Resolution, output_size};

use super::child::{ChildReport, Job, Peer, output_path, peer_cmd, spawn, vidforge_cmd, wait_rss};
use super::quality::QualityCheck;

/// One measured run of one tool.
#[derive(Clone, Debug, Serialize)]
pub(super) struct Run {
    pub(super) wall_s: f64,
    pub(super) fps: f64,
    pub(super) max_rss_mb: f64,
    /// CPU seconds (user + system) per frame, in milliseconds.
    pub(super) cpu_ms_per_frame: f64,
}

/// Per-stage throughput of one vidforge render (frames / busy time of that stage).
#[derive(Clone, Debug, Serialize)]
pub(super) struct StageFps {
    pub(super) demux_decode: f64,
    pub(super) compose: f64,
    pub(super) compose_ms_per_frame: f64,
    pub(super) encode_mux: f64,
    /// Rendering fps inside the process (no process start, engine init excluded).
    pub(super) render_only: f64,
    pub(super) engine_init_ms: f64,
}

#[derive(Clone, Debug, Serialize)]
pub(super) struct JobResult {
    pub(super) label: String,
    pub(super) source: String,
    pub(super) output: String,
    pub(super) width: u32,
    pub(super) height: u32,
    pub(super) format: String,
    pub(super) backend: String,
    pub(super) adapter: String,
    /// vidforge's decoder (`nvdec` or `software`) and video encoder.
    pub(super) decoder: String,
    pub(super) encoder: String,
    pub(super) frames: u64,
    pub(super) vidforge: Run,
    pub(super) ffmpeg: Run,
    /// vidforge fps ÷ ffmpeg fps (end to end, process start included for both).
    pub(super) ratio: f64,
    /// ffmpeg's GPU pipeline on the same job, when measured.
    pub(super) ffmpeg_gpu: Option<Run>,
    /// vidforge fps ÷ ffmpeg GPU pipeline fps.
    pub(super) ratio_gpu: Option<f64>,
    /// Why the GPU pipeline has no numbers for this job (it failed, or cannot do it).
    pub(super) ffmpeg_gpu_error: Option<String>,
    pub(super) rss_ratio: f64,
    /// Both outputs' PSNR against one reference, checked before the speed is compared.
    pub(super) quality: QualityCheck,
    pub(super) stages: StageFps,
    pub(super) vidforge_runs: Vec<Run>,
    pub(super) ffmpeg_runs: Vec<Run>,
}

#[derive(Clone, Debug, Serialize)]
pub(super) struct ConcurrencyResult {
    pub(super) tool: String,
    pub(super) backend: String,
    pub(super) renders_at_once: u32,
    pub(super) wall_s: f64,
    pub(super) renders_per_hour: f64,
    pub(super) aggregate_fps: f64,
    pub(super) max_rss_mb: f64,
}

pub(super) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

pub(super) fn summarize(runs: &[Run]) -> Run {
    let wall_s = median(runs.iter().map(|r| r.wall_s).collect());
    Run {
        wall_s,
        fps: median(runs.iter().map(|r| r.fps).collect()),
        max_rss_mb: median(runs.iter().map(|r| r.max_rss_mb).collect()),
        cpu_ms_per_frame: median(runs.iter().map(|r| r.cpu_ms_per_frame).collect()),
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn measure_job(
    work: &Path,
    src: &Path,
    src_name: &str,
    frames: u64,
    res: Resolution,
    format: OutputFormat,
    logo: &Path,
    backend: BackendChoice,
    hardware: HardwareChoice,
    gpu_peer: Option<Peer>,
    repeats: u32,
) -> anyhow::Result<JobResult> {
    let tag = format!(
        "{src_name}-{}-{}-{}",
        res.as_str(),
        format.as_str(),
        backend.as_str()
    );
    let log = work.join(format!("{tag}.log"));
    // The GPU pipeline only where it can do the job; a failure is recorded, not fatal.
    let gpu_peer = gpu_peer.filter(|_| format != OutputFormat::Webm);
    let job = Job {
        work,
        tag: &tag,
        src,
        res,
        format,
        logo,
    };
    let Rounds {
        vf_runs,
        ff_runs,
        gpu_runs,
        mut gpu_error,
        reports,
    } = run_rounds(&job, backend, hardware, &log, frames, gpu_peer, repeats)?;
    if gpu_error.is_none() && format == OutputFormat::Webm {
        gpu_error = Some("no VP9 encoder on NVIDIA GPUs".to_string());
    }
    let vf = summarize(&vf_runs);
    let ff = summarize(&ff_runs);
    let ffmpeg_gpu = (!gpu_runs.is_empty() && gpu_error.is_none()).then(|| summarize(&gpu_runs));
    let gpu_out = gpu_peer
        .filter(|_| ffmpeg_gpu.is_some())
        .map(|p| output_path(&job, Some(p)));
    let quality = QualityCheck::of(
        &job,
        &output_path(&job, None),
        &output_path(&job, Some(Peer::Cpu)),
        gpu_out.as_deref(),
    )
    .context("measuring the outputs' quality")?;
    let last = reports.last().context("no vidforge run")?;
    let stages = stage_fps(&reports, last.frames);
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
        decoder: last.decoder.clone(),
        encoder: last.encoder.clone(),
        frames: last.frames,
        ratio: vf.fps / ff.fps.max(1e-9),
        ratio_gpu: ffmpeg_gpu.as_ref().map(|g| vf.fps / g.fps.max(1e-9)),
        ffmpeg_gpu,
        ffmpeg_gpu_error: gpu_error,
        rss_ratio: vf.max_rss_mb / ff.max_rss_mb.max(1e-9),
        quality,
        vidforge: vf,
        ffmpeg: ff,
        stages,
        vidforge_runs: vf_runs,
        ffmpeg_runs: ff_runs,
    })
}

/// What the rounds of one job measured: each tool's runs, vidforge's reports, and why the
/// GPU pipeline stopped, if it did.
struct Rounds {
    vf_runs: Vec<Run>,
    ff_runs: Vec<Run>,
    gpu_runs: Vec<Run>,
    gpu_error: Option<String>,
    reports: Vec<ChildReport>,
}

/// `repeats` rounds of vidforge, ffmpeg and (while it works) ffmpeg's GPU pipeline on `job`,
/// the order rotated each round so drift in machine load is shared.
fn run_rounds(
    job: &Job,
    backend: BackendChoice,
    hardware: HardwareChoice,
    log: &Path,
    frames: u64,
    mut gpu_peer: Option<Peer>,
    repeats: u32,
) -> anyhow::Result<Rounds> {
    let mut r = Rounds {
        vf_runs: Vec::new(),
        ff_runs: Vec::new(),
        gpu_runs: Vec::new(),
        gpu_error: None,
        reports: Vec::new(),
    };
    let run_peer = |peer: Peer| run_peer(peer, job, log, frames);
    for i in 0..repeats {
        let mut order = [0u8, 1, 2];
        order.rotate_left(i as usize % 3);
        for tool in order {
            match tool {
                0 => {
                    let (run, report) = run_vidforge(job, backend, hardware, log)?;
                    r.vf_runs.push(run);
                    r.reports.push(report);
                }
                1 => r.ff_runs.push(run_peer(Peer::Cpu)?),
                _ => {
                    if let Some(peer) = gpu_peer {
                        match run_peer(peer) {
                            Ok(run) => r.gpu_runs.push(run),
                            Err(e) => {
                                eprintln!("  ffmpeg GPU pipeline failed: {e:#}");
                                r.gpu_error = Some(format!("{e:#}"));
                                gpu_peer = None;
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(r)
}

/// One run of vidforge's child on `job`: its timings and the report it wrote.
fn run_vidforge(
    job: &Job,
    backend: BackendChoice,
    hardware: HardwareChoice,
    log: &Path,
) -> anyhow::Result<(Run, ChildReport)> {
    let (mut cmd, rep) = vidforge_cmd(job, backend, hardware)?;
    let t = Instant::now();
    let child = spawn(&mut cmd, log)?;
    let u = wait_rss(child, log)?;
    let wall = t.elapsed().as_secs_f64();
    let r: ChildReport = serde_json::from_str(&std::fs::read_to_string(&rep)?)?;
    let run = Run {
        wall_s: wall,
        fps: r.frames as f64 / wall,
        max_rss_mb: u.max_rss_mb,
        cpu_ms_per_frame: u.cpu_s * 1000.0 / r.frames.max(1) as f64,
    };
    Ok((run, r))
}

/// One run of a peer (ffmpeg on the CPU or its GPU pipeline) on `job` of `frames` frames.
fn run_peer(peer: Peer, job: &Job, log: &Path, frames: u64) -> anyhow::Result<Run> {
    let mut cmd = peer_cmd(peer, job)?;
    let t = Instant::now();
    let child = spawn(&mut cmd, log)?;
    let u = wait_rss(child, log)?;
    let wall = t.elapsed().as_secs_f64();
    Ok(Run {
        wall_s: wall,
        fps: frames as f64 / wall,
        max_rss_mb: u.max_rss_mb,
        cpu_ms_per_frame: u.cpu_s * 1000.0 / frames.max(1) as f64,
    })
}

/// Per-stage rates of vidforge's runs (medians), for `frames` frames.
fn stage_fps(reports: &[ChildReport], frames: u64) -> StageFps {
    let per = |secs: Vec<f64>| {
        let s = median(secs);
        if s > 0.0 { frames as f64 / s } else { 0.0 }
    };
    let compose_s = median(reports.iter().map(|r| r.compose_s).collect());
    StageFps {
        demux_decode: per(reports.iter().map(|r| r.decode_s).collect()),
        compose: per(reports.iter().map(|r| r.compose_s).collect()),
        compose_ms_per_frame: compose_s * 1000.0 / frames.max(1) as f64,
        encode_mux: per(reports.iter().map(|r| r.encode_s).collect()),
        render_only: per(reports.iter().map(|r| r.render_s).collect()),
        engine_init_ms: median(reports.iter().map(|r| r.engine_init_s * 1000.0).collect()),
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn measure_concurrent(
    work: &Path,
    src: &Path,
    frames: u64,
    logo: &Path,
    backend: BackendChoice,
    hardware: HardwareChoice,
    tool: Option<Peer>,
    n: u32,
) -> anyhow::Result<ConcurrencyResult> {
    let name = tool.map_or("vidforge", Peer::name);
    let mut children = Vec::new();
    let t = Instant::now();
    for i in 0..n {
        let tag = format!("conc-{name}-{n}-{i}");
        let log = work.join(format!("{tag}.log"));
        let job = Job {
            work,
            tag: &tag,
            src,
            res: Resolution::P720,
            format: OutputFormat::Mp4,
            logo,
        };
        let mut cmd = match tool {
            None => vidforge_cmd(&job, backend, hardware)?.0,
            Some(peer) => peer_cmd(peer, &job)?,
        };
        children.push((spawn(&mut cmd, &log)?, log));
    }
    let mut max_rss: f64 = 0.0;
    for (child, log) in children {
        max_rss = max_rss.max(wait_rss(child, &log)?.max_rss_mb);
    }
    let wall = t.elapsed().as_secs_f64();
    Ok(ConcurrencyResult {
        tool: name.to_string(),
        backend: if tool.is_none() {
            backend.as_str().to_string()
        } else {
            name.to_string()
        },
        renders_at_once: n,
        wall_s: wall,
        renders_per_hour: n as f64 * 3600.0 / wall.max(1e-9),
        aggregate_fps: (n as u64 * frames) as f64 / wall.max(1e-9),
        max_rss_mb: max_rss,
    })
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
}
