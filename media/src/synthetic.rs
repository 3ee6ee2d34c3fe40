//! Synthetic media made with the ffmpeg CLI (lavfi sources) and a one-colour PNG: the clips and
//! the logo `vidforge bench` and `vidforge load` render, and the base of the tests' fixtures
//! (the `vidforge-fixtures` crate, which adds odd inputs, HDR clips and an ffprobe reader).
//! Needs `ffmpeg` on PATH.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// What the video shows.
#[derive(Clone, Debug, PartialEq)]
pub enum Pattern {
    /// FFmpeg's `testsrc2` (moving colour bars and a counter).
    TestSrc,
    /// One flat RGB colour.
    Solid([u8; 3]),
    /// Upper half white, lower half black: shows which way is up.
    TopHalfWhite,
    /// Any lavfi video source graph; `{w}`, `{h}`, `{fps}` and `{secs}` are substituted.
    Lavfi(String),
}

/// A generated clip.
#[derive(Clone, Debug, PartialEq)]
pub struct ClipSpec {
    pub width: u32,
    pub height: u32,
    pub fps: u32,
    pub seconds: f64,
    pub audio: bool,
    /// Pixel format of the encoded video (`yuv420p`, `yuv420p10le`, `yuvj420p`, ...).
    pub pix_fmt: String,
    /// Adds display rotation metadata exactly as `ffmpeg -c copy -metadata:s:v:0 rotate=N`
    /// writes it (FFmpeg's autorotate turns such a clip back by the same display matrix).
    pub rotate: Option<i32>,
    /// ffmpeg encoder name: `libx264`, `libvpx-vp9`, `mpeg4`, `libx265`, ...
    pub video_codec: String,
    /// ffmpeg audio encoder name: `aac`, `libopus`, `libmp3lame`, ...
    pub audio_codec: String,
    /// Container extension: `mp4`, `webm`, `mkv`, `mov`, ...
    pub container: String,
    pub pattern: Pattern,
    /// Extra output options (e.g. `-colorspace bt709`).
    pub extra_args: Vec<String>,
}

impl Default for ClipSpec {
    fn default() -> Self {
        ClipSpec {
            width: 320,
            height: 240,
            fps: 30,
            seconds: 1.0,
            audio: true,
            pix_fmt: "yuv420p".into(),
            rotate: None,
            video_codec: "libx264".into(),
            audio_codec: "aac".into(),
            container: "mp4".into(),
            pattern: Pattern::TestSrc,
            extra_args: Vec::new(),
        }
    }
}

impl ClipSpec {
    /// H.264 + AAC in mp4 of the given size.
    pub fn h264(width: u32, height: u32) -> Self {
        ClipSpec {
            width,
            height,
            ..Default::default()
        }
    }

    /// VP9 + Opus in webm of the given size.
    pub fn vp9(width: u32, height: u32) -> Self {
        ClipSpec {
            width,
            height,
            video_codec: "libvpx-vp9".into(),
            audio_codec: "libopus".into(),
            container: "webm".into(),
            ..Default::default()
        }
    }

