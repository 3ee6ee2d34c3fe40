//! HDR kept in the output ([`OutputLight::Kept`](vidforge_gpu::OutputLight::Kept)): the 10-bit encoders' choice
//! and options, the colour tags, and the source's mastering display and content light
//! metadata carried over, both in the bitstream (x265's SEI) and on the stream (the muxers'
//! `mdcv`/`clli` boxes and Matroska's `MasteringMetadata`).

use ffmpeg::ffi;
use ffmpeg::format::Pixel;
use ffmpeg_next as ffmpeg;
use vidforge_gpu::frame::HdrSignal;
use vidforge_gpu::frame::tonemap::{Primaries, Transfer};
use vidforge_gpu::{Matrix, SampleDepth};

use crate::error::MediaError;
use crate::source::hdr::{ContentLight, MasteringDisplay, SourceColor};

/// The HEVC encoder of HDR output in mp4 and mov (HEVC Main10).
pub(crate) const HEVC_ENCODER: &str = "libx265";
/// The pixel format HDR output is encoded from.
pub(crate) const HDR_OUTPUT_FORMAT: Pixel = Pixel::YUV420P10LE;

/// FFmpeg's name for the layout of a composed frame of `depth`.
pub(crate) fn pixel_format(depth: SampleDepth) -> Pixel {
    match depth {
        SampleDepth::Eight => Pixel::YUV420P,
        SampleDepth::Ten => HDR_OUTPUT_FORMAT,
    }
}

/// What an HDR output carries over from its source.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct HdrOutput {
    pub signal: HdrSignal,
    pub mastering: Option<MasteringDisplay>,
    pub content_light: Option<ContentLight>,
}

impl HdrOutput {
    /// The output of an HDR source kept in `signal` (the output's light), with the metadata
    /// its declared `color` carries.
    pub fn new(signal: HdrSignal, color: &SourceColor) -> HdrOutput {
        HdrOutput {
            signal,
            mastering: color.mastering,
            content_light: color.content_light,
        }
    }

    pub fn primaries(&self) -> ffmpeg::color::Primaries {
        match self.signal.primaries {
            Primaries::Bt2020 => ffmpeg::color::Primaries::BT2020,
            Primaries::Bt709 => ffmpeg::color::Primaries::BT709,
        }
    }

    pub fn transfer(&self) -> ffmpeg::color::TransferCharacteristic {
        match self.signal.transfer {
            Transfer::Pq => ffmpeg::color::TransferCharacteristic::SMPTE2084,
            Transfer::Hlg => ffmpeg::color::TransferCharacteristic::ARIB_STD_B67,
        }
    }

    pub fn matrix(&self) -> ffmpeg::color::Space {
        match self.signal.output.matrix {
            Matrix::Bt2020 => ffmpeg::color::Space::BT2020NCL,
            Matrix::Bt709 => ffmpeg::color::Space::BT709,
            Matrix::Bt601 => ffmpeg::color::Space::BT470BG,
        }
    }

    /// libx265's `x265-params`: the HDR10 SEI (mastering display, content light) for PQ,
    /// and the same metadata for HLG when the source had it.
    pub fn x265_params(&self) -> String {
        let mut params = vec![
            "log-level=error".to_string(),
            "repeat-headers=1".to_string(),
        ];
        if self.signal.transfer == Transfer::Pq {
            params.push("hdr10=1".to_string());
        }
        if let Some(m) = self.mastering {
            // x265 wants G, B, R, white point in 0.00002 steps, luminance in 0.0001 nits.
            let [r, g, b, wp] = m.primaries.unwrap_or(BT2020_D65);
            let xy = |(x, y): (f64, f64)| {
                format!("({},{})", (x * 50_000.0).round(), (y * 50_000.0).round())
            };
            params.push(format!(
                "master-display=G{}B{}R{}WP{}L({},{})",
                xy(g),
                xy(b),
                xy(r),
                xy(wp),
                (m.max_nits * 10_000.0).round(),
                (m.min_nits * 10_000.0).round()
            ));
        }
        if let Some(c) = self.content_light {
            params.push(format!("max-cll={},{}", c.max_cll, c.max_fall));
        }
        params.join(":")
    }

    /// Puts the mastering display and content light metadata on the output stream, where
    /// the muxers write them (`AVMasteringDisplayMetadata`, `AVContentLightMetadata`).
    ///
    /// # Safety
    ///
    /// `stream` must be a valid stream of an output context whose header is not written yet.
    pub unsafe fn add_stream_side_data(
        &self,
        stream: *mut ffi::AVStream,
    ) -> Result<(), MediaError> {
        let mut blocks = Vec::new();
        if let Some(m) = self.mastering {
            blocks.push((
                ffi::AVPacketSideDataType::AV_PKT_DATA_MASTERING_DISPLAY_METADATA,
                crate::source::hdr::mastering_bytes(&m),
            ));
        }
        if let Some(c) = self.content_light {
            blocks.push((
                ffi::AVPacketSideDataType::AV_PKT_DATA_CONTENT_LIGHT_LEVEL,
                crate::source::hdr::content_light_bytes(&c),
            ));
        }
        for (kind, bytes) in blocks {
            // SAFETY: `stream` is valid (the caller's contract); the block FFmpeg allocates
            // has `bytes.len()` bytes.
            unsafe {
                let dst = ffi::av_stream_new_side_data(stream, kind, bytes.len() as _);
                if dst.is_null() {
                    return Err(MediaError::failed("cannot add HDR metadata to the stream"));
                }
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len());
            }
        }
        Ok(())
    }
}

/// BT.2020's primaries and D65, for mastering metadata that gives only luminance.
const BT2020_D65: [(f64, f64); 4] = [
    (0.708, 0.292),
    (0.170, 0.797),
    (0.131, 0.046),
    (0.3127, 0.3290),
];

#[cfg(test)]
mod tests {
    use super::*;
    use vidforge_gpu::{ColorSpec, Range};

    #[test]
    fn x265_params_carry_the_hdr10_metadata() {
        let out = HdrOutput {
            signal: HdrSignal {
                transfer: Transfer::Pq,
                primaries: Primaries::Bt2020,
                output: ColorSpec {
                    matrix: Matrix::Bt2020,
                    range: Range::Limited,
                },
            },
            mastering: Some(MasteringDisplay {
                max_nits: 1000.0,
                min_nits: 0.005,
                primaries: Some([(0.68, 0.32), (0.265, 0.69), (0.15, 0.06), (0.3127, 0.329)]),
            }),
            content_light: Some(ContentLight {
                max_cll: 1000,
                max_fall: 400,
            }),
        };
        assert_eq!(
            out.x265_params(),
            "log-level=error:repeat-headers=1:hdr10=1:\
             master-display=G(13250,34500)B(7500,3000)R(34000,16000)WP(15635,16450)L(10000000,50):\
             max-cll=1000,400"
        );
    }
}
