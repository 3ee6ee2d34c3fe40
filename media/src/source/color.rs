//! The colour a decoded frame is in: its tags resolved to what the compositors can express.

use ffmpeg::ffi;
use ffmpeg_next as ffmpeg;
use vidforge_gpu::{ColorSpec, Matrix, Range};

/// The colour a decoded frame is in, as far as the compositors can express it. `None` matrix
/// means "not BT.601/BT.709" (BT.2020, YCgCo, ...): swscale converts those.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FrameColor {
    /// The swscale/AVColorSpace coefficient id to read the source with.
    pub sws_space: i32,
    pub full_range: bool,
    /// The same as a gpu ColorSpec when the matrix is one the GPU path supports.
    pub spec: Option<ColorSpec>,
}

/// Resolves a frame's colour tags. Untagged video uses the common player rule: BT.709 from
/// 720 lines up (or 1280 wide), BT.601 below.
pub(crate) fn frame_color(
    space: ffmpeg::color::Space,
    range: ffmpeg::color::Range,
    pix_fmt: ffmpeg::format::Pixel,
    width: u32,
    height: u32,
) -> FrameColor {
    use ffmpeg::color::Space as S;
    use ffmpeg::format::Pixel as P;
    let full_range = range == ffmpeg::color::Range::JPEG
        || matches!(
            pix_fmt,
            P::YUVJ420P | P::YUVJ422P | P::YUVJ444P | P::YUVJ440P | P::YUVJ411P
        );
    let hd = height >= 720 || width >= 1280;
    let (sws_space, matrix) = match space {
        S::BT709 => (ffi::SWS_CS_ITU709, Some(Matrix::Bt709)),
        S::BT470BG | S::SMPTE170M => (ffi::SWS_CS_ITU601, Some(Matrix::Bt601)),
        S::FCC => (ffi::SWS_CS_FCC, None),
        S::SMPTE240M => (ffi::SWS_CS_SMPTE240M, None),
        S::BT2020NCL | S::BT2020CL => (ffi::SWS_CS_BT2020, None),
        _ if hd => (ffi::SWS_CS_ITU709, Some(Matrix::Bt709)),
        _ => (ffi::SWS_CS_ITU601, Some(Matrix::Bt601)),
    };
    let range = if full_range {
        Range::Full
    } else {
        Range::Limited
    };
    FrameColor {
        sws_space,
        full_range,
        spec: matrix.map(|matrix| ColorSpec { matrix, range }),
    }
}
