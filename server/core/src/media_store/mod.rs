//! Where media lives (`media_store`): a directory, or an S3-compatible bucket.
//!
//! Records name a piece of media by path. An **absolute** path is a file (the data directory,
//! or a directory a cluster shares). A **relative** one (`results/<id>/final.mp4`) is an
//! object: the same relative path under the bucket's prefix. Media is always written locally
//! first (uploads under a temporary name, results and previews by the engine), then
//! [`MediaStore::publish_blocking`] / [`MediaStore::publish_upload`] make it durable where it lives
//! and give the name the record keeps; a record never names media that is not complete.
//!
//! With a bucket, the data directory keeps only scratch files (an upload being received, a
//! render being written) and the bounded cache of sources (`cache.rs`). The bucket itself is
//! reached through the [`ObjectBackend`] seam (`backend.rs`), which the `vidforge-s3` crate
//! implements; this crate knows no HTTP client.

mod backend;
mod cache;
mod object;

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use crate::config::{Config, MediaStoreSetting};
use crate::error::ServiceError;

pub use backend::{ObjectBackend, ObjectError};
use object::ObjectMedia;

/// The media store of one process (cheap to clone).
#[derive(Clone)]
pub struct MediaStore {
    /// Root of the local tree: the media directory, or (with a bucket) the data directory.
    root: PathBuf,
    object: Option<std::sync::Arc<ObjectMedia>>,
}

/// How long a failed bucket call keeps new work refused before the bucket is asked again.
pub const HEALTH_RECHECK: Duration = Duration::from_secs(2);

impl MediaStore {
    /// Media under a local (or shared POSIX) directory.
    pub fn local(root: PathBuf) -> MediaStore {
        MediaStore { root, object: None }
    }

    /// The store `config.media_store` names; a bucket through `objects` (the binary wires
    /// `vidforge-s3`'s). A bucket is not contacted here: one that is down at start refuses
    /// uploads and renders (temporarily), never the start itself.
    pub fn open(
        config: &Config,
        objects: Option<std::sync::Arc<dyn ObjectBackend>>,
    ) -> Result<MediaStore, ServiceError> {
        let root = config.media_root().to_path_buf();
        match (&config.media_store, objects) {
            (MediaStoreSetting::S3 { .. }, Some(backend)) => Ok(MediaStore {
                root,
                object: Some(std::sync::Arc::new(ObjectMedia::new(backend, config)?)),
            }),
            (MediaStoreSetting::S3 { .. }, None) => Err(ServiceError::Internal(
                "media_store names a bucket, but no object store backend was given".into(),
            )),
            _ => Ok(MediaStore::local(root)),
        }
    }

    /// Whether media lives in a bucket.
    pub fn is_object(&self) -> bool {
        self.object.is_some()
    }

    /// One line for the startup banner.
    pub fn describe(&self) -> String {
        match &self.object {
            Some(o) => o.backend().describe(),
            None => crate::config::display_path(&self.root),
        }
    }

    /// The origin (`scheme://host[:port]`) presigned links point at, for the pages' CSP.
    pub fn link_origin(&self) -> Option<String> {
        self.object.as_ref().map(|o| o.backend().link_origin())
    }

    /// The path relative to the local root of `local` (a file under it).
    fn relative(&self, local: &Path) -> Result<PathBuf, ServiceError> {
        local
            .strip_prefix(&self.root)
            .map(Path::to_path_buf)
            .map_err(|_| {
                ServiceError::Internal(format!(
                    "{} is outside the media root {}",
                    local.display(),
                    self.root.display()
                ))
            })
    }

    /// Makes the finished file `local` (under the local root) durable where media lives and
    /// returns the name its record keeps. Locally that is the file itself (already fsynced
    /// and renamed by its writer); with a bucket the file is uploaded (multipart past
    /// 16 MiB, in `vidforge-s3`), retried with backoff for `media_retry_window` while the
    /// bucket cannot be reached, then deleted here. `stop` ends the retries early (shutdown).
    pub fn publish_blocking(
        &self,
        local: &Path,
        stop: &dyn Fn() -> bool,
    ) -> Result<PathBuf, ServiceError> {
        let Some(object) = &self.object else {
            return Ok(local.to_path_buf());
        };
        let rel = self.relative(local)?;
        object.upload_with_retries(local, &rel, stop)?;
        let _ = std::fs::remove_file(local);
        Ok(rel)
    }

