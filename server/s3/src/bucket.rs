//! The S3 client of one bucket and prefix, on its own small runtime: keys under the prefix,
//! and blocking on the runtime. Its seam calls
//! ([`ObjectBackend`](vidforge_core::media_store::ObjectBackend)) are in `backend.rs`, uploads
//! in `multipart.rs`.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as Key;
use object_store::{BackoffConfig, ClientOptions, RetryConfig};
use vidforge_core::media_store::ObjectError;
use vidforge_core::side_runtime::SideRuntime;

/// Threads of the bucket's runtime (they drive sockets and file copies).
const RUNTIME_THREADS: usize = 2;

/// The bound on completing a multipart upload (or the request bound, if longer): S3 may take
/// minutes to assemble a large object (it answers `200` at once and sends whitespace until it
/// is done), so the ordinary bound would fail a completion that is going well.
const COMPLETE_TIMEOUT: Duration = Duration::from_secs(600);

/// What [`Bucket::connect`] needs.
pub struct Options {
    pub bucket: String,
    /// Without leading or trailing `/`; may be empty.
    pub prefix: String,
    /// An S3-compatible service's endpoint; `None`: AWS (or `AWS_ENDPOINT_URL`).
    pub endpoint: Option<String>,
    /// The bound on one request (connecting: a fifth of it, at most 5 s).
    pub request_timeout: Duration,
    /// This node's name (its multipart markers carry it).
    pub node: String,
}

/// Why a [`Bucket`] could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The client refused its settings.
    #[error("s3://{bucket}: {source}")]
    Client {
        bucket: String,
        source: object_store::Error,
    },
    /// The bucket's runtime could not start.
    #[error("media runtime: {0}")]
    Runtime(std::io::Error),
}

/// One bucket and prefix.
pub struct Bucket {
    pub(crate) s3: Arc<AmazonS3>,
    /// The same client with [`COMPLETE_TIMEOUT`], for completing multipart uploads.
    pub(crate) completer: Arc<AmazonS3>,
    pub(crate) bucket: String,
    pub(crate) prefix: String,
    pub(crate) endpoint: String,
    pub(crate) node: String,
    runtime: SideRuntime,
}

impl Bucket {
    /// The client, with credentials and region from the `AWS_*` variables first, then the
    /// shared files (`aws_profile.rs`). Nothing is contacted yet.
    pub fn connect(o: &Options) -> Result<Bucket, ConnectError> {
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(&o.bucket);
        builder = crate::aws_profile::fill_from_files(builder);
        if let Some(endpoint) = &o.endpoint {
            builder = builder.with_endpoint(endpoint);
        } else if let Ok(endpoint) = std::env::var("AWS_ENDPOINT_URL") {
            builder = builder.with_endpoint(endpoint);
        }
        let endpoint = builder
            .get_config_value(&AmazonS3ConfigKey::Endpoint)
            .unwrap_or_else(|| "https://s3.amazonaws.com".into());
        let region = builder
            .get_config_value(&AmazonS3ConfigKey::Region)
            .unwrap_or_default();
        let client = |timeout: Duration| {
            builder
                .clone()
                .with_client_options(
                    ClientOptions::new()
                        .with_allow_http(endpoint.starts_with("http://"))
                        .with_timeout(timeout)
                        .with_connect_timeout((o.request_timeout / 5).min(Duration::from_secs(5))),
                )
                .with_retry(RetryConfig {
                    backoff: BackoffConfig::default(),
                    max_retries: 3,
                    retry_timeout: timeout,
                })
                .build()
                .map(Arc::new)
                .map_err(|source| ConnectError::Client {
                    bucket: o.bucket.clone(),
                    source,
                })
        };
        let s3 = client(o.request_timeout)?;
        let completer = client(o.request_timeout.max(COMPLETE_TIMEOUT))?;
        let runtime =
            SideRuntime::new(RUNTIME_THREADS, "vidforge-s3").map_err(ConnectError::Runtime)?;
        tracing::info!(bucket = %o.bucket, prefix = %o.prefix, %endpoint, %region, "media in an S3-compatible bucket");
        Ok(Bucket {
            s3,
            completer,
            bucket: o.bucket.clone(),
            prefix: o.prefix.clone(),
            endpoint,
            node: o.node.clone(),
            runtime,
        })
    }

    /// The key of the media path `rel` (or of a key path under the prefix).
    pub(crate) fn key(&self, rel: &Path) -> Key {
        let rel = rel.to_string_lossy();
        let rel = rel.trim_matches('/');
        let full = match (self.prefix.is_empty(), rel.is_empty()) {
            (true, _) => rel.to_string(),
            (false, true) => self.prefix.clone(),
            (false, false) => format!("{}/{rel}", self.prefix),
        };
        Key::from_iter(full.split('/').filter(|s| !s.is_empty()))
    }

    /// `key` relative to the prefix.
    pub(crate) fn relative(&self, key: &Key) -> String {
        let k = key.as_ref();
        match k.strip_prefix(&self.prefix) {
            Some(r) if !self.prefix.is_empty() => r.trim_start_matches('/').to_string(),
            _ => k.to_string(),
        }
    }

    /// Runs `fut` on the bucket's runtime and waits for it (from any thread that may block).
    pub(crate) fn block_on<R: Send + 'static>(
        &self,
        fut: impl Future<Output = Result<R, ObjectError>> + Send + 'static,
    ) -> Result<R, ObjectError> {
        self.runtime
            .wait(fut, None)
            .unwrap_or_else(|| Err(ObjectError::Unreachable("the media runtime stopped".into())))
    }
}

/// An `object_store` error as the seam names it.
pub(crate) fn failed(e: object_store::Error) -> ObjectError {
    match e {
        object_store::Error::NotFound { path, .. } => ObjectError::Missing(path),
        other => ObjectError::Unreachable(other.to_string()),
    }
}

/// Unix ms now.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
