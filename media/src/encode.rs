//! Encoders and the muxer: H.264 (libx264 or NVENC) or VP9 (libvpx-vp9) video, AAC or Opus audio
//! (copied when the container takes the source codec, else transcoded with swresample).

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::path::Path;
use std::ptr;

use crossbeam_channel::Sender;
use ffmpeg::ffi;
use ffmpeg::format::Pixel;
use ffmpeg::format::context::Output;
use ffmpeg::{Dictionary, Packet, Rational, codec, encoder, frame};
use ffmpeg_next as ffmpeg;
use vidforge_gpu::Yuv420Frame;

use crate::error::MediaError;
use crate::hardware::H264Encoder;
use crate::source::{AudioMeta, Source};
use crate::types::{EncoderSettings, OutputFormat};

fn is_eagain(e: &ffmpeg::Error) -> bool {
    matches!(e, ffmpeg::Error::Other { errno } if *errno == ffmpeg::util::error::EAGAIN)
}

fn rescale(v: i64, from: Rational, to: Rational) -> i64 {
    if from == to {
        return v;
    }
    // SAFETY: pure arithmetic.
    unsafe { ffi::av_rescale_q(v, from.into(), to.into()) }
}

/// A composed frame lent to FFmpeg, and where it returns once FFmpeg is done with it.
struct Lent {
    frame: Yuv420Frame,
    home: Option<Sender<Yuv420Frame>>,
}

/// FFmpeg's free callback for a lent frame's buffer.
///
/// # Safety
///
/// `opaque` must be the `Box<Lent>` that `lend_frame` leaked into the buffer, and this must run
/// at most once for it (FFmpeg calls a buffer's free callback exactly once).
unsafe extern "C" fn release_lent(opaque: *mut c_void, _data: *mut u8) {
    // SAFETY: `opaque` is the `Box<Lent>` leaked by `lend_frame`; FFmpeg calls this once.
    let lent = unsafe { Box::from_raw(opaque as *mut Lent) };
    let Lent { frame, home } = *lent;
    if let Some(home) = home {
        // A full pool just drops the frame.
        let _ = home.try_send(frame);
    }
}

/// Wraps `img`'s planes in a reference-counted AVFrame without copying. Strides are the plane
/// widths, so only widths whose luma and chroma rows stay 16-byte aligned qualify (encoders'
/// SIMD input paths expect aligned rows); otherwise `img` comes back for the copying path.
fn lend_frame(
    img: Yuv420Frame,
    home: Option<&Sender<Yuv420Frame>>,
) -> Result<frame::Video, Yuv420Frame> {
    let (w, h) = (img.width as usize, img.height as usize);
    let (cw, ch) = Yuv420Frame::chroma_size(img.width, img.height);
    let (cw, ch) = (cw as usize, ch as usize);
    let aligned = |p: *const u8| (p as usize).is_multiple_of(16);
    if !w.is_multiple_of(64)
        || img.y.len() < w * h
        || img.u.len() < cw * ch
        || img.v.len() < cw * ch
        || !aligned(img.y.as_ptr())
        || !aligned(img.u.as_ptr())
        || !aligned(img.v.as_ptr())
    {
        return Err(img);
    }
    let mut lent = Box::new(Lent {
        frame: img,
        home: home.cloned(),
    });
    let planes = [
        lent.frame.y.as_mut_ptr(),
        lent.frame.u.as_mut_ptr(),
        lent.frame.v.as_mut_ptr(),
    ];
    let y_len = lent.frame.y.len();
    let (fw, fh) = (lent.frame.width, lent.frame.height);
    let opaque = Box::into_raw(lent);
    // SAFETY: the planes live in `*opaque`, whose heap buffers do not move while it is leaked;
    // the buffer frees it exactly once through `release_lent`.
    let buf =
        unsafe { ffi::av_buffer_create(planes[0], y_len, Some(release_lent), opaque.cast(), 0) };
    if buf.is_null() {
        // SAFETY: not handed to FFmpeg; reclaim it.
        let lent = unsafe { Box::from_raw(opaque) };
        return Err(lent.frame);
    }
    let mut f = frame::Video::empty();
    // SAFETY: a fresh empty AVFrame; fields set as av_frame_get_buffer would, with `buf[0]`
    // owning (through the callback) all three planes.
    unsafe {
        let p = f.as_mut_ptr();
        (*p).format = ffi::AVPixelFormat::AV_PIX_FMT_YUV420P as i32;
        (*p).width = fw as i32;
        (*p).height = fh as i32;
        (*p).buf[0] = buf;
        for (i, plane) in planes.into_iter().enumerate() {
            (*p).data[i] = plane;
        }
        (*p).linesize[0] = w as i32;
        (*p).linesize[1] = cw as i32;
        (*p).linesize[2] = cw as i32;
    }
    Ok(f)
}

