//! Opening an input: validating the file, finding the video/audio streams and reading what the
//! pipeline needs (rotation, aspect, colour, rates).

mod color;
mod decoder;
pub(crate) mod hdr;
mod limits;
mod sniff;

use std::path::{Path, PathBuf};

use ffmpeg::ffi;
use ffmpeg::format::context::Input;
use ffmpeg::format::stream::Stream;
use ffmpeg::{Rational, codec, media};
use ffmpeg_next as ffmpeg;
use vidforge_gpu::Rotation;

pub(crate) use color::{FrameColor, frame_color};
pub use limits::{MAX_DIMENSION, OverLimits, SourceLimits};
use limits::{OpenInputError, open_input_bounded};
pub(crate) use sniff::check_readable;
use sniff::{is_still_image_format, looks_like_text};

use crate::error::MediaError;

/// An opened input with its chosen streams.
pub(crate) struct Source {
    pub input: Input,
    pub path: PathBuf,
    pub format_name: String,
    pub size_bytes: u64,
    pub duration_seconds: f64,
    /// The duration the container declares, in seconds: `None` when it is unknown or only
    /// estimated from the bitrate.
    pub container_duration_declared: Option<f64>,
    /// Container start time in AV_TIME_BASE units; subtracted from every timestamp.
    pub start_time_us: i64,
    pub video: VideoMeta,
    pub audio: Option<AudioMeta>,
}

#[derive(Clone, Debug)]
pub(crate) struct VideoMeta {
    pub index: usize,
    pub codec_name: String,
    pub width: u32,
    pub height: u32,
    pub pix_fmt: Option<String>,
    pub bit_depth: Option<u32>,
    pub rotation: Rotation,
    /// Sample aspect ratio (1:1 when unknown).
    pub sar: (i32, i32),
    /// Display size: after rotation and sample aspect ratio.
    pub display_width: u32,
    pub display_height: u32,
    pub time_base: Rational,
    pub avg_fps: f64,
    /// The duration the video stream itself declares, in seconds: `None` when it is unknown
    /// or only estimated from the bitrate.
    pub duration_declared: Option<f64>,
    pub frames_estimate: Option<u64>,
    /// The frame count the container itself declares (not estimated), when it does.
    pub frames_declared: Option<u64>,
    /// What the stream declares of its colour (tags and HDR metadata).
    pub declared_color: hdr::SourceColor,
}

#[derive(Clone, Debug)]
pub(crate) struct AudioMeta {
    pub index: usize,
    pub codec_id: codec::Id,
    pub codec_name: String,
    pub sample_rate: u32,
    pub channels: u32,
    pub time_base: Rational,
}

fn codec_name(id: codec::Id) -> String {
    match id {
        codec::Id::None => "unknown".to_string(),
        other => other.name().to_string(),
    }
}

/// Clockwise rotation that makes the picture upright: from the display matrix, else the legacy
/// `rotate` tag.
fn stream_rotation(stream: &ffmpeg::format::stream::Stream) -> Rotation {
    for sd in stream.side_data() {
        if sd.kind() == ffmpeg::codec::packet::side_data::Type::DisplayMatrix {
            let data = sd.data();
            if data.len() >= 36 {
                // av_display_rotation_get reads 9 int32s; copy to an aligned buffer first.
                let mut m = [0i32; 9];
                for (i, v) in m.iter_mut().enumerate() {
                    *v = i32::from_ne_bytes([
                        data[i * 4],
                        data[i * 4 + 1],
                        data[i * 4 + 2],
                        data[i * 4 + 3],
                    ]);
                }
                // SAFETY: m holds the 9 values the function reads.
                let ccw = unsafe { ffi::av_display_rotation_get(m.as_ptr()) };
                if ccw.is_finite() {
                    // The matrix angle is counter-clockwise; we apply clockwise (as FFmpeg's
                    // autorotate does).
                    return Rotation::from_clockwise_degrees(-(ccw.round() as i64));
                }
            }
        }
    }
    if let Some(tag) = stream.metadata().get("rotate")
        && let Ok(deg) = tag.trim().parse::<f64>()
        && deg.is_finite()
    {
        return Rotation::from_clockwise_degrees(deg.round() as i64);
    }
    Rotation::None
}

fn rational_f64(r: Rational) -> Option<f64> {
    (r.numerator() > 0 && r.denominator() > 0)
        .then(|| r.numerator() as f64 / r.denominator() as f64)
}

/// What [`open_any`] found: a video to render, or a file with sound but no picture.
pub(crate) enum Opened {
    Video(Box<Source>),
    AudioOnly {
        format_name: String,
        size_bytes: u64,
        duration_seconds: f64,
        audio: AudioMeta,
    },
}

