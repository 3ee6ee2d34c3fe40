//! How faithful a render's video is: PSNR (luma and all planes) and SSIM of the encoded
//! output against the frames the encoder was given, for the whole and for its worst second.
//!
//! **How it is measured.** The encoder's own packets are decoded again in process, beside the
//! encode (`meter.rs`), and each decoded picture is compared with the composed frame it was
//! made from (`metrics.rs`, FFmpeg's `psnr` and `ssim` filter arithmetic). Why not the
//! encoders' own figures: with FFmpeg 5.1 only libvpx reports them (PSNR, through
//! `AV_PKT_DATA_QUALITY_STATS` with `AV_CODEC_FLAG_PSNR`); libx264's wrapper passes no error
//! sums (x264 prints its totals to the log only), libx265 and NVENC report none, and none
//! reports SSIM. Why not FFmpeg's `psnr`/`ssim` filters: the workspace links no libavfilter
//! (about 70 MB less, see the workspace manifest), and they too need the decoded output.
//! Decoding is codec-independent, so every encoder gets the same figures.
//!
//! **What is kept.** Per second of the output's timeline (its frames' presentation time,
//! floored), the frames measured, the squared error of each plane and the sum of the frames'
//! SSIM ([`QualityTally`]): tallies of a split render's segments add up to exactly the
//! tally a single pass would make of the same frames ([`QualityTally::merge`]). The figures
//! ([`QualitySummary`]) follow FFmpeg's summaries: a PSNR is that of the mean squared error
//! over the frames (`psnr` filter's `y:` and `average:`), SSIM the mean of the frames' SSIM
//! over all planes weighted by their samples (`ssim` filter's `All:`).
//!
//! **Against the source.** These figures measure the encode only. A full-reference figure
//! against the source at output size (after scaling, tone mapping, the watermark) would
//! scale each decoded source frame to the output size with a reference scaler (`ffmpeg -i out
//! -i src -lavfi "[1]scale=W:H:flags=bicubic[r];[0][r]psnr"`) and compare: one more scale
//! (and tone map) per frame, roughly the compositor's work again; not done here.

pub(crate) mod meter;
mod metrics;

/// PSNR of identical pictures (FFmpeg prints `inf`): reported as this many dB.
pub const PSNR_CEILING_DB: f64 = 100.0;

/// One second of the output's timeline, measured.
#[derive(Clone, Debug, PartialEq)]
pub struct SecondTally {
    /// Whole seconds from the output's start (its frames' presentation time, floored).
    pub second: u32,
    /// Frames measured in it.
    pub frames: u32,
    /// Squared error summed over those frames: Y, U, V.
    pub squared_error: [u64; 3],
    /// Those frames' SSIM (all planes) summed.
    pub ssim_sum: f64,
}

/// A render's measurements, second by second (see the module's documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct QualityTally {
    /// The samples' peak: 255 (8-bit), 1023 (10-bit).
    pub peak: u32,
    /// Samples in one frame's Y, U and V planes.
    pub plane_samples: [u64; 3],
    /// In time order, each second once; only seconds with a measured frame.
    pub seconds: Vec<SecondTally>,
}

/// A render's quality: the whole output's tally, and for a split render each segment's.
#[derive(Clone, Debug, PartialEq)]
pub struct QualityReport {
    pub whole: QualityTally,
    /// In order; empty for a single pass.
    pub segments: Vec<SegmentQuality>,
}

/// One segment's tally and where it lies in the output.
#[derive(Clone, Debug, PartialEq)]
pub struct SegmentQuality {
    /// 0-based.
    pub index: u32,
    pub start_seconds: f64,
    pub end_seconds: f64,
    pub tally: QualityTally,
}

impl QualityReport {
    /// A single pass's report.
    pub fn single(whole: QualityTally) -> Self {
        QualityReport {
            whole,
            segments: Vec::new(),
        }
    }

    /// A split render's report: its segments' tallies and their merge. `None` without
    /// segments.
    pub fn of_segments(mut segments: Vec<SegmentQuality>) -> Result<Option<Self>, MergeError> {
        segments.sort_by_key(|s| s.index);
        let whole = QualityTally::merge(segments.iter().map(|s| &s.tally))?;
        Ok(whole.map(|whole| QualityReport { whole, segments }))
    }
}

