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

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::catalog;
use crate::engine::SourceLimits;

mod parse;
mod sources;

pub use parse::{
    ConfigError, parse_bytes, parse_duration, parse_encoder, parse_hwdecode, parse_net,
};
use parse::{parse_listen, parse_token_pair};
pub use sources::{ConfigArgs, DurationValue, FileConfig, SizeValue};

/// The principal every request runs as when no tokens are configured.
pub const ANONYMOUS_PRINCIPAL: &str = "local";
/// Default listen address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// Default data directory.
pub const DEFAULT_DATA_DIR: &str = "./vidforge-data";
/// Default upload limit: 2 GiB.
pub const DEFAULT_MAX_UPLOAD_BYTES: u64 = 2 * 1024 * 1024 * 1024;
/// Default per-principal limit of non-terminal renders.
pub const DEFAULT_PER_PRINCIPAL_CONCURRENT: usize = 2;
/// Default number of renders that may wait for a worker.
pub const DEFAULT_QUEUE_CAPACITY: usize = 32;
/// Default [`Config::max_source_seconds`]: 2 hours.
pub const DEFAULT_MAX_SOURCE_SECONDS: u64 = 2 * 60 * 60;
/// Default [`Config::render_pixel_rate`]: output pixel-frames per second measured with the
/// CPU compositor and x264 (`veryfast`) on a 2-core machine: 720p and 1080p renders of a
/// 720p clip ran at 1.0e8 and 0.95e8, a 4k render of a 16×16 clip at 0.83e8.
pub const DEFAULT_RENDER_PIXEL_RATE: u64 = 80_000_000;
/// Default [`Config::max_render_seconds`]: 10 minutes of estimated work.
pub const DEFAULT_MAX_RENDER_SECONDS: u64 = 10 * 60;
/// Default [`Config::render_budget_seconds`]: half an hour of estimated work per window.
pub const DEFAULT_RENDER_BUDGET_SECONDS: u64 = 30 * 60;
/// Default [`Config::render_budget_window`].
pub const DEFAULT_RENDER_BUDGET_WINDOW: Duration = Duration::from_secs(60 * 60);
/// Default [`Config::long_render_seconds`].
pub const DEFAULT_LONG_RENDER_SECONDS: u64 = 60;
/// Default [`Config::min_free_bytes`]: 1 GiB.
pub const DEFAULT_MIN_FREE_BYTES: u64 = 1 << 30;
/// Default [`Config::disk_reserve_bytes`]: 64 MiB.
pub const DEFAULT_DISK_RESERVE_BYTES: u64 = 64 << 20;
/// Default [`Config::max_watermark_side`].
pub const DEFAULT_MAX_WATERMARK_SIDE: u32 = 4096;
/// Largest [`Config::max_watermark_side`] that may be configured.
pub const MAX_WATERMARK_SIDE: u32 = 8192;
/// Default [`Config::max_concurrent_probes`].
pub const DEFAULT_MAX_CONCURRENT_PROBES: usize = 2;
/// Default [`Config::max_render_crashes`].
pub const DEFAULT_MAX_RENDER_CRASHES: u32 = 3;
/// Default interval of the approval-deadline check.
pub const DEFAULT_TICK_INTERVAL: Duration = Duration::from_secs(1);
/// Default limit for receiving a request head (see [`Config::header_read_timeout`]).
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Default limit for a connection that moves no bytes (see [`Config::idle_timeout`]).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default limit for a request body that delivers nothing (see [`Config::body_idle_timeout`]).
pub const DEFAULT_BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Default number of connections served at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Default [`Config::auth_failure_burst`].
pub const DEFAULT_AUTH_FAILURE_BURST: u32 = 20;
/// Default [`Config::auth_failure_interval`].
pub const DEFAULT_AUTH_FAILURE_INTERVAL: Duration = Duration::from_secs(1);
/// Default [`Config::max_concurrent_uploads`] (less when `max_connections` is under twice it:
/// [`Config::upload_slots`]).
pub const DEFAULT_MAX_CONCURRENT_UPLOADS: usize = 64;
/// Default [`Config::max_uploads_per_peer`].
pub const DEFAULT_MAX_UPLOADS_PER_PEER: usize = 8;
/// Default [`Config::upload_min_rate`]: 16 KiB/s (128 kbit/s).
pub const DEFAULT_UPLOAD_MIN_RATE: u64 = 16 << 10;
/// Default [`Config::upload_rate_grace`].
pub const DEFAULT_UPLOAD_RATE_GRACE: Duration = Duration::from_secs(10);
/// Default [`Config::lease_ttl`].
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(15);
/// Default [`Config::session_idle_timeout`].
pub const DEFAULT_SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(2 * 3600);
/// Default [`Config::session_max_age`].
pub const DEFAULT_SESSION_MAX_AGE: Duration = Duration::from_secs(12 * 3600);
/// Shortest accepted header and body timeout.
const MIN_CONNECTION_TIMEOUT: Duration = Duration::from_millis(100);
/// How long a tombstone of an expired result is kept after its files are deleted, so a late
/// read gets `result_expired` (with a repair) rather than `render_not_found`.
pub const DEFAULT_TOMBSTONE_GRACE: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// Which compositor the render engine uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BackendSetting {
    /// wgpu on a hardware adapter when there is one, otherwise the CPU compositor.
    #[default]
    Auto,
    /// Always wgpu (a software adapter counts).
    Wgpu,
    /// Always the CPU compositor.
    Cpu,
}

