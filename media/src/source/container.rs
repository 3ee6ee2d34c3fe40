//! What a container and its streams declare in general, for the video and audio readers:
//! codec names, durations, rates, the start time.

use ffmpeg::ffi;
use ffmpeg::format::context::Input;
use ffmpeg::{Rational, codec};
use ffmpeg_next as ffmpeg;

/// FFmpeg's name of a codec, `unknown` for none.
pub(super) fn codec_name(id: codec::Id) -> String {
    match id {
        codec::Id::None => "unknown".to_string(),
        other => other.name().to_string(),
    }
}

/// A positive rational as a float; `None` when either part is not positive.
pub(super) fn rational_f64(r: Rational) -> Option<f64> {
    (r.numerator() > 0 && r.denominator() > 0)
        .then(|| r.numerator() as f64 / r.denominator() as f64)
}

/// The container's duration in seconds, when it declares one.
pub(super) fn container_duration(input: &Input) -> Option<f64> {
    (input.duration() > 0).then(|| input.duration() as f64 / ffi::AV_TIME_BASE as f64)
}

/// The container's start time in AV_TIME_BASE units (0 when unknown).
pub(super) fn start_time_us(input: &Input) -> i64 {
    // SAFETY: plain field read.
    let start_time_us = unsafe { (*input.as_ptr()).start_time };
    if start_time_us == ffi::AV_NOPTS_VALUE {
        0
    } else {
        start_time_us
    }
}
