//! Kinds of setting: how a value is read from a flag (or its `VIDFORGE_*` variable) and from the
//! TOML file, and how its default is shown in the reference. A setting's kind is named once, in
//! its declaration (`settings.rs`); the compiler checks that the flag field and the `Config`
//! field have the kind's types.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::parse::{
    ConfigError, parse_bytes, parse_duration, parse_listen, parse_net, parse_token_pair,
};
use super::{MediaStoreSetting, StoreSetting};

/// One kind of setting (the types never exist as values: they only name the conversions).
pub(super) trait Kind {
    /// The resolved value (the `Config` field).
    type Value;
    /// What the TOML file holds (a missing key is `Default`).
    type File: Default;
    /// What the clap field holds.
    type Flag;
    /// The file's value, `None` when the key is absent.
    fn from_file(v: Self::File, name: &'static str) -> Result<Option<Self::Value>, ConfigError>;
    /// The flag's value, `None` when neither the flag nor its variable is set.
    fn from_flag(v: &Self::Flag, name: &'static str) -> Result<Option<Self::Value>, ConfigError>;
    /// The default as the reference shows it.
    fn show(v: &Self::Value) -> String;
}

/// A value read as it is from both sources (numbers, paths).
pub(super) struct Plain<T>(PhantomData<T>);
/// An optional value (`None` by default), read as it is from both sources.
pub(super) struct Maybe<T>(PhantomData<T>);
/// A duration: `90s`, `24h`, a number of seconds (`DurationValue` in the file).
pub(super) struct Dur;
/// A byte size: `2GiB`, a number of bytes (`SizeValue` in the file).
pub(super) struct Size;
/// The listen address (`localhost:PORT` accepted).
pub(super) struct Listen;
/// `sled` or a PostgreSQL URL.
pub(super) struct Store;
/// `media_store`: a directory or `s3://BUCKET/PREFIX`.
pub(super) struct Media;
/// A list of strings: an array in the file, repeated or comma-separated on the command line.
pub(super) struct List;
/// `trusted_proxies`: addresses or CIDR ranges.
pub(super) struct Proxies;
/// Bearer tokens: a `[tokens]` table in the file, `TOKEN=PRINCIPAL` pairs on the command line.
pub(super) struct Tokens;
/// An on/off switch: a flag without a value that can only turn it on.
pub(super) struct Switch;
/// Per-principal webhook endpoints: `[webhooks.PRINCIPAL]` tables, file only.
pub(super) struct Webhooks;
/// One of a media engine choice's names (`auto`, `wgpu`, ...).
pub(super) struct Choice<E>(PhantomData<E>);

/// How a plain value's default is shown.
pub(super) trait Show {
    fn show(&self) -> String;
}
macro_rules! show_display {
    ($($t:ty),*) => { $(impl Show for $t { fn show(&self) -> String { self.to_string() } })* };
}
show_display!(u8, usize, u32, u64, String);
impl Show for PathBuf {
    fn show(&self) -> String {
        self.display().to_string()
    }
}

impl<T: Clone + Show> Kind for Plain<T> {
    type Value = T;
    type File = Option<T>;
    type Flag = Option<T>;
    fn from_file(v: Option<T>, _: &'static str) -> Result<Option<T>, ConfigError> {
        Ok(v)
    }
    fn from_flag(v: &Option<T>, _: &'static str) -> Result<Option<T>, ConfigError> {
        Ok(v.clone())
    }
    fn show(v: &T) -> String {
        v.show()
    }
}

impl<T: Clone + Show> Kind for Maybe<T> {
    type Value = Option<T>;
    type File = Option<T>;
    type Flag = Option<T>;
    fn from_file(v: Option<T>, _: &'static str) -> Result<Option<Option<T>>, ConfigError> {
        Ok(v.map(Some))
    }
    fn from_flag(v: &Option<T>, _: &'static str) -> Result<Option<Option<T>>, ConfigError> {
        Ok(v.clone().map(Some))
    }
    fn show(v: &Option<T>) -> String {
        v.as_ref().map_or_else(|| "none".into(), Show::show)
    }
}

/// A duration in the file: seconds as a number, or a string like `"30m"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(super) enum DurationValue {
    Seconds(u64),
    Text(String),
}

impl Kind for Dur {
    type Value = Duration;
    type File = Option<DurationValue>;
    type Flag = Option<String>;
    fn from_file(v: Self::File, name: &'static str) -> Result<Option<Duration>, ConfigError> {
        v.map(|v| match v {
            DurationValue::Seconds(s) => Ok(Duration::from_secs(s)),
            DurationValue::Text(t) => parse_duration(&t, name),
        })
        .transpose()
    }
    fn from_flag(v: &Option<String>, name: &'static str) -> Result<Option<Duration>, ConfigError> {
        v.as_deref().map(|t| parse_duration(t, name)).transpose()
    }
    /// The largest unit that divides it: `7d`, `24h`, `30m`, `10s`, `500ms`.
    fn show(v: &Duration) -> String {
        let ms = v.as_millis();
        let units = [
            (86_400_000, "d"),
            (3_600_000, "h"),
            (60_000, "m"),
            (1000, "s"),
        ];
        for (size, unit) in units {
            if ms >= size && ms.is_multiple_of(size) {
                return format!("{}{unit}", ms / size);
            }
        }
        format!("{ms}ms")
    }
}

/// A byte size in the file: a number, or a string like `"2GiB"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(super) enum SizeValue {
    Bytes(u64),
    Text(String),
}

