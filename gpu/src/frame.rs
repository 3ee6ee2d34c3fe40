//! Plain frame and geometry types shared by every compositor backend.
//!
//! Everything here is pure CPU code with no GPU or FFmpeg dependency, so the wgpu compositor
//! (this crate) and the CPU compositor (the media crate) agree on placement and on the prepared
//! watermark bit for bit: the only difference between backends is the scaler.

/// An 8-bit planar 4:2:0 frame, tightly packed (stride == width of each plane).
///
/// Chroma planes are `ceil(width/2) x ceil(height/2)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Yuv420Frame {
    pub width: u32,
    pub height: u32,
    pub y: Vec<u8>,
    pub u: Vec<u8>,
    pub v: Vec<u8>,
}

impl Yuv420Frame {
    /// Chroma plane size for a luma size.
    pub fn chroma_size(width: u32, height: u32) -> (u32, u32) {
        (width.div_ceil(2), height.div_ceil(2))
    }

    /// A frame filled with one colour given as Y, U, V code values.
    pub fn filled(width: u32, height: u32, yuv: [u8; 3]) -> Self {
        let (cw, ch) = Self::chroma_size(width, height);
        Self {
            width,
            height,
            y: vec![yuv[0]; (width * height) as usize],
            u: vec![yuv[1]; (cw * ch) as usize],
            v: vec![yuv[2]; (cw * ch) as usize],
        }
    }

    /// Total bytes of the three planes.
    pub fn byte_len(&self) -> usize {
        self.y.len() + self.u.len() + self.v.len()
    }
}

/// How a source frame's planes are laid out in memory: what decoders hand over. Software
/// decoders mostly give planar `Yuv420p`; NVDEC (and many hardware decoders) give `Nv12`
/// (8-bit luma plane + one interleaved U/V plane) or `P010` for 10-bit video (the same
/// layout with 16-bit little-endian samples, the value in the high 10 bits).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SourceFormat {
    #[default]
    Yuv420p,
    Nv12,
    P010,
}

impl SourceFormat {
    /// Bytes per sample.
    pub fn sample_bytes(self) -> u32 {
        match self {
            SourceFormat::P010 => 2,
            _ => 1,
        }
    }

    /// Planes in memory: 3 for planar, 2 for the semi-planar formats.
    pub fn plane_count(self) -> usize {
        match self {
            SourceFormat::Yuv420p => 3,
            _ => 2,
        }
    }

    /// Bytes of one row of plane `plane` and its number of rows, for a `width x height`
    /// frame (tightly packed).
    pub fn plane_shape(self, plane: usize, width: u32, height: u32) -> (usize, usize) {
        let (cw, ch) = Yuv420Frame::chroma_size(width, height);
        let sb = self.sample_bytes() as usize;
        match (self, plane) {
            (_, 0) => (width as usize * sb, height as usize),
            (SourceFormat::Yuv420p, _) => (cw as usize, ch as usize),
            // Interleaved U/V: two samples per chroma position.
            _ => (2 * cw as usize * sb, ch as usize),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SourceFormat::Yuv420p => "yuv420p",
            SourceFormat::Nv12 => "nv12",
            SourceFormat::P010 => "p010",
        }
    }
}

/// A borrowed source frame of any [`SourceFormat`]: per plane its bytes and row stride (bytes
/// from one row's start to the next, at least the row's length; decoders pad rows). Unused
/// planes are empty.
#[derive(Clone, Copy, Debug)]
pub struct SourceFrame<'a> {
    pub width: u32,
    pub height: u32,
    pub format: SourceFormat,
    pub planes: [(&'a [u8], usize); 3],
}

impl<'a> From<&'a Yuv420Frame> for SourceFrame<'a> {
    fn from(f: &'a Yuv420Frame) -> Self {
        let cw = Yuv420Frame::chroma_size(f.width, f.height).0 as usize;
        SourceFrame {
            width: f.width,
            height: f.height,
            format: SourceFormat::Yuv420p,
            planes: [(&f.y, f.width as usize), (&f.u, cw), (&f.v, cw)],
        }
    }
}

