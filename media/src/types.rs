//! The engine's public vocabulary: jobs, settings, progress and reports.

use std::path::{Path, PathBuf};
use std::time::Duration;

use vidforge_gpu::Position;

use crate::quality::QualityReport;

/// Output resolution class: the output fits inside this box (rotated for vertical video).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Resolution {
    P720,
    P1080,
    P4k,
}

// The canonical names, as the MCP tool schema names them (`from_name`: exactly one).
vidforge_names::enum_names!(Resolution {
    P720 => "720p",
    P1080 => "1080p",
    P4k => "4k",
});

impl Resolution {
    /// Lenient, for people typing (the CLI): `720p`, `1080p`, `4k` (also `2160p`, `720`, ...),
    /// case-insensitively.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "720p" | "720" => Some(Resolution::P720),
            "1080p" | "1080" => Some(Resolution::P1080),
            "4k" | "2160p" | "2160" => Some(Resolution::P4k),
            _ => None,
        }
    }

    /// The landscape bounding box (width, height).
    pub fn box_size(self) -> (u32, u32) {
        match self {
            Resolution::P720 => (1280, 720),
            Resolution::P1080 => (1920, 1080),
            Resolution::P4k => (3840, 2160),
        }
    }
}

impl std::fmt::Display for Resolution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Output container (and with it the codecs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OutputFormat {
    /// H.264 + AAC, `+faststart`.
    Mp4,
    /// VP9 + Opus.
    Webm,
    /// H.264 + AAC in QuickTime.
    Mov,
}

// The canonical names, as the MCP tool schema names them (`from_name`: exactly one).
vidforge_names::enum_names!(OutputFormat {
    Mp4 => "mp4",
    Webm => "webm",
    Mov => "mov",
});

impl OutputFormat {
    /// Lenient, for people typing and file names: also `m4v`, `qt`, a leading dot, any case.
    pub fn parse(s: &str) -> Option<Self> {
        match s
            .trim()
            .trim_start_matches('.')
            .to_ascii_lowercase()
            .as_str()
        {
            "mp4" | "m4v" => Some(OutputFormat::Mp4),
            "webm" => Some(OutputFormat::Webm),
            "mov" | "qt" => Some(OutputFormat::Mov),
            _ => None,
        }
    }

    /// From a path's extension.
    pub fn from_path(path: &Path) -> Option<Self> {
        path.extension()
            .and_then(|e| e.to_str())
            .and_then(Self::parse)
    }

    /// File extension, without the dot.
    pub fn extension(self) -> &'static str {
        self.as_str()
    }

    pub fn mime_type(self) -> &'static str {
        match self {
            OutputFormat::Mp4 => "video/mp4",
            OutputFormat::Webm => "video/webm",
            OutputFormat::Mov => "video/quicktime",
        }
    }

    /// FFmpeg muxer name.
    pub(crate) fn muxer(self) -> &'static str {
        match self {
            OutputFormat::Mp4 => "mp4",
            OutputFormat::Webm => "webm",
            OutputFormat::Mov => "mov",
        }
    }

    /// Codec name of the video stream this format gets (as FFmpeg/ffprobe name it).
    pub fn video_codec(self) -> &'static str {
        match self {
            OutputFormat::Mp4 | OutputFormat::Mov => "h264",
            OutputFormat::Webm => "vp9",
        }
    }

    /// Codec name of the audio stream this format gets when the source has audio.
    pub fn audio_codec(self) -> &'static str {
        match self {
            OutputFormat::Mp4 | OutputFormat::Mov => "aac",
            OutputFormat::Webm => "opus",
        }
    }
}

impl std::fmt::Display for OutputFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which compositor renders frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum BackendChoice {
    /// A hardware GPU adapter when there is one, else the CPU compositor.
    #[default]
    Auto,
    /// The wgpu compositor on any adapter, software ones (lavapipe) included; error without one.
    Wgpu,
    /// FFmpeg's swscale + the CPU blend.
    Cpu,
}

vidforge_names::enum_names!(BackendChoice {
    Auto => "auto",
    Wgpu => "wgpu",
    Cpu => "cpu",
});

