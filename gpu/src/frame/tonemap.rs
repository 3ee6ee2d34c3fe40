//! HDR to SDR: how a PQ or HLG sample becomes a BT.709 one. The numbers live here once: the
//! CPU compositor evaluates [`ToneMapper::map`], and the WGSL twin (`tonemap` in
//! `shaders/compose.wgsl`) reads the same constants from [`ToneMap::uniforms`].
//!
//! Per sample, the chain of FFmpeg's reference
//! `zscale=t=linear:npl=100, zscale=p=bt709, tonemap=hable:desat=0, zscale=t=bt709:m=bt709`
//! (zimg's transfers are display-referred, and keep signs: what lies outside BT.709 stays
//! outside, for the display to clip, rather than being clipped here):
//! 1. Y'CbCr code values to non-linear R'G'B' with the source's matrix and range;
//! 2. to display light, 1.0 = 100 nits (SDR reference white): the PQ EOTF (SMPTE ST 2084),
//!    or for HLG its inverse OETF raised to the system gamma 1.2 of a 1000-nit display, per
//!    component as zimg does (BT.2100's OOTF applies the gamma to luminance; the two differ
//!    only in saturated colours);
//! 3. BT.2020 primaries to BT.709 (a 3x3 matrix in linear light);
//! 4. Hable's filmic curve on the brightest component, the others scaled alike (hue kept),
//!    normalised so that `peak` maps to 1.0;
//! 5. back to a signal for a BT.1886 display (gamma 2.4) and the BT.709 limited-range matrix
//!    of every output.

use super::color::{ColorSpec, Matrix, Range};
use crate::filter::{rgb_to_yuv, yuv_to_rgb};

/// The HDR transfer function of a source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transfer {
    /// Perceptual quantizer, SMPTE ST 2084 (HDR10).
    Pq,
    /// Hybrid log-gamma, ARIB STD-B67 (phones, broadcast).
    Hlg,
}

impl Transfer {
    /// The light its full signal stands for, in nits: what a source without metadata peaks at.
    pub fn nominal_peak_nits(self) -> f32 {
        match self {
            Transfer::Pq => 10_000.0,
            Transfer::Hlg => 1_000.0,
        }
    }
}

/// The colour primaries of a source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Primaries {
    Bt709,
    Bt2020,
}

/// How to tone-map one HDR source to BT.709 SDR.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ToneMap {
    /// Matrix (BT.2020 for nearly all HDR) and range of the source's code values.
    pub source: ColorSpec,
    pub transfer: Transfer,
    pub primaries: Primaries,
    /// The brightest light to keep, in nits: the content's MaxCLL, else the mastering
    /// display's peak, else the transfer's nominal peak (FFmpeg's `tonemap` rule).
    pub peak_nits: f32,
}

/// SDR reference white in nits: linear light 1.0 (`npl=100` in the reference chain).
pub const REFERENCE_WHITE_NITS: f32 = 100.0;

// SMPTE ST 2084.
pub(super) const PQ_M1: f32 = 2610.0 / 16384.0;
pub(super) const PQ_M2: f32 = 2523.0 / 4096.0 * 128.0;
pub(super) const PQ_C1: f32 = 3424.0 / 4096.0;
pub(super) const PQ_C2: f32 = 2413.0 / 4096.0 * 32.0;
pub(super) const PQ_C3: f32 = 2392.0 / 4096.0 * 32.0;
// ARIB STD-B67 / BT.2100 HLG: a, b = 1 - 4a, c = 0.5 - a ln(4a); the system gamma of a
// 1000-nit display.
pub(super) const HLG_A: f32 = 0.178_832_77;
pub(super) const HLG_B: f32 = 0.284_668_92;
pub(super) const HLG_C: f32 = 0.559_910_7;
pub(super) const HLG_GAMMA: f32 = 1.2;
// John Hable's filmic curve (Uncharted 2), with FFmpeg's `tonemap` parameters.
const HABLE: [f32; 6] = [0.15, 0.50, 0.10, 0.20, 0.02, 0.30];
// BT.1886's display gamma (black at 0), whose inverse makes the output signal.
pub(super) const BT1886_GAMMA: f32 = 2.4;
/// The floor of the brightest component, as FFmpeg's `tonemap` keeps it off zero.
const MIN_SIGNAL: f32 = 1e-6;