impl<'a> From<&'a SemiPlanarFrame> for SourceFrame<'a> {
    fn from(f: &'a SemiPlanarFrame) -> Self {
        f.as_source()
    }
}

/// An owned semi-planar frame (NV12, or P010 with 16-bit little-endian samples), tightly
/// packed: what tests and benchmarks build from a [`Yuv420Frame`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SemiPlanarFrame {
    pub width: u32,
    pub height: u32,
    pub format: SourceFormat,
    pub y: Vec<u8>,
    pub uv: Vec<u8>,
}

impl SemiPlanarFrame {
    /// The same picture as NV12 (exact) or P010 (each 8-bit code `c` as the 10-bit `4c`, plus
    /// `low_bits` (0..=3) below it, so 10-bit detail the 8-bit output must round away).
    pub fn from_yuv420(f: &Yuv420Frame, format: SourceFormat, low_bits: u16) -> Self {
        let sample = |c: u8| -> Vec<u8> {
            match format {
                SourceFormat::P010 => ((u16::from(c) * 4 + (low_bits & 3)) << 6)
                    .to_le_bytes()
                    .to_vec(),
                _ => vec![c],
            }
        };
        let y = f.y.iter().flat_map(|&c| sample(c)).collect();
        let uv =
            f.u.iter()
                .zip(&f.v)
                .flat_map(|(&u, &v)| {
                    let mut pair = sample(u);
                    pair.extend(sample(v));
                    pair
                })
                .collect();
        SemiPlanarFrame {
            width: f.width,
            height: f.height,
            format,
            y,
            uv,
        }
    }

    pub fn as_source(&self) -> SourceFrame<'_> {
        let row = |plane| self.format.plane_shape(plane, self.width, self.height).0;
        SourceFrame {
            width: self.width,
            height: self.height,
            format: self.format,
            planes: [(&self.y, row(0)), (&self.uv, row(1)), (&[], 0)],
        }
    }
}

/// YUV <-> RGB matrix coefficients.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Matrix {
    Bt601,
    Bt709,
}

/// Code-value range of a YUV signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Range {
    /// Y 16..235, UV 16..240 ("tv"/"mpeg").
    Limited,
    /// 0..255 ("pc"/"jpeg").
    Full,
}

/// How YUV code values map to colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ColorSpec {
    pub matrix: Matrix,
    pub range: Range,
}

impl ColorSpec {
    /// What every rendered output uses: BT.709, limited range (tagged on the encoded stream).
    pub const OUTPUT: ColorSpec = ColorSpec {
        matrix: Matrix::Bt709,
        range: Range::Limited,
    };

    /// Kr, Kb of the matrix.
    pub fn coefficients(self) -> (f32, f32) {
        match self.matrix {
            Matrix::Bt601 => (0.299, 0.114),
            Matrix::Bt709 => (0.2126, 0.0722),
        }
    }

    /// Converts non-linear RGB in 0..1 to Y, U, V code values (0..255, not rounded).
    pub fn rgb_to_yuv(self, r: f32, g: f32, b: f32) -> [f32; 3] {
        let (kr, kb) = self.coefficients();
        let kg = 1.0 - kr - kb;
        let y = kr * r + kg * g + kb * b;
        let pb = (b - y) / (2.0 * (1.0 - kb));
        let pr = (r - y) / (2.0 * (1.0 - kr));
        match self.range {
            Range::Limited => [16.0 + 219.0 * y, 128.0 + 224.0 * pb, 128.0 + 224.0 * pr],
            Range::Full => [255.0 * y, 128.0 + 255.0 * pb, 128.0 + 255.0 * pr],
        }
    }
}

/// Clockwise rotation to apply to decoded frames so they display upright.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Rotation {
    #[default]
    None,
    Cw90,
    Cw180,
    Cw270,
}

impl Rotation {
    /// From a display-matrix angle in degrees (any multiple of 90, any sign), as the clockwise
    /// rotation that makes the picture upright.
    pub fn from_clockwise_degrees(degrees: i64) -> Self {
        match degrees.rem_euclid(360) {
            90 => Rotation::Cw90,
            180 => Rotation::Cw180,
            270 => Rotation::Cw270,
            _ => Rotation::None,
        }
    }

