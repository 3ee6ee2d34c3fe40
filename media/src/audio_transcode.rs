//! The audio transcoder: decode -> resample (swresample: rate, layout, sample format) -> a
//! FIFO cut into the encoder's fixed-size frames -> AAC or Opus.

use std::ffi::c_void;
use std::ptr;

use ffmpeg::ffi;
use ffmpeg::format::context::Output;
use ffmpeg::{Packet, Rational, codec, encoder, frame};
use ffmpeg_next as ffmpeg;

use crate::error::MediaError;
use crate::ffutil::{is_eagain, rescale};
use crate::source::{AudioMeta, Source};
use crate::types::{EncoderSettings, OutputFormat};

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
pub(crate) struct AudioTranscoder {
    dec: ffmpeg::decoder::Audio,
    enc: encoder::audio::Encoder,
    ist_tb: Rational,
    offset: i64,
    /// The output stream and its time base (the muxer may change it when writing the header).
    pub ost: usize,
    pub ost_tb: Rational,
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

/// The audio decoder for the source's stream `a`.
fn open_decoder(src: &Source, a: &AudioMeta) -> Result<ffmpeg::decoder::Audio, MediaError> {
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
    Ok(dec)
}

/// What `format` gets for `channels` of source audio `a`: the encoder (if this FFmpeg has
/// it), its sample format, the sample rate and the default bitrate.
fn audio_target(
    format: OutputFormat,
    a: &AudioMeta,
    channels: i32,
) -> (Option<ffmpeg::Codec>, ffi::AVSampleFormat, i32, u32) {
    match format {
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
    }
}

impl AudioTranscoder {
    /// Opens the decoder for `a` and the encoder for `format`, and adds the output stream.
    pub fn new(
        octx: &mut Output,
        format: OutputFormat,
        settings: &EncoderSettings,
        src: &Source,
        a: &AudioMeta,
        global_header: bool,
    ) -> Result<Self, MediaError> {
        let dec = open_decoder(src, a)?;
        let channels = a.channels.clamp(1, 2) as i32;
        // SAFETY: pure function.
        let out_layout = unsafe { ffi::av_get_default_channel_layout(channels) } as u64;
        let (codec, out_fmt, out_rate, default_rate) = audio_target(format, a, channels);
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
    pub fn push_packet(
        &mut self,
        pkt: Option<&Packet>,
        octx: &mut Output,
    ) -> Result<(), MediaError> {
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
