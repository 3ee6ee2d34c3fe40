//! What a source says of its colour, read from the stream's tags and side data without
//! decoding: primaries, transfer, matrix and range, whether that makes it HDR (PQ or HLG),
//! and the HDR metadata that comes with it (the mastering display, the content light level,
//! a Dolby Vision configuration record).
//!
//! FFmpeg 5.1's side data structures (`AVMasteringDisplayMetadata`,
//! `AVContentLightMetadata`, `AVDOVIDecoderConfigurationRecord`) are not in ffmpeg-sys-next's
//! bindings: their public layouts are mirrored here and read only when the side data is at
//! least that long.

use ffmpeg::codec::packet::side_data::Type as SideDataType;
use ffmpeg::ffi;
use ffmpeg::format::stream::Stream;
use ffmpeg_next as ffmpeg;
use vidforge_gpu::frame::tonemap::{Primaries, ToneMap, Transfer};
use vidforge_gpu::{ColorSpec, Matrix, Range};

/// How a source's light is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DynamicRange {
    /// BT.709, sRGB, BT.601, ... or untagged.
    Sdr,
    /// Hybrid log-gamma (ARIB STD-B67, BT.2100): phones' HDR.
    Hlg,
    /// Perceptual quantizer (SMPTE ST 2084, BT.2100): HDR10 and most HDR masters.
    Pq,
}

vidforge_names::enum_names!(DynamicRange {
    Sdr => "sdr",
    Hlg => "hlg",
    Pq => "pq",
});

impl DynamicRange {
    /// Whether it is HDR (PQ or HLG): the one test of it, for a probed source and a stored
    /// asset alike.
    pub fn is_hdr(self) -> bool {
        self != DynamicRange::Sdr
    }
}

/// The display an HDR master was graded on (SMPTE ST 2086).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MasteringDisplay {
    /// Its peak and black, in cd/m² (nits).
    pub max_nits: f64,
    pub min_nits: f64,
    /// Red, green, blue and white point, CIE 1931 xy (when the metadata gives them).
    pub primaries: Option<[(f64, f64); 4]>,
}

/// The brightest pixel and the brightest frame average of the content (CTA-861.3), in nits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContentLight {
    pub max_cll: u32,
    pub max_fall: u32,
}

impl ContentLight {
    /// As read from a source: the values are clamped to 65,535 nits, the most the SEI message
    /// and the container boxes a kept render writes can carry (16 bits, CTA-861.3 / H.265
    /// D.2.35), so an absurd source value clamps instead of wrapping.
    pub fn clamped(max_cll: u32, max_fall: u32) -> Self {
        let cap = u32::from(u16::MAX);
        ContentLight {
            max_cll: max_cll.min(cap),
            max_fall: max_fall.min(cap),
        }
    }
}

/// A Dolby Vision configuration record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DolbyVision {
    pub profile: u8,
    pub level: u8,
    /// Whether a base layer is present and what it is compatible with (0: none — profile 5's
    /// IPTPQc2, only a Dolby Vision decoder shows it right; 1: HDR10; 2: SDR; 4: HLG).
    pub base_layer: bool,
    pub base_layer_compatibility: u8,
}

impl DolbyVision {
    /// Whether the base layer alone can be shown correctly (HDR10, SDR or HLG): without the
    /// Dolby Vision decoder, a profile-5 stream's colours are wrong.
    pub fn base_layer_usable(&self) -> bool {
        self.base_layer && matches!(self.base_layer_compatibility, 1 | 2 | 4 | 6)
    }
}

/// A source's colour as its stream declares it.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceColor {
    /// FFmpeg's names: `bt709`, `bt2020`, `unknown`, ...
    pub primaries: String,
    /// `bt709`, `smpte2084` (PQ), `arib-std-b67` (HLG), `iec61966-2-1` (sRGB), `unknown`, ...
    pub transfer: String,
    /// `bt709`, `bt2020nc`, `bt470bg`, `unknown`, ...
    pub matrix: String,
    /// `tv` (limited), `pc` (full) or `unknown`.
    pub range: String,
    pub dynamic_range: DynamicRange,
    pub mastering: Option<MasteringDisplay>,
    pub content_light: Option<ContentLight>,
    pub dolby_vision: Option<DolbyVision>,
}

impl SourceColor {
    pub fn is_hdr(&self) -> bool {
        self.dynamic_range.is_hdr()
    }

