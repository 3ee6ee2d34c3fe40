//! The watermark, the same on every backend: where it goes ([`place_watermark`]), its
//! resampling and colour conversion ([`prepare_watermark`]) and the reference blend
//! ([`blend_watermark`]).

use super::color::ColorSpec;
use super::hdr_signal::HdrSignal;
use super::planes::{SampleDepth, Yuv420Frame};

/// Where the watermark sits in the output frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Position {
    TopLeft,
    TopRight,
    BottomLeft,
    #[default]
    BottomRight,
    Center,
}

// The wire/CLI names (`bottom_right`, ...).
vidforge_names::enum_names!(Position {
    TopLeft => "top_left",
    TopRight => "top_right",
    BottomLeft => "bottom_left",
    BottomRight => "bottom_right",
    Center => "center",
});

impl Position {
    /// Exactly a wire/CLI name ([`Position::from_name`]).
    pub fn parse(s: &str) -> Option<Self> {
        Self::from_name(s)
    }
}

/// A decoded watermark: straight (non-premultiplied) alpha, sRGB-encoded RGBA8.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatermarkImage {
    pub width: u32,
    pub height: u32,
    pub rgba: Vec<u8>,
}

/// The output-frame height a watermark image is authored for: at this height it is drawn at its
/// native pixel size; at other sizes it scales with the frame's shorter side.
pub const WATERMARK_REFERENCE_SHORT_SIDE: f64 = 1080.0;
/// Margin between the watermark and the frame edge, as a fraction of the frame's shorter side.
pub const WATERMARK_MARGIN_FRACTION: f64 = 0.03;
/// The watermark never covers more than this fraction of either frame dimension.
pub const WATERMARK_MAX_FRACTION: f64 = 0.5;

/// The watermark's rectangle in output pixels. All four values are even, so the rectangle is
/// aligned to 4:2:0 chroma samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Placement {
    pub x: u32,
    pub y: u32,
    pub width: u32,
    pub height: u32,
}

fn even_floor(v: f64) -> u32 {
    ((v.max(0.0) as u32) / 2) * 2
}

fn even_round(v: f64) -> u32 {
    ((v.max(0.0) / 2.0).round() as u32) * 2
}

/// Places a `wm_w x wm_h` watermark in an `out_w x out_h` frame: scaled with the frame (same
/// relative size at 720p and 4k), capped to [`WATERMARK_MAX_FRACTION`] of the frame, inset by a
/// margin, at `position`. Returns `None` when the result would be empty.
pub fn place_watermark(
    out_w: u32,
    out_h: u32,
    wm_w: u32,
    wm_h: u32,
    position: Position,
) -> Option<Placement> {
    if out_w < 2 || out_h < 2 || wm_w == 0 || wm_h == 0 {
        return None;
    }
    let short = out_w.min(out_h) as f64;
    let mut scale = short / WATERMARK_REFERENCE_SHORT_SIDE;
    let max_w = out_w as f64 * WATERMARK_MAX_FRACTION;
    let max_h = out_h as f64 * WATERMARK_MAX_FRACTION;
    scale = scale.min(max_w / wm_w as f64).min(max_h / wm_h as f64);
    // Nearest even size (flooring lost up to 2 px, which the frame's growth then multiplied),
    // never beyond the cap.
    let width = even_round(wm_w as f64 * scale).min(even_floor(max_w));
    let height = even_round(wm_h as f64 * scale).min(even_floor(max_h));
    if width == 0 || height == 0 {
        return None;
    }
    let margin = even_floor((short * WATERMARK_MARGIN_FRACTION).round());
    let right = out_w - width - margin;
    let bottom = out_h - height - margin;
    let (x, y) = match position {
        Position::TopLeft => (margin, margin),
        Position::TopRight => (right, margin),
        Position::BottomLeft => (margin, bottom),
        Position::BottomRight => (right, bottom),
        Position::Center => (
            even_floor((out_w - width) as f64 / 2.0),
            even_floor((out_h - height) as f64 / 2.0),
        ),
    };
    Some(Placement {
        x,
        y,
        width,
        height,
    })
}

