//! The muxer: the output file, its video (see [`VideoOut`]) and its audio (see [`AudioOut`]):
//! a render's output, or a segment's intermediate file (video only, see [`MuxTarget`]).

use std::path::Path;

use crossbeam_channel::Sender;
use ffmpeg::format::context::Output;
use ffmpeg::{Dictionary, Packet};
use ffmpeg_next as ffmpeg;
use vidforge_gpu::Yuv420Frame;

use crate::audio_out::AudioOut;
use crate::error::MediaError;
use crate::hardware::H264Encoder;
use crate::hdr_out::HdrOutput;
use crate::quality::QualityTally;
use crate::source::Source;
use crate::types::{EncoderSettings, OutputFormat};
use crate::video_out::{OutputParams, VideoOut};

/// The FFmpeg muxer of segment files: timestamps (pts and dts) kept exactly in the encoder's
/// time base (its timescale is the time base's denominator times a power of two), the codec's
/// global header kept, and H.264, HEVC and VP9 all carried. Measured with FFmpeg 5.1: NUT
/// drops the first packets' dts, Matroska rounds to 1 ms, `mov` refuses VP9.
pub(crate) const SEGMENT_MUXER: &str = "mp4";

/// What the muxer writes: the final output of `format`, or (`segment`) one segment of it,
/// video only, in [`SEGMENT_MUXER`]'s container with `format`'s codecs and settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MuxTarget {
    pub format: OutputFormat,
    pub segment: bool,
}

impl MuxTarget {
    fn muxer_name(self) -> &'static str {
        if self.segment {
            SEGMENT_MUXER
        } else {
            self.format.muxer()
        }
    }
}

/// The output file: muxer plus encoders. Built on the calling thread, then moved to the
/// encode thread.
pub(crate) struct Muxer {
    octx: Output,
    video: VideoOut,
    audio: Option<AudioOut>,
}

/// Creates `path` as a `muxer` file (the name is a temporary one: the format is given), and
/// whether that format wants the codecs' global headers.
pub(crate) fn create_output(path: &Path, muxer: &str) -> Result<(Output, bool), MediaError> {
    let octx = ffmpeg::format::output_as(path, muxer).map_err(|e| {
        MediaError::failed(format!("cannot create output file {}: {e}", path.display()))
    })?;
    let global_header = octx
        .format()
        .flags()
        .contains(ffmpeg::format::Flags::GLOBAL_HEADER);
    Ok((octx, global_header))
}

/// Writes the header (`+faststart` for `faststart`).
pub(crate) fn write_header(octx: &mut Output, faststart: bool) -> Result<(), MediaError> {
    let mut header_opts = Dictionary::new();
    if faststart {
        header_opts.set("movflags", "+faststart");
    }
    octx.write_header_with(header_opts)
        .map_err(|e| MediaError::ffmpeg("writing the output header", e))?;
    Ok(())
}

impl Muxer {
    /// Creates `path` (a temporary name: the format is given explicitly), opens the encoders
    /// and writes the header.
    pub fn open(
        path: &Path,
        target: MuxTarget,
        settings: &EncoderSettings,
        h264: H264Encoder,
        (out_w, out_h): (u32, u32),
        src: &Source,
        hdr: Option<HdrOutput>,
    ) -> Result<Muxer, MediaError> {
        let format = target.format;
        let (mut octx, global_header) = create_output(path, target.muxer_name())?;
        let params = OutputParams {
            format,
            settings,
            h264,
            out_w,
            out_h,
            global_header,
            hdr,
            measure_quality: settings.measure_quality,
        };
        let mut video = VideoOut::open(&mut octx, &params, src)?;
        let mut audio = match target.segment {
            true => None,
            false => AudioOut::open(&mut octx, format, settings, global_header, src)?,
        };
        let faststart = !target.segment && format != OutputFormat::Webm;
        write_header(&mut octx, faststart)?;
        video.adopt_stream_time_base(&octx);
        if let Some(a) = audio.as_mut() {
            a.adopt_time_base(&octx);
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
    pub fn write_audio(&mut self, pkt: Packet) -> Result<(), MediaError> {
        match &mut self.audio {
            None => Ok(()),
            Some(a) => a.write(pkt, &mut self.octx),
        }
    }

    /// Flushes the encoders and writes the trailer (the faststart rewrite happens here).
    pub fn finish(mut self) -> Result<VideoTiming, MediaError> {
        self.video.finish(&mut self.octx)?;
        if let Some(a) = &mut self.audio {
            a.finish(&mut self.octx)?;
        }
        self.octx
            .write_trailer()
            .map_err(|e| MediaError::ffmpeg("finishing the output file", e))?;
        let seconds = self.video.seconds();
        let quality = self.video.quality();
        // Dropping closes the file.
        drop(self);
        Ok(VideoTiming { seconds, quality })
    }
}

/// What the encoder saw of the video timeline.
pub(crate) struct VideoTiming {
    pub seconds: f64,
    /// When measured.
    pub quality: Option<QualityTally>,
}
