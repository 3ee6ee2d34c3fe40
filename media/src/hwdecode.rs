//! NVDEC decoding through FFmpeg's `cuda` hwaccel: one CUDA device per process (opened by
//! the [`crate::Engine`], shared by every render's decoder), attached to a decoder before it
//! opens; decoded surfaces come back to system memory as NV12 (P010 for 10-bit), the layouts
//! the wgpu compositor reads directly, so no CPU colour conversion follows.
//!
//! The download is FFmpeg's `av_hwframe_transfer_data` (a CUDA 2D copy into the frame's
//! buffer), on the decode thread. With the zero-copy path (`crate::zero_copy`) frames stay on
//! the GPU instead and the compose stage copies them into the compositor's memory; only
//! frames it cannot take that way are downloaded, there.

use std::ffi::CStr;
use std::ptr;

use ffmpeg::ffi;
use ffmpeg::frame;
use ffmpeg_next as ffmpeg;

use crate::error::MediaError;

/// A reference to an FFmpeg CUDA device context (`AVBufferRef`).
pub(crate) struct CudaDevice {
    buf: *mut ffi::AVBufferRef,
}

// SAFETY: an AVBufferRef to a device context is reference counted with atomics; FFmpeg's hw
// device contexts may be used from any thread (each decoder takes its own reference).
unsafe impl Send for CudaDevice {}
// SAFETY: as above: `&CudaDevice` only hands out new references (av_buffer_ref).
unsafe impl Sync for CudaDevice {}

impl Drop for CudaDevice {
    fn drop(&mut self) {
        // SAFETY: `buf` is our own reference.
        unsafe { ffi::av_buffer_unref(&mut self.buf) };
    }
}

impl Clone for CudaDevice {
    fn clone(&self) -> Self {
        // SAFETY: a new reference to a live buffer.
        let buf = unsafe { ffi::av_buffer_ref(self.buf) };
        CudaDevice { buf }
    }
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CudaDevice")
    }
}

fn ffmpeg_error_text(code: i32) -> String {
    ffmpeg::Error::from(code).to_string()
}

impl CudaDevice {
    /// Opens the default CUDA device (needs the NVIDIA driver's libcuda). The error says why
    /// not, in FFmpeg's words.
    pub fn open() -> Result<CudaDevice, String> {
        crate::ffutil::init();
        let mut buf = ptr::null_mut();
        // SAFETY: out-pointer and a null device name / options (the default device).
        let ret = unsafe {
            ffi::av_hwdevice_ctx_create(
                &mut buf,
                ffi::AVHWDeviceType::AV_HWDEVICE_TYPE_CUDA,
                ptr::null(),
                ptr::null_mut(),
                0,
            )
        };
        if ret < 0 || buf.is_null() {
            return Err(format!(
                "FFmpeg could not open a CUDA device ({}); it needs the NVIDIA driver's \
                 libcuda.so.1 and a visible NVIDIA GPU",
                ffmpeg_error_text(ret)
            ));
        }
        Ok(CudaDevice { buf })
    }

    /// FFmpeg's name of the device type.
    pub fn type_name(&self) -> &'static str {
        "cuda"
    }

    /// The CUDA context FFmpeg created for the device and the stream its decoders copy
    /// surfaces on (null: the context's default stream). Valid while `self` lives.
    pub(crate) fn raw_handles(&self) -> (ffi::CUcontext, ffi::CUstream) {
        // SAFETY: `buf` is a live reference to an AVHWDeviceContext of type CUDA (opened by
        // `open`), whose `hwctx` is an AVCUDADeviceContext.
        unsafe {
            let dev = (*self.buf).data as *const ffi::AVHWDeviceContext;
            let cu = (*dev).hwctx as *const ffi::AVCUDADeviceContext;
            ((*cu).cuda_ctx, (*cu).stream)
        }
    }

    /// Attaches the device to an unopened decoder context and makes it ask for CUDA frames.
    ///
    /// # Safety
    /// `ctx` must be a valid, not yet opened decoder context.
    pub unsafe fn attach(&self, ctx: *mut ffi::AVCodecContext) -> Result<(), MediaError> {
        // SAFETY: the caller's contract; the context takes its own reference.
        unsafe {
            let r = ffi::av_buffer_ref(self.buf);
            if r.is_null() {
                return Err(MediaError::failed(
                    "out of memory referencing the CUDA device",
                ));
            }
            (*ctx).hw_device_ctx = r;
            (*ctx).get_format = Some(prefer_cuda);
        }
        Ok(())
    }
}

