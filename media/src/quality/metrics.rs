//! PSNR's squared error and SSIM of one picture plane against another, computed exactly as
//! FFmpeg's `psnr` and `ssim` filters compute them (so the report can be checked against
//! `ffmpeg -lavfi psnr/ssim`): SSIM is x264's, FFmpeg's `vf_ssim.c` — 4×4 block sums, each
//! 8×8 window of 2×2 blocks on a 4-pixel grid, the constants `(0.01·max)²` and `(0.03·max)²`
//! scaled by the window's 64 samples, averaged over `(w/4 − 1)·(h/4 − 1)` windows.

/// One plane of 8-bit samples, or of 16-bit little-endian ones (10-bit video), row by row.
#[derive(Clone, Copy)]
pub(crate) struct Plane<'a> {
    pub data: &'a [u8],
    /// Bytes from one row to the next.
    pub stride: usize,
    pub width: usize,
    pub height: usize,
    /// Two bytes a sample.
    pub wide: bool,
}

impl<'a> Plane<'a> {
    fn row(&self, y: usize) -> &'a [u8] {
        let len = self.width * if self.wide { 2 } else { 1 };
        &self.data[y * self.stride..y * self.stride + len]
    }

    /// Whether the data holds every row the size and stride claim.
    pub fn fits(&self) -> bool {
        let len = self.width * if self.wide { 2 } else { 1 };
        self.height == 0
            || (self.stride >= len && (self.height - 1) * self.stride + len <= self.data.len())
    }
}

/// Rows of one plane as samples: 8-bit rows as they are, 16-bit ones read into a scratch row.
struct Rows<'a> {
    plane: Plane<'a>,
    scratch: Vec<u16>,
}

impl<'a> Rows<'a> {
    fn new(plane: Plane<'a>) -> Self {
        let scratch = if plane.wide {
            vec![0; plane.width]
        } else {
            Vec::new()
        };
        Rows { plane, scratch }
    }
}

/// The squared error of two rows of samples.
fn row_error<T: Copy + Into<u32>>(a: &[T], b: &[T]) -> u64 {
    a.iter()
        .zip(b)
        .map(|(&p, &q)| {
            let d = i64::from(p.into()) - i64::from(q.into());
            (d * d) as u64
        })
        .sum()
}

/// Row `y` of `rows` as 16-bit samples (wide planes only).
fn wide_row<'s>(rows: &'s mut Rows<'_>, y: usize) -> &'s [u16] {
    let bytes = rows.plane.row(y);
    for (s, b) in rows.scratch.iter_mut().zip(bytes.chunks_exact(2)) {
        *s = u16::from_le_bytes([b[0], b[1]]);
    }
    &rows.scratch
}

/// The sum of squared differences of two planes of one size and depth.
pub(crate) fn squared_error(a: Plane<'_>, b: Plane<'_>) -> u64 {
    if !a.wide {
        return (0..a.height).map(|y| row_error(a.row(y), b.row(y))).sum();
    }
    let (mut ra, mut rb) = (Rows::new(a), Rows::new(b));
    (0..a.height)
        .map(|y| row_error(wide_row(&mut ra, y), wide_row(&mut rb, y)))
        .sum()
}

/// The sums of one 4×4 block: Σa, Σb, Σ(a²+b²), Σab.
type BlockSums = [u32; 4];

/// Adds one row of samples to its blocks' sums.
fn add_row<T: Copy + Into<u32>>(a: &[T], b: &[T], out: &mut [BlockSums]) {
    for ((sums, ca), cb) in out.iter_mut().zip(a.chunks_exact(4)).zip(b.chunks_exact(4)) {
        for k in 0..4 {
            let (p, q) = (ca[k].into(), cb[k].into());
            sums[0] += p;
            sums[1] += q;
            sums[2] += p * p + q * q;
            sums[3] += p * q;
        }
    }
}

/// The block sums of block row `by` of two planes.
fn block_row(a: &mut Rows<'_>, b: &mut Rows<'_>, by: usize, out: &mut [BlockSums]) {
    out.iter_mut().for_each(|s| *s = [0; 4]);
    for y in 4 * by..4 * by + 4 {
        if a.plane.wide {
            add_row(wide_row(a, y), wide_row(b, y), out);
        } else {
            add_row(a.plane.row(y), b.plane.row(y), out);
        }
    }
}

