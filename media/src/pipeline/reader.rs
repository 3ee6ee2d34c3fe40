//! Reading a source: demuxing, decoding (with the NVDEC download, unless frames stay on the
//! GPU for the zero-copy path), and how far into the source the frames and packets read so
//! far reach.

use std::time::{Duration, Instant};

use ffmpeg::format::context::Input;
use ffmpeg::{Packet, decoder, frame};
use ffmpeg_next as ffmpeg;

use crate::error::MediaError;
use crate::ffutil::is_eagain;
use crate::source::Source;

/// Give up on input that yields this many consecutive unreadable packets / frames.
const MAX_CONSECUTIVE_ERRORS: u32 = 500;

pub(crate) enum Item {
    Video(frame::Video),
    Audio(Packet),
}

/// How far into the source the render got, in seconds of the source's timestamps.
///
/// A declared duration counts from timestamp 0 in some containers (Matroska's segment
/// duration) and from the first timestamp in others (FFmpeg's own end - start): lengths are
/// measured from the earlier of 0 and the container's start time, so that neither reads a
/// complete file as short.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct DecodedExtent {
    /// Latest end (presentation time + duration) of a decoded video frame.
    pub video_end: Option<f64>,
    /// Latest end of a demuxed packet of the source's audio stream (read even when the
    /// output drops the audio).
    pub audio_end: Option<f64>,
    /// The container's start time when it is negative, else 0.
    pub origin: f64,
}

impl DecodedExtent {
    /// Seconds of video decoded: to the end of the last frame.
    pub fn video_seconds(&self) -> Option<f64> {
        Some(self.video_end? - self.origin)
    }

    /// Seconds of the container covered: to the end of the last video frame or audio packet.
    pub fn container_seconds(&self) -> Option<f64> {
        let end = match (self.video_end, self.audio_end) {
            (Some(v), Some(a)) => v.max(a),
            (v, a) => v.or(a)?,
        };
        Some(end - self.origin)
    }
}

/// Converts stream timestamps to seconds.
struct Timeline {
    video_tb: f64,
    /// A video frame's duration when it carries none (one frame at the average rate).
    default_video_duration: f64,
    audio_index: Option<usize>,
    audio_tb: f64,
}

impl Timeline {
    fn new(src: &Source) -> Self {
        Timeline {
            video_tb: f64::from(src.video.time_base),
            default_video_duration: if src.video.avg_fps > 0.0 {
                1.0 / src.video.avg_fps
            } else {
                0.0
            },
            audio_index: src.audio.as_ref().map(|a| a.index),
            audio_tb: src
                .audio
                .as_ref()
                .map(|a| f64::from(a.time_base))
                .unwrap_or(0.0),
        }
    }
}

fn extend_max(slot: &mut Option<f64>, v: f64) {
    if v.is_finite() {
        *slot = Some(slot.map_or(v, |s| s.max(v)));
    }
}

/// Pulls decoded video frames (and raw audio packets of the chosen stream) from an input.
pub(crate) struct FrameReader {
    input: Input,
    decoder: decoder::Video,
    video_index: usize,
    audio_index: Option<usize>,
    timeline: Timeline,
    extent: DecodedExtent,
    eof_sent: bool,
    frames: u64,
    errors: u32,
    last_error: Option<String>,
    label: String,
    /// Only frames whose pts lies in [start, end) come out (a segment's span); `None`: no bound.
    window: (Option<i64>, Option<i64>),
    /// A frame at or past the window's end was decoded: nothing more comes out.
    window_closed: bool,
    /// NVDEC frames come out as they are (CUDA surfaces) instead of downloaded.
    keep_on_gpu: bool,
    /// Time spent downloading NVDEC frames.
    download: Duration,
}

impl FrameReader {
    pub fn new(src: Source, decoder: decoder::Video, with_audio: bool) -> Self {
        FrameReader {
            timeline: Timeline::new(&src),
            extent: DecodedExtent {
                origin: (src.start_time_us as f64 / ffmpeg::ffi::AV_TIME_BASE as f64).min(0.0),
                ..Default::default()
            },
            video_index: src.video.index,
            audio_index: if with_audio {
                src.audio.as_ref().map(|a| a.index)
            } else {
                None
            },
            label: src.path.display().to_string(),
            input: src.input,
            decoder,
            eof_sent: false,
            frames: 0,
            errors: 0,
            last_error: None,
            window: (None, None),
            window_closed: false,
            keep_on_gpu: false,
            download: Duration::ZERO,
        }
    }

    /// NVDEC frames come out as CUDA surfaces (for the zero-copy compositor) instead of
    /// downloaded to system memory.
    pub fn keep_on_gpu(&mut self, keep: bool) {
        self.keep_on_gpu = keep;
    }

    /// Time spent so far downloading NVDEC frames to system memory.
    pub fn download_time(&self) -> Duration {
        self.download
    }

    /// Restricts the frames that come out to those whose pts (source stream time base) lies in
    /// [`start`, `end`): earlier ones are dropped (the leading pictures of an open GOP belong
    /// to the segment before), and the input ends once a frame at or past `end` is decoded
    /// (the decoder's output is in pts order). Frames without a pts pass.
    pub fn set_window(&mut self, start: Option<i64>, end: Option<i64>) {
        self.window = (start, end);
    }

    /// Whether decoded frame `f` falls before the window (`Some(false)`), in it (`Some(true)`),
    /// or at or past its end (`None`).
    fn in_window(&self, f: &frame::Video) -> Option<bool> {
        let Some(pts) = f.timestamp() else {
            return Some(true);
        };
        match self.window {
            (_, Some(end)) if pts >= end => None,
            (Some(start), _) if pts < start => Some(false),
            _ => Some(true),
        }
    }

