//! Segment-parallel rendering: a long render cut at source keyframes into segments, each
//! rendered on its own (possibly elsewhere) into an intermediate file holding only video,
//! then joined into the final output by a remux, with the audio carried once over the whole
//! length, so that the result cannot be told from a single pass.
//!
//! Files: here the vocabulary and the seek to a segment's start; `plan.rs` where the cuts
//! go (the keyframe scan and the pure decision); `render.rs` one segment's render;
//! `remux.rs` reading segment files back (checked, in order); `join.rs` the join.

mod join;
mod plan;
mod remux;
mod render;

use std::path::PathBuf;
use std::time::Duration;

use ffmpeg::ffi;
use ffmpeg_next as ffmpeg;

use crate::error::MediaError;
use crate::muxer::SEGMENT_MUXER;
use crate::source::Source;

/// One segment of a source: the frames whose presentation time lies in [start, end) of the
/// source's video stream.
#[derive(Clone, Debug, PartialEq)]
pub struct SegmentSpan {
    /// 0-based position.
    pub index: u32,
    /// The first frame's pts (video stream time base), a keyframe; `None`: from the start.
    pub start_pts: Option<i64>,
    /// The next segment's `start_pts`; `None`: to the end.
    pub end_pts: Option<i64>,
    /// From the source's first frame, for progress and logs.
    pub start_seconds: f64,
    pub end_seconds: f64,
    /// Video packets in the span (the frames expected).
    pub frames: u64,
}

/// A rendered segment, as [`crate::Engine::join_segments`] takes it: its file and the span
/// it was rendered from (the seams are checked against the spans).
#[derive(Clone, Debug, PartialEq)]
pub struct SegmentFile {
    pub path: PathBuf,
    pub span: SegmentSpan,
}

/// How [`crate::Engine::plan_segments`] cuts a source.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SegmentPlanOptions {
    /// The length segments aim at, in seconds (cuts go to the nearest keyframe); at least
    /// [`SegmentPlanOptions::MIN_TARGET_SECONDS`].
    pub target_seconds: f64,
    /// Sources shorter than this are one segment.
    pub min_source_seconds: f64,
}

impl SegmentPlanOptions {
    /// The shortest segment target (a second: shorter segments cost more in per-segment
    /// set-up than they gain in parallelism).
    pub const MIN_TARGET_SECONDS: f64 = 1.0;

    /// The one rule for a segment target, for the engine's callers and the service's
    /// setting alike: a finite number of seconds, at least [`Self::MIN_TARGET_SECONDS`].
    pub fn check(&self) -> Result<(), MediaError> {
        let t = self.target_seconds;
        if t.is_finite() && t >= Self::MIN_TARGET_SECONDS {
            return Ok(());
        }
        Err(MediaError::invalid(format!(
            "segment target of {t} s: it must be at least {} s",
            Self::MIN_TARGET_SECONDS
        )))
    }
}

/// What [`crate::Engine::render_segment`] produced.
#[derive(Clone, Debug, PartialEq)]
pub struct SegmentReport {
    /// Frames encoded into the segment file.
    pub frames: u64,
    pub size_bytes: u64,
    pub elapsed: Duration,
    /// The segment's quality when measured; the whole render's is the merge of its
    /// segments' ([`crate::QualityTally::merge`]).
    pub quality: Option<crate::QualityTally>,
}

/// The segment file's name for segment `index` (the extension is the intermediate
/// container's).
pub fn segment_file_name(index: u32) -> String {
    format!("segment-{index:06}.{SEGMENT_MUXER}")
}

/// Refuses a span that cannot hold a frame (its end not after its start).
fn check_span(span: &SegmentSpan) -> Result<(), MediaError> {
    match (span.start_pts, span.end_pts) {
        (Some(s), Some(e)) if e <= s => Err(MediaError::invalid(format!(
            "segment {}: its span ends (pts {e}) before it starts (pts {s})",
            span.index
        ))),
        _ => Ok(()),
    }
}

/// Seeks `src` to the keyframe at or before `span`'s start (its own, when the plan came from
/// this source). A seek that fails leaves the input at its start: the frames before the span
/// are decoded and dropped, slower but the same frames.
pub(crate) fn seek_to_span(src: &mut Source, span: &SegmentSpan) -> Result<(), MediaError> {
    check_span(span)?;
    let Some(start) = span.start_pts else {
        return Ok(());
    };
    let stream = src.video.index as i32;
    // SAFETY: a valid open input context; the stream index is the video stream's.
    let r = unsafe {
        ffi::avformat_seek_file(src.input.as_mut_ptr(), stream, i64::MIN, start, start, 0)
    };
    if r < 0 {
        tracing::warn!(
            input = %src.path.display(),
            segment = span.index,
            "seek to pts {start} failed ({}); decoding from the start",
            ffmpeg::Error::from(r)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_files_are_named_in_order_with_the_intermediate_extension() {
        assert_eq!(segment_file_name(0), "segment-000000.mp4");
        assert!(segment_file_name(9) < segment_file_name(10));
    }

    #[test]
    fn a_segment_target_is_a_finite_second_or_more() {
        let opts = |t| SegmentPlanOptions {
            target_seconds: t,
            min_source_seconds: 60.0,
        };
        for ok in [1.0, 10.0] {
            assert!(opts(ok).check().is_ok(), "{ok}");
        }
        for bad in [0.999, 0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(opts(bad).check().is_err(), "{bad}");
        }
    }
}
