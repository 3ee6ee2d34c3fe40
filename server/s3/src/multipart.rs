//! Uploads to the bucket: one `PUT` up to [`PART_BYTES`], a multipart upload past it, with at
//! most [`PARTS_IN_FLIGHT`] parts read into memory at once (so memory is bounded whatever the
//! size). The object appears only when the upload completes; until then nothing is visible
//! under its key.
//!
//! A multipart upload leaves parts in the bucket (billed, invisible) if its process dies.
//! So before the first part, a marker object `.uploads/<node>/<upload>.json` names the upload;
//! the marker goes when the upload completes or is aborted. A node aborts its own marked
//! uploads at start (nothing of its own is in flight then), and every node's sweeper aborts
//! those older than [`ORPHAN_UPLOAD_AGE`] (a node that never came back). The marker needs the
//! upload's id, so a kill between creating the upload and writing its marker (one request)
//! leaves an upload nothing names: a bucket lifecycle rule (`AbortIncompleteMultipartUpload`)
//! is the net for that window (docs/cluster.md).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesOrdered;
use object_store::aws::AmazonS3;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;
use vidforge_core::media_store::ObjectError;

use crate::bucket::{Bucket, failed, now_ms};

/// Size of one part (all but the last); S3 wants at least 5 MiB.
pub const PART_BYTES: usize = 16 << 20;
/// Parts being sent at once (each held in memory while it is).
pub const PARTS_IN_FLIGHT: usize = 4;
/// A marked upload this old is a dead node's: the sweeper aborts it.
pub const ORPHAN_UPLOAD_AGE: Duration = Duration::from_secs(6 * 3600);
/// Where the markers live, under the prefix.
const MARKERS: &str = ".uploads";

/// What a marker says.
#[derive(Serialize, Deserialize)]
struct Marker {
    key: String,
    upload_id: String,
}

impl Bucket {
    /// A fresh marker key for one of this node's uploads.
    pub(crate) fn marker_key(&self) -> Key {
        let mut id = [0u8; 16];
        let _ = getrandom::fill(&mut id);
        let id: String = id.iter().map(|b| format!("{b:02x}")).collect();
        self.key(Path::new(&format!(
            "{MARKERS}/{}/{id}.json",
            key_safe(&self.node)
        )))
    }
}

/// Uploads the file `local` as `key`, naming a multipart upload by `marker` while it runs;
/// `completer` (the client with the longer bound) completes it.
pub(crate) async fn upload(
    s3: &Arc<AmazonS3>,
    completer: &AmazonS3,
    key: &Key,
    local: &Path,
    marker: &Key,
) -> Result<(), ObjectError> {
    let size = tokio::fs::metadata(local).await?.len();
    if size <= PART_BYTES as u64 {
        let bytes = tokio::fs::read(local).await?;
        s3.put(key, PutPayload::from(bytes)).await.map_err(failed)?;
        return Ok(());
    }
    let upload_id = s3.create_multipart(key).await.map_err(failed)?;
    let body = serde_json::to_vec(&Marker {
        key: key.to_string(),
        upload_id: upload_id.clone(),
    })
    .map_err(|e| ObjectError::Io(std::io::Error::other(e)))?;
    if let Err(e) = s3.put(marker, PutPayload::from(body)).await {
        let _ = s3.abort_multipart(key, &upload_id).await;
        return Err(failed(e));
    }
    let result = send_parts(s3, completer, local, key, &upload_id).await;
    if result.is_err() {
        let _ = s3.abort_multipart(key, &upload_id).await;
    }
    // Completed or aborted: the marker has nothing left to clean.
    let _ = s3.delete(marker).await;
    result
}

async fn send_parts(
    s3: &Arc<AmazonS3>,
    completer: &AmazonS3,
    local: &Path,
    key: &Key,
    upload_id: &str,
) -> Result<(), ObjectError> {
    let mut file = tokio::fs::File::open(local).await?;
    let mut in_flight = FuturesOrdered::new();
    let mut parts: Vec<PartId> = Vec::new();
    let mut index = 0usize;
    loop {
        let mut buf = Vec::new();
        buf.try_reserve_exact(PART_BYTES)
            .map_err(|e| ObjectError::Io(std::io::Error::other(e)))?;
        let n = (&mut file)
            .take(PART_BYTES as u64)
            .read_to_end(&mut buf)
            .await?;
        if n == 0 {
            break;
        }
        let (s3, key, id, i) = (s3.clone(), key.clone(), upload_id.to_string(), index);
        in_flight.push_back(async move { s3.put_part(&key, &id, i, PutPayload::from(buf)).await });
        index += 1;
        if in_flight.len() >= PARTS_IN_FLIGHT
            && let Some(done) = in_flight.next().await
        {
            parts.push(done.map_err(failed)?);
        }
        if n < PART_BYTES {
            break;
        }
    }
    while let Some(done) = in_flight.next().await {
        parts.push(done.map_err(failed)?);
    }
    completer
        .complete_multipart(key, &upload_id.to_string(), parts)
        .await
        .map_err(failed)?;
    Ok(())
}

/// Aborts marked uploads: this node's (`own`) or any older than [`ORPHAN_UPLOAD_AGE`].
/// Returns how many.
pub(crate) fn abort_orphans(bucket: &Bucket, own: bool) -> Result<usize, ObjectError> {
    let root = if own {
        bucket.key(Path::new(&format!("{MARKERS}/{}", key_safe(&bucket.node))))
    } else {
        bucket.key(Path::new(MARKERS))
    };
    let s3 = bucket.s3.clone();
    bucket.block_on(async move {
        let now = now_ms();
        let min_age = if own {
            0
        } else {
            ORPHAN_UPLOAD_AGE.as_millis() as i64
        };
        let markers: Vec<_> = s3.list(Some(&root)).collect().await;
        let mut aborted = 0;
        for meta in markers {
            let meta = meta.map_err(failed)?;
            if now - meta.last_modified.timestamp_millis() < min_age {
                continue;
            }
            let body = match s3.get(&meta.location).await {
                Ok(got) => got.bytes().await.map_err(failed)?,
                Err(object_store::Error::NotFound { .. }) => continue,
                Err(e) => return Err(failed(e)),
            };
            if let Ok(m) = serde_json::from_slice::<Marker>(&body) {
                let key = Key::from(m.key.as_str());
                match s3.abort_multipart(&key, &m.upload_id).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => aborted += 1,
                    Err(e) => {
                        tracing::warn!(key = %key, error = %e, "cannot abort an orphaned multipart upload");
                        continue;
                    }
                }
            }
            let _ = s3.delete(&meta.location).await;
        }
        if aborted > 0 {
            tracing::info!(aborted, "orphaned multipart uploads aborted");
        }
        Ok(aborted)
    })
}

/// A node name as one key segment (`host:8080` → `host_8080`).
fn key_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_become_one_segment() {
        assert_eq!(key_safe("host:8080"), "host_8080");
        assert_eq!(key_safe("a/b c"), "a_b_c");
    }
}
