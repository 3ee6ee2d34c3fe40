//! The video side of the output: the H.264 (libx264 or NVENC) or VP9 (libvpx-vp9) encoder,
//! or for HDR kept 10-bit HEVC (libx265) or VP9 profile 2, the timestamps of the frames it
//! gets, and its packets into the muxer.

use std::collections::BTreeMap;

use crossbeam_channel::Sender;
use ffmpeg::format::Pixel;
use ffmpeg::format::context::Output;
use ffmpeg::{Dictionary, Packet, Rational, codec, encoder, frame};
use ffmpeg_next as ffmpeg;
use vidforge_gpu::{OutputLight, SampleDepth, Yuv420Frame};

use crate::error::MediaError;
use crate::ffutil::{is_eagain, rescale};
use crate::hardware::H264Encoder;
use crate::hdr_out::{HDR_OUTPUT_FORMAT, HEVC_ENCODER, HdrOutput};
use crate::lend::{copy_frame, lend_frame};
use crate::quality::QualityTally;
use crate::quality::meter::Meter;
use crate::source::Source;
use crate::types::{EncoderSettings, OutputFormat};

/// The WebM video encoder.
pub(crate) const VP9_ENCODER: &str = "libvpx-vp9";

/// What the output file asks of its encoders.
pub(crate) struct OutputParams<'a> {
    pub format: OutputFormat,
    pub settings: &'a EncoderSettings,
    pub h264: H264Encoder,
    /// The composed frames' size.
    pub out_w: u32,
    pub out_h: u32,
    /// The container wants codec headers out of band.
    pub global_header: bool,
    /// HDR kept: 10-bit frames in this colour, its metadata carried over.
    pub hdr: Option<HdrOutput>,
    /// Measure the output's quality against the frames given (see [`crate::quality`]).
    pub measure_quality: bool,
}

/// The video encoder's name for `format` in the output's `light`: H.264 through `h264`, HEVC
/// when HDR is kept.
pub(crate) fn video_encoder_name(
    format: OutputFormat,
    h264: H264Encoder,
    light: &OutputLight,
) -> &'static str {
    let kept = light.kept_signal().is_some();
    match format {
        OutputFormat::Mp4 | OutputFormat::Mov if kept => HEVC_ENCODER,
        OutputFormat::Mp4 | OutputFormat::Mov => h264.ffmpeg_name(),
        OutputFormat::Webm => VP9_ENCODER,
    }
}

/// The video encoder's FFmpeg name and options for `format`.
fn video_codec_options(p: &OutputParams<'_>) -> (&'static str, Dictionary<'static>) {
    let settings = p.settings;
    match p.format {
        OutputFormat::Mp4 | OutputFormat::Mov => match &p.hdr {
            // HEVC Main10 with x264's speed preset and quality (the same names and scale).
            Some(hdr) => {
                let mut d = Dictionary::new();
                d.set("preset", &settings.h264_preset);
                d.set("crf", &settings.h264_crf.min(51).to_string());
                d.set("x265-params", &hdr.x265_params());
                (HEVC_ENCODER, d)
            }
            None => (p.h264.ffmpeg_name(), p.h264.options(settings)),
        },
        OutputFormat::Webm => {
            let mut d = Dictionary::new();
            d.set("deadline", &settings.vp9_deadline);
            d.set("cpu-used", &settings.vp9_cpu_used.min(8).to_string());
            d.set("row-mt", "1");
            d.set("crf", &settings.vp9_crf.min(63).to_string());
            (VP9_ENCODER, d)
        }
    }
}

/// The colour tags (matrix, primaries, transfer) of the output's video: BT.709 for SDR, the
/// kept signal's for HDR. Limited range either way.
pub(crate) fn color_tags(
    hdr: Option<&HdrOutput>,
) -> (
    ffmpeg::color::Space,
    ffmpeg::color::Primaries,
    ffmpeg::color::TransferCharacteristic,
) {
    match hdr {
        Some(hdr) => (hdr.matrix(), hdr.primaries(), hdr.transfer()),
        None => (
            ffmpeg::color::Space::BT709,
            ffmpeg::color::Primaries::BT709,
            ffmpeg::color::TransferCharacteristic::BT709,
        ),
    }
}

