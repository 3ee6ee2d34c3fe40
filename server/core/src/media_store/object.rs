//! Media in an S3-compatible bucket, through `object_store`'s S3 client: requests bounded by
//! `s3_request_timeout` and retried with backoff by the client, a small tokio runtime of our
//! own to drive them (callers are worker threads and other runtimes alike), the source cache
//! beside it, and a cached answer to "can the bucket be reached?".

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as Key;
use object_store::signer::Signer;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, ObjectStoreExt, RetryConfig};

use super::HEALTH_RECHECK;
use super::cache::SourceCache;
use crate::config::Config;
use crate::error::ServiceError;
use crate::sync::lock;

/// Threads of the media runtime (they drive sockets and file copies).
const RUNTIME_THREADS: usize = 2;
/// Longest pause between two attempts of a render's upload.
const MAX_RETRY_PAUSE: Duration = Duration::from_secs(10);

/// The bucket, its prefix and what reaches it.
pub struct ObjectMedia {
    s3: Arc<AmazonS3>,
    bucket: String,
    prefix: String,
    endpoint: String,
    /// Multipart markers name their node (`multipart.rs`).
    pub(super) node: String,
    presign_ttl: Duration,
    retry_window: Duration,
    cache: SourceCache,
    /// The last answer to "can the bucket be reached?" and when it was had.
    health: Mutex<Option<(Instant, Result<(), String>)>>,
    runtime: Runtime,
}

impl ObjectMedia {
    /// The client for `s3://bucket/prefix` with `config`'s endpoint, timeouts and cache.
    /// Credentials and region: `AWS_*` variables first, then the shared files
    /// (`aws_profile.rs`). Nothing is contacted yet.
    pub(super) fn connect(
        bucket: &str,
        prefix: &str,
        config: &Config,
    ) -> Result<ObjectMedia, ServiceError> {
        let timeout = config.s3_request_timeout;
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
        builder = super::aws_profile::fill_from_files(builder);
        if let Some(endpoint) = &config.s3_endpoint {
            builder = builder.with_endpoint(endpoint);
        } else if let Ok(endpoint) = std::env::var("AWS_ENDPOINT_URL") {
            builder = builder.with_endpoint(endpoint);
        }
        let endpoint = builder
            .get_config_value(&object_store::aws::AmazonS3ConfigKey::Endpoint)
            .unwrap_or_else(|| "https://s3.amazonaws.com".into());
        let region = builder
            .get_config_value(&object_store::aws::AmazonS3ConfigKey::Region)
            .unwrap_or_default();
        let s3 = builder
            .with_client_options(
                ClientOptions::new()
                    .with_allow_http(endpoint.starts_with("http://"))
                    .with_timeout(timeout)
                    .with_connect_timeout((timeout / 5).min(Duration::from_secs(5))),
            )
            .with_retry(RetryConfig {
                backoff: BackoffConfig::default(),
                max_retries: 3,
                retry_timeout: timeout,
            })
            .build()
            .map_err(|e| ServiceError::Internal(format!("media store s3://{bucket}: {e}")))?;
        let runtime = Runtime::new()?;
        let cache = SourceCache::open(config.media_cache_dir(), config.media_cache_bytes)?;
        tracing::info!(bucket, prefix, %endpoint, %region, "media in an S3-compatible bucket");
        Ok(ObjectMedia {
            s3: Arc::new(s3),
            bucket: bucket.into(),
            prefix: prefix.into(),
            endpoint,
            node: config.node_name(),
            presign_ttl: config.presigned_url_ttl,
            retry_window: config.media_retry_window,
            cache,
            health: Mutex::new(None),
            runtime,
        })
    }

    pub(super) fn describe(&self) -> String {
        let prefix = if self.prefix.is_empty() {
            String::new()
        } else {
            format!("/{}", self.prefix)
        };
        format!("s3://{}{prefix} at {}", self.bucket, self.endpoint)
    }

    /// `scheme://host[:port]` of the endpoint (where presigned links point).
    pub(super) fn origin(&self) -> String {
        match url_origin(&self.endpoint) {
            Some(o) => o,
            None => self.endpoint.clone(),
        }
    }

    pub(super) fn s3(&self) -> &Arc<AmazonS3> {
        &self.s3
    }

    pub(super) fn cache(&self) -> &SourceCache {
        &self.cache
    }

    /// The key of the relative media path `rel` (or of a key path under the prefix).
    pub(super) fn key(&self, rel: &Path) -> Key {
        let rel = rel.to_string_lossy();
        let rel = rel.trim_matches('/');
        let full = if self.prefix.is_empty() {
            rel.to_string()
        } else if rel.is_empty() {
            self.prefix.clone()
        } else {
            format!("{}/{rel}", self.prefix)
        };
        Key::from_iter(full.split('/').filter(|s| !s.is_empty()))
    }

