//! The compositor's resampling and colour math on the CPU: the kernel choice, each output
//! sample's window (the shader evaluates the same weights itself; computing them is cheaper
//! than fetching them on software adapters), the window sizes that specialise the shader, and
//! the YUV -> YUV colour affine. Pure functions, unit-tested without a GPU; [`axis_filter`]
//! is also a ready-made reference for tests and CPU fallbacks.
//!
//! Conventions (chosen to match FFmpeg's swscale with default chroma positions):
//! - Each plane is resampled on its own grid, centre-aligned: output sample `o` covers source
//!   interval `[o * r, (o + 1) * r]` with `r = src / dst`, i.e. its centre maps to
//!   `(o + 0.5) * r - 0.5` in source sample indices. Chroma planes use their own ratio
//!   (`ceil(w/2)` based), exactly as swscale does; this is the centre chroma siting.
//! - Shrinking axis: exact-coverage box ("area", swscale `SWS_AREA`): each source sample weighs
//!   by how much of it the output footprint covers. No aliasing, flat colours stay exact.
//! - Enlarging axis: cubic convolution with B = 0, C = 0.6 (swscale `SWS_BICUBIC` defaults).
//! - Source edges clamp (edge samples repeat); out-of-range taps are folded onto the edge.

use crate::frame::{ColorSpec, Matrix, Range};

/// Largest number of taps per axis the compositor accepts (a ~62x shrink). Beyond it a
/// single fused pass would cost too much per pixel; such configs are rejected.
pub const MAX_TAPS: usize = 64;

/// Which kernel an axis uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// Exact-coverage box (shrinking or same size).
    Area,
    /// Cubic convolution, B = 0, C = 0.6 (enlarging).
    Bicubic,
}

/// Resampling weights for one axis: output sample `o` reads source samples
/// `starts[o] .. starts[o] + taps` with weights `weights[o * taps ..][..taps]` (summing to 1).
/// Every window lies inside the source, so the shader needs no clamping.
#[derive(Clone, Debug, PartialEq)]
pub struct AxisFilter {
    pub kernel: Kernel,
    pub starts: Vec<i32>,
    pub taps: usize,
    pub weights: Vec<f32>,
}

/// Chooses the kernel for an axis: area when shrinking (or equal), bicubic when enlarging.
pub fn kernel_for(src: u32, dst: u32) -> Kernel {
    if src >= dst {
        Kernel::Area
    } else {
        Kernel::Bicubic
    }
}

/// Cubic convolution kernel with B = 0, C = 0.6 (Mitchell-Netravali family).
fn bicubic(x: f64) -> f64 {
    let x = x.abs();
    if x < 1.0 {
        1.4 * x * x * x - 2.4 * x * x + 1.0
    } else if x < 2.0 {
        -0.6 * x * x * x + 3.0 * x * x - 4.8 * x + 2.4
    } else {
        0.0
    }
}

/// Raw (index, weight) pairs for output sample `o`; indices may fall outside the source.
fn raw_taps(kernel: Kernel, src: u32, dst: u32, o: u32, out: &mut Vec<(i64, f64)>) {
    out.clear();
    let n = src as f64;
    let r = n / dst as f64;
    match kernel {
        Kernel::Area => {
            let a = o as f64 * r;
            let b = ((o + 1) as f64 * r).min(n);
            let mut i = a.floor() as i64;
            while (i as f64) < b {
                let w = b.min((i + 1) as f64) - a.max(i as f64);
                // Float noise at exact boundaries produces slivers; they only widen windows.
                if w > 1e-9 {
                    out.push((i, w));
                }
                i += 1;
            }
        }
        Kernel::Bicubic => {
            let c = (o as f64 + 0.5) * r - 0.5;
            let f = c.floor() as i64;
            for i in f - 1..=f + 2 {
                let w = bicubic(i as f64 - c);
                if w.abs() > 1e-9 {
                    out.push((i, w));
                }
            }
        }
    }
}