/// The figures of a tally: the whole and the worst second.
#[derive(Clone, Debug, PartialEq)]
pub struct QualitySummary {
    /// PSNR of the luma plane, dB.
    pub psnr_y_db: f64,
    /// PSNR of all planes, weighted by their samples, dB.
    pub psnr_db: f64,
    /// SSIM of all planes, 0 ..= 1.
    pub ssim: f64,
    pub frames_measured: u64,
    /// The second with the lowest PSNR (all planes); the earliest of equals.
    pub worst: WorstSecond,
}

/// The figures of one second.
#[derive(Clone, Debug, PartialEq)]
pub struct WorstSecond {
    /// Whole seconds from the output's start.
    pub at_seconds: u32,
    pub psnr_y_db: f64,
    pub psnr_db: f64,
    pub ssim: f64,
}

/// Why tallies cannot be merged.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("quality tallies of different pictures cannot be merged: {0}")]
pub struct MergeError(String);

/// PSNR of `squared_error` over `samples` samples of peak `peak`, capped at
/// [`PSNR_CEILING_DB`].
fn psnr(squared_error: u64, samples: u64, peak: u32) -> f64 {
    if squared_error == 0 || samples == 0 {
        return PSNR_CEILING_DB;
    }
    let mse = squared_error as f64 / samples as f64;
    let max = f64::from(peak);
    (10.0 * (max * max / mse).log10()).min(PSNR_CEILING_DB)
}

impl QualityTally {
    /// An empty tally of frames of this depth and plane sizes.
    pub(crate) fn new(peak: u32, plane_samples: [u64; 3]) -> Self {
        QualityTally {
            peak,
            plane_samples,
            seconds: Vec::new(),
        }
    }

    /// Adds one measured frame of second `second`.
    pub(crate) fn add(&mut self, second: u32, squared_error: [u64; 3], ssim: f64) {
        self.absorb(&SecondTally {
            second,
            frames: 1,
            squared_error,
            ssim_sum: ssim,
        });
    }

    /// Adds `s` to its second's tally (made when it has none yet), keeping seconds in order.
    fn absorb(&mut self, s: &SecondTally) {
        match self.seconds.binary_search_by_key(&s.second, |x| x.second) {
            Ok(i) => {
                let t = &mut self.seconds[i];
                t.frames += s.frames;
                for (a, b) in t.squared_error.iter_mut().zip(s.squared_error) {
                    *a += b;
                }
                t.ssim_sum += s.ssim_sum;
            }
            Err(i) => self.seconds.insert(i, s.clone()),
        }
    }

    /// Frames measured.
    pub fn frames(&self) -> u64 {
        self.seconds.iter().map(|s| u64::from(s.frames)).sum()
    }

    /// The tallies of parts of one output (a split render's segments) as one: seconds that
    /// two parts share add up. Parts of different depths or picture sizes are refused.
    pub fn merge<'a>(
        parts: impl IntoIterator<Item = &'a QualityTally>,
    ) -> Result<Option<QualityTally>, MergeError> {
        let mut whole: Option<QualityTally> = None;
        for part in parts {
            let Some(w) = whole.as_mut() else {
                whole = Some(part.clone());
                continue;
            };
            if (w.peak, w.plane_samples) != (part.peak, part.plane_samples) {
                return Err(MergeError(format!(
                    "peak {} with planes {:?} and peak {} with planes {:?}",
                    w.peak, w.plane_samples, part.peak, part.plane_samples
                )));
            }
            for s in &part.seconds {
                w.absorb(s);
            }
        }
        Ok(whole)
    }

    /// The figures of `frames` frames with these sums.
    fn figures(&self, frames: u64, squared_error: [u64; 3], ssim_sum: f64) -> (f64, f64, f64) {
        let samples: u64 = self.plane_samples.iter().sum();
        let psnr_y = psnr(squared_error[0], self.plane_samples[0] * frames, self.peak);
        let all = psnr(squared_error.iter().sum(), samples * frames, self.peak);
        (psnr_y, all, ssim_sum / frames.max(1) as f64)
    }

    /// The figures; `None` when no frame was measured.
    pub fn summary(&self) -> Option<QualitySummary> {
        let frames = self.frames();
        if frames == 0 {
            return None;
        }
        let mut squared_error = [0u64; 3];
        let mut ssim_sum = 0.0;
        let mut worst: Option<WorstSecond> = None;
        for s in &self.seconds {
            for (t, e) in squared_error.iter_mut().zip(s.squared_error) {
                *t += e;
            }
            ssim_sum += s.ssim_sum;
            let (psnr_y_db, psnr_db, ssim) =
                self.figures(u64::from(s.frames), s.squared_error, s.ssim_sum);
            if s.frames > 0 && worst.as_ref().is_none_or(|w| psnr_db < w.psnr_db) {
                worst = Some(WorstSecond {
                    at_seconds: s.second,
                    psnr_y_db,
                    psnr_db,
                    ssim,
                });
            }
        }
        let (psnr_y_db, psnr_db, ssim) = self.figures(frames, squared_error, ssim_sum);
        Some(QualitySummary {
            psnr_y_db,
            psnr_db,
            ssim,
            frames_measured: frames,
            worst: worst?,
        })
    }
}