impl Kind for Size {
    type Value = u64;
    type File = Option<SizeValue>;
    type Flag = Option<String>;
    fn from_file(v: Self::File, name: &'static str) -> Result<Option<u64>, ConfigError> {
        v.map(|v| match v {
            SizeValue::Bytes(b) => Ok(b),
            SizeValue::Text(t) => parse_bytes(&t, name),
        })
        .transpose()
    }
    fn from_flag(v: &Option<String>, name: &'static str) -> Result<Option<u64>, ConfigError> {
        v.as_deref().map(|t| parse_bytes(t, name)).transpose()
    }
    /// The largest binary unit that divides it: `2GiB`, `64MiB`, `16KiB`, `1000`.
    fn show(v: &u64) -> String {
        for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
            if *v >= 1 << shift && v.is_multiple_of(1 << shift) {
                return format!("{}{unit}", v >> shift);
            }
        }
        v.to_string()
    }
}

impl Kind for Listen {
    type Value = SocketAddr;
    type File = Option<String>;
    type Flag = Option<String>;
    fn from_file(v: Option<String>, _: &'static str) -> Result<Option<SocketAddr>, ConfigError> {
        v.as_deref().map(parse_listen).transpose()
    }
    fn from_flag(v: &Option<String>, _: &'static str) -> Result<Option<SocketAddr>, ConfigError> {
        v.as_deref().map(parse_listen).transpose()
    }
    fn show(v: &SocketAddr) -> String {
        v.to_string()
    }
}

impl Kind for Store {
    type Value = StoreSetting;
    type File = Option<String>;
    type Flag = Option<String>;
    fn from_file(v: Option<String>, _: &'static str) -> Result<Option<StoreSetting>, ConfigError> {
        v.as_deref().map(StoreSetting::parse).transpose()
    }
    fn from_flag(v: &Option<String>, n: &'static str) -> Result<Option<StoreSetting>, ConfigError> {
        Self::from_file(v.clone(), n)
    }
    fn show(v: &StoreSetting) -> String {
        match v {
            StoreSetting::Sled => "sled".into(),
            StoreSetting::Postgres(url) => url.clone(),
        }
    }
}

impl Kind for Media {
    type Value = MediaStoreSetting;
    type File = Option<String>;
    type Flag = Option<String>;
    fn from_file(
        v: Option<String>,
        _: &'static str,
    ) -> Result<Option<MediaStoreSetting>, ConfigError> {
        v.as_deref().map(MediaStoreSetting::parse).transpose()
    }
    fn from_flag(
        v: &Option<String>,
        n: &'static str,
    ) -> Result<Option<MediaStoreSetting>, ConfigError> {
        Self::from_file(v.clone(), n)
    }
    fn show(v: &MediaStoreSetting) -> String {
        match v {
            MediaStoreSetting::DataDir => "data_dir".into(),
            MediaStoreSetting::Dir(p) => p.display().to_string(),
            MediaStoreSetting::S3 { bucket, prefix } if prefix.is_empty() => {
                format!("s3://{bucket}")
            }
            MediaStoreSetting::S3 { bucket, prefix } => format!("s3://{bucket}/{prefix}"),
        }
    }
}

