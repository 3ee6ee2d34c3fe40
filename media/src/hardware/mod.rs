//! Which hardware a process uses: the compositor (CPU or wgpu), NVDEC decoding through
//! FFmpeg's `cuda` hwaccel, and the NVENC H.264 encoder. The choices (`auto` / forced / off)
//! are resolved once per process, when the [`crate::Engine`] starts, by `plan.rs` (the one
//! decision table, a pure function over the host's facts); `host.rs` probes those facts lazily
//! by really opening the thing (a CUDA device, an encoder session, a GPU context), and
//! `cache.rs` keeps the NVENC answer per driver.

use ffmpeg::format::Pixel;
use ffmpeg::{Dictionary, Rational, codec, encoder};
use ffmpeg_next as ffmpeg;

use crate::ffutil;
use crate::hwdecode::{self, CudaDevice};
use crate::types::EncoderSettings;

mod cache;
pub(crate) mod host;
mod plan;

pub use plan::{CompositorPlan, DecodePlan, HardwarePlan, HostProbe, Workload, plan};

/// `--hwdecode`: how video is decoded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum HwDecodeChoice {
    /// NVDEC where it pays (frames kept on the GPU, or NVENC encoding; `plan.rs`) and, per
    /// job, where it supports the codec; else
    /// software decoding.
    #[default]
    Auto,
    /// NVDEC; starting fails when no CUDA device opens. Codecs NVDEC lacks still decode in
    /// software (logged per job).
    Cuda,
    /// Software decoding only.
    Off,
}

vidforge_names::enum_names!(HwDecodeChoice {
    Auto => "auto",
    Cuda => "cuda",
    Off => "off",
});

/// `--encoder`: which H.264 encoder writes mp4/mov.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum EncoderChoice {
    /// NVENC when an encoder session opens at start-up, else libx264.
    #[default]
    Auto,
    /// libx264 always.
    X264,
    /// NVENC; starting fails when no session opens (cards without NVENC, like the H100/H200,
    /// or no NVIDIA driver).
    Nvenc,
}

vidforge_names::enum_names!(EncoderChoice {
    Auto => "auto",
    X264 => "x264",
    Nvenc => "nvenc",
});

/// The H.264 encoder a process uses for mp4/mov (webm is always libvpx-vp9).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum H264Encoder {
    #[default]
    X264,
    Nvenc,
}

impl H264Encoder {
    /// The FFmpeg encoder name.
    pub fn ffmpeg_name(self) -> &'static str {
        match self {
            H264Encoder::X264 => "libx264",
            H264Encoder::Nvenc => "h264_nvenc",
        }
    }

    /// The encoder's options. NVENC runs constant quality (`rc vbr`, `cq` = the x264 CRF,
    /// no bitrate target) at preset p4 with `tune hq`: the settings meant to land near x264
    /// veryfast CRF 23 (the device check measures both against the source, side by side).
    pub(crate) fn options(self, settings: &EncoderSettings) -> Dictionary<'static> {
        let mut d = Dictionary::new();
        let quality = settings.h264_crf.min(51).to_string();
        match self {
            H264Encoder::X264 => {
                d.set("preset", &settings.h264_preset);
                d.set("crf", &quality);
            }
            H264Encoder::Nvenc => {
                d.set("preset", "p4");
                d.set("tune", "hq");
                d.set("rc", "vbr");
                d.set("cq", &quality);
            }
        }
        d
    }
}

/// The hardware choices, as configured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct HardwareChoice {
    pub decode: HwDecodeChoice,
    pub encoder: EncoderChoice,
    /// NVDEC's frames to the wgpu compositor without a download.
    pub zero_copy: crate::zero_copy::ZeroCopyChoice,
}

/// Whether one job decodes on the GPU: only with a device and a codec NVDEC supports.
pub(crate) fn decode_on_gpu<D>(device: Option<&D>, codec_supported: bool) -> bool {
    device.is_some() && codec_supported
}

/// What `vidforge probe --hardware` and the capability summary report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HardwareReport {
    /// The CUDA device opened (its FFmpeg device type name), or why none did.
    pub cuda: Result<String, String>,
    /// NVDEC decoders compiled into this FFmpeg (`h264_cuvid`, ...); usable only with `cuda`.
    pub nvdec_decoders: Vec<String>,
    /// Codecs whose native decoder has a `cuda` hwaccel in this FFmpeg (what vidforge uses).
    pub cuda_hwaccel_codecs: Vec<String>,
    /// Whether an NVENC H.264 session opened, or why not.
    pub nvenc: Result<(), String>,
}

/// Probes the hardware (opens a CUDA device and an NVENC session, then closes both).
pub fn probe_hardware() -> HardwareReport {
    ffutil::init();
    HardwareReport {
        cuda: CudaDevice::open().map(|d| d.type_name().to_string()),
        nvdec_decoders: hwdecode::cuvid_decoders(),
        cuda_hwaccel_codecs: hwdecode::cuda_hwaccel_codecs(),
        nvenc: probe_nvenc(),
    }
}

/// What `auto` (or the given choices) would use for `workload` on this host, and why, probing
/// afresh (the NVENC cache is refreshed). `vidforge probe --hardware` prints it.
pub fn plan_hardware(
    backend: crate::types::BackendChoice,
    hardware: HardwareChoice,
    workload: Workload,
) -> Result<HardwarePlan, crate::error::MediaError> {
    ffutil::init();
    plan(backend, hardware, workload, &mut host::LiveHost::new(true))
}

/// Opens (and closes) one NVENC H.264 session, as a render would: the only reliable test of
/// an encoder (the FFmpeg build has `h264_nvenc` everywhere; the card and driver decide).
pub(crate) fn probe_nvenc() -> Result<(), String> {
    ffutil::init();
    let codec = encoder::find_by_name(H264Encoder::Nvenc.ffmpeg_name())
        .ok_or("this FFmpeg build has no h264_nvenc encoder")?;
    let ctx = codec::context::Context::new_with_codec(codec);
    let mut enc = ctx.encoder().video().map_err(|e| e.to_string())?;
    enc.set_width(256);
    enc.set_height(256);
    enc.set_format(Pixel::YUV420P);
    enc.set_time_base(Rational::new(1, 30));
    enc.set_frame_rate(Some(Rational::new(30, 1)));
    enc.set_bit_rate(0);
    let opened = enc
        .open_as_with(
            codec,
            H264Encoder::Nvenc.options(&EncoderSettings::default()),
        )
        .map_err(|e| {
            format!(
                "opening h264_nvenc failed ({e}); it needs the NVIDIA driver and a GPU with an \
                 NVENC engine"
            )
        })?;
    drop(opened);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_parse_their_names() {
        for c in HwDecodeChoice::ALL {
            assert_eq!(HwDecodeChoice::from_any_case(c.as_str()), Some(c));
        }
        for c in EncoderChoice::ALL {
            assert_eq!(EncoderChoice::from_any_case(c.as_str()), Some(c));
        }
        assert_eq!(
            HwDecodeChoice::from_any_case(" CUDA "),
            Some(HwDecodeChoice::Cuda)
        );
        assert_eq!(HwDecodeChoice::from_any_case("nvdec"), None);
        assert_eq!(EncoderChoice::from_any_case("h264_nvenc"), None);
    }

    #[test]
    fn a_job_decodes_on_the_gpu_only_with_a_device_and_a_supported_codec() {
        assert!(decode_on_gpu(Some(&()), true));
        assert!(!decode_on_gpu(Some(&()), false));
        assert!(!decode_on_gpu::<()>(None, true));
        assert!(!decode_on_gpu::<()>(None, false));
    }
}
