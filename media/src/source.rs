//! Opening an input: validating the file, finding the video/audio streams and reading what the
//! pipeline needs (rotation, aspect, colour, rates).
//!
//! Files: here opening and the refusals of what is not a video, the audio stream; `video.rs`
//! the video stream; `container.rs` what a container declares in general; `limits.rs`,
//! `sniff.rs`, `decoder.rs`, `color.rs` (a frame's colour), `hdr.rs` (the declared colour).

mod color;
mod container;
mod decoder;
pub(crate) mod hdr;
mod limits;
mod sniff;
mod video;

use std::path::{Path, PathBuf};

use ffmpeg::ffi;
use ffmpeg::format::context::Input;
use ffmpeg::{Rational, codec, media};
use ffmpeg_next as ffmpeg;

pub(crate) use color::{FrameColor, frame_color};
use container::{codec_name, container_duration, start_time_us};
pub use limits::{MAX_DIMENSION, OverLimits, SourceLimits};
use limits::{OpenInputError, open_input_bounded};
pub(crate) use sniff::check_readable;
use sniff::{is_still_image_format, looks_like_text};
pub(crate) use video::VideoMeta;
use video::{pick_video_stream, video_meta};

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
pub(crate) struct AudioMeta {
    pub index: usize,
    pub codec_id: codec::Id,
    pub codec_name: String,
    pub sample_rate: u32,
    pub channels: u32,
    pub time_base: Rational,
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

/// Marks every stream but `keep` as discarded, so the demuxer drops their packets.
fn discard_other_streams(input: &mut Input, keep: [Option<usize>; 2]) {
    for mut s in input.streams_mut() {
        if !keep.contains(&Some(s.index())) {
            // SAFETY: setting the discard flag on a valid stream.
            unsafe { (*s.as_mut_ptr()).discard = ffi::AVDiscard::AVDISCARD_ALL };
        }
    }
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
