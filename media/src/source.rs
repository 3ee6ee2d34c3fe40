//! Opening an input: validating the file, finding the video/audio streams and reading what the
//! pipeline needs (rotation, aspect, colour, rates).

use std::io::Read;
use std::path::{Path, PathBuf};

use ffmpeg::ffi;
use ffmpeg::format::context::Input;
use ffmpeg::{Rational, codec, decoder, media};
use ffmpeg_next as ffmpeg;
use vidforge_gpu::{ColorSpec, Matrix, Range, Rotation};

use crate::error::MediaError;
use crate::hwdecode::CudaDevice;

/// Sources from this size up (about 4K UHD) decode with one frame thread per core.
const BIG_SOURCE_PIXELS: u64 = 3840 * 2160 * 9 / 10;

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
    pub fn check(&self, width: u32, height: u32) -> Result<(), String> {
        let pixels = width as u64 * height as u64;
        if width > self.max_side || height > self.max_side {
            return Err(format!(
                "the picture is {width}x{height}; at most {} pixels per side are accepted",
                self.max_side
            ));
        }
        if pixels > self.max_pixels {
            return Err(format!(
                "the picture is {width}x{height} ({:.1} megapixels); at most {:.1} megapixels are accepted",
                pixels as f64 / 1e6,
                self.max_pixels as f64 / 1e6
            ));
        }
        Ok(())
    }
}

impl Default for SourceLimits {
    fn default() -> Self {
        SourceLimits::DEFAULT
    }
}

/// Why [`open_input_bounded`] failed.
enum OpenInputError {
    Ffmpeg(ffmpeg::Error),
    /// A stream's header names a picture over the limits.
    TooLarge(String),
}

/// `ffmpeg::format::input`, bounded: streams whose header names a picture over `limits` are
/// refused before `avformat_find_stream_info` decodes anything, and the decoders it opens get
/// `max_pixels` so a picture that only shows its size once decoded is refused without being
/// allocated.
fn open_input_bounded(path: &Path, limits: &SourceLimits) -> Result<Input, OpenInputError> {
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

/// An opened input with its chosen streams.
pub(crate) struct Source {
    pub input: Input,
    pub path: PathBuf,
    pub format_name: String,
    pub size_bytes: u64,
    pub duration_seconds: f64,
    /// The duration the container declares, in seconds: `None` when it is unknown or only
    /// estimated from the bitrate.
    pub container_duration_declared: Option<f64>,
    /// Container start time in AV_TIME_BASE units; subtracted from every timestamp.
    pub start_time_us: i64,
    pub video: VideoMeta,
    pub audio: Option<AudioMeta>,
}

#[derive(Clone, Debug)]
pub(crate) struct VideoMeta {
    pub index: usize,
    pub codec_name: String,
    pub width: u32,
    pub height: u32,
    pub pix_fmt: Option<String>,
    pub bit_depth: Option<u32>,
    pub rotation: Rotation,
    /// Sample aspect ratio (1:1 when unknown).
    pub sar: (i32, i32),
    /// Display size: after rotation and sample aspect ratio.
    pub display_width: u32,
    pub display_height: u32,
    pub time_base: Rational,
    pub avg_fps: f64,
    /// The duration the video stream itself declares, in seconds: `None` when it is unknown
    /// or only estimated from the bitrate.
    pub duration_declared: Option<f64>,
    pub frames_estimate: Option<u64>,
    /// The frame count the container itself declares (not estimated), when it does.
    pub frames_declared: Option<u64>,
    pub color_space: ffmpeg::color::Space,
    pub color_range: ffmpeg::color::Range,
}

#[derive(Clone, Debug)]
pub(crate) struct AudioMeta {
    pub index: usize,
    pub codec_id: codec::Id,
    pub codec_name: String,
    pub sample_rate: u32,
    pub channels: u32,
    pub time_base: Rational,
}

/// `ffmpeg::init` once, with FFmpeg's own logging kept quiet (errors surface as typed errors).
pub fn init() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Err(e) = ffmpeg::init() {
            tracing::error!("ffmpeg init failed: {e}");
        }
        ffmpeg::util::log::set_level(ffmpeg::util::log::Level::Fatal);
    });
}

fn codec_name(id: codec::Id) -> String {
    match id {
        codec::Id::None => "unknown".to_string(),
        other => other.name().to_string(),
    }
}

