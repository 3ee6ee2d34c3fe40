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

use crate::error::MediaError;

/// Fixed-point bits of the vertical weights (they fit `u16`: at most `1 << 15`).
const V_BITS: u32 = 15;
/// Fixed-point bits of the horizontal weights (they fit `i16` for `pmaddwd`).
const H_BITS: u32 = 14;
/// Each vertical tap adds `(sample * weight) >> V_DROP` (`pmulhuw` of `sample << 8`), so the
/// intermediate is the filtered value times `1 << (V_BITS - V_DROP)` = 128: 15 bits, inside
/// `i16` for the horizontal `pmaddwd`. The truncation costs under 1/128 code per tap.
const V_DROP: u32 = 8;
/// The horizontal sum (15 + 14 bits) is rounded to 8 bits by this shift.
const OUT_SHIFT: u32 = H_BITS + V_BITS - V_DROP;

/// Area weights along one axis: output `o` reads source samples `starts[o] ..` with the
/// `taps` weights at `weights[o * taps ..]`, which sum to exactly `1 << bits`.
#[derive(Clone, Debug)]
struct Axis {
    starts: Vec<u32>,
    taps: usize,
    weights: Vec<u16>,
}

impl Axis {
    /// Weights for shrinking `src` samples to `dst` (`1 <= dst <= src`) at `bits` of
    /// precision; `even` pads `taps` to an even count (zero weights) for pairwise SIMD.
    fn new(src: u32, dst: u32, bits: u32, even: bool) -> Self {
        let (n, m) = (u64::from(src), u64::from(dst));
        // In units of 1/m source sample, output o covers [o*n, (o+1)*n) and source sample i
        // covers [i*m, (i+1)*m): coverages are exact integers.
        let window = |o: u64| (o * n / m, ((o + 1) * n - 1) / m);
        let real_taps = (0..m)
            .map(|o| {
                let (first, last) = window(o);
                (last - first + 1) as usize
            })
            .max()
            .unwrap_or(1);
        let taps = if even {
            real_taps.next_multiple_of(2)
        } else {
            real_taps
        };
        let one = 1u64 << bits;
        let mut starts = Vec::with_capacity(dst as usize);
        let mut weights = vec![0u16; dst as usize * taps];
        for o in 0..m {
            let (a, b) = (o * n, (o + 1) * n);
            let (first, last) = window(o);
            // Windows near the end shift left so `real_taps` samples stay inside the source.
            let start = first.min(n - real_taps as u64);
            let row = &mut weights[o as usize * taps..][..taps];
            // Cumulative rounding: every weight is within 1 of exact and they sum to `one`.
            let (mut covered, mut given) = (0u64, 0u64);
            for i in first..=last {
                covered += b.min((i + 1) * m) - a.max(i * m);
                let upto = (covered * one + n / 2) / n;
                row[(i - start) as usize] = (upto - given) as u16;
                given = upto;
            }
            starts.push(start as u32);
        }
        Axis {
            starts,
            taps,
            weights,
        }
    }
}

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

/// Outputs per AVX2 horizontal block.
const BLOCK: usize = 16;

/// Regroups horizontal weights for the AVX2 pass: for each block of [`BLOCK`] outputs and each
/// tap pair `j`, the 16 outputs' `(w[2j], w[2j+1])` packed as one `i32` each.
fn avx2_weights(h: &Axis) -> Vec<i32> {
    let pairs = h.taps / 2;
    let blocks = h.starts.len() / BLOCK;
    let mut out = Vec::with_capacity(blocks * pairs * BLOCK);
    for block in 0..blocks {
        for j in 0..pairs {
            for lane in 0..BLOCK {
                let w = &h.weights[(block * BLOCK + lane) * h.taps + 2 * j..][..2];
                out.push((u32::from(w[0]) | (u32::from(w[1]) << 16)) as i32);
            }
        }
    }
    out
}

