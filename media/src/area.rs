//! Exact area (box-coverage) downscaling of 8-bit planes: the CPU compositor's fast path for
//! shrinking yuv420p sources, in place of swscale's `SWS_AREA`.
//!
//! Same geometry as swscale's area filter with default (centre) chroma siting: each plane is
//! resampled on its own grid, output sample `o` covers source interval `[o * r, (o + 1) * r]`
//! with `r = src / dst`, and each source sample weighs by how much of it that interval covers.
//! Unlike swscale it filters vertically first (the cheap, contiguous pass over full source
//! rows) and then horizontally over one intermediate row, so every source byte is read once.
//!
//! Integer arithmetic, identical in every code path (tests check the SIMD path against the
//! scalar one bit for bit):
//! - weights are 14-bit fixed point and each output's weights sum to exactly `1 << 14`, so a
//!   flat plane stays exactly flat;
//! - the vertical sum is rounded to a 15-bit intermediate (`value * 128`);
//! - the horizontal sum of intermediates is rounded to the 8-bit output.
//!
//! On x86_64 with AVX2 (detected at run time) both passes use 256-bit `pmaddwd` on pairs of
//! taps; the horizontal pass fetches each output's tap pairs with one 32-bit gather per pair.
//! Elsewhere a scalar fallback computes the same values.

#[cfg(target_arch = "x86_64")]
mod avx2;
mod fixed_point;

use fixed_point::{
    Axis, H_BITS, V_BITS, avx2_weights, horizontal_scalar, shuffle_masks, vertical_scalar,
};

use crate::error::MediaError;

/// Shrinks one `src_w x src_h` plane to `dst_w x dst_h` (each at most the source size).
#[derive(Clone, Debug)]
pub(crate) struct PlaneScaler {
    src_w: usize,
    src_h: usize,
    dst_w: usize,
    dst_h: usize,
    h: Axis,
    v: Axis,
    /// `h` regrouped for the AVX2 pass (see [`avx2_weights`]).
    h_pairs: Vec<i32>,
    /// Byte-shuffle masks for the AVX2 horizontal pass when it can avoid gathers (see
    /// [`shuffle_masks`]).
    h_masks: Option<Vec<u8>>,
    /// One vertically filtered row (15-bit), padded so the last window's padding tap exists.
    mid: Vec<i16>,
    avx2: bool,
}

impl PlaneScaler {
    /// A scaler for one plane size pair; both sizes non-zero, destination no larger than the
    /// source on either axis.
    pub fn new(src_w: u32, src_h: u32, dst_w: u32, dst_h: u32) -> Result<Self, MediaError> {
        if src_w == 0 || src_h == 0 || dst_w == 0 || dst_h == 0 || dst_w > src_w || dst_h > src_h {
            return Err(MediaError::failed(format!(
                "area scaler cannot shrink {src_w}x{src_h} to {dst_w}x{dst_h}"
            )));
        }
        let h = Axis::new(src_w, dst_w, H_BITS, true);
        let v = Axis::new(src_h, dst_h, V_BITS, false);
        let h_pairs = avx2_weights(&h);
        let h_masks = shuffle_masks(&h);
        // Padding: the last window's zero-weight tap and the shuffle pass's 8-sample loads.
        let mid = vec![0i16; src_w as usize + h.taps + 8];
        Ok(PlaneScaler {
            src_w: src_w as usize,
            src_h: src_h as usize,
            dst_w: dst_w as usize,
            dst_h: dst_h as usize,
            h,
            v,
            h_pairs,
            h_masks,
            mid,
            avx2: avx2_available(),
        })
    }

    /// Source and destination sizes.
    pub fn sizes(&self) -> ((usize, usize), (usize, usize)) {
        ((self.src_w, self.src_h), (self.dst_w, self.dst_h))
    }

    /// Scales `src` (rows `stride` bytes apart) into the tightly packed `dst`.
    pub fn scale(&mut self, src: &[u8], stride: usize, dst: &mut [u8]) -> Result<(), MediaError> {
        if stride < self.src_w || src.len() < stride * (self.src_h - 1) + self.src_w {
            return Err(MediaError::failed(format!(
                "area scaler source plane too small for {}x{} at stride {stride}",
                self.src_w, self.src_h
            )));
        }
        if dst.len() < self.dst_w * self.dst_h {
            return Err(MediaError::failed(
                "area scaler destination plane too small",
            ));
        }
        self.scale_with(src, stride, dst, self.avx2);
        Ok(())
    }