/// Linear BT.2020 RGB to linear BT.709 RGB (BT.2087, D65 both).
pub(super) const BT2020_TO_BT709: [[f64; 3]; 3] = [
    [1.660_491_0, -0.587_641_1, -0.072_849_9],
    [-0.124_550_5, 1.132_899_9, -0.008_349_4],
    [-0.018_150_8, -0.100_578_9, 1.118_729_7],
];

#[inline]
fn hable(x: f32) -> f32 {
    let [a, b, c, d, e, f] = HABLE;
    (x * (x * a + b * c) + d * e) / (x * (x * a + b) + d * f) - e / f
}

// The transfer curves, on magnitudes: the chain gives them their sign back.

#[inline]
fn pq_eotf(x: f32) -> f32 {
    let p = x.powf(1.0 / PQ_M2);
    let num = (p - PQ_C1).max(0.0);
    let den = (PQ_C2 - PQ_C3 * p).max(f32::MIN_POSITIVE);
    (num / den).powf(1.0 / PQ_M1)
}

#[inline]
fn hlg_eotf(x: f32) -> f32 {
    let scene = if x <= 0.5 {
        x * x / 3.0
    } else {
        (((x - HLG_C) / HLG_A).exp() + HLG_B) / 12.0
    };
    scene.powf(HLG_GAMMA)
}

#[inline]
fn bt1886_inverse_eotf(x: f32) -> f32 {
    x.powf(1.0 / BT1886_GAMMA)
}

/// The chain's two transfer curves, on magnitudes (the chain gives them their sign back).
trait Curves {
    fn eotf(&self, x: f32) -> f32;
    fn encode(&self, x: f32) -> f32;
}

/// The curves evaluated exactly.
struct Exact(fn(f32) -> f32);

impl Curves for Exact {
    #[inline(always)]
    fn eotf(&self, x: f32) -> f32 {
        (self.0)(x)
    }

    #[inline(always)]
    fn encode(&self, x: f32) -> f32 {
        bt1886_inverse_eotf(x)
    }
}

#[inline]
fn affine(rows: &[[f32; 4]; 3], v: [f32; 3]) -> [f32; 3] {
    rows.map(|r| r[0] * v[0] + r[1] * v[1] + r[2] * v[2] + r[3])
}

fn to_f32<const N: usize>(rows: [[f64; N]; 3]) -> [[f32; N]; 3] {
    rows.map(|r| r.map(|v| v as f32))
}

/// The uniform block of the shader's tone mapping: every number [`ToneMapper`] uses.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ToneUniforms {
    /// Source code values to non-linear R'G'B' (affine rows).
    pub to_rgb: [[f32; 4]; 3],
    /// Linear source RGB to linear BT.709 RGB (4th column unused).
    pub gamut: [[f32; 4]; 3],
    /// Non-linear BT.709 R'G'B' to output code values (affine rows).
    pub to_yuv: [[f32; 4]; 3],
    /// 1/m2, c1, c2, c3 of PQ.
    pub pq: [f32; 4],
    /// a, b, c and the system gamma of HLG.
    pub hlg: [f32; 4],
    /// Hable's A, B, C, D, then E, F, E/F, 0.
    pub hable: [[f32; 4]; 2],
    /// 1/m1 of PQ; display light per unit of the EOTF; 1/hable(peak); the signal floor.
    pub scale: [f32; 4],
    /// The transfer (0 PQ, 1 HLG); the output signal's exponent (1 / 2.4); unused.
    pub misc: [f32; 4],
}

impl ToneMap {
    /// Display light (1.0 = reference white) of a full-scale EOTF output.
    fn linear_scale(&self) -> f32 {
        self.transfer.nominal_peak_nits() / REFERENCE_WHITE_NITS
    }

