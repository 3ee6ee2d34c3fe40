//! The CPU compositor: swscale, our AVX2 area scaler, the colour affine and the tone mapper,
//! then the watermark blend. HDR kept as HDR is scaled straight to 10-bit frames.

use ffmpeg::ffi;
use ffmpeg::format::Pixel;
use ffmpeg::frame;
use ffmpeg_next as ffmpeg;
use vidforge_gpu::filter::{ColorAffine, ColorMode, color_affine, to_code};
use vidforge_gpu::frame::tonemap::ToneMapper;
use vidforge_gpu::{ColorSpec, OutputLight, Rotation, Yuv420Frame, blend_watermark};

use super::spec::{ComposeSpec, Compositor, check_frame, color_of};
use crate::area::{self, PlaneScaler};
use crate::error::MediaError;
use crate::hdr_out::HDR_OUTPUT_FORMAT;
use crate::scale::{self, Sws, SwsKey};
use crate::tonemap::{HDR_WORK_FORMAT, tone_map_frame};

/// swscale straight from the decoded frame to yuv420p at output size (area filter when
/// shrinking, bicubic when enlarging), planes rotated when needed, the source's BT.601/BT.709
/// matrix and range converted to BT.709 limited with the same affine the GPU shader uses,
/// then the CPU watermark blend over the watermark rectangle only.
///
/// The common case, an 8-bit yuv420p source shrunk on both axes, skips swscale where AVX2 is
/// available: our own area scaler (the private `area` module: the same exact-coverage filter,
/// vertical pass first) costs well under swscale's time, and a same-size frame is a plain copy.
///
/// The colour step runs on the scaled frame rather than inside swscale because swscale
/// converts YUV matrices through an 8-bit RGB intermediate (an extra pass, sharper chroma,
/// rounding loss); other matrices (BT.2020, ...) still take that route.
pub struct CpuCompositor {
    spec: ComposeSpec,
    sws: Option<Sws>,
    /// The yuv420p shrink fast path, for the last source size seen.
    area: Option<AreaScaler>,
    /// Pre-rotation scaler output, only used for rotated sources.
    scratch: Option<Yuv420Frame>,
    spare: Vec<Yuv420Frame>,
    /// Chroma contributions of one luma row (colour conversion scratch).
    row: Vec<f32>,
    /// HDR sources tone-mapped to SDR: the tone mapper and the 10-bit frame scaled for it.
    hdr: Option<(ToneMapper, frame::Video)>,
}

impl CpuCompositor {
    pub fn new(spec: ComposeSpec) -> Self {
        CpuCompositor {
            sws: None,
            area: None,
            scratch: None,
            spare: Vec::new(),
            row: Vec::new(),
            hdr: spec
                .light
                .tone_map()
                .map(|t| (t.mapper(), frame::Video::empty())),
            spec,
        }
    }

    fn take_buffer(&mut self, w: u32, h: u32) -> Yuv420Frame {
        let depth = self.spec.light.depth();
        while let Some(f) = self.spare.pop() {
            if f.width == w && f.height == h && f.depth == depth {
                return f;
            }
        }
        Yuv420Frame::blank(w, h, depth)
    }
}

