//! Test-clip generators (the ffmpeg CLI with lavfi sources), odd inputs for error paths, a
//! watermark PNG writer and an ffprobe reader. Used by this crate's tests, the end-to-end
//! tests and the benchmarks; needs `ffmpeg`/`ffprobe` on PATH.

use std::collections::BTreeMap;
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

fn unique(dir: &Path, stem: &str, ext: &str) -> PathBuf {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    dir.join(format!("{stem}-{n}.{ext}"))
}

/// Runs a command, turning a non-zero exit into an error carrying its stderr.
fn run(cmd: &mut Command) -> io::Result<String> {
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
    let path = unique(dir, &stem, &spec.container);
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
    run(&mut cmd)?;
    if let Some(deg) = spec.rotate {
        let rotated = unique(dir, &format!("{stem}-rot{deg}"), &spec.container);
        run(Command::new("ffmpeg")
            .args(["-v", "error", "-y", "-i"])
            .arg(&path)
            .args(["-map", "0", "-c", "copy", "-metadata:s:v:0"])
            .arg(format!("rotate={deg}"))
            .arg(&rotated))?;
        std::fs::remove_file(&path)?;
        return Ok(rotated);
    }
    Ok(path)
}

/// `len` bytes of deterministic noise named like a video (`garbage.mp4`).
pub fn garbage_file(dir: &Path, ext: &str, len: usize) -> io::Result<PathBuf> {
    let path = unique(dir, "garbage", ext);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut data = Vec::with_capacity(len);
    while data.len() < len {
        // xorshift64*
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        data.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    data.truncate(len);
    std::fs::write(&path, data)?;
    Ok(path)
}

/// The first `fraction` of `src`'s bytes, as a new file.
pub fn truncated_copy(dir: &Path, src: &Path, fraction: f64) -> io::Result<PathBuf> {
    let data = std::fs::read(src)?;
    let keep = ((data.len() as f64) * fraction.clamp(0.0, 1.0)) as usize;
    let ext = src.extension().and_then(|e| e.to_str()).unwrap_or("bin");
    let path = unique(dir, "truncated", ext);
    std::fs::write(&path, &data[..keep])?;
    Ok(path)
}

/// A zero-byte file named like a video.
pub fn empty_file(dir: &Path, ext: &str) -> io::Result<PathBuf> {
    let path = unique(dir, "empty", ext);
    std::fs::write(&path, b"")?;
    Ok(path)
}

/// A plain text file.
pub fn text_file(dir: &Path, ext: &str) -> io::Result<PathBuf> {
    let path = unique(dir, "notes", ext);
    std::fs::write(
        &path,
        "This is not a video.\nJust a few lines of text that someone uploaded by mistake.\n",
    )?;
    Ok(path)
}

/// An audio-only file (AAC in m4a).
pub fn audio_only(dir: &Path) -> io::Result<PathBuf> {
    let path = unique(dir, "audio", "m4a");
    run(Command::new("ffmpeg")
        .args([
            "-v",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            "sine=f=440:d=1",
            "-c:a",
            "aac",
        ])
        .arg(&path))?;
    Ok(path)
}

/// A single PNG picture (made by ffmpeg).
pub fn still_image(dir: &Path) -> io::Result<PathBuf> {
    let path = unique(dir, "still", "png");
    run(Command::new("ffmpeg")
        .args([
            "-v",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            "testsrc2=s=64x48",
            "-frames:v",
            "1",
        ])
        .arg(&path))?;
    Ok(path)
}

/// A valid one-frame clip wider than the engine's 16384-pixel limit (raw video in NUT).
pub fn oversized_clip(dir: &Path) -> io::Result<PathBuf> {
    let path = unique(dir, "oversized", "nut");
    run(Command::new("ffmpeg")
        .args([
            "-v",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            "color=c=gray:s=16400x16:r=1:d=1",
            "-frames:v",
            "1",
            "-c:v",
            "rawvideo",
            "-pix_fmt",
            "yuv420p",
        ])
        .arg(&path))?;
    Ok(path)
}

/// The HDR mastering metadata [`hdr_clip`] tags a PQ clip with: a 1000-nit display with a
/// 0.005-nit black, BT.2020 primaries and D65, MaxCLL 1000 and MaxFALL 400 (HDR10's usual).
pub const HDR10_MASTERING: (f64, f64, u32, u32) = (1000.0, 0.005, 1000, 400);

/// A 10-bit HEVC test clip (`testsrc2`: colour bars, gradients, moving shapes; 320x180, 1 s)
/// tagged BT.2020 with the `transfer` given: PQ (`smpte2084`) in Matroska, carrying
/// [`HDR10_MASTERING`] as container metadata (written by mkvmerge from Debian's mkvtoolnix,
/// which ffmpeg 5.1's CLI cannot do), or HLG (`arib-std-b67`) in MP4, as a phone records it.
pub fn hdr_clip(dir: &Path, transfer: crate::DynamicRange) -> io::Result<PathBuf> {
    hdr_clip_of(dir, transfer, "testsrc2=s=320x180:r=25:d=1")
}

/// [`hdr_clip`] of another lavfi source (`color=c=0x808080:s=320x180:d=1`, ...).
pub fn hdr_clip_of(dir: &Path, transfer: crate::DynamicRange, lavfi: &str) -> io::Result<PathBuf> {
    let trc = match transfer {
        crate::DynamicRange::Pq => "smpte2084",
        crate::DynamicRange::Hlg => "arib-std-b67",
        crate::DynamicRange::Sdr => {
            return Err(io::Error::other("hdr_clip makes PQ or HLG clips"));
        }
    };
    let hevc = unique(dir, "hdr", "mp4");
    let x265 = format!(
        "log-level=error:colorprim=bt2020:transfer={trc}:colormatrix=bt2020nc:range=limited"
    );
    run(Command::new("ffmpeg")
        .args(["-v", "error", "-y", "-f", "lavfi", "-i", lavfi])
        .args([
            "-pix_fmt",
            "yuv420p10le",
            "-c:v",
            "libx265",
            "-x265-params",
            &x265,
        ])
        .args([
            "-color_primaries",
            "bt2020",
            "-color_trc",
            trc,
            "-colorspace",
            "bt2020nc",
        ])
        .arg(&hevc))?;
    if transfer == crate::DynamicRange::Hlg {
        return Ok(hevc);
    }
    let (max, min, cll, fall) = HDR10_MASTERING;
    let mkv = unique(dir, "hdr10", "mkv");
    run(Command::new("mkvmerge")
        .args(["-q", "-o"])
        .arg(&mkv)
        .args(["--max-content-light", &format!("0:{cll}")])
        .args(["--max-frame-light", &format!("0:{fall}")])
        .args(["--max-luminance", &format!("0:{max}")])
        .args(["--min-luminance", &format!("0:{min}")])
        .args([
            "--chromaticity-coordinates",
            "0:0.708,0.292,0.170,0.797,0.131,0.046",
        ])
        .args(["--white-colour-coordinates", "0:0.3127,0.3290"])
        .arg(&hevc))?;
    Ok(mkv)
}

/// `hevc` (an HEVC file, e.g. from [`hdr_clip`]'s MP4) remuxed into an MP4 whose stream
/// carries a Dolby Vision configuration record (`dvcC`) of `profile`, with a base layer of
/// `compatibility` (0: none usable, as profile 5; 1: HDR10, as 8.1; 4: HLG, as 8.4). Written with
/// FFmpeg's libraries: the 5.1 CLI cannot add the record.
pub fn dolby_vision_clip(
    dir: &Path,
    hevc: &Path,
    profile: u8,
    compatibility: u8,
) -> Result<PathBuf, ffmpeg_next::Error> {
    use ffmpeg_next::{codec, ffi, format, media};
    let out = unique(dir, &format!("dv{profile}"), "mp4");
    let mut input = format::input(&hevc)?;
    let mut output = format::output(&out)?;
    let (index, in_tb) = {
        let ist = input
            .streams()
            .best(media::Type::Video)
            .ok_or(ffmpeg_next::Error::StreamNotFound)?;
        let mut ost = output.add_stream(codec::encoder::find(codec::Id::None))?;
        ost.set_parameters(ist.parameters());
        // AVDOVIDecoderConfigurationRecord: version 1.0, profile, level 6, RPU present, no
        // enhancement layer, the base layer and its compatibility id.
        let record = [1u8, 0, profile, 6, 1, 0, 1, compatibility];
        // SAFETY: `ost` is a stream of `output`, not yet written; the side data is allocated by
        // FFmpeg at the record's size and filled before the header is written.
        unsafe {
            (*ost.parameters().as_mut_ptr()).codec_tag = 0;
            let data = ffi::av_stream_new_side_data(
                ost.as_mut_ptr(),
                ffi::AVPacketSideDataType::AV_PKT_DATA_DOVI_CONF,
                record.len(),
            );
            if data.is_null() {
                return Err(ffmpeg_next::Error::Other { errno: ffi::ENOMEM });
            }
            std::ptr::copy_nonoverlapping(record.as_ptr(), data, record.len());
        }
        (ist.index(), ist.time_base())
    };
    // The MP4 muxer writes `dvcC` only when told unofficial boxes are fine.
    // SAFETY: a plain field of the output context, set before the header.
    unsafe { (*output.as_mut_ptr()).strict_std_compliance = ffi::FF_COMPLIANCE_UNOFFICIAL };
    output.write_header()?;
    let out_tb = output.stream(0).map(|s| s.time_base()).unwrap_or(in_tb);
    for (stream, mut packet) in input.packets() {
        if stream.index() != index {
            continue;
        }
        packet.rescale_ts(in_tb, out_tb);
        packet.set_stream(0);
        packet.set_position(-1);
        packet.write_interleaved(&mut output)?;
    }
    output.write_trailer()?;
    Ok(out)
}

/// Writes a `w x h` RGBA PNG filled with one colour (straight alpha) using the png crate.
pub fn watermark_png(dir: &Path, w: u32, h: u32, rgba: [u8; 4]) -> io::Result<PathBuf> {
    let path = unique(dir, "watermark", "png");
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

/// One stream as ffprobe reports it (`codec_type`, `codec_name`, `width`, `height`,
/// `nb_read_frames`, `pix_fmt`, `color_space`, ...).
pub type ProbeStream = BTreeMap<String, String>;

/// ffprobe's view of the streams (frames counted by decoding, so it is slow on long files).
pub fn ffprobe_streams(path: &Path) -> io::Result<Vec<ProbeStream>> {
    let out = run(Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-count_frames",
            "-show_streams",
            "-of",
            "default",
        ])
        .arg(path))?;
    let mut streams = Vec::new();
    let mut cur: Option<ProbeStream> = None;
    for line in out.lines() {
        match line.trim() {
            "[STREAM]" => cur = Some(BTreeMap::new()),
            "[/STREAM]" => streams.extend(cur.take()),
            l => {
                if let (Some(c), Some((k, v))) = (cur.as_mut(), l.split_once('=')) {
                    c.insert(k.to_string(), v.to_string());
                }
            }
        }
    }
    Ok(streams)
}