/// An empty list is "none" in the reference.
fn show_list<T: ToString>(v: &[T]) -> String {
    if v.is_empty() {
        return "none".into();
    }
    v.iter().map(T::to_string).collect::<Vec<_>>().join(", ")
}

impl Kind for List {
    type Value = Vec<String>;
    type File = Option<Vec<String>>;
    type Flag = Vec<String>;
    fn from_file(v: Self::File, _: &'static str) -> Result<Option<Vec<String>>, ConfigError> {
        Ok(v)
    }
    fn from_flag(v: &Vec<String>, _: &'static str) -> Result<Option<Vec<String>>, ConfigError> {
        Ok((!v.is_empty()).then(|| v.clone()))
    }
    fn show(v: &Vec<String>) -> String {
        show_list(v)
    }
}

/// `trusted_proxies` entries: addresses or CIDR ranges.
fn parse_proxies(entries: &[String]) -> Result<Vec<ipnet::IpNet>, ConfigError> {
    entries
        .iter()
        .map(|e| {
            parse_net(e).ok_or_else(|| ConfigError::Invalid {
                field: "trusted_proxies",
                reason: format!("`{e}` is neither an IP address nor a CIDR range"),
            })
        })
        .collect()
}

impl Kind for Proxies {
    type Value = Vec<ipnet::IpNet>;
    type File = Option<Vec<String>>;
    type Flag = Vec<String>;
    fn from_file(v: Self::File, _: &'static str) -> Result<Option<Self::Value>, ConfigError> {
        v.as_deref().map(parse_proxies).transpose()
    }
    fn from_flag(v: &Vec<String>, _: &'static str) -> Result<Option<Self::Value>, ConfigError> {
        (!v.is_empty()).then(|| parse_proxies(v)).transpose()
    }
    fn show(v: &Self::Value) -> String {
        show_list(v)
    }
}

impl Kind for Tokens {
    type Value = BTreeMap<String, String>;
    type File = Option<BTreeMap<String, String>>;
    type Flag = Vec<String>;
    fn from_file(v: Self::File, _: &'static str) -> Result<Option<Self::Value>, ConfigError> {
        Ok(v)
    }
    fn from_flag(v: &Vec<String>, _: &'static str) -> Result<Option<Self::Value>, ConfigError> {
        if v.is_empty() {
            return Ok(None);
        }
        let pairs: Result<BTreeMap<_, _>, _> = v.iter().map(|p| parse_token_pair(p)).collect();
        pairs.map(Some)
    }
    fn show(v: &Self::Value) -> String {
        if v.is_empty() {
            "none".into()
        } else {
            format!("{} tokens", v.len())
        }
    }
}

impl Kind for Switch {
    type Value = bool;
    type File = Option<bool>;
    type Flag = bool;
    fn from_file(v: Option<bool>, _: &'static str) -> Result<Option<bool>, ConfigError> {
        Ok(v)
    }
    fn from_flag(v: &bool, _: &'static str) -> Result<Option<bool>, ConfigError> {
        Ok(v.then_some(true))
    }
    fn show(v: &bool) -> String {
        v.to_string()
    }
}

impl Kind for Webhooks {
    type Value = BTreeMap<String, super::webhooks::Endpoint>;
    type File = Option<BTreeMap<String, super::webhooks::WebhookFile>>;
    type Flag = ();
    fn from_file(v: Self::File, _: &'static str) -> Result<Option<Self::Value>, ConfigError> {
        v.map(super::webhooks::endpoints_from_file).transpose()
    }
    fn from_flag(_: &(), _: &'static str) -> Result<Option<Self::Value>, ConfigError> {
        Ok(None)
    }
    fn show(v: &Self::Value) -> String {
        if v.is_empty() {
            "none".into()
        } else {
            v.keys().cloned().collect::<Vec<_>>().join(", ")
        }
    }
}
