//! Parsing of configured values (listen address, tokens, durations, sizes) and the typed
//! [`ConfigError`] naming the field at fault.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Configuration problems, each naming the file or field at fault.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid config file {}: {message}", path.display())]
    Parse { path: PathBuf, message: String },
    #[error("invalid {field}: {reason}")]
    Invalid { field: &'static str, reason: String },
    #[error(
        "refusing to listen on {listen}: no tokens are configured, so every caller would be the \
         anonymous principal; bind a loopback address (127.0.0.1 / [::1]) or configure tokens \
         (--token TOKEN=PRINCIPAL, VIDFORGE_TOKENS, or [tokens] in the config file) or an OAuth \
         issuer (--oauth-issuer URL)"
    )]
    UnsafeBind { listen: SocketAddr },
}

pub(super) fn parse_listen(s: &str) -> Result<SocketAddr, ConfigError> {
    let s = s.trim();
    // Accept `localhost:PORT` as the loopback address it means.
    let normalized = match s.strip_prefix("localhost:") {
        Some(port) => format!("127.0.0.1:{port}"),
        None => s.to_string(),
    };
    normalized.parse().map_err(|_| ConfigError::Invalid {
        field: "listen",
        reason: format!("'{s}' is not an IP:PORT address"),
    })
}

pub(super) fn parse_token_pair(s: &str) -> Result<(String, String), ConfigError> {
    match s.split_once('=') {
        Some((t, p)) if !t.trim().is_empty() && !p.trim().is_empty() => {
            Ok((t.trim().to_string(), p.trim().to_string()))
        }
        _ => Err(ConfigError::Invalid {
            field: "tokens",
            reason: "expected TOKEN=PRINCIPAL".into(),
        }),
    }
}

/// Longest accepted duration, in seconds (about 31,700 years).
const MAX_DURATION_SECS: f64 = 1e12;

/// Parses `500ms`, `90s`, `30m`, `24h`, `7d` (anything [`humantime`] reads, such as `1h 30m`)
/// or a bare number of seconds (`90`, `1.5`).
pub fn parse_duration(s: &str, field: &'static str) -> Result<Duration, ConfigError> {
    let err = || ConfigError::Invalid {
        field,
        reason: format!("'{s}' is not a duration like 500ms, 90s, 30m, 24h or 7d"),
    };
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let duration = if unit.trim().is_empty() {
        // A bare number is seconds (humantime wants a unit).
        let secs: f64 = num.parse().map_err(|_| err())?;
        if !secs.is_finite() || !(0.0..=MAX_DURATION_SECS).contains(&secs) {
            return Err(err());
        }
        Duration::from_secs_f64(secs)
    } else {
        // humantime wants a digit on both sides of a decimal point (`.5s`, `1.s`).
        let num = match (num.starts_with('.'), num.ends_with('.')) {
            (true, _) => format!("0{num}"),
            (_, true) => format!("{num}0"),
            _ => num.to_string(),
        };
        humantime::parse_duration(&format!("{num}{unit}")).map_err(|_| err())?
    };
    if duration.as_secs_f64() > MAX_DURATION_SECS {
        return Err(err());
    }
    Ok(duration)
}

/// Parses `1048576`, `500KB`, `500MB`, `2GB`, `64KiB`, `2GiB` (anything [`bytesize`] reads,
/// units in any case).
pub fn parse_bytes(s: &str, field: &'static str) -> Result<u64, ConfigError> {
    let err = || ConfigError::Invalid {
        field,
        reason: format!("'{s}' is not a size like 1048576, 500MB or 2GiB"),
    };
    let t = s.trim();
    // A bare count of bytes, exactly (bytesize goes through f64).
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t.parse().map_err(|_| err());
    }
    match t.parse::<bytesize::ByteSize>() {
        // bytesize saturates on overflow; no size with a unit is exactly u64::MAX.
        Ok(size) if size.as_u64() != u64::MAX => Ok(size.as_u64()),
        _ => Err(err()),
    }
}

/// Parses a `trusted_proxies` entry: an address (`10.0.0.5`) or a CIDR range (`10.0.0.0/8`).
pub fn parse_net(s: &str) -> Option<ipnet::IpNet> {
    let s = s.trim();
    s.parse::<ipnet::IpNet>()
        .ok()
        .or_else(|| s.parse::<std::net::IpAddr>().ok().map(ipnet::IpNet::from))
}

/// A `--hwdecode`, `--encoder` or `--zero-copy` value that names none of the choices.
#[derive(Debug, thiserror::Error)]
#[error("unknown {what} '{value}' ({choices})")]
pub struct UnknownChoice {
    /// `hwdecode`, `encoder` or `zero-copy`.
    what: &'static str,
    value: String,
    /// The choices, comma-separated.
    choices: &'static str,
}

/// `--hwdecode` of `vidforge render` and `vidforge bench`.
pub fn parse_hwdecode(s: &str) -> Result<vidforge_media::HwDecodeChoice, UnknownChoice> {
    vidforge_media::HwDecodeChoice::from_any_case(s).ok_or_else(|| UnknownChoice {
        what: "hwdecode",
        value: s.to_string(),
        choices: "auto, cuda, off",
    })
}

/// `--encoder` of `vidforge render` and `vidforge bench`.
pub fn parse_encoder(s: &str) -> Result<vidforge_media::EncoderChoice, UnknownChoice> {
    vidforge_media::EncoderChoice::from_any_case(s).ok_or_else(|| UnknownChoice {
        what: "encoder",
        value: s.to_string(),
        choices: "auto, x264, nvenc",
    })
}

/// `--zero-copy` of `vidforge render`.
pub fn parse_zero_copy(s: &str) -> Result<vidforge_media::ZeroCopyChoice, UnknownChoice> {
    vidforge_media::ZeroCopyChoice::from_any_case(s).ok_or_else(|| UnknownChoice {
        what: "zero-copy",
        value: s.to_string(),
        choices: "auto, on, off",
    })
}