impl BackendSetting {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendSetting::Auto => "auto",
            BackendSetting::Wgpu => "wgpu",
            BackendSetting::Cpu => "cpu",
        }
    }
}

/// How video is decoded (`--hwdecode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum HwDecodeSetting {
    /// NVDEC when a CUDA device opens and supports the codec (per job), else software.
    #[default]
    Auto,
    /// NVDEC; the server does not start without a CUDA device.
    Cuda,
    /// Software decoding only.
    Off,
}

/// Which H.264 encoder writes mp4/mov (`--encoder`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum EncoderSetting {
    /// NVENC when an encoder session opens at start-up, else libx264.
    #[default]
    Auto,
    /// libx264.
    X264,
    /// NVENC; the server does not start without it.
    Nvenc,
}

/// The resolved configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// Address the HTTP server binds.
    pub listen: SocketAddr,
    /// Root of the sled database (`db/`), `assets/`, `results/` and `previews/`.
    pub data_dir: PathBuf,
    /// Bearer token -> principal name. Empty: single anonymous principal, loopback only.
    pub tokens: BTreeMap<String, String>,
    /// Worker threads, i.e. renders that run at once.
    pub render_slots: usize,
    /// Non-terminal renders (queued, running or awaiting approval) one principal may hold.
    pub per_principal_concurrent: usize,
    /// Renders that may wait for a free worker, beyond the ones running (with a shared store:
    /// renders waiting anywhere in the cluster).
    pub queue_capacity: usize,
    /// Attempts of one render that may end with the server process (a crash, an abort, an
    /// out-of-memory kill) before boot recovery ends it as `render_failed` instead of
    /// restarting it again: no crash loops.
    pub max_render_crashes: u32,
    /// Largest accepted upload.
    pub max_upload_bytes: u64,
    /// New uploads and renders are refused (`storage_full`) while free space on the data dir
    /// is under this floor; finishing work and reads go on.
    pub min_free_bytes: u64,
    /// Size of the ballast file that lets the server start on a full disk (0: none).
    pub disk_reserve_bytes: u64,
    /// Longest source a render accepts, in seconds (checked at creation from the probe).
    pub max_source_seconds: u64,
    /// Output pixel-frames (width × height × frames) this node renders per second: turns a
    /// render's estimated work into estimated seconds for the limits below.
    pub render_pixel_rate: u64,
    /// Largest estimated work of one render, in seconds at `render_pixel_rate`; larger ones
    /// are refused at creation (`render_too_large`, with a lower resolution that fits).
    pub max_render_seconds: u64,
    /// Estimated work one principal may start per `render_budget_window`, in seconds at
    /// `render_pixel_rate` (`render_budget_exceeded` beyond); 0: no budget.
    pub render_budget_seconds: u64,
    /// The sliding window of `render_budget_seconds`.
    pub render_budget_window: Duration,
    /// Renders estimated above this many seconds are long: while one runs, a further worker
    /// runs short ones, so a short render never waits behind a long one.
    pub long_render_seconds: u64,
    /// Largest source video picture, checked at upload before anything is decoded.
    pub max_source_side: u32,
    /// Largest source video picture in pixels (width x height).
    pub max_source_pixels: u64,
    /// Largest watermark PNG side (a watermark covers at most a quarter of a 4K frame).
    pub max_watermark_side: u32,
    /// Uploads probed at once (probing decodes; the rest wait their turn).
    pub max_concurrent_probes: usize,
    /// How long a watermark preview waits for a decision.
    pub approval_timeout: Duration,
    /// Task lifetime (`ttlMs`).
    pub task_ttl: Duration,
    /// Result and status retention.
    pub result_ttl: Duration,
    /// How long an uploaded asset is kept (renders still using it keep it longer).
    pub asset_ttl: Duration,
    /// Idempotency-key retention.
    pub idempotency_ttl: Duration,
    /// Extra time a result tombstone is kept after its files are swept.
    pub tombstone_grace: Duration,
    /// Compositor choice.
    pub backend: BackendSetting,
    /// Decoder choice.
    pub hwdecode: HwDecodeSetting,
    /// H.264 encoder choice.
    pub encoder: EncoderSetting,
    /// Origins allowed to call the MCP endpoint (browser clients). Empty: no Origin accepted
    /// except requests that send none.
    pub allowed_origins: Vec<String>,
    /// Host header values accepted (DNS-rebinding protection). Empty: loopback names plus the
    /// listen address.
    pub allowed_hosts: Vec<String>,
    /// Base URL used in download links; default `http://<listen>`.
    pub public_base_url: Option<String>,
    /// Principals who see every render on the dashboard and may read `/metrics` from any
    /// address.
    pub admins: Vec<String>,
    /// `/metrics` answers without authentication to any address (default: only to loopback
    /// peers; others need an admin's bearer token).
    pub metrics_public: bool,
    /// Wrong bearer tokens one peer (an IPv4 address, an IPv6 /64) may send at once before
    /// `429` `rate_limited`; 0 disables the limit (`vidforge_http::auth_limit`).
    pub auth_failure_burst: u32,
    /// One more wrong token is allowed per this interval once the burst is spent.
    pub auth_failure_interval: Duration,
    /// Reverse proxies (addresses or CIDR ranges) whose `X-Forwarded-For` names the client
    /// for the per-address rules (`vidforge_http::peer`). Empty: the TCP peer is the client.
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// How often the sweeper runs.
    pub sweep_interval: Duration,
    /// How often approval deadlines are checked.
    pub tick_interval: Duration,
    /// A request head (request line and headers) must arrive within this, or the connection
    /// is closed. hyper starts this clock whenever a connection waits for a request, so it
    /// also closes a kept-alive connection that sends no next request.
    pub header_read_timeout: Duration,
    /// A connection that moves no bytes in either direction for this long (a response the
    /// client does not read, a kept-alive connection nobody uses) is asked to close: at once
    /// when no request is in flight, after that request otherwise; if it still moves nothing
    /// for another `idle_timeout` it is closed. SSE streams send keep-alives more often.
    pub idle_timeout: Duration,
    /// A request body (an upload) that delivers no bytes for this long is aborted: `408`
    /// with `upload_timeout`, and the upload's temporary file is removed.
    pub body_idle_timeout: Duration,
    /// Connections served at once; further ones wait in the listen backlog until one closes.
    pub max_connections: usize,
    /// Uploads served at once (`None`: [`DEFAULT_MAX_CONCURRENT_UPLOADS`], at most half of
    /// `max_connections`; see [`Config::upload_slots`]). Further uploads are refused at once,
    /// unread: `503` `uploads_busy`. At most half of `max_connections`, so uploads alone never
    /// take every connection from `/mcp` and downloads.
    pub max_concurrent_uploads: Option<usize>,
    /// Uploads served at once from one peer IP address; further ones: `429` `uploads_busy`.
    /// Behind a reverse proxy every client is the proxy's address: raise it there (the proxy
    /// limits its own clients).
    pub max_uploads_per_peer: usize,
    /// Bytes per second an upload must average, counted from its start, once
    /// `upload_rate_grace` has passed (Apache `mod_reqtimeout`'s `MinRate`): slower ones are
    /// aborted with `408` `upload_timeout` and nothing kept. `0`: no minimum (only
    /// `body_idle_timeout`).
    pub upload_min_rate: u64,
    /// How long an upload may run before `upload_min_rate` applies.
    pub upload_rate_grace: Duration,
    /// Where tasks live: the embedded sled database, or a PostgreSQL shared by a cluster.
    pub store: StoreSetting,
    /// Root of `assets/`, `results/` and `previews/`; `None`: the data directory.
    pub media_dir: Option<PathBuf>,
    /// This node's name in work leases; `None`: `HOST:PORT` of the listen address.
    pub node_id: Option<String>,
    /// How long a node's claim on a render lasts unrenewed (renewed every third of it).
    pub lease_ttl: Duration,
    /// A browser session not used for this long is over (its cookie carries when it was last
    /// seen, re-issued as it is used; `vidforge_http::session`).
    pub session_idle_timeout: Duration,
    /// A browser session is over this long after sign-in, however much it is used.
    pub session_max_age: Duration,
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
            listen: DEFAULT_LISTEN.parse().expect("constant address parses"),
            data_dir: data_dir.into(),
            tokens: BTreeMap::new(),
            render_slots: default_render_slots(),
            per_principal_concurrent: DEFAULT_PER_PRINCIPAL_CONCURRENT,
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
            max_render_crashes: DEFAULT_MAX_RENDER_CRASHES,
            max_upload_bytes: DEFAULT_MAX_UPLOAD_BYTES,
            min_free_bytes: DEFAULT_MIN_FREE_BYTES,
            disk_reserve_bytes: DEFAULT_DISK_RESERVE_BYTES,
            max_source_seconds: DEFAULT_MAX_SOURCE_SECONDS,
            render_pixel_rate: DEFAULT_RENDER_PIXEL_RATE,
            max_render_seconds: DEFAULT_MAX_RENDER_SECONDS,
            render_budget_seconds: DEFAULT_RENDER_BUDGET_SECONDS,
            render_budget_window: DEFAULT_RENDER_BUDGET_WINDOW,
            long_render_seconds: DEFAULT_LONG_RENDER_SECONDS,
            max_source_side: SourceLimits::DEFAULT.max_side,
            max_source_pixels: SourceLimits::DEFAULT.max_pixels,
            max_watermark_side: DEFAULT_MAX_WATERMARK_SIDE,
            max_concurrent_probes: DEFAULT_MAX_CONCURRENT_PROBES,
            approval_timeout: catalog::APPROVAL_TIMEOUT,
            task_ttl: catalog::TASK_TTL,
            result_ttl: catalog::RESULT_TTL,
            asset_ttl: catalog::ASSET_TTL,
            idempotency_ttl: catalog::IDEMPOTENCY_TTL,
            tombstone_grace: DEFAULT_TOMBSTONE_GRACE,
            backend: BackendSetting::Auto,
            hwdecode: HwDecodeSetting::Auto,
            encoder: EncoderSetting::Auto,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            public_base_url: None,
            admins: Vec::new(),
            metrics_public: false,
            auth_failure_burst: DEFAULT_AUTH_FAILURE_BURST,
            auth_failure_interval: DEFAULT_AUTH_FAILURE_INTERVAL,
            trusted_proxies: Vec::new(),
            sweep_interval: catalog::SWEEP_INTERVAL,
            tick_interval: DEFAULT_TICK_INTERVAL,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            body_idle_timeout: DEFAULT_BODY_IDLE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_concurrent_uploads: None,
            max_uploads_per_peer: DEFAULT_MAX_UPLOADS_PER_PEER,
            upload_min_rate: DEFAULT_UPLOAD_MIN_RATE,
            upload_rate_grace: DEFAULT_UPLOAD_RATE_GRACE,
            store: StoreSetting::Sled,
            media_dir: None,
            node_id: None,
            lease_ttl: DEFAULT_LEASE_TTL,
            session_idle_timeout: DEFAULT_SESSION_IDLE_TIMEOUT,
            session_max_age: DEFAULT_SESSION_MAX_AGE,
        }
    }

    /// Uploads served at once: `max_concurrent_uploads`, by default
    /// [`DEFAULT_MAX_CONCURRENT_UPLOADS`] but never more than half of `max_connections` (at
    /// least one).
    pub fn upload_slots(&self) -> usize {
        self.max_concurrent_uploads
            .unwrap_or_else(|| DEFAULT_MAX_CONCURRENT_UPLOADS.min(self.max_connections / 2))
            .max(1)
    }

    /// [`Config::max_render_seconds`] in output pixel-frames.
    pub fn max_render_pixel_frames(&self) -> u64 {
        self.max_render_seconds
            .saturating_mul(self.render_pixel_rate)
    }

    /// [`Config::render_budget_seconds`] in output pixel-frames (`None`: no budget).
    pub fn render_budget_pixel_frames(&self) -> Option<u64> {
        (self.render_budget_seconds > 0).then(|| {
            self.render_budget_seconds
                .saturating_mul(self.render_pixel_rate)
        })
    }

    /// [`Config::long_render_seconds`] in output pixel-frames.
    pub fn long_render_pixel_frames(&self) -> u64 {
        self.long_render_seconds
            .saturating_mul(self.render_pixel_rate)
    }

    /// The configured TTLs and approval timeout, as descriptions and messages state them.
    /// What an upload may be.
    pub fn upload_limits(&self) -> crate::assets::UploadLimits {
        crate::assets::UploadLimits {
            max_bytes: self.max_upload_bytes,
            source: SourceLimits {
                max_side: self.max_source_side,
                max_pixels: self.max_source_pixels,
            },
            max_watermark_side: self.max_watermark_side,
            concurrent_probes: self.max_concurrent_probes,
        }
    }

    pub fn lifetimes(&self) -> catalog::Lifetimes {
        catalog::Lifetimes {
            asset_ttl: self.asset_ttl,
            task_ttl: self.task_ttl,
            result_ttl: self.result_ttl,
            idempotency_ttl: self.idempotency_ttl,
            approval_timeout: self.approval_timeout,
        }
    }

    /// Defaults, then the TOML file named by `args.config` (if any), then flags/env.
    pub fn load(args: &ConfigArgs) -> Result<Config, ConfigError> {
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
            cfg.apply_file(file)?;
        }
        cfg.apply_args(args)?;
        cfg.validate()?;
        Ok(cfg)
    }

    fn apply_file(&mut self, f: FileConfig) -> Result<(), ConfigError> {
        if let Some(v) = f.listen {
            self.listen = parse_listen(&v)?;
        }
        if let Some(v) = f.data_dir {
            self.data_dir = v;
        }
        if let Some(v) = f.tokens {
            self.tokens = v;
        }
        set(&mut self.render_slots, f.render_slots);
        set(
            &mut self.per_principal_concurrent,
            f.per_principal_concurrent,
        );
        set(&mut self.queue_capacity, f.queue_capacity);
        set(&mut self.max_render_crashes, f.max_render_crashes);
        set(&mut self.max_source_seconds, f.max_source_seconds);
        set(&mut self.render_pixel_rate, f.render_pixel_rate);
        set(&mut self.max_render_seconds, f.max_render_seconds);
        set(&mut self.render_budget_seconds, f.render_budget_seconds);
        if let Some(v) = &f.render_budget_window {
            self.render_budget_window = v.duration("render_budget_window")?;
        }
        set(&mut self.long_render_seconds, f.long_render_seconds);
        set(&mut self.max_source_side, f.max_source_side);
        set(&mut self.max_source_pixels, f.max_source_pixels);
        set(&mut self.max_watermark_side, f.max_watermark_side);
        set(&mut self.max_concurrent_probes, f.max_concurrent_probes);
        if let Some(v) = f.max_upload_bytes {
            self.max_upload_bytes = v.bytes("max_upload_bytes")?;
        }
        if let Some(v) = f.min_free_bytes {
            self.min_free_bytes = v.bytes("min_free_bytes")?;
        }
        if let Some(v) = f.disk_reserve_bytes {
            self.disk_reserve_bytes = v.bytes("disk_reserve_bytes")?;
        }
        for (slot, value, name) in [
            (
                &mut self.approval_timeout,
                f.approval_timeout,
                "approval_timeout",
            ),
            (&mut self.task_ttl, f.task_ttl, "task_ttl"),
            (&mut self.result_ttl, f.result_ttl, "result_ttl"),
            (&mut self.asset_ttl, f.asset_ttl, "asset_ttl"),
            (
                &mut self.idempotency_ttl,
                f.idempotency_ttl,
                "idempotency_ttl",
            ),
            (
                &mut self.tombstone_grace,
                f.tombstone_grace,
                "tombstone_grace",
            ),
            (&mut self.sweep_interval, f.sweep_interval, "sweep_interval"),
            (&mut self.tick_interval, f.tick_interval, "tick_interval"),
            (
                &mut self.header_read_timeout,
                f.header_read_timeout,
                "header_read_timeout",
            ),
            (&mut self.idle_timeout, f.idle_timeout, "idle_timeout"),
            (
                &mut self.body_idle_timeout,
                f.body_idle_timeout,
                "body_idle_timeout",
            ),
            (
                &mut self.upload_rate_grace,
                f.upload_rate_grace,
                "upload_rate_grace",
            ),
        ] {
            if let Some(v) = value {
                *slot = v.duration(name)?;
            }
        }
        set(&mut self.max_connections, f.max_connections);
        if f.max_concurrent_uploads.is_some() {
            self.max_concurrent_uploads = f.max_concurrent_uploads;
        }
        set(&mut self.max_uploads_per_peer, f.max_uploads_per_peer);
        if let Some(v) = f.upload_min_rate {
            self.upload_min_rate = v.bytes("upload_min_rate")?;
        }
        if let Some(v) = &f.store {
            self.store = StoreSetting::parse(v)?;
        }
        if f.media_dir.is_some() {
            self.media_dir = f.media_dir;
        }
        if f.node_id.is_some() {
            self.node_id = f.node_id;
        }
        if let Some(v) = f.lease_ttl {
            self.lease_ttl = v.duration("lease_ttl")?;
        }
        if let Some(v) = f.session_idle_timeout {
            self.session_idle_timeout = v.duration("session_idle_timeout")?;
        }
        if let Some(v) = f.session_max_age {
            self.session_max_age = v.duration("session_max_age")?;
        }
        set(&mut self.backend, f.backend);
        set(&mut self.hwdecode, f.hwdecode);
        set(&mut self.encoder, f.encoder);
        set(&mut self.allowed_origins, f.allowed_origins);
        set(&mut self.allowed_hosts, f.allowed_hosts);
        if f.public_base_url.is_some() {
            self.public_base_url = f.public_base_url;
        }
        set(&mut self.admins, f.admins);
        set(&mut self.metrics_public, f.metrics_public);
        set(&mut self.auth_failure_burst, f.auth_failure_burst);
        if let Some(v) = f.auth_failure_interval {
            self.auth_failure_interval = v.duration("auth_failure_interval")?;
        }
        if let Some(v) = &f.trusted_proxies {
            self.trusted_proxies = parse_proxies(v)?;
        }
        Ok(())
    }

    fn apply_args(&mut self, a: &ConfigArgs) -> Result<(), ConfigError> {
        if let Some(v) = &a.listen {
            self.listen = parse_listen(v)?;
        }
        set(&mut self.data_dir, a.data_dir.clone());
        if !a.tokens.is_empty() {
            let mut tokens = BTreeMap::new();
            for pair in &a.tokens {
                let (token, principal) = parse_token_pair(pair)?;
                tokens.insert(token, principal);
            }
            self.tokens = tokens;
        }
        set(&mut self.render_slots, a.render_slots);
        set(
            &mut self.per_principal_concurrent,
            a.per_principal_concurrent,
        );
        set(&mut self.queue_capacity, a.queue_capacity);
        set(&mut self.max_render_crashes, a.max_render_crashes);
        set(&mut self.max_source_seconds, a.max_source_seconds);
        set(&mut self.render_pixel_rate, a.render_pixel_rate);
        set(&mut self.max_render_seconds, a.max_render_seconds);
        set(&mut self.render_budget_seconds, a.render_budget_seconds);
        if let Some(v) = &a.render_budget_window {
            self.render_budget_window = parse_duration(v, "render_budget_window")?;
        }
        set(&mut self.long_render_seconds, a.long_render_seconds);
        set(&mut self.max_source_side, a.max_source_side);
        set(&mut self.max_source_pixels, a.max_source_pixels);
        set(&mut self.max_watermark_side, a.max_watermark_side);
        set(&mut self.max_concurrent_probes, a.max_concurrent_probes);
        if let Some(v) = &a.max_upload_bytes {
            self.max_upload_bytes = parse_bytes(v, "max_upload_bytes")?;
        }
        if let Some(v) = &a.min_free_bytes {
            self.min_free_bytes = parse_bytes(v, "min_free_bytes")?;
        }
        if let Some(v) = &a.disk_reserve_bytes {
            self.disk_reserve_bytes = parse_bytes(v, "disk_reserve_bytes")?;
        }
        for (slot, value, name) in [
            (
                &mut self.approval_timeout,
                &a.approval_timeout,
                "approval_timeout",
            ),
            (&mut self.task_ttl, &a.task_ttl, "task_ttl"),
            (&mut self.result_ttl, &a.result_ttl, "result_ttl"),
            (&mut self.asset_ttl, &a.asset_ttl, "asset_ttl"),
            (
                &mut self.idempotency_ttl,
                &a.idempotency_ttl,
                "idempotency_ttl",
            ),
            (
                &mut self.sweep_interval,
                &a.sweep_interval,
                "sweep_interval",
            ),
            (
                &mut self.header_read_timeout,
                &a.header_read_timeout,
                "header_read_timeout",
            ),
            (&mut self.idle_timeout, &a.idle_timeout, "idle_timeout"),
            (
                &mut self.body_idle_timeout,
                &a.body_idle_timeout,
                "body_idle_timeout",
            ),
            (
                &mut self.upload_rate_grace,
                &a.upload_rate_grace,
                "upload_rate_grace",
            ),
        ] {
            if let Some(v) = value {
                *slot = parse_duration(v, name)?;
            }
        }
        set(&mut self.max_connections, a.max_connections);
        if a.max_concurrent_uploads.is_some() {
            self.max_concurrent_uploads = a.max_concurrent_uploads;
        }
        set(&mut self.max_uploads_per_peer, a.max_uploads_per_peer);
        if let Some(v) = &a.upload_min_rate {
            self.upload_min_rate = parse_bytes(v, "upload_min_rate")?;
        }
        if let Some(v) = &a.store {
            self.store = StoreSetting::parse(v)?;
        }
        if a.media_dir.is_some() {
            self.media_dir = a.media_dir.clone();
        }
        if a.node_id.is_some() {
            self.node_id = a.node_id.clone();
        }
        if let Some(v) = &a.lease_ttl {
            self.lease_ttl = parse_duration(v, "lease_ttl")?;
        }
        if let Some(v) = &a.session_idle_timeout {
            self.session_idle_timeout = parse_duration(v, "session_idle_timeout")?;
        }
        if let Some(v) = &a.session_max_age {
            self.session_max_age = parse_duration(v, "session_max_age")?;
        }
        set(&mut self.backend, a.backend);
        set(&mut self.hwdecode, a.hwdecode);
        set(&mut self.encoder, a.encoder);
        if !a.allowed_origins.is_empty() {
            self.allowed_origins = a.allowed_origins.clone();
        }
        if !a.allowed_hosts.is_empty() {
            self.allowed_hosts = a.allowed_hosts.clone();
        }
        if a.public_base_url.is_some() {
            self.public_base_url = a.public_base_url.clone();
        }
        if !a.admins.is_empty() {
            self.admins = a.admins.clone();
        }
        if a.metrics_public {
            self.metrics_public = true;
        }
        set(&mut self.auth_failure_burst, a.auth_failure_burst);
        if let Some(v) = &a.auth_failure_interval {
            self.auth_failure_interval = parse_duration(v, "auth_failure_interval")?;
        }
        if !a.trusted_proxies.is_empty() {
            self.trusted_proxies = parse_proxies(&a.trusted_proxies)?;
        }
        Ok(())
    }

    /// Checks ranges that would make the service misbehave.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |field: &'static str, reason: &str| {
            Err(ConfigError::Invalid {
                field,
                reason: reason.to_string(),
            })
        };
        if self.render_slots == 0 || self.render_slots > 64 {
            return bad("render_slots", "must be between 1 and 64");
        }
        if self.per_principal_concurrent == 0 {
            return bad("per_principal_concurrent", "must be at least 1");
        }
        if self.max_render_crashes == 0 {
            return bad("max_render_crashes", "must be at least 1");
        }
        if self.max_upload_bytes == 0 {
            return bad("max_upload_bytes", "must be positive");
        }
        let engine = SourceLimits::ENGINE;
        if self.max_source_side == 0 || self.max_source_side > engine.max_side {
            return bad(
                "max_source_side",
                &format!("must be between 1 and {}", engine.max_side),
            );
        }
        if self.max_source_pixels == 0 || self.max_source_pixels > engine.max_pixels {
            return bad(
                "max_source_pixels",
                &format!("must be between 1 and {}", engine.max_pixels),
            );
        }
        if self.max_watermark_side == 0 || self.max_watermark_side > MAX_WATERMARK_SIDE {
            return bad(
                "max_watermark_side",
                &format!("must be between 1 and {MAX_WATERMARK_SIDE}"),
            );
        }
        if self.max_source_seconds == 0 {
            return bad("max_source_seconds", "must be at least 1");
        }
        if self.render_pixel_rate == 0 {
            return bad("render_pixel_rate", "must be at least 1");
        }
        if self.max_render_seconds == 0 {
            return bad("max_render_seconds", "must be at least 1");
        }
        if self.render_budget_window < Duration::from_secs(1) {
            return bad("render_budget_window", "must be at least 1s");
        }
        if self.max_concurrent_probes == 0 {
            return bad("max_concurrent_probes", "must be at least 1");
        }
        if self.approval_timeout.is_zero() {
            return bad("approval_timeout", "must be positive");
        }
        if self.asset_ttl.is_zero() {
            return bad("asset_ttl", "must be positive");
        }
        if self.result_ttl < self.task_ttl {
            return bad("result_ttl", "must not be shorter than task_ttl");
        }
        if self.sweep_interval.is_zero() || self.tick_interval.is_zero() {
            return bad("sweep_interval", "intervals must be positive");
        }
        if self.auth_failure_interval < Duration::from_millis(1)
            || self.auth_failure_interval > Duration::from_secs(3600)
        {
            return bad("auth_failure_interval", "must be between 1ms and 1h");
        }
        if self.header_read_timeout < MIN_CONNECTION_TIMEOUT {
            return bad("header_read_timeout", "must be at least 100ms");
        }
        if self.idle_timeout < Duration::from_secs(1) {
            return bad("idle_timeout", "must be at least 1s");
        }
        if self.body_idle_timeout < MIN_CONNECTION_TIMEOUT {
            return bad("body_idle_timeout", "must be at least 100ms");
        }
        if self.max_connections == 0 {
            return bad("max_connections", "must be at least 1");
        }
        if let Some(n) = self.max_concurrent_uploads
            && (n == 0 || n > self.max_connections / 2)
        {
            return bad(
                "max_concurrent_uploads",
                &format!(
                    "must be between 1 and half of max_connections ({}), so that uploads alone \
                     cannot take every connection",
                    self.max_connections / 2
                ),
            );
        }
        if self.max_uploads_per_peer == 0 {
            return bad("max_uploads_per_peer", "must be at least 1");
        }
        if self.upload_rate_grace < MIN_CONNECTION_TIMEOUT {
            return bad("upload_rate_grace", "must be at least 100ms");
        }
        if self.lease_ttl < Duration::from_secs(1) {
            return bad("lease_ttl", "must be at least 1s");
        }
        if self.session_idle_timeout < Duration::from_secs(1) {
            return bad("session_idle_timeout", "must be at least 1s");
        }
        if self.session_max_age < self.session_idle_timeout {
            return bad(
                "session_max_age",
                "must not be shorter than session_idle_timeout",
            );
        }
        if self
            .node_id
            .as_ref()
            .is_some_and(|n| n.trim().is_empty() || n.len() > 200)
        {
            return bad("node_id", "must be 1 to 200 characters");
        }
        for (token, principal) in &self.tokens {
            if token.len() < 8 {
                return bad("tokens", "every token needs at least 8 characters");
            }
            if principal.is_empty() || principal.contains('\0') {
                return bad("tokens", "principal names must be non-empty");
            }
        }
        if let Some(url) = &self.public_base_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return bad("public_base_url", "must start with http:// or https://");
        }
        Ok(())
    }

    /// Refuses a non-loopback listen address when no tokens are configured: without tokens
    /// every caller is the same anonymous principal, which is only acceptable on this machine.
    pub fn check_bind_safety(&self) -> Result<(), ConfigError> {
        if self.tokens.is_empty() && !self.listen.ip().is_loopback() {
            return Err(ConfigError::UnsafeBind {
                listen: self.listen,
            });
        }
        Ok(())
    }

    /// True when bearer tokens are required.
    pub fn auth_required(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// True when `principal` is listed in `admins` (sees every render on the dashboard, reads
    /// `/metrics` from any address).
    pub fn is_admin(&self, principal: &str) -> bool {
        self.admins.iter().any(|a| a == principal)
    }

    /// Base URL for links (`public_base_url`, or `http://<listen>`), without a trailing slash.
    pub fn base_url(&self) -> String {
        match &self.public_base_url {
            Some(u) => u.trim_end_matches('/').to_string(),
            None => format!("http://{}", self.listen),
        }
    }

    /// The sled database directory.
    pub fn db_dir(&self) -> PathBuf {
        self.data_dir.join("db")
    }
    /// Root of the media: `media_dir`, or the data directory.
    pub fn media_root(&self) -> &Path {
        self.media_dir.as_deref().unwrap_or(&self.data_dir)
    }
    /// Uploaded assets.
    pub fn assets_dir(&self) -> PathBuf {
        self.media_root().join("assets")
    }
    /// Rendered results: `results/<render id>/final.<ext>`.
    pub fn results_dir(&self) -> PathBuf {
        self.media_root().join("results")
    }
    /// Watermark previews: `previews/<render id>/watermark-preview.png`.
    pub fn previews_dir(&self) -> PathBuf {
        self.media_root().join("previews")
    }

    /// This node's name in work leases: `node_id`, or `HOST:PORT` of the listen address
    /// (stable across restarts, so a restarted node recognises its own leases).
    pub fn node_name(&self) -> String {
        if let Some(n) = &self.node_id {
            return n.clone();
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".into());
        format!("{host}:{}", self.listen.port())
    }

    /// Creates the data directory tree.
    pub fn ensure_dirs(&self) -> std::io::Result<()> {
        for d in [
            self.db_dir(),
            self.assets_dir(),
            self.results_dir(),
            self.previews_dir(),
        ] {
            std::fs::create_dir_all(d)?;
        }
        Ok(())
    }
}

impl Default for Config {
    fn default() -> Self {
        Config::with_data_dir(DEFAULT_DATA_DIR)
    }
}

/// One worker on small machines (encoding already uses every core), two on larger ones.
pub fn default_render_slots() -> usize {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if cores >= 8 { 2 } else { 1 }
}

/// `trusted_proxies` entries: addresses or CIDR ranges.
fn parse_proxies(entries: &[String]) -> Result<Vec<ipnet::IpNet>, ConfigError> {
    entries
        .iter()
        .map(|e| {
            parse::parse_net(e).ok_or_else(|| ConfigError::Invalid {
                field: "trusted_proxies",
                reason: format!("`{e}` is neither an IP address nor a CIDR range"),
            })
        })
        .collect()
}

fn set<T>(slot: &mut T, v: Option<T>) {
    if let Some(v) = v {
        *slot = v;
    }
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
