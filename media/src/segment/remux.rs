//! Reading segment files back for the join: each opened and checked against the first
//! (same codec, size and global header: all are encoded with identical settings), its video
//! packets read in order, and the seams checked (no frame missing or repeated between two
//! segments) and their decode timestamps made strictly increasing.

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
        std::fs::metadata(path).map_err(|e| MediaError::not_found("segment file", path, e))?;
        let input = ffmpeg::format::input(path).map_err(|e| {
            MediaError::invalid(format!(
                "segment {index} ({}) is not a readable segment file ({e}); it may be corrupt \
                 or truncated",
                path.display()
            ))
        })?;
        let (stream, time_base, signature) = {
            let vs = input
                .streams()
                .find(|s| s.parameters().medium() == media::Type::Video)
                .ok_or_else(|| {
                    MediaError::invalid(format!(
                        "segment {index} ({}) has no video stream",
                        path.display()
                    ))
                })?;
            (vs.index(), vs.time_base(), signature(&vs))
        };
        if time_base.numerator() <= 0 || time_base.denominator() <= 0 {
            return Err(MediaError::invalid(format!(
                "segment {index} ({}) has no usable time base",
                path.display()
            )));
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
        Err(MediaError::invalid(format!(
            "segment {} ({}) does not match segment 0: {what}; all segments of a render must \
             be encoded with the same settings",
            self.index,
            self.path.display()
        )))
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
                    return Err(MediaError::invalid(format!(
                        "segment {} ({}) is corrupt or truncated: {e}",
                        self.index,
                        self.path.display()
                    )));
                }
            }
        }
        let Some(pts) = pkt.pts() else {
            return Err(MediaError::invalid(format!(
                "segment {} ({}) has a packet without a timestamp",
                self.index,
                self.path.display()
            )));
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
}

/// Checks the seam between `before` (read to its end) and `after` (whose first packet was
/// read): `after` starts where `before` ends, within half a frame; an overlap is a repeated
/// frame, a gap a missing one (a truncated or wrong segment).
pub(crate) fn check_seam(before: &SegmentReader, after: &SegmentReader) -> Result<(), MediaError> {
    let (Some(end), Some(first)) = (before.end_pts(), before.first_pts) else {
        return Err(MediaError::invalid(format!(
            "segment {} ({}) holds no frame",
            before.index,
            before.path.display()
        )));
    };
    let Some(next) = after.first_pts else {
        return Ok(());
    };
    let tb = before.time_base;
    let next = rescale(next, after.time_base, tb);
    let frame = ((end - first) / before.packets.max(1) as i64).max(1);
    if (next - end).abs() * 2 > frame {
        return Err(MediaError::invalid(format!(
            "segments {} and {} do not join: one ends at {:.3} s, the next starts at {:.3} s \
             (a segment is missing, truncated, repeated or out of order)",
            before.index,
            after.index,
            end as f64 * f64::from(tb),
            next as f64 * f64::from(tb)
        )));
    }
    Ok(())
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
