//! The child processes: vidforge's hidden single-render mode and both tools' command lines,
//! spawned with their output discarded and reaped with `wait4` for their rusage.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use vidforge_media::gpu::{Placement, place_watermark};
use vidforge_media::{
    BackendChoice, EncoderChoice, EncoderSettings, Engine, H264Encoder, HardwareChoice,
    HwDecodeChoice, OutputFormat, Position, RenderJob, Resolution, WatermarkSpec, Workload,
    output_size,
};

use super::{LOGO_SIZE, OPACITY};

/// A single render, as handed to the child process.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct ChildJob {
    pub(super) input: PathBuf,
    pub(super) output: PathBuf,
    pub(super) resolution: String,
    pub(super) format: String,
    pub(super) watermark: PathBuf,
    pub(super) opacity: f32,
    pub(super) backend: String,
    pub(super) hwdecode: String,
    pub(super) encoder: String,
    pub(super) report: PathBuf,
}

/// What the child reports back about its render.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct ChildReport {
    pub(super) frames: u64,
    pub(super) backend: String,
    /// `nvdec` or `software`.
    pub(super) decoder: String,
    pub(super) encoder: String,
    pub(super) engine_init_s: f64,
    pub(super) render_s: f64,
    pub(super) decode_s: f64,
    pub(super) compose_s: f64,
    pub(super) encode_s: f64,
}

/// The hidden child mode: one in-process render, its report written as JSON.
pub(super) fn run_one(path: &Path) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path:?}"))?;
    let job: ChildJob = serde_json::from_str(&text).context("parsing the bench job")?;
    let resolution = Resolution::parse(&job.resolution).context("bad resolution")?;
    let format = OutputFormat::parse(&job.format).context("bad format")?;
    let backend = BackendChoice::parse(&job.backend).context("bad backend")?;
    let hardware = HardwareChoice {
        decode: HwDecodeChoice::from_any_case(&job.hwdecode).context("bad hwdecode")?,
        encoder: EncoderChoice::from_any_case(&job.encoder).context("bad encoder")?,
        ..Default::default()
    };
    let t = Instant::now();
    let workload = Workload::One {
        h264: format != OutputFormat::Webm,
    };
    let engine = Engine::with_hardware(backend, hardware, workload)?;
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
        hdr: Default::default(),
    };
    let r = engine.render(&render, &mut |_| {}, &AtomicBool::new(false))?;
    let report = ChildReport {
        frames: r.frames,
        backend: r.backend,
        decoder: r.decoder,
        encoder: r.encoder,
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
pub(super) fn spawn(cmd: &mut Command, log: &Path) -> anyhow::Result<Child> {
    let err = std::fs::File::create(log)?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(err))
        .spawn()
        .with_context(|| format!("starting {:?}", cmd.get_program()))
}

/// Resources one child used, from the kernel's rusage for that child.
#[derive(Clone, Copy, Debug)]
pub(super) struct Usage {
    pub(super) max_rss_mb: f64,
    /// User + system CPU seconds: less sensitive to other load on the machine than wall time.
    pub(super) cpu_s: f64,
}

/// Reaps `child`, returning what it used.
pub(super) fn wait_rss(child: Child, log: &Path) -> anyhow::Result<Usage> {
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

/// One job as every tool gets it: its files (under `work`, named after `tag`) and settings.
#[derive(Clone, Copy, Debug)]
pub(super) struct Job<'a> {
    pub(super) work: &'a Path,
    pub(super) tag: &'a str,
    pub(super) src: &'a Path,
    pub(super) res: Resolution,
    pub(super) format: OutputFormat,
    pub(super) logo: &'a Path,
}

/// Where `tool` (`None`: vidforge) writes `job`'s output.
pub(super) fn output_path(job: &Job, tool: Option<Peer>) -> PathBuf {
    let who = match tool {
        None => "vf",
        Some(Peer::Cpu) => "ff",
        Some(Peer::Gpu(_)) => "ffgpu",
    };
    job.work
        .join(format!("{}.{who}.{}", job.tag, job.format.extension()))
}

