//! Service configuration: zero-config defaults, overridable by a TOML file (`--config`), then by
//! `VIDFORGE_*` environment variables and command-line flags (flags and env win over the file).
//!
//! ```toml
//! listen = "127.0.0.1:8080"
//! data_dir = "./vidforge-data"
//! render_slots = 1
//! per_principal_concurrent = 2
//! queue_capacity = 32
//! max_render_crashes = 3      # attempts that may end the process before a render fails
//! max_upload_bytes = "2GiB"
//! min_free_bytes = "1GiB"     # refuse new uploads and renders under this much free disk
//! disk_reserve_bytes = "64MiB" # ballast that lets the server start on a full disk
//! max_source_seconds = 7200   # source video: longest a render accepts
//! render_pixel_rate = 80000000 # output pixels x frames this node renders per second
//! max_render_seconds = 600    # estimated work of one render (pixels x frames / rate)
//! render_budget_seconds = 1800 # estimated work one principal may start per window (0: off)
//! render_budget_window = "1h"
//! long_render_seconds = 60    # renders estimated longer never hold up shorter ones
//! max_source_side = 8192      # source video: largest width or height
//! max_source_pixels = 35389440 # source video: largest width x height (8192x4320)
//! max_watermark_side = 4096   # watermark PNG: largest width or height
//! max_concurrent_probes = 2   # uploads probed at once
//! approval_timeout = "30m"
//! task_ttl = "24h"
//! result_ttl = "7d"
//! asset_ttl = "7d"            # uploads are deleted this long after upload (unless in use)
//! backend = "auto"            # auto | wgpu | cpu
//! hwdecode = "auto"           # auto | cuda | off: NVDEC decoding
//! encoder = "auto"            # auto | x264 | nvenc: the H.264 encoder of mp4/mov
//! allowed_origins = ["http://localhost:3000"]
//! allowed_hosts = ["localhost", "127.0.0.1"]
//! public_base_url = "https://renders.example.com"
//! admins = ["ops"]             # principals who see every render on the dashboard
//! metrics_public = false       # /metrics without auth from any address (default: loopback)
//! auth_failure_burst = 20      # wrong bearer tokens a peer may send at once (0: no limit)
//! trusted_proxies = ["127.0.0.1"] # reverse proxies whose X-Forwarded-For names the client
//! auth_failure_interval = "1s" # ... then one more per interval; past it: 429 rate_limited
//! header_read_timeout = "10s"  # a request head must arrive within this
//! idle_timeout = "60s"         # a connection moving no bytes either way is closed
//! body_idle_timeout = "30s"    # an upload sending nothing for this long is aborted (408)
//! max_connections = 1024       # connections served at once; more wait to be accepted
//! max_concurrent_uploads = 64  # uploads at once (at most half of max_connections): 503 beyond
//! max_uploads_per_peer = 8     # uploads at once from one IP address: 429 beyond
//! upload_min_rate = "16KiB"    # bytes/s an upload must average after the grace period (0: off)
//! upload_rate_grace = "10s"    # ... counted from the upload's start
//! store = "sled"               # or "postgres://vidforge@db:5432/vidforge" (a cluster)
//! media_dir = "/mnt/media"     # assets, previews, results (default: data_dir); shared in a cluster
//! node_id = "gpu-host-1"       # this node's name in work leases (default HOST:PORT)
//! lease_ttl = "15s"            # a dead node's renders are taken over after this
//! session_idle_timeout = "2h"  # a browser session unused this long is signed out
//! session_max_age = "12h"      # a browser session ends this long after sign-in, used or not
//! [tokens]                     # bearer token -> principal name
//! "s3cret-token" = "alice"
//! ```
//!
//! With no tokens every request is the anonymous principal [`ANONYMOUS_PRINCIPAL`], and the
//! server refuses to listen on anything but a loopback address ([`Config::check_bind_safety`]).
//!
//! Each setting is declared once, in `settings.rs` (name = TOML key, type, default, kind, help
//! line, flag and `VIDFORGE_*` variable); `sources.rs` generates [`Config`], [`ConfigArgs`],
//! the file's shape and the one merge of both layers from that list, `kinds.rs` says how each
//! kind of value is read, `validate.rs` checks ranges, `derived.rs` holds the values computed
//! from settings, and `reference.rs` renders the table in docs/configuration.md.

