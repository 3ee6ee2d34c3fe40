//! Uploaded assets: streamed to disk under a temporary name with the size limit enforced while
//! streaming, probed on arrival (PNG by signature and a full decode, video by the media
//! prober), then published as `assets/<id>/<file name>` (renamed into place, or uploaded to
//! the bucket and kept as this node's cached copy: `media_store`) and only then recorded
//! durably. A rejected upload leaves nothing behind.

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use tokio::io::AsyncWriteExt;

use crate::clock::SharedClock;
use crate::engine::{Prober, SourceLimits};
use crate::error::ServiceError;
use crate::ids;
use crate::media_store::MediaStore;
use crate::store::{AssetKind, AssetProbe, AssetRecord, RenderRecord, Store};
use crate::uri;

/// What the PNG decoder may allocate for itself while an upload is checked (it needs a few
/// rows; the picture itself is never held).
const PNG_DECODER_BYTES: usize = 16 << 20;

/// Prefix of in-flight upload files inside the assets directory.
const PARTIAL_PREFIX: &str = ".partial-";
/// The eight-byte PNG signature.
const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];
/// What an upload may be (`Config::upload_limits`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UploadLimits {
    /// Largest upload in bytes (enforced while streaming).
    pub max_bytes: u64,
    /// Largest source video picture (checked before decoding).
    pub source: SourceLimits,
    /// Largest watermark PNG side (checked from its header).
    pub max_watermark_side: u32,
    /// Uploads probed at once.
    pub concurrent_probes: usize,
}

/// Asset ingestion and lookup over the store.
#[derive(Clone)]
pub struct AssetCatalog {
    store: Store,
    media: MediaStore,
    /// Where uploads are received (`assets/` under the local media root).
    dir: PathBuf,
    limits: UploadLimits,
    /// Bounds the probes running at once (each may decode a frame).
    probes: Arc<tokio::sync::Semaphore>,
    prober: Arc<dyn Prober>,
    clock: SharedClock,
}

impl AssetCatalog {
    pub fn new(
        store: Store,
        media: MediaStore,
        dir: PathBuf,
        limits: UploadLimits,
        prober: Arc<dyn Prober>,
        clock: SharedClock,
    ) -> Self {
        AssetCatalog {
            store,
            media,
            dir,
            limits,
            probes: Arc::new(tokio::sync::Semaphore::new(limits.concurrent_probes.max(1))),
            prober,
            clock,
        }
    }