impl Compositor for CpuCompositor {
    fn push(&mut self, frame: &frame::Video) -> Result<Option<Yuv420Frame>, MediaError> {
        check_frame(frame)?;
        let (fw, fh) = (frame.width(), frame.height());
        let color = color_of(frame);
        let (ow, oh) = (self.spec.out_width, self.spec.out_height);
        let rot = self.spec.rotation;
        let (sw, sh) = if rot.swaps_axes() { (oh, ow) } else { (ow, oh) };
        let enlarging = (sw as u64 * sh as u64) > (fw as u64 * fh as u64);
        let flags = if enlarging {
            ffi::SWS_BICUBIC
        } else {
            ffi::SWS_AREA
        };
        // Representable colour passes through swscale untouched (scaling only); so does HDR,
        // scaled at 10 bits for the tone mapper. HDR kept comes out at 10 bits in its own
        // matrix, limited range.
        let hdr = self.hdr.is_some();
        let keep = matches!(self.spec.light, OutputLight::Kept { .. });
        let (dst_space, dst_full, affine) = match color.spec {
            _ if keep => (color.sws_space, false, None),
            _ if hdr => (color.sws_space, color.full_range, None),
            Some(spec) => (
                color.sws_space,
                color.full_range,
                Some(color_affine(spec, ColorSpec::OUTPUT))
                    .filter(|a| a.mode != ColorMode::Identity),
            ),
            None => (ffi::SWS_CS_ITU709, false, None),
        };
        let key = SwsKey {
            src_fmt: frame.format(),
            src_w: fw,
            src_h: fh,
            dst_fmt: if keep {
                HDR_OUTPUT_FORMAT
            } else if hdr {
                HDR_WORK_FORMAT
            } else {
                Pixel::YUV420P
            },
            dst_w: sw,
            dst_h: sh,
            flags,
            src_space: color.sws_space,
            src_full: color.full_range,
            dst_space,
            dst_full,
        };
        // 8-bit 4:2:0 with a matrix we convert ourselves, shrinking or same size on both axes:
        // swscale would only resample, which our area scaler (or a copy) does faster where
        // its SIMD passes run.
        let fast = !hdr
            && !keep
            && matches!(frame.format(), Pixel::YUV420P | Pixel::YUVJ420P)
            && area::accelerated()
            && color.spec.is_some()
            && sw <= fw
            && sh <= fh;
        let mut out = self.take_buffer(ow, oh);
        let mut scratch = None;
        if rot != Rotation::None {
            let depth = self.spec.light.depth();
            scratch = Some(match self.scratch.take() {
                Some(s) if s.width == sw && s.height == sh && s.depth == depth => s,
                _ => Yuv420Frame::blank(sw, sh, depth),
            });
        }
        let target = scratch.as_mut().unwrap_or(&mut out);
        if let Some((mapper, work)) = self.hdr.as_mut() {
            if (work.width(), work.height()) != (sw, sh) {
                *work = frame::Video::new(HDR_WORK_FORMAT, sw, sh);
            }
            Sws::cached(&mut self.sws, key)?.scale_to_frame(frame, work)?;
            tone_map_frame(work, target, mapper)?;
        } else if fast && (sw, sh) == (fw, fh) {
            scale::copy_yuv420(frame, target)?;
        } else if fast {
            AreaScaler::cached(&mut self.area, (fw, fh), (sw, sh))?.scale(frame, target)?;
        } else {
            Sws::cached(&mut self.sws, key)?.scale_to_yuv420(frame, target)?;
        }
        if let Some(scratch) = scratch {
            scale::rotate_frame(&scratch, &mut out, rot);
            self.scratch = Some(scratch);
        }
        if let Some(affine) = &affine {
            convert_color(&mut out, affine, &mut self.row);
        }
        if let Some(wm) = &self.spec.watermark {
            blend_watermark(&mut out, wm);
        }
        Ok(Some(out))
    }

    fn finish(&mut self) -> Result<Vec<Yuv420Frame>, MediaError> {
        Ok(Vec::new())
    }

    fn recycle(&mut self, frame: Yuv420Frame) {
        if self.spare.len() < 4 {
            self.spare.push(frame);
        }
    }

    fn backend(&self) -> String {
        "cpu".to_string()
    }
}

/// Area scalers for one source size to one output size: luma, and chroma (shared by U and V).
struct AreaScaler {
    luma: PlaneScaler,
    chroma: PlaneScaler,
}

impl AreaScaler {
    /// The cached scaler when it fits these sizes, else a new one in its place.
    fn cached(
        slot: &mut Option<AreaScaler>,
        src: (u32, u32),
        dst: (u32, u32),
    ) -> Result<&mut AreaScaler, MediaError> {
        let chroma = |(w, h)| Yuv420Frame::chroma_size(w, h);
        let fits = |a: &AreaScaler| {
            let size = |(w, h): (u32, u32)| (w as usize, h as usize);
            a.luma.sizes() == (size(src), size(dst))
                && a.chroma.sizes() == (size(chroma(src)), size(chroma(dst)))
        };
        if !slot.as_ref().is_some_and(fits) {
            let (cs, cd) = (chroma(src), chroma(dst));
            *slot = Some(AreaScaler {
                luma: PlaneScaler::new(src.0, src.1, dst.0, dst.1)?,
                chroma: PlaneScaler::new(cs.0, cs.1, cd.0, cd.1)?,
            });
        }
        slot.as_mut()
            .ok_or_else(|| MediaError::failed("area scaler missing"))
    }

    /// Scales the three planes of a yuv420p/yuvj420p frame into `dst`.
    fn scale(&mut self, src: &frame::Video, dst: &mut Yuv420Frame) -> Result<(), MediaError> {
        if !matches!(src.format(), Pixel::YUV420P | Pixel::YUVJ420P) {
            return Err(MediaError::failed("area scaler needs a yuv420p frame"));
        }
        self.luma.scale(src.data(0), src.stride(0), &mut dst.y)?;
        self.chroma.scale(src.data(1), src.stride(1), &mut dst.u)?;
        self.chroma.scale(src.data(2), src.stride(2), &mut dst.v)
    }
}