/// The copying path: `img` into the muxer's own (lazily allocated) encoder frame.
fn copy_frame<'a>(
    slot: &'a mut Option<frame::Video>,
    img: &Yuv420Frame,
) -> Result<&'a mut frame::Video, MediaError> {
    let f = slot.get_or_insert_with(|| frame::Video::new(Pixel::YUV420P, img.width, img.height));
    // SAFETY: the frame was allocated with buffers; make_writable copies them only if the
    // encoder still holds a reference.
    let r = unsafe { ffi::av_frame_make_writable(f.as_mut_ptr()) };
    if r < 0 {
        return Err(MediaError::ffmpeg(
            "allocating an encoder frame",
            ffmpeg::Error::from(r),
        ));
    }
    let (cw, ch) = Yuv420Frame::chroma_size(img.width, img.height);
    let planes: [(&[u8], usize, usize); 3] = [
        (&img.y, img.width as usize, img.height as usize),
        (&img.u, cw as usize, ch as usize),
        (&img.v, cw as usize, ch as usize),
    ];
    for (i, (src, w, h)) in planes.into_iter().enumerate() {
        let stride = f.stride(i);
        let dst = f.data_mut(i);
        for row in 0..h {
            dst[row * stride..row * stride + w].copy_from_slice(&src[row * w..(row + 1) * w]);
        }
    }
    Ok(f)
}

/// The output file: muxer plus encoders. Built on the calling thread, then moved to the
/// encode thread.
pub(crate) struct Muxer {
    octx: Output,
    video: VideoOut,
    audio: Option<AudioOut>,
}

struct VideoOut {
    enc: encoder::video::Encoder,
    ost: usize,
    ost_tb: Rational,
    /// Source stream time base (frames arrive in it) and the encoder's.
    ist_tb: Rational,
    enc_tb: Rational,
    offset: i64,
    width: u32,
    height: u32,
    /// Encoder frame for composed frames that cannot be lent in place; allocated on first use.
    frame: Option<frame::Video>,
    packet: Packet,
    last_pts: Option<i64>,
    first_pts: Option<i64>,
    end_pts: i64,
    default_duration: i64,
    /// pts -> duration of frames inside the encoder, to stamp packet durations.
    durations: BTreeMap<i64, i64>,
}

enum AudioOut {
    Copy {
        ist_tb: Rational,
        offset: i64,
        ost: usize,
        ost_tb: Rational,
    },
    Transcode(Box<AudioTranscoder>),
}

/// The WebM video encoder.
pub(crate) const VP9_ENCODER: &str = "libvpx-vp9";

/// The H.264 encoder's options. NVENC runs constant quality (`rc vbr`, `cq` = the x264 CRF,
/// no bitrate target) at preset p4 with `tune hq`: the settings meant to land near x264
/// veryfast CRF 23 (the device check measures both against the source, side by side).
fn h264_options(h264: H264Encoder, settings: &EncoderSettings) -> Dictionary<'static> {
    let mut d = Dictionary::new();
    let quality = settings.h264_crf.min(51).to_string();
    match h264 {
        H264Encoder::X264 => {
            d.set("preset", &settings.h264_preset);
            d.set("crf", &quality);
        }
        H264Encoder::Nvenc => {
            d.set("preset", "p4");
            d.set("tune", "hq");
            d.set("rc", "vbr");
            d.set("cq", &quality);
        }
    }
    d
}