use std::path::{Path, PathBuf};
use std::time::Duration;

use vidforge_media as media;

mod choices;
mod derived;
mod kinds;
mod parse;
mod reference;
mod settings;
mod sources;
mod validate;
mod webhooks;

pub use derived::SEGMENTS_DIR;
pub use parse::{
    ConfigError, UnknownChoice, parse_bytes, parse_duration, parse_encoder, parse_hwdecode,
    parse_net, parse_zero_copy,
};
pub use reference::reference_table;
pub use settings::{
    Config, ConfigArgs, DEFAULT_AUTH_FAILURE_BURST, DEFAULT_AUTH_FAILURE_INTERVAL,
    DEFAULT_BODY_IDLE_TIMEOUT, DEFAULT_DATA_DIR, DEFAULT_LISTEN, DEFAULT_MAX_CONCURRENT_UPLOADS,
    DEFAULT_MAX_RENDER_SECONDS, DEFAULT_MAX_UPLOADS_PER_PEER, DEFAULT_RENDER_PIXEL_RATE,
    DEFAULT_SESSION_IDLE_TIMEOUT, DEFAULT_SESSION_MAX_AGE,
};
use settings::{FileConfig, Layer};
pub use webhooks::{Endpoint, SECRET_PREFIX as WEBHOOK_SECRET_PREFIX};

/// The principal every request runs as when no tokens are configured.
pub const ANONYMOUS_PRINCIPAL: &str = "local";
/// Largest [`Config::max_watermark_side`] that may be configured.
pub const MAX_WATERMARK_SIDE: u32 = 8192;
/// Shortest accepted header and body timeout.
const MIN_CONNECTION_TIMEOUT: Duration = Duration::from_millis(100);

/// Which compositor the render engine uses (`--backend`): the media engine's own choice.
pub type BackendSetting = media::BackendChoice;
/// How video is decoded (`--hwdecode`): the media engine's own choice.
pub type HwDecodeSetting = media::HwDecodeChoice;
/// Which H.264 encoder writes mp4/mov (`--encoder`): the media engine's own choice.
pub type EncoderSetting = media::EncoderChoice;

/// Where media lives (`--media-store`): a directory (the data directory by default; a POSIX
/// mount such as NFS when a cluster shares it), or an S3-compatible bucket.
/// Whether idle render slots render watermarked renders ahead of their approval
/// (`speculative`; see the worker's `speculation`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Speculative {
    /// While a render waits for approval and a slot would sit idle, render it in full with
    /// the previewed settings; real work always takes the slot first.
    #[default]
    Auto,
    /// Render only after approval.
    Off,
}

vidforge_names::enum_names!(Speculative {
    Auto => "auto",
    Off => "off",
});

/// Whether long renders are split into segments rendered in parallel (`fanout`; see the
/// worker's `segments`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fanout {
    /// Split a render whose source is longer than `segment_min_duration` when another slot
    /// is free.
    #[default]
    Auto,
    /// Every render in one pass.
    Off,
}

vidforge_names::enum_names!(Fanout {
    Auto => "auto",
    Off => "off",
});

/// The scheduling policy of the render threads (`render_sched`; see `crate::priority`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RenderSched {
    /// `SCHED_OTHER` at `render_nice`.
    Normal,
    /// `SCHED_BATCH` at `render_nice`: as `normal`, and never preempts the front on wakeup.
    #[default]
    Batch,
    /// `SCHED_IDLE`: renders run only on CPU time nothing else on the machine wants.
    Idle,
}

vidforge_names::enum_names!(RenderSched {
    Normal => "normal",
    Batch => "batch",
    Idle => "idle",
});

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum MediaStoreSetting {
    /// `assets/`, `previews/`, `results/` under the data directory.
    #[default]
    DataDir,
    /// The same tree under this directory.
    Dir(PathBuf),
    /// Objects under `s3://BUCKET/PREFIX/`; the data directory keeps only scratch files and the
    /// bounded source cache.
    S3 {
        bucket: String,
        /// Without leading or trailing `/`; may be empty.
        prefix: String,
    },
}