    /// An upload's publication: `partial` (complete, probed) becomes the asset at
    /// `<root>/<rel>`: renamed into place locally; with a bucket, uploaded once (a failure is
    /// the client's to retry: `service_unavailable`), then kept as this node's cached copy.
    pub async fn publish_upload(
        &self,
        partial: &Path,
        rel: &Path,
    ) -> Result<PathBuf, ServiceError> {
        match &self.object {
            None => {
                let path = self.root.join(rel);
                if let Some(dir) = path.parent() {
                    tokio::fs::create_dir_all(dir).await?;
                }
                tokio::fs::rename(partial, &path).await?;
                // The record is flushed next: the file's new name must be on disk first.
                let synced = path.clone();
                tokio::task::spawn_blocking(move || vidforge_media::sync_parent_dirs(&synced))
                    .await
                    .map_err(|e| ServiceError::Internal(format!("sync task failed: {e}")))??;
                Ok(path)
            }
            Some(object) => {
                let o = object.clone();
                let (local, key) = (partial.to_path_buf(), rel.to_path_buf());
                blocking(move || {
                    o.upload(&local, &key)?;
                    o.cache().adopt(&key, &local);
                    Ok(())
                })
                .await?;
                Ok(rel.to_path_buf())
            }
        }
    }

    /// A local file with the content of the stored media `stored`, for the engine: the file
    /// itself, or this node's cached copy (downloaded once, then reused; the download retried
    /// like [`MediaStore::publish_blocking`]'s upload, until `stop`).
    pub fn local_copy_blocking(
        &self,
        stored: &Path,
        stop: &dyn Fn() -> bool,
    ) -> Result<PathBuf, ServiceError> {
        match (&self.object, object_name(stored)) {
            (Some(object), Some(rel)) => object.retried(rel, stop, || object.cached_copy(rel)),
            _ => Ok(stored.to_path_buf()),
        }
    }

    /// Reads the whole of `stored` (at most `max` bytes; more is an error).
    pub async fn read(&self, stored: &Path, max: u64) -> Result<Vec<u8>, ServiceError> {
        match (&self.object, object_name(stored)) {
            (Some(object), Some(rel)) => {
                let (o, rel) = (object.clone(), rel.to_path_buf());
                blocking(move || o.outcome(o.backend().read(&rel, max))).await
            }
            _ => {
                let len = tokio::fs::metadata(stored).await?.len();
                if len > max {
                    return Err(ServiceError::Internal(format!(
                        "{} is {len} bytes, over {max}",
                        stored.display()
                    )));
                }
                Ok(tokio::fs::read(stored).await?)
            }
        }
    }

    /// A short-lived presigned link on stored media, signed for `HEAD` or `GET`, and how long
    /// it lives: `presigned_url_ttl`, or `within` when that is shorter (a link handed out
    /// under a shorter promise never outlives it); `None` when it is a local file (served by
    /// this server).
    pub async fn presigned(
        &self,
        stored: &Path,
        head: bool,
        within: Option<Duration>,
    ) -> Result<Option<(String, Duration)>, ServiceError> {
        match (&self.object, object_name(stored)) {
            (Some(object), Some(rel)) => {
                let (o, rel) = (object.clone(), rel.to_path_buf());
                let ttl = within.map_or(o.presign_ttl(), |w| w.min(o.presign_ttl()));
                // Signing is local: a link made says nothing of the bucket's health.
                blocking(move || match o.backend().presign(&rel, head, ttl) {
                    Ok(url) => Ok(url),
                    Err(e) => o.outcome(Err(e)),
                })
                .await
                .map(|url| Some((url, ttl)))
            }
            _ => Ok(None),
        }
    }

