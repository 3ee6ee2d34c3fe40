//! HDR to SDR on the CPU: a 10-bit 4:2:0 frame at output size, tone-mapped sample by sample
//! into 8-bit BT.709 by [`ToneMapper`] (the chain of `vidforge_gpu::frame::tonemap`). Each
//! output sample needs all three source components at its site, read as the GPU shader reads
//! them: a luma sample takes bilinear (centre-sited) chroma, a chroma sample the mean of the
//! 2x2 luma samples it covers.

use ffmpeg::format::Pixel;
use ffmpeg::frame;
use ffmpeg_next as ffmpeg;
use vidforge_gpu::Yuv420Frame;
use vidforge_gpu::filter::to_code;
use vidforge_gpu::frame::tonemap::ToneMapper;

use crate::error::MediaError;

/// The pixel format HDR frames are scaled into before tone mapping.
pub(crate) const HDR_WORK_FORMAT: Pixel = Pixel::YUV420P10LE;

/// One plane of a yuv420p10le frame as rows of samples on the 8-bit code scale (code / 4).
struct Plane<'a> {
    data: &'a [u8],
    stride: usize,
}

impl Plane<'_> {
    #[inline]
    fn at(&self, x: usize, y: usize) -> f32 {
        let i = y * self.stride + 2 * x;
        f32::from(u16::from_le_bytes([self.data[i], self.data[i + 1]])) * 0.25
    }
}

/// Tone-maps `src` (yuv420p10le, the size of `dst`) into `dst`.
pub(crate) fn tone_map_frame(
    src: &frame::Video,
    dst: &mut Yuv420Frame,
    mapper: &ToneMapper,
) -> Result<(), MediaError> {
    if src.format() != HDR_WORK_FORMAT || (src.width(), src.height()) != (dst.width, dst.height) {
        return Err(MediaError::failed(
            "tone mapping needs a yuv420p10le frame of the output size",
        ));
    }
    let (w, h) = (dst.width as usize, dst.height as usize);
    let (cw, ch) = Yuv420Frame::chroma_size(dst.width, dst.height);
    let (cw, ch) = (cw as usize, ch as usize);
    let plane = |i: usize| Plane {
        data: src.data(i),
        stride: src.stride(i),
    };
    let (py, pu, pv) = (plane(0), plane(1), plane(2));
    // Luma: chroma at (x/2 - 0.25, y/2 - 0.25), as `convert_color` and the shader read it:
    // each chroma row pair interpolated once per luma row, then 1/4-3/4 across.
    let (mut us, mut vs) = (vec![0f32; cw], vec![0f32; cw]);
    for y in 0..h {
        let pos = (y as f32 * 0.5 - 0.25).max(0.0);
        let c0 = (pos as usize).min(ch - 1);
        let c1 = (c0 + 1).min(ch - 1);
        let t = pos - c0 as f32;
        for cx in 0..cw {
            us[cx] = pu.at(cx, c0) + (pu.at(cx, c1) - pu.at(cx, c0)) * t;
            vs[cx] = pv.at(cx, c0) + (pv.at(cx, c1) - pv.at(cx, c0)) * t;
        }
        let row = &mut dst.y[y * w..][..w];
        for (x, out) in row.iter_mut().enumerate() {
            let k = x / 2;
            let (a, b, wa) = if x % 2 == 0 {
                (k.saturating_sub(1), k, if k == 0 { 0.0 } else { 0.25 })
            } else {
                (k, (k + 1).min(cw - 1), 0.75)
            };
            let u = wa * us[a] + (1.0 - wa) * us[b];
            let v = wa * vs[a] + (1.0 - wa) * vs[b];
            *out = to_code(mapper.map([py.at(x, y), u, v])[0]);
        }
    }
    // Chroma: the mean of the luma samples it covers.
    for cy in 0..ch {
        let (y0, y1) = (2 * cy, (2 * cy + 1).min(h - 1));
        for cx in 0..cw {
            let (x0, x1) = (2 * cx, (2 * cx + 1).min(w - 1));
            let luma = 0.25 * (py.at(x0, y0) + py.at(x1, y0) + py.at(x0, y1) + py.at(x1, y1));
            let out = mapper.map([luma, pu.at(cx, cy), pv.at(cx, cy)]);
            dst.u[cy * cw + cx] = to_code(out[1]);
            dst.v[cy * cw + cx] = to_code(out[2]);
        }
    }
    Ok(())
}
