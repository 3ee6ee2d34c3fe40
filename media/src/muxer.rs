//! The muxer: the output file, its video (see [`VideoOut`]) and its audio: AAC or Opus,
//! copied when the container takes the source codec, else transcoded by [`AudioTranscoder`].

use std::path::Path;

use crossbeam_channel::Sender;
use ffmpeg::format::context::Output;
use ffmpeg::{Dictionary, Packet, Rational, codec, encoder};
use ffmpeg_next as ffmpeg;
use vidforge_gpu::Yuv420Frame;

use crate::audio_transcode::AudioTranscoder;
use crate::error::MediaError;
use crate::hardware::H264Encoder;
use crate::hdr_out::HdrOutput;
use crate::source::{AudioMeta, Source};
use crate::types::{EncoderSettings, OutputFormat};
use crate::video_out::{OutputParams, VideoOut};

/// The output file: muxer plus encoders. Built on the calling thread, then moved to the
/// encode thread.
pub(crate) struct Muxer {
    octx: Output,
    video: VideoOut,
    audio: Option<AudioOut>,
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

/// Copying is possible when the container carries the source codec as-is.
fn can_copy_audio(format: OutputFormat, id: codec::Id) -> bool {
    match format {
        OutputFormat::Mp4 | OutputFormat::Mov => id == codec::Id::AAC,
        OutputFormat::Webm => matches!(id, codec::Id::OPUS | codec::Id::VORBIS),
    }
}

/// Adds an output stream that carries the source's audio stream `a` as-is.
fn copy_audio(octx: &mut Output, src: &Source, a: &AudioMeta) -> Result<AudioOut, MediaError> {
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
    Ok(AudioOut::Copy {
        ist_tb: a.time_base,
        offset: src.start_offset(a.time_base),
        ost: ost.index(),
        ost_tb: a.time_base,
    })
}

/// The audio output: none, a copy of the source's stream, or a transcode.
fn open_audio(
    octx: &mut Output,
    p: &OutputParams<'_>,
    src: &Source,
) -> Result<Option<AudioOut>, MediaError> {
    match &src.audio {
        None => Ok(None),
        Some(a) if can_copy_audio(p.format, a.codec_id) => copy_audio(octx, src, a).map(Some),
        Some(a) => {
            match AudioTranscoder::new(octx, p.format, p.settings, src, a, p.global_header) {
                Ok(t) => Ok(Some(AudioOut::Transcode(Box::new(t)))),
                // Sound FFmpeg cannot decode should not cost the whole video.
                Err(e @ MediaError::UnsupportedCodec { .. }) => {
                    tracing::warn!("{}: dropping the audio track: {e}", src.path.display());
                    Ok(None)
                }
                Err(e) => Err(e),
            }
        }
    }
}

/// Writes the header (mp4/mov with `+faststart`).
fn write_header(octx: &mut Output, format: OutputFormat) -> Result<(), MediaError> {
    let mut header_opts = Dictionary::new();
    if matches!(format, OutputFormat::Mp4 | OutputFormat::Mov) {
        header_opts.set("movflags", "+faststart");
    }
    octx.write_header_with(header_opts)
        .map_err(|e| MediaError::ffmpeg("writing the output header", e))?;
    Ok(())
}

/// Takes the audio stream's time base as the muxer set it when writing the header.
fn adopt_audio_time_base(octx: &Output, audio: &mut AudioOut) {
    let tb_of = |i: usize| octx.stream(i).map(|s| s.time_base());
    match audio {
        AudioOut::Copy {
            ist_tb,
            ost,
            ost_tb,
            ..
        } => *ost_tb = tb_of(*ost).unwrap_or(*ist_tb),
        AudioOut::Transcode(t) => t.ost_tb = tb_of(t.ost).unwrap_or(t.ost_tb),
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
        (out_w, out_h): (u32, u32),
        src: &Source,
        hdr: Option<HdrOutput>,
    ) -> Result<Muxer, MediaError> {
        let mut octx = ffmpeg::format::output_as(path, format.muxer()).map_err(|e| {
            MediaError::failed(format!("cannot create output file {}: {e}", path.display()))
        })?;
        let global_header = octx
            .format()
            .flags()
            .contains(ffmpeg::format::Flags::GLOBAL_HEADER);
        let params = OutputParams {
            format,
            settings,
            h264,
            out_w,
            out_h,
            global_header,
            hdr,
        };
        let mut video = VideoOut::open(&mut octx, &params, src)?;
        let mut audio = open_audio(&mut octx, &params, src)?;
        write_header(&mut octx, format)?;
        video.adopt_stream_time_base(&octx);
        if let Some(a) = audio.as_mut() {
            adopt_audio_time_base(&octx, a);
        }
        Ok(Muxer { octx, video, audio })
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
        self.video.send(img, pts, duration, home)?;
        self.video.drain(&mut self.octx)
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
        self.video.finish(&mut self.octx)?;
        if let Some(AudioOut::Transcode(t)) = &mut self.audio {
            t.push_packet(None, &mut self.octx)?;
        }
        self.octx
            .write_trailer()
            .map_err(|e| MediaError::ffmpeg("finishing the output file", e))?;
        let seconds = self.video.seconds();
        // Dropping closes the file.
        drop(self);
        Ok(VideoTiming { seconds })
    }
}

/// What the encoder saw of the video timeline.
pub(crate) struct VideoTiming {
    pub seconds: f64,
}
