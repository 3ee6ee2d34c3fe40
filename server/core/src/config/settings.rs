//! The declaration of every setting, once: its name (the TOML key), type, default, kind, help
//! line and flag (with its `VIDFORGE_*` variable). The `Config` struct, its defaults, the flags,
//! the file's shape, the merge and the reference table in docs/configuration.md are all
//! generated from this list (see [`declare_settings!`](super::sources)); ranges are checked in
//! `validate.rs`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use vidforge_media as media;

use super::choices::choice_parser;
use super::kinds::{
    Choice, Dur, Kind, List, Listen, Maybe, Media, Plain, Proxies, Size, Store, Switch, Tokens,
    Webhooks,
};
use super::parse::ConfigError;
use super::sources::{SettingInfo, declare_settings, flag_value, shown};
use super::{
    Fanout, MediaStoreSetting, RenderSched, Speculative, StoreSetting, default_render_slots,
};
use crate::catalog;
use crate::engine::SourceLimits;

/// Default listen address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// Default data directory.
pub const DEFAULT_DATA_DIR: &str = "./vidforge-data";
/// Default [`Config::render_pixel_rate`]: output pixel-frames per second measured with the
/// CPU compositor and x264 (`veryfast`) on a 2-core machine: 720p and 1080p renders of a
/// 720p clip ran at 1.0e8 and 0.95e8, a 4k render of a 16×16 clip at 0.83e8.
pub const DEFAULT_RENDER_PIXEL_RATE: u64 = 80_000_000;
/// Default [`Config::segment_seconds`], in seconds.
pub const DEFAULT_SEGMENT_SECONDS: u64 = 10;
/// Default [`Config::max_render_seconds`]: 10 minutes of estimated work.
pub const DEFAULT_MAX_RENDER_SECONDS: u64 = 10 * 60;
/// Default [`Config::body_idle_timeout`].
pub const DEFAULT_BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Default [`Config::auth_failure_burst`].
pub const DEFAULT_AUTH_FAILURE_BURST: u32 = 20;
/// Default [`Config::auth_failure_interval`].
pub const DEFAULT_AUTH_FAILURE_INTERVAL: Duration = Duration::from_secs(1);
/// Default [`Config::max_concurrent_uploads`] (less when `max_connections` is under twice it:
/// [`Config::upload_slots`]).
pub const DEFAULT_MAX_CONCURRENT_UPLOADS: usize = 64;
/// Default [`Config::max_uploads_per_peer`].
pub const DEFAULT_MAX_UPLOADS_PER_PEER: usize = 8;
/// Default [`Config::session_idle_timeout`].
pub const DEFAULT_SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(2 * 3600);
/// Default [`Config::session_max_age`].
pub const DEFAULT_SESSION_MAX_AGE: Duration = Duration::from_secs(12 * 3600);

/// Default [`Config::stream_max_lifetime`].
pub const DEFAULT_STREAM_MAX_LIFETIME: Duration = Duration::from_secs(10 * 60);

/// Default [`Config::legacy_session_idle_timeout`].
pub const DEFAULT_LEGACY_SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// Default [`Config::max_legacy_sessions`].
pub const DEFAULT_MAX_LEGACY_SESSIONS: usize = 1024;
/// Default [`Config::max_legacy_sessions_per_principal`].
pub const DEFAULT_MAX_LEGACY_SESSIONS_PER_PRINCIPAL: usize = 64;

const fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