impl MediaStoreSetting {
    /// A path, or `s3://BUCKET[/PREFIX]`.
    pub fn parse(value: &str) -> Result<MediaStoreSetting, ConfigError> {
        let v = value.trim();
        let bad = |reason: &str| ConfigError::Invalid {
            field: "media_store",
            reason: reason.into(),
        };
        if let Some(rest) = v.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            let valid_bucket = (3..=63).contains(&bucket.len())
                && bucket
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
            if !valid_bucket {
                return Err(bad(
                    "s3://BUCKET/PREFIX needs a bucket name of 3 to 63 lowercase letters, digits, `-` or `.`",
                ));
            }
            let prefix = prefix.trim_matches('/');
            if prefix.split('/').any(|s| s == "." || s == "..")
                || prefix.contains("//")
                || prefix.chars().any(|c| c.is_control())
            {
                return Err(bad(
                    "the prefix of s3://BUCKET/PREFIX must be a plain key path",
                ));
            }
            return Ok(MediaStoreSetting::S3 {
                bucket: bucket.into(),
                prefix: prefix.into(),
            });
        }
        if v.contains("://") {
            return Err(bad(
                "must be a directory or s3://BUCKET/PREFIX (other object stores: their S3-compatible endpoint with --s3-endpoint)",
            ));
        }
        if v.is_empty() {
            return Err(bad("must not be empty"));
        }
        Ok(MediaStoreSetting::Dir(PathBuf::from(v)))
    }

    /// Whether media lives in a bucket.
    pub fn is_object_store(&self) -> bool {
        matches!(self, MediaStoreSetting::S3 { .. })
    }
}

/// Which task store (`--store`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum StoreSetting {
    /// The embedded sled database under the data directory (one node).
    #[default]
    Sled,
    /// A PostgreSQL database at this URL, shared by every node of a cluster.
    Postgres(String),
}

impl StoreSetting {
    /// `sled`, or a `postgres://` / `postgresql://` URL.
    pub fn parse(value: &str) -> Result<StoreSetting, ConfigError> {
        let v = value.trim();
        if v == "sled" {
            Ok(StoreSetting::Sled)
        } else if v.starts_with("postgres://") || v.starts_with("postgresql://") {
            Ok(StoreSetting::Postgres(v.to_string()))
        } else {
            Err(ConfigError::Invalid {
                field: "store",
                reason: "must be `sled` or a postgres://USER@HOST:PORT/DB URL".into(),
            })
        }
    }
}

impl Config {
    /// Defaults with the given data directory (handy for tests).
    pub fn with_data_dir(data_dir: impl Into<PathBuf>) -> Self {
        Config {
            data_dir: data_dir.into(),
            ..Config::default()
        }
    }

    /// Defaults, then the TOML file named by `args.config` (if any), then flags/env.
    pub fn load(args: &ConfigArgs) -> Result<Config, ConfigError> {
        // `media_dir` became `media_store` (the flag `--media-dir` stays an alias): an old
        // variable left set must not silently put a farm's media in each node's data dir.
        if std::env::var_os("VIDFORGE_MEDIA_DIR").is_some() {
            return Err(ConfigError::Invalid {
                field: "media_store",
                reason: "VIDFORGE_MEDIA_DIR was renamed VIDFORGE_MEDIA_STORE (TOML: media_store)"
                    .into(),
            });
        }
        let mut cfg = Config::default();
        if let Some(path) = &args.config {
            let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
                path: path.clone(),
                source: e,
            })?;
            let file: FileConfig = toml::from_str(&text).map_err(|e| ConfigError::Parse {
                path: path.clone(),
                message: e.to_string(),
            })?;
            Layer::from_file(file)?.apply(&mut cfg);
        }
        Layer::from_args(args)?.apply(&mut cfg);
        cfg.validate()?;
        Ok(cfg)
    }
}

/// Half the cores (one on a 2-core machine; at most 32): each render's decoder and encoder then
/// get the cores shared among the renders running at once (`Pool::thread_budget`), so a
/// render alone still uses the whole host, and a full node keeps every core busy with a
/// couple of threads per render instead of every render sizing itself to the whole machine.
pub fn default_render_slots() -> usize {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    (cores / 2).clamp(1, 32)
}

/// Resolves `p` against the current directory for display.
pub fn display_path(p: &Path) -> String {
    std::path::absolute(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}

#[cfg(test)]
mod tests;