/// Opens `path` and picks the streams to render. Typed errors for every way that can fail.
pub(crate) fn open(path: &Path) -> Result<Source, MediaError> {
    match open_any(path, &SourceLimits::ENGINE)? {
        Opened::Video(s) => Ok(*s),
        Opened::AudioOnly {
            format_name, audio, ..
        } => Err(MediaError::unsupported(format!(
            "{} has no video stream (audio-only {format_name} file with {} audio)",
            path.display(),
            audio.codec_name
        ))),
    }
}

fn best_audio(input: &Input) -> Option<AudioMeta> {
    input
        .streams()
        .best(media::Type::Audio)
        .filter(|s| s.parameters().id() != codec::Id::None)
        .map(|s| {
            let p = s.parameters();
            // SAFETY: codecpar valid.
            let (rate, channels) = unsafe {
                (
                    (*p.as_ptr()).sample_rate,
                    (*p.as_ptr()).ch_layout.nb_channels,
                )
            };
            AudioMeta {
                index: s.index(),
                codec_id: p.id(),
                codec_name: codec_name(p.id()),
                sample_rate: rate.max(0) as u32,
                channels: channels.max(0) as u32,
                time_base: s.time_base(),
            }
        })
        .filter(|a| a.sample_rate > 0 && a.channels > 0)
}

fn container_duration(input: &Input) -> Option<f64> {
    (input.duration() > 0).then(|| input.duration() as f64 / ffi::AV_TIME_BASE as f64)
}

/// Like [`open`], but a file with audio and no video is not an error.
pub(crate) fn open_any(path: &Path, limits: &SourceLimits) -> Result<Opened, MediaError> {
    crate::ffutil::init();
    let size_bytes = check_readable("input file", path)?;
    let mut input = open_input(path, limits)?;
    let format_name = input.format().name().to_string();
    refuse_text_and_images(&input, path, &format_name)?;
    let Some(vs) = pick_video_stream(&input) else {
        return without_video(&input, path, format_name, size_bytes);
    };
    let (video, length) = video_meta(&input, &vs, path, limits)?;
    let audio = best_audio(&input);
    let start_time_us = start_time_us(&input);
    // Only the chosen streams are demuxed; the rest are dropped at the source.
    discard_other_streams(
        &mut input,
        [Some(video.index), audio.as_ref().map(|a| a.index)],
    );
    Ok(Opened::Video(Box::new(Source {
        input,
        path: path.to_path_buf(),
        format_name,
        size_bytes,
        duration_seconds: length.seconds,
        container_duration_declared: length.container_declared,
        start_time_us,
        video,
        audio,
    })))
}

/// Opens `path` within `limits`, with the refusal worded for the user.
fn open_input(path: &Path, limits: &SourceLimits) -> Result<Input, MediaError> {
    match open_input_bounded(path, limits) {
        Ok(i) => Ok(i),
        Err(OpenInputError::TooLarge(reason)) => {
            Err(MediaError::invalid(format!("{}: {reason}", path.display())))
        }
        Err(OpenInputError::Ffmpeg(e)) => {
            if looks_like_text(path) {
                return Err(MediaError::unsupported(format!(
                    "{} is a text file, not a video",
                    path.display()
                )));
            }
            Err(MediaError::invalid(format!(
                "{} is not a readable media file ({e}); it may be corrupt or truncated",
                path.display()
            )))
        }
    }
}

/// Refuses text FFmpeg opened anyway and still images: neither is a video.
fn refuse_text_and_images(input: &Input, path: &Path, format_name: &str) -> Result<(), MediaError> {
    if format_name == "tty" || (looks_like_text(path) && format_name != "lavfi") {
        // FFmpeg opens some text as ANSI art or subtitles; neither is a video.
        let has_real_video = input.streams().any(|s| {
            s.parameters().medium() == media::Type::Video
                && !matches!(s.parameters().id(), codec::Id::ANSI | codec::Id::TEXT)
        });
        if format_name == "tty" || !has_real_video {
            return Err(MediaError::unsupported(format!(
                "{} is a text file, not a video",
                path.display()
            )));
        }
    }
    if is_still_image_format(format_name) {
        let codec = input
            .streams()
            .next()
            .map(|s| codec_name(s.parameters().id()))
            .unwrap_or_else(|| "unknown".into());
        return Err(MediaError::unsupported(format!(
            "{} is a still image ({codec}), not a video",
            path.display()
        )));
    }
    Ok(())
}