    /// `peak_nits` as linear light, never below reference white.
    fn peak(&self) -> f32 {
        (self.peak_nits / REFERENCE_WHITE_NITS).max(1.0)
    }

    fn gamut(&self) -> [[f64; 3]; 3] {
        match self.primaries {
            Primaries::Bt2020 => BT2020_TO_BT709,
            Primaries::Bt709 => [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
        }
    }

    /// The EOTF on magnitudes, 1.0 = the transfer's nominal peak.
    fn eotf(&self) -> fn(f32) -> f32 {
        match self.transfer {
            Transfer::Pq => pq_eotf,
            Transfer::Hlg => hlg_eotf,
        }
    }

    /// The constants of the chain, as the shader reads them.
    pub fn uniforms(&self) -> ToneUniforms {
        let transfer = match self.transfer {
            Transfer::Pq => 0.0,
            Transfer::Hlg => 1.0,
        };
        let [a, b, c, d, e, f] = HABLE;
        ToneUniforms {
            to_rgb: to_f32(yuv_to_rgb(self.source)),
            gamut: to_f32(self.gamut().map(|r| [r[0], r[1], r[2], 0.0])),
            to_yuv: to_f32(rgb_to_yuv(ColorSpec::OUTPUT)),
            pq: [1.0 / PQ_M2, PQ_C1, PQ_C2, PQ_C3],
            hlg: [HLG_A, HLG_B, HLG_C, HLG_GAMMA],
            hable: [[a, b, c, d], [e, f, e / f, 0.0]],
            scale: [
                1.0 / PQ_M1,
                self.linear_scale(),
                1.0 / hable(self.peak()),
                MIN_SIGNAL,
            ],
            misc: [transfer, 1.0 / BT1886_GAMMA, 0.0, 0.0],
        }
    }

    /// The CPU evaluator of this mapping.
    pub fn mapper(&self) -> ToneMapper {
        ToneMapper::new(self)
    }
}

/// A curve on 0..=[`CURVE_MAX`] sampled for linear interpolation, the exact function beyond.
/// Samples are evenly spaced in the square root of the input, so they crowd towards 0, where
/// the display curve (x^(1/2.4)) is steepest.
struct Curve {
    table: Vec<f32>,
    exact: fn(f32) -> f32,
}

/// Samples per curve: interpolation error stays far below one output code value.
const CURVE_SAMPLES: usize = 4096;
/// The sampled range: signals a little over full scale, and mapped light up to the Hable
/// curve's asymptote over its normalisation (about 1.3) and the out-of-gamut values beside it.
const CURVE_MAX: f32 = 4.0;

impl Curve {
    fn new(exact: fn(f32) -> f32) -> Self {
        let step = CURVE_MAX.sqrt() / CURVE_SAMPLES as f32;
        let table = (0..=CURVE_SAMPLES)
            .map(|i| {
                let t = i as f32 * step;
                exact(t * t)
            })
            .collect();
        Curve { table, exact }
    }

    /// The curve at `x >= 0`.
    #[inline(always)]
    fn eval(&self, x: f32) -> f32 {
        if x >= CURVE_MAX {
            return (self.exact)(x);
        }
        let pos = x.sqrt() * (CURVE_SAMPLES as f32 / CURVE_MAX.sqrt());
        let i = (pos as usize).min(CURVE_SAMPLES - 1);
        let t = pos - i as f32;
        let (a, b) = (self.table[i], self.table[i + 1]);
        a + (b - a) * t
    }
}

/// [`ToneMap`] on the CPU: the same chain, its transfer curves sampled into tables.
pub struct ToneMapper {
    u: ToneUniforms,
    eotf: Curve,
    encode: Curve,
}

impl ToneMapper {
    fn new(map: &ToneMap) -> Self {
        ToneMapper {
            u: map.uniforms(),
            eotf: Curve::new(map.eotf()),
            encode: Curve::new(bt1886_inverse_eotf),
        }
    }

