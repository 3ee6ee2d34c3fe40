//! The join: the segment files' video packets remuxed in order into the final output (never
//! re-encoded; dts made strictly increasing at the seams), and the source's audio carried once
//! over the whole length exactly as a single pass carries it, interleaved in time order.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use ffmpeg::format::context::Output;
use ffmpeg::{Packet, Rational, codec, encoder, ffi};
use ffmpeg_next as ffmpeg;

use super::SegmentFile;
use super::remux::{DtsFix, SegmentReader, check_seam, check_start};
use crate::audio_out::AudioOut;
use crate::engine::spec::compose_spec;
use crate::engine::{Engine, check_complete, output_facts};
use crate::error::MediaError;
use crate::ffutil::rescale;
use crate::hdr_out::HdrOutput;
use crate::muxer::{create_output, write_header};
use crate::source::{self, Source};
use crate::tempout::TempOutput;
use crate::types::{OutputFormat, Progress, RenderJob, RenderReport, Stage, StageTimes};
use crate::video_out::{EncoderClock, color_tags, tag_hdr_stream, video_encoder_name};

/// Progress is reported every this many video packets.
const PROGRESS_EVERY: u64 = 25;

/// The output file of a join and where its streams are.
struct JoinOutput {
    octx: Output,
    video: usize,
    video_tb: Rational,
    audio: Option<AudioOut>,
}

impl Engine {
    /// Joins the segment files, in order, into `job.output` (atomically): video packets
    /// remuxed with their timestamps (dts fixed at the seams), never re-encoded; audio from
    /// `job.input` copied or transcoded once over the whole length, as [`Engine::render`]
    /// does; video and audio interleaved in time order with bounded memory. Each segment must
    /// start where its span does and hold its span's frames; the frame count is checked
    /// against what the source declares, like a render. A segment that does not fit is
    /// `RenderFailed`, naming it.
    pub fn join_segments(
        &self,
        job: &RenderJob,
        segments: &[SegmentFile],
        progress: &mut dyn FnMut(Progress),
        cancel: &AtomicBool,
    ) -> Result<RenderReport, MediaError> {
        let started = Instant::now();
        progress(Progress {
            stage: Stage::Preparing,
            frames_done: 0,
            frames_total: None,
        });
        let (first, size) = check_segments(segments)?;
        let tmp = TempOutput::new(&job.output)?;
        let mut src = source::open(&job.input)?;
        // The size and light only: the watermark is in the segments already.
        let bare = RenderJob {
            watermark: None,
            ..job.clone()
        };
        let spec = compose_spec(&bare, &src, true)?;
        if size != (spec.out_width, spec.out_height) {
            return Err(MediaError::invalid(format!(
                "the segments are {}x{}, but {} renders at {}x{}: they belong to another job",
                size.0,
                size.1,
                job.input.display(),
                spec.out_width,
                spec.out_height
            )));
        }
        let hdr = spec
            .light
            .kept_signal()
            .map(|signal| HdrOutput::new(*signal, &src.video.declared_color));
        let mut out = open_output(tmp.path(), job, &first, &src, hdr.as_ref())?;
        let frames_total = src.video.frames_estimate;
        progress(Progress {
            stage: Stage::Rendering,
            frames_done: 0,
            frames_total,
        });
        let mut report = |frames_done| {
            progress(Progress {
                stage: Stage::Rendering,
                frames_done,
                frames_total,
            })
        };
        let clock = EncoderClock::of(&src);
        let (frames, video_seconds) = merge(
            &mut out,
            VideoFeed::new(first, segments, clock),
            &mut src,
            cancel,
            &mut report,
        )?;
        check_complete(frames, src.video.frames_declared)?;
        progress(Progress {
            stage: Stage::Finalizing,
            frames_done: frames,
            frames_total,
        });
        finish(out)?;
        tmp.commit()?;
        let (size_bytes, duration_seconds) = output_facts(&job.output, video_seconds);
        let elapsed = started.elapsed();
        let fps = frames as f64 / elapsed.as_secs_f64().max(1e-9);
        tracing::info!(
            output = %job.output.display(),
            segments = segments.len(),
            frames,
            size_bytes,
            elapsed_ms = elapsed.as_millis() as u64,
            "segments joined"
        );
        Ok(RenderReport {
            frames,
            duration_seconds,
            width: size.0,
            height: size.1,
            size_bytes,
            backend: "remux".to_string(),
            decoder: "none".to_string(),
            encoder: video_encoder_name(job.format, self.h264_encoder(), &spec.light).to_string(),
            elapsed,
            fps,
            stage_times: StageTimes::default(),
            quality: None,
        })
    }
}