    /// How far the frames and packets read so far reach.
    pub fn extent(&self) -> DecodedExtent {
        self.extent
    }

    fn note_video_frame(&mut self, f: &frame::Video) {
        let (Some(pts), dur) = frame_timing(f) else {
            return;
        };
        let tl = &self.timeline;
        let start = pts as f64 * tl.video_tb;
        let dur = if dur > 0 {
            dur as f64 * tl.video_tb
        } else {
            tl.default_video_duration
        };
        extend_max(&mut self.extent.video_end, start + dur);
    }

    fn note_packet(&mut self, pkt: &Packet) {
        let tl = &self.timeline;
        if tl.audio_index != Some(pkt.stream()) {
            return;
        }
        if let Some(ts) = pkt.pts().or(pkt.dts()) {
            let end = (ts + pkt.duration().max(0)) as f64 * tl.audio_tb;
            extend_max(&mut self.extent.audio_end, end);
        }
    }

    pub fn input_mut(&mut self) -> &mut Input {
        &mut self.input
    }

    /// Restarts decoding after a seek.
    pub fn reset_after_seek(&mut self) {
        self.decoder.flush();
        self.eof_sent = false;
    }

    fn note_error(&mut self, what: &str, e: ffmpeg::Error) -> Result<(), MediaError> {
        self.errors += 1;
        self.last_error = Some(format!("{what}: {e}"));
        if self.errors >= MAX_CONSECUTIVE_ERRORS {
            return Err(MediaError::invalid(format!(
                "{} is corrupt: {} consecutive unreadable packets (last: {what}: {e})",
                self.label, self.errors
            )));
        }
        Ok(())
    }

    /// The next decoded video frame or audio packet; `None` at the end of the input.
    pub fn next_item(&mut self) -> Result<Option<Item>, MediaError> {
        if self.window_closed {
            return Ok(None);
        }
        loop {
            let mut f = frame::Video::empty();
            match self.decoder.receive_frame(&mut f) {
                Ok(()) => {
                    self.frames += 1;
                    self.errors = 0;
                    match self.in_window(&f) {
                        Some(true) => {}
                        Some(false) => continue,
                        None => {
                            self.window_closed = true;
                            return Ok(None);
                        }
                    }
                    self.note_video_frame(&f);
                    if self.keep_on_gpu {
                        return Ok(Some(Item::Video(f)));
                    }
                    // NVDEC surfaces come to system memory here (NV12 / P010).
                    let t = Instant::now();
                    let f = crate::hwdecode::download(f)?;
                    self.download += t.elapsed();
                    return Ok(Some(Item::Video(f)));
                }
                Err(ffmpeg::Error::Eof) => return self.finish(),
                Err(e) if is_eagain(&e) => {}
                Err(e) => {
                    self.note_error("decoding", e)?;
                    continue;
                }
            }
            if self.eof_sent {
                // Drained (a decoder that errors after EOF is done too).
                return self.finish();
            }
            let mut pkt = Packet::empty();
            match pkt.read(&mut self.input) {
                Ok(()) => {
                    self.note_packet(&pkt);
                    let idx = pkt.stream();
                    if idx == self.video_index {
                        match self.decoder.send_packet(&pkt) {
                            Ok(()) => {}
                            Err(e) if is_eagain(&e) => {
                                // Cannot happen after draining; treat like a lost packet.
                                self.note_error("decoder busy", e)?;
                            }
                            Err(ffmpeg::Error::Eof) => {}
                            Err(e) => self.note_error("decoding", e)?,
                        }
                    } else if Some(idx) == self.audio_index {
                        return Ok(Some(Item::Audio(pkt)));
                    }
                }
                Err(ffmpeg::Error::Eof) => {
                    self.send_eof();
                }
                Err(ffmpeg::Error::InvalidData) => {
                    self.note_error("reading", ffmpeg::Error::InvalidData)?;
                }
                Err(e) => {
                    // I/O errors latch in FFmpeg: stop reading. What was decoded is kept.
                    tracing::warn!("{}: read error, ending input early: {e}", self.label);
                    self.last_error = Some(format!("reading: {e}"));
                    self.send_eof();
                }
            }
        }
    }

    fn send_eof(&mut self) {
        if !self.eof_sent {
            let _ = self.decoder.send_eof();
            self.eof_sent = true;
        }
    }

    fn finish(&mut self) -> Result<Option<Item>, MediaError> {
        if self.frames == 0 {
            let detail = self
                .last_error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default();
            return Err(MediaError::invalid(format!(
                "no video frame could be decoded from {}: the file is corrupt or truncated{detail}",
                self.label
            )));
        }
        Ok(None)
    }

    /// Next video frame, skipping audio.
    pub fn next_video(&mut self) -> Result<Option<frame::Video>, MediaError> {
        loop {
            match self.next_item()? {
                Some(Item::Video(f)) => return Ok(Some(f)),
                Some(Item::Audio(_)) => {}
                None => return Ok(None),
            }
        }
    }
}

/// Presentation timestamp and duration (source stream time base) of a decoded frame.
pub(crate) fn frame_timing(f: &frame::Video) -> (Option<i64>, i64) {
    // SAFETY: plain field read (pkt_duration exists in FFmpeg 5.x).
    let dur = unsafe { (*f.as_ptr()).pkt_duration };
    (f.timestamp(), dur.max(0))
}