/// Opens (and closes) one NVENC H.264 session, as a render would: the only reliable test of
/// an encoder (the FFmpeg build has `h264_nvenc` everywhere; the card and driver decide).
pub(crate) fn probe_nvenc() -> Result<(), String> {
    crate::init();
    let codec = encoder::find_by_name(H264Encoder::Nvenc.ffmpeg_name())
        .ok_or("this FFmpeg build has no h264_nvenc encoder")?;
    let ctx = codec::context::Context::new_with_codec(codec);
    let mut enc = ctx.encoder().video().map_err(|e| e.to_string())?;
    enc.set_width(256);
    enc.set_height(256);
    enc.set_format(Pixel::YUV420P);
    enc.set_time_base(Rational::new(1, 30));
    enc.set_frame_rate(Some(Rational::new(30, 1)));
    enc.set_bit_rate(0);
    let opened = enc
        .open_as_with(
            codec,
            h264_options(H264Encoder::Nvenc, &EncoderSettings::default()),
        )
        .map_err(|e| {
            format!(
                "opening h264_nvenc failed ({e}); it needs the NVIDIA driver and a GPU with an \
                 NVENC engine"
            )
        })?;
    drop(opened);
    Ok(())
}

/// Copying is possible when the container carries the source codec as-is.
fn can_copy_audio(format: OutputFormat, id: codec::Id) -> bool {
    match format {
        OutputFormat::Mp4 | OutputFormat::Mov => id == codec::Id::AAC,
        OutputFormat::Webm => matches!(id, codec::Id::OPUS | codec::Id::VORBIS),
    }
}

impl Muxer {
    /// Creates `path` (a temporary name: the format is given explicitly), opens the encoders
    /// and writes the header.
    pub fn open(
        path: &Path,
        format: OutputFormat,
        settings: &EncoderSettings,
        h264: H264Encoder,
        out_w: u32,
        out_h: u32,
        src: &Source,
    ) -> Result<Muxer, MediaError> {
        let mut octx = ffmpeg::format::output_as(path, format.muxer()).map_err(|e| {
            MediaError::failed(format!("cannot create output file {}: {e}", path.display()))
        })?;
        let global_header = octx
            .format()
            .flags()
            .contains(ffmpeg::format::Flags::GLOBAL_HEADER);

        // Video.
        let (codec_name, opts) = match format {
            OutputFormat::Mp4 | OutputFormat::Mov => {
                (h264.ffmpeg_name(), h264_options(h264, settings))
            }
            OutputFormat::Webm => {
                let mut d = Dictionary::new();
                d.set("deadline", &settings.vp9_deadline);
                d.set("cpu-used", &settings.vp9_cpu_used.min(8).to_string());
                d.set("row-mt", "1");
                d.set("crf", &settings.vp9_crf.min(63).to_string());
                (VP9_ENCODER, d)
            }
        };
        let codec = encoder::find_by_name(codec_name).ok_or_else(|| {
            MediaError::failed(format!(
                "encoder {codec_name} is not available in this FFmpeg build"
            ))
        })?;
        let vmeta = &src.video;
        let ist_tb = vmeta.time_base;
        // Keep source timestamps exact: the encoder runs in the source stream's time base
        // unless that is unusable.
        let enc_tb = if ist_tb.numerator() > 0 && ist_tb.denominator() > 0 {
            ist_tb
        } else {
            Rational::new(1, 90_000)
        };
        let fps = if vmeta.avg_fps > 0.0 {
            Rational::from(vmeta.avg_fps).reduce()
        } else {
            Rational::new(30, 1)
        };
        let mut ctx = codec::context::Context::new_with_codec(codec);
        // SAFETY: plain field write on an unopened context.
        unsafe {
            (*ctx.as_mut_ptr()).thread_count = settings.threads.min(64) as i32;
        }
        let mut enc = ctx
            .encoder()
            .video()
            .map_err(|e| MediaError::ffmpeg("creating the video encoder", e))?;
        enc.set_width(out_w);
        enc.set_height(out_h);
        enc.set_format(Pixel::YUV420P);
        enc.set_time_base(enc_tb);
        enc.set_frame_rate(Some(fps));
        enc.set_aspect_ratio(Rational::new(1, 1));
        enc.set_colorspace(ffmpeg::color::Space::BT709);
        enc.set_color_range(ffmpeg::color::Range::MPEG);
        enc.set_color_primaries(ffmpeg::color::Primaries::BT709);
        enc.set_color_transfer_characteristic(ffmpeg::color::TransferCharacteristic::BT709);
        if format == OutputFormat::Webm || h264 == H264Encoder::Nvenc {
            // Constant quality: a zero target bitrate with crf / cq.
            enc.set_bit_rate(0);
        }
        if global_header {
            enc.set_flags(codec::Flags::GLOBAL_HEADER);
        }
        let venc = enc
            .open_as_with(codec, opts)
            .map_err(|e| MediaError::ffmpeg(&format!("opening {codec_name}"), e))?;
        let vost = {
            let mut ost = octx
                .add_stream(codec)
                .map_err(|e| MediaError::ffmpeg("adding the video stream", e))?;
            ost.set_parameters(&venc);
            ost.set_time_base(enc_tb);
            ost.set_avg_frame_rate(fps);
            ost.index()
        };
        let default_duration = rescale(1, fps.invert(), enc_tb).max(1);

        // Audio.
        let audio = match &src.audio {
            None => None,
            Some(a) if can_copy_audio(format, a.codec_id) => {
                let stream = src
                    .input
                    .stream(a.index)
                    .ok_or_else(|| MediaError::failed("audio stream vanished"))?;
                let mut ost = octx
                    .add_stream(encoder::find(codec::Id::None))
                    .map_err(|e| MediaError::ffmpeg("adding the audio stream", e))?;
                ost.set_parameters(stream.parameters());
                // SAFETY: the source's codec tag may be invalid in the new container; 0 lets
                // the muxer choose.
                unsafe {
                    (*(*ost.as_mut_ptr()).codecpar).codec_tag = 0;
                }
                ost.set_time_base(a.time_base);
                Some(AudioOut::Copy {
                    ist_tb: a.time_base,
                    offset: src.start_offset(a.time_base),
                    ost: ost.index(),
                    ost_tb: a.time_base,
                })
            }
            Some(a) => {
                match AudioTranscoder::new(&mut octx, format, settings, src, a, global_header) {
                    Ok(t) => Some(AudioOut::Transcode(Box::new(t))),
                    // Sound FFmpeg cannot decode should not cost the whole video.
                    Err(e @ MediaError::UnsupportedCodec { .. }) => {
                        tracing::warn!("{}: dropping the audio track: {e}", src.path.display());
                        None
                    }
                    Err(e) => return Err(e),
                }
            }
        };

        let mut header_opts = Dictionary::new();
        if matches!(format, OutputFormat::Mp4 | OutputFormat::Mov) {
            header_opts.set("movflags", "+faststart");
        }
        octx.write_header_with(header_opts)
            .map_err(|e| MediaError::ffmpeg("writing the output header", e))?;
        let tb_of = |octx: &Output, i: usize| octx.stream(i).map(|s| s.time_base());
        let vost_tb = tb_of(&octx, vost).unwrap_or(enc_tb);
        let audio = audio.map(|a| match a {
            AudioOut::Copy {
                ist_tb,
                offset,
                ost,
                ..
            } => AudioOut::Copy {
                ist_tb,
                offset,
                ost,
                ost_tb: tb_of(&octx, ost).unwrap_or(ist_tb),
            },
            AudioOut::Transcode(mut t) => {
                t.ost_tb = tb_of(&octx, t.ost).unwrap_or(t.ost_tb);
                AudioOut::Transcode(t)
            }
        });
        Ok(Muxer {
            octx,
            video: VideoOut {
                enc: venc,
                ost: vost,
                ost_tb: vost_tb,
                ist_tb,
                enc_tb,
                offset: src.start_offset(ist_tb),
                width: out_w,
                height: out_h,
                frame: None,
                packet: Packet::empty(),
                last_pts: None,
                first_pts: None,
                end_pts: 0,
                default_duration,
                durations: BTreeMap::new(),
            },
            audio,
        })
    }

