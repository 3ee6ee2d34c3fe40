//! Small FFmpeg helpers shared by the decode and encode sides: one-time initialisation, the
//! "try again" error and time-base rescaling.

use ffmpeg::{Rational, ffi};
use ffmpeg_next as ffmpeg;

/// `ffmpeg::init` once, with FFmpeg's own logging kept quiet (errors surface as typed errors).
pub fn init() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Err(e) = ffmpeg::init() {
            tracing::error!("ffmpeg init failed: {e}");
        }
        ffmpeg::util::log::set_level(ffmpeg::util::log::Level::Fatal);
    });
}

/// Whether `e` is FFmpeg's `EAGAIN`: the codec wants input (or output drained) first.
pub(crate) fn is_eagain(e: &ffmpeg::Error) -> bool {
    matches!(e, ffmpeg::Error::Other { errno } if *errno == ffmpeg::util::error::EAGAIN)
}

/// `v` from time base `from` to time base `to`.
pub(crate) fn rescale(v: i64, from: Rational, to: Rational) -> i64 {
    if from == to {
        return v;
    }
    // SAFETY: pure arithmetic.
    unsafe { ffi::av_rescale_q(v, from.into(), to.into()) }
}