/// For kept HDR: the mastering display and content light metadata on the output stream, and
/// in mp4/mov the `hvc1` tag (parameter sets in the sample entry), which Apple's players
/// require, rather than the muxer's default `hev1`. Nothing for SDR.
///
/// # Safety
///
/// `ost` must be a valid stream of an output context whose header is not written yet.
pub(crate) unsafe fn tag_hdr_stream(
    ost: *mut ffmpeg::ffi::AVStream,
    format: OutputFormat,
    hdr: Option<&HdrOutput>,
) -> Result<(), MediaError> {
    let Some(hdr) = hdr else { return Ok(()) };
    // SAFETY: per the function's contract.
    unsafe {
        hdr.add_stream_side_data(ost)?;
        if format != OutputFormat::Webm {
            (*(*ost).codecpar).codec_tag = u32::from_le_bytes(*b"hvc1");
        }
    }
    Ok(())
}

/// Where a source frame's pts lands in the encoder's time base: the source's start offset
/// taken off, rescaled (exactly, unless the source's time base is unusable). A render and a
/// join of segments (which checks each segment starts where its plan says) share it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EncoderClock {
    /// Source stream time base (frames arrive in it) and the encoder's.
    pub ist_tb: Rational,
    pub enc_tb: Rational,
    offset: i64,
}

impl EncoderClock {
    pub fn of(src: &Source) -> EncoderClock {
        let ist_tb = src.video.time_base;
        EncoderClock {
            ist_tb,
            enc_tb: video_timing(ist_tb, src.video.avg_fps).0,
            offset: src.start_offset(ist_tb),
        }
    }

    /// `pts` (source stream time base) in the encoder's time base.
    pub fn pts(&self, pts: i64) -> i64 {
        rescale(pts - self.offset, self.ist_tb, self.enc_tb)
    }
}

/// The encoder's time base and frame rate for a source stream with time base `ist_tb`.
fn video_timing(ist_tb: Rational, avg_fps: f64) -> (Rational, Rational) {
    // Keep source timestamps exact: the encoder runs in the source stream's time base
    // unless that is unusable.
    let enc_tb = if ist_tb.numerator() > 0 && ist_tb.denominator() > 0 {
        ist_tb
    } else {
        Rational::new(1, 90_000)
    };
    let fps = if avg_fps > 0.0 {
        Rational::from(avg_fps).reduce()
    } else {
        Rational::new(30, 1)
    };
    (enc_tb, fps)
}

/// Opens the video encoder (`codec_name` with `opts`) at time base `enc_tb` and `fps`.
fn open_video_encoder(
    p: &OutputParams<'_>,
    codec: ffmpeg::Codec,
    codec_name: &str,
    opts: Dictionary<'static>,
    (enc_tb, fps): (Rational, Rational),
) -> Result<encoder::video::Encoder, MediaError> {
    let mut ctx = codec::context::Context::new_with_codec(codec);
    // SAFETY: plain field write on an unopened context.
    unsafe {
        (*ctx.as_mut_ptr()).thread_count = p.settings.threads.min(64) as i32;
    }
    let mut enc = ctx
        .encoder()
        .video()
        .map_err(|e| MediaError::ffmpeg("creating the video encoder", e))?;
    enc.set_width(p.out_w);
    enc.set_height(p.out_h);
    enc.set_time_base(enc_tb);
    enc.set_frame_rate(Some(fps));
    enc.set_aspect_ratio(Rational::new(1, 1));
    enc.set_color_range(ffmpeg::color::Range::MPEG);
    // libvpx-vp9 picks profile 2 from the 10-bit format.
    enc.set_format(match p.hdr {
        Some(_) => HDR_OUTPUT_FORMAT,
        None => Pixel::YUV420P,
    });
    let (space, primaries, transfer) = color_tags(p.hdr.as_ref());
    enc.set_colorspace(space);
    enc.set_color_primaries(primaries);
    enc.set_color_transfer_characteristic(transfer);
    if p.format == OutputFormat::Webm || p.h264 == H264Encoder::Nvenc {
        // Constant quality: a zero target bitrate with crf / cq.
        enc.set_bit_rate(0);
    }
    if p.global_header {
        enc.set_flags(codec::Flags::GLOBAL_HEADER);
    }
    enc.open_as_with(codec, opts)
        .map_err(|e| MediaError::ffmpeg(&format!("opening {codec_name}"), e))
}