    pub fn has_audio(&self) -> bool {
        self.audio.is_some()
    }

    /// Encodes one composed frame. `pts`/`duration` are in the source stream's time base.
    ///
    /// The encoder reads `img`'s planes in place when their strides suit it (no copy); the
    /// frame goes back through `home` (to be reused by the compositor) once FFmpeg drops its
    /// last reference, which for libx264/libvpx is inside the encode call.
    pub fn write_video(
        &mut self,
        img: Yuv420Frame,
        pts: Option<i64>,
        duration: i64,
        home: Option<&Sender<Yuv420Frame>>,
    ) -> Result<(), MediaError> {
        let v = &mut self.video;
        if img.width != v.width || img.height != v.height {
            return Err(MediaError::failed(format!(
                "composed frame is {}x{}, encoder expects {}x{}",
                img.width, img.height, v.width, v.height
            )));
        }
        let mut p = match pts {
            Some(p) => rescale(p - v.offset, v.ist_tb, v.enc_tb),
            None => v.last_pts.map_or(0, |l| l + v.default_duration),
        };
        // Variable frame rate is kept, but timestamps must strictly increase.
        if let Some(last) = v.last_pts
            && p <= last
        {
            p = last + 1;
        }
        let dur = if duration > 0 {
            rescale(duration, v.ist_tb, v.enc_tb).max(1)
        } else {
            v.default_duration
        };
        v.last_pts = Some(p);
        v.first_pts.get_or_insert(p);
        v.end_pts = v.end_pts.max(p + dur);
        v.durations.insert(p, dur);
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
        self.drain_video()
    }