    /// Number of video frames the clip has.
    pub fn frame_count(&self) -> u64 {
        (self.seconds * self.fps as f64).round() as u64
    }
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh path `dir/<stem>-<n>.<ext>` (`n` counts up in this process).
pub fn unique_path(dir: &Path, stem: &str, ext: &str) -> PathBuf {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    dir.join(format!("{stem}-{n}.{ext}"))
}

/// Runs a command, turning a non-zero exit into an error carrying its stderr.
pub fn run_tool(cmd: &mut Command) -> io::Result<String> {
    let out = cmd.output().map_err(|e| {
        io::Error::new(e.kind(), format!("cannot run {:?}: {e}", cmd.get_program()))
    })?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "{:?} failed: {}",
            cmd.get_args().collect::<Vec<_>>(),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// True when the ffmpeg CLI is on PATH.
pub fn ffmpeg_available() -> bool {
    Command::new("ffmpeg")
        .arg("-version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn lavfi_video(spec: &ClipSpec) -> String {
    let (w, h, r, d) = (spec.width, spec.height, spec.fps, spec.seconds);
    match &spec.pattern {
        Pattern::TestSrc => format!("testsrc2=s={w}x{h}:r={r}:d={d}"),
        Pattern::Solid([cr, cg, cb]) => {
            format!("color=c=0x{cr:02x}{cg:02x}{cb:02x}:s={w}x{h}:r={r}:d={d}")
        }
        Pattern::TopHalfWhite => format!(
            "color=c=black:s={w}x{h}:r={r}:d={d},drawbox=x=0:y=0:w=iw:h=ih/2:color=white:t=fill"
        ),
        Pattern::Lavfi(g) => g
            .replace("{w}", &w.to_string())
            .replace("{h}", &h.to_string())
            .replace("{fps}", &r.to_string())
            .replace("{secs}", &d.to_string()),
    }
}

/// Generates a clip in `dir` and returns its path.
pub fn clip(dir: &Path, spec: &ClipSpec) -> io::Result<PathBuf> {
    let stem = format!(
        "clip-{}x{}-{}",
        spec.width,
        spec.height,
        spec.video_codec.trim_start_matches("lib")
    );
    let path = unique_path(dir, &stem, &spec.container);
    let mut cmd = Command::new("ffmpeg");
    cmd.args(["-v", "error", "-y", "-f", "lavfi", "-i"])
        .arg(lavfi_video(spec));
    if spec.audio {
        cmd.args(["-f", "lavfi", "-i"]).arg(format!(
            "sine=f=440:r=48000:d={},aformat=channel_layouts=stereo",
            spec.seconds
        ));
    }
    cmd.args(["-c:v", &spec.video_codec, "-pix_fmt", &spec.pix_fmt]);
    match spec.video_codec.as_str() {
        "libx264" | "libx265" => {
            cmd.args(["-preset", "ultrafast"]);
        }
        "libvpx-vp9" => {
            cmd.args(["-deadline", "realtime", "-cpu-used", "8", "-b:v", "1M"]);
        }
        _ => {}
    }
    if spec.audio {
        cmd.args(["-c:a", &spec.audio_codec]);
    }
    cmd.args(&spec.extra_args);
    cmd.args(["-frames:v", &spec.frame_count().to_string()]);
    if spec.audio {
        cmd.args(["-t", &spec.seconds.to_string()]);
    }
    cmd.arg(&path);
    run_tool(&mut cmd)?;
    if let Some(deg) = spec.rotate {
        let rotated = unique_path(dir, &format!("{stem}-rot{deg}"), &spec.container);
        run_tool(
            Command::new("ffmpeg")
                .args(["-v", "error", "-y", "-i"])
                .arg(&path)
                .args(["-map", "0", "-c", "copy", "-metadata:s:v:0"])
                .arg(format!("rotate={deg}"))
                .arg(&rotated),
        )?;
        std::fs::remove_file(&path)?;
        return Ok(rotated);
    }
    Ok(path)
}

/// Writes a `w x h` RGBA PNG filled with one colour (straight alpha) using the png crate.
pub fn watermark_png(dir: &Path, w: u32, h: u32, rgba: [u8; 4]) -> io::Result<PathBuf> {
    let path = unique_path(dir, "watermark", "png");
    let file = std::fs::File::create(&path)?;
    let mut enc = png::Encoder::new(io::BufWriter::new(file), w, h);
    enc.set_color(png::ColorType::Rgba);
    enc.set_depth(png::BitDepth::Eight);
    let mut writer = enc.write_header().map_err(io::Error::other)?;
    let data: Vec<u8> = std::iter::repeat_n(rgba, (w * h) as usize)
        .flatten()
        .collect();
    writer.write_image_data(&data).map_err(io::Error::other)?;
    writer.finish().map_err(io::Error::other)?;
    Ok(path)
}