    /// How renders map this source to SDR: `None` for SDR sources. Untagged primaries and
    /// matrix are taken as BT.2020 (HDR's), the peak as FFmpeg's `tonemap` finds it: MaxCLL,
    /// else the mastering display's peak, else the transfer's nominal one.
    pub fn tone_map(&self) -> Option<ToneMap> {
        let transfer = match self.dynamic_range {
            DynamicRange::Sdr => return None,
            DynamicRange::Pq => Transfer::Pq,
            DynamicRange::Hlg => Transfer::Hlg,
        };
        let matrix = match self.matrix.as_str() {
            "bt709" => Matrix::Bt709,
            "bt470bg" | "smpte170m" => Matrix::Bt601,
            _ => Matrix::Bt2020,
        };
        let range = match self.range.as_str() {
            "pc" => Range::Full,
            _ => Range::Limited,
        };
        let primaries = match self.primaries.as_str() {
            "bt709" => Primaries::Bt709,
            _ => Primaries::Bt2020,
        };
        let cll = self.content_light.map(|c| c.max_cll as f32);
        let mastering = self.mastering.map(|m| m.max_nits as f32);
        let peak_nits = [cll, mastering]
            .into_iter()
            .flatten()
            .find(|&n| n > 0.0)
            .unwrap_or(transfer.nominal_peak_nits());
        Some(ToneMap {
            source: ColorSpec { matrix, range },
            transfer,
            primaries,
            peak_nits,
        })
    }
}

/// `AVMasteringDisplayMetadata` (libavutil/mastering_display_metadata.h).
#[repr(C)]
#[derive(Clone, Copy)]
struct RawMastering {
    display_primaries: [[ffi::AVRational; 2]; 3],
    white_point: [ffi::AVRational; 2],
    min_luminance: ffi::AVRational,
    max_luminance: ffi::AVRational,
    has_primaries: i32,
    has_luminance: i32,
}

/// `AVContentLightMetadata`.
#[repr(C)]
#[derive(Clone, Copy)]
struct RawContentLight {
    max_cll: u32,
    max_fall: u32,
}

/// `AVDOVIDecoderConfigurationRecord` (libavutil/dovi_meta.h); every field mirrors the C
/// layout, not all are read.
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)]
struct RawDovi {
    version_major: u8,
    version_minor: u8,
    profile: u8,
    level: u8,
    rpu_present: u8,
    el_present: u8,
    bl_present: u8,
    bl_compatibility_id: u8,
}

/// `m` as FFmpeg's `AVMasteringDisplayMetadata` bytes (primaries in 1/50000, luminance in
/// 1/10000 nit steps, the units of SMPTE ST 2086), for an output stream's side data.
pub(crate) fn mastering_bytes(m: &MasteringDisplay) -> Vec<u8> {
    let q = |v: f64, den: i32| ffi::AVRational {
        num: (v * f64::from(den)).round() as i32,
        den,
    };
    let xy = |(x, y): (f64, f64)| [q(x, 50_000), q(y, 50_000)];
    let p = m.primaries.unwrap_or([(0.0, 0.0); 4]);
    let raw = RawMastering {
        display_primaries: [xy(p[0]), xy(p[1]), xy(p[2])],
        white_point: xy(p[3]),
        min_luminance: q(m.min_nits, 10_000),
        max_luminance: q(m.max_nits, 10_000),
        has_primaries: i32::from(m.primaries.is_some()),
        has_luminance: 1,
    };
    as_bytes(&raw)
}

/// `c` as FFmpeg's `AVContentLightMetadata` bytes.
pub(crate) fn content_light_bytes(c: &ContentLight) -> Vec<u8> {
    as_bytes(&RawContentLight {
        max_cll: c.max_cll,
        max_fall: c.max_fall,
    })
}

fn as_bytes<T: Copy>(v: &T) -> Vec<u8> {
    // SAFETY: `T` is a plain `repr(C)` struct of 32-bit integers (no padding); its bytes are
    // read within its size.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>()) }
        .to_vec()
}