/// Demuxers that produce a single still picture: an image is not a video.
fn is_still_image_format(name: &str) -> bool {
    name == "image2" || name.ends_with("_pipe")
}

/// Heuristic: the head of the file is text (UTF-8 without control bytes).
fn looks_like_text(path: &Path) -> bool {
    let mut head = [0u8; 4096];
    let Ok(mut f) = std::fs::File::open(path) else {
        return false;
    };
    let Ok(n) = f.read(&mut head) else {
        return false;
    };
    if n == 0 {
        return false;
    }
    let head = &head[..n];
    if head
        .iter()
        .any(|&b| b < 0x09 || (b > 0x0d && b < 0x20) || b == 0x7f)
    {
        return false;
    }
    match std::str::from_utf8(head) {
        Ok(_) => true,
        // A multi-byte character cut at the 4 KiB boundary is still text.
        Err(e) => e.error_len().is_none() && e.valid_up_to() + 4 > n,
    }
}

/// Checks the file exists, is a readable, non-empty regular file. Returns its size.
pub(crate) fn check_readable(what: &'static str, path: &Path) -> Result<u64, MediaError> {
    let meta = std::fs::metadata(path).map_err(|e| MediaError::not_found(what, path, e))?;
    if meta.is_dir() {
        return Err(MediaError::not_found(what, path, "is a directory"));
    }
    std::fs::File::open(path).map_err(|e| MediaError::not_found(what, path, e))?;
    if meta.len() == 0 {
        return Err(MediaError::invalid(format!(
            "{what} {} is empty (0 bytes)",
            path.display()
        )));
    }
    Ok(meta.len())
}

/// Clockwise rotation that makes the picture upright: from the display matrix, else the legacy
/// `rotate` tag.
fn stream_rotation(stream: &ffmpeg::format::stream::Stream) -> Rotation {
    for sd in stream.side_data() {
        if sd.kind() == ffmpeg::codec::packet::side_data::Type::DisplayMatrix {
            let data = sd.data();
            if data.len() >= 36 {
                // av_display_rotation_get reads 9 int32s; copy to an aligned buffer first.
                let mut m = [0i32; 9];
                for (i, v) in m.iter_mut().enumerate() {
                    *v = i32::from_ne_bytes([
                        data[i * 4],
                        data[i * 4 + 1],
                        data[i * 4 + 2],
                        data[i * 4 + 3],
                    ]);
                }
                // SAFETY: m holds the 9 values the function reads.
                let ccw = unsafe { ffi::av_display_rotation_get(m.as_ptr()) };
                if ccw.is_finite() {
                    // The matrix angle is counter-clockwise; we apply clockwise (as FFmpeg's
                    // autorotate does).
                    return Rotation::from_clockwise_degrees(-(ccw.round() as i64));
                }
            }
        }
    }
    if let Some(tag) = stream.metadata().get("rotate")
        && let Ok(deg) = tag.trim().parse::<f64>()
        && deg.is_finite()
    {
        return Rotation::from_clockwise_degrees(deg.round() as i64);
    }
    Rotation::None
}

fn rational_f64(r: Rational) -> Option<f64> {
    (r.numerator() > 0 && r.denominator() > 0)
        .then(|| r.numerator() as f64 / r.denominator() as f64)
}

/// What [`open_any`] found: a video to render, or a file with sound but no picture.
pub(crate) enum Opened {
    Video(Box<Source>),
    AudioOnly {
        format_name: String,
        size_bytes: u64,
        duration_seconds: f64,
        audio: AudioMeta,
    },
}

/// Opens `path` and picks the streams to render. Typed errors for every way that can fail.
pub(crate) fn open(path: &Path) -> Result<Source, MediaError> {
    match open_any(path, &SourceLimits::ENGINE)? {
        Opened::Video(s) => Ok(*s),
        Opened::AudioOnly {
            format_name, audio, ..
        } => Err(MediaError::unsupported(format!(
            "{} has no video stream (audio-only {format_name} file with {} audio)",
            path.display(),
            audio.codec_name
        ))),
    }
}