declare_settings! {
    /// Address the HTTP server binds.
    listen: SocketAddr = DEFAULT_LISTEN.parse().expect("constant address parses"), Listen,
        help: "Listen address (default 127.0.0.1:8080; use port 0 for any free port).",
        flag(long, env = "VIDFORGE_LISTEN"): Option<String>;
    /// Root of the sled database (`db/`), `assets/`, `results/` and `previews/`.
    data_dir: PathBuf = DEFAULT_DATA_DIR.into(), Plain<PathBuf>,
        help: "Data directory (default ./vidforge-data).",
        flag(long, env = "VIDFORGE_DATA_DIR"): Option<PathBuf>;
    /// Bearer token -> principal name. Empty: single anonymous principal, loopback only.
    tokens: BTreeMap<String, String> = BTreeMap::new(), Tokens,
        help: "Bearer token and its principal as TOKEN=PRINCIPAL; repeatable (env: comma-separated).",
        flag(long = "token", env = "VIDFORGE_TOKENS", value_delimiter = ',', hide_env_values = true): Vec<String>;
    /// Worker threads, i.e. renders that run at once. Each render's decoder and encoder get
    /// the cores shared among the renders running at once.
    render_slots: usize = default_render_slots(), Plain<usize>,
        help: "Renders that run at once; each gets the cores shared among those running.",
        shown: "half the cores (1 on 2 cores, 8 on 16; at most 32)",
        flag(long, env = "VIDFORGE_RENDER_SLOTS"): Option<usize>;
    /// The nice value (0–19) of the render threads: decode, compose and encode, and the
    /// encoders' own threads, which inherit it. Above the front's 0, so MCP requests, uploads
    /// and `/healthz` are scheduled first when both want the CPUs; a render on an otherwise
    /// idle machine runs as fast as at 0. `0` keeps renders at the front's priority.
    render_nice: u8 = 10, Plain<u8>,
        help: "Nice value (0-19) of the render threads, so the front is scheduled first; 0: the front's priority.",
        flag(long, env = "VIDFORGE_RENDER_NICE"): Option<u8>;
    /// The render threads' scheduling policy: `batch` (the default) keeps `render_nice` and
    /// tells the scheduler they are batch work, so they never preempt the front when they wake;
    /// `idle` runs them only on CPU time nothing else on the machine wants (the front's p99 is
    /// lowest, but a render stalls while other programs keep the CPUs busy); `normal` is
    /// `render_nice` alone.
    render_sched: RenderSched = RenderSched::Batch, Choice<RenderSched>,
        help: "Scheduling policy of the render threads: batch (default), idle or normal.",
        flag(long, env = "VIDFORGE_RENDER_SCHED", value_parser = choice_parser::<RenderSched>()): Option<RenderSched>;
    /// Speculative rendering: while a watermarked render waits for its approval and a render
    /// slot would otherwise sit idle, render it in full with the previewed settings, so that
    /// approving publishes it at once. Real work always takes the slot first (the speculative
    /// render is abandoned and picked up again later), it counts against no quota, and a
    /// rejection, timeout or cancel deletes it unseen.
    speculative: Speculative = Speculative::Auto, Choice<Speculative>,
        help: "Render awaiting renders ahead of approval on idle slots (auto) or never (off).",
        flag(long, env = "VIDFORGE_SPECULATIVE", value_parser = choice_parser::<Speculative>()): Option<Speculative>;
    /// Segment-parallel rendering: a render whose source is longer than
    /// `segment_min_duration` is cut at source keyframes into segments of about
    /// `segment_seconds` when another render slot is free (on this node, or anywhere in a
    /// cluster); idle slots render the segments and the render's own worker joins them (the
    /// video remuxed, the audio encoded once). `off`: every render in one pass.
    fanout: Fanout = Fanout::Auto, Choice<Fanout>,
        help: "Split long renders into segments that idle slots render in parallel (auto) or never (off).",
        flag(long, env = "VIDFORGE_FANOUT", value_parser = choice_parser::<Fanout>()): Option<Fanout>;
    /// Sources longer than this may be split into segments (`fanout`).
    segment_min_duration: Duration = secs(60), Dur,
        help: "Sources longer than this may render as parallel segments, e.g. 60s.",
        flag(long, env = "VIDFORGE_SEGMENT_MIN_DURATION"): Option<String>;
    /// The target length of a segment; cuts fall on the source's keyframes nearest to its
    /// multiples.
    segment_seconds: Duration = secs(DEFAULT_SEGMENT_SECONDS), Dur,
        help: "Target length of a parallel segment, e.g. 10s (cut at the source's keyframes).",
        flag(long, env = "VIDFORGE_SEGMENT_SECONDS"): Option<String>;
    /// Attempts one segment gets (a failure, or its node's death) before its render fails.
    segment_attempts: u32 = 3, Plain<u32>,
        help: "Attempts of one segment before its render fails.",
        flag(long, env = "VIDFORGE_SEGMENT_ATTEMPTS"): Option<u32>;
    /// Non-terminal renders (queued, running or awaiting approval) one principal may hold.
    per_principal_concurrent: usize = 2, Plain<usize>,
        help: "Non-terminal renders one principal may hold.",
        flag(long, env = "VIDFORGE_PER_PRINCIPAL_CONCURRENT"): Option<usize>;
    /// Renders that may wait for a free worker, beyond the ones running (with a shared store:
    /// renders waiting anywhere in the cluster).
    queue_capacity: usize = 32, Plain<usize>,
        help: "Renders that may wait for a worker.",
        flag(long, env = "VIDFORGE_QUEUE_CAPACITY"): Option<usize>;
    /// Attempts of one render that may end with the server process (a crash, an abort, an
    /// out-of-memory kill) before boot recovery ends it as `render_failed` instead of
    /// restarting it again: no crash loops.
    max_render_crashes: u32 = 3, Plain<u32>,
        help: "Attempts of one render that may end the server process before it fails for good.",
        flag(long, env = "VIDFORGE_MAX_RENDER_CRASHES"): Option<u32>;
    /// Largest accepted upload.
    max_upload_bytes: u64 = 2 << 30, Size,
        help: "Largest upload, e.g. 2GiB, 500MB, 1048576.",
        flag(long, env = "VIDFORGE_MAX_UPLOAD_BYTES"): Option<String>;
    /// New uploads and renders are refused (`storage_full`) while free space on the data dir
    /// is under this floor; finishing work and reads go on.
    min_free_bytes: u64 = 1 << 30, Size,
        help: "Free disk space under which new uploads and renders are refused, e.g. 1GiB.",
        flag(long, env = "VIDFORGE_MIN_FREE_BYTES"): Option<String>;
    /// Size of the ballast file that lets the server start on a full disk (0: none).
    disk_reserve_bytes: u64 = 64 << 20, Size,
        help: "Ballast kept in the data dir so the server can start on a full disk, e.g. 64MiB (0: none).",
        flag(long, env = "VIDFORGE_DISK_RESERVE_BYTES"): Option<String>;
    /// Longest source a render accepts, in seconds (checked at creation from the probe).
    max_source_seconds: u64 = 2 * 60 * 60, Plain<u64>,
        help: "Longest source video a render accepts, in seconds.",
        flag(long, env = "VIDFORGE_MAX_SOURCE_SECONDS"): Option<u64>;
    /// Output pixel-frames (width × height × frames) this node renders per second: turns a
    /// render's estimated work into estimated seconds for the limits below.
    render_pixel_rate: u64 = DEFAULT_RENDER_PIXEL_RATE, Plain<u64>,
        help: "Output pixels x frames this node renders per second (turns estimated work into seconds).",
        flag(long, env = "VIDFORGE_RENDER_PIXEL_RATE"): Option<u64>;
    /// Largest estimated work of one render, in seconds at `render_pixel_rate`; larger ones
    /// are refused at creation (`render_too_large`, with a lower resolution that fits).
    max_render_seconds: u64 = DEFAULT_MAX_RENDER_SECONDS, Plain<u64>,
        help: "Largest estimated work of one render, in seconds (render_too_large beyond).",
        flag(long, env = "VIDFORGE_MAX_RENDER_SECONDS"): Option<u64>;
    /// Estimated work one principal may start per `render_budget_window`, in seconds at
    /// `render_pixel_rate` (`render_budget_exceeded` beyond); 0: no budget.
    render_budget_seconds: u64 = 30 * 60, Plain<u64>,
        help: "Estimated seconds of work one principal may start per --render-budget-window (0: off).",
        flag(long, env = "VIDFORGE_RENDER_BUDGET_SECONDS"): Option<u64>;
    /// The sliding window of `render_budget_seconds`.
    render_budget_window: Duration = secs(60 * 60), Dur,
        help: "The window of --render-budget-seconds, e.g. 1h.",
        flag(long, env = "VIDFORGE_RENDER_BUDGET_WINDOW"): Option<String>;
    /// Renders estimated above this many seconds are long: while one runs, a further worker
    /// runs short ones, so a short render never waits behind a long one.
    long_render_seconds: u64 = 60, Plain<u64>,
        help: "Renders estimated longer than this many seconds never hold up shorter ones.",
        flag(long, env = "VIDFORGE_LONG_RENDER_SECONDS"): Option<u64>;
    /// Largest source video picture, checked at upload before anything is decoded.
    max_source_side: u32 = SourceLimits::DEFAULT.max_side, Plain<u32>,
        help: "Largest source video width or height accepted at upload.",
        flag(long, env = "VIDFORGE_MAX_SOURCE_SIDE"): Option<u32>;
    /// Largest source video picture in pixels (width x height).
    max_source_pixels: u64 = SourceLimits::DEFAULT.max_pixels, Plain<u64>,
        help: "Largest source video picture in pixels (width x height) accepted at upload.",
        flag(long, env = "VIDFORGE_MAX_SOURCE_PIXELS"): Option<u64>;
    /// Largest watermark PNG side (a watermark covers at most a quarter of a 4K frame).
    max_watermark_side: u32 = 4096, Plain<u32>,
        help: "Largest watermark PNG width or height accepted at upload.",
        flag(long, env = "VIDFORGE_MAX_WATERMARK_SIDE"): Option<u32>;
    /// Uploads probed at once (probing decodes; the rest wait their turn).
    max_concurrent_probes: usize = 2, Plain<usize>,
        help: "Uploads probed at once.",
        flag(long, env = "VIDFORGE_MAX_CONCURRENT_PROBES"): Option<usize>;
    /// How long a watermark preview waits for a decision.
    approval_timeout: Duration = catalog::APPROVAL_TIMEOUT, Dur,
        help: "Watermark approval timeout, e.g. 30m.",
        flag(long, env = "VIDFORGE_APPROVAL_TIMEOUT"): Option<String>;
    /// Task lifetime (`ttlMs`).
    task_ttl: Duration = catalog::TASK_TTL, Dur,
        help: "Task TTL, e.g. 24h.",
        flag(long, env = "VIDFORGE_TASK_TTL"): Option<String>;
    /// Result and status retention.
    result_ttl: Duration = catalog::RESULT_TTL, Dur,
        help: "Result retention, e.g. 7d.",
        flag(long, env = "VIDFORGE_RESULT_TTL"): Option<String>;
    /// How long an uploaded asset is kept (renders still using it keep it longer).
    asset_ttl: Duration = catalog::ASSET_TTL, Dur,
        help: "Asset retention after upload, e.g. 7d.",
        flag(long, env = "VIDFORGE_ASSET_TTL"): Option<String>;
    /// Idempotency-key retention.
    idempotency_ttl: Duration = catalog::IDEMPOTENCY_TTL, Dur,
        help: "Idempotency-key retention, e.g. 24h.",
        flag(long, env = "VIDFORGE_IDEMPOTENCY_TTL"): Option<String>;
    /// Extra time a result tombstone is kept after its files are swept, so a late read gets
    /// `result_expired` (with a repair) rather than `render_not_found`.
    tombstone_grace: Duration = secs(7 * 24 * 60 * 60), Dur,
        help: "How long a tombstone of an expired result is kept after its files are deleted (file only).";
    /// How often the sweeper runs.
    sweep_interval: Duration = catalog::SWEEP_INTERVAL, Dur,
        help: "Sweeper interval, e.g. 60s.",
        flag(long, env = "VIDFORGE_SWEEP_INTERVAL"): Option<String>;
    /// How often approval deadlines are checked.
    tick_interval: Duration = secs(1), Dur,
        help: "How often approval deadlines are checked (file only).";
    /// A request head (request line and headers) must arrive within this, or the connection
    /// is closed. hyper starts this clock whenever a connection waits for a request, so it
    /// also closes a kept-alive connection that sends no next request.
    header_read_timeout: Duration = secs(10), Dur,
        help: "Limit for receiving a request head, e.g. 10s (also ends unused kept-alive connections).",
        flag(long, env = "VIDFORGE_HEADER_READ_TIMEOUT"): Option<String>;
    /// A connection that moves no bytes in either direction for this long (a response the
    /// client does not read, a kept-alive connection nobody uses) is asked to close: at once
    /// when no request is in flight, after that request otherwise; if it still moves nothing
    /// for another `idle_timeout` it is closed. SSE streams send keep-alives more often.
    idle_timeout: Duration = secs(60), Dur,
        help: "A connection moving no bytes for this long is closed, e.g. 60s.",
        flag(long, env = "VIDFORGE_IDLE_TIMEOUT"): Option<String>;
    /// A request body (an upload) that delivers no bytes for this long is aborted: `408`
    /// with `upload_timeout`, and the upload's temporary file is removed.
    body_idle_timeout: Duration = DEFAULT_BODY_IDLE_TIMEOUT, Dur,
        help: "An upload sending nothing for this long is aborted (408), e.g. 30s.",
        flag(long, env = "VIDFORGE_BODY_IDLE_TIMEOUT"): Option<String>;
    /// Connections served at once; further ones wait in the listen backlog until one closes.
    max_connections: usize = 1024, Plain<usize>,
        help: "Connections served at once; more wait until one closes.",
        flag(long, env = "VIDFORGE_MAX_CONNECTIONS"): Option<usize>;
    /// The longest an answer that streams (a `subscriptions/listen` stream, a legacy
    /// session's `GET` stream) stays open: a listen then ends cleanly with its final result
    /// and a legacy stream ends; the client listens or connects again. Such streams are also
    /// bounded per principal (`max_connections / 16`) and per node (`max_connections / 4`), so
    /// they never take the connections other principals and `/healthz` need.
    stream_max_lifetime: Duration = DEFAULT_STREAM_MAX_LIFETIME, Dur,
        help: "Longest a subscriptions/listen or legacy GET stream stays open before it ends cleanly (the client listens again), e.g. 10m.",
        flag(long, env = "VIDFORGE_STREAM_MAX_LIFETIME"): Option<String>;
    /// Uploads served at once (`None`: [`DEFAULT_MAX_CONCURRENT_UPLOADS`], at most half of
    /// `max_connections`; see [`Config::upload_slots`]). Further uploads are refused at once,
    /// unread: `503` `uploads_busy`. At most half of `max_connections`, so uploads alone never
    /// take every connection from `/mcp` and downloads.
    max_concurrent_uploads: Option<usize> = None, Maybe<usize>,
        help: "Uploads served at once, at most half of --max-connections (default 64, or that half); more are refused at once (503 uploads_busy).",
        shown: "64 (at most half of max_connections)",
        flag(long, env = "VIDFORGE_MAX_CONCURRENT_UPLOADS"): Option<usize>;
    /// Uploads served at once from one peer IP address; further ones: `429` `uploads_busy`.
    /// Behind a reverse proxy every client is the proxy's address: raise it there (the proxy
    /// limits its own clients).
    max_uploads_per_peer: usize = DEFAULT_MAX_UPLOADS_PER_PEER, Plain<usize>,
        help: "Uploads served at once from one IP address (default 8); more: 429 uploads_busy.",
        flag(long, env = "VIDFORGE_MAX_UPLOADS_PER_PEER"): Option<usize>;
    /// Bytes per second an upload must average, counted from its start, once
    /// `upload_rate_grace` has passed (Apache `mod_reqtimeout`'s `MinRate`): slower ones are
    /// aborted with `408` `upload_timeout` and nothing kept. `0`: no minimum (only
    /// `body_idle_timeout`).
    upload_min_rate: u64 = 16 << 10, Size,
        help: "Bytes per second an upload must average once --upload-rate-grace has passed, e.g. 16KiB (the default); slower uploads are aborted (408). 0: no minimum.",
        flag(long, env = "VIDFORGE_UPLOAD_MIN_RATE"): Option<String>;
    /// How long an upload may run before `upload_min_rate` applies.
    upload_rate_grace: Duration = secs(10), Dur,
        help: "How long an upload may run before --upload-min-rate applies, e.g. 10s.",
        flag(long, env = "VIDFORGE_UPLOAD_RATE_GRACE"): Option<String>;
    /// Where tasks live: the embedded sled database, or a PostgreSQL shared by a cluster.
    store: StoreSetting = StoreSetting::Sled, Store,
        help: "Task store: `sled` (embedded, the default) or postgres://USER:PASSWORD@HOST:PORT/DB, shared by every node of a cluster.",
        flag(long, env = "VIDFORGE_STORE"): Option<String>;
    /// Where `assets/`, `results/` and `previews/` live: the data directory, another
    /// directory, or an S3-compatible bucket (`media_store/`).
    media_store: MediaStoreSetting = MediaStoreSetting::DataDir, Media,
        help: "Where assets, previews and results live: a directory (default: the data directory; a cluster's nodes share one, e.g. NFS) or s3://BUCKET/PREFIX (credentials and region from the standard AWS variables and files).",
        flag(long, alias = "media-dir", env = "VIDFORGE_MEDIA_STORE"): Option<String>;
    /// The S3 API endpoint for S3-compatible services (MinIO, R2, Ceph, GCS's interoperability
    /// endpoint); `None`: AWS (`AWS_ENDPOINT_URL` when set).
    s3_endpoint: Option<String> = None, Maybe<String>,
        help: "S3 API endpoint of an S3-compatible service, e.g. http://127.0.0.1:9000 (default: AWS, or AWS_ENDPOINT_URL).",
        shown: "AWS",
        flag(long, env = "VIDFORGE_S3_ENDPOINT"): Option<String>;
    /// The bound on one request to the bucket (connecting: a fifth of it, at most 5 s).
    s3_request_timeout: Duration = secs(30), Dur,
        help: "Longest one request to the bucket may take, e.g. 30s; a hung bucket fails the request after it (and it is retried with backoff). Completing a multipart upload may take at least 10 min (S3 may spend minutes assembling a large object).",
        flag(long, env = "VIDFORGE_S3_REQUEST_TIMEOUT"): Option<String>;
    /// How long a render keeps retrying the upload of its result or preview while the bucket
    /// cannot be reached, before it fails (temporary, `retry_after_ms`).
    media_retry_window: Duration = secs(120), Dur,
        help: "How long a render retries uploading its result to an unreachable bucket, with backoff, before failing, e.g. 2m.",
        flag(long, env = "VIDFORGE_MEDIA_RETRY_WINDOW"): Option<String>;
    /// The local copy of sources read from the bucket: least recently used out past this.
    media_cache_bytes: u64 = 8 << 30, Size,
        help: "Bound on the local cache of sources downloaded from the bucket (least recently used out), e.g. 8GiB; one source larger than it is still cached alone.",
        flag(long, env = "VIDFORGE_MEDIA_CACHE_BYTES"): Option<String>;
    /// How long a presigned download link stays valid.
    presigned_url_ttl: Duration = secs(15 * 60), Dur,
        help: "How long a presigned download link (the answer to a download of media in a bucket) stays valid, e.g. 15m.",
        flag(long, env = "VIDFORGE_PRESIGNED_URL_TTL"): Option<String>;
    /// This node's name in work leases; `None`: `HOST:PORT` of the listen address.
    node_id: Option<String> = None, Maybe<String>,
        help: "This node's name in work leases (default HOST:PORT of --listen).",
        shown: "HOST:PORT",
        flag(long, env = "VIDFORGE_NODE_ID"): Option<String>;
    /// How long a node's claim on a render lasts unrenewed (renewed every third of it).
    lease_ttl: Duration = secs(15), Dur,
        help: "How long a cluster node's claim on a render lasts without renewal, e.g. 15s: a node that dies loses its renders to the others after this.",
        flag(long, env = "VIDFORGE_LEASE_TTL"): Option<String>;
    /// A browser session not used for this long is over (its cookie carries when it was last
    /// seen, re-issued as it is used; `vidforge_http::session`).
    session_idle_timeout: Duration = DEFAULT_SESSION_IDLE_TIMEOUT, Dur,
        help: "A browser session unused for this long is signed out, e.g. 2h.",
        flag(long, env = "VIDFORGE_SESSION_IDLE_TIMEOUT"): Option<String>;
    /// A browser session is over this long after sign-in, however much it is used.
    session_max_age: Duration = DEFAULT_SESSION_MAX_AGE, Dur,
        help: "A browser session ends this long after sign-in however much it is used, e.g. 12h.",
        flag(long, env = "VIDFORGE_SESSION_MAX_AGE"): Option<String>;
    /// A legacy-era MCP session (an `initialize`-based client, 2024-11-05 … 2025-11-25) unused
    /// for this long is closed; its client gets `404` and initializes again. Renders never
    /// live in a session, so none is lost.
    legacy_session_idle_timeout: Duration = DEFAULT_LEGACY_SESSION_IDLE_TIMEOUT, Dur,
        help: "A legacy-era MCP session (initialize-based client) unused this long is closed (404; the client initializes again), e.g. 30m.",
        flag(long, env = "VIDFORGE_LEGACY_SESSION_IDLE_TIMEOUT"): Option<String>;
    /// Legacy-era MCP sessions open at once on this node; another `initialize` is refused
    /// (`503` `service_unavailable`, `Retry-After`) until one ends.
    max_legacy_sessions: usize = DEFAULT_MAX_LEGACY_SESSIONS, Plain<usize>,
        help: "Legacy-era MCP sessions open at once on this node (default 1024); another initialize answers 503 until one ends.",
        flag(long, env = "VIDFORGE_MAX_LEGACY_SESSIONS"): Option<usize>;
    /// Legacy-era MCP sessions one principal may hold open at once; another `initialize` from
    /// it: `429` `rate_limited` (so one tenant cannot take every session).
    max_legacy_sessions_per_principal: usize = DEFAULT_MAX_LEGACY_SESSIONS_PER_PRINCIPAL, Plain<usize>,
        help: "Legacy-era MCP sessions one principal may hold open at once (default 64); another initialize from it answers 429.",
        flag(long, env = "VIDFORGE_MAX_LEGACY_SESSIONS_PER_PRINCIPAL"): Option<usize>;
    /// Compositor choice.
    backend: media::BackendChoice = media::BackendChoice::Auto, Choice<media::BackendChoice>,
        help: "Compositor backend: auto (wgpu where frames stay on the GPU, else cpu), wgpu, cpu; `vidforge probe --hardware` says what auto picks and why.",
        flag(long, env = "VIDFORGE_BACKEND", value_parser = choice_parser::<media::BackendChoice>()): Option<media::BackendChoice>;
    /// Decoder choice.
    hwdecode: media::HwDecodeChoice = media::HwDecodeChoice::Auto, Choice<media::HwDecodeChoice>,
        help: "Video decoding: NVDEC where it pays (auto: frames kept on the GPU, or NVENC encoding), always (cuda), never (off).",
        flag(long, env = "VIDFORGE_HWDECODE", value_parser = choice_parser::<media::HwDecodeChoice>()): Option<media::HwDecodeChoice>;
    /// NVDEC's frames into the wgpu compositor without leaving the GPU.
    zero_copy: media::ZeroCopyChoice = media::ZeroCopyChoice::Auto, Choice<media::ZeroCopyChoice>,
        help: "NVDEC frames to the wgpu compositor on the GPU: auto (where auto's table asks and the self-test passes), on (required), off.",
        flag(long, env = "VIDFORGE_ZERO_COPY", value_parser = choice_parser::<media::ZeroCopyChoice>()): Option<media::ZeroCopyChoice>;
    /// H.264 encoder choice.
    encoder: media::EncoderChoice = media::EncoderChoice::Auto, Choice<media::EncoderChoice>,
        help: "H.264 encoder for mp4/mov: NVENC when a session opens (auto), x264, nvenc.",
        flag(long, env = "VIDFORGE_ENCODER", value_parser = choice_parser::<media::EncoderChoice>()): Option<media::EncoderChoice>;
    /// Origins allowed to call the MCP endpoint (browser clients). Empty: no Origin accepted
    /// except requests that send none.
    allowed_origins: Vec<String> = Vec::new(), List,
        help: "Allowed browser origins (comma-separated).",
        flag(long = "allowed-origin", env = "VIDFORGE_ALLOWED_ORIGINS", value_delimiter = ','): Vec<String>;
    /// Host header values accepted (DNS-rebinding protection). Empty: loopback names plus the
    /// listen address.
    allowed_hosts: Vec<String> = Vec::new(), List,
        help: "Allowed Host header values (comma-separated).",
        flag(long = "allowed-host", env = "VIDFORGE_ALLOWED_HOSTS", value_delimiter = ','): Vec<String>;
    /// Base URL used in download links; default `http://<listen>`.
    public_base_url: Option<String> = None, Maybe<String>,
        help: "Base URL for download links.",
        shown: "http://LISTEN",
        flag(long, env = "VIDFORGE_PUBLIC_BASE_URL"): Option<String>;
    /// OAuth 2.1 authorization servers whose JWT access tokens (RFC 9068) vidforge accepts,
    /// by issuer identifier (exact `iss`; their keys are found through RFC 8414 metadata or
    /// OpenID discovery). Static `tokens` keep working beside them.
    oauth_issuers: Vec<String> = Vec::new(), List,
        help: "Trusted OAuth authorization server (issuer URL; repeat or comma-separate); its JWT access tokens for this server's resource are accepted.",
        flag(long = "oauth-issuer", env = "VIDFORGE_OAUTH_ISSUERS", value_delimiter = ','): Vec<String>;
    /// The longest an access token may still be valid when it is presented (`exp` at most this
    /// far in the future): a token minted to last for years (a mistake, or a stolen signing
    /// key's work) is refused (`401` `invalid_token`) instead of trusted for as long as it says.
    oauth_max_token_lifetime: Duration = secs(24 * 60 * 60), Dur,
        help: "Refuse OAuth access tokens valid for longer than this from now, e.g. 24h.",
        flag(long, env = "VIDFORGE_OAUTH_MAX_TOKEN_LIFETIME"): Option<String>;
    /// The OAuth client vidforge's pages sign in with (authorization code + PKCE), registered
    /// at the first of `oauth_issuers` with the redirect URI `{public_base_url}/oauth/callback`.
    oauth_browser_client_id: Option<String> = None, Maybe<String>,
        help: "OAuth client id of the pages' sign-in (authorization code + PKCE) at the first --oauth-issuer; register its redirect URI as PUBLIC_BASE_URL/oauth/callback.",
        shown: "none",
        flag(long, env = "VIDFORGE_OAUTH_BROWSER_CLIENT_ID"): Option<String>;
    /// That client's secret (a confidential client); `None`: a public client (PKCE only).
    oauth_browser_client_secret: Option<String> = None, Maybe<String>,
        help: "Secret of the browser sign-in client (omit for a public client); prefer the environment variable.",
        shown: "none",
        flag(long, env = "VIDFORGE_OAUTH_BROWSER_CLIENT_SECRET"): Option<String>;
    /// Principals who see every render on the dashboard and may read `/metrics` from any
    /// address.
    admins: Vec<String> = Vec::new(), List,
        help: "Principals who see every render on the dashboard and may read /metrics from anywhere (comma-separated).",
        flag(long = "admin", env = "VIDFORGE_ADMINS", value_delimiter = ','): Vec<String>;
    /// Principals whose renders of HDR (PQ or HLG) sources stay HDR: 10-bit HEVC Main10 in
    /// mp4/mov, VP9 profile 2 in webm, the source's transfer and mastering metadata kept.
    /// Everyone else's are tone-mapped to SDR. `*` stands for every principal. Their 10-bit
    /// encoders are slower, so such renders weigh 6.5 times (mp4/mov) or 1.5 times (webm)
    /// their pixel-frames in the work estimate (`max_render_seconds`, the render budget).
    keep_hdr: Vec<String> = Vec::new(), List,
        help: "Principals whose renders of HDR sources stay HDR (HEVC Main10 in mp4/mov, VP9 profile 2 in webm) instead of being tone-mapped to SDR, weighing 6.5x (mp4/mov) or 1.5x (webm) in the work estimate; * for all (comma-separated).",
        shown: "none",
        flag(long = "keep-hdr", env = "VIDFORGE_KEEP_HDR", value_delimiter = ','): Vec<String>;
    /// Every render on this node measures its quality (PSNR, SSIM of the encoded video against
    /// the frames the encoder was given; see `vidforge_media::quality`) unless it asks not to
    /// (`quality_report: false`); off, only renders that ask (`quality_report: true`) do. It
    /// costs a decode and a comparison of every frame (docs/bench/quality.md), hence opt-in.
    quality_report: bool = false, Switch,
        help: "Measure every render's quality (PSNR, SSIM against the frames the encoder got; a render may still opt out); default: only renders that ask for it.",
        flag(long, env = "VIDFORGE_QUALITY_REPORT"): bool;
    /// `/metrics` answers without authentication to any address (default: only to loopback
    /// peers; others need an admin's bearer token).
    metrics_public: bool = false, Switch,
        help: "Serve /metrics without authentication to any address (default: loopback only).",
        flag(long, env = "VIDFORGE_METRICS_PUBLIC"): bool;
    /// Wrong bearer tokens one peer (an IPv4 address, an IPv6 /64) may send at once before
    /// `429` `rate_limited`; 0 disables the limit (`vidforge_http::auth_limit`).
    auth_failure_burst: u32 = DEFAULT_AUTH_FAILURE_BURST, Plain<u32>,
        help: "Wrong bearer tokens one address may send at once before 429 (0: no limit).",
        flag(long, env = "VIDFORGE_AUTH_FAILURE_BURST"): Option<u32>;
    /// One more wrong token is allowed per this interval once the burst is spent.
    auth_failure_interval: Duration = DEFAULT_AUTH_FAILURE_INTERVAL, Dur,
        help: "Once the burst is spent, one more wrong token per this interval, e.g. 1s.",
        flag(long, env = "VIDFORGE_AUTH_FAILURE_INTERVAL"): Option<String>;
    /// Reverse proxies (addresses or CIDR ranges) whose `X-Forwarded-For` names the client
    /// for the per-address rules (`vidforge_http::peer`). Empty: the TCP peer is the client.
    trusted_proxies: Vec<ipnet::IpNet> = Vec::new(), Proxies,
        help: "Reverse proxies (addresses or CIDR ranges, comma-separated) whose X-Forwarded-For names the client for per-address limits.",
        flag(long = "trusted-proxy", env = "VIDFORGE_TRUSTED_PROXIES", value_delimiter = ','): Vec<String>;
    /// Where every principal's render events are POSTed (Standard Webhooks), unless the
    /// principal has its own `[webhooks.PRINCIPAL]` entry. Needs `webhook_secret`.
    webhook_url: Option<String> = None, Maybe<String>,
        help: "Send every principal's render events to this http(s) URL, signed per Standard Webhooks (a principal's own [webhooks.NAME] entry in the file replaces it).",
        shown: "none",
        flag(long, env = "VIDFORGE_WEBHOOK_URL"): Option<String>;
    /// The signing secret of `webhook_url`: `whsec_` + base64 of 24 to 64 random bytes.
    webhook_secret: Option<String> = None, Maybe<String>,
        help: "Signing secret of --webhook-url: whsec_ followed by base64 of 24 to 64 random bytes; prefer the environment variable.",
        shown: "none",
        flag(long, env = "VIDFORGE_WEBHOOK_SECRET", hide_env_values = true): Option<String>;
    /// The events `webhook_url` receives (empty: all of `render.input_required`,
    /// `render.succeeded`, `render.failed`, `render.cancelled`).
    webhook_events: Vec<String> = Vec::new(), List,
        help: "Events --webhook-url receives, comma-separated (default: render.input_required, render.succeeded, render.failed, render.cancelled).",
        shown: "all",
        flag(long = "webhook-event", env = "VIDFORGE_WEBHOOK_EVENTS", value_delimiter = ','): Vec<String>;
    /// Per-principal endpoints: `[webhooks.PRINCIPAL]` tables with `url`, `secret` and
    /// optionally `events` (file only).
    webhooks: BTreeMap<String, super::webhooks::Endpoint> = BTreeMap::new(), Webhooks,
        help: "Per-principal endpoints, file only: [webhooks.PRINCIPAL] with url, secret (whsec_...) and optional events.",
        shown: "none";
    /// Longest wait for one delivery attempt (connect, send, the receiver's answer).
    webhook_timeout: Duration = secs(10), Dur,
        help: "Longest one webhook delivery attempt may take, answer included, e.g. 10s.",
        flag(long, env = "VIDFORGE_WEBHOOK_TIMEOUT"): Option<String>;
    /// Deliveries one node makes at once (a quarter of them at most to one principal's
    /// endpoint), so a slow receiver never holds more.
    webhook_max_in_flight: usize = 16, Plain<usize>,
        help: "Webhook deliveries one node makes at once (at most a quarter of them to one principal's endpoint).",
        flag(long, env = "VIDFORGE_WEBHOOK_MAX_IN_FLIGHT"): Option<usize>;
    /// The wait before the first retry; each further one waits twice as long (at most an
    /// hour), with jitter.
    webhook_retry_initial: Duration = secs(5), Dur,
        help: "Wait before a failed webhook's first retry; doubling after each further failure, up to 1h, with jitter.",
        flag(long, env = "VIDFORGE_WEBHOOK_RETRY_INITIAL"): Option<String>;
    /// How long an event is retried before it is recorded as dropped.
    webhook_retry_for: Duration = secs(24 * 3600), Dur,
        help: "How long a webhook event is retried before it is recorded as dropped.",
        flag(long, env = "VIDFORGE_WEBHOOK_RETRY_FOR"): Option<String>;
}