/// A watermark ready to blend: resampled to its placement, converted to the output colour
/// space, with opacity folded into alpha. Alpha is 0..=255 per luma sample (`alpha_y`) and
/// per chroma sample (`alpha_c`, the mean of the 2x2 luma block).
///
/// Blend rule, identical on every backend, per plane sample:
/// `out = (dst * (255 - a) + wm * a + 127) / 255`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreparedWatermark {
    pub placement: Placement,
    /// The depth of the frames it blends into; `y`, `u`, `v` are code values of that depth.
    pub depth: SampleDepth,
    pub y: Vec<u16>,
    pub u: Vec<u16>,
    pub v: Vec<u16>,
    pub alpha_y: Vec<u8>,
    pub alpha_c: Vec<u8>,
}

/// Resamples `image` to `placement` (area average when shrinking, bilinear when enlarging,
/// in premultiplied space so transparent pixels do not bleed colour), converts to `color` and
/// folds `opacity` (clamped to 0..=1) into alpha.
pub fn prepare_watermark(
    image: &WatermarkImage,
    placement: Placement,
    opacity: f32,
    color: ColorSpec,
) -> PreparedWatermark {
    prepare_with(image, placement, opacity, SampleDepth::Eight, |r, g, b| {
        color.rgb_to_yuv(r, g, b)
    })
}

/// [`prepare_watermark`] for frames that stay HDR: the watermark's sRGB graphics placed in
/// `signal`'s light (graphics white at [`HdrSignal::GRAPHICS_WHITE_NITS`]) as 10-bit code
/// values, so that it blends in the output's own transfer.
pub fn prepare_watermark_hdr(
    image: &WatermarkImage,
    placement: Placement,
    opacity: f32,
    signal: &HdrSignal,
) -> PreparedWatermark {
    prepare_with(image, placement, opacity, SampleDepth::Ten, |r, g, b| {
        signal.graphics_to_yuv([r, g, b])
    })
}

/// The preparation both depths share; `to_yuv` maps non-premultiplied sRGB (0..=1) to code
/// values of `depth`.
fn prepare_with(
    image: &WatermarkImage,
    placement: Placement,
    opacity: f32,
    depth: SampleDepth,
    to_yuv: impl Fn(f32, f32, f32) -> [f32; 3],
) -> PreparedWatermark {
    let opacity = opacity.clamp(0.0, 1.0);
    let max = f32::from(depth.max_code());
    let (pw, ph) = (placement.width as usize, placement.height as usize);
    let premul = resample_premultiplied(image, pw, ph);
    let mut y = vec![0u16; pw * ph];
    let mut alpha_y = vec![0u8; pw * ph];
    let mut uf = vec![0f32; pw * ph];
    let mut vf = vec![0f32; pw * ph];
    for i in 0..pw * ph {
        let [r, g, b, a] = premul[i];
        let (r, g, b) = if a > 0.0 {
            (r / a, g / a, b / a)
        } else {
            (0.0, 0.0, 0.0)
        };
        let [yy, u, v] = to_yuv(r, g, b);
        y[i] = yy.round().clamp(0.0, max) as u16;
        uf[i] = u * a;
        vf[i] = v * a;
        alpha_y[i] = (a * opacity * 255.0).round().clamp(0.0, 255.0) as u8;
    }
    // Chroma: alpha-weighted average of each 2x2 block (placement is even-sized).
    let (cw, ch) = (pw / 2, ph / 2);
    let neutral = depth.max_code().div_ceil(2);
    let mut u = vec![neutral; cw * ch];
    let mut v = vec![neutral; cw * ch];
    let mut alpha_c = vec![0u8; cw * ch];
    for cy in 0..ch {
        for cx in 0..cw {
            let mut sa = 0.0f32;
            let mut su = 0.0f32;
            let mut sv = 0.0f32;
            let mut sa_out = 0u32;
            for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                let i = (cy * 2 + dy) * pw + cx * 2 + dx;
                let a = premul[i][3];
                sa += a;
                su += uf[i];
                sv += vf[i];
                sa_out += alpha_y[i] as u32;
            }
            let j = cy * cw + cx;
            if sa > 0.0 {
                u[j] = (su / sa).round().clamp(0.0, max) as u16;
                v[j] = (sv / sa).round().clamp(0.0, max) as u16;
            }
            alpha_c[j] = ((sa_out + 2) / 4) as u8;
        }
    }
    PreparedWatermark {
        placement,
        depth,
        y,
        u,
        v,
        alpha_y,
        alpha_c,
    }
}

