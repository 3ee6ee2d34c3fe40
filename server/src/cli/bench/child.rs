//! The child processes: vidforge's hidden single-render mode and both tools' command lines,
//! spawned with their output discarded and reaped with `wait4` for their rusage.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use vidforge_media::gpu::place_watermark;
use vidforge_media::{
    BackendChoice, EncoderSettings, Engine, OutputFormat, Position, RenderJob, Resolution,
    WatermarkSpec, output_size,
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
    pub(super) report: PathBuf,
}

/// What the child reports back about its render.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct ChildReport {
    pub(super) frames: u64,
    pub(super) backend: String,
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

#[allow(clippy::too_many_arguments)]
pub(super) fn vidforge_cmd(
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
pub(super) fn ffmpeg_cmd(
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

#[cfg(test)]
mod tests {
    use super::super::fixture;
    use super::*;
    use vidforge_media::fixtures;

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
}
