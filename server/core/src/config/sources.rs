//! Where configuration comes from: the command-line flags (each with its `VIDFORGE_*`
//! variable) and the TOML file's shape, with the duration and size values both accept.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde::Deserialize;

use super::parse::{ConfigError, parse_bytes, parse_duration};
use super::{BackendSetting, EncoderSetting, HwDecodeSetting};

/// Configuration flags shared by `vidforge serve` and `vidforge assets`; each also reads a
/// `VIDFORGE_*` environment variable.
#[derive(Debug, Default, Clone, Args)]
pub struct ConfigArgs {
    /// TOML configuration file.
    #[arg(long, env = "VIDFORGE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Listen address (default 127.0.0.1:8080; use port 0 for any free port).
    #[arg(long, env = "VIDFORGE_LISTEN")]
    pub listen: Option<String>,
    /// Data directory (default ./vidforge-data).
    #[arg(long, env = "VIDFORGE_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Bearer token and its principal as TOKEN=PRINCIPAL; repeatable (env: comma-separated).
    #[arg(
        long = "token",
        env = "VIDFORGE_TOKENS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub tokens: Vec<String>,
    /// Renders that run at once.
    #[arg(long, env = "VIDFORGE_RENDER_SLOTS")]
    pub render_slots: Option<usize>,
    /// Non-terminal renders one principal may hold.
    #[arg(long, env = "VIDFORGE_PER_PRINCIPAL_CONCURRENT")]
    pub per_principal_concurrent: Option<usize>,
    /// Renders that may wait for a worker.
    #[arg(long, env = "VIDFORGE_QUEUE_CAPACITY")]
    pub queue_capacity: Option<usize>,
    /// Attempts of one render that may end the server process before it fails for good.
    #[arg(long, env = "VIDFORGE_MAX_RENDER_CRASHES")]
    pub max_render_crashes: Option<u32>,
    /// Largest upload, e.g. 2GiB, 500MB, 1048576.
    #[arg(long, env = "VIDFORGE_MAX_UPLOAD_BYTES")]
    pub max_upload_bytes: Option<String>,
    /// Free disk space under which new uploads and renders are refused, e.g. 1GiB.
    #[arg(long, env = "VIDFORGE_MIN_FREE_BYTES")]
    pub min_free_bytes: Option<String>,
    /// Ballast kept in the data dir so the server can start on a full disk, e.g. 64MiB (0: none).
    #[arg(long, env = "VIDFORGE_DISK_RESERVE_BYTES")]
    pub disk_reserve_bytes: Option<String>,
    /// Longest source video a render accepts, in seconds.
    #[arg(long, env = "VIDFORGE_MAX_SOURCE_SECONDS")]
    pub max_source_seconds: Option<u64>,
    /// Output pixels x frames this node renders per second (turns estimated work into seconds).
    #[arg(long, env = "VIDFORGE_RENDER_PIXEL_RATE")]
    pub render_pixel_rate: Option<u64>,
    /// Largest estimated work of one render, in seconds (render_too_large beyond).
    #[arg(long, env = "VIDFORGE_MAX_RENDER_SECONDS")]
    pub max_render_seconds: Option<u64>,
    /// Estimated seconds of work one principal may start per --render-budget-window (0: off).
    #[arg(long, env = "VIDFORGE_RENDER_BUDGET_SECONDS")]
    pub render_budget_seconds: Option<u64>,
    /// The window of --render-budget-seconds, e.g. 1h.
    #[arg(long, env = "VIDFORGE_RENDER_BUDGET_WINDOW")]
    pub render_budget_window: Option<String>,
    /// Renders estimated longer than this many seconds never hold up shorter ones.
    #[arg(long, env = "VIDFORGE_LONG_RENDER_SECONDS")]
    pub long_render_seconds: Option<u64>,
    /// Largest source video width or height accepted at upload.
    #[arg(long, env = "VIDFORGE_MAX_SOURCE_SIDE")]
    pub max_source_side: Option<u32>,
    /// Largest source video picture in pixels (width x height) accepted at upload.
    #[arg(long, env = "VIDFORGE_MAX_SOURCE_PIXELS")]
    pub max_source_pixels: Option<u64>,
    /// Largest watermark PNG width or height accepted at upload.
    #[arg(long, env = "VIDFORGE_MAX_WATERMARK_SIDE")]
    pub max_watermark_side: Option<u32>,
    /// Uploads probed at once.
    #[arg(long, env = "VIDFORGE_MAX_CONCURRENT_PROBES")]
    pub max_concurrent_probes: Option<usize>,
    /// Watermark approval timeout, e.g. 30m.
    #[arg(long, env = "VIDFORGE_APPROVAL_TIMEOUT")]
    pub approval_timeout: Option<String>,
    /// Task TTL, e.g. 24h.
    #[arg(long, env = "VIDFORGE_TASK_TTL")]
    pub task_ttl: Option<String>,
    /// Result retention, e.g. 7d.
    #[arg(long, env = "VIDFORGE_RESULT_TTL")]
    pub result_ttl: Option<String>,
    /// Asset retention after upload, e.g. 7d.
    #[arg(long, env = "VIDFORGE_ASSET_TTL")]
    pub asset_ttl: Option<String>,
    /// Idempotency-key retention, e.g. 24h.
    #[arg(long, env = "VIDFORGE_IDEMPOTENCY_TTL")]
    pub idempotency_ttl: Option<String>,
    /// Sweeper interval, e.g. 60s.
    #[arg(long, env = "VIDFORGE_SWEEP_INTERVAL")]
    pub sweep_interval: Option<String>,
    /// Limit for receiving a request head, e.g. 10s (also ends unused kept-alive connections).
    #[arg(long, env = "VIDFORGE_HEADER_READ_TIMEOUT")]
    pub header_read_timeout: Option<String>,
    /// A connection moving no bytes for this long is closed, e.g. 60s.
    #[arg(long, env = "VIDFORGE_IDLE_TIMEOUT")]
    pub idle_timeout: Option<String>,
    /// An upload sending nothing for this long is aborted (408), e.g. 30s.
    #[arg(long, env = "VIDFORGE_BODY_IDLE_TIMEOUT")]
    pub body_idle_timeout: Option<String>,
    /// Connections served at once; more wait until one closes.
    #[arg(long, env = "VIDFORGE_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Uploads served at once, at most half of --max-connections (default 64, or that half);
    /// more are refused at once (503 uploads_busy).
    #[arg(long, env = "VIDFORGE_MAX_CONCURRENT_UPLOADS")]
    pub max_concurrent_uploads: Option<usize>,
    /// Uploads served at once from one IP address (default 8); more: 429 uploads_busy.
    #[arg(long, env = "VIDFORGE_MAX_UPLOADS_PER_PEER")]
    pub max_uploads_per_peer: Option<usize>,
    /// Bytes per second an upload must average once --upload-rate-grace has passed, e.g.
    /// 16KiB (the default); slower uploads are aborted (408). 0: no minimum.
    #[arg(long, env = "VIDFORGE_UPLOAD_MIN_RATE")]
    pub upload_min_rate: Option<String>,
    /// How long an upload may run before --upload-min-rate applies, e.g. 10s.
    #[arg(long, env = "VIDFORGE_UPLOAD_RATE_GRACE")]
    pub upload_rate_grace: Option<String>,
    /// Task store: `sled` (embedded, the default) or postgres://USER:PASSWORD@HOST:PORT/DB,
    /// shared by every node of a cluster.
    #[arg(long, env = "VIDFORGE_STORE")]
    pub store: Option<String>,
    /// Where assets, previews and results live (default: the data directory). A cluster's
    /// nodes share one (a POSIX mount such as NFS).
    #[arg(long, env = "VIDFORGE_MEDIA_DIR")]
    pub media_dir: Option<PathBuf>,
    /// This node's name in work leases (default HOST:PORT of --listen).
    #[arg(long, env = "VIDFORGE_NODE_ID")]
    pub node_id: Option<String>,
    /// How long a cluster node's claim on a render lasts without renewal, e.g. 15s: a node
    /// that dies loses its renders to the others after this.
    #[arg(long, env = "VIDFORGE_LEASE_TTL")]
    pub lease_ttl: Option<String>,
    /// A browser session unused for this long is signed out, e.g. 2h.
    #[arg(long, env = "VIDFORGE_SESSION_IDLE_TIMEOUT")]
    pub session_idle_timeout: Option<String>,
    /// A browser session ends this long after sign-in however much it is used, e.g. 12h.
    #[arg(long, env = "VIDFORGE_SESSION_MAX_AGE")]
    pub session_max_age: Option<String>,
    /// Compositor backend.
    #[arg(long, env = "VIDFORGE_BACKEND", value_enum)]
    pub backend: Option<BackendSetting>,
    /// Video decoding: NVDEC when a CUDA device opens (auto), always (cuda), never (off).
    #[arg(long, env = "VIDFORGE_HWDECODE", value_enum)]
    pub hwdecode: Option<HwDecodeSetting>,
    /// H.264 encoder for mp4/mov: NVENC when a session opens (auto), x264, nvenc.
    #[arg(long, env = "VIDFORGE_ENCODER", value_enum)]
    pub encoder: Option<EncoderSetting>,
    /// Allowed browser origins (comma-separated).
    #[arg(
        long = "allowed-origin",
        env = "VIDFORGE_ALLOWED_ORIGINS",
        value_delimiter = ','
    )]
    pub allowed_origins: Vec<String>,
    /// Allowed Host header values (comma-separated).
    #[arg(
        long = "allowed-host",
        env = "VIDFORGE_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    pub allowed_hosts: Vec<String>,
    /// Base URL for download links.
    #[arg(long, env = "VIDFORGE_PUBLIC_BASE_URL")]
    pub public_base_url: Option<String>,
    /// Principals who see every render on the dashboard and may read /metrics from anywhere
    /// (comma-separated).
    #[arg(long = "admin", env = "VIDFORGE_ADMINS", value_delimiter = ',')]
    pub admins: Vec<String>,
    /// Serve /metrics without authentication to any address (default: loopback only).
    #[arg(long, env = "VIDFORGE_METRICS_PUBLIC")]
    pub metrics_public: bool,
    /// Wrong bearer tokens one address may send at once before 429 (0: no limit).
    #[arg(long, env = "VIDFORGE_AUTH_FAILURE_BURST")]
    pub auth_failure_burst: Option<u32>,
    /// Once the burst is spent, one more wrong token per this interval, e.g. 1s.
    #[arg(long, env = "VIDFORGE_AUTH_FAILURE_INTERVAL")]
    pub auth_failure_interval: Option<String>,
    /// Reverse proxies (addresses or CIDR ranges, comma-separated) whose X-Forwarded-For names
    /// the client for per-address limits.
    #[arg(
        long = "trusted-proxy",
        env = "VIDFORGE_TRUSTED_PROXIES",
        value_delimiter = ','
    )]
    pub trusted_proxies: Vec<String>,
}