fn best_audio(input: &Input) -> Option<AudioMeta> {
    input
        .streams()
        .best(media::Type::Audio)
        .filter(|s| s.parameters().id() != codec::Id::None)
        .map(|s| {
            let p = s.parameters();
            // SAFETY: codecpar valid.
            let (rate, channels) = unsafe {
                (
                    (*p.as_ptr()).sample_rate,
                    (*p.as_ptr()).ch_layout.nb_channels,
                )
            };
            AudioMeta {
                index: s.index(),
                codec_id: p.id(),
                codec_name: codec_name(p.id()),
                sample_rate: rate.max(0) as u32,
                channels: channels.max(0) as u32,
                time_base: s.time_base(),
            }
        })
        .filter(|a| a.sample_rate > 0 && a.channels > 0)
}

fn container_duration(input: &Input) -> Option<f64> {
    (input.duration() > 0).then(|| input.duration() as f64 / ffi::AV_TIME_BASE as f64)
}

/// Like [`open`], but a file with audio and no video is not an error.
pub(crate) fn open_any(path: &Path, limits: &SourceLimits) -> Result<Opened, MediaError> {
    crate::init();
    let size_bytes = check_readable("input file", path)?;
    let mut input = match open_input_bounded(path, limits) {
        Ok(i) => i,
        Err(OpenInputError::TooLarge(reason)) => {
            return Err(MediaError::invalid(format!("{}: {reason}", path.display())));
        }
        Err(OpenInputError::Ffmpeg(e)) => {
            if looks_like_text(path) {
                return Err(MediaError::unsupported(format!(
                    "{} is a text file, not a video",
                    path.display()
                )));
            }
            return Err(MediaError::invalid(format!(
                "{} is not a readable media file ({e}); it may be corrupt or truncated",
                path.display()
            )));
        }
    };
    let format_name = input.format().name().to_string();
    if format_name == "tty" || (looks_like_text(path) && format_name != "lavfi") {
        // FFmpeg opens some text as ANSI art or subtitles; neither is a video.
        let has_real_video = input.streams().any(|s| {
            s.parameters().medium() == media::Type::Video
                && !matches!(s.parameters().id(), codec::Id::ANSI | codec::Id::TEXT)
        });
        if format_name == "tty" || !has_real_video {
            return Err(MediaError::unsupported(format!(
                "{} is a text file, not a video",
                path.display()
            )));
        }
    }
    if is_still_image_format(&format_name) {
        let codec = input
            .streams()
            .next()
            .map(|s| codec_name(s.parameters().id()))
            .unwrap_or_else(|| "unknown".into());
        return Err(MediaError::unsupported(format!(
            "{} is a still image ({codec}), not a video",
            path.display()
        )));
    }

    let video_stream = input
        .streams()
        .filter(|s| {
            s.parameters().medium() == media::Type::Video
                && !s
                    .disposition()
                    .contains(ffmpeg::format::stream::Disposition::ATTACHED_PIC)
        })
        .max_by_key(|s| {
            // Prefer the default stream, then the largest picture (like av_find_best_stream).
            let p = s.parameters();
            // SAFETY: parameters pointer is valid for the stream's lifetime.
            let (w, h) = unsafe { ((*p.as_ptr()).width as i64, (*p.as_ptr()).height as i64) };
            let default =
                s.disposition()
                    .contains(ffmpeg::format::stream::Disposition::DEFAULT) as i64;
            (default, w * h)
        });
    let Some(vs) = video_stream else {
        if let Some(audio) = best_audio(&input) {
            return Ok(Opened::AudioOnly {
                duration_seconds: container_duration(&input).unwrap_or(0.0),
                format_name,
                size_bytes,
                audio,
            });
        }
        let has_picture = input
            .streams()
            .any(|s| s.parameters().medium() == media::Type::Video);
        return Err(if has_picture {
            MediaError::unsupported(format!(
                "{} has only a cover picture, no video stream",
                path.display()
            ))
        } else if looks_like_text(path) {
            MediaError::unsupported(format!("{} is a text file, not a video", path.display()))
        } else {
            MediaError::invalid(format!(
                "{} has no audio or video streams; it is not a media file or is corrupt",
                path.display()
            ))
        });
    };

    let params = vs.parameters();
    let codec_id = params.id();
    let codec_str = codec_name(codec_id);
    // SAFETY: codecpar is valid while `input` lives.
    let (width, height, raw_format) = unsafe {
        let p = params.as_ptr();
        ((*p).width, (*p).height, (*p).format)
    };
    if ffmpeg::decoder::find(codec_id).is_none() {
        return Err(MediaError::unsupported(format!(
            "no decoder for video codec '{codec_str}' in {}",
            path.display()
        )));
    }
    if width <= 0 || height <= 0 {
        return Err(MediaError::invalid(format!(
            "video stream of {} has no usable dimensions ({width}x{height}); the file may be corrupt",
            path.display()
        )));
    }
    let (width, height) = (width as u32, height as u32);
    if let Err(reason) = limits.check(width, height) {
        return Err(MediaError::invalid(format!("{}: {reason}", path.display())));
    }

    let (pix_fmt, bit_depth) = if raw_format >= 0 {
        // SAFETY: av_get_pix_fmt_name/av_pix_fmt_desc_get accept any value and return NULL for
        // unknown ones.
        unsafe {
            let fmt: ffi::AVPixelFormat =
                std::mem::transmute::<i32, ffi::AVPixelFormat>(raw_format);
            let name = ffi::av_get_pix_fmt_name(fmt);
            let desc = ffi::av_pix_fmt_desc_get(fmt);
            let name = (!name.is_null()).then(|| {
                std::ffi::CStr::from_ptr(name)
                    .to_string_lossy()
                    .into_owned()
            });
            let depth = (!desc.is_null()).then(|| (*desc).comp[0].depth as u32);
            (name, depth)
        }
    } else {
        (None, None)
    };

    let rotation = stream_rotation(&vs);
    // SAFETY: valid context and stream pointers; a null frame is allowed.
    let sar = unsafe {
        let r = ffi::av_guess_sample_aspect_ratio(
            input.as_ptr() as *mut _,
            vs.as_ptr() as *mut _,
            std::ptr::null_mut(),
        );
        if r.num > 0 && r.den > 0 {
            (r.num, r.den)
        } else {
            (1, 1)
        }
    };
    let (dw, dh) = display_size(width, height, sar, rotation);

    let time_base = vs.time_base();
    let avg_fps = rational_f64(vs.avg_frame_rate())
        .or_else(|| rational_f64(vs.rate()))
        .filter(|f| *f > 0.0 && *f < 1000.0)
        .unwrap_or(0.0);
    let stream_duration = (vs.duration() > 0)
        .then(|| vs.duration() as f64 * f64::from(time_base))
        .filter(|d| d.is_finite() && *d > 0.0);
    let duration_seconds = container_duration(&input)
        .or(stream_duration)
        .unwrap_or(0.0);
    let frames_declared = (vs.frames() > 0).then_some(vs.frames() as u64);
    // SAFETY: plain field read.
    let from_bitrate = unsafe {
        (*input.as_ptr()).duration_estimation_method
            == ffi::AVDurationEstimationMethod::AVFMT_DURATION_FROM_BITRATE
    };
    let (duration_declared, container_duration_declared) = if from_bitrate {
        (None, None)
    } else {
        (stream_duration, container_duration(&input))
    };
    let frames_estimate = if vs.frames() > 0 {
        Some(vs.frames() as u64)
    } else {
        let d = stream_duration.unwrap_or(duration_seconds);
        (d > 0.0 && avg_fps > 0.0).then(|| (d * avg_fps).round() as u64)
    };
    // SAFETY: codecpar valid.
    let (color_space, color_range) = unsafe {
        let p = params.as_ptr();
        (
            ffmpeg::color::Space::from((*p).color_space),
            ffmpeg::color::Range::from((*p).color_range),
        )
    };
    let video = VideoMeta {
        index: vs.index(),
        codec_name: codec_str,
        width,
        height,
        pix_fmt,
        bit_depth,
        rotation,
        sar,
        display_width: dw,
        display_height: dh,
        time_base,
        avg_fps,
        duration_declared,
        frames_estimate,
        frames_declared,
        color_space,
        color_range,
    };

    let audio = best_audio(&input);

    // SAFETY: plain field read.
    let start_time_us = unsafe { (*input.as_ptr()).start_time };
    let start_time_us = if start_time_us == ffi::AV_NOPTS_VALUE {
        0
    } else {
        start_time_us
    };
    // Only the chosen streams are demuxed; the rest are dropped at the source.
    let keep = [Some(video.index), audio.as_ref().map(|a| a.index)];
    for mut s in input.streams_mut() {
        if !keep.contains(&Some(s.index())) {
            // SAFETY: setting the discard flag on a valid stream.
            unsafe { (*s.as_mut_ptr()).discard = ffi::AVDiscard::AVDISCARD_ALL };
        }
    }
    Ok(Opened::Video(Box::new(Source {
        input,
        path: path.to_path_buf(),
        format_name,
        size_bytes,
        duration_seconds,
        container_duration_declared,
        start_time_us,
        video,
        audio,
    })))
}