    /// `key` relative to the prefix, as a media path.
    pub(super) fn relative(&self, key: &Key) -> String {
        let k = key.as_ref();
        if self.prefix.is_empty() {
            return k.to_string();
        }
        k.strip_prefix(&self.prefix)
            .map(|r| r.trim_start_matches('/').to_string())
            .unwrap_or_else(|| k.to_string())
    }

    /// Runs `fut` on the media runtime; the answer comes back to any caller, async or not.
    pub(super) fn spawn<R: Send + 'static>(
        &self,
        fut: impl Future<Output = Result<R, ServiceError>> + Send + 'static,
    ) -> impl Future<Output = Result<R, ServiceError>> {
        let handle = self.runtime.handle().spawn(fut);
        async move {
            handle
                .await
                .map_err(|e| ServiceError::Internal(format!("media task failed: {e}")))?
        }
    }

    /// Runs `fut` on the media runtime and waits for it (a thread that may block).
    pub(super) fn block_on<R: Send + 'static>(
        &self,
        fut: impl Future<Output = Result<R, ServiceError>> + Send + 'static,
    ) -> Result<R, ServiceError> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.runtime.handle().spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv()
            .unwrap_or_else(|_| Err(ServiceError::Internal("the media runtime stopped".into())))
    }

    /// Uploads `local` to `rel`; retried with backoff while the bucket cannot be reached, for
    /// at most `media_retry_window` (or until `stop`).
    pub(super) fn upload_with_retries(
        self: &Arc<Self>,
        local: &Path,
        rel: &Path,
        stop: &dyn Fn() -> bool,
    ) -> Result<(), ServiceError> {
        let deadline = Instant::now() + self.retry_window;
        let mut pause = Duration::from_millis(500);
        loop {
            let (o, l, r) = (self.clone(), local.to_path_buf(), rel.to_path_buf());
            match self.block_on(async move { o.upload(&l, &r).await }) {
                Ok(()) => {
                    self.answered();
                    return Ok(());
                }
                Err(ServiceError::MediaUnavailable { reason })
                    if Instant::now() + pause < deadline && !stop() =>
                {
                    tracing::warn!(object = %rel.display(), %reason, retry_in_ms = pause.as_millis() as u64, "media upload failed; retrying");
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(MAX_RETRY_PAUSE);
                }
                other => return other,
            }
        }
    }

    /// Reads all of `rel` (at most `max` bytes).
    pub(super) async fn read(&self, rel: &Path, max: u64) -> Result<Vec<u8>, ServiceError> {
        let key = self.key(rel);
        let got = self.s3.get(&key).await.map_err(|e| self.failed(e))?;
        if got.meta.size > max {
            return Err(ServiceError::Internal(format!(
                "{key} is {} bytes, over {max}",
                got.meta.size
            )));
        }
        let bytes = got.bytes().await.map_err(|e| self.failed(e))?;
        self.answered();
        Ok(bytes.to_vec())
    }

    /// A presigned link for `method` on `rel`, valid for `presigned_url_ttl`.
    pub(super) async fn presigned(
        &self,
        rel: &Path,
        method: http::Method,
    ) -> Result<String, ServiceError> {
        let key = self.key(rel);
        let url = self
            .s3
            .signed_url(method, &key, self.presign_ttl)
            .await
            .map_err(|e| self.failed(e))?;
        Ok(url.to_string())
    }

    /// The local copy of `rel` (downloaded on a miss; least recently used copies out).
    pub(super) fn cached_copy_blocking(
        self: &Arc<Self>,
        rel: &Path,
    ) -> Result<PathBuf, ServiceError> {
        if let Some(hit) = self.cache.get(rel) {
            return Ok(hit);
        }
        let (o, r) = (self.clone(), rel.to_path_buf());
        self.block_on(async move { o.download_to_cache(&r).await })
    }

    async fn download_to_cache(&self, rel: &Path) -> Result<PathBuf, ServiceError> {
        let key = self.key(rel);
        let partial = self.cache.partial_path();
        let result = async {
            let got = self.s3.get(&key).await.map_err(|e| self.failed(e))?;
            let mut file = tokio::fs::File::create(&partial).await?;
            let mut stream = got.into_stream();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| self.failed(e))?;
                tokio::io::AsyncWriteExt::write_all(&mut file, &chunk).await?;
            }
            file.sync_all().await?;
            Ok::<_, ServiceError>(())
        }
        .await;
        if let Err(e) = result {
            let _ = tokio::fs::remove_file(&partial).await;
            return Err(e);
        }
        self.answered();
        Ok(self.cache.adopt(rel, &partial))
    }

    /// Deletes every object under `rel/`.
    pub(super) fn remove_prefix_blocking(self: &Arc<Self>, rel: &str) -> Result<(), ServiceError> {
        let o = self.clone();
        let prefix = self.key(Path::new(rel));
        self.block_on(async move {
            let keys: Vec<_> = o.s3.list(Some(&prefix)).collect().await;
            for meta in keys {
                let meta = meta.map_err(|e| o.failed(e))?;
                match o.s3.delete(&meta.location).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(o.failed(e)),
                }
            }
            o.answered();
            Ok(())
        })
    }

    /// The names directly under `rel/` with the age (ms) of their newest object.
    pub(super) fn list_dirs_blocking(
        self: &Arc<Self>,
        rel: &str,
    ) -> Result<Vec<(String, u64)>, ServiceError> {
        let (o, rel) = (self.clone(), rel.to_string());
        let prefix = self.key(Path::new(&rel));
        self.block_on(async move {
            let mut newest = std::collections::BTreeMap::<String, i64>::new();
            let mut objects = o.s3.list(Some(&prefix));
            while let Some(meta) = objects.next().await {
                let meta = meta.map_err(|e| o.failed(e))?;
                let rest = o.relative(&meta.location);
                let Some(name) = rest
                    .strip_prefix(rel.as_str())
                    .and_then(|r| r.trim_start_matches('/').split('/').next())
                    .filter(|n| !n.is_empty())
                else {
                    continue;
                };
                let t = meta.last_modified.timestamp_millis();
                let e = newest.entry(name.to_string()).or_insert(t);
                *e = (*e).max(t);
            }
            o.answered();
            let now = crate::clock::to_unix_ms(std::time::SystemTime::now()) as i64;
            Ok(newest
                .into_iter()
                .map(|(n, t)| (n, now.saturating_sub(t).max(0) as u64))
                .collect())
        })
    }

    /// Whether the bucket answers (a `HEAD` of a key that need not exist), cached for
    /// [`HEALTH_RECHECK`]; a failure is `service_unavailable`.
    pub(super) async fn check_available(&self) -> Result<(), ServiceError> {
        let cached = lock(&self.health).clone();
        let answer = match cached {
            Some((at, answer)) if at.elapsed() < HEALTH_RECHECK => answer,
            _ => {
                let probe = self.key(Path::new(".health"));
                let answer = match self.s3.head(&probe).await {
                    Ok(_) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                    Err(e) => Err(e.to_string()),
                };
                *lock(&self.health) = Some((Instant::now(), answer.clone()));
                answer
            }
        };
        answer.map_err(|reason| ServiceError::MediaUnavailable {
            reason: format!("the media store cannot be reached: {reason}"),
        })
    }

    /// A request the bucket answered: it can be reached again.
    pub(super) fn answered(&self) {
        let mut health = lock(&self.health);
        if matches!(&*health, Some((_, Err(_)))) {
            *health = Some((Instant::now(), Ok(())));
        }
    }

    /// An error of the bucket: `NotFound` stays an internal error (a record names media that
    /// is gone); anything else is the bucket being unreachable or failing, a temporary
    /// `service_unavailable`, and it marks the bucket down until it answers again.
    pub(super) fn failed(&self, e: object_store::Error) -> ServiceError {
        if let object_store::Error::NotFound { path, .. } = &e {
            return ServiceError::Internal(format!("media object {path} is missing"));
        }
        let reason = e.to_string();
        *lock(&self.health) = Some((Instant::now(), Err(reason.clone())));
        ServiceError::MediaUnavailable {
            reason: format!("the media store failed: {reason}"),
        }
    }
}

/// `scheme://host[:port]` of a URL.
fn url_origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    (!authority.is_empty()).then(|| format!("{scheme}://{authority}"))
}

/// The media runtime, shut down without waiting when the store goes (which may happen on
/// another runtime's thread, where waiting is not allowed).
struct Runtime(Option<tokio::runtime::Runtime>);

impl Runtime {
    fn new() -> Result<Runtime, ServiceError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(RUNTIME_THREADS)
            .thread_name("vidforge-media")
            .enable_all()
            .build()?;
        Ok(Runtime(Some(rt)))
    }

    fn handle(&self) -> &tokio::runtime::Handle {
        self.0.as_ref().expect("taken only on drop").handle()
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins() {
        assert_eq!(
            url_origin("http://127.0.0.1:9000/x").as_deref(),
            Some("http://127.0.0.1:9000")
        );
        assert_eq!(
            url_origin("https://s3.amazonaws.com").as_deref(),
            Some("https://s3.amazonaws.com")
        );
        assert_eq!(url_origin("nope"), None);
    }
}
