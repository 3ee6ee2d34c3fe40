//! Media in an S3-compatible bucket: [`Bucket`], `object_store`'s S3 client behind
//! vidforge-core's [`ObjectBackend`] seam. Requests are bounded by `s3_request_timeout` and
//! retried with backoff by the client; a small tokio runtime of the bucket's own drives them,
//! so callers block (worker threads, or `spawn_blocking` on a server runtime).
//!
//! `bucket.rs`: the client, its keys and runtime; `backend.rs`: the seam's calls (reads,
//! listings, presigned links); `multipart.rs`: uploads with bounded memory and the markers
//! that let a killed node's uploads be aborted; `aws_profile.rs`: credentials and region from
//! the shared AWS files. Imports go one way: `backend` → `multipart` → `bucket`.

mod aws_profile;
mod backend;
mod bucket;
mod multipart;

use std::sync::Arc;

pub use bucket::{Bucket, ConnectError};
use vidforge_core::config::{Config, MediaStoreSetting};
use vidforge_core::media_store::ObjectBackend;

/// The backend `config.media_store` needs: a [`Bucket`] for `s3://…`, none for a directory.
pub fn backend_for(config: &Config) -> Result<Option<Arc<dyn ObjectBackend>>, ConnectError> {
    match &config.media_store {
        MediaStoreSetting::S3 { bucket, prefix } => {
            let b = Bucket::connect(&bucket::Options {
                bucket: bucket.clone(),
                prefix: prefix.clone(),
                endpoint: config.s3_endpoint.clone(),
                request_timeout: config.s3_request_timeout,
                node: config.node_name(),
            })?;
            Ok(Some(Arc::new(b)))
        }
        _ => Ok(None),
    }
}
