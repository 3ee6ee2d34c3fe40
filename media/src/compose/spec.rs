//! What both compositor backends share: the output spec, the `Compositor` trait, and how a
//! decoded frame's size and colour are read.

use ffmpeg::format::Pixel;
use ffmpeg::frame;
use ffmpeg_next as ffmpeg;
use vidforge_gpu::{OutputLight, PreparedWatermark, Rotation, Yuv420Frame};

use crate::error::MediaError;
use crate::source::{FrameColor, frame_color};
use crate::types::Hops;

/// What every compositor needs to know about the output.
#[derive(Clone, Debug, PartialEq)]
pub struct ComposeSpec {
    /// Output size in display orientation (even).
    pub out_width: u32,
    pub out_height: u32,
    /// Clockwise rotation that makes decoded frames upright.
    pub rotation: Rotation,
    /// Already placed, resampled and converted to the light's colour and depth.
    pub watermark: Option<PreparedWatermark>,
    /// The output's light (SDR, tone-mapped, or HDR kept at 10 bits), decided once by the
    /// engine from the source and the job's [`HdrPolicy`](crate::HdrPolicy).
    pub light: OutputLight,
}

/// A compositor backend. Frames come out in the order they went in, possibly delayed (the GPU
/// keeps a few in flight); `finish` returns the rest.
pub trait Compositor: Send {
    /// Composes one decoded frame (any pixel format, size and colour FFmpeg decodes).
    fn push(&mut self, frame: &frame::Video) -> Result<Option<Yuv420Frame>, MediaError>;
    /// Drains frames still in flight.
    fn finish(&mut self) -> Result<Vec<Yuv420Frame>, MediaError>;
    /// Hands back an output frame the caller no longer needs, so its buffers can be reused.
    fn recycle(&mut self, _frame: Yuv420Frame) {}
    /// `cpu` or the adapter name.
    fn backend(&self) -> String;
    /// Where the compose stage's time went, hop by hop (zeros where a backend has no hops).
    fn hops(&self) -> Hops {
        Hops::default()
    }

    /// Composes exactly one frame (previews): push, then drain.
    fn compose_single(&mut self, frame: &frame::Video) -> Result<Yuv420Frame, MediaError> {
        let mut out: Vec<Yuv420Frame> = self.push(frame)?.into_iter().collect();
        out.extend(self.finish()?);
        out.pop()
            .ok_or_else(|| MediaError::failed("compositor returned no frame"))
    }
}

/// The colour a decoded frame is in (its tags, or the player rule when untagged).
pub(super) fn color_of(frame: &frame::Video) -> FrameColor {
    frame_color(
        frame.color_space(),
        frame.color_range(),
        frame.format(),
        frame.width(),
        frame.height(),
    )
}

pub(super) fn check_frame(frame: &frame::Video) -> Result<(), MediaError> {
    let (w, h) = (frame.width(), frame.height());
    if w == 0 || h == 0 || w > crate::source::MAX_DIMENSION || h > crate::source::MAX_DIMENSION {
        return Err(MediaError::invalid(format!(
            "decoded frame has unusable size {w}x{h}"
        )));
    }
    if frame.format() == Pixel::None {
        return Err(MediaError::invalid("decoded frame has no pixel format"));
    }
    Ok(())
}
