//! The S3 client of one bucket and prefix, on its own small runtime, and the
//! [`ObjectBackend`] calls other than uploads (`multipart.rs`).

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as Key;
use object_store::signer::Signer;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, ObjectStoreExt, RetryConfig};
use vidforge_core::media_store::{ObjectBackend, ObjectError};
use vidforge_core::side_runtime::SideRuntime;

/// Threads of the bucket's runtime (they drive sockets and file copies).
const RUNTIME_THREADS: usize = 2;

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

/// One bucket and prefix.
pub struct Bucket {
    pub(crate) s3: Arc<AmazonS3>,
    bucket: String,
    prefix: String,
    endpoint: String,
    pub(crate) node: String,
    runtime: SideRuntime,
}

impl Bucket {
    /// The client, with credentials and region from the `AWS_*` variables first, then the
    /// shared files (`aws_profile.rs`). Nothing is contacted yet.
    pub fn connect(o: &Options) -> Result<Bucket, String> {
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
        let timeout = o.request_timeout;
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
            .map_err(|e| format!("s3://{}: {e}", o.bucket))?;
        let runtime = SideRuntime::new(RUNTIME_THREADS, "vidforge-s3")
            .map_err(|e| format!("media runtime: {e}"))?;
        tracing::info!(bucket = %o.bucket, prefix = %o.prefix, %endpoint, %region, "media in an S3-compatible bucket");
        Ok(Bucket {
            s3: Arc::new(s3),
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
    fn relative(&self, key: &Key) -> String {
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

impl ObjectBackend for Bucket {
    fn describe(&self) -> String {
        let prefix = if self.prefix.is_empty() {
            String::new()
        } else {
            format!("/{}", self.prefix)
        };
        format!("s3://{}{prefix} at {}", self.bucket, self.endpoint)
    }

    fn link_origin(&self) -> String {
        url_origin(&self.endpoint).unwrap_or_else(|| self.endpoint.clone())
    }

    fn upload(&self, local: &Path, rel: &Path) -> Result<(), ObjectError> {
        let (s3, key, local) = (self.s3.clone(), self.key(rel), local.to_path_buf());
        let marker = self.marker_key();
        self.block_on(async move { crate::multipart::upload(&s3, &key, &local, &marker).await })
    }

    fn download(&self, rel: &Path, to: &Path) -> Result<(), ObjectError> {
        let (s3, key, to) = (self.s3.clone(), self.key(rel), to.to_path_buf());
        self.block_on(async move {
            let got = s3.get(&key).await.map_err(failed)?;
            let mut file = tokio::fs::File::create(&to).await?;
            let mut stream = got.into_stream();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(failed)?;
                tokio::io::AsyncWriteExt::write_all(&mut file, &chunk).await?;
            }
            file.sync_all().await?;
            Ok(())
        })
    }

    fn read(&self, rel: &Path, max: u64) -> Result<Vec<u8>, ObjectError> {
        let (s3, key) = (self.s3.clone(), self.key(rel));
        self.block_on(async move {
            let got = s3.get(&key).await.map_err(failed)?;
            if got.meta.size > max {
                return Err(ObjectError::Io(std::io::Error::other(format!(
                    "{key} is {} bytes, over {max}",
                    got.meta.size
                ))));
            }
            Ok(got.bytes().await.map_err(failed)?.to_vec())
        })
    }

    fn presign(&self, rel: &Path, head: bool, ttl: Duration) -> Result<String, ObjectError> {
        let (s3, key) = (self.s3.clone(), self.key(rel));
        let method = if head {
            http::Method::HEAD
        } else {
            http::Method::GET
        };
        self.block_on(async move {
            let url = s3.signed_url(method, &key, ttl).await.map_err(failed)?;
            Ok(url.to_string())
        })
    }

    fn remove_prefix(&self, rel: &str) -> Result<(), ObjectError> {
        let (s3, prefix) = (self.s3.clone(), self.key(Path::new(rel)));
        self.block_on(async move {
            let listed: Vec<_> = s3.list(Some(&prefix)).collect().await;
            for meta in listed {
                match s3.delete(&meta.map_err(failed)?.location).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(failed(e)),
                }
            }
            Ok(())
        })
    }

    fn list_dirs(&self, rel: &str) -> Result<Vec<(String, u64)>, ObjectError> {
        let prefix = self.key(Path::new(rel));
        let s3 = self.s3.clone();
        let listed = self.block_on(async move {
            let all: Vec<_> = s3.list(Some(&prefix)).collect().await;
            all.into_iter()
                .map(|m| m.map_err(failed))
                .collect::<Result<Vec<_>, _>>()
        })?;
        let mut newest = std::collections::BTreeMap::<String, i64>::new();
        for meta in listed {
            let rest = self.relative(&meta.location);
            let Some(name) = rest
                .strip_prefix(rel)
                .and_then(|r| r.trim_start_matches('/').split('/').next())
                .filter(|n| !n.is_empty())
            else {
                continue;
            };
            let t = meta.last_modified.timestamp_millis();
            let e = newest.entry(name.to_string()).or_insert(t);
            *e = (*e).max(t);
        }
        let now = now_ms();
        Ok(newest
            .into_iter()
            .map(|(n, t)| (n, now.saturating_sub(t).max(0) as u64))
            .collect())
    }

    fn probe(&self) -> Result<(), ObjectError> {
        // A HEAD of a key that need not exist: any answer but a failure will do.
        let (s3, key) = (self.s3.clone(), self.key(Path::new(".health")));
        self.block_on(async move {
            match s3.head(&key).await {
                Ok(_) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(failed(e)),
            }
        })
    }

    fn abort_orphan_uploads(&self, own: bool) -> Result<usize, ObjectError> {
        crate::multipart::abort_orphans(self, own)
    }
}

/// Unix ms now.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// `scheme://host[:port]` of a URL.
fn url_origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    (!authority.is_empty()).then(|| format!("{scheme}://{authority}"))
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
