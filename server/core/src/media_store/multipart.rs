//! Uploads to the bucket: one `PUT` up to [`PART_BYTES`], a multipart upload past it, with at
//! most [`PARTS_IN_FLIGHT`] parts read into memory at once (so memory is bounded whatever the
//! size). The object appears only when the upload completes; until then nothing is visible
//! under its key.
//!
//! A multipart upload leaves parts in the bucket (billed, invisible) if its process dies.
//! So before the first part, a marker object `.uploads/<node>/<upload>.json` names the upload;
//! the marker goes when the upload completes or is aborted. A node aborts its own marked
//! uploads at start (nothing of its own is in flight then), and every node's sweeper aborts
//! those older than [`ORPHAN_UPLOAD_AGE`] (a node that never came back).

use std::path::Path;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesOrdered;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;

use super::object::ObjectMedia;
use crate::error::ServiceError;

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

impl ObjectMedia {
    /// Uploads the file `local` as the object of media path `rel`.
    pub(super) async fn upload(&self, local: &Path, rel: &Path) -> Result<(), ServiceError> {
        let key = self.key(rel);
        let size = tokio::fs::metadata(local).await?.len();
        if size <= PART_BYTES as u64 {
            let bytes = tokio::fs::read(local).await?;
            self.s3()
                .put(&key, PutPayload::from(bytes))
                .await
                .map_err(|e| self.failed(e))?;
            return Ok(());
        }
        let s3 = self.s3().clone();
        let upload_id = s3
            .create_multipart(&key)
            .await
            .map_err(|e| self.failed(e))?;
        let marker = self.key(Path::new(&format!(
            "{MARKERS}/{}/{}.json",
            key_safe(&self.node),
            crate::ids::new_asset_id()
        )));
        let body = serde_json::to_vec(&Marker {
            key: key.to_string(),
            upload_id: upload_id.clone(),
        })
        .map_err(|e| ServiceError::Internal(e.to_string()))?;
        if let Err(e) = s3.put(&marker, PutPayload::from(body)).await {
            let _ = s3.abort_multipart(&key, &upload_id).await;
            return Err(self.failed(e));
        }
        let result = self.send_parts(local, &key, &upload_id).await;
        if result.is_err() {
            let _ = s3.abort_multipart(&key, &upload_id).await;
        }
        // Completed or aborted: the marker has nothing left to clean.
        let _ = s3.delete(&marker).await;
        result
    }

    async fn send_parts(
        &self,
        local: &Path,
        key: &Key,
        upload_id: &str,
    ) -> Result<(), ServiceError> {
        let s3 = self.s3().clone();
        let upload_id = upload_id.to_string();
        let mut file = tokio::fs::File::open(local).await?;
        let mut in_flight = FuturesOrdered::new();
        let mut parts: Vec<PartId> = Vec::new();
        let mut index = 0usize;
        loop {
            let mut buf = Vec::new();
            buf.try_reserve_exact(PART_BYTES)
                .map_err(|e| ServiceError::Internal(format!("part buffer: {e}")))?;
            let n = (&mut file)
                .take(PART_BYTES as u64)
                .read_to_end(&mut buf)
                .await?;
            if n == 0 {
                break;
            }
            let (s3, key, id, i) = (s3.clone(), key.clone(), upload_id.clone(), index);
            in_flight
                .push_back(async move { s3.put_part(&key, &id, i, PutPayload::from(buf)).await });
            index += 1;
            if in_flight.len() >= PARTS_IN_FLIGHT
                && let Some(done) = in_flight.next().await
            {
                parts.push(done.map_err(|e| self.failed(e))?);
            }
            if n < PART_BYTES {
                break;
            }
        }
        while let Some(done) = in_flight.next().await {
            parts.push(done.map_err(|e| self.failed(e))?);
        }
        s3.complete_multipart(key, &upload_id, parts)
            .await
            .map_err(|e| self.failed(e))?;
        Ok(())
    }

    /// Aborts marked uploads: this node's (`at_start`) or any older than
    /// [`ORPHAN_UPLOAD_AGE`]. Returns how many.
    pub(super) fn abort_orphan_uploads_blocking(
        self: &std::sync::Arc<Self>,
        at_start: bool,
    ) -> Result<usize, ServiceError> {
        let o = self.clone();
        let root = if at_start {
            self.key(Path::new(&format!("{MARKERS}/{}", key_safe(&self.node))))
        } else {
            self.key(Path::new(MARKERS))
        };
        self.block_on(async move {
            let now = chrono_now_ms();
            let min_age = if at_start { 0 } else { ORPHAN_UPLOAD_AGE.as_millis() as i64 };
            let markers: Vec<_> = o.s3().list(Some(&root)).collect().await;
            let mut aborted = 0;
            for meta in markers {
                let meta = meta.map_err(|e| o.failed(e))?;
                if now - meta.last_modified.timestamp_millis() < min_age {
                    continue;
                }
                let body = match o.s3().get(&meta.location).await {
                    Ok(got) => got.bytes().await.map_err(|e| o.failed(e))?,
                    Err(object_store::Error::NotFound { .. }) => continue,
                    Err(e) => return Err(o.failed(e)),
                };
                if let Ok(m) = serde_json::from_slice::<Marker>(&body) {
                    let key = Key::from(m.key.as_str());
                    match o.s3().abort_multipart(&key, &m.upload_id).await {
                        Ok(()) | Err(object_store::Error::NotFound { .. }) => aborted += 1,
                        Err(e) => {
                            tracing::warn!(key = %key, error = %e, "cannot abort an orphaned multipart upload");
                            continue;
                        }
                    }
                }
                let _ = o.s3().delete(&meta.location).await;
            }
            if aborted > 0 {
                tracing::info!(aborted, "orphaned multipart uploads aborted");
            }
            Ok(aborted)
        })
    }
}

fn chrono_now_ms() -> i64 {
    crate::clock::to_unix_ms(std::time::SystemTime::now()) as i64
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