    /// The scalar or AVX2 passes, row by row. Sizes were checked by [`Self::scale`].
    fn scale_with(&mut self, src: &[u8], stride: usize, dst: &mut [u8], simd: bool) {
        let (vt, last_row) = (self.v.taps, self.src_h - 1);
        let mut rows: Vec<&[u8]> = Vec::with_capacity(vt);
        for (oy, out) in dst
            .chunks_exact_mut(self.dst_w)
            .take(self.dst_h)
            .enumerate()
        {
            let start = self.v.starts[oy] as usize;
            rows.clear();
            // Padding taps (zero weight) repeat the last row rather than read past it.
            rows.extend((0..vt).map(|k| &src[(start + k).min(last_row) * stride..][..self.src_w]));
            let wv = &self.v.weights[oy * vt..][..vt];
            #[cfg(target_arch = "x86_64")]
            if simd {
                // SAFETY: `simd` is only true when AVX2 was detected at run time. Every row in
                // `rows` holds `src_w` bytes; `mid` holds `src_w + h.taps + 8` samples, which
                // covers every window the gathers (starts[o] + taps <= src_w + 1) and the
                // shuffle pass's 8-sample loads read; `out` holds `dst_w` bytes; `h_pairs` and
                // `h_masks` were built from `h` for `dst_w / BLOCK` blocks.
                unsafe {
                    avx2::vertical(&rows, wv, &mut self.mid[..self.src_w]);
                    match &self.h_masks {
                        Some(masks) => {
                            avx2::horizontal_shuffle(&self.mid, &self.h, &self.h_pairs, masks, out)
                        }
                        None => avx2::horizontal(&self.mid, &self.h, &self.h_pairs, out),
                    }
                }
                continue;
            }
            let _ = simd;
            vertical_scalar(&rows, wv, &mut self.mid[..self.src_w]);
            horizontal_scalar(&self.mid, &self.h, 0, out);
        }
    }
}

/// True when this machine runs the SIMD passes. The scalar fallback is exact but slower than
/// swscale's own SIMD, so callers should only prefer this scaler when it is accelerated.
pub(crate) fn accelerated() -> bool {
    avx2_available()
}