impl BackendChoice {
    /// Lenient, for people typing: any case, `gpu` for `wgpu`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(BackendChoice::Auto),
            "wgpu" | "gpu" => Some(BackendChoice::Wgpu),
            "cpu" => Some(BackendChoice::Cpu),
            _ => None,
        }
    }
}

/// A PNG watermark and where/how strongly to draw it.
#[derive(Clone, Debug, PartialEq)]
pub struct WatermarkSpec {
    pub image: PathBuf,
    pub position: Position,
    /// 0.0 (invisible) ..= 1.0 (the PNG's own alpha).
    pub opacity: f32,
}

/// Encoder knobs. Defaults are tuned for throughput on small machines.
#[derive(Clone, Debug, PartialEq)]
pub struct EncoderSettings {
    /// x264 preset for mp4/mov.
    pub h264_preset: String,
    /// x264 constant rate factor (0..=51).
    pub h264_crf: u8,
    /// libvpx-vp9 constant quality (0..=63), used with a zero target bitrate.
    pub vp9_crf: u8,
    /// libvpx `cpu-used` (0..=8 in realtime mode; higher is faster).
    pub vp9_cpu_used: u8,
    /// libvpx deadline: `realtime`, `good` or `best`.
    pub vp9_deadline: String,
    /// Audio bitrate when audio is transcoded; `None`: 128 kb/s AAC, 96 kb/s Opus (stereo).
    pub audio_bitrate: Option<u32>,
    /// Threads of the render's encoder, and of its decoder; 0 lets each decide (x264 and
    /// FFmpeg's decoders: about one per core; libvpx one per core). A service sets the
    /// render's share of the host's cores when several run at once.
    pub threads: u32,
    /// Measure the encoded video's quality against the frames the encoder is given (PSNR,
    /// SSIM: [`RenderReport::quality`]); it costs a decode and a comparison of each frame.
    pub measure_quality: bool,
}

impl Default for EncoderSettings {
    fn default() -> Self {
        EncoderSettings {
            h264_preset: "veryfast".to_string(),
            h264_crf: 23,
            vp9_crf: 32,
            vp9_cpu_used: 8,
            vp9_deadline: "realtime".to_string(),
            audio_bitrate: None,
            threads: 0,
            measure_quality: false,
        }
    }
}

/// What a render does with an HDR (PQ or HLG) source. SDR sources are unaffected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum HdrPolicy {
    /// Tone-mapped to BT.709 SDR, 8-bit (H.264 or VP9 profile 0): plays right everywhere.
    #[default]
    ToSdr,
    /// Kept HDR: 10-bit in the source's transfer, primaries and matrix, its mastering
    /// display and content light metadata carried over; HEVC Main10 in mp4/mov (libx265), VP9
    /// profile 2 in webm. Previews are tone-mapped all the same (browsers show SDR PNGs).
    Keep,
}

impl HdrPolicy {
    /// [`HdrPolicy::Keep`] when `keep`: the one reading of a keep-HDR flag (`vidforge render
    /// --keep-hdr`, a stored render's `keep_hdr`).
    pub fn keeping(keep: bool) -> HdrPolicy {
        if keep {
            HdrPolicy::Keep
        } else {
            HdrPolicy::ToSdr
        }
    }

    /// Whether an HDR source stays HDR.
    pub fn keeps(self) -> bool {
        self == HdrPolicy::Keep
    }
}

/// One render: input file to output file.
#[derive(Clone, Debug, PartialEq)]
pub struct RenderJob {
    pub input: PathBuf,
    pub output: PathBuf,
    pub resolution: Resolution,
    pub format: OutputFormat,
    pub watermark: Option<WatermarkSpec>,
    pub encoder: EncoderSettings,
    pub hdr: HdrPolicy,
}

/// What a render is doing right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    /// Opening input, encoders, compositor.
    Preparing,
    /// Frames flowing.
    Rendering,
    /// Flushing encoders, writing the trailer, moving the file into place.
    Finalizing,
}

vidforge_names::enum_names!(Stage {
    Preparing => "preparing",
    Rendering => "rendering",
    Finalizing => "finalizing",
});

