//! Reading segment files back for the join: each opened and checked against the first
//! (same codec, size and global header: all are encoded with identical settings), its video
//! packets read in order, and the seams checked against the plan (each segment starts where
//! its span does, holds the frames its span does, and ends before the next one starts) and
//! their decode timestamps made strictly increasing.
//!
//! The segment files are the engine's own: a refusal here is `RenderFailed` (the split went
//! wrong, not the source), naming the segment and what does not fit.

use std::path::{Path, PathBuf};

use ffmpeg::format::context::Input;
use ffmpeg::{Packet, Rational, codec, media};
use ffmpeg_next as ffmpeg;

use crate::error::MediaError;
use crate::ffutil::rescale;

/// What must be equal in every segment for their packets to make one stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CodecSignature {
    pub codec: codec::Id,
    pub width: i32,
    pub height: i32,
    pub extradata: Vec<u8>,
}

/// One segment file, open for reading its video packets.
pub(crate) struct SegmentReader {
    pub input: Input,
    pub path: PathBuf,
    pub index: usize,
    pub stream: usize,
    pub time_base: Rational,
    pub signature: CodecSignature,
    /// Packets read so far.
    pub packets: u64,
    /// The earliest and the latest pts read so far, and the latter's duration.
    pub first_pts: Option<i64>,
    last_pts: Option<i64>,
    last_duration: i64,
}

/// A segment file's refusal: `RenderFailed`, naming the segment.
fn refused(index: usize, path: &Path, what: impl std::fmt::Display) -> MediaError {
    MediaError::failed(format!("segment {index} ({}) {what}", path.display()))
}

fn signature(stream: &ffmpeg::format::stream::Stream<'_>) -> CodecSignature {
    let p = stream.parameters();
    // SAFETY: codecpar is valid while the input lives; extradata holds extradata_size bytes.
    let (width, height, extradata) = unsafe {
        let c = p.as_ptr();
        let data = (*c).extradata;
        let size = (*c).extradata_size.max(0) as usize;
        let extradata = if data.is_null() {
            Vec::new()
        } else {
            std::slice::from_raw_parts(data, size).to_vec()
        };
        ((*c).width, (*c).height, extradata)
    };
    CodecSignature {
        codec: p.id(),
        width,
        height,
        extradata,
    }
}

impl SegmentReader {
    /// Opens segment `index` at `path`: a missing file, one that is not a readable segment
    /// (corrupt, truncated) or one without a video stream is a typed error.
    pub fn open(path: &Path, index: usize) -> Result<Self, MediaError> {
        crate::ffutil::init();
        std::fs::metadata(path).map_err(|e| refused(index, path, format!("is missing: {e}")))?;
        let input = ffmpeg::format::input(path).map_err(|e| {
            refused(
                index,
                path,
                format!("is not a readable segment file ({e}); it may be corrupt or truncated"),
            )
        })?;
        let (stream, time_base, signature) = {
            let vs = input
                .streams()
                .find(|s| s.parameters().medium() == media::Type::Video)
                .ok_or_else(|| refused(index, path, "has no video stream"))?;
            (vs.index(), vs.time_base(), signature(&vs))
        };
        if time_base.numerator() <= 0 || time_base.denominator() <= 0 {
            return Err(refused(index, path, "has no usable time base"));
        }
        Ok(SegmentReader {
            input,
            path: path.to_path_buf(),
            index,
            stream,
            time_base,
            signature,
            packets: 0,
            first_pts: None,
            last_pts: None,
            last_duration: 0,
        })
    }

    /// Refuses a segment that was not encoded like the first.
    pub fn check_matches(&self, first: &CodecSignature) -> Result<(), MediaError> {
        let s = &self.signature;
        if s == first {
            return Ok(());
        }
        let what = if s.codec != first.codec {
            format!("codec {:?}, not {:?}", s.codec, first.codec)
        } else if (s.width, s.height) != (first.width, first.height) {
            format!(
                "size {}x{}, not {}x{}",
                s.width, s.height, first.width, first.height
            )
        } else {
            "other codec headers (encoder settings)".to_string()
        };
        Err(refused(
            self.index,
            &self.path,
            format!(
                "does not match segment 0: {what}; all segments of a render must be encoded \
                 with the same settings"
            ),
        ))
    }

    /// The next video packet; `None` at the end. A read error is a corrupt segment.
    pub fn next(&mut self) -> Result<Option<Packet>, MediaError> {
        let mut pkt = Packet::empty();
        loop {
            match pkt.read(&mut self.input) {
                Ok(()) if pkt.stream() == self.stream => break,
                Ok(()) => {}
                Err(ffmpeg::Error::Eof) => return Ok(None),
                Err(e) => {
                    return Err(refused(
                        self.index,
                        &self.path,
                        format!("is corrupt or truncated: {e}"),
                    ));
                }
            }
        }
        let Some(pts) = pkt.pts() else {
            return Err(refused(
                self.index,
                &self.path,
                "has a packet without a timestamp",
            ));
        };
        self.packets += 1;
        self.first_pts = Some(self.first_pts.map_or(pts, |f| f.min(pts)));
        if self.last_pts.is_none_or(|l| pts > l) {
            self.last_pts = Some(pts);
            self.last_duration = pkt.duration();
        }
        Ok(Some(pkt))
    }