/// Applies a YUV->YUV colour affine in place, like the GPU shader: each chroma sample from
/// both chroma planes; each luma sample from itself plus bilinear (centre-sited) chroma.
fn convert_color(f: &mut Yuv420Frame, a: &ColorAffine, row: &mut Vec<f32>) {
    let r = a.rows.map(|r| r.map(|v| v as f32));
    match a.mode {
        // Tone mapping is not an affine: `color_affine` never returns it.
        ColorMode::Identity | ColorMode::ToneMap => {}
        ColorMode::Diagonal => {
            for (i, plane) in [&mut f.y, &mut f.u, &mut f.v].into_iter().enumerate() {
                let lut: Vec<u8> = (0..256)
                    .map(|v| to_code(r[i][i] * v as f32 + r[i][3]))
                    .collect();
                for p in plane.iter_mut() {
                    *p = lut[*p as usize];
                }
            }
        }
        ColorMode::Full => {
            let (w, h) = (f.width as usize, f.height as usize);
            let (cw, ch) = Yuv420Frame::chroma_size(f.width, f.height);
            let (cw, ch) = (cw as usize, ch as usize);
            row.clear();
            row.resize(cw, 0.0);
            // Luma first: it reads the chroma planes before they change.
            for y in 0..h {
                // Chroma row position of this luma row (centre siting): y/2 - 0.25.
                let pos = (y as f32 * 0.5 - 0.25).max(0.0);
                let c0 = (pos as usize).min(ch - 1);
                let c1 = (c0 + 1).min(ch - 1);
                let t = pos - c0 as f32;
                let (u0, u1) = (&f.u[c0 * cw..][..cw], &f.u[c1 * cw..][..cw]);
                let (v0, v1) = (&f.v[c0 * cw..][..cw], &f.v[c1 * cw..][..cw]);
                for (cx, out) in row.iter_mut().enumerate() {
                    let u = u0[cx] as f32 + (u1[cx] as f32 - u0[cx] as f32) * t;
                    let v = v0[cx] as f32 + (v1[cx] as f32 - v0[cx] as f32) * t;
                    *out = r[0][1] * u + r[0][2] * v + r[0][3];
                }
                let luma = &mut f.y[y * w..][..w];
                for (x, p) in luma.iter_mut().enumerate() {
                    // Horizontal chroma position x/2 - 0.25: 1/4-3/4 weights.
                    let k = x / 2;
                    let c = if x % 2 == 0 {
                        let left = row[k.saturating_sub(1)];
                        if k == 0 {
                            row[0]
                        } else {
                            0.25 * left + 0.75 * row[k]
                        }
                    } else {
                        let right = row[(k + 1).min(cw - 1)];
                        0.75 * row[k] + 0.25 * right
                    };
                    *p = to_code(r[0][0] * *p as f32 + c);
                }
            }
            for (u, v) in f.u.iter_mut().zip(f.v.iter_mut()) {
                let (fu, fv) = (*u as f32, *v as f32);
                *u = to_code(r[1][1] * fu + r[1][2] * fv + r[1][3]);
                *v = to_code(r[2][1] * fu + r[2][2] * fv + r[2][3]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use vidforge_gpu::{Matrix, Range};

    use super::*;

    #[test]
    fn colour_conversion_matches_the_affine_on_flat_frames() {
        let src = ColorSpec {
            matrix: Matrix::Bt601,
            range: Range::Full,
        };
        let a = color_affine(src, ColorSpec::OUTPUT);
        assert_eq!(a.mode, ColorMode::Full);
        let mut row = Vec::new();
        for yuv in [[16u8, 128, 128], [200, 60, 190], [90, 200, 40]] {
            let mut f = Yuv420Frame::filled(6, 4, yuv);
            convert_color(&mut f, &a, &mut row);
            let want = a
                .apply(yuv.map(f64::from))
                .map(|v| (v + 0.5).floor().clamp(0.0, 255.0) as u8);
            assert!(
                f.y.iter().all(|&v| v == want[0]),
                "{yuv:?}: {:?} vs {want:?}",
                f.y
            );
            assert!(f.u.iter().all(|&v| v == want[1]));
            assert!(f.v.iter().all(|&v| v == want[2]));
        }
        // Range only: a lookup per plane.
        let d = color_affine(
            ColorSpec {
                matrix: Matrix::Bt709,
                range: Range::Full,
            },
            ColorSpec::OUTPUT,
        );
        assert_eq!(d.mode, ColorMode::Diagonal);
        let mut f = Yuv420Frame::filled(2, 2, [0, 128, 255]);
        convert_color(&mut f, &d, &mut row);
        assert_eq!((f.y[0], f.u[0], f.v[0]), (16, 128, 240));
    }
}
