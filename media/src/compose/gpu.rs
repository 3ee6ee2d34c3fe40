//! The wgpu compositor: decoded frames to the GPU compositor of the gpu crate, as they are
//! where the shader reads their layout, converted first where not.

use ffmpeg::format::Pixel;
use ffmpeg::frame;
use ffmpeg_next as ffmpeg;
use vidforge_gpu::{
    ComposeConfig, GpuCompositor, GpuContext, SourceFormat, SourceFrame, Yuv420Frame,
};

use super::convert::SourceConverter;
use super::spec::{ComposeSpec, Compositor, check_frame, color_of};
use crate::error::MediaError;

/// The layout the wgpu compositor reads a decoded pixel format in, as is: planar 8-bit 4:2:0
/// from software decoders, NV12 / P010 from NVDEC and other hardware decoders.
fn gpu_layout(p: Pixel) -> Option<SourceFormat> {
    match p {
        Pixel::YUV420P | Pixel::YUVJ420P => Some(SourceFormat::Yuv420p),
        Pixel::NV12 => Some(SourceFormat::Nv12),
        Pixel::P010LE => Some(SourceFormat::P010),
        _ => None,
    }
}

/// A decoded frame's planes, with FFmpeg's row strides, as the GPU compositor reads them.
fn as_source(frame: &frame::Video, format: SourceFormat) -> SourceFrame<'_> {
    let plane = |i: usize| {
        if i < format.plane_count() {
            (frame.data(i), frame.stride(i))
        } else {
            (&[][..], 0)
        }
    };
    SourceFrame {
        width: frame.width(),
        height: frame.height(),
        format,
        planes: [plane(0), plane(1), plane(2)],
    }
}

/// The GPU compositor of a stream with what it was built for: frames of that pixel format,
/// size and colour are read straight from the decoder's buffers; others (mid-stream changes)
/// are converted to it by swscale first.
struct GpuStream {
    gpu: GpuCompositor,
    pix: Pixel,
    format: SourceFormat,
    conv: SourceConverter,
    converted: frame::Video,
    /// HDR (tone-mapped or kept): the stream's colour is the probe's, whatever each frame's
    /// tags say.
    hdr: bool,
}

impl GpuStream {
    fn reads_as_is(&self, frame: &frame::Video) -> bool {
        frame.format() == self.pix
            && (frame.width(), frame.height()) == self.conv.size()
            && (self.hdr || color_of(frame).spec == Some(self.conv.spec()))
    }
}

/// The wgpu compositor: decoded frames in the layouts the shader reads (yuv420p, NV12,
/// P010) go to the GPU as they are, other formats are converted to 8-bit yuv420p (HDR: P010)
/// at source size first; then they are scaled, rotated, colour-converted (or tone-mapped) and
/// watermarked on the GPU. HDR kept comes back as 10-bit frames.
pub struct WgpuCompositor {
    ctx: GpuContext,
    spec: ComposeSpec,
    frames_in_flight: usize,
    stream: Option<GpuStream>,
}

impl WgpuCompositor {
    pub fn new(ctx: &GpuContext, spec: ComposeSpec, frames_in_flight: usize) -> Self {
        WgpuCompositor {
            ctx: ctx.clone(),
            spec,
            frames_in_flight: frames_in_flight.max(1),
            stream: None,
        }
    }

    /// Builds the GPU compositor for the stream's first frame.
    fn start(&self, frame: &frame::Video) -> Result<GpuStream, MediaError> {
        let light = self.spec.light;
        let hdr_source = light.hdr_source();
        let conv = match hdr_source {
            Some(source) => SourceConverter::keeping(frame, source)?,
            None => SourceConverter::for_frame(frame)?,
        };
        let color = color_of(frame);
        // Read as is when the shader knows the layout and the matrix (or the stream is HDR);
        // else planar 8-bit, or P010 for HDR so its 10 bits survive.
        let hdr = hdr_source.is_some();
        let (pix, format) = match gpu_layout(frame.format()) {
            Some(format) if color.spec.is_some() || hdr => (frame.format(), format),
            _ if hdr => (Pixel::P010LE, SourceFormat::P010),
            _ => (Pixel::YUV420P, SourceFormat::Yuv420p),
        };
        let (w, h) = conv.size();
        let cfg = ComposeConfig {
            src_width: w,
            src_height: h,
            src_color: conv.spec(),
            rotation: self.spec.rotation,
            out_width: self.spec.out_width,
            out_height: self.spec.out_height,
            watermark: self.spec.watermark.clone(),
            src_format: format,
            light,
        };
        let gpu = GpuCompositor::new(&self.ctx, cfg, self.frames_in_flight)?;
        tracing::debug!(
            decoded = ?frame.format(),
            gpu_input = format.as_str(),
            gpu_bytes = gpu.gpu_bytes(),
            "GPU compositor input"
        );
        Ok(GpuStream {
            gpu,
            pix,
            format,
            conv,
            converted: frame::Video::empty(),
            hdr,
        })
    }
}

impl Compositor for WgpuCompositor {
    fn push(&mut self, frame: &frame::Video) -> Result<Option<Yuv420Frame>, MediaError> {
        check_frame(frame)?;
        if self.stream.is_none() {
            self.stream = Some(self.start(frame)?);
        }
        let Some(stream) = self.stream.as_mut() else {
            return Err(MediaError::failed("GPU compositor not initialised"));
        };
        if stream.reads_as_is(frame) {
            return Ok(stream.gpu.submit(as_source(frame, stream.format))?);
        }
        let (w, h) = stream.conv.size();
        if stream.converted.format() != stream.pix
            || (stream.converted.width(), stream.converted.height()) != (w, h)
        {
            stream.converted = frame::Video::new(stream.pix, w, h);
        }
        stream.conv.convert_video(frame, &mut stream.converted)?;
        Ok(stream
            .gpu
            .submit(as_source(&stream.converted, stream.format))?)
    }

    fn finish(&mut self) -> Result<Vec<Yuv420Frame>, MediaError> {
        match self.stream.as_mut() {
            Some(stream) => Ok(stream.gpu.finish()?),
            None => Ok(Vec::new()),
        }
    }

    fn backend(&self) -> String {
        self.ctx.adapter().name.clone()
    }
}
