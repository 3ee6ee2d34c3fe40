//! Where a source is cut: a demux-only scan of its video packets (pts, durations and
//! keyframe flags, no decode), and the decision, a pure function of those times, kept apart
//! for its tests.
//!
//! A keyframe is a cut only where a segment can start and the one before it end without
//! either seeing the other's frames ([`cut_points`]):
//! - **clean**: every packet before it in decode order presents before it, and every packet
//!   after it (past an open GOP's leading pictures) at or after it, so keyframes out of
//!   presentation order are never cut;
//! - **not in a gap**: the frame before it lasts until it (a paused screen recording's hole, a
//!   jump of the frame rate: the seam would fall inside the hole);
//! - and no segment holds fewer than [`MIN_SEGMENT_FRAMES`] frames.

use std::path::Path;

use ffmpeg::codec::packet::Ref as _;
use ffmpeg::{Packet, ffi};
use ffmpeg_next as ffmpeg;

use super::{SegmentPlanOptions, SegmentSpan};
use crate::engine::Engine;
use crate::error::MediaError;
use crate::source::{self, Source};

/// Give up on a source whose demuxer returns this many unreadable packets in a row.
const MAX_CONSECUTIVE_ERRORS: u32 = 500;
/// The fewest frames a segment holds.
pub(crate) const MIN_SEGMENT_FRAMES: usize = 2;
/// Packets right after a keyframe (in decode order) that may still present before it: an
/// open GOP's leading pictures, which the decoder hands out before the keyframe (its reorder
/// delay is at most 16 pictures).
const LEADING_PICTURES: usize = 16;
/// The interval before a keyframe counts as a gap past this many times the frame before it.
const GAP_FACTOR: i64 = 2;

/// One video packet as the scan reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PacketTime {
    pub pts: i64,
    /// Its duration (0: unknown).
    pub duration: i64,
    pub key: bool,
}