/// Display size of a `w x h` coded picture with sample aspect `sar`, after `rotation`.
pub(crate) fn display_size(w: u32, h: u32, sar: (i32, i32), rotation: Rotation) -> (u32, u32) {
    let dw = if sar.0 > 0 && sar.1 > 0 && sar.0 != sar.1 {
        ((w as f64 * sar.0 as f64 / sar.1 as f64).round() as u32).max(1)
    } else {
        w
    };
    rotation.display_size(dw, h)
}

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
    /// With a CUDA device the decoder uses NVDEC when FFmpeg has a `cuda` hwaccel for the
    /// codec (the flag says whether it does); frames then need [`crate::hwdecode::download`].
    pub fn video_decoder_for_output(
        &self,
        out: (u32, u32),
        cuda: Option<&CudaDevice>,
    ) -> Result<(decoder::Video, bool), MediaError> {
        let pixels = |(w, h): (u32, u32)| u64::from(w) * u64::from(h);
        let src = pixels((self.video.width, self.video.height));
        let threads = if pixels(out) >= src || src >= BIG_SOURCE_PIXELS {
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
            && crate::hwdecode::cuda_supports(unsafe {
                ffi::avcodec_find_decoder((*ctx.as_ptr()).codec_id)
            });
        let on_gpu = crate::hardware::decode_on_gpu(cuda, supported);
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

    /// Container start time in `tb` units.
    pub fn start_offset(&self, tb: Rational) -> i64 {
        if self.start_time_us == 0 {
            return 0;
        }
        // SAFETY: pure arithmetic.
        unsafe {
            ffi::av_rescale_q(
                self.start_time_us,
                ffi::AVRational {
                    num: 1,
                    den: ffi::AV_TIME_BASE,
                },
                tb.into(),
            )
        }
    }
}

/// The colour a decoded frame is in, as far as the compositors can express it. `None` matrix
/// means "not BT.601/BT.709" (BT.2020, YCgCo, ...): swscale converts those.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FrameColor {
    /// The swscale/AVColorSpace coefficient id to read the source with.
    pub sws_space: i32,
    pub full_range: bool,
    /// The same as a gpu ColorSpec when the matrix is one the GPU path supports.
    pub spec: Option<ColorSpec>,
}

