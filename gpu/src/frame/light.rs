//! The output's light, decided once per render (where the media engine builds its compose
//! spec) and read unchanged by both compositors: SDR, an HDR source tone-mapped to SDR with
//! its operator, or an HDR source kept HDR with its signal. The output's depth and colour
//! follow from it, so an HDR source tone-mapped into 10-bit frames has no way to be written.

use super::color::ColorSpec;
use super::hdr_signal::HdrSignal;
use super::planes::SampleDepth;
use super::tonemap::ToneMap;

/// What light the output frames are in, and how a source's frames get there.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum OutputLight {
    /// An SDR source: its colour converted to [`ColorSpec::OUTPUT`], 8-bit frames.
    #[default]
    Sdr,
    /// An HDR source tone-mapped with this operator to [`ColorSpec::OUTPUT`], 8-bit frames.
    ToneMapped(ToneMap),
    /// An HDR source kept HDR: 10-bit frames in `signal`'s colour.
    Kept {
        /// The matrix and range of the source's code values.
        source: ColorSpec,
        /// The output's transfer, primaries, matrix and range.
        signal: HdrSignal,
    },
}

impl OutputLight {
    /// An HDR source that `tone` describes, kept HDR in its own signal.
    pub fn kept(tone: &ToneMap) -> OutputLight {
        OutputLight::Kept {
            source: tone.source,
            signal: HdrSignal::of(tone),
        }
    }

    /// The output frames' depth: 10-bit for HDR kept, else 8-bit.
    pub fn depth(&self) -> SampleDepth {
        match self {
            OutputLight::Kept { .. } => SampleDepth::Ten,
            OutputLight::Sdr | OutputLight::ToneMapped(_) => SampleDepth::Eight,
        }
    }

    /// The output frames' matrix and range.
    pub fn out_color(&self) -> ColorSpec {
        match self {
            OutputLight::Kept { signal, .. } => signal.output,
            OutputLight::Sdr | OutputLight::ToneMapped(_) => ColorSpec::OUTPUT,
        }
    }

    /// For an HDR source (tone-mapped or kept), the colour its frames are read in, whatever
    /// each frame's tags say; `None` for SDR.
    pub fn hdr_source(&self) -> Option<ColorSpec> {
        match self {
            OutputLight::Sdr => None,
            OutputLight::ToneMapped(tone) => Some(tone.source),
            OutputLight::Kept { source, .. } => Some(*source),
        }
    }

    /// The tone-mapping operator, when an HDR source is mapped to SDR.
    pub fn tone_map(&self) -> Option<&ToneMap> {
        match self {
            OutputLight::ToneMapped(tone) => Some(tone),
            OutputLight::Sdr | OutputLight::Kept { .. } => None,
        }
    }

    /// The HDR signal of the output, when an HDR source is kept HDR.
    pub fn kept_signal(&self) -> Option<&HdrSignal> {
        match self {
            OutputLight::Kept { signal, .. } => Some(signal),
            OutputLight::Sdr | OutputLight::ToneMapped(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::tonemap::{Primaries, Transfer};
    use crate::frame::{Matrix, Range};

    #[test]
    fn depth_and_colour_follow_from_the_light() {
        let tone = ToneMap {
            source: ColorSpec {
                matrix: Matrix::Bt2020,
                range: Range::Full,
            },
            transfer: Transfer::Hlg,
            primaries: Primaries::Bt2020,
            peak_nits: 1000.0,
        };
        let sdr = OutputLight::Sdr;
        assert_eq!(
            (sdr.depth(), sdr.out_color()),
            (SampleDepth::Eight, ColorSpec::OUTPUT)
        );
        assert_eq!(sdr.hdr_source(), None);
        let mapped = OutputLight::ToneMapped(tone);
        assert_eq!(mapped.depth(), SampleDepth::Eight);
        assert_eq!(mapped.out_color(), ColorSpec::OUTPUT);
        assert_eq!(mapped.tone_map(), Some(&tone));
        assert_eq!(mapped.hdr_source(), Some(tone.source));
        let kept = OutputLight::kept(&tone);
        assert_eq!(kept.depth(), SampleDepth::Ten);
        assert_eq!(kept.tone_map(), None);
        // The source's full range is read as such; the output is limited, in its matrix.
        assert_eq!(kept.hdr_source(), Some(tone.source));
        assert_eq!(
            kept.out_color(),
            ColorSpec {
                matrix: Matrix::Bt2020,
                range: Range::Limited
            }
        );
        assert_eq!(kept.kept_signal(), Some(&HdrSignal::of(&tone)));
    }
}