/// ffprobe's container duration in seconds.
pub fn ffprobe_duration(path: &Path) -> io::Result<f64> {
    let out = run(Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-show_entries",
            "format=duration",
            "-of",
            "csv=p=0",
        ])
        .arg(path))?;
    out.trim()
        .parse()
        .map_err(|e| io::Error::other(format!("ffprobe duration {out:?}: {e}")))
}

/// What the compose benchmarks measure (the criterion bench and the `compose_profile`
/// example): the spec from a `src_w`x`src_h` source to `res`, with a 400x200 white logo at
/// opacity 0.6 in the bottom-right corner.
pub fn compose_bench_spec(src_w: u32, src_h: u32, res: crate::Resolution) -> crate::ComposeSpec {
    use vidforge_gpu::{ColorSpec, Position, Rotation, WatermarkImage};
    let (w, h) = crate::output_size(src_w, src_h, res);
    let logo = WatermarkImage {
        width: 400,
        height: 200,
        rgba: [255u8, 255, 255, 200].repeat(400 * 200),
    };
    let watermark =
        vidforge_gpu::place_watermark(w, h, logo.width, logo.height, Position::BottomRight)
            .map(|p| vidforge_gpu::prepare_watermark(&logo, p, 0.6, ColorSpec::OUTPUT));
    crate::ComposeSpec {
        out_width: w,
        out_height: h,
        rotation: Rotation::None,
        watermark,
        light: crate::OutputLight::Sdr,
    }
}

/// The compose benchmarks' input: the first 4 decoded frames of a short `w`x`h` test clip
/// made in `dir`.
pub fn compose_bench_frames(
    dir: &Path,
    w: u32,
    h: u32,
) -> Result<Vec<ffmpeg_next::frame::Video>, Box<dyn std::error::Error + Send + Sync>> {
    let clip = clip(
        dir,
        &ClipSpec {
            seconds: 0.2,
            audio: false,
            ..ClipSpec::h264(w, h)
        },
    )?;
    Ok(crate::decode_raw_frames(&clip, 4)?)
}
