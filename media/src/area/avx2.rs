//! The AVX2 passes of the area scaler: vertical with `pmulhuw`, horizontal with `pmaddwd` on
//! tap pairs (gathered, or laid out by `pshufb` when the windows are close together).

use std::arch::x86_64::*;

use super::fixed_point::{Axis, BLOCK, OUT_SHIFT, V_DROP, horizontal_scalar};

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