fn avx2_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(p: &[u8], w: usize, h: usize, ow: usize, oh: usize) -> Vec<u8> {
        let n = |v: usize| u32::try_from(v).expect("test sizes fit u32");
        vidforge_gpu::filter::area_downscale_reference(p, n(w), n(h), n(ow), n(oh))
    }

    /// Deterministic busy content: gradients, hard edges and noise.
    fn pattern(w: usize, h: usize, seed: u32) -> Vec<u8> {
        let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..w * h)
            .map(|i| {
                let (x, y) = (i % w, i / w);
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                match (x / 7 + y / 5) % 4 {
                    0 => (x * 255 / w.max(1)) as u8,
                    1 => {
                        if (x + y) % 2 == 0 {
                            0
                        } else {
                            255
                        }
                    }
                    2 => (state >> 24) as u8,
                    _ => ((x * 3 + y * 5) % 256) as u8,
                }
            })
            .collect()
    }

    fn run(src: &[u8], w: usize, h: usize, ow: usize, oh: usize, simd: bool) -> Vec<u8> {
        let mut s = PlaneScaler::new(w as u32, h as u32, ow as u32, oh as u32).unwrap();
        let mut out = vec![0u8; ow * oh];
        if simd {
            s.scale(src, w, &mut out).unwrap();
        } else {
            s.scale_with(src, w, &mut out, false);
        }
        out
    }

    const SIZES: [(usize, usize, usize, usize); 14] = [
        (1920, 1080, 1280, 720), // 1.5x
        (960, 540, 640, 360),    // its chroma
        (3840, 2160, 1280, 720), // 3x
        (1920, 1080, 960, 540),  // 2x
        (1920, 1080, 854, 480),  // non-integer
        (641, 361, 321, 181),    // odd
        (321, 181, 161, 91),
        (7, 5, 3, 2),
        (5, 3, 1, 1),
        (1, 1, 1, 1),
        (17, 9, 17, 9), // same size
        (100, 37, 99, 36),
        (1000, 10, 13, 3),
        (64, 64, 63, 2),
    ];

    #[test]
    fn weights_sum_to_one_and_stay_inside() {
        let sizes = [
            (1920, 1280),
            (3840, 1280),
            (7, 3),
            (5, 1),
            (100, 99),
            (9, 9),
            (1, 1),
        ];
        for ((n, m), (bits, even)) in sizes
            .into_iter()
            .flat_map(|s| [(s, (H_BITS, true)), (s, (V_BITS, false))])
        {
            let a = Axis::new(n, m, bits, even);
            assert!(!even || a.taps.is_multiple_of(2));
            for o in 0..m as usize {
                let w = &a.weights[o * a.taps..][..a.taps];
                assert_eq!(w.iter().map(|&v| u32::from(v)).sum::<u32>(), 1 << bits);
                let used = w.iter().rposition(|&v| v != 0).unwrap();
                assert!(a.starts[o] as usize + used < n as usize, "{n}->{m} o={o}");
            }
        }
        // 3:2 gives the 2/3, 1/3 pattern; 3:1 three thirds without padding vertically.
        assert_eq!(
            Axis::new(3, 2, H_BITS, true).weights,
            [10923, 5461, 5461, 10923]
        );
        assert_eq!(
            Axis::new(6, 2, V_BITS, false).weights,
            [10923, 10922, 10923, 10923, 10922, 10923]
        );
    }

    #[test]
    fn matches_the_f64_reference_within_one_code() {
        for (i, &(w, h, ow, oh)) in SIZES.iter().enumerate() {
            let src = pattern(w, h, i as u32);
            let want = reference(&src, w, h, ow, oh);
            let got = run(&src, w, h, ow, oh, true);
            let worst = got
                .iter()
                .zip(&want)
                .map(|(&a, &b)| (i32::from(a) - i32::from(b)).abs())
                .max()
                .unwrap();
            assert!(worst <= 1, "{w}x{h} -> {ow}x{oh}: off by {worst}");
        }
    }

    #[test]
    fn simd_and_scalar_paths_agree_bit_for_bit() {
        if !avx2_available() {
            eprintln!("no AVX2: only the scalar path exists here");
        }
        for (i, &(w, h, ow, oh)) in SIZES.iter().enumerate() {
            let src = pattern(w, h, 100 + i as u32);
            assert_eq!(
                run(&src, w, h, ow, oh, true),
                run(&src, w, h, ow, oh, false),
                "{w}x{h} -> {ow}x{oh}"
            );
        }
    }

    #[test]
    fn flat_colour_stays_exact() {
        for &(w, h, ow, oh) in &SIZES {
            for c in [0u8, 1, 16, 127, 128, 235, 254, 255] {
                let out = run(&vec![c; w * h], w, h, ow, oh, true);
                assert!(
                    out.iter().all(|&v| v == c),
                    "{w}x{h} -> {ow}x{oh} colour {c}"
                );
            }
        }
    }

    #[test]
    fn checkerboard_averages() {
        let (w, h) = (192, 108);
        let src: Vec<u8> = (0..w * h)
            .map(|i| if (i % w + i / w) % 2 == 0 { 16 } else { 235 })
            .collect();
        // Even ratios average whole periods: exact mid-grey (125.5 rounds either way).
        for (ow, oh) in [(96, 54), (48, 27)] {
            let out = run(&src, w, h, ow, oh, true);
            assert!(
                out.iter().all(|&v| v == 125 || v == 126),
                "{ow}x{oh}: {out:?}"
            );
        }
        // 3x: each 3x3 box holds five of one and four of the other.
        let out = run(&src, w, h, 64, 36, true);
        let (hi, lo) = (
            (5.0 * 235.0 + 4.0 * 16.0) / 9.0,
            (4.0 * 235.0 + 5.0 * 16.0) / 9.0,
        );
        assert!(
            out.iter()
                .all(|&v| { (f64::from(v) - hi).abs() <= 0.5 || (f64::from(v) - lo).abs() <= 0.5 })
        );
        // 1.5x: the mean stays mid-grey.
        let out = run(&src, w, h, 128, 72, true);
        let mean = out.iter().map(|&v| f64::from(v)).sum::<f64>() / out.len() as f64;
        assert!((mean - 125.5).abs() < 0.5, "mean {mean}");
    }

    #[test]
    fn same_size_is_a_copy() {
        let src = pattern(33, 17, 7);
        assert_eq!(run(&src, 33, 17, 33, 17, true), src);
        assert_eq!(run(&src, 33, 17, 33, 17, false), src);
    }

    #[test]
    fn strided_sources_are_read_correctly() {
        let (w, h, stride) = (50, 20, 64);
        let tight = pattern(w, h, 3);
        let mut padded = vec![0xAAu8; stride * (h - 1) + w];
        for y in 0..h {
            padded[y * stride..][..w].copy_from_slice(&tight[y * w..][..w]);
        }
        let mut s = PlaneScaler::new(w as u32, h as u32, 20, 7).unwrap();
        let mut out = vec![0u8; 140];
        s.scale(&padded, stride, &mut out).unwrap();
        assert_eq!(out, run(&tight, w, h, 20, 7, true));
    }

    #[test]
    fn bad_sizes_are_errors_not_panics() {
        assert!(PlaneScaler::new(10, 10, 11, 5).is_err());
        assert!(PlaneScaler::new(10, 10, 5, 0).is_err());
        assert!(PlaneScaler::new(0, 10, 0, 5).is_err());
        let mut s = PlaneScaler::new(10, 10, 5, 5).unwrap();
        let mut out = vec![0u8; 25];
        assert!(s.scale(&[0u8; 99], 10, &mut out).is_err());
        assert!(s.scale(&[0u8; 100], 9, &mut out).is_err());
        assert!(s.scale(&[0u8; 100], 10, &mut [0u8; 24]).is_err());
        assert!(s.scale(&[0u8; 100], 10, &mut out).is_ok());
    }
}
