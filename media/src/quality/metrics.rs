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

/// A sample type of a plane's row.
trait Sample {
    fn at(row: &[u8], x: usize) -> u32;
}

struct Narrow;
struct Wide;

impl Sample for Narrow {
    #[inline(always)]
    fn at(row: &[u8], x: usize) -> u32 {
        u32::from(row[x])
    }
}

impl Sample for Wide {
    #[inline(always)]
    fn at(row: &[u8], x: usize) -> u32 {
        u32::from(u16::from_le_bytes([row[2 * x], row[2 * x + 1]]))
    }
}

/// The sum of squared differences of two planes of one size and depth.
pub(crate) fn squared_error(a: Plane<'_>, b: Plane<'_>) -> u64 {
    match a.wide {
        false => squared_error_of::<Narrow>(a, b),
        true => squared_error_of::<Wide>(a, b),
    }
}

fn squared_error_of<S: Sample>(a: Plane<'_>, b: Plane<'_>) -> u64 {
    let mut total = 0u64;
    for y in 0..a.height {
        let (ra, rb) = (a.row(y), b.row(y));
        let mut row = 0u64;
        for x in 0..a.width {
            let d = i64::from(S::at(ra, x)) - i64::from(S::at(rb, x));
            row += (d * d) as u64;
        }
        total += row;
    }
    total
}

/// The SSIM of two planes of one size and depth, samples up to `peak` (255, 1023). A plane
/// smaller than two blocks (8×8) has no window: 1.0, as FFmpeg's divide gives nothing to
/// compare.
pub(crate) fn ssim(a: Plane<'_>, b: Plane<'_>, peak: u32) -> f64 {
    match a.wide {
        false => ssim_of::<Narrow>(a, b, peak),
        true => ssim_of::<Wide>(a, b, peak),
    }
}

/// The sums of one 4×4 block: Σa, Σb, Σ(a²+b²), Σab.
type BlockSums = [u64; 4];

fn block_row<S: Sample>(a: Plane<'_>, b: Plane<'_>, block_y: usize, out: &mut [BlockSums]) {
    out.iter_mut().for_each(|s| *s = [0; 4]);
    for dy in 0..4 {
        let (ra, rb) = (a.row(4 * block_y + dy), b.row(4 * block_y + dy));
        for (bx, sums) in out.iter_mut().enumerate() {
            let (mut s1, mut s2, mut ss, mut s12) = (0u32, 0u32, 0u32, 0u32);
            for dx in 0..4 {
                let (p, q) = (S::at(ra, 4 * bx + dx), S::at(rb, 4 * bx + dx));
                s1 += p;
                s2 += q;
                ss += p * p + q * q;
                s12 += p * q;
            }
            sums[0] += u64::from(s1);
            sums[1] += u64::from(s2);
            sums[2] += u64::from(ss);
            sums[3] += u64::from(s12);
        }
    }
}

/// One 8×8 window's SSIM from its four blocks' sums (FFmpeg's `ssim_end1`).
fn window(s: BlockSums, peak: u32) -> f64 {
    let max = f64::from(peak);
    let c1 = (0.01 * 0.01 * max * max * 64.0 + 0.5) as i64;
    let c2 = (0.03 * 0.03 * max * max * 64.0 * 63.0 + 0.5) as i64;
    let [s1, s2, ss, s12] = s.map(|v| v as i64);
    let vars = ss * 64 - s1 * s1 - s2 * s2;
    let covar = s12 * 64 - s1 * s2;
    ((2 * s1 * s2 + c1) as f64 * (2 * covar + c2) as f64)
        / ((s1 * s1 + s2 * s2 + c1) as f64 * (vars + c2) as f64)
}

fn ssim_of<S: Sample>(a: Plane<'_>, b: Plane<'_>, peak: u32) -> f64 {
    let (bw, bh) = (a.width / 4, a.height / 4);
    if bw < 2 || bh < 2 {
        return 1.0;
    }
    let mut above = vec![[0u64; 4]; bw];
    let mut below = vec![[0u64; 4]; bw];
    block_row::<S>(a, b, 0, &mut above);
    let mut total = 0.0;
    for by in 1..bh {
        block_row::<S>(a, b, by, &mut below);
        for x in 0..bw - 1 {
            let mut s = [0u64; 4];
            for k in 0..4 {
                s[k] = above[x][k] + above[x + 1][k] + below[x][k] + below[x + 1][k];
            }
            total += window(s, peak);
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