/// FFmpeg's format negotiation: CUDA surfaces when offered, else the default software
/// choice (FFmpeg calls this again without CUDA when the hwaccel cannot start, e.g. an
/// unsupported profile, so such streams fall back to software by themselves).
unsafe extern "C" fn prefer_cuda(
    ctx: *mut ffi::AVCodecContext,
    fmts: *const ffi::AVPixelFormat,
) -> ffi::AVPixelFormat {
    // SAFETY: FFmpeg passes a list terminated by AV_PIX_FMT_NONE.
    unsafe {
        let mut p = fmts;
        while *p != ffi::AVPixelFormat::AV_PIX_FMT_NONE {
            if *p == ffi::AVPixelFormat::AV_PIX_FMT_CUDA {
                return *p;
            }
            p = p.add(1);
        }
        ffi::avcodec_default_get_format(ctx, fmts)
    }
}

/// The software format of a CUDA frame's surfaces (NV12, P010...): its frames context's
/// `sw_format`; `None` for frames that are not CUDA frames.
pub(crate) fn cuda_sw_format(f: &frame::Video) -> Option<ffmpeg::format::Pixel> {
    if f.format() != ffmpeg::format::Pixel::CUDA {
        return None;
    }
    // SAFETY: a CUDA frame from a decoder carries its frames context (checked non-null).
    unsafe {
        let ctx = (*f.as_ptr()).hw_frames_ctx;
        if ctx.is_null() {
            return None;
        }
        let frames = (*ctx).data as *const ffi::AVHWFramesContext;
        Some((*frames).sw_format.into())
    }
}

/// Whether FFmpeg's native decoder for `codec` has a `cuda` hwaccel configuration.
pub(crate) fn cuda_supports(codec: *const ffi::AVCodec) -> bool {
    if codec.is_null() {
        return false;
    }
    for i in 0.. {
        // SAFETY: iterating a codec's static configurations until null.
        let cfg = unsafe { ffi::avcodec_get_hw_config(codec, i) };
        if cfg.is_null() {
            return false;
        }
        // SAFETY: non-null static configuration.
        let cfg = unsafe { &*cfg };
        if cfg.device_type == ffi::AVHWDeviceType::AV_HWDEVICE_TYPE_CUDA
            && cfg.methods & ffi::AV_CODEC_HW_CONFIG_METHOD_HW_DEVICE_CTX as i32 != 0
        {
            return true;
        }
    }
    false
}

/// Brings a CUDA frame to system memory (NV12 or P010, with the source frame's timestamps
/// and colour tags); other frames pass through untouched.
pub(crate) fn download(f: frame::Video) -> Result<frame::Video, MediaError> {
    if f.format() != ffmpeg::format::Pixel::CUDA {
        return Ok(f);
    }
    download_copy(&f)
}

/// A system-memory copy of the CUDA frame `f` (which stays as it is).
pub(crate) fn download_copy(f: &frame::Video) -> Result<frame::Video, MediaError> {
    let mut sw = frame::Video::empty();
    // SAFETY: `sw` is an empty frame FFmpeg allocates into; `f` is a decoded CUDA frame.
    let ret = unsafe { ffi::av_hwframe_transfer_data(sw.as_mut_ptr(), f.as_ptr(), 0) };
    if ret < 0 {
        return Err(MediaError::failed(format!(
            "downloading a decoded frame from the GPU failed: {}",
            ffmpeg_error_text(ret)
        )));
    }
    // SAFETY: both frames are valid; copies pts, colour tags and side data.
    let ret = unsafe { ffi::av_frame_copy_props(sw.as_mut_ptr(), f.as_ptr()) };
    if ret < 0 {
        return Err(MediaError::failed(format!(
            "copying frame properties: {}",
            ffmpeg_error_text(ret)
        )));
    }
    Ok(sw)
}

/// Codec names of every decoder FFmpeg was built with that matches `keep`.
fn decoders_where(keep: impl Fn(*const ffi::AVCodec, &str) -> bool) -> Vec<String> {
    crate::ffutil::init();
    let mut out = Vec::new();
    let mut opaque = ptr::null_mut();
    // Bounded: FFmpeg has a few hundred codecs.
    for _ in 0..10_000 {
        // SAFETY: FFmpeg's codec iterator with its opaque cursor.
        let c = unsafe { ffi::av_codec_iterate(&mut opaque) };
        if c.is_null() {
            break;
        }
        // SAFETY: static codec descriptors with NUL-terminated names.
        let (is_decoder, name) = unsafe {
            (
                ffi::av_codec_is_decoder(c) != 0,
                CStr::from_ptr((*c).name).to_string_lossy().into_owned(),
            )
        };
        if is_decoder && keep(c, &name) {
            out.push(name);
        }
    }
    out.sort();
    out
}

/// The NVDEC (`*_cuvid`) decoders in this FFmpeg build.
pub(crate) fn cuvid_decoders() -> Vec<String> {
    decoders_where(|_, name| name.ends_with("_cuvid"))
}

/// Decoders with a `cuda` hwaccel (the path vidforge decodes with).
pub(crate) fn cuda_hwaccel_codecs() -> Vec<String> {
    decoders_where(|c, name| !name.ends_with("_cuvid") && cuda_supports(c))
}