/// Builds the weights for resampling `src` samples to `dst` along one axis.
/// `src` and `dst` must be at least 1.
pub fn axis_filter(src: u32, dst: u32) -> AxisFilter {
    let kernel = kernel_for(src, dst);
    let last = src.max(1) as i64 - 1;
    // First pass: clamp + fold each output's taps and find the widest contiguous range.
    let mut raw = Vec::new();
    let mut folded: Vec<(i64, Vec<f64>)> = Vec::with_capacity(dst as usize);
    let mut taps = 1usize;
    for o in 0..dst {
        raw_taps(kernel, src, dst, o, &mut raw);
        if raw.is_empty() {
            // Cannot happen for valid sizes; keep the nearest sample rather than emit nothing.
            let c = ((o as f64 + 0.5) * src as f64 / dst as f64 - 0.5).round() as i64;
            raw.push((c.clamp(0, last), 1.0));
        }
        let lo = raw
            .iter()
            .map(|&(i, _)| i.clamp(0, last))
            .min()
            .unwrap_or(0);
        let hi = raw
            .iter()
            .map(|&(i, _)| i.clamp(0, last))
            .max()
            .unwrap_or(0);
        let mut ws = vec![0f64; (hi - lo + 1) as usize];
        for &(i, w) in &raw {
            ws[(i.clamp(0, last) - lo) as usize] += w;
        }
        taps = taps.max(ws.len());
        folded.push((lo, ws));
    }
    let taps = taps.min(src.max(1) as usize);
    // Second pass: place each range in a fixed-size window that stays inside the source.
    let mut starts = Vec::with_capacity(dst as usize);
    let mut weights = vec![0f32; dst as usize * taps];
    for (o, (lo, ws)) in folded.into_iter().enumerate() {
        let start = lo.clamp(0, (last + 1 - taps as i64).max(0));
        let sum: f64 = ws.iter().sum();
        let norm = if sum.abs() > 1e-12 { 1.0 / sum } else { 1.0 };
        let row = &mut weights[o * taps..][..taps];
        for (k, w) in ws.into_iter().enumerate() {
            row[(lo - start) as usize + k] = (w * norm) as f32;
        }
        starts.push(start as i32);
    }
    AxisFilter {
        kernel,
        starts,
        taps,
        weights,
    }
}

/// First source index of output `o`'s window as the shader computes it (area: `floor(o * r)`;
/// bicubic: `floor((o + 0.5) * r - 0.5) - 1`), before clamping.
pub fn window_start(kernel: Kernel, src: u32, dst: u32, o: u32) -> i64 {
    let r = src as f64 / dst as f64;
    match kernel {
        Kernel::Area => (o as f64 * r).floor() as i64,
        Kernel::Bicubic => ((o as f64 + 0.5) * r - 0.5).floor() as i64 - 1,
    }
}

/// Words of one source row an invocation must load to cover the windows of its four adjacent
/// output samples (`taps` wide each), samples `step` bytes apart (1 planar, 2 interleaved),
/// including up to 3 bytes of misalignment and a 2-sample margin for the shader's f32
/// positions.
pub fn row_words(src: u32, dst: u32, taps: usize, step: u32) -> u32 {
    let kernel = kernel_for(src, dst);
    let last = src.max(1) as i64 - 1;
    let mut span = 1i64;
    for first_out in (0..dst).step_by(4) {
        let last_out = (first_out + 3).min(dst.saturating_sub(1));
        let lo = window_start(kernel, src, dst, first_out).clamp(0, last);
        let hi = (window_start(kernel, src, dst, last_out) + taps as i64 - 1).clamp(0, last);
        span = span.max(hi - lo + 1);
    }
    let step = i64::from(step.max(1));
    let bytes = (span - 1) * step + 1 + 2 * step + 3;
    (bytes as u64).div_ceil(4) as u32
}

/// How the shader converts colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColorMode {
    /// Same spec in and out: no arithmetic.
    Identity = 0,
    /// Same matrix, different range: each plane is a scale + offset of itself.
    Diagonal = 1,
    /// Different matrix: luma also takes chroma, chroma takes both chroma planes.
    Full = 2,
    /// HDR to SDR ([`crate::frame::tonemap`]): every output sample from all three planes.
    ToneMap = 3,
}

/// `out = M * [y, u, v] + o` in code values, as rows `[m0, m1, m2, o]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ColorAffine {
    pub mode: ColorMode,
    pub rows: [[f64; 4]; 3],
}