/// The video encoder and its output stream.
pub(crate) struct VideoOut {
    enc: encoder::video::Encoder,
    ost: usize,
    ost_tb: Rational,
    clock: EncoderClock,
    width: u32,
    height: u32,
    /// The sample depth the encoder takes (10-bit when HDR is kept).
    depth: SampleDepth,
    /// Encoder frame for composed frames that cannot be lent in place; allocated on first use.
    frame: Option<frame::Video>,
    packet: Packet,
    last_pts: Option<i64>,
    first_pts: Option<i64>,
    end_pts: i64,
    default_duration: i64,
    /// pts -> duration of frames inside the encoder, to stamp packet durations.
    durations: BTreeMap<i64, i64>,
    /// Decodes the packets again and compares (when measuring quality).
    meter: Option<Meter>,
}

impl VideoOut {
    /// Opens the video encoder and adds the video stream to `octx`.
    pub fn open(octx: &mut Output, p: &OutputParams<'_>, src: &Source) -> Result<Self, MediaError> {
        let (codec_name, opts) = video_codec_options(p);
        let codec = encoder::find_by_name(codec_name).ok_or_else(|| {
            MediaError::failed(format!(
                "encoder {codec_name} is not available in this FFmpeg build"
            ))
        })?;
        let clock = EncoderClock::of(src);
        let (enc_tb, fps) = video_timing(clock.ist_tb, src.video.avg_fps);
        let venc = open_video_encoder(p, codec, codec_name, opts, (enc_tb, fps))?;
        let vost = {
            let mut ost = octx
                .add_stream(codec)
                .map_err(|e| MediaError::ffmpeg("adding the video stream", e))?;
            ost.set_parameters(&venc);
            ost.set_time_base(enc_tb);
            ost.set_avg_frame_rate(fps);
            // SAFETY: the stream was just added to `octx`, whose header is not written.
            unsafe { tag_hdr_stream(ost.as_mut_ptr(), p.format, p.hdr.as_ref())? };
            ost.index()
        };
        let depth = if p.hdr.is_some() {
            SampleDepth::Ten
        } else {
            SampleDepth::Eight
        };
        let meter = p
            .measure_quality
            .then(|| Meter::start(&venc, (p.out_w, p.out_h), depth, enc_tb))
            .flatten();
        Ok(VideoOut {
            enc: venc,
            ost: vost,
            // Until the header is written: the muxer may choose another.
            ost_tb: enc_tb,
            clock,
            width: p.out_w,
            height: p.out_h,
            depth,
            frame: None,
            packet: Packet::empty(),
            last_pts: None,
            first_pts: None,
            end_pts: 0,
            default_duration: rescale(1, fps.invert(), enc_tb).max(1),
            durations: BTreeMap::new(),
            meter,
        })
    }

    /// Takes the output stream's time base as the muxer set it when writing the header.
    pub fn adopt_stream_time_base(&mut self, octx: &Output) {
        self.ost_tb = octx
            .stream(self.ost)
            .map(|s| s.time_base())
            .unwrap_or(self.clock.enc_tb);
    }

