//! Frames out without encoding, for tests, benchmarks and inspection: composed as a render
//! would compose them, or decoded as they are.

use std::path::Path;

use ffmpeg::frame;
use ffmpeg_next as ffmpeg;
use vidforge_gpu::Yuv420Frame;

use super::Engine;
use super::spec::compose_spec;
use crate::compose::SourceConverter;
use crate::error::MediaError;
use crate::pipeline::FrameReader;
use crate::source;
use crate::types::RenderJob;

impl Engine {
    /// Decodes the first `max_frames` frames of `job.input` and composes them as a render
    /// would (no encoding). For tests and benchmarks of the compositors.
    pub fn compose_frames(
        &self,
        job: &RenderJob,
        max_frames: usize,
    ) -> Result<Vec<Yuv420Frame>, MediaError> {
        let src = source::open(&job.input)?;
        let spec = compose_spec(job, &src, true)?;
        let decoder = src.video_decoder()?;
        let mut reader = FrameReader::new(src, decoder, false);
        let mut comp = self.compositor(spec);
        let mut out = Vec::new();
        let mut n = 0;
        while n < max_frames {
            let Some(f) = reader.next_video()? else { break };
            n += 1;
            out.extend(comp.push(&f)?);
        }
        out.extend(comp.finish()?);
        Ok(out)
    }
}

/// Decodes up to `max_frames` frames of `path` as 8-bit yuv420p at their coded size and in
/// their own colour (BT.601/BT.709 matrix and range kept; rotation not applied). For tests
/// and inspection of outputs.
pub fn decode_frames(path: &Path, max_frames: usize) -> Result<Vec<Yuv420Frame>, MediaError> {
    let src = source::open(path)?;
    let decoder = src.video_decoder()?;
    let mut reader = FrameReader::new(src, decoder, false);
    let mut conv: Option<SourceConverter> = None;
    let mut out = Vec::new();
    while out.len() < max_frames {
        let Some(f) = reader.next_video()? else { break };
        if conv.is_none() {
            conv = Some(SourceConverter::for_frame(&f)?);
        }
        let Some(c) = conv.as_mut() else { break };
        let (w, h) = c.size();
        let mut dst = crate::scale::blank_frame(w, h);
        c.convert(&f, &mut dst)?;
        out.push(dst);
    }
    Ok(out)
}

/// Decodes up to `max_frames` frames of `path` exactly as the decoder returns them (native
/// pixel format and size), for benchmarks of the compositors' `push`.
pub fn decode_raw_frames(path: &Path, max_frames: usize) -> Result<Vec<frame::Video>, MediaError> {
    let src = source::open(path)?;
    let decoder = src.video_decoder()?;
    let mut reader = FrameReader::new(src, decoder, false);
    let mut out = Vec::new();
    while out.len() < max_frames {
        let Some(f) = reader.next_video()? else { break };
        out.push(f);
    }
    Ok(out)
}