    /// Deletes upload temporaries left by a crash: those nothing has written to for
    /// `min_age` (zero: all of them, when no other process shares the directory).
    pub fn remove_partial_uploads(&self, min_age: std::time::Duration) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for e in entries.flatten() {
            if !e.file_name().to_string_lossy().starts_with(PARTIAL_PREFIX) {
                continue;
            }
            let idle = e
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .unwrap_or_default();
            if idle >= min_age {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }

    /// The asset behind a `vidforge://assets/<id>` URI or a bare id, if `principal` owns it.
    /// Another principal's asset is reported exactly like a missing one (`None`).
    pub fn lookup(
        &self,
        principal: &str,
        uri_or_id: &str,
    ) -> Result<Option<AssetRecord>, ServiceError> {
        let id = uri::parse_asset_uri(uri_or_id).unwrap_or(uri_or_id);
        if !ids::is_well_formed(id, ids::ASSET_ID_PREFIX) {
            return Ok(None);
        }
        Ok(self
            .store
            .get_asset(id)?
            .filter(|a| a.principal == principal))
    }

    /// Deletes an asset: the record first (flushed, so a crash cannot resurrect it), then its
    /// files. Callers first make sure no unfinished render uses it.
    pub fn remove(&self, rec: &AssetRecord) -> Result<(), ServiceError> {
        self.store.delete_asset(&rec.id)?;
        self.store.flush()?;
        if let Err(e) = self
            .media
            .remove_dir_blocking(&format!("assets/{}", rec.id))
        {
            // The orphan sweep retries it.
            tracing::warn!(asset_id = %rec.id, error = %e, "cannot delete asset files");
        }
        tracing::info!(asset_id = %rec.id, "asset deleted");
        Ok(())
    }

    /// Asset directories without a record, older than `min_age` (so an upload that is just
    /// being recorded is never touched): what a crash between the two steps of
    /// [`AssetCatalog::remove`] leaves. Returns how many it deleted.
    pub fn remove_orphans(&self, min_age: std::time::Duration) -> Result<usize, ServiceError> {
        let names: Vec<String> = self
            .media
            .list_dirs_blocking("assets")?
            .into_iter()
            .filter(|(name, age_ms)| {
                ids::is_well_formed(name, ids::ASSET_ID_PREFIX)
                    && u128::from(*age_ms) >= min_age.as_millis()
            })
            .map(|(name, _)| name)
            .collect();
        let mut removed = 0;
        // Their records read a sweep's batch at a time (PostgreSQL: one statement each).
        for names in names.chunks(crate::sweep::BATCH) {
            let named: HashSet<String> = self.store.assets_named(names)?.into_iter().collect();
            for name in names.iter().filter(|n| !named.contains(*n)) {
                if self
                    .media
                    .remove_dir_blocking(&format!("assets/{name}"))
                    .is_ok()
                {
                    removed += 1;
                }
            }
        }
        Ok(removed)
    }

    /// Streams `stream` into a new asset owned by `principal`.
    pub async fn add_stream<S, E>(
        &self,
        principal: &str,
        file_name: &str,
        stream: S,
    ) -> Result<AssetRecord, ServiceError>
    where
        S: Stream<Item = Result<Bytes, E>> + Send,
        E: std::fmt::Display,
    {
        tokio::fs::create_dir_all(&self.dir).await?;
        let id = ids::new_asset_id();
        // Keep the extension so the prober gets the same format hint the file will have.
        let partial = self.dir.join(format!(
            "{PARTIAL_PREFIX}{id}-{}",
            sanitize_file_name(file_name, AssetKind::Video)
        ));
        let written = match self.write_limited(&partial, stream).await {
            Ok(n) => n,
            Err(e) => {
                let _ = tokio::fs::remove_file(&partial).await;
                return Err(e);
            }
        };
        match self
            .finish(principal, file_name, &id, &partial, written)
            .await
        {
            Ok(rec) => Ok(rec),
            Err(e) => {
                let _ = tokio::fs::remove_file(&partial).await;
                let _ = tokio::fs::remove_dir_all(self.dir.join(&id)).await;
                if self.media.is_object() {
                    let (media, dir) = (self.media.clone(), format!("assets/{id}"));
                    let _ =
                        tokio::task::spawn_blocking(move || media.remove_dir_blocking(&dir)).await;
                }
                Err(e)
            }
        }
    }

    /// Adds a local file (streamed, so the same limit and checks apply).
    pub async fn add_path(
        &self,
        principal: &str,
        path: &Path,
        file_name: Option<&str>,
    ) -> Result<AssetRecord, ServiceError> {
        let file = tokio::fs::File::open(path)
            .await
            .map_err(|e| ServiceError::AssetInvalid {
                reason: format!("cannot open {}: {e}", path.display()),
            })?;
        let name = file_name
            .map(str::to_string)
            .or_else(|| path.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_default();
        let stream = tokio_util::io::ReaderStream::with_capacity(file, 256 * 1024);
        self.add_stream(principal, &name, stream).await
    }

    async fn write_limited<S, E>(&self, partial: &Path, stream: S) -> Result<u64, ServiceError>
    where
        S: Stream<Item = Result<Bytes, E>> + Send,
        E: std::fmt::Display,
    {
        let mut file = tokio::fs::File::create(partial).await?;
        let mut written: u64 = 0;
        let mut stream = std::pin::pin!(stream);
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| ServiceError::AssetInvalid {
                reason: format!("the upload was interrupted: {e}"),
            })?;
            written += chunk.len() as u64;
            if written > self.limits.max_bytes {
                return Err(ServiceError::AssetTooLarge {
                    limit_bytes: self.limits.max_bytes,
                });
            }
            file.write_all(&chunk).await?;
        }
        if written == 0 {
            return Err(ServiceError::AssetInvalid {
                reason: "the upload is empty".into(),
            });
        }
        file.flush().await?;
        // The record is flushed after this; the file must be on disk before it.
        file.sync_all().await?;
        Ok(written)
    }

    async fn finish(
        &self,
        principal: &str,
        file_name: &str,
        id: &str,
        partial: &Path,
        size_bytes: u64,
    ) -> Result<AssetRecord, ServiceError> {
        let probe_path = partial.to_path_buf();
        let prober = self.prober.clone();
        let shown_name = file_name.to_string();
        let limits = self.limits;
        let _permit = self
            .probes
            .acquire()
            .await
            .map_err(|e| ServiceError::Internal(format!("probe limiter closed: {e}")))?;
        let (kind, probe) = tokio::task::spawn_blocking(move || {
            classify(&probe_path, &shown_name, &limits, &*prober)
        })
        .await
        .map_err(|e| ServiceError::Internal(format!("probe task failed: {e}")))??;
        let name = sanitize_file_name(file_name, kind);
        let rel: PathBuf = ["assets", id, name.as_str()].iter().collect();
        // Complete where media lives before the record names it.
        let path = self.media.publish_upload(partial, &rel).await?;
        let rec = AssetRecord {
            id: id.to_string(),
            uri: uri::asset_uri(id),
            principal: principal.to_string(),
            kind,
            file_name: name,
            path,
            size_bytes,
            created_at: self.clock.now_ms(),
            probe,
        };
        let store = self.store.clone();
        let to_store = rec.clone();
        tokio::task::spawn_blocking(move || {
            store.put_asset(&to_store)?;
            store.flush()
        })
        .await
        .map_err(|e| ServiceError::Internal(format!("store task failed: {e}")))??;
        tracing::info!(
            asset_id = %rec.id,
            principal = %rec.principal,
            kind = rec.kind.as_str(),
            size_bytes,
            "asset added"
        );
        Ok(rec)
    }
}