    fn drain_video(&mut self) -> Result<(), MediaError> {
        let v = &mut self.video;
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
                    v.packet.set_stream(v.ost);
                    v.packet.rescale_ts(v.enc_tb, v.ost_tb);
                    v.packet.set_position(-1);
                    v.packet
                        .write_interleaved(&mut self.octx)
                        .map_err(|e| MediaError::ffmpeg("writing video to the output", e))?;
                }
                Err(ffmpeg::Error::Eof) => return Ok(()),
                Err(e) if is_eagain(&e) => return Ok(()),
                Err(e) => return Err(MediaError::ffmpeg("encoding video", e)),
            }
        }
    }

    /// Passes an audio packet of the source's audio stream through (copy or transcode).
    pub fn write_audio(&mut self, mut pkt: Packet) -> Result<(), MediaError> {
        match &mut self.audio {
            None => Ok(()),
            Some(AudioOut::Copy {
                ist_tb,
                offset,
                ost,
                ost_tb,
            }) => {
                if pkt.dts().is_none() && pkt.pts().is_none() {
                    // The muxer cannot place it; dropping one packet beats failing the render.
                    tracing::debug!("dropping an audio packet without timestamps");
                    return Ok(());
                }
                if *offset != 0 {
                    pkt.set_pts(pkt.pts().map(|p| p - *offset));
                    pkt.set_dts(pkt.dts().map(|d| d - *offset));
                }
                pkt.rescale_ts(*ist_tb, *ost_tb);
                pkt.set_stream(*ost);
                pkt.set_position(-1);
                pkt.write_interleaved(&mut self.octx)
                    .map_err(|e| MediaError::ffmpeg("writing audio to the output", e))
            }
            Some(AudioOut::Transcode(t)) => t.push_packet(Some(&pkt), &mut self.octx),
        }
    }

    /// Flushes the encoders and writes the trailer (the faststart rewrite happens here).
    pub fn finish(mut self) -> Result<VideoTiming, MediaError> {
        self.video
            .enc
            .send_eof()
            .map_err(|e| MediaError::ffmpeg("flushing the video encoder", e))?;
        self.drain_video()?;
        if let Some(AudioOut::Transcode(t)) = &mut self.audio {
            t.push_packet(None, &mut self.octx)?;
        }
        self.octx
            .write_trailer()
            .map_err(|e| MediaError::ffmpeg("finishing the output file", e))?;
        let v = &self.video;
        let seconds = v
            .first_pts
            .map(|f| (v.end_pts - f) as f64 * f64::from(v.enc_tb))
            .unwrap_or(0.0);
        // Dropping closes the file.
        drop(self);
        Ok(VideoTiming { seconds })
    }
}

/// What the encoder saw of the video timeline.
pub(crate) struct VideoTiming {
    pub seconds: f64,
}

/// An owned SwrContext.
struct Swr {
    ptr: *mut ffi::SwrContext,
    key: (i32, u64, i32),
}

impl Drop for Swr {
    fn drop(&mut self) {
        // SAFETY: allocated by swr_alloc_set_opts, freed once.
        unsafe { ffi::swr_free(&mut self.ptr) }
    }
}

/// An owned AVAudioFifo.
struct Fifo(*mut ffi::AVAudioFifo);

impl Drop for Fifo {
    fn drop(&mut self) {
        // SAFETY: allocated by av_audio_fifo_alloc, freed once.
        unsafe { ffi::av_audio_fifo_free(self.0) }
    }
}

