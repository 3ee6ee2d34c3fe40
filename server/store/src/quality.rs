//! A render's quality as the store keeps it: the figures with a succeeded render's outcome
//! ([`QualityFigures`]), and a split render's segment tallies ([`StoredTally`]) until the
//! join merges them. Plain serde mirrors of the media crate's [`vidforge_media::quality`]
//! types, which compute them; both are absent from records written before they existed (or
//! of renders not measured), so old records read as they were.

use serde::{Deserialize, Serialize};
use vidforge_media::quality::SecondTally;
use vidforge_media::{QualityReport, QualitySummary, QualityTally, WorstSecond};

/// The figures of a render or of one of its segments (see [`QualitySummary`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// PSNR of the luma plane, dB.
    pub psnr_y_db: f64,
    /// PSNR of all planes (weighted by their samples), dB.
    pub psnr_db: f64,
    /// SSIM of all planes, 0 ..= 1.
    pub ssim: f64,
    pub frames_measured: u64,
    /// The second with the lowest PSNR.
    pub worst: WorstFigures,
}

/// The figures of the worst second.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorstFigures {
    /// Whole seconds from the output's start.
    pub at_seconds: u32,
    pub psnr_y_db: f64,
    pub psnr_db: f64,
    pub ssim: f64,
}

/// A succeeded render's quality: the whole, and for a split render each segment's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QualityFigures {
    #[serde(flatten)]
    pub whole: Figures,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub segments: Vec<SegmentFigures>,
}

/// One segment's figures and where it lies in the output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SegmentFigures {
    /// 0-based.
    pub index: u32,
    pub start_seconds: f64,
    pub end_seconds: f64,
    #[serde(flatten)]
    pub figures: Figures,
}

impl QualityFigures {
    /// The figures of an engine's report; `None` when it measured no frame.
    pub fn of(report: &QualityReport) -> Option<Self> {
        let whole = Figures::from(&report.whole.summary()?);
        let segments = report
            .segments
            .iter()
            .filter_map(|s| {
                Some(SegmentFigures {
                    index: s.index,
                    start_seconds: s.start_seconds,
                    end_seconds: s.end_seconds,
                    figures: Figures::from(&s.tally.summary()?),
                })
            })
            .collect();
        Some(QualityFigures { whole, segments })
    }
}

impl From<&QualitySummary> for Figures {
    fn from(s: &QualitySummary) -> Self {
        Figures {
            psnr_y_db: s.psnr_y_db,
            psnr_db: s.psnr_db,
            ssim: s.ssim,
            frames_measured: s.frames_measured,
            worst: WorstFigures::from(&s.worst),
        }
    }
}

impl From<&WorstSecond> for WorstFigures {
    fn from(w: &WorstSecond) -> Self {
        WorstFigures {
            at_seconds: w.at_seconds,
            psnr_y_db: w.psnr_y_db,
            psnr_db: w.psnr_db,
            ssim: w.ssim,
        }
    }
}

impl Figures {
    /// The engine's summary, back (for its one line of text).
    pub fn summary(&self) -> QualitySummary {
        QualitySummary {
            psnr_y_db: self.psnr_y_db,
            psnr_db: self.psnr_db,
            ssim: self.ssim,
            frames_measured: self.frames_measured,
            worst: WorstSecond {
                at_seconds: self.worst.at_seconds,
                psnr_y_db: self.worst.psnr_y_db,
                psnr_db: self.worst.psnr_db,
                ssim: self.worst.ssim,
            },
        }
    }

    /// One line a person reads (`PSNR 43.2 dB, worst 39.8 dB at 00:07, SSIM 0.987`).
    pub fn line(&self) -> String {
        self.summary().line()
    }
}

/// A segment's measurements, second by second (see [`QualityTally`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredTally {
    pub peak: u32,
    pub plane_samples: [u64; 3],
    /// `(second, frames, [squared error Y, U, V], SSIM sum)`.
    pub seconds: Vec<(u32, u32, [u64; 3], f64)>,
}

impl From<&QualityTally> for StoredTally {
    fn from(t: &QualityTally) -> Self {
        StoredTally {
            peak: t.peak,
            plane_samples: t.plane_samples,
            seconds: t
                .seconds
                .iter()
                .map(|s| (s.second, s.frames, s.squared_error, s.ssim_sum))
                .collect(),
        }
    }
}

impl From<&StoredTally> for QualityTally {
    fn from(t: &StoredTally) -> Self {
        let mut seconds: Vec<SecondTally> = t
            .seconds
            .iter()
            .map(|&(second, frames, squared_error, ssim_sum)| SecondTally {
                second,
                frames,
                squared_error,
                ssim_sum,
            })
            .collect();
        seconds.sort_by_key(|s| s.second);
        seconds.dedup_by(|b, a| {
            let same = a.second == b.second;
            if same {
                a.frames += b.frames;
                for (x, y) in a.squared_error.iter_mut().zip(b.squared_error) {
                    *x += y;
                }
                a.ssim_sum += b.ssim_sum;
            }
            same
        });
        QualityTally {
            peak: t.peak,
            plane_samples: t.plane_samples,
            seconds,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_keep_their_wire_names_and_old_outcomes_read_without_them() {
        let f = QualityFigures {
            whole: Figures {
                psnr_y_db: 44.0,
                psnr_db: 45.5,
                ssim: 0.99,
                frames_measured: 30,
                worst: WorstFigures {
                    at_seconds: 1,
                    psnr_y_db: 41.0,
                    psnr_db: 42.0,
                    ssim: 0.98,
                },
            },
            segments: vec![],
        };
        let v = serde_json::to_value(&f).unwrap();
        assert_eq!(v["psnr_db"], 45.5);
        assert_eq!(v["worst"]["at_seconds"], 1);
        assert!(v.get("segments").is_none());
        assert_eq!(serde_json::from_value::<QualityFigures>(v).unwrap(), f);
        assert_eq!(
            f.whole.line(),
            "PSNR 45.5 dB, worst 42.0 dB at 00:01, SSIM 0.990"
        );
    }

    #[test]
    fn a_tally_round_trips() {
        let t = StoredTally {
            peak: 255,
            plane_samples: [4, 1, 1],
            seconds: vec![(2, 1, [1, 2, 3], 0.5), (0, 2, [4, 5, 6], 1.5)],
        };
        let back = QualityTally::from(&t);
        assert_eq!(back.seconds[0].second, 0);
        assert_eq!(back.frames(), 3);
        assert_eq!(QualityTally::from(&StoredTally::from(&back)), back);
    }
}
