//! Serde for the engine's name-carrying enums (the media and GPU crates know no serde): as their
//! canonical name string, parsed back exactly. Records store these strings, so the on-disk JSON
//! (and the argument hashes over it) never depend on Rust variant names.

use serde::{Deserialize, Deserializer, Serializer, de::Error};
use vidforge_media::{OutputFormat, Position, Resolution};

/// An enum with canonical names.
pub trait Named: Sized + Copy + 'static {
    const ALL: &'static [Self];
    fn name(self) -> &'static str;
    /// The type's own exact parser (`from_name`).
    fn from_name(s: &str) -> Option<Self>;
}

impl Named for OutputFormat {
    const ALL: &'static [Self] = &OutputFormat::ALL;
    fn name(self) -> &'static str {
        self.as_str()
    }
    fn from_name(s: &str) -> Option<Self> {
        OutputFormat::from_name(s)
    }
}

impl Named for Resolution {
    const ALL: &'static [Self] = &Resolution::ALL;
    fn name(self) -> &'static str {
        self.as_str()
    }
    fn from_name(s: &str) -> Option<Self> {
        Resolution::from_name(s)
    }
}

impl Named for Position {
    const ALL: &'static [Self] = &Position::ALL;
    fn name(self) -> &'static str {
        self.as_str()
    }
    fn from_name(s: &str) -> Option<Self> {
        Position::parse(s)
    }
}

/// The canonical names of `T`, in declaration order, joined by `sep` (`mp4, webm, mov`).
pub fn names<T: Named>(sep: &str) -> String {
    let names: Vec<&str> = T::ALL.iter().map(|v| v.name()).collect();
    names.join(sep)
}

pub fn serialize<T: Named, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v.name())
}

pub fn deserialize<'de, T: Named, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
    let s = String::deserialize(d)?;
    T::from_name(&s).ok_or_else(|| {
        let names: Vec<&str> = T::ALL.iter().map(|v| v.name()).collect();
        D::Error::custom(format!("unknown value `{s}`, expected one of {names:?}"))
    })
}