/// The TOML file's shape; every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub listen: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub tokens: Option<BTreeMap<String, String>>,
    pub render_slots: Option<usize>,
    pub per_principal_concurrent: Option<usize>,
    pub queue_capacity: Option<usize>,
    pub max_render_crashes: Option<u32>,
    pub max_upload_bytes: Option<SizeValue>,
    pub min_free_bytes: Option<SizeValue>,
    pub disk_reserve_bytes: Option<SizeValue>,
    pub max_source_seconds: Option<u64>,
    pub render_pixel_rate: Option<u64>,
    pub max_render_seconds: Option<u64>,
    pub render_budget_seconds: Option<u64>,
    pub render_budget_window: Option<DurationValue>,
    pub long_render_seconds: Option<u64>,
    pub max_source_side: Option<u32>,
    pub max_source_pixels: Option<u64>,
    pub max_watermark_side: Option<u32>,
    pub max_concurrent_probes: Option<usize>,
    pub approval_timeout: Option<DurationValue>,
    pub task_ttl: Option<DurationValue>,
    pub result_ttl: Option<DurationValue>,
    pub asset_ttl: Option<DurationValue>,
    pub idempotency_ttl: Option<DurationValue>,
    pub tombstone_grace: Option<DurationValue>,
    pub sweep_interval: Option<DurationValue>,
    pub tick_interval: Option<DurationValue>,
    pub header_read_timeout: Option<DurationValue>,
    pub idle_timeout: Option<DurationValue>,
    pub body_idle_timeout: Option<DurationValue>,
    pub max_connections: Option<usize>,
    pub max_concurrent_uploads: Option<usize>,
    pub max_uploads_per_peer: Option<usize>,
    pub upload_min_rate: Option<SizeValue>,
    pub upload_rate_grace: Option<DurationValue>,
    pub store: Option<String>,
    pub media_dir: Option<PathBuf>,
    pub node_id: Option<String>,
    pub lease_ttl: Option<DurationValue>,
    pub session_idle_timeout: Option<DurationValue>,
    pub session_max_age: Option<DurationValue>,
    pub backend: Option<BackendSetting>,
    pub hwdecode: Option<HwDecodeSetting>,
    pub encoder: Option<EncoderSetting>,
    pub allowed_origins: Option<Vec<String>>,
    pub allowed_hosts: Option<Vec<String>>,
    pub public_base_url: Option<String>,
    pub admins: Option<Vec<String>>,
    pub metrics_public: Option<bool>,
    pub auth_failure_burst: Option<u32>,
    pub auth_failure_interval: Option<DurationValue>,
    pub trusted_proxies: Option<Vec<String>>,
}

/// A duration in the file: seconds as a number, or a string like `"30m"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum DurationValue {
    Seconds(u64),
    Text(String),
}

impl DurationValue {
    pub(super) fn duration(&self, field: &'static str) -> Result<Duration, ConfigError> {
        match self {
            DurationValue::Seconds(s) => Ok(Duration::from_secs(*s)),
            DurationValue::Text(t) => parse_duration(t, field),
        }
    }
}

/// A byte size in the file: a number, or a string like `"2GiB"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum SizeValue {
    Bytes(u64),
    Text(String),
}

impl SizeValue {
    pub(super) fn bytes(&self, field: &'static str) -> Result<u64, ConfigError> {
        match self {
            SizeValue::Bytes(b) => Ok(*b),
            SizeValue::Text(t) => parse_bytes(t, field),
        }
    }
}