/// The side data `bytes` as a `T`, when it is long enough.
fn read_as<T: Copy>(bytes: &[u8]) -> Option<T> {
    // SAFETY: `T` is a plain `repr(C)` struct of integers, valid for any bit pattern; the read
    // is unaligned and within `bytes`.
    (bytes.len() >= std::mem::size_of::<T>())
        .then(|| unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

fn ratio(r: ffi::AVRational) -> f64 {
    if r.den == 0 {
        0.0
    } else {
        f64::from(r.num) / f64::from(r.den)
    }
}

/// A luminance in nits, to the 0.0001 cd/m² that SMPTE ST 2086 carries (containers that store
/// floats give 0.004999999888 for 0.005).
fn nits(r: ffi::AVRational) -> f64 {
    (ratio(r) * 10_000.0).round() / 10_000.0
}

/// Whether `transfer` (an `AVColorTransferCharacteristic`) is HDR.
fn dynamic_range_of(transfer: ffmpeg::color::TransferCharacteristic) -> DynamicRange {
    match transfer {
        ffmpeg::color::TransferCharacteristic::SMPTE2084 => DynamicRange::Pq,
        ffmpeg::color::TransferCharacteristic::ARIB_STD_B67 => DynamicRange::Hlg,
        _ => DynamicRange::Sdr,
    }
}

/// What `vs` declares of its colour. `matrix` and `range` are the names the caller already
/// resolved from the codec parameters.
pub(crate) fn stream_color(vs: &Stream<'_>, matrix: String, range: String) -> SourceColor {
    // SAFETY: codecpar is valid while the stream's input lives.
    let (primaries, transfer) = unsafe {
        let p = vs.parameters().as_ptr();
        (
            ffmpeg::color::Primaries::from((*p).color_primaries),
            ffmpeg::color::TransferCharacteristic::from((*p).color_trc),
        )
    };
    let mut color = SourceColor {
        primaries: primaries.name().unwrap_or("unknown").to_string(),
        transfer: transfer.name().unwrap_or("unknown").to_string(),
        matrix,
        range,
        dynamic_range: dynamic_range_of(transfer),
        mastering: None,
        content_light: None,
        dolby_vision: None,
    };
    for side in vs.side_data() {
        match side.kind() {
            SideDataType::MasteringDisplayMetadata => {
                if let Some(m) = read_as::<RawMastering>(side.data()) {
                    color.mastering =
                        (m.has_luminance != 0 || m.has_primaries != 0).then(|| MasteringDisplay {
                            max_nits: nits(m.max_luminance),
                            min_nits: nits(m.min_luminance),
                            primaries: (m.has_primaries != 0).then(|| {
                                let p = m.display_primaries;
                                let xy = |c: [ffi::AVRational; 2]| (ratio(c[0]), ratio(c[1]));
                                [xy(p[0]), xy(p[1]), xy(p[2]), xy(m.white_point)]
                            }),
                        });
                }
            }
            SideDataType::ContentLightLevel => {
                if let Some(c) = read_as::<RawContentLight>(side.data()) {
                    color.content_light = Some(ContentLight::clamped(c.max_cll, c.max_fall));
                }
            }
            SideDataType::DOVI_CONF => {
                if let Some(d) = read_as::<RawDovi>(side.data()) {
                    color.dolby_vision = Some(DolbyVision {
                        profile: d.profile,
                        level: d.level,
                        base_layer: d.bl_present != 0,
                        base_layer_compatibility: d.bl_compatibility_id,
                    });
                }
            }
            _ => {}
        }
    }
    color
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_light_over_16_bits_clamps_instead_of_wrapping() {
        assert_eq!(
            ContentLight::clamped(70_000, u32::MAX),
            ContentLight {
                max_cll: 65_535,
                max_fall: 65_535
            }
        );
        assert_eq!(
            ContentLight::clamped(1000, 400),
            ContentLight {
                max_cll: 1000,
                max_fall: 400
            }
        );
    }

    #[test]
    fn side_data_shorter_than_its_struct_is_ignored() {
        assert!(read_as::<RawContentLight>(&[1, 0, 0, 0]).is_none());
        let c = read_as::<RawContentLight>(&[0xe8, 3, 0, 0, 0x90, 1, 0, 0]).unwrap();
        assert_eq!((c.max_cll, c.max_fall), (1000, 400));
    }

    #[test]
    fn metadata_written_for_an_output_reads_back_the_same() {
        let m = MasteringDisplay {
            max_nits: 1000.0,
            min_nits: 0.005,
            primaries: Some([(0.68, 0.32), (0.265, 0.69), (0.15, 0.06), (0.3127, 0.329)]),
        };
        let raw = read_as::<RawMastering>(&mastering_bytes(&m)).unwrap();
        assert_eq!(
            (nits(raw.max_luminance), nits(raw.min_luminance)),
            (1000.0, 0.005)
        );
        assert_eq!(ratio(raw.display_primaries[1][1]), 0.69);
        assert_eq!(raw.has_primaries, 1);
        let c = read_as::<RawContentLight>(&content_light_bytes(&ContentLight {
            max_cll: 1000,
            max_fall: 400,
        }))
        .unwrap();
        assert_eq!((c.max_cll, c.max_fall), (1000, 400));
    }

    #[test]
    fn profile_5_has_no_usable_base_layer() {
        let dv = |bl, compat| DolbyVision {
            profile: 5,
            level: 6,
            base_layer: bl,
            base_layer_compatibility: compat,
        };
        assert!(!dv(true, 0).base_layer_usable());
        assert!(dv(true, 1).base_layer_usable());
        assert!(dv(true, 4).base_layer_usable());
        assert!(!dv(false, 1).base_layer_usable());
    }
}
