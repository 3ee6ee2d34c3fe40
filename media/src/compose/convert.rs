//! Decoded frames of any format to one size and colour through swscale.

use ffmpeg::ffi;
use ffmpeg::format::Pixel;
use ffmpeg::frame;
use ffmpeg_next as ffmpeg;
use vidforge_gpu::{ColorSpec, Matrix, Range, Yuv420Frame};

use super::spec::{check_frame, color_of};
use crate::error::MediaError;
use crate::scale::{self, Sws, SwsKey};
use crate::source::FrameColor;

fn sws_space_of(matrix: Matrix) -> i32 {
    match matrix {
        Matrix::Bt601 => ffi::SWS_CS_ITU601,
        Matrix::Bt709 => ffi::SWS_CS_ITU709,
        Matrix::Bt2020 => ffi::SWS_CS_BT2020,
    }
}

/// Converts decoded frames of any format to 8-bit yuv420p at a fixed source size, keeping
/// the source's BT.601/BT.709 matrix and range (other matrices become BT.709). Plain copies
/// for yuv420p/yuvj420p input. Used by the GPU path and by [`crate::decode_frames`].
pub(crate) struct SourceConverter {
    width: u32,
    height: u32,
    spec: ColorSpec,
    sws: Option<Sws>,
}

impl SourceConverter {
    /// Sized after the first frame of a stream, keeping the colour `spec` (an HDR source's
    /// own, for the tone mapper).
    pub fn keeping(frame: &frame::Video, spec: ColorSpec) -> Result<Self, MediaError> {
        check_frame(frame)?;
        Ok(SourceConverter {
            width: frame.width(),
            height: frame.height(),
            spec,
            sws: None,
        })
    }

    /// Sized and coloured after the first frame of a stream.
    pub fn for_frame(frame: &frame::Video) -> Result<Self, MediaError> {
        check_frame(frame)?;
        let color = color_of(frame);
        let spec = color.spec.unwrap_or(ColorSpec {
            matrix: Matrix::Bt709,
            range: if color.full_range {
                Range::Full
            } else {
                Range::Limited
            },
        });
        Self::keeping(frame, spec)
    }

    pub fn size(&self) -> (u32, u32) {
        (self.width, self.height)
    }

    /// The colour of converted frames.
    pub fn spec(&self) -> ColorSpec {
        self.spec
    }

    pub fn convert(
        &mut self,
        frame: &frame::Video,
        dst: &mut Yuv420Frame,
    ) -> Result<(), MediaError> {
        check_frame(frame)?;
        let color = color_of(frame);
        if matches!(frame.format(), Pixel::YUV420P | Pixel::YUVJ420P)
            && frame.width() == self.width
            && frame.height() == self.height
            && color.spec == Some(self.spec)
        {
            return scale::copy_yuv420(frame, dst);
        }
        let key = self.key(frame, &color, Pixel::YUV420P);
        Sws::cached(&mut self.sws, key)?.scale_to_yuv420(frame, dst)
    }

    /// Converts `frame` into `dst`, an allocated frame of this converter's size in any pixel
    /// format swscale writes (the GPU layouts: yuv420p, NV12, P010), in this converter's colour.
    pub fn convert_video(
        &mut self,
        frame: &frame::Video,
        dst: &mut frame::Video,
    ) -> Result<(), MediaError> {
        check_frame(frame)?;
        let color = color_of(frame);
        let key = self.key(frame, &color, dst.format());
        Sws::cached(&mut self.sws, key)?.scale_to_frame(frame, dst)
    }

    /// The swscale context from `frame` (in `color`) to this converter's size and colour.
    fn key(&self, frame: &frame::Video, color: &FrameColor, dst_fmt: Pixel) -> SwsKey {
        SwsKey {
            src_fmt: frame.format(),
            src_w: frame.width(),
            src_h: frame.height(),
            dst_fmt,
            dst_w: self.width,
            dst_h: self.height,
            flags: ffi::SWS_BICUBIC,
            src_space: color.sws_space,
            src_full: color.full_range,
            dst_space: sws_space_of(self.spec.matrix),
            dst_full: self.spec.range == Range::Full,
        }
    }
}