fn srgb_premul_pixel(image: &WatermarkImage, x: usize, y: usize) -> [f32; 4] {
    let i = (y * image.width as usize + x) * 4;
    let p = &image.rgba[i..i + 4];
    let a = p[3] as f32 / 255.0;
    [
        p[0] as f32 / 255.0 * a,
        p[1] as f32 / 255.0 * a,
        p[2] as f32 / 255.0 * a,
        a,
    ]
}

/// Separable-in-spirit area/bilinear resample of a premultiplied RGBA image.
fn resample_premultiplied(image: &WatermarkImage, out_w: usize, out_h: usize) -> Vec<[f32; 4]> {
    let (in_w, in_h) = (image.width as usize, image.height as usize);
    let sx = in_w as f64 / out_w as f64;
    let sy = in_h as f64 / out_h as f64;
    let mut out = vec![[0f32; 4]; out_w * out_h];
    for oy in 0..out_h {
        for ox in 0..out_w {
            let px = if sx > 1.0 || sy > 1.0 {
                area_sample(image, ox, oy, sx, sy)
            } else {
                bilinear_sample(image, ox, oy, sx, sy)
            };
            out[oy * out_w + ox] = px;
        }
    }
    out
}

fn area_sample(image: &WatermarkImage, ox: usize, oy: usize, sx: f64, sy: f64) -> [f32; 4] {
    let (in_w, in_h) = (image.width as f64, image.height as f64);
    let x0 = ox as f64 * sx;
    let x1 = ((ox + 1) as f64 * sx).min(in_w);
    let y0 = oy as f64 * sy;
    let y1 = ((oy + 1) as f64 * sy).min(in_h);
    let mut acc = [0f64; 4];
    let mut total = 0f64;
    let mut yy = y0.floor();
    while yy < y1 {
        let wy = (y1.min(yy + 1.0) - y0.max(yy)).max(0.0);
        let mut xx = x0.floor();
        while xx < x1 {
            let wx = (x1.min(xx + 1.0) - x0.max(xx)).max(0.0);
            let w = wx * wy;
            if w > 0.0 {
                let p = srgb_premul_pixel(image, xx as usize, yy as usize);
                for c in 0..4 {
                    acc[c] += p[c] as f64 * w;
                }
                total += w;
            }
            xx += 1.0;
        }
        yy += 1.0;
    }
    if total <= 0.0 {
        return [0.0; 4];
    }
    [
        (acc[0] / total) as f32,
        (acc[1] / total) as f32,
        (acc[2] / total) as f32,
        (acc[3] / total) as f32,
    ]
}

fn bilinear_sample(image: &WatermarkImage, ox: usize, oy: usize, sx: f64, sy: f64) -> [f32; 4] {
    let (in_w, in_h) = (image.width as usize, image.height as usize);
    let fx = ((ox as f64 + 0.5) * sx - 0.5).clamp(0.0, (in_w - 1) as f64);
    let fy = ((oy as f64 + 0.5) * sy - 0.5).clamp(0.0, (in_h - 1) as f64);
    let (x0, y0) = (fx.floor() as usize, fy.floor() as usize);
    let (x1, y1) = ((x0 + 1).min(in_w - 1), (y0 + 1).min(in_h - 1));
    let (tx, ty) = ((fx - x0 as f64) as f32, (fy - y0 as f64) as f32);
    let p00 = srgb_premul_pixel(image, x0, y0);
    let p10 = srgb_premul_pixel(image, x1, y0);
    let p01 = srgb_premul_pixel(image, x0, y1);
    let p11 = srgb_premul_pixel(image, x1, y1);
    let mut out = [0f32; 4];
    for c in 0..4 {
        let top = p00[c] + (p10[c] - p00[c]) * tx;
        let bot = p01[c] + (p11[c] - p01[c]) * tx;
        out[c] = top + (bot - top) * ty;
    }
    out
}

