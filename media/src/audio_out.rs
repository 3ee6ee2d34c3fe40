//! The output's audio: the source's stream copied when the container takes its codec as-is,
//! else transcoded to AAC or Opus by [`AudioTranscoder`]. Shared by renders ([`crate::muxer`])
//! and segment joins, so that both carry the sound the same way.

use ffmpeg::format::context::Output;
use ffmpeg::{Packet, Rational, codec, encoder};
use ffmpeg_next as ffmpeg;

use crate::audio_transcode::AudioTranscoder;
use crate::error::MediaError;
use crate::source::{AudioMeta, Source};
use crate::types::{EncoderSettings, OutputFormat};

/// The audio stream of an output file.
pub(crate) enum AudioOut {
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

impl AudioOut {
    /// The audio output of `src` in `format`: none, a copy of the source's stream, or a
    /// transcode. Adds the stream to `octx` (before its header is written).
    pub fn open(
        octx: &mut Output,
        format: OutputFormat,
        settings: &EncoderSettings,
        global_header: bool,
        src: &Source,
    ) -> Result<Option<AudioOut>, MediaError> {
        match &src.audio {
            None => Ok(None),
            Some(a) if can_copy_audio(format, a.codec_id) => copy_audio(octx, src, a).map(Some),
            Some(a) => match AudioTranscoder::new(octx, format, settings, src, a, global_header) {
                Ok(t) => Ok(Some(AudioOut::Transcode(Box::new(t)))),
                // Sound FFmpeg cannot decode should not cost the whole video.
                Err(e @ MediaError::UnsupportedCodec { .. }) => {
                    tracing::warn!("{}: dropping the audio track: {e}", src.path.display());
                    Ok(None)
                }
                Err(e) => Err(e),
            },
        }
    }

    /// Takes the audio stream's time base as the muxer set it when writing the header.
    pub fn adopt_time_base(&mut self, octx: &Output) {
        let tb_of = |i: usize| octx.stream(i).map(|s| s.time_base());
        match self {
            AudioOut::Copy {
                ist_tb,
                ost,
                ost_tb,
                ..
            } => *ost_tb = tb_of(*ost).unwrap_or(*ist_tb),
            AudioOut::Transcode(t) => t.ost_tb = tb_of(t.ost).unwrap_or(t.ost_tb),
        }
    }

    /// Passes an audio packet of the source's audio stream through (copy or transcode).
    pub fn write(&mut self, mut pkt: Packet, octx: &mut Output) -> Result<(), MediaError> {
        match self {
            AudioOut::Copy {
                ist_tb,
                offset,
                ost,
                ost_tb,
            } => {
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
                pkt.write_interleaved(octx)
                    .map_err(|e| MediaError::ffmpeg("writing audio to the output", e))
            }
            AudioOut::Transcode(t) => t.push_packet(Some(&pkt), octx),
        }
    }

    /// Flushes the transcoder (a copy holds nothing back).
    pub fn finish(&mut self, octx: &mut Output) -> Result<(), MediaError> {
        match self {
            AudioOut::Copy { .. } => Ok(()),
            AudioOut::Transcode(t) => t.push_packet(None, octx),
        }
    }
}
