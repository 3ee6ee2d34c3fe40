//! The seam to an object store: what the media store needs of a bucket, implemented for
//! S3-compatible services by the `vidforge-s3` crate (so the HTTP client stays out of this
//! crate). Every call blocks until the bucket answered or its bounded retries ran out; callers
//! on an async runtime go through `spawn_blocking`. Media is named by its relative path
//! (`results/<id>/final.mp4`); the backend maps it under its prefix.

use std::path::Path;
use std::time::Duration;

/// How a bucket call failed.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// Could not be reached, timed out or failed the request: temporary.
    #[error("{0}")]
    Unreachable(String),
    /// The object is not there.
    #[error("object {0} is missing")]
    Missing(String),
    /// A local file could not be read or written.
    #[error("local file: {0}")]
    Io(#[from] std::io::Error),
}

/// A bucket (and a prefix in it) holding media.
pub trait ObjectBackend: Send + Sync + 'static {
    /// One line for the startup banner and logs (`s3://bucket/prefix at https://…`).
    fn describe(&self) -> String;
    /// `scheme://host[:port]` where presigned links point.
    fn link_origin(&self) -> String;
    /// Stores the complete file `local` as `rel` (bounded memory whatever its size); the
    /// object appears only once complete.
    fn upload(&self, local: &Path, rel: &Path) -> Result<(), ObjectError>;
    /// Writes the object `rel` into the new file `to` (streamed).
    fn download(&self, rel: &Path, to: &Path) -> Result<(), ObjectError>;
    /// The whole object `rel`, at most `max` bytes.
    fn read(&self, rel: &Path, max: u64) -> Result<Vec<u8>, ObjectError>;
    /// A link to `rel` valid for `ttl`, signed for `HEAD` or `GET`.
    fn presign(&self, rel: &Path, head: bool, ttl: Duration) -> Result<String, ObjectError>;
    /// Deletes every object under `rel/`.
    fn remove_prefix(&self, rel: &str) -> Result<(), ObjectError>;
    /// The names directly under `rel/`, each with the age (ms) of its newest object.
    fn list_dirs(&self, rel: &str) -> Result<Vec<(String, u64)>, ObjectError>;
    /// Whether the bucket answers at all.
    fn probe(&self) -> Result<(), ObjectError>;
    /// Aborts the multipart uploads a killed process left: this node's (`own`), or any node's
    /// left for hours. Returns how many.
    fn abort_orphan_uploads(&self, own: bool) -> Result<usize, ObjectError>;
}