    pub fn degrees(self) -> u32 {
        match self {
            Rotation::None => 0,
            Rotation::Cw90 => 90,
            Rotation::Cw180 => 180,
            Rotation::Cw270 => 270,
        }
    }

    /// True when width and height swap.
    pub fn swaps_axes(self) -> bool {
        matches!(self, Rotation::Cw90 | Rotation::Cw270)
    }

    /// Display size of a coded `w x h` frame after rotation.
    pub fn display_size(self, w: u32, h: u32) -> (u32, u32) {
        if self.swaps_axes() { (h, w) } else { (w, h) }
    }
}

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

impl Position {
    pub const ALL: [Position; 5] = [
        Position::TopLeft,
        Position::TopRight,
        Position::BottomLeft,
        Position::BottomRight,
        Position::Center,
    ];

    /// The wire/CLI name (`bottom_right`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Position::TopLeft => "top_left",
            Position::TopRight => "top_right",
            Position::BottomLeft => "bottom_left",
            Position::BottomRight => "bottom_right",
            Position::Center => "center",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
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
    pub y: Vec<u8>,
    pub u: Vec<u8>,
    pub v: Vec<u8>,
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
    let opacity = opacity.clamp(0.0, 1.0);
    let (pw, ph) = (placement.width as usize, placement.height as usize);
    let premul = resample_premultiplied(image, pw, ph);
    let mut y = vec![0u8; pw * ph];
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
        let [yy, u, v] = color.rgb_to_yuv(r, g, b);
        y[i] = yy.round().clamp(0.0, 255.0) as u8;
        uf[i] = u * a;
        vf[i] = v * a;
        alpha_y[i] = (a * opacity * 255.0).round().clamp(0.0, 255.0) as u8;
    }
    // Chroma: alpha-weighted average of each 2x2 block (placement is even-sized).
    let (cw, ch) = (pw / 2, ph / 2);
    let mut u = vec![128u8; cw * ch];
    let mut v = vec![128u8; cw * ch];
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
                u[j] = (su / sa).round().clamp(0.0, 255.0) as u8;
                v[j] = (sv / sa).round().clamp(0.0, 255.0) as u8;
            }
            alpha_c[j] = ((sa_out + 2) / 4) as u8;
        }
    }
    PreparedWatermark {
        placement,
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
/// backend's blend; the CPU compositor uses it directly.
pub fn blend_watermark(frame: &mut Yuv420Frame, wm: &PreparedWatermark) {
    let p = wm.placement;
    let (fw, cw_frame) = (frame.width as usize, frame.width.div_ceil(2) as usize);
    let (pw, ph) = (p.width as usize, p.height as usize);
    let blend = |dst: u8, src: u8, a: u8| -> u8 {
        let a = a as u32;
        ((dst as u32 * (255 - a) + src as u32 * a + 127) / 255) as u8
    };
    for row in 0..ph {
        let dst = &mut frame.y[(p.y as usize + row) * fw + p.x as usize..][..pw];
        let src = &wm.y[row * pw..][..pw];
        let alpha = &wm.alpha_y[row * pw..][..pw];
        for i in 0..pw {
            dst[i] = blend(dst[i], src[i], alpha[i]);
        }
    }
    let (cpw, cph) = (pw / 2, ph / 2);
    let (cx0, cy0) = (p.x as usize / 2, p.y as usize / 2);
    for row in 0..cph {
        let alpha = &wm.alpha_c[row * cpw..][..cpw];
        for (plane, src_plane) in [(&mut frame.u, &wm.u), (&mut frame.v, &wm.v)] {
            let dst = &mut plane[(cy0 + row) * cw_frame + cx0..][..cpw];
            let src = &src_plane[row * cpw..][..cpw];
            for i in 0..cpw {
                dst[i] = blend(dst[i], src[i], alpha[i]);
            }
        }
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