/// Code values -> normalised Y (0..1), Pb, Pr (-0.5..0.5): `n = (c - offset) / scale`.
fn range_scale(range: Range) -> ([f64; 3], [f64; 3]) {
    match range {
        Range::Limited => ([16.0, 128.0, 128.0], [219.0, 224.0, 224.0]),
        Range::Full => ([0.0, 128.0, 128.0], [255.0, 255.0, 255.0]),
    }
}

/// Non-linear RGB -> Y Pb Pr for a matrix.
fn rgb_to_ypbpr(matrix: Matrix) -> [[f64; 3]; 3] {
    let (kr, kb) = matrix.coefficients();
    let kg = 1.0 - kr - kb;
    [
        [kr, kg, kb],
        [-kr / (2.0 * (1.0 - kb)), -kg / (2.0 * (1.0 - kb)), 0.5],
        [0.5, -kg / (2.0 * (1.0 - kr)), -kb / (2.0 * (1.0 - kr))],
    ]
}

/// Y Pb Pr -> non-linear RGB for a matrix (closed-form inverse of [`rgb_to_ypbpr`]).
fn ypbpr_to_rgb(matrix: Matrix) -> [[f64; 3]; 3] {
    let (kr, kb) = matrix.coefficients();
    let kg = 1.0 - kr - kb;
    [
        [1.0, 0.0, 2.0 * (1.0 - kr)],
        [
            1.0,
            -2.0 * kb * (1.0 - kb) / kg,
            -2.0 * kr * (1.0 - kr) / kg,
        ],
        [1.0, 2.0 * (1.0 - kb), 0.0],
    ]
}

fn mat_mul(a: &[[f64; 3]; 3], b: &[[f64; 3]; 3]) -> [[f64; 3]; 3] {
    let mut out = [[0.0; 3]; 3];
    for (i, row) in out.iter_mut().enumerate() {
        for (j, cell) in row.iter_mut().enumerate() {
            *cell = (0..3).map(|k| a[i][k] * b[k][j]).sum();
        }
    }
    out
}

/// A computed sample rounded to an 8-bit code value, as the shader's `convert` rounds it
/// (`floor(v + 0.5)` clamped to 0..=255): clamping first makes the cast's truncation that
/// floor, without a libm call on CPUs that lack SSE4.1's rounding instruction.
#[inline]
pub fn to_code(v: f32) -> u8 {
    (v + 0.5).clamp(0.0, 255.0) as u8
}

/// The affine taking `spec` code values to non-linear RGB (0..1 for in-range codes).
pub fn yuv_to_rgb(spec: ColorSpec) -> [[f64; 4]; 3] {
    let m = ypbpr_to_rgb(spec.matrix);
    let (off, scale) = range_scale(spec.range);
    let mut rows = [[0.0; 4]; 3];
    for (row, m) in rows.iter_mut().zip(m) {
        let mut offset = 0.0;
        for j in 0..3 {
            row[j] = m[j] / scale[j];
            offset -= row[j] * off[j];
        }
        row[3] = offset;
    }
    rows
}

/// The affine taking non-linear RGB (0..1) to `spec` code values (not rounded).
pub fn rgb_to_yuv(spec: ColorSpec) -> [[f64; 4]; 3] {
    let m = rgb_to_ypbpr(spec.matrix);
    let (off, scale) = range_scale(spec.range);
    std::array::from_fn(|i| {
        [
            m[i][0] * scale[i],
            m[i][1] * scale[i],
            m[i][2] * scale[i],
            off[i],
        ]
    })
}

/// The affine taking `src` code values to `out` code values (via RGB, no clipping).
pub fn color_affine(src: ColorSpec, out: ColorSpec) -> ColorAffine {
    let mode = if src == out {
        ColorMode::Identity
    } else if src.matrix == out.matrix {
        ColorMode::Diagonal
    } else {
        ColorMode::Full
    };
    let core = mat_mul(&rgb_to_ypbpr(out.matrix), &ypbpr_to_rgb(src.matrix));
    let (s_off, s_scale) = range_scale(src.range);
    let (o_off, o_scale) = range_scale(out.range);
    let mut rows = [[0.0; 4]; 3];
    for i in 0..3 {
        let mut offset = o_off[i];
        for j in 0..3 {
            // Clean up float noise so identity-like entries are exact.
            let c = core[i][j];
            let c = if (c - c.round()).abs() < 1e-12 {
                c.round()
            } else {
                c
            };
            let m = o_scale[i] * c / s_scale[j];
            rows[i][j] = m;
            offset -= m * s_off[j];
        }
        rows[i][3] = offset;
    }
    ColorAffine { mode, rows }
}