/// Opens every segment once: all must exist, be readable and match the first. Returns the
/// first one, open, and its picture size.
fn check_segments(segments: &[SegmentFile]) -> Result<(SegmentReader, (u32, u32)), MediaError> {
    let Some(file) = segments.first() else {
        return Err(MediaError::failed("there are no segments to join"));
    };
    let ends = segments.iter().map(|f| f.span.end_pts);
    let starts = segments.iter().map(|f| f.span.start_pts);
    // Span k starts where span k - 1 ends: the first from the start, the last to the end.
    let mut tiled = std::iter::once(None)
        .chain(ends)
        .zip(starts.chain(std::iter::once(None)));
    if let Some(k) = tiled.position(|(end, start)| end != start) {
        return Err(MediaError::failed(format!(
            "the segments' spans do not cover the source once, in order (at segment {k}): a \
             segment is missing, repeated or out of order"
        )));
    }
    let first = SegmentReader::open(&file.path, 0)?;
    for (i, file) in segments.iter().enumerate().skip(1) {
        SegmentReader::open(&file.path, i)?.check_matches(&first.signature)?;
    }
    let s = &first.signature;
    let size = (s.width.max(0) as u32, s.height.max(0) as u32);
    Ok((first, size))
}

/// Creates the output with a video stream taking segment 0's codec parameters (tagged as a
/// render tags its stream) and the source's audio, and writes the header.
fn open_output(
    path: &Path,
    job: &RenderJob,
    first: &SegmentReader,
    src: &Source,
    hdr: Option<&HdrOutput>,
) -> Result<JoinOutput, MediaError> {
    let format = job.format;
    let (mut octx, global_header) = create_output(path, format.muxer())?;
    let params = first
        .input
        .stream(first.stream)
        .ok_or_else(|| MediaError::failed("the segment's video stream vanished"))?
        .parameters();
    let video = {
        let mut ost = octx
            .add_stream(encoder::find(codec::Id::None))
            .map_err(|e| MediaError::ffmpeg("adding the video stream", e))?;
        ost.set_parameters(params);
        ost.set_time_base(first.time_base);
        if let Some(fps) = Some(src.video.avg_fps).filter(|f| *f > 0.0) {
            ost.set_avg_frame_rate(Rational::from(fps).reduce());
        }
        let (space, primaries, transfer) = color_tags(hdr);
        // SAFETY: the stream was just added to `octx`, whose header is not written; plain
        // field writes on its codec parameters.
        unsafe {
            let par = (*ost.as_mut_ptr()).codecpar;
            // The segment container's tag may not be valid here; 0 lets the muxer choose.
            (*par).codec_tag = 0;
            (*par).color_range = ffmpeg::color::Range::MPEG.into();
            (*par).color_space = space.into();
            (*par).color_primaries = primaries.into();
            (*par).color_trc = transfer.into();
            (*par).sample_aspect_ratio = ffi::AVRational { num: 1, den: 1 };
            tag_hdr_stream(ost.as_mut_ptr(), format, hdr)?;
        }
        ost.index()
    };
    let mut audio = AudioOut::open(&mut octx, format, &job.encoder, global_header, src)?;
    write_header(&mut octx, format != OutputFormat::Webm)?;
    if let Some(a) = audio.as_mut() {
        a.adopt_time_base(&octx);
    }
    let video_tb = octx
        .stream(video)
        .map(|s| s.time_base())
        .unwrap_or(first.time_base);
    Ok(JoinOutput {
        octx,
        video,
        video_tb,
        audio,
    })
}

/// The segments' video packets in order, in the output's time base, dts fixed; each segment
/// checked against its span.
struct VideoFeed<'a> {
    current: SegmentReader,
    segments: &'a [SegmentFile],
    /// Where a span's start lands in a segment file (the encoder's time base).
    clock: EncoderClock,
    fix: DtsFix,
    frames: u64,
    /// The first segment's first pts and the last one's end so far, in seconds.
    start: Option<f64>,
    end: f64,
}

impl<'a> VideoFeed<'a> {
    fn new(first: SegmentReader, segments: &'a [SegmentFile], clock: EncoderClock) -> Self {
        VideoFeed {
            current: first,
            segments,
            clock,
            fix: DtsFix::default(),
            frames: 0,
            start: None,
            end: 0.0,
        }
    }

    fn next(&mut self, out_tb: Rational) -> Result<Option<Packet>, MediaError> {
        // One pass per segment at most: each turn reads a packet or moves to the next file.
        for _ in 0..=self.segments.len() {
            if let Some(pkt) = self.current.next()? {
                return self.hand_out(pkt, out_tb).map(Some);
            }
            let index = self.current.index;
            self.current
                .check_frames(self.segments[index].span.frames)?;
            let Some(file) = self.segments.get(index + 1) else {
                return Ok(None);
            };
            let mut after = SegmentReader::open(&file.path, index + 1)?;
            after.check_matches(&self.current.signature)?;
            let first = after.next()?;
            let planned = self.planned_start(index + 1, after.time_base).unwrap_or(0);
            check_seam(&self.current, &after, planned)?;
            tracing::debug!(
                segment = index,
                frames = self.current.packets,
                "segment joined"
            );
            self.current = after;
            if let Some(pkt) = first {
                return self.hand_out(pkt, out_tb).map(Some);
            }
        }
        Ok(None)
    }

    /// Where segment `index`'s span starts, in time base `tb` (`None`: from the start).
    fn planned_start(&self, index: usize, tb: Rational) -> Option<i64> {
        let start = self.segments.get(index)?.span.start_pts?;
        Some(rescale(self.clock.pts(start), self.clock.enc_tb, tb))
    }