/// Byte-shuffle masks for the gather-free AVX2 horizontal pass, possible when every run of 4
/// outputs starts its windows within 6 samples of the run's first (true up to a 2:1 shrink):
/// then each tap pair of the run comes from one 8-sample load and a `pshufb`. 16 bytes per
/// run of 4 outputs (full [`BLOCK`]s only); `None` when some run spreads wider.
fn shuffle_masks(h: &Axis) -> Option<Vec<u8>> {
    let full = h.starts.len() / BLOCK * BLOCK;
    let mut masks = Vec::with_capacity(full * 4);
    for run in h.starts[..full].chunks_exact(4) {
        for &s in run {
            let d = s - run[0];
            if d > 6 {
                return None;
            }
            let b = 2 * d as u8;
            masks.extend([b, b + 1, b + 2, b + 3]);
        }
    }
    Some(masks)
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

/// `mid[x] = sum_k (rows[k][x] * w[k]) >> V_DROP`, tap by tap over short chunks so LLVM
/// vectorises each pass and the accumulators stay on the stack.
fn vertical_scalar(rows: &[&[u8]], w: &[u16], mid: &mut [i16]) {
    const CHUNK: usize = 64;
    for (c, mid) in mid.chunks_mut(CHUNK).enumerate() {
        let x0 = c * CHUNK;
        let mut acc = [0u32; CHUNK];
        for (row, &wk) in rows.iter().zip(w) {
            for (a, &p) in acc.iter_mut().zip(&row[x0..x0 + mid.len()]) {
                *a += (u32::from(p) * u32::from(wk)) >> V_DROP;
            }
        }
        for (m, a) in mid.iter_mut().zip(acc) {
            *m = a as i16;
        }
    }
}

/// Outputs `from..` of one row from the intermediate row.
fn horizontal_scalar(mid: &[i16], h: &Axis, from: usize, out: &mut [u8]) {
    let taps = h.taps;
    for (o, px) in out.iter_mut().enumerate().skip(from) {
        let s = h.starts[o] as usize;
        let acc = h.weights[o * taps..][..taps]
            .iter()
            .zip(&mid[s..s + taps])
            .fold(1i32 << (OUT_SHIFT - 1), |acc, (&w, &m)| {
                acc + i32::from(w as i16) * i32::from(m)
            });
        *px = (acc >> OUT_SHIFT).min(255) as u8;
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{Axis, BLOCK, OUT_SHIFT, V_DROP, horizontal_scalar};

    /// Vertical pass, 32 samples per step: per tap, bytes widened to `u16` and shifted up by
    /// 8, `pmulhuw` by the weight (`(sample * weight) >> 8`), summed in `u16` (at most
    /// 255 * 128, no overflow).
    ///
    /// # Safety
    /// AVX2 must be available; every row must hold at least `mid.len()` bytes; `rows` and
    /// `w` have the same length.
    #[target_feature(enable = "avx2")]
    pub unsafe fn vertical(rows: &[&[u8]], w: &[u16], mid: &mut [i16]) {
        let width = mid.len();
        let mut x = 0;
        while x + 32 <= width {
            let (mut lo, mut hi) = (_mm256_setzero_si256(), _mm256_setzero_si256());
            for (r, &wk) in rows.iter().zip(w) {
                let wk = _mm256_set1_epi16(wk as i16);
                // SAFETY: x + 32 <= width <= the row's length.
                let (a, b) = unsafe {
                    (
                        _mm_loadu_si128(r.as_ptr().add(x) as *const __m128i),
                        _mm_loadu_si128(r.as_ptr().add(x + 16) as *const __m128i),
                    )
                };
                let a = _mm256_slli_epi16::<{ V_DROP as i32 }>(_mm256_cvtepu8_epi16(a));
                let b = _mm256_slli_epi16::<{ V_DROP as i32 }>(_mm256_cvtepu8_epi16(b));
                lo = _mm256_add_epi16(lo, _mm256_mulhi_epu16(a, wk));
                hi = _mm256_add_epi16(hi, _mm256_mulhi_epu16(b, wk));
            }
            // SAFETY: x + 32 <= mid.len().
            unsafe {
                _mm256_storeu_si256(mid.as_mut_ptr().add(x) as *mut __m256i, lo);
                _mm256_storeu_si256(mid.as_mut_ptr().add(x + 16) as *mut __m256i, hi);
            }
            x += 32;
        }
        for (i, m) in mid.iter_mut().enumerate().skip(x) {
            let acc = rows.iter().zip(w).fold(0u32, |acc, (r, &wk)| {
                acc + ((u32::from(r[i]) * u32::from(wk)) >> V_DROP)
            });
            *m = acc as i16;
        }
    }

    /// Rounds the 16 fixed-point sums of one output block (outputs 0-7 in `a0`, 8-15 in
    /// `a1`, rounding term already added) to bytes and stores them in `out[..16]`.
    #[target_feature(enable = "avx2")]
    fn store_block(a0: __m256i, a1: __m256i, out: &mut [u8]) {
        assert!(out.len() >= BLOCK);
        let a0 = _mm256_srai_epi32::<{ OUT_SHIFT as i32 }>(a0);
        let a1 = _mm256_srai_epi32::<{ OUT_SHIFT as i32 }>(a1);
        // packs per lane gives outputs [0-3, 8-11 | 4-7, 12-15]; the permute restores order.
        let w16 = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packs_epi32(a0, a1));
        let bytes = _mm256_packus_epi16(w16, w16);
        let bytes = _mm256_permute4x64_epi64::<0b00_00_10_00>(bytes);
        // SAFETY: `out` holds at least 16 bytes (asserted above).
        unsafe {
            _mm_storeu_si128(
                out.as_mut_ptr() as *mut __m128i,
                _mm256_castsi256_si128(bytes),
            )
        };
    }

    /// Horizontal pass, [`BLOCK`] outputs per step: for each tap pair one gather of the two
    /// adjacent `i16` intermediates per output, `pmaddwd` with that output's weight pair.
    ///
    /// # Safety
    /// AVX2 must be available; `mid` must hold `starts[o] + taps` samples for every output;
    /// `pairs` must be [`super::avx2_weights`] of `h`; `out.len()` outputs of `h`.
    #[target_feature(enable = "avx2")]
    pub unsafe fn horizontal(mid: &[i16], h: &Axis, pairs: &[i32], out: &mut [u8]) {
        let npairs = h.taps / 2;
        let round = _mm256_set1_epi32(1 << (OUT_SHIFT - 1));
        let base = mid.as_ptr() as *const i32;
        let blocks = out.len() / BLOCK;
        for block in 0..blocks {
            let o = block * BLOCK;
            // SAFETY: o + 16 <= starts.len(); the pair weights of this block are in bounds.
            let (mut i0, mut i1) = unsafe {
                (
                    _mm256_loadu_si256(h.starts.as_ptr().add(o) as *const __m256i),
                    _mm256_loadu_si256(h.starts.as_ptr().add(o + 8) as *const __m256i),
                )
            };
            let (mut a0, mut a1) = (round, round);
            let wblock = &pairs[block * npairs * BLOCK..][..npairs * BLOCK];
            for wj in wblock.chunks_exact(BLOCK) {
                // SAFETY: each gather reads mid[s + 2j] and mid[s + 2j + 1] (4 bytes at byte
                // offset 2 * index), inside `mid` by the caller's contract; the weight loads
                // read the 16 values of `wj`.
                unsafe {
                    let g0 = _mm256_i32gather_epi32::<2>(base, i0);
                    let g1 = _mm256_i32gather_epi32::<2>(base, i1);
                    let w0 = _mm256_loadu_si256(wj.as_ptr() as *const __m256i);
                    let w1 = _mm256_loadu_si256(wj.as_ptr().add(8) as *const __m256i);
                    a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(g0, w0));
                    a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(g1, w1));
                }
                i0 = _mm256_add_epi32(i0, _mm256_set1_epi32(2));
                i1 = _mm256_add_epi32(i1, _mm256_set1_epi32(2));
            }
            store_block(a0, a1, &mut out[o..o + BLOCK]);
        }
        horizontal_scalar(mid, h, blocks * BLOCK, out);
    }

    /// Horizontal pass without gathers: for each run of 4 outputs and tap pair `j`, one
    /// 8-sample load at the run's first window (+ 2j) and a `pshufb` that lays out each
    /// output's pair, then `pmaddwd` as in [`horizontal`].
    ///
    /// # Safety
    /// As [`horizontal`], plus `masks` must be [`super::shuffle_masks`] of `h` and `mid` must
    /// hold `starts[o] + taps + 8` samples for every output.
    #[target_feature(enable = "avx2")]
    pub unsafe fn horizontal_shuffle(
        mid: &[i16],
        h: &Axis,
        pairs: &[i32],
        masks: &[u8],
        out: &mut [u8],
    ) {
        let npairs = h.taps / 2;
        let round = _mm256_set1_epi32(1 << (OUT_SHIFT - 1));
        let blocks = out.len() / BLOCK;
        let window = |s: u32, j: usize| -> __m128i {
            // SAFETY: s + 2j + 8 <= s + taps + 8 samples, inside `mid` by the contract.
            unsafe { _mm_loadu_si128(mid.as_ptr().add(s as usize + 2 * j) as *const __m128i) }
        };
        for block in 0..blocks {
            let o = block * BLOCK;
            let s = &h.starts[o..o + BLOCK];
            let m = &masks[o * 4..][..BLOCK * 4];
            // SAFETY: `m` holds 64 bytes.
            let (m0, m1) = unsafe {
                (
                    _mm256_loadu_si256(m.as_ptr() as *const __m256i),
                    _mm256_loadu_si256(m.as_ptr().add(32) as *const __m256i),
                )
            };
            let (mut a0, mut a1) = (round, round);
            let wblock = &pairs[block * npairs * BLOCK..][..npairs * BLOCK];
            for (j, wj) in wblock.chunks_exact(BLOCK).enumerate() {
                let v0 = _mm256_set_m128i(window(s[4], j), window(s[0], j));
                let v1 = _mm256_set_m128i(window(s[12], j), window(s[8], j));
                // SAFETY: `wj` holds 16 values.
                let (w0, w1) = unsafe {
                    (
                        _mm256_loadu_si256(wj.as_ptr() as *const __m256i),
                        _mm256_loadu_si256(wj.as_ptr().add(8) as *const __m256i),
                    )
                };
                a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_shuffle_epi8(v0, m0), w0));
                a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_shuffle_epi8(v1, m1), w1));
            }
            store_block(a0, a1, &mut out[o..o + BLOCK]);
        }
        horizontal_scalar(mid, h, blocks * BLOCK, out);
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