    /// The end of the frames read so far: the last one's pts plus its duration (when the
    /// container keeps none, the average spacing of the frames).
    pub fn end_pts(&self) -> Option<i64> {
        let (first, last) = (self.first_pts?, self.last_pts?);
        let n = self.packets.max(2) as i64 - 1;
        let duration = match self.last_duration {
            d if d > 0 => d,
            _ => ((last - first) / n).max(1),
        };
        Some(last + duration)
    }

    /// Refuses a segment read to its end that does not hold the `frames` its span planned
    /// (truncated, or rendered from another span).
    pub fn check_frames(&self, frames: u64) -> Result<(), MediaError> {
        if self.packets == frames {
            return Ok(());
        }
        Err(refused(
            self.index,
            &self.path,
            format!(
                "holds {} frames where its span plans {frames}",
                self.packets
            ),
        ))
    }
}

/// Checks the seam between `before` (read to its end) and `after` (whose first packet was
/// read) against the plan: `after` starts at `planned` (its span's start, in `after`'s time
/// base, within a tick of rounding), and `before`'s last frame presents before that. Gaps in
/// the source (a paused recording, a hole) are the plan's business, not a seam's.
pub(crate) fn check_seam(
    before: &SegmentReader,
    after: &SegmentReader,
    planned: i64,
) -> Result<(), MediaError> {
    let Some(last) = before.last_pts else {
        return Err(refused(before.index, &before.path, "holds no frame"));
    };
    let Some(next) = after.first_pts else {
        return Ok(());
    };
    check_start(after, next, planned)?;
    let tb = after.time_base;
    let at = |pts: i64| pts as f64 * f64::from(tb);
    let last = rescale(last, before.time_base, tb);
    if last >= next {
        return Err(refused(
            before.index,
            &before.path,
            format!(
                "runs to {:.3} s, past the start of segment {} at {:.3} s",
                at(last),
                after.index,
                at(next)
            ),
        ));
    }
    Ok(())
}

/// Refuses `segment` whose first frame presents at `first`, not at `planned` (its span's
/// start; both in its time base, within a tick of rounding).
pub(crate) fn check_start(
    segment: &SegmentReader,
    first: i64,
    planned: i64,
) -> Result<(), MediaError> {
    if (first - planned).abs() <= 1 {
        return Ok(());
    }
    let at = |pts: i64| pts as f64 * f64::from(segment.time_base);
    Err(refused(
        segment.index,
        &segment.path,
        format!(
            "starts at {:.3} s, where its span starts at {:.3} s (a segment is missing, \
             repeated or out of order)",
            at(first),
            at(planned)
        ),
    ))
}

/// Makes decode timestamps strictly increasing across seams (in the output's time base):
/// a segment's first packets may decode "before" the previous segment's last ones when the
/// encoder reorders frames. A dts never goes above its pts.
#[derive(Debug, Default)]
pub(crate) struct DtsFix {
    last: Option<i64>,
}

impl DtsFix {
    pub fn apply(&mut self, pkt: &mut Packet) -> Result<(), MediaError> {
        let pts = pkt.pts();
        let dts = pkt.dts().or(pts).unwrap_or(0);
        let fixed = match self.last {
            Some(last) if dts <= last => last + 1,
            _ => dts,
        };
        if pts.is_some_and(|p| fixed > p) {
            return Err(MediaError::failed(format!(
                "cannot order the joined video: a packet's decode time {fixed} would pass its \
                 presentation time {}",
                pts.unwrap_or_default()
            )));
        }
        self.last = Some(fixed);
        pkt.set_dts(Some(fixed));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(pts: i64, dts: i64) -> Packet {
        let mut p = Packet::empty();
        p.set_pts(Some(pts));
        p.set_dts(Some(dts));
        p
    }

    #[test]
    fn dts_going_back_at_a_seam_is_moved_forward_never_past_pts() {
        let mut fix = DtsFix::default();
        let mut out = Vec::new();
        // Segment 1 ends at dts 10; segment 2's reordered start decodes at 9, 10, 11.
        for (pts, dts) in [(10, 8), (12, 9), (11, 10), (20, 9), (22, 10), (21, 11)] {
            let mut p = packet(pts, dts);
            fix.apply(&mut p).unwrap();
            out.push(p.dts().unwrap());
        }
        assert_eq!(out, [8, 9, 10, 11, 12, 13]);
        let mut fix = DtsFix::default();
        fix.apply(&mut packet(5, 5)).unwrap();
        let e = fix.apply(&mut packet(5, 4)).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::RenderFailed);
    }
}