/// vidforge's child for `job`, and the path its report will be written to.
pub(super) fn vidforge_cmd(
    job: &Job,
    backend: BackendChoice,
    hardware: HardwareChoice,
) -> anyhow::Result<(Command, PathBuf)> {
    let &Job {
        work,
        tag,
        src,
        res,
        format,
        logo,
    } = job;
    let exe = std::env::current_exe().context("locating the vidforge binary")?;
    let report = work.join(format!("{tag}.report.json"));
    let child = ChildJob {
        input: src.to_path_buf(),
        output: output_path(job, None),
        resolution: res.as_str().into(),
        format: format.as_str().into(),
        watermark: logo.to_path_buf(),
        opacity: OPACITY,
        backend: backend.as_str().into(),
        hwdecode: hardware.decode.as_str().into(),
        encoder: hardware.encoder.as_str().into(),
        report: report.clone(),
    };
    let job_path = work.join(format!("{tag}.job.json"));
    std::fs::write(&job_path, serde_json::to_string(&child)?)?;
    let mut cmd = Command::new(exe);
    cmd.arg("bench").arg("--run-one").arg(&job_path);
    cmd.env("RUST_LOG", "warn");
    if backend == BackendChoice::Wgpu && std::env::var_os("WGPU_BACKEND").is_none() {
        cmd.env("WGPU_BACKEND", "vulkan");
    }
    Ok((cmd, report))
}

/// Which ffmpeg a command line is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Peer {
    /// Plain `ffmpeg`: software decode, `scale` + `overlay`, libx264 / libvpx-vp9.
    Cpu,
    /// ffmpeg's GPU pipeline: NVDEC (`-hwaccel cuda`, frames stay on the GPU), `scale_cuda`
    /// + `overlay_cuda`, then NVENC, or `hwdownload` + libx264 where the card has no NVENC.
    Gpu(H264Encoder),
}

impl Peer {
    pub(super) fn name(self) -> &'static str {
        match self {
            Peer::Cpu => "ffmpeg",
            Peer::Gpu(_) => "ffmpeg-gpu",
        }
    }
}

/// The job's output size and watermark placement, as vidforge computes them.
pub(super) fn geometry(
    src: &Path,
    res: Resolution,
) -> anyhow::Result<((u32, u32), bool, Placement)> {
    let probe = vidforge_media::probe(src)?;
    let v = probe.video.context("fixture has no video")?;
    let (ow, oh) = output_size(v.display_width, v.display_height, res);
    let enlarging = (ow as u64 * oh as u64) > (v.width as u64 * v.height as u64);
    let p = place_watermark(ow, oh, LOGO_SIZE.0, LOGO_SIZE.1, Position::BottomRight)
        .context("watermark does not fit")?;
    Ok(((ow, oh), enlarging, p))
}

/// The H.264 settings both tools use: x264 veryfast CRF 23, or NVENC constant quality 23
/// (the options vidforge's muxer sets).
fn h264_args(cmd: &mut Command, encoder: H264Encoder) {
    match encoder {
        H264Encoder::X264 => cmd.args(["-c:v", "libx264", "-preset", "veryfast", "-crf", "23"]),
        H264Encoder::Nvenc => cmd.args([
            "-c:v",
            "h264_nvenc",
            "-preset",
            "p4",
            "-tune",
            "hq",
            "-rc",
            "vbr",
            "-cq",
            "23",
            "-b:v",
            "0",
        ]),
    };
    cmd.args(["-c:a", "copy", "-movflags", "+faststart"]);
}

/// The job for `peer`: the same scale, watermark placement and opacity, encoder settings;
/// audio copied to mp4, transcoded to Opus for webm (as we do). The GPU pipeline takes
/// mp4/mov only (VP9 has no NVIDIA encoder).
pub(super) fn peer_cmd(peer: Peer, job: &Job) -> anyhow::Result<Command> {
    match peer {
        Peer::Cpu => ffmpeg_cmd(job),
        Peer::Gpu(encoder) => ffmpeg_gpu_cmd(job, encoder),
    }
}

fn ffmpeg_gpu_cmd(job: &Job, encoder: H264Encoder) -> anyhow::Result<Command> {
    let &Job {
        src,
        res,
        format,
        logo,
        ..
    } = job;
    if format == OutputFormat::Webm {
        bail!("ffmpeg's GPU pipeline has no VP9 encoder");
    }
    let ((ow, oh), _, p) = geometry(src, res)?;
    // overlay_cuda blends a yuva420p overlay over yuv420p only: scale_cuda converts NVDEC's
    // NV12 on the way.
    let tail = match encoder {
        H264Encoder::Nvenc => "[out]",
        H264Encoder::X264 => "[o];[o]hwdownload,format=yuv420p[out]",
    };
    let graph = format!(
        "[0:v]scale_cuda={ow}:{oh}:format=yuv420p[v];\
         [1:v]scale={}:{}:flags=area,format=rgba,colorchannelmixer=aa={OPACITY},format=yuva420p,hwupload_cuda[wm];\
         [v][wm]overlay_cuda={}:{}{tail}",
        p.width, p.height, p.x, p.y
    );
    let mut cmd = Command::new("ffmpeg");
    cmd.args(["-nostdin", "-hide_banner", "-v", "error", "-y"])
        .args(["-hwaccel", "cuda", "-hwaccel_output_format", "cuda", "-i"])
        .arg(src)
        .arg("-i")
        .arg(logo)
        .args(["-filter_complex", &graph, "-map", "[out]", "-map", "0:a?"]);
    h264_args(&mut cmd, encoder);
    cmd.arg(output_path(job, Some(Peer::Gpu(encoder))));
    Ok(cmd)
}