impl ColorAffine {
    /// Applies the affine to one YUV triple (for tests and CPU fallbacks).
    pub fn apply(&self, yuv: [f64; 3]) -> [f64; 3] {
        let mut out = [0.0; 3];
        for (i, o) in out.iter_mut().enumerate() {
            let r = self.rows[i];
            *o = r[0] * yuv[0] + r[1] * yuv[1] + r[2] * yuv[2] + r[3];
        }
        out
    }
}

/// Exact-coverage (area) downscale of one tight 8-bit plane, in plain f64: output sample
/// (ox, oy) averages the source over `[ox*rx, (ox+1)*rx] x [oy*ry, (oy+1)*ry]`. Slow and
/// deliberately naive: the reference that the shader's and the CPU scaler's area filters are
/// tested against.
pub fn area_downscale_reference(p: &[u8], w: u32, h: u32, ow: u32, oh: u32) -> Vec<u8> {
    let rx = w as f64 / ow as f64;
    let ry = h as f64 / oh as f64;
    let cover = |lo: f64, hi: f64, i: usize| (hi.min(i as f64 + 1.0) - lo.max(i as f64)).max(0.0);
    let mut out = vec![0u8; (ow * oh) as usize];
    for oy in 0..oh as usize {
        let (y0, y1) = (oy as f64 * ry, (oy as f64 + 1.0) * ry);
        for ox in 0..ow as usize {
            let (x0, x1) = (ox as f64 * rx, (ox as f64 + 1.0) * rx);
            let (mut acc, mut total) = (0.0, 0.0);
            for sy in y0.floor() as usize..(y1.ceil() as usize).min(h as usize) {
                let wy = cover(y0, y1, sy);
                for sx in x0.floor() as usize..(x1.ceil() as usize).min(w as usize) {
                    let wgt = wy * cover(x0, x1, sx);
                    acc += wgt * p[sy * w as usize + sx] as f64;
                    total += wgt;
                }
            }
            out[oy * ow as usize + ox] = (acc / total).round().clamp(0.0, 255.0) as u8;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_windows(f: &AxisFilter, src: u32, dst: u32) {
        assert_eq!(f.starts.len(), dst as usize);
        assert_eq!(f.weights.len(), dst as usize * f.taps);
        for o in 0..dst as usize {
            let s = f.starts[o];
            assert!(
                s >= 0 && s as usize + f.taps <= src as usize,
                "window {o} out of range"
            );
            let sum: f32 = f.weights[o * f.taps..][..f.taps].iter().sum();
            assert!((sum - 1.0).abs() < 1e-5, "weights of {o} sum to {sum}");
        }
    }

    #[test]
    fn same_size_is_identity() {
        for n in [1, 2, 7, 1080] {
            let f = axis_filter(n, n);
            assert_eq!(f.taps, 1);
            assert_eq!(f.kernel, Kernel::Area);
            for o in 0..n as usize {
                assert_eq!(f.starts[o], o as i32);
                assert_eq!(f.weights[o], 1.0);
            }
        }
    }

    #[test]
    fn integer_shrink_is_a_box() {
        let f = axis_filter(2160, 720);
        check_windows(&f, 2160, 720);
        assert_eq!(f.taps, 3);
        assert_eq!(f.starts[10], 30);
        for w in &f.weights[30..33] {
            assert!((w - 1.0 / 3.0).abs() < 1e-6);
        }
    }

    #[test]
    fn fractional_shrink_covers_exactly() {
        let f = axis_filter(1080, 720);
        check_windows(&f, 1080, 720);
        assert_eq!(f.taps, 2);
        // Output 1 covers [1.5, 3.0]: half of sample 1, all of sample 2.
        assert_eq!(f.starts[1], 1);
        let w = &f.weights[2..4];
        assert!((w[0] - 1.0 / 3.0).abs() < 1e-6 && (w[1] - 2.0 / 3.0).abs() < 1e-6);
        for (s, d) in [(1920, 1280), (3840, 1280), (961, 640), (5, 2), (3, 1)] {
            check_windows(&axis_filter(s, d), s, d);
        }
    }

    #[test]
    fn enlarge_is_bicubic_and_clamped() {
        let f = axis_filter(640, 1920);
        assert_eq!(f.kernel, Kernel::Bicubic);
        assert_eq!(f.taps, 4);
        check_windows(&f, 640, 1920);
        // Output 1 maps exactly onto source 0 (ratio 1/3): a single tap of weight 1.
        let w = &f.weights[4..8];
        assert_eq!(f.starts[1], 0);
        assert!((w[0] - 1.0).abs() < 1e-6, "{w:?}");
        for (s, d) in [(1, 4), (2, 9), (3, 4), (360, 2160)] {
            check_windows(&axis_filter(s, d), s, d);
        }
    }

    #[test]
    fn row_words_cover_the_windows() {
        // Same size: 4 bytes + misalignment + margin.
        assert_eq!(row_words(1920, 1920, 1, 1), 3);
        // 1.5x shrink: 4 outputs span 7 source bytes.
        assert_eq!(row_words(1920, 1280, 2, 1), 3);
        // 2x enlarge, 4 taps: 6 source bytes.
        assert_eq!(row_words(1920, 3840, 4, 1), 3);
        // Tiny sources are clamped to themselves.
        assert_eq!(row_words(1, 4, 1, 1), 2);
        // Interleaved (NV12 chroma): 7 samples 2 bytes apart span 13 bytes; with a 2-sample
        // (4-byte) margin and 3 bytes of misalignment, 20 bytes.
        assert_eq!(row_words(1920, 1280, 2, 2), 5);
        assert_eq!(row_words(960, 640, 2, 2), 5);
    }

    #[test]
    fn colour_identity_and_range() {
        let a = color_affine(ColorSpec::OUTPUT, ColorSpec::OUTPUT);
        assert_eq!(a.mode, ColorMode::Identity);
        let full = ColorSpec {
            matrix: Matrix::Bt709,
            range: Range::Full,
        };
        let a = color_affine(full, ColorSpec::OUTPUT);
        assert_eq!(a.mode, ColorMode::Diagonal);
        let out = a.apply([255.0, 128.0, 0.0]);
        assert!((out[0] - 235.0).abs() < 1e-9 && (out[1] - 128.0).abs() < 1e-9);
        assert!((out[2] - (128.0 - 224.0 * 128.0 / 255.0)).abs() < 1e-9);
        assert_eq!(a.rows[0][1], 0.0);
    }

    #[test]
    fn colour_matrix_change_matches_rgb_roundtrip() {
        let src = ColorSpec {
            matrix: Matrix::Bt601,
            range: Range::Limited,
        };
        let a = color_affine(src, ColorSpec::OUTPUT);
        assert_eq!(a.mode, ColorMode::Full);
        // Chroma never depends on luma; greys stay grey.
        assert!(a.rows[1][0].abs() < 1e-12 && a.rows[2][0].abs() < 1e-12);
        let grey = a.apply([100.0, 128.0, 128.0]);
        assert!((grey[0] - 100.0).abs() < 1e-9 && (grey[1] - 128.0).abs() < 1e-9);
        for rgb in [[1.0f32, 0.0, 0.0], [0.2, 0.7, 0.1], [0.0, 0.0, 1.0]] {
            let s = src.rgb_to_yuv(rgb[0], rgb[1], rgb[2]).map(f64::from);
            let want = ColorSpec::OUTPUT.rgb_to_yuv(rgb[0], rgb[1], rgb[2]);
            let got = a.apply(s);
            for c in 0..3 {
                assert!(
                    (got[c] - want[c] as f64).abs() < 1e-3,
                    "{rgb:?}: {got:?} vs {want:?}"
                );
            }
        }
    }
}
