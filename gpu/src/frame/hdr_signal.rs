//! The other direction, for renders that keep HDR: SDR graphics (the watermark) placed in a
//! PQ or HLG output's light, so that they blend in the output's own transfer and show at the
//! brightness and colour they have in SDR. The constants are the tone mapper's
//! ([`super::tonemap`]); only the curves' inverses are new here.
//!
//! Per sRGB sample (0..=1), following ITU-R BT.2408's placement of graphics in HDR:
//! 1. to display light with the BT.1886 gamma (2.4) every SDR output is shown with, 1.0 being
//!    graphics white, [`HdrSignal::GRAPHICS_WHITE_NITS`] (203 nits);
//! 2. BT.709 primaries to BT.2020 (the inverse of the tone mapper's gamut matrix);
//! 3. the PQ inverse EOTF of the absolute light, or for HLG the scene light a 1000-nit display
//!    shows at that light (per component, the inverse of the tone mapper's HLG step) through
//!    the HLG OETF: graphics white lands at PQ 58 % and HLG 75 %, BT.2408's reference levels;
//! 4. the output's matrix, limited range, 10-bit code values.

use super::color::{ColorSpec, Range};
use super::tonemap::{
    BT1886_GAMMA, BT2020_TO_BT709, HLG_A, HLG_B, HLG_C, HLG_GAMMA, PQ_C1, PQ_C2, PQ_C3, PQ_M1,
    PQ_M2, Primaries, ToneMap, Transfer,
};

/// The light and code values of an HDR output (the source's own, kept).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HdrSignal {
    pub transfer: Transfer,
    pub primaries: Primaries,
    /// The output's matrix and range (always limited).
    pub output: ColorSpec,
}

impl HdrSignal {
    /// Where SDR graphics white sits in HDR, in nits (ITU-R BT.2408).
    pub const GRAPHICS_WHITE_NITS: f64 = 203.0;

    /// The HDR output of a source that `tone` describes: its transfer, primaries and matrix,
    /// in limited range.
    pub fn of(tone: &ToneMap) -> HdrSignal {
        HdrSignal {
            transfer: tone.transfer,
            primaries: tone.primaries,
            output: ColorSpec {
                matrix: tone.source.matrix,
                range: Range::Limited,
            },
        }
    }

    /// Non-linear sRGB graphics (0..=1) to this output's 10-bit Y, Cb, Cr code values (not
    /// rounded).
    pub fn graphics_to_yuv(&self, rgb: [f32; 3]) -> [f32; 3] {
        let linear = rgb.map(|c| f64::from(c.clamp(0.0, 1.0)).powf(f64::from(BT1886_GAMMA)));
        let linear = match self.primaries {
            Primaries::Bt2020 => {
                let m = bt709_to_bt2020();
                m.map(|r| r[0] * linear[0] + r[1] * linear[1] + r[2] * linear[2])
            }
            Primaries::Bt709 => linear,
        };
        let nits = linear.map(|l| l.max(0.0) * Self::GRAPHICS_WHITE_NITS);
        let signal = nits.map(|n| match self.transfer {
            Transfer::Pq => pq_inverse_eotf(n / 10_000.0),
            Transfer::Hlg => hlg_oetf((n / 1_000.0).powf(1.0 / f64::from(HLG_GAMMA))),
        });
        // 10-bit limited range codes are the 8-bit ones times four.
        self.output
            .rgb_to_yuv(signal[0] as f32, signal[1] as f32, signal[2] as f32)
            .map(|v| v * 4.0)
    }
}

/// Linear BT.709 RGB to linear BT.2020 RGB: the inverse of the tone mapper's matrix.
fn bt709_to_bt2020() -> [[f64; 3]; 3] {
    let m = BT2020_TO_BT709;
    let cof = |r: usize, c: usize| {
        let (r1, r2) = ((r + 1) % 3, (r + 2) % 3);
        let (c1, c2) = ((c + 1) % 3, (c + 2) % 3);
        m[r1][c1] * m[r2][c2] - m[r1][c2] * m[r2][c1]
    };
    let det: f64 = (0..3).map(|c| m[0][c] * cof(0, c)).sum();
    // The inverse is the transposed cofactor matrix over the determinant.
    std::array::from_fn(|r| std::array::from_fn(|c| cof(c, r) / det))
}

/// SMPTE ST 2084's inverse EOTF: absolute light (1.0 = 10 000 nits) to signal.
fn pq_inverse_eotf(y: f64) -> f64 {
    let p = y.max(0.0).powf(f64::from(PQ_M1));
    let (c1, c2, c3) = (f64::from(PQ_C1), f64::from(PQ_C2), f64::from(PQ_C3));
    ((c1 + c2 * p) / (1.0 + c3 * p)).powf(f64::from(PQ_M2))
}

/// The HLG OETF (BT.2100): scene light (0..=1) to signal.
fn hlg_oetf(e: f64) -> f64 {
    let e = e.max(0.0);
    if e <= 1.0 / 12.0 {
        (3.0 * e).sqrt()
    } else {
        f64::from(HLG_A) * (12.0 * e - f64::from(HLG_B)).ln() + f64::from(HLG_C)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Matrix;

    fn signal(transfer: Transfer) -> HdrSignal {
        HdrSignal {
            transfer,
            primaries: Primaries::Bt2020,
            output: ColorSpec {
                matrix: Matrix::Bt2020,
                range: Range::Limited,
            },
        }
    }

    #[test]
    fn graphics_white_lands_on_bt2408_reference_levels() {
        // Y' of white = the signal; 10-bit limited: 64 + 876 * signal.
        let pq = signal(Transfer::Pq).graphics_to_yuv([1.0; 3]);
        let hlg = signal(Transfer::Hlg).graphics_to_yuv([1.0; 3]);
        let level = |y: f32| (y - 64.0) / 876.0;
        assert!(
            (level(pq[0]) - 0.58).abs() < 0.005,
            "PQ white at {}",
            level(pq[0])
        );
        assert!(
            (level(hlg[0]) - 0.75).abs() < 0.005,
            "HLG white at {}",
            level(hlg[0])
        );
        // Neutral stays neutral; black is black.
        for yuv in [pq, hlg] {
            assert!((yuv[1] - 512.0).abs() < 0.01 && (yuv[2] - 512.0).abs() < 0.01);
        }
        let black = signal(Transfer::Pq).graphics_to_yuv([0.0; 3]);
        assert!((black[0] - 64.0).abs() < 0.01);
    }

    #[test]
    fn the_gamut_matrices_are_inverses() {
        let (a, b) = (BT2020_TO_BT709, bt709_to_bt2020());
        for (i, row) in a.iter().enumerate() {
            for j in 0..3 {
                let v: f64 = row.iter().zip(&b).map(|(x, r)| x * r[j]).sum();
                assert!((v - f64::from(u8::from(i == j))).abs() < 1e-9);
            }
        }
        // BT.2087's published first row.
        assert!((b[0][0] - 0.6274).abs() < 1e-3 && (b[0][1] - 0.3293).abs() < 1e-3);
    }
}
