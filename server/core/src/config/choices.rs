//! The named choices among the settings (`backend`, `hwdecode`, `zero_copy`, `encoder`,
//! `speculative`, `fanout`, `render_sched`): each choice's `--help` line, its clap parser, its
//! reading from the file, and the [`Choice`] kind over them.

use serde::{Deserialize, Deserializer};
use vidforge_media as media;

use super::kinds::{Choice, Kind};
use super::parse::ConfigError;

/// A media engine choice: what each means in `--help`; its names are the engine's own.
pub(super) trait MediaChoice: Copy + Send + Sync + 'static {
    /// Every choice with its `--help` line.
    const CHOICES: &'static [(Self, &'static str)];
    /// Its name (the engine's `as_str`).
    fn name(self) -> &'static str;
    /// The choice named exactly `s` (lowercase, as the file and the flag spell it).
    fn named(s: &str) -> Option<Self> {
        Self::CHOICES
            .iter()
            .map(|(c, _)| *c)
            .find(|c| c.name() == s)
    }
}

impl MediaChoice for media::BackendChoice {
    const CHOICES: &'static [(Self, &'static str)] = &[
        (
            Self::Auto,
            "wgpu where NVDEC's frames can stay on a hardware GPU (zero-copy), otherwise the CPU compositor",
        ),
        (Self::Wgpu, "Always wgpu (a software adapter counts)"),
        (Self::Cpu, "Always the CPU compositor"),
    ];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl MediaChoice for media::HwDecodeChoice {
    const CHOICES: &'static [(Self, &'static str)] = &[
        (
            Self::Auto,
            "NVDEC where frames stay on the GPU or NVENC encodes (codecs it supports, per job), else software",
        ),
        (
            Self::Cuda,
            "NVDEC; the server does not start without a CUDA device",
        ),
        (Self::Off, "Software decoding only"),
    ];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl MediaChoice for media::ZeroCopyChoice {
    const CHOICES: &'static [(Self, &'static str)] = &[
        (
            Self::Auto,
            "Where the service decodes on NVDEC into the wgpu compositor, when its start-up self-test passes",
        ),
        (Self::On, "Required; the server does not start without it"),
        (Self::Off, "Never: NVDEC's frames are downloaded"),
    ];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl MediaChoice for media::EncoderChoice {
    const CHOICES: &'static [(Self, &'static str)] = &[
        (
            Self::Auto,
            "NVENC when an encoder session opens at start-up, else libx264",
        ),
        (Self::X264, "libx264"),
        (Self::Nvenc, "NVENC; the server does not start without it"),
    ];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl MediaChoice for super::Speculative {
    const CHOICES: &'static [(Self, &'static str)] = &[
        (
            Self::Auto,
            "Render an awaiting render in full on a slot that would sit idle; real work preempts it",
        ),
        (Self::Off, "Render only after approval"),
    ];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl MediaChoice for super::Fanout {
    const CHOICES: &'static [(Self, &'static str)] = &[
        (
            Self::Auto,
            "Split a long render into segments when another slot is free; they join without a re-encode",
        ),
        (Self::Off, "Every render in one pass"),
    ];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl MediaChoice for super::RenderSched {
    const CHOICES: &'static [(Self, &'static str)] = &[
        (Self::Normal, "SCHED_OTHER at render_nice"),
        (
            Self::Batch,
            "SCHED_BATCH at render_nice: never preempts the front when it wakes",
        ),
        (
            Self::Idle,
            "SCHED_IDLE: only CPU time nothing else wants (renders stall on a busy machine)",
        ),
    ];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

/// The clap parser of a media choice: its names (each with its help) and nothing else.
pub(super) fn choice_parser<E: MediaChoice>() -> impl clap::builder::TypedValueParser<Value = E> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(
        E::CHOICES
            .iter()
            .map(|(c, help)| PossibleValue::new(c.name()).help(*help)),
    )
    .map(|s| E::named(&s).expect("clap admits only the listed names"))
}

/// A media choice in the file: one of its names, exactly.
pub(super) struct ChoiceValue<E>(E);

impl<'de, E: MediaChoice> Deserialize<'de> for ChoiceValue<E> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        E::named(&s).map(ChoiceValue).ok_or_else(|| {
            // serde's own wording for an unknown enum variant.
            let names: Vec<String> = E::CHOICES
                .iter()
                .map(|c| format!("`{}`", c.0.name()))
                .collect();
            serde::de::Error::custom(format!(
                "unknown variant `{s}`, expected one of {}",
                names.join(", ")
            ))
        })
    }
}

impl<E: MediaChoice> Kind for Choice<E> {
    type Value = E;
    type File = Option<ChoiceValue<E>>;
    type Flag = Option<E>;
    fn from_file(v: Self::File, _: &'static str) -> Result<Option<E>, ConfigError> {
        Ok(v.map(|ChoiceValue(c)| c))
    }
    fn from_flag(v: &Option<E>, _: &'static str) -> Result<Option<E>, ConfigError> {
        Ok(*v)
    }
    fn show(v: &E) -> String {
        v.name().to_string()
    }
}