impl QualitySummary {
    /// One line a person reads: `PSNR 43.2 dB, worst 39.8 dB at 00:07, SSIM 0.987`.
    pub fn line(&self) -> String {
        format!(
            "PSNR {:.1} dB, worst {:.1} dB at {}, SSIM {:.3}",
            self.psnr_db,
            self.worst.psnr_db,
            clock(self.worst.at_seconds),
            self.ssim
        )
    }
}

/// `mm:ss` (`h:mm:ss` from an hour).
pub fn clock(seconds: u32) -> String {
    let (h, m, s) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    match h {
        0 => format!("{m:02}:{s:02}"),
        _ => format!("{h}:{m:02}:{s:02}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(frames: &[(u32, [u64; 3], f64)]) -> QualityTally {
        let mut t = QualityTally::new(255, [16, 4, 4]);
        for (s, e, ssim) in frames {
            t.add(*s, *e, *ssim);
        }
        t
    }

    #[test]
    fn figures_follow_ffmpegs_summaries() {
        // Two frames: luma MSE 1 and 3 → mean 2; all planes (0+0)+(2·16)/24 per frame.
        let t = tally(&[(0, [16, 0, 0], 0.9), (1, [48, 0, 0], 0.8)]);
        let s = t.summary().unwrap();
        let expect_y = 10.0 * (255.0f64 * 255.0 / 2.0).log10();
        assert!((s.psnr_y_db - expect_y).abs() < 1e-9);
        let expect_all = 10.0 * (255.0f64 * 255.0 / (64.0 / 48.0)).log10();
        assert!((s.psnr_db - expect_all).abs() < 1e-9);
        assert!((s.ssim - 0.85).abs() < 1e-12);
        assert_eq!((s.frames_measured, s.worst.at_seconds), (2, 1));
        assert!((s.worst.ssim - 0.8).abs() < 1e-12);
        assert_eq!(
            s.line(),
            format!(
                "PSNR {:.1} dB, worst {:.1} dB at 00:01, SSIM 0.850",
                s.psnr_db, s.worst.psnr_db
            )
        );
    }

    #[test]
    fn identical_pictures_hit_the_ceiling_and_nothing_measured_has_no_figures() {
        let s = tally(&[(3, [0, 0, 0], 1.0)]).summary().unwrap();
        assert_eq!(
            (s.psnr_db, s.psnr_y_db, s.worst.at_seconds),
            (100.0, 100.0, 3)
        );
        assert_eq!(QualityTally::new(255, [4, 1, 1]).summary(), None);
    }

    #[test]
    fn parts_merge_into_the_whole() {
        let frames = [
            (0, [5, 1, 2], 0.9),
            (1, [7, 0, 1], 0.95),
            (1, [9, 3, 3], 0.7),
            (2, [1, 1, 1], 0.99),
        ];
        let whole = tally(&frames);
        let (a, b) = (tally(&frames[..2]), tally(&frames[2..]));
        assert_eq!(QualityTally::merge([&b, &a]).unwrap(), Some(whole));
        let other = QualityTally::new(1023, [16, 4, 4]);
        assert!(QualityTally::merge([&a, &other]).is_err());
        assert_eq!(QualityTally::merge([]).unwrap(), None);
        assert_eq!(clock(7), "00:07");
        assert_eq!(clock(3725), "1:02:05");
    }
}
