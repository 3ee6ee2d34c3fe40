//! Where a source is cut: a demux-only scan of its video packets (pts and keyframe flags,
//! no decode), and the decision, a pure function of those times, kept apart for its tests.

use std::path::Path;

use ffmpeg::{Packet, ffi};
use ffmpeg_next as ffmpeg;

use super::{SegmentPlanOptions, SegmentSpan};
use crate::engine::Engine;
use crate::error::MediaError;
use crate::source::{self, Source};

/// Give up on a source whose demuxer returns this many unreadable packets in a row.
const MAX_CONSECUTIVE_ERRORS: u32 = 500;

/// A source's video timeline, as the planner sees it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Timeline {
    /// Every video packet's pts, sorted (presentation order).
    pub frames: Vec<i64>,
    /// The pts of the keyframes, sorted.
    pub keyframes: Vec<i64>,
    /// The end of the last frame (its pts plus its duration).
    pub end: i64,
    /// Seconds per tick of the video stream's time base.
    pub tick: f64,
}

impl Engine {
    /// Scans the source's video packets (demux only, no decode, bounded by the source's packet
    /// count) and cuts at keyframes near multiples of `target_seconds` (no segment shorter
    /// than about half the target; the last one absorbs a short tail). Returns one span
    /// (start `None`, end `None`) when the source is shorter than `min_source_seconds`, or
    /// has no usable keyframes.
    pub fn plan_segments(
        &self,
        input: &Path,
        opts: &SegmentPlanOptions,
    ) -> Result<Vec<SegmentSpan>, MediaError> {
        if !(opts.target_seconds.is_finite() && opts.target_seconds > 0.0) {
            return Err(MediaError::invalid(format!(
                "segment target of {} s: it must be a positive number of seconds",
                opts.target_seconds
            )));
        }
        let mut src = source::open(input)?;
        let timeline = scan(&mut src)?;
        let spans = plan(&timeline, opts);
        tracing::info!(
            input = %input.display(),
            frames = timeline.frames.len(),
            keyframes = timeline.keyframes.len(),
            segments = spans.len(),
            "segments planned"
        );
        Ok(spans)
    }
}

/// Reads every video packet's pts and keyframe flag (the audio is not read).
fn scan(src: &mut Source) -> Result<Timeline, MediaError> {
    let video = src.video.index;
    for mut s in src.input.streams_mut() {
        if s.index() != video {
            // SAFETY: setting the discard flag on a valid stream.
            unsafe { (*s.as_mut_ptr()).discard = ffi::AVDiscard::AVDISCARD_ALL };
        }
    }
    let mut t = Timeline {
        tick: f64::from(src.video.time_base),
        ..Timeline::default()
    };
    let mut last_duration = 0i64;
    let mut errors = 0u32;
    let mut pkt = Packet::empty();
    loop {
        match pkt.read(&mut src.input) {
            Ok(()) if pkt.stream() == video => {
                errors = 0;
                let Some(pts) = pkt.pts().or(pkt.dts()) else {
                    continue;
                };
                t.frames.push(pts);
                if pkt.is_key() {
                    t.keyframes.push(pts);
                }
                if pts + pkt.duration() >= t.end || t.frames.len() == 1 {
                    t.end = pts + pkt.duration().max(0);
                    last_duration = pkt.duration();
                }
            }
            Ok(()) => {}
            Err(ffmpeg::Error::Eof) => break,
            Err(ffmpeg::Error::InvalidData) if errors < MAX_CONSECUTIVE_ERRORS => errors += 1,
            Err(e) => {
                // Like a render: what could be read is what there is.
                tracing::warn!("{}: read error, scan ends early: {e}", src.path.display());
                break;
            }
        }
    }
    if t.frames.is_empty() {
        return Err(MediaError::invalid(format!(
            "{} has no readable video packet; it is corrupt or truncated",
            src.path.display()
        )));
    }
    t.frames.sort_unstable();
    t.keyframes.sort_unstable();
    t.keyframes.dedup();
    if last_duration <= 0 {
        // No duration on the last packet: one frame at the average rate.
        let n = t.frames.len() as i64;
        let (first, last) = (t.frames[0], t.frames[t.frames.len() - 1]);
        t.end = last + if n > 1 { (last - first) / (n - 1) } else { 1 };
    }
    Ok(t)
}

