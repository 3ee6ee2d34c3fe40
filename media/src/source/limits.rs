//! How large a source may be ([`SourceLimits`]), and opening an input within those limits.

use std::path::Path;

use ffmpeg::ffi;
use ffmpeg::format::context::Input;
use ffmpeg_next as ffmpeg;

/// Largest width or height the engine accepts (also the wgpu texture limit).
pub const MAX_DIMENSION: u32 = 16384;

/// How large a source picture may be. Checked from the container header before anything is
/// decoded, and enforced on the decoders that probing runs (FFmpeg's `max_pixels`), so a tiny
/// file declaring a huge picture costs no huge allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceLimits {
    /// Largest width or height.
    pub max_side: u32,
    /// Largest width x height.
    pub max_pixels: u64,
}

impl SourceLimits {
    /// What the engine itself can render ([`MAX_DIMENSION`] per side).
    pub const ENGINE: SourceLimits = SourceLimits {
        max_side: MAX_DIMENSION,
        max_pixels: MAX_DIMENSION as u64 * MAX_DIMENSION as u64,
    };

    /// A default that covers real 8K footage (7680x4320, DCI 8K 8192x4320) and nothing much
    /// larger.
    pub const DEFAULT: SourceLimits = SourceLimits {
        max_side: 8192,
        max_pixels: 8192 * 4320,
    };

    /// `Err` with a clear message when a `width` x `height` picture is over the limits.
    pub fn check(&self, width: u32, height: u32) -> Result<(), OverLimits> {
        let pixels = width as u64 * height as u64;
        if width > self.max_side || height > self.max_side {
            return Err(OverLimits::Side {
                width,
                height,
                max_side: self.max_side,
            });
        }
        if pixels > self.max_pixels {
            return Err(OverLimits::Pixels {
                width,
                height,
                megapixels: pixels as f64 / 1e6,
                max_megapixels: self.max_pixels as f64 / 1e6,
            });
        }
        Ok(())
    }
}

/// A picture over [`SourceLimits`]: which limit, in words a user can act on.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum OverLimits {
    /// Wider or taller than `max_side`.
    #[error("the picture is {width}x{height}; at most {max_side} pixels per side are accepted")]
    Side {
        width: u32,
        height: u32,
        max_side: u32,
    },
    /// More pixels than the limit (in megapixels).
    #[error(
        "the picture is {width}x{height} ({megapixels:.1} megapixels); at most {max_megapixels:.1} megapixels are accepted"
    )]
    Pixels {
        width: u32,
        height: u32,
        megapixels: f64,
        max_megapixels: f64,
    },
}

impl Default for SourceLimits {
    fn default() -> Self {
        SourceLimits::DEFAULT
    }
}

/// Why [`open_input_bounded`] failed.
pub(crate) enum OpenInputError {
    Ffmpeg(ffmpeg::Error),
    /// A stream's header names a picture over the limits.
    TooLarge(OverLimits),
}

/// `ffmpeg::format::input`, bounded: streams whose header names a picture over `limits` are
/// refused before `avformat_find_stream_info` decodes anything, and the decoders it opens get
/// `max_pixels` so a picture that only shows its size once decoded is refused without being
/// allocated.
pub(crate) fn open_input_bounded(
    path: &Path,
    limits: &SourceLimits,
) -> Result<Input, OpenInputError> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| OpenInputError::Ffmpeg(ffmpeg::Error::InvalidData))?;
    let max_pixels = CString::new(limits.max_pixels.min(i32::MAX as u64).to_string())
        .map_err(|_| OpenInputError::Ffmpeg(ffmpeg::Error::InvalidData))?;
    let key = c"max_pixels";
    // SAFETY: the usual avformat_open_input / avformat_find_stream_info sequence (as in
    // ffmpeg::format::input): `ps` is only used after a successful open, is closed on every
    // error path, and is owned by the returned `Input` otherwise. The per-stream option
    // dictionaries are allocated by av_dict_set, passed as an array of `nb_streams` entries
    // as avformat_find_stream_info requires, and freed afterwards.
    unsafe {
        let mut ps = std::ptr::null_mut();
        let r = ffi::avformat_open_input(
            &mut ps,
            c_path.as_ptr(),
            std::ptr::null(),
            std::ptr::null_mut(),
        );
        if r != 0 {
            return Err(OpenInputError::Ffmpeg(ffmpeg::Error::from(r)));
        }
        let n = (*ps).nb_streams as usize;
        for i in 0..n {
            let par = (*(*(*ps).streams.add(i))).codecpar;
            let (w, h) = ((*par).width, (*par).height);
            if (*par).codec_type == ffi::AVMediaType::AVMEDIA_TYPE_VIDEO && w > 0 && h > 0 {
                if let Err(reason) = limits.check(w as u32, h as u32) {
                    ffi::avformat_close_input(&mut ps);
                    return Err(OpenInputError::TooLarge(reason));
                }
            }
        }
        let mut options: Vec<*mut ffi::AVDictionary> = vec![std::ptr::null_mut(); n];
        for o in options.iter_mut() {
            ffi::av_dict_set(o, key.as_ptr(), max_pixels.as_ptr(), 0);
        }
        let r = ffi::avformat_find_stream_info(
            ps,
            if n == 0 {
                std::ptr::null_mut()
            } else {
                options.as_mut_ptr()
            },
        );
        for o in options.iter_mut() {
            ffi::av_dict_free(o);
        }
        if r < 0 {
            ffi::avformat_close_input(&mut ps);
            return Err(OpenInputError::Ffmpeg(ffmpeg::Error::from(r)));
        }
        Ok(Input::wrap(ps))
    }
}