/// The video stream to render: not a cover picture; the default stream, then the largest
/// picture (like av_find_best_stream).
fn pick_video_stream(input: &Input) -> Option<Stream<'_>> {
    input
        .streams()
        .filter(|s| {
            s.parameters().medium() == media::Type::Video
                && !s
                    .disposition()
                    .contains(ffmpeg::format::stream::Disposition::ATTACHED_PIC)
        })
        .max_by_key(|s| {
            let p = s.parameters();
            // SAFETY: parameters pointer is valid for the stream's lifetime.
            let (w, h) = unsafe { ((*p.as_ptr()).width as i64, (*p.as_ptr()).height as i64) };
            let default =
                s.disposition()
                    .contains(ffmpeg::format::stream::Disposition::DEFAULT) as i64;
            (default, w * h)
        })
}

/// A file without a video stream: audio only, or why it cannot be rendered.
fn without_video(
    input: &Input,
    path: &Path,
    format_name: String,
    size_bytes: u64,
) -> Result<Opened, MediaError> {
    if let Some(audio) = best_audio(input) {
        return Ok(Opened::AudioOnly {
            duration_seconds: container_duration(input).unwrap_or(0.0),
            format_name,
            size_bytes,
            audio,
        });
    }
    let has_picture = input
        .streams()
        .any(|s| s.parameters().medium() == media::Type::Video);
    Err(if has_picture {
        MediaError::unsupported(format!(
            "{} has only a cover picture, no video stream",
            path.display()
        ))
    } else if looks_like_text(path) {
        MediaError::unsupported(format!("{} is a text file, not a video", path.display()))
    } else {
        MediaError::invalid(format!(
            "{} has no audio or video streams; it is not a media file or is corrupt",
            path.display()
        ))
    })
}

/// Everything the pipeline needs to know about the chosen video stream `vs`, and the
/// source's length. Refuses codecs without a decoder and pictures without a usable size or
/// over `limits`.
fn video_meta(
    input: &Input,
    vs: &Stream<'_>,
    path: &Path,
    limits: &SourceLimits,
) -> Result<(VideoMeta, Length), MediaError> {
    let params = vs.parameters();
    let codec_str = codec_name(params.id());
    // SAFETY: codecpar is valid while `input` lives.
    let (width, height, raw_format, color_space, color_range) = unsafe {
        let p = params.as_ptr();
        (
            (*p).width,
            (*p).height,
            (*p).format,
            ffmpeg::color::Space::from((*p).color_space),
            ffmpeg::color::Range::from((*p).color_range),
        )
    };
    if ffmpeg::decoder::find(params.id()).is_none() {
        return Err(MediaError::unsupported(format!(
            "no decoder for video codec '{codec_str}' in {}",
            path.display()
        )));
    }
    if width <= 0 || height <= 0 {
        return Err(MediaError::invalid(format!(
            "video stream of {} has no usable dimensions ({width}x{height}); the file may be corrupt",
            path.display()
        )));
    }
    let (width, height) = (width as u32, height as u32);
    if let Err(reason) = limits.check(width, height) {
        return Err(MediaError::invalid(format!("{}: {reason}", path.display())));
    }
    let (pix_fmt, bit_depth) = pixel_format(raw_format);
    let rotation = stream_rotation(vs);
    let sar = sample_aspect_ratio(input, vs);
    let (display_width, display_height) = display_size(width, height, sar, rotation);
    let avg_fps = rational_f64(vs.avg_frame_rate())
        .or_else(|| rational_f64(vs.rate()))
        .filter(|f| *f > 0.0 && *f < 1000.0)
        .unwrap_or(0.0);
    let length = source_length(input, vs, avg_fps);
    let declared_color = hdr::stream_color(
        vs,
        color_space.name().unwrap_or("unknown").to_string(),
        match color_range {
            ffmpeg::color::Range::MPEG => "tv",
            ffmpeg::color::Range::JPEG => "pc",
            _ => "unknown",
        }
        .to_string(),
    );
    if let Some(dv) = declared_color
        .dolby_vision
        .filter(|d| !d.base_layer_usable())
    {
        return Err(MediaError::unsupported(format!(
            "{}: Dolby Vision profile {} without a base layer vidforge can show (base layer \
             compatibility id {}): only a Dolby Vision decoder renders its colours; export it \
             as HDR10 or Dolby Vision profile 8",
            path.display(),
            dv.profile,
            dv.base_layer_compatibility
        )));
    }
    let video = VideoMeta {
        index: vs.index(),
        codec_name: codec_str,
        width,
        height,
        pix_fmt,
        bit_depth,
        rotation,
        sar,
        display_width,
        display_height,
        time_base: vs.time_base(),
        avg_fps,
        duration_declared: length.video_declared,
        frames_estimate: length.frames_estimate,
        frames_declared: (vs.frames() > 0).then_some(vs.frames() as u64),
        declared_color,
    };
    Ok((video, length))
}