/// SSIM's constants for samples up to `peak` (FFmpeg's `ssim_c1`, `ssim_c2`).
fn constants(peak: u32) -> (i64, i64) {
    let max = f64::from(peak);
    (
        (0.01 * 0.01 * max * max * 64.0 + 0.5) as i64,
        (0.03 * 0.03 * max * max * 64.0 * 63.0 + 0.5) as i64,
    )
}

/// One 8×8 window's SSIM from its four blocks' sums (FFmpeg's `ssim_end1`).
fn window(s: [i64; 4], (c1, c2): (i64, i64)) -> f64 {
    let [s1, s2, ss, s12] = s;
    let vars = ss * 64 - s1 * s1 - s2 * s2;
    let covar = s12 * 64 - s1 * s2;
    ((2 * s1 * s2 + c1) as f64 * (2 * covar + c2) as f64)
        / ((s1 * s1 + s2 * s2 + c1) as f64 * (vars + c2) as f64)
}

/// The SSIM of two planes of one size and depth, samples up to `peak` (255, 1023). A plane
/// smaller than two blocks (8×8) has no window: 1.0.
pub(crate) fn ssim(a: Plane<'_>, b: Plane<'_>, peak: u32) -> f64 {
    let (bw, bh) = (a.width / 4, a.height / 4);
    if bw < 2 || bh < 2 {
        return 1.0;
    }
    let c = constants(peak);
    let (mut ra, mut rb) = (Rows::new(a), Rows::new(b));
    let mut above = vec![[0u32; 4]; bw];
    let mut below = vec![[0u32; 4]; bw];
    block_row(&mut ra, &mut rb, 0, &mut above);
    let mut total = 0.0;
    for by in 1..bh {
        block_row(&mut ra, &mut rb, by, &mut below);
        for x in 0..bw - 1 {
            let mut s = [0i64; 4];
            for (k, v) in s.iter_mut().enumerate() {
                *v = i64::from(above[x][k])
                    + i64::from(above[x + 1][k])
                    + i64::from(below[x][k])
                    + i64::from(below[x + 1][k]);
            }
            total += window(s, c);
        }
        std::mem::swap(&mut above, &mut below);
    }
    total / ((bw - 1) * (bh - 1)) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plane(data: &[u8], width: usize, height: usize) -> Plane<'_> {
        Plane {
            data,
            stride: width,
            width,
            height,
            wide: false,
        }
    }

    #[test]
    fn identical_planes_have_no_error_and_full_similarity() {
        let data: Vec<u8> = (0..64 * 48).map(|i| (i * 7 % 251) as u8).collect();
        let p = plane(&data, 64, 48);
        assert_eq!(squared_error(p, p), 0);
        assert!((ssim(p, p, 255) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn errors_add_up_and_wide_samples_read_little_endian() {
        let a = [10u8, 20, 30, 40];
        let b = [12u8, 20, 27, 40];
        assert_eq!(squared_error(plane(&a, 2, 2), plane(&b, 2, 2)), 4 + 9);
        let wa = [0x00u8, 0x01, 0x10, 0x00];
        let wb = [0x02u8, 0x01, 0x10, 0x00];
        let wide = |d| Plane {
            data: d,
            stride: 4,
            width: 2,
            height: 1,
            wide: true,
        };
        assert_eq!(squared_error(wide(&wa), wide(&wb)), 4);
        assert!(!plane(&a, 2, 3).fits());
    }

    #[test]
    fn noise_lowers_ssim_below_one() {
        let a: Vec<u8> = (0..64 * 64).map(|i| (i % 64 * 3) as u8).collect();
        let b: Vec<u8> = a
            .iter()
            .enumerate()
            .map(|(i, v)| v.wrapping_add((i * 31 % 17) as u8))
            .collect();
        let s = ssim(plane(&a, 64, 64), plane(&b, 64, 64), 255);
        assert!(s > 0.0 && s < 0.99, "{s}");
    }
}
