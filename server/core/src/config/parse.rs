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
         (--token TOKEN=PRINCIPAL, VIDFORGE_TOKENS, or [tokens] in the config file)"
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

/// Parses `500ms`, `90s`, `30m`, `24h`, `7d` or a bare number of seconds.
pub fn parse_duration(s: &str, field: &'static str) -> Result<Duration, ConfigError> {
    let t = s.trim();
    let err = || ConfigError::Invalid {
        field,
        reason: format!("'{s}' is not a duration like 500ms, 90s, 30m, 24h or 7d"),
    };
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num.parse().map_err(|_| err())?;
    let secs = match unit.trim() {
        "" | "s" => value,
        "ms" => value / 1000.0,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        "d" => value * 86_400.0,
        _ => return Err(err()),
    };
    if !secs.is_finite() || !(0.0..=1e12).contains(&secs) {
        return Err(err());
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses `1048576`, `500KB`, `500MB`, `2GB`, `64KiB`, `2GiB`.
pub fn parse_bytes(s: &str, field: &'static str) -> Result<u64, ConfigError> {
    let t = s.trim();
    let err = || ConfigError::Invalid {
        field,
        reason: format!("'{s}' is not a size like 1048576, 500MB or 2GiB"),
    };
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: u64 = num.parse().map_err(|_| err())?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        _ => return Err(err()),
    };
    value.checked_mul(mult).ok_or_else(err)
}

/// Parses a `trusted_proxies` entry: an address (`10.0.0.5`) or a CIDR range (`10.0.0.0/8`).
pub fn parse_net(s: &str) -> Option<ipnet::IpNet> {
    let s = s.trim();
    s.parse::<ipnet::IpNet>()
        .ok()
        .or_else(|| s.parse::<std::net::IpAddr>().ok().map(ipnet::IpNet::from))
}

/// `--hwdecode` of `vidforge render` and `vidforge bench`.
pub fn parse_hwdecode(s: &str) -> Result<vidforge_media::HwDecodeChoice, String> {
    vidforge_media::HwDecodeChoice::parse(s)
        .ok_or_else(|| format!("unknown hwdecode '{s}' (auto, cuda, off)"))
}

/// `--encoder` of `vidforge render` and `vidforge bench`.
pub fn parse_encoder(s: &str) -> Result<vidforge_media::EncoderChoice, String> {
    vidforge_media::EncoderChoice::parse(s)
        .ok_or_else(|| format!("unknown encoder '{s}' (auto, x264, nvenc)"))
}