/// Plain ffmpeg: same decoder, scale filter, watermark placement and opacity, encoder
/// settings.
fn ffmpeg_cmd(job: &Job) -> anyhow::Result<Command> {
    let &Job {
        src,
        res,
        format,
        logo,
        ..
    } = job;
    let ((ow, oh), enlarging, p) = geometry(src, res)?;
    let flags = if enlarging { "bicubic" } else { "area" };
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
        OutputFormat::Mp4 | OutputFormat::Mov => h264_args(&mut cmd, H264Encoder::X264),
    }
    cmd.args(["-pix_fmt", "yuv420p"])
        .arg(output_path(job, Some(Peer::Cpu)));
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use super::super::fixture;
    use super::*;
    use vidforge_media::synthetic;

    /// A short fixture clip of `w x h` and the watermark's path in `dir` (the ffmpeg CLI is a
    /// build dependency of the tests: scripts/install-deps.sh).
    fn clip_and_logo(dir: &Path, w: u32, h: u32) -> (PathBuf, PathBuf) {
        assert!(
            synthetic::ffmpeg_available(),
            "the ffmpeg CLI is missing (scripts/install-deps.sh installs it)"
        );
        (fixture(dir, w, h, 0.2).unwrap(), dir.join("logo.png"))
    }

    /// A 720p job named `t` in `dir`.
    fn test_job<'a>(dir: &'a Path, src: &'a Path, format: OutputFormat, logo: &'a Path) -> Job<'a> {
        Job {
            work: dir,
            tag: "t",
            src,
            res: Resolution::P720,
            format,
            logo,
        }
    }

    #[test]
    fn ffmpeg_command_reproduces_placement_and_settings() {
        let dir = tempfile::tempdir().unwrap();
        let (src, logo) = clip_and_logo(dir.path(), 320, 180);
        let cmd = peer_cmd(
            Peer::Cpu,
            &test_job(dir.path(), &src, OutputFormat::Mp4, &logo),
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
    fn gpu_pipeline_command_keeps_frames_on_the_gpu_and_matches_the_encoder() {
        let dir = tempfile::tempdir().unwrap();
        let (src, logo) = clip_and_logo(dir.path(), 640, 360);
        let args_of = |peer, format| -> Vec<String> {
            peer_cmd(peer, &test_job(dir.path(), &src, format, &logo))
                .unwrap()
                .get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        };
        let p =
            place_watermark(1280, 720, LOGO_SIZE.0, LOGO_SIZE.1, Position::BottomRight).unwrap();
        for (encoder, codec) in [
            (H264Encoder::Nvenc, "h264_nvenc"),
            (H264Encoder::X264, "libx264"),
        ] {
            let args = args_of(Peer::Gpu(encoder), OutputFormat::Mp4);
            let at = |flag: &str| args.iter().position(|a| a == flag).unwrap();
            assert_eq!(args[at("-hwaccel") + 1], "cuda");
            assert_eq!(args[at("-hwaccel_output_format") + 1], "cuda");
            // The hwaccel applies to the video input only, not the watermark PNG.
            assert!(at("-hwaccel") < at("-i"));
            let graph = &args[at("-filter_complex") + 1];
            assert!(
                graph.contains("scale_cuda=1280:720:format=yuv420p"),
                "{graph}"
            );
            assert!(
                graph.contains(&format!("overlay_cuda={}:{}", p.x, p.y)),
                "{graph}"
            );
            assert!(graph.contains("colorchannelmixer=aa=0.6"), "{graph}");
            assert_eq!(
                graph.contains("hwdownload"),
                encoder == H264Encoder::X264,
                "{graph}"
            );
            assert_eq!(args[at("-c:v") + 1], codec);
            assert_eq!(args[at("-map") + 1], "[out]");
        }
        let webm = test_job(dir.path(), &src, OutputFormat::Webm, &logo);
        assert!(peer_cmd(Peer::Gpu(H264Encoder::Nvenc), &webm).is_err());
    }
}