/// Reported to the progress callback (on the calling thread).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    pub stage: Stage,
    /// Frames handed to the encoder so far.
    pub frames_done: u64,
    /// Estimated from the stream's frame count or duration x frame rate.
    pub frames_total: Option<u64>,
}

/// Busy time of each stage (time spent working, not waiting on queues).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageTimes {
    /// Demuxing and decoding, NVDEC's download to system memory included.
    pub decode: Duration,
    pub compose: Duration,
    pub encode: Duration,
    /// The decode and compose stages hop by hop.
    pub hops: Hops,
}

/// Where a frame's way from the decoder to the encoder spent its time, summed over a render
/// (wall time on the stage threads; zero for hops a path does not have). The GPU's own work
/// shows as `gpu_wait`; the compose pass alone is timed by `GpuCompositor::kernel_timing`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Hops {
    /// NVDEC surfaces copied to system memory (decode thread; the compose thread for frames
    /// the zero-copy path hands back).
    pub download: Duration,
    /// Source frames into the GPU compositor's input: a host copy into the upload buffer,
    /// or, zero-copy, the CUDA device-to-device copy and its stream synchronisation.
    pub copy_in: Duration,
    /// Recording and submitting the compose commands.
    pub submit: Duration,
    /// Waiting on the GPU: the compose pass and the output's copy to host-visible memory.
    pub gpu_wait: Duration,
    /// Composed frames copied out of the mapped readback buffer.
    pub readback: Duration,
    /// Frames that reached the compositor without leaving the GPU.
    pub zero_copy_frames: u64,
}

impl Hops {
    /// One line for reports and logs: each hop in ms per frame of `frames`.
    pub fn per_frame(&self, frames: u64) -> String {
        let per = |d: Duration| d.as_secs_f64() * 1e3 / frames.max(1) as f64;
        format!(
            "ms/frame: download {:.3}, copy in {:.3}, submit {:.3}, gpu wait {:.3}, \
             readback {:.3}; zero-copy frames {} of {frames}",
            per(self.download),
            per(self.copy_in),
            per(self.submit),
            per(self.gpu_wait),
            per(self.readback),
            self.zero_copy_frames
        )
    }
}

/// What a finished render produced.
#[derive(Clone, Debug, PartialEq)]
pub struct RenderReport {
    pub frames: u64,
    pub duration_seconds: f64,
    pub width: u32,
    pub height: u32,
    pub size_bytes: u64,
    /// `cpu` or the GPU adapter's name; `remux` for a join of segments.
    pub backend: String,
    /// `nvdec` or `software`; `none` for a join of segments (nothing is decoded).
    pub decoder: String,
    /// The FFmpeg video encoder (`libx264`, `h264_nvenc`, `libvpx-vp9`).
    pub encoder: String,
    pub elapsed: Duration,
    /// Frames per second of wall time.
    pub fps: f64,
    pub stage_times: StageTimes,
    /// The video's quality against the frames the encoder was given, when measured
    /// ([`EncoderSettings::measure_quality`]). A join of segments reports none: the segments
    /// were measured ([`crate::SegmentReport::quality`]), and whoever holds their tallies
    /// makes the report ([`QualityReport::of_segments`]).
    pub quality: Option<QualityReport>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for r in Resolution::ALL {
            assert_eq!(Resolution::parse(r.as_str()), Some(r));
        }
        assert_eq!(Resolution::parse("2160p"), Some(Resolution::P4k));
        assert_eq!(Resolution::parse("8k"), None);
        for f in OutputFormat::ALL {
            assert_eq!(OutputFormat::parse(f.as_str()), Some(f));
            assert_eq!(
                OutputFormat::from_path(Path::new(&format!("a/b.{}", f.extension()))),
                Some(f)
            );
        }
        assert_eq!(OutputFormat::Mov.mime_type(), "video/quicktime");
        assert_eq!(OutputFormat::from_path(Path::new("x.avi")), None);
        for b in [BackendChoice::Auto, BackendChoice::Wgpu, BackendChoice::Cpu] {
            assert_eq!(BackendChoice::parse(b.as_str()), Some(b));
        }
    }
}