/// Decode -> resample (rate, layout, sample format) -> fixed-size frames -> encode.
struct AudioTranscoder {
    dec: ffmpeg::decoder::Audio,
    enc: encoder::audio::Encoder,
    ist_tb: Rational,
    offset: i64,
    ost: usize,
    ost_tb: Rational,
    out_rate: i32,
    out_fmt: ffi::AVSampleFormat,
    out_layout: u64,
    out_channels: i32,
    frame_size: usize,
    swr: Option<Swr>,
    fifo: Fifo,
    next_pts: Option<i64>,
    dec_frame: frame::Audio,
    packet: Packet,
    /// Reusable resampler output buffer: (planes, capacity in samples).
    tmp: Option<(frame::Audio, usize)>,
}

// SAFETY: the raw SwrContext/AVAudioFifo are owned exclusively by their wrapper and have no
// thread affinity; they move to the encode thread once.
unsafe impl Send for Swr {}
unsafe impl Send for Fifo {}

const AAC_RATES: [i32; 13] = [
    96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350,
];

impl AudioTranscoder {
    fn new(
        octx: &mut Output,
        format: OutputFormat,
        settings: &EncoderSettings,
        src: &Source,
        a: &AudioMeta,
        global_header: bool,
    ) -> Result<Self, MediaError> {
        let stream = src
            .input
            .stream(a.index)
            .ok_or_else(|| MediaError::failed("audio stream vanished"))?;
        let dctx = codec::context::Context::from_parameters(stream.parameters())
            .map_err(|e| MediaError::ffmpeg("setting up the audio decoder", e))?;
        let mut dec = dctx.decoder().audio().map_err(|e| {
            MediaError::unsupported(format!("cannot decode the '{}' audio: {e}", a.codec_name))
        })?;
        dec.set_packet_time_base(a.time_base);

        let channels = a.channels.clamp(1, 2) as i32;
        // SAFETY: pure function.
        let out_layout = unsafe { ffi::av_get_default_channel_layout(channels) } as u64;
        let (codec, out_fmt, out_rate, default_rate) = match format {
            OutputFormat::Webm => (
                encoder::find_by_name("libopus"),
                ffi::AVSampleFormat::AV_SAMPLE_FMT_FLT,
                48000,
                if channels == 1 { 64_000 } else { 96_000 },
            ),
            OutputFormat::Mp4 | OutputFormat::Mov => (
                encoder::find(codec::Id::AAC),
                ffi::AVSampleFormat::AV_SAMPLE_FMT_FLTP,
                if AAC_RATES.contains(&(a.sample_rate as i32)) {
                    a.sample_rate as i32
                } else {
                    48000
                },
                if channels == 1 { 96_000 } else { 128_000 },
            ),
        };
        let codec = codec.ok_or_else(|| {
            MediaError::failed(format!(
                "the {} audio encoder is not available in this FFmpeg build",
                format.audio_codec()
            ))
        })?;
        let mut enc = codec::context::Context::new_with_codec(codec)
            .encoder()
            .audio()
            .map_err(|e| MediaError::ffmpeg("creating the audio encoder", e))?;
        enc.set_rate(out_rate);
        enc.set_format(ffmpeg::format::Sample::from(out_fmt));
        enc.set_channel_layout(ffmpeg::ChannelLayout::from_bits_truncate(out_layout));
        enc.set_channels(channels);
        enc.set_time_base(Rational::new(1, out_rate));
        enc.set_bit_rate(settings.audio_bitrate.unwrap_or(default_rate) as usize);
        if global_header {
            enc.set_flags(codec::Flags::GLOBAL_HEADER);
        }
        let enc = enc
            .open_as(codec)
            .map_err(|e| MediaError::ffmpeg("opening the audio encoder", e))?;
        let frame_size = match enc.frame_size() {
            0 => 1024,
            n => n as usize,
        };
        let ost = {
            let mut ost = octx
                .add_stream(codec)
                .map_err(|e| MediaError::ffmpeg("adding the audio stream", e))?;
            ost.set_parameters(&enc);
            ost.set_time_base(Rational::new(1, out_rate));
            ost.index()
        };
        // SAFETY: plain allocation; checked for null.
        let fifo = unsafe { ffi::av_audio_fifo_alloc(out_fmt, channels, frame_size as i32 * 4) };
        if fifo.is_null() {
            return Err(MediaError::failed("allocating the audio FIFO"));
        }
        Ok(AudioTranscoder {
            dec,
            enc,
            ist_tb: a.time_base,
            offset: src.start_offset(a.time_base),
            ost,
            ost_tb: Rational::new(1, out_rate),
            out_rate,
            out_fmt,
            out_layout,
            out_channels: channels,
            frame_size,
            swr: None,
            fifo: Fifo(fifo),
            next_pts: None,
            dec_frame: frame::Audio::empty(),
            packet: Packet::empty(),
            tmp: None,
        })
    }