/// PNG by signature (fully decoded to prove it is readable), otherwise a video per the prober.
/// Reasons name the uploader's file, not the temporary path.
fn classify(
    path: &Path,
    shown_name: &str,
    limits: &UploadLimits,
    prober: &dyn Prober,
) -> Result<(AssetKind, AssetProbe), ServiceError> {
    let mut head = [0u8; 8];
    let n = std::fs::File::open(path)?.read(&mut head)?;
    if n == 8 && head == PNG_SIGNATURE {
        return probe_png(path, limits.max_watermark_side).map(|p| (AssetKind::Image, p));
    }
    let probe =
        prober
            .probe_video(path, &limits.source)
            .map_err(|e| ServiceError::AssetInvalid {
                reason: e.message.replace(&path.display().to_string(), shown_name),
            })?;
    if probe.width.is_none() {
        return Err(ServiceError::AssetInvalid {
            reason: "the file has no video stream".into(),
        });
    }
    Ok((AssetKind::Video, probe))
}

/// Checks a PNG's size from its header, then decodes it row by row (one row in memory, the
/// decoder's own allocations capped) to prove the image data is readable.
fn probe_png(path: &Path, max_side: u32) -> Result<AssetProbe, ServiceError> {
    let invalid = |reason: String| ServiceError::AssetInvalid { reason };
    let file = std::io::BufReader::new(std::fs::File::open(path)?);
    let mut decoder = png::Decoder::new_with_limits(
        file,
        png::Limits {
            bytes: PNG_DECODER_BYTES,
        },
    );
    decoder.set_transformations(png::Transformations::EXPAND);
    let mut reader = decoder
        .read_info()
        .map_err(|e| invalid(format!("unreadable PNG header: {e}")))?;
    let (w, h) = (reader.info().width, reader.info().height);
    if w == 0 || h == 0 || w > max_side || h > max_side {
        return Err(invalid(format!(
            "PNG is {w}x{h}; watermarks must be 1..={max_side} pixels per side"
        )));
    }
    let mut rows = 0u32;
    while let Some(_row) = reader
        .next_row()
        .map_err(|e| invalid(format!("corrupt PNG image data: {e}")))?
    {
        rows += 1;
    }
    if rows == 0 {
        return Err(invalid("the PNG has no image rows".into()));
    }
    Ok(AssetProbe {
        width: Some(w),
        height: Some(h),
        format: Some("png".into()),
        ..AssetProbe::default()
    })
}

/// The assets a render uses: its source and, if it has one, its watermark image.
pub fn used_by(rec: &RenderRecord) -> impl Iterator<Item = &str> {
    std::iter::once(rec.args.source_asset.as_str())
        .chain(rec.args.watermark.as_ref().map(|w| w.image_asset.as_str()))
}

/// The unfinished renders that use asset `id`: while any does, the asset is kept. Reads the
/// store's index of unfinished renders (for the CLI's direct mode; the server asks its own
/// in-memory index of them).
pub fn in_use_by(store: &Store, id: &str) -> Result<Vec<String>, ServiceError> {
    Ok(store
        .unfinished_renders()?
        .into_iter()
        .filter(|r| used_by(r).any(|a| a == id))
        .map(|r| r.id)
        .collect())
}

/// Keeps a safe base name (letters, digits, `.`, `_`, `-`; at most 100 characters); falls back
/// to `upload.<ext>` by kind.
pub fn sanitize_file_name(name: &str, kind: AssetKind) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or("");
    let cleaned: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(100)
        .collect();
    let cleaned = cleaned.trim_start_matches('.').to_string();
    if cleaned.is_empty() || cleaned.chars().all(|c| c == '_' || c == '.') {
        match kind {
            AssetKind::Image => "upload.png".into(),
            AssetKind::Video => "upload.bin".into(),
        }
    } else {
        cleaned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_sanitised() {
        assert_eq!(
            sanitize_file_name("../../etc/passwd", AssetKind::Video),
            "passwd"
        );
        assert_eq!(
            sanitize_file_name("my clip (1).mp4", AssetKind::Video),
            "my_clip__1_.mp4"
        );
        assert_eq!(sanitize_file_name("", AssetKind::Image), "upload.png");
        assert_eq!(sanitize_file_name("..", AssetKind::Video), "upload.bin");
        assert_eq!(sanitize_file_name(".hidden", AssetKind::Video), "hidden");
    }
}
