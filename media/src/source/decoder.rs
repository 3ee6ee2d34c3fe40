//! The source's video decoder: threading for the render at hand, NVDEC when the engine has a
//! CUDA device and FFmpeg a `cuda` hwaccel for the codec.

use ffmpeg::{codec, decoder, ffi};
use ffmpeg_next as ffmpeg;

use super::Source;
use crate::error::MediaError;
use crate::hardware;
use crate::hwdecode::{self, CudaDevice};

/// Sources from this size up (about 4K UHD) decode with one frame thread per core.
const BIG_SOURCE_PIXELS: u64 = 3840 * 2160 * 9 / 10;

impl Source {
    /// Opens the video decoder with frame (and slice) threading, FFmpeg's automatic thread
    /// count (cores + 1).
    pub fn video_decoder(&self) -> Result<decoder::Video, MediaError> {
        self.video_decoder_with(0, None).map(|(d, _)| d)
    }

    /// The video decoder for a render to `out` (width, height). Each frame thread beyond the
    /// cores holds one more source frame: one decoder thread per core (not FFmpeg's cores + 1)
    /// when the render is encode-bound (output at least the source size; our decode stage
    /// already runs beside compose and encode, so the extra thread adds no speed) or the
    /// source is 4K-class (12 MB a frame; measured: -25 to -30 MB peak RSS, fps within run
    /// noise). Smaller shrinking renders are decode-bound and keep the automatic count.
    ///
    /// `budget` (threads; 0: the machine) is the render's share of the host's cores when
    /// several run at once (`EncoderSettings::threads`): then exactly that many.
    ///
    /// With a CUDA device the decoder uses NVDEC when FFmpeg has a `cuda` hwaccel for the
    /// codec (the flag says whether it does); frames then need [`crate::hwdecode::download`].
    pub fn video_decoder_for_output(
        &self,
        out: (u32, u32),
        cuda: Option<&CudaDevice>,
        budget: u32,
    ) -> Result<(decoder::Video, bool), MediaError> {
        let pixels = |(w, h): (u32, u32)| u64::from(w) * u64::from(h);
        let src = pixels((self.video.width, self.video.height));
        let threads = if budget > 0 {
            budget as usize
        } else if pixels(out) >= src || src >= BIG_SOURCE_PIXELS {
            std::thread::available_parallelism().map_or(0, |n| n.get())
        } else {
            0
        };
        self.video_decoder_with(threads, cuda)
    }

    /// `threads` 0 lets FFmpeg choose (as the ffmpeg CLI does, with or without a hwaccel).
    fn video_decoder_with(
        &self,
        threads: usize,
        cuda: Option<&CudaDevice>,
    ) -> Result<(decoder::Video, bool), MediaError> {
        let stream = self
            .input
            .stream(self.video.index)
            .ok_or_else(|| MediaError::failed("video stream vanished"))?;
        let mut ctx =
            codec::context::Context::from_parameters(stream.parameters()).map_err(|e| {
                MediaError::unsupported(format!(
                    "cannot set up a decoder for '{}': {e}",
                    self.video.codec_name
                ))
            })?;
        ctx.set_threading(ffmpeg::codec::threading::Config {
            kind: ffmpeg::codec::threading::Type::Frame,
            count: threads,
            ..Default::default()
        });
        // SAFETY: plain field writes on an unopened context. Slice threading helps codecs that
        // cannot frame-thread; FFmpeg picks one of the allowed kinds per codec.
        unsafe {
            let p = ctx.as_mut_ptr();
            (*p).thread_type = ffi::FF_THREAD_FRAME | ffi::FF_THREAD_SLICE;
            (*p).pkt_timebase = stream.time_base().into();
        }
        // SAFETY: looking up the static decoder descriptor of the stream's codec id.
        let supported = cuda.is_some()
            && hwdecode::cuda_supports(unsafe {
                ffi::avcodec_find_decoder((*ctx.as_ptr()).codec_id)
            });
        let on_gpu = hardware::decode_on_gpu(cuda, supported);
        if let Some(device) = cuda.filter(|_| on_gpu) {
            // SAFETY: the context is not opened yet.
            unsafe { device.attach(ctx.as_mut_ptr())? };
        }
        if cuda.is_some() {
            tracing::info!(
                codec = %self.video.codec_name,
                decode = if on_gpu { "nvdec" } else { "software" },
                "{}",
                if on_gpu {
                    "decoding on the GPU (NVDEC)"
                } else {
                    "NVDEC has no decoder for this codec: decoding in software"
                }
            );
        }
        let dec = ctx.decoder().video().map_err(|e| {
            let reason = format!("cannot open the '{}' decoder: {e}", self.video.codec_name);
            match e {
                // Out of memory or threads (a container's memory cap): the machine's fault,
                // not the source's; retrying may work.
                ffmpeg::Error::Other { errno }
                    if errno == ffmpeg::error::ENOMEM || errno == ffmpeg::error::EAGAIN =>
                {
                    MediaError::failed(reason)
                }
                _ => MediaError::unsupported(reason),
            }
        })?;
        Ok((dec, on_gpu))
    }
}
