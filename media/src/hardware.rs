//! Which hardware a render uses besides the compositor: NVDEC decoding through FFmpeg's `cuda`
//! hwaccel, and the NVENC H.264 encoder. The choices (`auto` / forced / off) are resolved once
//! per process, when the [`crate::Engine`] starts, by really opening the thing: a CUDA device
//! for decoding, an encoder session for NVENC. The selection rules are pure functions over
//! those probes, so they are tested with injected results on machines without a GPU.

use ffmpeg::format::Pixel;
use ffmpeg::{Dictionary, Rational, codec, encoder};
use ffmpeg_next as ffmpeg;

use crate::error::MediaError;
use crate::ffutil;
use crate::hwdecode::{self, CudaDevice};
use crate::types::EncoderSettings;

/// `--hwdecode`: how video is decoded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum HwDecodeChoice {
    /// NVDEC when a CUDA device opens (and, per job, when it supports the codec), else
    /// software decoding.
    #[default]
    Auto,
    /// NVDEC; starting fails when no CUDA device opens. Codecs NVDEC lacks still decode in
    /// software (logged per job).
    Cuda,
    /// Software decoding only.
    Off,
}

vidforge_gpu::enum_names!(HwDecodeChoice {
    Auto => "auto",
    Cuda => "cuda",
    Off => "off",
});

impl HwDecodeChoice {
    /// A name in any case, spaces around it ignored.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|c| c.as_str().eq_ignore_ascii_case(s.trim()))
    }
}

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

vidforge_gpu::enum_names!(EncoderChoice {
    Auto => "auto",
    X264 => "x264",
    Nvenc => "nvenc",
});

impl EncoderChoice {
    /// A name in any case, spaces around it ignored.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|c| c.as_str().eq_ignore_ascii_case(s.trim()))
    }
}

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

/// Resolves the decode choice with `open`, which tries to open a CUDA device.
pub(crate) fn select_decoder<D>(
    choice: HwDecodeChoice,
    open: impl FnOnce() -> Result<D, String>,
) -> Result<Option<D>, MediaError> {
    match choice {
        HwDecodeChoice::Off => Ok(None),
        HwDecodeChoice::Auto => match open() {
            Ok(d) => Ok(Some(d)),
            Err(e) => {
                tracing::debug!("no CUDA device, decoding in software ({e})");
                Ok(None)
            }
        },
        HwDecodeChoice::Cuda => open()
            .map(Some)
            .map_err(|e| MediaError::HardwareUnavailable {
                reason: format!(
                    "--hwdecode cuda: no CUDA device ({e}); use --hwdecode auto or off on machines \
                 without an NVIDIA GPU"
                ),
            }),
    }
}

/// Resolves the encoder choice with `probe`, which tries to open an NVENC session.
pub(crate) fn select_encoder(
    choice: EncoderChoice,
    probe: impl FnOnce() -> Result<(), String>,
) -> Result<H264Encoder, MediaError> {
    match choice {
        EncoderChoice::X264 => Ok(H264Encoder::X264),
        EncoderChoice::Auto => match probe() {
            Ok(()) => Ok(H264Encoder::Nvenc),
            Err(e) => {
                tracing::debug!("no NVENC encoder, encoding H.264 with libx264 ({e})");
                Ok(H264Encoder::X264)
            }
        },
        EncoderChoice::Nvenc => probe().map(|()| H264Encoder::Nvenc).map_err(|e| {
            MediaError::HardwareUnavailable {
                reason: format!(
                    "--encoder nvenc: no NVENC encoder session opens ({e}); use --encoder auto or \
                 x264 on cards without NVENC"
                ),
            }
        }),
    }
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
    fn decode_selection_auto_falls_back_cuda_fails_off_never_opens() {
        assert_eq!(
            select_decoder(HwDecodeChoice::Auto, || Ok::<_, String>(7)).unwrap(),
            Some(7)
        );
        assert_eq!(
            select_decoder::<u8>(HwDecodeChoice::Auto, || Err("no driver".into())).unwrap(),
            None
        );
        let err = select_decoder::<u8>(HwDecodeChoice::Cuda, || Err("no driver".into()))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no CUDA device") && err.contains("no driver"),
            "{err}"
        );
        assert_eq!(
            select_decoder(HwDecodeChoice::Cuda, || Ok::<_, String>(1)).unwrap(),
            Some(1)
        );
        let opened = std::cell::Cell::new(false);
        let off = select_decoder(HwDecodeChoice::Off, || {
            opened.set(true);
            Ok::<_, String>(1)
        });
        assert_eq!(off.unwrap(), None);
        assert!(!opened.get(), "off must not even open a device");
    }

    #[test]
    fn encoder_selection_auto_falls_back_nvenc_fails_x264_never_probes() {
        assert_eq!(
            select_encoder(EncoderChoice::Auto, || Ok(())).unwrap(),
            H264Encoder::Nvenc
        );
        assert_eq!(
            select_encoder(EncoderChoice::Auto, || Err("no NVENC".into())).unwrap(),
            H264Encoder::X264
        );
        let err = select_encoder(EncoderChoice::Nvenc, || Err("OpenEncodeSessionEx".into()))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no NVENC encoder session") && err.contains("OpenEncodeSessionEx"),
            "{err}"
        );
        let probed = std::cell::Cell::new(false);
        let x = select_encoder(EncoderChoice::X264, || {
            probed.set(true);
            Ok(())
        });
        assert_eq!(x.unwrap(), H264Encoder::X264);
        assert!(!probed.get());
    }

    #[test]
    fn choices_parse_their_names() {
        for c in HwDecodeChoice::ALL {
            assert_eq!(HwDecodeChoice::parse(c.as_str()), Some(c));
        }
        for c in EncoderChoice::ALL {
            assert_eq!(EncoderChoice::parse(c.as_str()), Some(c));
        }
        assert_eq!(HwDecodeChoice::parse(" CUDA "), Some(HwDecodeChoice::Cuda));
        assert_eq!(HwDecodeChoice::parse("nvdec"), None);
        assert_eq!(EncoderChoice::parse("h264_nvenc"), None);
    }

    #[test]
    fn a_job_decodes_on_the_gpu_only_with_a_device_and_a_supported_codec() {
        assert!(decode_on_gpu(Some(&()), true));
        assert!(!decode_on_gpu(Some(&()), false));
        assert!(!decode_on_gpu::<()>(None, true));
        assert!(!decode_on_gpu::<()>(None, false));
    }
}