/// Blends a prepared watermark into a frame in place, on the CPU. The reference for every
/// backend's blend; the CPU compositor uses it directly. The frame's depth must be the
/// watermark's (a 10-bit frame blends 10-bit code values, with the same 8-bit alpha rule).
pub fn blend_watermark(frame: &mut Yuv420Frame, wm: &PreparedWatermark) {
    debug_assert_eq!(
        frame.depth, wm.depth,
        "watermark prepared for another depth"
    );
    let p = wm.placement;
    let (fw, cw_frame) = (frame.width as usize, frame.width.div_ceil(2) as usize);
    let (pw, ph) = (p.width as usize, p.height as usize);
    let blend = |dst: u16, src: u16, a: u8| -> u16 {
        let a = a as u32;
        ((dst as u32 * (255 - a) + src as u32 * a + 127) / 255) as u16
    };
    let depth = frame.depth;
    // One row of `n` samples from `start` of a plane, blended with `src`/`alpha`.
    let blend_row = |plane: &mut [u8], start: usize, src: &[u16], alpha: &[u8]| match depth {
        SampleDepth::Eight => {
            for (i, d) in plane[start..][..src.len()].iter_mut().enumerate() {
                *d = blend(u16::from(*d), src[i], alpha[i]) as u8;
            }
        }
        SampleDepth::Ten => {
            for i in 0..src.len() {
                let d = Yuv420Frame::sample16(plane, start + i);
                Yuv420Frame::set_sample16(plane, start + i, blend(d, src[i], alpha[i]));
            }
        }
    };
    for row in 0..ph {
        let start = (p.y as usize + row) * fw + p.x as usize;
        blend_row(
            &mut frame.y,
            start,
            &wm.y[row * pw..][..pw],
            &wm.alpha_y[row * pw..][..pw],
        );
    }
    let (cpw, cph) = (pw / 2, ph / 2);
    let (cx0, cy0) = (p.x as usize / 2, p.y as usize / 2);
    for row in 0..cph {
        let alpha = &wm.alpha_c[row * cpw..][..cpw];
        let start = (cy0 + row) * cw_frame + cx0;
        blend_row(&mut frame.u, start, &wm.u[row * cpw..][..cpw], alpha);
        blend_row(&mut frame.v, start, &wm.v[row * cpw..][..cpw], alpha);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_scales_with_frame_and_stays_inside() {
        for &(w, h) in &[(1280, 720), (1920, 1080), (3840, 2160), (720, 1280)] {
            for pos in Position::ALL {
                let p = place_watermark(w, h, 200, 100, pos).unwrap();
                assert!(
                    p.x + p.width <= w && p.y + p.height <= h,
                    "{w}x{h} {pos:?} {p:?}"
                );
                assert_eq!(p.x % 2 + p.y % 2 + p.width % 2 + p.height % 2, 0);
            }
        }
        let p720 = place_watermark(1280, 720, 200, 100, Position::TopLeft).unwrap();
        let p4k = place_watermark(3840, 2160, 200, 100, Position::TopLeft).unwrap();
        // Same relative size: 3x the pixels at 3x the frame.
        assert!((p4k.width as i32 - 3 * p720.width as i32).abs() <= 2);
        let br = place_watermark(1920, 1080, 200, 100, Position::BottomRight).unwrap();
        assert_eq!((br.width, br.height), (200, 100));
        assert_eq!(br.x + br.width + 32, 1920);
    }

    #[test]
    fn oversized_watermark_is_capped() {
        let p = place_watermark(1280, 720, 5000, 5000, Position::Center).unwrap();
        assert!(p.width <= 640 && p.height <= 360);
    }

    #[test]
    fn opaque_white_watermark_blends_to_white() {
        let img = WatermarkImage {
            width: 4,
            height: 4,
            rgba: vec![255; 64],
        };
        let placement = Placement {
            x: 2,
            y: 2,
            width: 4,
            height: 4,
        };
        let wm = prepare_watermark(&img, placement, 1.0, ColorSpec::OUTPUT);
        let mut f = Yuv420Frame::filled(8, 8, [16, 128, 128]);
        blend_watermark(&mut f, &wm);
        assert_eq!(f.y[2 * 8 + 2], 235);
        assert_eq!(f.y[0], 16);
        assert_eq!(f.u[4 + 1], 128);
    }
}