    /// Feeds a packet (`None` = end of stream: flush everything) and writes what comes out.
    fn push_packet(&mut self, pkt: Option<&Packet>, octx: &mut Output) -> Result<(), MediaError> {
        let sent = match pkt {
            Some(p) => self.dec.send_packet(p),
            None => self.dec.send_eof(),
        };
        if let Err(e) = sent {
            // A damaged audio packet loses a few milliseconds of sound, not the render.
            tracing::debug!("audio decoder rejected a packet: {e}");
        }
        loop {
            match self.dec.receive_frame(&mut self.dec_frame) {
                Ok(()) => self.resample_decoded()?,
                Err(ffmpeg::Error::Eof) => break,
                Err(e) if is_eagain(&e) => break,
                Err(e) => {
                    tracing::debug!("audio decode error: {e}");
                    break;
                }
            }
            self.emit(false, octx)?;
        }
        if pkt.is_none() {
            self.drain_resampler()?;
            self.emit(true, octx)?;
            self.enc
                .send_eof()
                .map_err(|e| MediaError::ffmpeg("flushing the audio encoder", e))?;
            self.drain_encoder(octx)?;
        }
        Ok(())
    }

    fn ensure_tmp(&mut self, samples: usize) -> Result<[*mut u8; 8], MediaError> {
        let need = samples.max(self.frame_size);
        if self.tmp.as_ref().is_none_or(|(_, cap)| *cap < need) {
            let f = frame::Audio::new(
                ffmpeg::format::Sample::from(self.out_fmt),
                need,
                ffmpeg::ChannelLayout::from_bits_truncate(self.out_layout),
            );
            // SAFETY: reading the data pointer of the new frame.
            if unsafe { (*f.as_ptr()).data[0].is_null() } {
                return Err(MediaError::failed("allocating audio buffers"));
            }
            self.tmp = Some((f, need));
        }
        let (f, _) = self
            .tmp
            .as_ref()
            .ok_or_else(|| MediaError::failed("audio buffer missing"))?;
        // SAFETY: data has 8 plane pointers.
        Ok(unsafe { (*f.as_ptr()).data })
    }

    fn resample_decoded(&mut self) -> Result<(), MediaError> {
        let f = &self.dec_frame;
        let in_samples = f.samples() as i32;
        if in_samples <= 0 {
            return Ok(());
        }
        // SAFETY: plain field reads of a decoded frame.
        let (fmt, mut layout, rate, channels) = unsafe {
            let p = f.as_ptr();
            (
                (*p).format,
                (*p).channel_layout,
                (*p).sample_rate,
                (*p).channels,
            )
        };
        if layout == 0 || layout.count_ones() as i32 != channels {
            // SAFETY: pure function.
            layout = unsafe { ffi::av_get_default_channel_layout(channels) } as u64;
        }
        if rate <= 0 || channels <= 0 || layout == 0 {
            return Err(MediaError::invalid(
                "audio frame without a sample rate or channels",
            ));
        }
        let key = (fmt, layout, rate);
        if self.swr.as_ref().is_none_or(|s| s.key != key) {
            // SAFETY: allocation + init; every argument is a value; checked for errors.
            let ptr = unsafe {
                let s = ffi::swr_alloc_set_opts(
                    ptr::null_mut(),
                    self.out_layout as i64,
                    self.out_fmt,
                    self.out_rate,
                    layout as i64,
                    std::mem::transmute::<i32, ffi::AVSampleFormat>(fmt),
                    rate,
                    0,
                    ptr::null_mut(),
                );
                if !s.is_null() && ffi::swr_init(s) < 0 {
                    let mut s = s;
                    ffi::swr_free(&mut s);
                    ptr::null_mut()
                } else {
                    s
                }
            };
            if ptr.is_null() {
                return Err(MediaError::failed("cannot set up the audio resampler"));
            }
            self.swr = Some(Swr { ptr, key });
        }
        if self.next_pts.is_none() {
            let start = self
                .dec_frame
                .timestamp()
                .map(|t| {
                    rescale(
                        t - self.offset,
                        self.ist_tb,
                        Rational::new(1, self.out_rate),
                    )
                })
                .unwrap_or(0);
            self.next_pts = Some(start);
        }
        let swr = self.swr.as_ref().map(|s| s.ptr).unwrap_or(ptr::null_mut());
        // SAFETY: swr is initialised.
        let cap = unsafe { ffi::swr_get_out_samples(swr, in_samples) }.max(0) as usize + 32;
        let out = self.ensure_tmp(cap)?;
        // SAFETY: `out` planes hold `cap` samples; input planes come from the decoded frame.
        let got = unsafe {
            ffi::swr_convert(
                swr,
                out.as_ptr() as *mut *mut u8,
                cap as i32,
                (*self.dec_frame.as_ptr()).extended_data as *mut *const u8,
                in_samples,
            )
        };
        if got < 0 {
            return Err(MediaError::ffmpeg(
                "resampling audio",
                ffmpeg::Error::from(got),
            ));
        }
        self.fifo_write(out, got)
    }