    /// One source sample (Y, Cb, Cr code values on the 8-bit scale, i.e. 10-bit codes / 4)
    /// to output code values (not rounded).
    #[inline]
    pub fn map(&self, yuv: [f32; 3]) -> [f32; 3] {
        chain(&self.u, self, yuv)
    }
}

impl Curves for ToneMapper {
    #[inline(always)]
    fn eotf(&self, x: f32) -> f32 {
        self.eotf.eval(x)
    }

    #[inline(always)]
    fn encode(&self, x: f32) -> f32 {
        self.encode.eval(x)
    }
}

/// The chain of the module's doc on one sample, with the given curves.
#[inline(always)]
fn chain(u: &ToneUniforms, curves: &impl Curves, yuv: [f32; 3]) -> [f32; 3] {
    let scale = u.scale[1];
    let lin = affine(&u.to_rgb, yuv).map(|v| curves.eotf(v.abs()).copysign(v) * scale);
    let lin = affine(&u.gamut, lin);
    let sig = lin[0].max(lin[1]).max(lin[2]).max(u.scale[3]);
    let k = hable(sig) * u.scale[2] / sig;
    let signal = lin.map(|v| {
        let v = v * k;
        curves.encode(v.abs()).copysign(v)
    });
    affine(&u.to_yuv, signal)
}

/// The chain evaluated exactly, no tables: what the tables are tested against.
pub fn map_exact(map: &ToneMap, yuv: [f32; 3]) -> [f32; 3] {
    chain(&map.uniforms(), &Exact(map.eotf()), yuv)
}

impl Default for ToneMap {
    /// HDR10 as most masters are: BT.2020 limited-range PQ graded on a 1000-nit display.
    fn default() -> Self {
        ToneMap {
            source: ColorSpec {
                matrix: Matrix::Bt2020,
                range: Range::Limited,
            },
            transfer: Transfer::Pq,
            primaries: Primaries::Bt2020,
            peak_nits: 1000.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn maps() -> [ToneMap; 2] {
        let pq = ToneMap::default();
        let hlg = ToneMap {
            transfer: Transfer::Hlg,
            ..pq
        };
        [pq, hlg]
    }

    #[test]
    fn tables_agree_with_the_exact_chain() {
        for map in maps() {
            let m = map.mapper();
            let mut worst = 0.0f32;
            for y in (16..=235).step_by(3) {
                for cb in (16..=240).step_by(16) {
                    for cr in (16..=240).step_by(16) {
                        let v = [y as f32, cb as f32, cr as f32];
                        let (a, b) = (m.map(v), map_exact(&map, v));
                        for i in 0..3 {
                            worst = worst.max((a[i] - b[i]).abs());
                        }
                    }
                }
            }
            assert!(
                worst < 0.25,
                "{:?}: tables off by {worst} codes",
                map.transfer
            );
        }
    }

    #[test]
    fn black_stays_black_and_peak_white_is_white() {
        for map in maps() {
            let black = map_exact(&map, [16.0, 128.0, 128.0]);
            assert!((black[0] - 16.0).abs() < 0.5, "{black:?}");
            // The code value of `peak_nits` for this transfer, grey.
            let white = match map.transfer {
                // PQ of 1000 nits: 0.7518 of the range.
                Transfer::Pq => 16.0 + 219.0 * 0.751_827,
                // HLG's full signal is the 1000-nit display's peak.
                Transfer::Hlg => 235.0,
            };
            let out = map_exact(&map, [white, 128.0, 128.0]);
            assert!((out[0] - 235.0).abs() < 0.5, "{:?}: {out:?}", map.transfer);
            assert!((out[1] - 128.0).abs() < 0.5 && (out[2] - 128.0).abs() < 0.5);
        }
    }

    #[test]
    fn the_curve_is_monotonic_on_grey() {
        for map in maps() {
            let mut last = 0.0;
            for y in 16..=235 {
                let out = map_exact(&map, [y as f32, 128.0, 128.0])[0];
                assert!(out >= last, "{:?} at {y}: {out} < {last}", map.transfer);
                last = out;
            }
        }
    }
}