/// A source's video timeline, as the planner sees it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Timeline {
    /// Every video packet's pts, sorted (presentation order).
    pub frames: Vec<i64>,
    /// The keyframes a segment may start at ([`cut_points`]), sorted.
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
        opts.check()?;
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
    let mut packets: Vec<PacketTime> = Vec::new();
    let mut pkt = Packet::empty();
    loop {
        match pkt.read(&mut src.input) {
            Ok(()) if pkt.stream() == video => {
                errors = 0;
                let Some(pts) = pkt.pts().or(pkt.dts()) else {
                    continue;
                };
                // SAFETY: a plain field read of a packet just read.
                if unsafe { (*pkt.as_ptr()).flags } & ffi::AV_PKT_FLAG_DISCARD != 0 {
                    // Decoded for reference only, never shown (cut by an edit list).
                    continue;
                }
                packets.push(PacketTime {
                    pts,
                    duration: pkt.duration().max(0),
                    key: pkt.is_key(),
                });
                if pts + pkt.duration() >= t.end || packets.len() == 1 {
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
    if packets.is_empty() {
        return Err(MediaError::invalid(format!(
            "{} has no readable video packet; it is corrupt or truncated",
            src.path.display()
        )));
    }
    t.keyframes = cut_points(&packets);
    t.frames = packets.iter().map(|p| p.pts).collect();
    t.frames.sort_unstable();
    if last_duration <= 0 {
        // No duration on the last packet: one frame at the average rate.
        let n = t.frames.len() as i64;
        let (first, last) = (t.frames[0], t.frames[t.frames.len() - 1]);
        t.end = last + if n > 1 { (last - first) / (n - 1) } else { 1 };
    }
    Ok(t)
}

/// The keyframes of `packets` (in decode order) a segment may start at, sorted: clean (no
/// packet before one presents at or after it; none after it, past its leading pictures,
/// before it) and not after a gap (the frame before it, in presentation order, lasts until
/// it: at most [`GAP_FACTOR`] times its duration, or the interval before it when the
/// container keeps no durations).
pub(crate) fn cut_points(packets: &[PacketTime]) -> Vec<i64> {
    let n = packets.len();
    // The latest pts before each packet, and the earliest from each one on.
    let mut before_max = vec![i64::MIN; n];
    for i in 1..n {
        before_max[i] = before_max[i - 1].max(packets[i - 1].pts);
    }
    let mut from_min = vec![i64::MAX; n + 1];
    for i in (0..n).rev() {
        from_min[i] = from_min[i + 1].min(packets[i].pts);
    }
    let mut by_pts: Vec<(i64, i64)> = packets.iter().map(|p| (p.pts, p.duration)).collect();
    by_pts.sort_unstable();
    // Past its leading pictures (the run right after it presenting before it, at most
    // LEADING_PICTURES long), nothing presents before the keyframe at `i`.
    let clean_after = |i: usize, pts: i64| {
        let leading = packets[i + 1..]
            .iter()
            .take(LEADING_PICTURES + 1)
            .take_while(|p| p.pts < pts)
            .count();
        leading <= LEADING_PICTURES && from_min[i + 1 + leading] >= pts
    };
    let mut cuts: Vec<i64> = packets
        .iter()
        .enumerate()
        .filter(|&(i, p)| {
            p.key && before_max[i] < p.pts && clean_after(i, p.pts) && !after_gap(&by_pts, p.pts)
        })
        .map(|(_, p)| p.pts)
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

/// Whether the frame before `pts` (in `by_pts`, sorted by pts) ends well before it: more than
/// [`GAP_FACTOR`] times its duration (or, unknown, the interval before it) away.
fn after_gap(by_pts: &[(i64, i64)], pts: i64) -> bool {
    let at = by_pts.partition_point(|&(p, _)| p < pts);
    let Some(&(prev, duration)) = at.checked_sub(1).and_then(|i| by_pts.get(i)) else {
        return false;
    };
    let step = match duration {
        d if d > 0 => d,
        _ => match at.checked_sub(2).and_then(|i| by_pts.get(i)) {
            Some(&(before, _)) => prev - before,
            None => return false,
        },
    };
    pts - prev > GAP_FACTOR.saturating_mul(step.max(1))
}

/// The spans of `t`: cuts at keyframes nearest each goal (the previous cut plus the target),
/// none closer than half the target to the previous cut or to the end, and none leaving a
/// segment fewer than [`MIN_SEGMENT_FRAMES`] frames.
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
            // The earliest cut leaving the segment its fewest frames; later ones keep it.
            let from = cuts
                .last()
                .map_or(0, |&c| t.frames.partition_point(|&f| f < c));
            let Some(&least) = t.frames.get(from + MIN_SEGMENT_FRAMES - 1) else {
                break;
            };
            let at = candidates.partition_point(|&k| secs(k) < goal || k <= least);
            let rest_enough = |k: i64| {
                t.frames.len() - t.frames.partition_point(|&f| f < k) >= MIN_SEGMENT_FRAMES
            };
            let nearest = [at.checked_sub(1), Some(at)]
                .into_iter()
                .flatten()
                .filter_map(|i| candidates.get(i).copied())
                .filter(|&k| k > least && (lo..=hi).contains(&secs(k)) && rest_enough(k))
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

    /// Packets in decode order: (pts, keyframe), each lasting `duration`.
    fn packets(list: &[(i64, bool)], duration: i64) -> Vec<PacketTime> {
        list.iter()
            .map(|&(pts, key)| PacketTime { pts, duration, key })
            .collect()
    }

    #[test]
    fn keyframes_out_of_presentation_order_are_never_cut() {
        // GOPs of 2 frames; the second and third are swapped in presentation time.
        let p = packets(
            &[
                (0, true),
                (1, false),
                (4, true),
                (5, false),
                (2, true),
                (3, false),
                (6, true),
                (7, false),
            ],
            1,
        );
        assert_eq!(cut_points(&p), [0, 6]);
    }

    #[test]
    fn an_open_gops_leading_pictures_do_not_spoil_its_keyframe() {
        // I0 P3 B1 B2 | I6 B4 B5 P9 B7 B8: B4 and B5 present before I6, right after it.
        let p = packets(
            &[
                (0, true),
                (3, false),
                (1, false),
                (2, false),
                (6, true),
                (4, false),
                (5, false),
                (9, false),
                (7, false),
                (8, false),
            ],
            1,
        );
        assert_eq!(cut_points(&p), [0, 6]);
    }

    #[test]
    fn no_cut_after_a_gap_or_a_jump_of_the_frame_rate() {
        // 1 tick a frame, a hole from 4 to 10, keyframes every other frame.
        let mut p = packets(
            &[
                (0, true),
                (1, false),
                (2, true),
                (3, false),
                (10, true),
                (11, false),
                (12, true),
            ],
            1,
        );
        assert_eq!(cut_points(&p), [0, 2, 12]);
        // Without durations (Matroska), the interval before the frame decides.
        for packet in &mut p {
            packet.duration = 0;
        }
        assert_eq!(cut_points(&p), [0, 2, 12]);
        // A slideshow: long frames, no gap.
        let slides = packets(&[(0, true), (10, true), (20, true)], 10);
        assert_eq!(cut_points(&slides), [0, 10, 20]);
    }

    #[test]
    fn no_segment_holds_a_single_frame() {
        // One keyframe-only frame every 10 s for 90 s, 10 s target: two frames a segment.
        let t = Timeline {
            frames: (0..9).map(|i| i * 10).collect(),
            keyframes: (0..9).map(|i| i * 10).collect(),
            end: 90,
            tick: 1.0,
        };
        let spans = plan(&t, &opts(10.0, 60.0));
        assert_eq!(starts(&spans), [0.0, 20.0, 40.0, 60.0]);
        assert_eq!(
            spans.iter().map(|s| s.frames).collect::<Vec<_>>(),
            [2, 2, 2, 3]
        );
    }
}
