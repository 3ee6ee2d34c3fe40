//! The wgpu compositor: decoded frames to the GPU compositor of the gpu crate, as they are
//! where the shader reads their layout, converted first where not. NVDEC frames left on the
//! GPU (the zero-copy path) are copied device to device into the compositor's exported
//! inputs; those it cannot take so (another layout, size or colour mid-stream) are
//! downloaded here and take the host path.

use std::time::{Duration, Instant};

use ffmpeg::format::Pixel;
use ffmpeg::frame;
use ffmpeg_next as ffmpeg;
use vidforge_gpu::{
    ComposeConfig, GpuCompositor, GpuContext, SourceFormat, SourceFrame, Yuv420Frame,
};

use super::convert::SourceConverter;
use super::spec::{ComposeSpec, Compositor, check_frame, color_of};
use crate::error::MediaError;
use crate::hwdecode;
use crate::types::Hops;
use crate::zero_copy::{self, ZeroCopyInput, ZeroCopyPath};

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
    /// The compositor's inputs mapped into CUDA (zero-copy streams); dropped before `gpu`.
    zero_copy: Option<ZeroCopyInput>,
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
    /// Whether `frame` (in system memory, or its surfaces' layout for a CUDA frame) is what
    /// the compositor was built for.
    fn reads_as_is(&self, frame: &frame::Video) -> bool {
        let pix = hwdecode::cuda_sw_format(frame).unwrap_or(frame.format());
        pix == self.pix
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
    /// Set when CUDA frames may come: their way into the compositor without a download.
    zero_copy: Option<ZeroCopyPath>,
    /// CUDA frames downloaded here, and frames that went zero-copy.
    download: Duration,
    zero_copy_frames: u64,
}

impl WgpuCompositor {
    pub fn new(ctx: &GpuContext, spec: ComposeSpec, frames_in_flight: usize) -> Self {
        WgpuCompositor {
            ctx: ctx.clone(),
            spec,
            frames_in_flight: frames_in_flight.max(1),
            stream: None,
            zero_copy: None,
            download: Duration::ZERO,
            zero_copy_frames: 0,
        }
    }

    /// Takes NVDEC's frames on the GPU through `path` (frames still come in any form).
    pub(crate) fn with_zero_copy(mut self, path: ZeroCopyPath) -> Self {
        self.zero_copy = Some(path);
        self
    }

    /// A system-memory copy of the CUDA frame `frame`, timed.
    fn download(&mut self, frame: &frame::Video) -> Result<frame::Video, MediaError> {
        let t = Instant::now();
        let sw = hwdecode::download_copy(frame);
        self.download += t.elapsed();
        sw
    }

    /// A CUDA frame: copied device to device into the compositor when the stream goes
    /// zero-copy and the frame is what it was built for; else downloaded and composed from
    /// system memory. The stream starts from the first frame's download (once), so it is
    /// built exactly as the download path would build it.
    fn push_cuda(&mut self, frame: &frame::Video) -> Result<Option<Yuv420Frame>, MediaError> {
        let device = zero_copy::device_frame(frame);
        let mut first = None;
        if self.stream.is_none() {
            let sw = self.download(frame)?;
            self.stream = Some(self.start(&sw, device.is_some())?);
            first = Some(sw);
        }
        let Some(stream) = self.stream.as_mut() else {
            return Err(MediaError::failed("GPU compositor not initialised"));
        };
        if let (Some(input), Some(device)) = (&stream.zero_copy, &device)
            && stream.reads_as_is(frame)
            && let Ok(copies) = input.copies(device)
        {
            self.zero_copy_frames += 1;
            return input.submit(&mut stream.gpu, &copies);
        }
        // The first frame was downloaded to start the stream: compose that copy.
        let sw = match first {
            Some(sw) => sw,
            None => self.download(frame)?,
        };
        self.push_host(&sw)
    }

    /// A frame in system memory: read as is, or converted to the stream's format first.
    fn push_host(&mut self, frame: &frame::Video) -> Result<Option<Yuv420Frame>, MediaError> {
        if self.stream.is_none() {
            self.stream = Some(self.start(frame, false)?);
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

    /// The compositor for `cfg`: with inputs CUDA writes when `device_frames` come and the
    /// stream reads them as they are (`as_is`), else uploading. A zero-copy compositor that
    /// cannot be made (e.g. out of exportable memory) falls back to uploads, logged.
    fn build(
        &self,
        cfg: ComposeConfig,
        device_frames: bool,
        as_is: bool,
    ) -> Result<(GpuCompositor, Option<ZeroCopyInput>), MediaError> {
        if let Some(path) = self.zero_copy.as_ref().filter(|_| device_frames && as_is) {
            let made =
                GpuCompositor::with_external_input(&self.ctx, cfg.clone(), self.frames_in_flight)
                    .map_err(MediaError::from)
                    .and_then(|mut gpu| {
                        ZeroCopyInput::new(path, &mut gpu).map(|input| (gpu, input))
                    });
            match made {
                Ok((gpu, input)) => return Ok((gpu, Some(input))),
                Err(e) => tracing::warn!("zero-copy input unavailable, uploading frames: {e}"),
            }
        }
        Ok((
            GpuCompositor::new(&self.ctx, cfg, self.frames_in_flight)?,
            None,
        ))
    }

    /// Builds the GPU compositor for the stream's first frame (in system memory); with
    /// `device_frames`, the stream's frames come on the GPU.
    fn start(&self, frame: &frame::Video, device_frames: bool) -> Result<GpuStream, MediaError> {
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
        let (gpu, zero_copy) = self.build(cfg, device_frames, pix == frame.format())?;
        tracing::debug!(
            decoded = ?frame.format(),
            gpu_input = format.as_str(),
            gpu_bytes = gpu.gpu_bytes(),
            zero_copy = zero_copy.is_some(),
            "GPU compositor input"
        );
        Ok(GpuStream {
            zero_copy,
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
        if frame.format() == Pixel::CUDA {
            return self.push_cuda(frame);
        }
        self.push_host(frame)
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

    fn hops(&self) -> Hops {
        let gpu = self
            .stream
            .as_ref()
            .map(|s| s.gpu.hop_times())
            .unwrap_or_default();
        Hops {
            download: self.download,
            copy_in: gpu.input,
            submit: gpu.submit,
            gpu_wait: gpu.wait,
            readback: gpu.readback,
            zero_copy_frames: self.zero_copy_frames,
        }
    }
}