    /// Deletes the directory `rel` (`results/<id>`, `assets/<id>`) wherever media lives.
    /// Missing is fine.
    pub fn remove_dir_blocking(&self, rel: &str) -> Result<(), ServiceError> {
        // Scratch files of the same name go too (a render's output before its upload).
        let local = self.root.join(rel);
        match std::fs::remove_dir_all(&local) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
        match &self.object {
            Some(object) => {
                object.cache().forget_dir(rel);
                object.outcome(object.backend().remove_prefix(rel))
            }
            None => Ok(()),
        }
    }

    /// The entries directly under `rel` (`results`, `assets`) with the age of their newest
    /// content in ms: for the orphan sweeps. With a bucket, its entries and this node's own
    /// (scratch and cache the bucket's listing does not show: the segment a node was writing
    /// when it was killed, say).
    pub fn list_dirs_blocking(&self, rel: &str) -> Result<Vec<(String, u64)>, ServiceError> {
        let mut dirs = local_dirs(&self.root.join(rel));
        if let Some(object) = &self.object {
            let remote = object.outcome(object.backend().list_dirs(rel))?;
            let names: std::collections::HashSet<&str> =
                remote.iter().map(|(n, _)| n.as_str()).collect();
            dirs.retain(|(name, _)| !names.contains(name.as_str()));
            dirs.extend(remote);
        }
        Ok(dirs)
    }

    /// The directories (`results/<id>`, `assets/<id>`) whose upload to the bucket failed
    /// within `window`: what a request that timed out may still have left there, for the sweep
    /// to check against the records. None without a bucket.
    pub fn upload_suspects(&self, window: std::time::Duration) -> Vec<String> {
        self.object
            .as_ref()
            .map_or_else(Vec::new, |o| o.upload_suspects(window))
    }

    /// Refuses new work while the bucket cannot be reached (`service_unavailable` with
    /// `retry_after_ms`); asks it at most every [`HEALTH_RECHECK`].
    pub async fn check_available(&self) -> Result<(), ServiceError> {
        match &self.object {
            Some(object) => {
                let o = object.clone();
                blocking(move || o.check_available()).await
            }
            None => Ok(()),
        }
    }

    /// Aborts multipart uploads a killed process left behind: this node's at start (nothing
    /// of its own is in flight then), every node's older than
    /// 6 hours from the sweeper (`vidforge-s3`). Returns how many it aborted.
    pub fn abort_orphan_uploads_blocking(&self, at_start: bool) -> Result<usize, ServiceError> {
        match &self.object {
            Some(object) => object.outcome(object.backend().abort_orphan_uploads(at_start)),
            None => Ok(0),
        }
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ServiceError> + Send + 'static,
) -> Result<T, ServiceError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ServiceError::Internal(format!("media task failed: {e}")))?
}

/// The object name of stored media: its path when relative, made only of plain components.
fn object_name(stored: &Path) -> Option<&Path> {
    (stored.is_relative()
        && stored
            .components()
            .all(|c| matches!(c, Component::Normal(_))))
    .then_some(stored)
}

/// The entries directly under local directory `dir` with their age in ms (none when it does
/// not exist).
fn local_dirs(dir: &Path) -> Vec<(String, u64)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| {
            let age = e
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .unwrap_or_default();
            (
                e.file_name().to_string_lossy().into_owned(),
                age.as_millis() as u64,
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_relative_paths_name_objects() {
        assert!(object_name(Path::new("results/task_1/final.mp4")).is_some());
        assert!(object_name(Path::new("/data/results/task_1/final.mp4")).is_none());
        assert!(object_name(Path::new("../results/x")).is_none());
        assert!(object_name(Path::new("results/./x")).is_some_and(|p| p.ends_with("x")));
    }

    #[test]
    fn local_publication_keeps_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let store = MediaStore::local(dir.path().to_path_buf());
        let file = dir.path().join("results/task_1/final.mp4");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, b"x").unwrap();
        assert_eq!(store.publish_blocking(&file, &|| false).unwrap(), file);
        assert_eq!(store.local_copy_blocking(&file, &|| false).unwrap(), file);
        store.remove_dir_blocking("results/task_1").unwrap();
        assert!(!file.exists());
        store.remove_dir_blocking("results/task_1").unwrap();
    }
}