/// The pixel format's name and bit depth, for an `AVPixelFormat` value (negative: unknown).
fn pixel_format(raw_format: i32) -> (Option<String>, Option<u32>) {
    if raw_format < 0 {
        return (None, None);
    }
    // SAFETY: av_get_pix_fmt_name/av_pix_fmt_desc_get accept any value and return NULL for
    // unknown ones.
    unsafe {
        let fmt: ffi::AVPixelFormat = std::mem::transmute::<i32, ffi::AVPixelFormat>(raw_format);
        let name = ffi::av_get_pix_fmt_name(fmt);
        let desc = ffi::av_pix_fmt_desc_get(fmt);
        let name = (!name.is_null()).then(|| {
            std::ffi::CStr::from_ptr(name)
                .to_string_lossy()
                .into_owned()
        });
        let depth = (!desc.is_null()).then(|| (*desc).comp[0].depth as u32);
        (name, depth)
    }
}

/// The stream's sample aspect ratio (1:1 when unknown).
fn sample_aspect_ratio(input: &Input, vs: &Stream<'_>) -> (i32, i32) {
    // SAFETY: valid context and stream pointers; a null frame is allowed.
    unsafe {
        let r = ffi::av_guess_sample_aspect_ratio(
            input.as_ptr() as *mut _,
            vs.as_ptr() as *mut _,
            std::ptr::null_mut(),
        );
        if r.num > 0 && r.den > 0 {
            (r.num, r.den)
        } else {
            (1, 1)
        }
    }
}

/// How long a source is, from its container and video stream headers.
struct Length {
    /// The container's duration, else the video stream's, else 0.
    seconds: f64,
    /// What the video stream declares (`None` when unknown or estimated from the bitrate).
    video_declared: Option<f64>,
    /// What the container declares (`None` when unknown or estimated from the bitrate).
    container_declared: Option<f64>,
    /// Frames: the declared count, else the duration at `avg_fps`.
    frames_estimate: Option<u64>,
}

fn source_length(input: &Input, vs: &Stream<'_>, avg_fps: f64) -> Length {
    let stream_duration = (vs.duration() > 0)
        .then(|| vs.duration() as f64 * f64::from(vs.time_base()))
        .filter(|d| d.is_finite() && *d > 0.0);
    let seconds = container_duration(input).or(stream_duration).unwrap_or(0.0);
    // SAFETY: plain field read.
    let from_bitrate = unsafe {
        (*input.as_ptr()).duration_estimation_method
            == ffi::AVDurationEstimationMethod::AVFMT_DURATION_FROM_BITRATE
    };
    let (video_declared, container_declared) = if from_bitrate {
        (None, None)
    } else {
        (stream_duration, container_duration(input))
    };
    let frames_estimate = if vs.frames() > 0 {
        Some(vs.frames() as u64)
    } else {
        let d = stream_duration.unwrap_or(seconds);
        (d > 0.0 && avg_fps > 0.0).then(|| (d * avg_fps).round() as u64)
    };
    Length {
        seconds,
        video_declared,
        container_declared,
        frames_estimate,
    }
}

/// The container's start time in AV_TIME_BASE units (0 when unknown).
fn start_time_us(input: &Input) -> i64 {
    // SAFETY: plain field read.
    let start_time_us = unsafe { (*input.as_ptr()).start_time };
    if start_time_us == ffi::AV_NOPTS_VALUE {
        0
    } else {
        start_time_us
    }
}

/// Marks every stream but `keep` as discarded, so the demuxer drops their packets.
fn discard_other_streams(input: &mut Input, keep: [Option<usize>; 2]) {
    for mut s in input.streams_mut() {
        if !keep.contains(&Some(s.index())) {
            // SAFETY: setting the discard flag on a valid stream.
            unsafe { (*s.as_mut_ptr()).discard = ffi::AVDiscard::AVDISCARD_ALL };
        }
    }
}

/// Display size of a `w x h` coded picture with sample aspect `sar`, after `rotation`.
pub(crate) fn display_size(w: u32, h: u32, sar: (i32, i32), rotation: Rotation) -> (u32, u32) {
    let dw = if sar.0 > 0 && sar.1 > 0 && sar.0 != sar.1 {
        ((w as f64 * sar.0 as f64 / sar.1 as f64).round() as u32).max(1)
    } else {
        w
    };
    rotation.display_size(dw, h)
}

impl Source {
    /// Container start time in `tb` units.
    pub fn start_offset(&self, tb: Rational) -> i64 {
        if self.start_time_us == 0 {
            return 0;
        }
        // SAFETY: pure arithmetic.
        unsafe {
            ffi::av_rescale_q(
                self.start_time_us,
                ffi::AVRational {
                    num: 1,
                    den: ffi::AV_TIME_BASE,
                },
                tb.into(),
            )
        }
    }
}