    /// Sends one composed frame to the encoder. `pts`/`duration` are in the source stream's
    /// time base.
    ///
    /// The encoder reads `img`'s planes in place when their strides suit it (no copy); the
    /// frame goes back through `home` (to be reused by the compositor) once FFmpeg drops its
    /// last reference, which for libx264/libvpx is inside the encode call.
    pub fn send(
        &mut self,
        img: Yuv420Frame,
        pts: Option<i64>,
        duration: i64,
        home: Option<&Sender<Yuv420Frame>>,
    ) -> Result<(), MediaError> {
        let v = self;
        if img.width != v.width || img.height != v.height || img.depth != v.depth {
            return Err(MediaError::failed(format!(
                "composed frame is {}x{} {:?}, encoder expects {}x{} {:?}",
                img.width, img.height, img.depth, v.width, v.height, v.depth
            )));
        }
        let mut p = match pts {
            Some(p) => v.clock.pts(p),
            None => v.last_pts.map_or(0, |l| l + v.default_duration),
        };
        // Variable frame rate is kept, but timestamps must strictly increase.
        if let Some(last) = v.last_pts
            && p <= last
        {
            p = last + 1;
        }
        let dur = if duration > 0 {
            rescale(duration, v.clock.ist_tb, v.clock.enc_tb).max(1)
        } else {
            v.default_duration
        };
        v.last_pts = Some(p);
        v.first_pts.get_or_insert(p);
        v.end_pts = v.end_pts.max(p + dur);
        v.durations.insert(p, dur);
        if let Some(m) = v.meter.as_mut() {
            m.offer(&img, p);
        }
        match lend_frame(img, home) {
            Ok(mut f) => {
                f.set_pts(Some(p));
                f.set_kind(ffmpeg::picture::Type::None);
                v.enc
                    .send_frame(&f)
                    .map_err(|e| MediaError::ffmpeg("encoding video", e))?;
            }
            Err(img) => {
                let f = copy_frame(&mut v.frame, &img)?;
                f.set_pts(Some(p));
                f.set_kind(ffmpeg::picture::Type::None);
                v.enc
                    .send_frame(f)
                    .map_err(|e| MediaError::ffmpeg("encoding video", e))?;
                if let Some(home) = home {
                    let _ = home.try_send(img);
                }
            }
        }
        Ok(())
    }

    /// Writes the packets the encoder has ready.
    pub fn drain(&mut self, octx: &mut Output) -> Result<(), MediaError> {
        let v = self;
        loop {
            match v.enc.receive_packet(&mut v.packet) {
                Ok(()) => {
                    if let Some(pts) = v.packet.pts() {
                        let dur = v.durations.remove(&pts).unwrap_or(v.default_duration);
                        // Frames the encoder has passed for good.
                        while v.durations.len() > 256 {
                            v.durations.pop_first();
                        }
                        v.packet.set_duration(dur);
                    }
                    if let Some(m) = v.meter.as_mut() {
                        m.packet(&v.packet);
                    }
                    v.packet.set_stream(v.ost);
                    v.packet.rescale_ts(v.clock.enc_tb, v.ost_tb);
                    v.packet.set_position(-1);
                    v.packet
                        .write_interleaved(octx)
                        .map_err(|e| MediaError::ffmpeg("writing video to the output", e))?;
                }
                Err(ffmpeg::Error::Eof) => return Ok(()),
                Err(e) if is_eagain(&e) => return Ok(()),
                Err(e) => return Err(MediaError::ffmpeg("encoding video", e)),
            }
        }
    }

    /// Flushes the encoder and writes what it still held.
    pub fn finish(&mut self, octx: &mut Output) -> Result<(), MediaError> {
        self.enc
            .send_eof()
            .map_err(|e| MediaError::ffmpeg("flushing the video encoder", e))?;
        self.drain(octx)
    }

    /// The quality of what was encoded, once [`VideoOut::finish`]ed: `None` when not
    /// measured (not asked, or the meter failed).
    pub fn quality(&mut self) -> Option<QualityTally> {
        self.meter.take()?.finish()
    }

    /// Seconds from the first frame's start to the last frame's end.
    pub fn seconds(&self) -> f64 {
        self.first_pts
            .map(|f| (self.end_pts - f) as f64 * f64::from(self.clock.enc_tb))
            .unwrap_or(0.0)
    }
}