    /// `pkt` of the current segment, in the output's time base with its dts fixed.
    fn hand_out(&mut self, mut pkt: Packet, out_tb: Rational) -> Result<Packet, MediaError> {
        let tb = f64::from(self.current.time_base);
        if self.start.is_none() {
            // The first segment is checked against its span too (the seams check the rest).
            if let (Some(planned), Some(first)) = (
                self.planned_start(self.current.index, self.current.time_base),
                self.current.first_pts,
            ) {
                check_start(&self.current, first, planned)?;
            }
            self.start = self.current.first_pts.map(|p| p as f64 * tb);
        }
        self.end = self.current.end_pts().unwrap_or(0) as f64 * tb;
        pkt.rescale_ts(self.current.time_base, out_tb);
        self.fix.apply(&mut pkt)?;
        self.frames += 1;
        Ok(pkt)
    }
}

/// The source's audio packets in file order (its video is not read).
struct AudioFeed<'a> {
    src: &'a mut Source,
    index: usize,
    tb: f64,
    /// The container's start, subtracted from every timestamp (as the output does).
    offset: f64,
    done: bool,
}

impl<'a> AudioFeed<'a> {
    fn new(src: &'a mut Source, wanted: bool) -> Self {
        let audio = src.audio.as_ref().filter(|_| wanted).map(|a| a.index);
        for mut s in src.input.streams_mut() {
            if Some(s.index()) != audio {
                // SAFETY: setting the discard flag on a valid stream.
                unsafe { (*s.as_mut_ptr()).discard = ffi::AVDiscard::AVDISCARD_ALL };
            }
        }
        AudioFeed {
            index: audio.unwrap_or(usize::MAX),
            tb: src.audio.as_ref().map_or(0.0, |a| f64::from(a.time_base)),
            offset: src.start_time_us as f64 / f64::from(ffi::AV_TIME_BASE),
            done: audio.is_none(),
            src,
        }
    }

    /// The next audio packet and its time in seconds; `None` at the end (or on a read error,
    /// like a render: the sound read so far is kept).
    fn next(&mut self) -> Option<(Packet, f64)> {
        let mut errors = 0u32;
        while !self.done {
            let mut pkt = Packet::empty();
            match pkt.read(&mut self.src.input) {
                Ok(()) if pkt.stream() == self.index => {
                    let t = pkt
                        .dts()
                        .or(pkt.pts())
                        .map_or(f64::NEG_INFINITY, |ts| ts as f64 * self.tb - self.offset);
                    return Some((pkt, t));
                }
                Ok(()) => {}
                Err(ffmpeg::Error::InvalidData) if errors < 500 => errors += 1,
                Err(ffmpeg::Error::Eof) => self.done = true,
                Err(e) => {
                    tracing::warn!("{}: audio read error: {e}", self.src.path.display());
                    self.done = true;
                }
            }
        }
        None
    }
}

/// Writes the video of `first` and the other segments, and the source's audio, in time
/// order. Returns the frames written and the video's length in seconds.
fn merge(
    out: &mut JoinOutput,
    mut video: VideoFeed<'_>,
    src: &mut Source,
    cancel: &AtomicBool,
    report: &mut dyn FnMut(u64),
) -> Result<(u64, f64), MediaError> {
    let mut audio = AudioFeed::new(src, out.audio.is_some());
    let secs = |p: &Packet| p.dts().unwrap_or(0) as f64 * f64::from(out.video_tb);
    let mut v = video.next(out.video_tb)?;
    let mut a = audio.next();
    loop {
        if cancel.load(Ordering::Relaxed) {
            return Err(MediaError::Cancelled);
        }
        let audio_first = match (&v, &a) {
            (None, None) => break,
            (Some(vp), Some((_, at))) => *at <= secs(vp),
            (None, Some(_)) => true,
            (Some(_), None) => false,
        };
        if audio_first {
            if let (Some((pkt, _)), Some(ao)) = (a.take(), out.audio.as_mut()) {
                ao.write(pkt, &mut out.octx)?;
            }
            a = audio.next();
        } else if let Some(mut pkt) = v.take() {
            pkt.set_stream(out.video);
            pkt.set_position(-1);
            pkt.write_interleaved(&mut out.octx)
                .map_err(|e| MediaError::ffmpeg("writing video to the output", e))?;
            if video.frames.is_multiple_of(PROGRESS_EVERY) {
                report(video.frames);
            }
            v = video.next(out.video_tb)?;
        }
    }
    let seconds = video.end - video.start.unwrap_or(0.0);
    Ok((video.frames, seconds))
}

/// Flushes the audio and writes the trailer (the faststart rewrite happens here).
fn finish(mut out: JoinOutput) -> Result<(), MediaError> {
    if let Some(a) = out.audio.as_mut() {
        a.finish(&mut out.octx)?;
    }
    out.octx
        .write_trailer()
        .map_err(|e| MediaError::ffmpeg("finishing the output file", e))
}