/// Resolves a frame's colour tags. Untagged video uses the common player rule: BT.709 from
/// 720 lines up (or 1280 wide), BT.601 below.
pub(crate) fn frame_color(
    space: ffmpeg::color::Space,
    range: ffmpeg::color::Range,
    pix_fmt: ffmpeg::format::Pixel,
    width: u32,
    height: u32,
) -> FrameColor {
    use ffmpeg::color::Space as S;
    use ffmpeg::format::Pixel as P;
    let full_range = range == ffmpeg::color::Range::JPEG
        || matches!(
            pix_fmt,
            P::YUVJ420P | P::YUVJ422P | P::YUVJ444P | P::YUVJ440P | P::YUVJ411P
        );
    let hd = height >= 720 || width >= 1280;
    let (sws_space, matrix) = match space {
        S::BT709 => (ffi::SWS_CS_ITU709, Some(Matrix::Bt709)),
        S::BT470BG | S::SMPTE170M => (ffi::SWS_CS_ITU601, Some(Matrix::Bt601)),
        S::FCC => (ffi::SWS_CS_FCC, None),
        S::SMPTE240M => (ffi::SWS_CS_SMPTE240M, None),
        S::BT2020NCL | S::BT2020CL => (ffi::SWS_CS_BT2020, None),
        _ if hd => (ffi::SWS_CS_ITU709, Some(Matrix::Bt709)),
        _ => (ffi::SWS_CS_ITU601, Some(Matrix::Bt601)),
    };
    let range = if full_range {
        Range::Full
    } else {
        Range::Limited
    };
    FrameColor {
        sws_space,
        full_range,
        spec: matrix.map(|matrix| ColorSpec { matrix, range }),
    }
}