/// The spans of `t`: cuts at keyframes nearest each goal (the previous cut plus the target),
/// none closer than half the target to the previous cut or to the end.
pub(crate) fn plan(t: &Timeline, opts: &SegmentPlanOptions) -> Vec<SegmentSpan> {
    let first = t.frames.first().copied().unwrap_or(0);
    let secs = |pts: i64| (pts - first) as f64 * t.tick;
    let total = secs(t.end);
    let target = opts.target_seconds;
    let mut cuts: Vec<i64> = Vec::new();
    if total >= opts.min_source_seconds && target > 0.0 {
        let candidates: Vec<i64> = t
            .keyframes
            .iter()
            .copied()
            .filter(|&k| k > first && k < t.end)
            .collect();
        let mut prev = 0.0;
        // Each cut is a later keyframe: at most one per candidate.
        for _ in 0..candidates.len() {
            let (lo, hi, goal) = (prev + target / 2.0, total - target / 2.0, prev + target);
            if goal > hi {
                // What is left is under one and a half targets: the last segment takes it.
                break;
            }
            let at = candidates.partition_point(|&k| secs(k) < goal);
            let nearest = [at.checked_sub(1), Some(at)]
                .into_iter()
                .flatten()
                .filter_map(|i| candidates.get(i).copied())
                .filter(|&k| (lo..=hi).contains(&secs(k)))
                .min_by(|&a, &b| (secs(a) - goal).abs().total_cmp(&(secs(b) - goal).abs()));
            let Some(cut) = nearest else { break };
            cuts.push(cut);
            prev = secs(cut);
        }
    }
    let bounds: Vec<Option<i64>> = std::iter::once(None)
        .chain(cuts.iter().copied().map(Some))
        .chain(std::iter::once(None))
        .collect();
    let count_below = |b: Option<i64>| match b {
        Some(pts) => t.frames.partition_point(|&f| f < pts),
        None => t.frames.len(),
    };
    bounds
        .windows(2)
        .enumerate()
        .map(|(i, w)| SegmentSpan {
            index: i as u32,
            start_pts: w[0],
            end_pts: w[1],
            start_seconds: w[0].map_or(0.0, secs),
            end_seconds: w[1].map_or(total, secs),
            frames: (count_below(w[1]) - w[0].map_or(0, |s| count_below(Some(s)))) as u64,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `seconds` of `fps` frames at time base 1/(fps*100), a keyframe every `gop` frames.
    fn timeline(fps: i64, seconds: i64, gop: i64) -> Timeline {
        let step = 100;
        let n = fps * seconds;
        Timeline {
            frames: (0..n).map(|i| i * step).collect(),
            keyframes: (0..n).filter(|i| i % gop == 0).map(|i| i * step).collect(),
            end: n * step,
            tick: 1.0 / (fps * step) as f64,
        }
    }

    fn opts(target: f64, min: f64) -> SegmentPlanOptions {
        SegmentPlanOptions {
            target_seconds: target,
            min_source_seconds: min,
        }
    }

    fn starts(spans: &[SegmentSpan]) -> Vec<f64> {
        spans.iter().map(|s| s.start_seconds).collect()
    }

    #[test]
    fn cuts_at_keyframes_near_multiples_of_the_target() {
        let t = timeline(25, 8, 25);
        let spans = plan(&t, &opts(2.0, 4.0));
        assert_eq!(starts(&spans), [0.0, 2.0, 4.0, 6.0]);
        assert_eq!(spans[0].start_pts, None);
        assert_eq!(spans[1].start_pts, Some(50 * 100));
        assert_eq!(spans[0].end_pts, spans[1].start_pts);
        assert_eq!(spans[3].end_pts, None);
        assert_eq!(spans[3].end_seconds, 8.0);
        assert!(spans.iter().all(|s| s.frames == 50));
        assert_eq!(
            spans.iter().map(|s| s.index).collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
    }

    #[test]
    fn the_last_segment_absorbs_a_short_tail_and_none_is_shorter_than_half_the_target() {
        // 7 s, keyframes every second, 3 s target: 0, 3, then 6 would leave 1 s: absorbed.
        let spans = plan(&timeline(25, 7, 25), &opts(3.0, 1.0));
        assert_eq!(starts(&spans), [0.0, 3.0]);
        assert_eq!(spans.iter().map(|s| s.frames).sum::<u64>(), 175);
        // 6 s, 2 s target: 0, 2, 4 (not 5, which would leave two 1 s segments).
        let spans = plan(&timeline(25, 6, 25), &opts(2.0, 1.0));
        assert_eq!(starts(&spans), [0.0, 2.0, 4.0]);
        // 7 s, 4 s target: a cut at 4 leaves 3 s; none after it.
        let spans = plan(&timeline(2, 7, 1), &opts(4.0, 1.0));
        assert_eq!(starts(&spans), [0.0, 4.0]);
        // Sparse keyframes (every 3 s) with a 2 s target: the nearest ones.
        let spans = plan(&timeline(10, 10, 30), &opts(2.0, 1.0));
        assert_eq!(starts(&spans), [0.0, 3.0, 6.0, 9.0]);
        for s in &spans {
            assert!(s.end_seconds - s.start_seconds >= 1.0, "{s:?}");
        }
    }

    #[test]
    fn one_span_for_short_sources_or_without_keyframes() {
        let one = |spans: Vec<SegmentSpan>, frames| {
            assert_eq!(spans.len(), 1);
            assert_eq!((spans[0].start_pts, spans[0].end_pts), (None, None));
            assert_eq!(spans[0].frames, frames);
        };
        one(plan(&timeline(25, 3, 25), &opts(1.0, 4.0)), 75);
        // Only the first frame is a keyframe.
        one(plan(&timeline(25, 8, 1000), &opts(2.0, 1.0)), 200);
        // Keyframes too far apart for any cut to leave half a target on both sides.
        one(plan(&timeline(25, 4, 90), &opts(1.0, 1.0)), 100);
    }

    #[test]
    fn open_gop_leading_frames_belong_to_the_segment_before() {
        // Decode order I0 P3 B1 B2 | I6 B4 B5 ...: frames are counted by pts.
        let mut t = timeline(10, 4, 10);
        t.keyframes = vec![0, 1000, 2000, 3000];
        let spans = plan(&t, &opts(1.0, 1.0));
        assert_eq!(spans.len(), 4);
        assert_eq!(spans[1].start_pts, Some(1000));
        assert!(spans.iter().all(|s| s.frames == 10));
    }
}
