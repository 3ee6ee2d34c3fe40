//! The area scaler's fixed-point arithmetic: per-axis weights, their regrouping for the AVX2
//! passes, and the scalar passes that define the exact results.

/// Fixed-point bits of the vertical weights (they fit `u16`: at most `1 << 15`).
pub(super) const V_BITS: u32 = 15;
/// Fixed-point bits of the horizontal weights (they fit `i16` for `pmaddwd`).
pub(super) const H_BITS: u32 = 14;
/// Each vertical tap adds `(sample * weight) >> V_DROP` (`pmulhuw` of `sample << 8`), so the
/// intermediate is the filtered value times `1 << (V_BITS - V_DROP)` = 128: 15 bits, inside
/// `i16` for the horizontal `pmaddwd`. The truncation costs under 1/128 code per tap.
pub(super) const V_DROP: u32 = 8;
/// The horizontal sum (15 + 14 bits) is rounded to 8 bits by this shift.
pub(super) const OUT_SHIFT: u32 = H_BITS + V_BITS - V_DROP;

/// Area weights along one axis: output `o` reads source samples `starts[o] ..` with the
/// `taps` weights at `weights[o * taps ..]`, which sum to exactly `1 << bits`.
#[derive(Clone, Debug)]
pub(super) struct Axis {
    pub(super) starts: Vec<u32>,
    pub(super) taps: usize,
    pub(super) weights: Vec<u16>,
}

impl Axis {
    /// Weights for shrinking `src` samples to `dst` (`1 <= dst <= src`) at `bits` of
    /// precision; `even` pads `taps` to an even count (zero weights) for pairwise SIMD.
    pub(super) fn new(src: u32, dst: u32, bits: u32, even: bool) -> Self {
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

/// Outputs per AVX2 horizontal block.
pub(super) const BLOCK: usize = 16;

/// Regroups horizontal weights for the AVX2 pass: for each block of [`BLOCK`] outputs and each
/// tap pair `j`, the 16 outputs' `(w[2j], w[2j+1])` packed as one `i32` each.
pub(super) fn avx2_weights(h: &Axis) -> Vec<i32> {
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
pub(super) fn shuffle_masks(h: &Axis) -> Option<Vec<u8>> {
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

/// `mid[x] = sum_k (rows[k][x] * w[k]) >> V_DROP`, tap by tap over short chunks so LLVM
/// vectorises each pass and the accumulators stay on the stack.
pub(super) fn vertical_scalar(rows: &[&[u8]], w: &[u16], mid: &mut [i16]) {
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
pub(super) fn horizontal_scalar(mid: &[i16], h: &Axis, from: usize, out: &mut [u8]) {
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
