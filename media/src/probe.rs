//! `probe`: what the engine sees in a media file.

use std::path::Path;

use ffmpeg_next::Packet;

use crate::error::MediaError;
use crate::source::hdr::SourceColor;
use crate::source::{self, Opened, Source, SourceLimits};

/// Read errors in a row after which a scan gives up.
const SCAN_MAX_ERRORS: u32 = 64;

/// A media file as the engine sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeInfo {
    /// FFmpeg demuxer name (e.g. `mov,mp4,m4a,3gp,3g2,mj2`, `matroska,webm`).
    pub format: String,
    /// 0.0 when unknown.
    pub duration_seconds: f64,
    pub size_bytes: u64,
    /// `None` for audio-only files.
    pub video: Option<VideoStreamInfo>,
    pub audio: Option<AudioStreamInfo>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct VideoStreamInfo {
    pub codec: String,
    /// Coded size.
    pub width: u32,
    pub height: u32,
    /// Upright size after rotation and sample aspect ratio.
    pub display_width: u32,
    pub display_height: u32,
    /// Clockwise rotation applied to make the picture upright (0, 90, 180, 270).
    pub rotation_degrees: u32,
    /// Sample (pixel) aspect ratio as num:den.
    pub sample_aspect_ratio: (i32, i32),
    /// Average frame rate (0.0 when unknown).
    pub fps: f64,
    /// Frame count from the container, or estimated from duration x frame rate.
    pub frames: Option<u64>,
    pub pix_fmt: Option<String>,
    pub bit_depth: Option<u32>,
    /// The colour the stream declares: primaries, transfer, matrix, range, HDR metadata.
    pub color: SourceColor,
}

#[derive(Clone, Debug, PartialEq)]
pub struct AudioStreamInfo {
    pub codec: String,
    pub sample_rate: u32,
    pub channels: u32,
}

/// Opens `path` and describes it. Files without a video stream but with audio succeed with
/// `video: None`; missing, empty, corrupt, text and still-image files are typed errors.
pub fn probe(path: &Path) -> Result<ProbeInfo, MediaError> {
    probe_within(path, &SourceLimits::ENGINE)
}

/// [`probe`], refusing (as `InvalidInput` errors naming the limit) pictures over
/// `limits` without decoding them.
pub fn probe_within(path: &Path, limits: &SourceLimits) -> Result<ProbeInfo, MediaError> {
    let audio_info = |a: &source::AudioMeta| AudioStreamInfo {
        codec: a.codec_name.clone(),
        sample_rate: a.sample_rate,
        channels: a.channels,
    };
    match source::open_any(path, limits)? {
        Opened::AudioOnly {
            format_name,
            size_bytes,
            duration_seconds,
            audio,
        } => Ok(ProbeInfo {
            format: format_name,
            duration_seconds,
            size_bytes,
            video: None,
            audio: Some(audio_info(&audio)),
        }),
        Opened::Video(mut src) => {
            if src.duration_seconds <= 0.0 {
                // A container that declares no length (a browser's MediaRecorder webm): read
                // its packets (no decoding) so that what a render of it costs is known.
                src.duration_seconds = scan(&mut src).video.unwrap_or(0.0);
            } else if src.format_name.contains("matroska") {
                // Matroska/WebM declares its length in the segment header, which a file cut
                // short keeps, and has no index to check it against: read its packets (no
                // decoding), and refuse it now, naming the truncation, rather than fail its
                // render later.
                let declared = src.duration_seconds;
                if let Some(got) = scan(&mut src).any
                    && crate::engine::truncation::far_short(got, declared)
                {
                    return Err(MediaError::invalid(format!(
                        "the file is truncated or damaged: its container declares {declared:.2} s \
                         but its data ends at {got:.2} s; upload the complete file"
                    )));
                }
            }
            let v = &src.video;
            Ok(ProbeInfo {
                format: src.format_name.clone(),
                duration_seconds: src.duration_seconds,
                size_bytes: src.size_bytes,
                video: Some(VideoStreamInfo {
                    codec: v.codec_name.clone(),
                    width: v.width,
                    height: v.height,
                    display_width: v.display_width,
                    display_height: v.display_height,
                    rotation_degrees: v.rotation.degrees(),
                    sample_aspect_ratio: v.sar,
                    fps: v.avg_fps,
                    frames: v.frames_estimate,
                    pix_fmt: v.pix_fmt.clone(),
                    bit_depth: v.bit_depth,
                    color: v.declared_color.clone(),
                }),
                audio: src.audio.as_ref().map(audio_info),
            })
        }
    }
}

/// What reading a source's packets (without decoding) found, in seconds.
struct Scanned {
    /// The video's length: first timestamp to last end, or, for a raw stream without
    /// timestamps, the packet count at the stream's frame rate.
    video: Option<f64>,
    /// The end of the last packet of any stream (video or audio), from the file's start.
    any: Option<f64>,
}

/// Reads `src`'s packets to the end. Bounded by the file: it stops at the end, at an I/O
/// error, or after [`SCAN_MAX_ERRORS`] unreadable packets in a row.
fn scan(src: &mut Source) -> Scanned {
    let (index, time_base, fps) = (src.video.index, src.video.time_base, src.video.avg_fps);
    let (mut first, mut end): (Option<i64>, Option<i64>) = (None, None);
    let mut any: Option<f64> = None;
    let (mut packets, mut errors) = (0u64, 0);
    loop {
        let mut pkt = Packet::empty();
        match pkt.read(&mut src.input) {
            Ok(()) => {
                errors = 0;
                if let (Some(ts), Some(stream)) =
                    (pkt.pts().or(pkt.dts()), src.input.stream(pkt.stream()))
                {
                    let e = ts.saturating_add(pkt.duration().max(0)) as f64
                        * f64::from(stream.time_base());
                    any = Some(any.map_or(e, |a| a.max(e)));
                }
                if pkt.stream() != index {
                    continue;
                }
                packets += 1;
                if let Some(ts) = pkt.pts().or(pkt.dts()) {
                    first = Some(first.map_or(ts, |f| f.min(ts)));
                    let e = ts.saturating_add(pkt.duration().max(0));
                    end = Some(end.map_or(e, |x| x.max(e)));
                }
            }
            Err(ffmpeg_next::Error::InvalidData) if errors < SCAN_MAX_ERRORS => errors += 1,
            Err(_) => break,
        }
    }
    let seconds = match (first, end) {
        (Some(first), Some(end)) => Some(end.saturating_sub(first) as f64 * f64::from(time_base)),
        _ if fps > 0.0 => Some(packets as f64 / fps),
        _ => None,
    };
    let positive = |s: f64| (s.is_finite() && s > 0.0).then_some(s);
    Scanned {
        video: seconds.and_then(positive),
        any: any.and_then(positive),
    }
}