    fn drain_resampler(&mut self) -> Result<(), MediaError> {
        let Some(swr) = self.swr.as_ref().map(|s| s.ptr) else {
            return Ok(());
        };
        loop {
            let cap = self.frame_size * 2;
            let out = self.ensure_tmp(cap)?;
            // SAFETY: null input flushes; output planes hold `cap` samples.
            let got = unsafe {
                ffi::swr_convert(
                    swr,
                    out.as_ptr() as *mut *mut u8,
                    cap as i32,
                    ptr::null_mut(),
                    0,
                )
            };
            if got <= 0 {
                return Ok(());
            }
            self.fifo_write(out, got)?;
        }
    }

    fn fifo_write(&mut self, planes: [*mut u8; 8], samples: i32) -> Result<(), MediaError> {
        if samples == 0 {
            return Ok(());
        }
        // SAFETY: planes hold `samples` samples in the FIFO's format and channel count.
        let w = unsafe {
            ffi::av_audio_fifo_write(self.fifo.0, planes.as_ptr() as *mut *mut c_void, samples)
        };
        if w < samples {
            return Err(MediaError::failed("audio FIFO write failed"));
        }
        Ok(())
    }

    /// Sends every full frame in the FIFO to the encoder (and the partial last one at the end).
    fn emit(&mut self, last: bool, octx: &mut Output) -> Result<(), MediaError> {
        loop {
            // SAFETY: valid FIFO.
            let avail = unsafe { ffi::av_audio_fifo_size(self.fifo.0) }.max(0) as usize;
            let n = if avail >= self.frame_size {
                self.frame_size
            } else if last && avail > 0 {
                avail
            } else {
                break;
            };
            let mut f = frame::Audio::new(
                ffmpeg::format::Sample::from(self.out_fmt),
                n,
                ffmpeg::ChannelLayout::from_bits_truncate(self.out_layout),
            );
            f.set_rate(self.out_rate as u32);
            f.set_channels(self.out_channels as u16);
            // SAFETY: f has buffers for n samples; the FIFO holds at least n.
            let r = unsafe {
                let p = f.as_mut_ptr();
                if (*p).data[0].is_null() {
                    return Err(MediaError::failed("allocating an audio frame"));
                }
                ffi::av_audio_fifo_read(
                    self.fifo.0,
                    (*p).data.as_mut_ptr() as *mut *mut c_void,
                    n as i32,
                )
            };
            if r < n as i32 {
                return Err(MediaError::failed("audio FIFO read failed"));
            }
            let pts = self.next_pts.unwrap_or(0);
            f.set_pts(Some(pts));
            self.next_pts = Some(pts + n as i64);
            self.enc
                .send_frame(&f)
                .map_err(|e| MediaError::ffmpeg("encoding audio", e))?;
            self.drain_encoder(octx)?;
        }
        Ok(())
    }

    fn drain_encoder(&mut self, octx: &mut Output) -> Result<(), MediaError> {
        loop {
            match self.enc.receive_packet(&mut self.packet) {
                Ok(()) => {
                    self.packet.set_stream(self.ost);
                    self.packet
                        .rescale_ts(Rational::new(1, self.out_rate), self.ost_tb);
                    self.packet
                        .write_interleaved(octx)
                        .map_err(|e| MediaError::ffmpeg("writing audio to the output", e))?;
                }
                Err(ffmpeg::Error::Eof) => return Ok(()),
                Err(e) if is_eagain(&e) => return Ok(()),
                Err(e) => return Err(MediaError::ffmpeg("encoding audio", e)),
            }
        }
    }
}
