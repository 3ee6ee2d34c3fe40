//! [`Bucket`] as vidforge-core's [`ObjectBackend`]: reads, listings, presigned links, and
//! uploads (`multipart.rs`).

use std::path::Path;
use std::time::Duration;

use futures_util::StreamExt;
use object_store::signer::Signer;
use object_store::{ObjectStore, ObjectStoreExt};
use vidforge_core::media_store::{ObjectBackend, ObjectError};

use crate::bucket::{Bucket, failed, now_ms};

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
        let (completer, marker) = (self.completer.clone(), self.marker_key());
        self.block_on(async move {
            crate::multipart::upload(&s3, &completer, &key, &local, &marker).await
        })
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
