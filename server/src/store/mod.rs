//! The durable store: one sled database with three trees. It is the truth about every render;
//! the worker pool and every read path derive their state from it. An MCP extension (see
//! [`crate::mcp::extension`]) may open trees of its own in the same database
//! ([`Store::open_tree`]) and keep JSON records there with [`update_in`] and [`all_in`].
//!
//! | tree          | key                        | value (serde_json)   |
//! |---------------|----------------------------|----------------------|
//! | `renders`     | render id (`task_…`)       | [`RenderRecord`]     |
//! | `idempotency` | principal `\0` key         | [`IdempotencyEntry`] |
//! | `assets`      | asset id (`a_…`)           | [`AssetRecord`]      |
//!
//! The record types are in `model.rs` (re-exported here); this file is the persistence.
//!
//! sled makes a write durable only at `flush` (it flushes in the background every 500 ms).
//! Callers flush ([`Store::flush`]) after every write a client may rely on, before answering.
//! Progress updates are the exception: losing the last few is harmless.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

mod model;

pub use model::*;
/// Store faults.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "the database at {} is locked by another process (is `vidforge serve` running with this \
         data dir? stop it, or use `vidforge assets add --server URL`)",
        path.display()
    )]
    Locked { path: PathBuf },
    #[error("database error: {0}")]
    Sled(#[from] sled::Error),
    #[error("corrupt record {key}: {source}")]
    Decode {
        key: String,
        source: serde_json::Error,
    },
    #[error("cannot encode record: {0}")]
    Encode(serde_json::Error),
}

/// What an update closure decided.
pub enum Change<T> {
    /// Store the modified record.
    Write(T),
    /// Leave the stored record as it was (modifications are discarded).
    Keep(T),
}

/// The result of [`Store::update_render`] and [`update_in`].
pub struct Updated<R, T> {
    /// The record as stored after the update.
    pub record: R,
    pub value: T,
    /// Whether a write happened.
    pub written: bool,
}

/// Handle to the sled database (cheap to clone).
#[derive(Clone, Debug)]
pub struct Store {
    db: sled::Db,
    renders: sled::Tree,
    idempotency: sled::Tree,
    assets: sled::Tree,
}

impl Store {
    /// Opens (or creates) the database in `dir`. Fails with [`StoreError::Locked`] when another
    /// process holds it.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        let db = sled::Config::new().path(dir).open().map_err(|e| match e {
            sled::Error::Io(io) if io.to_string().contains("could not acquire lock") => {
                StoreError::Locked {
                    path: dir.to_path_buf(),
                }
            }
            other => StoreError::Sled(other),
        })?;
        Ok(Store {
            renders: db.open_tree("renders")?,
            idempotency: db.open_tree("idempotency")?,
            assets: db.open_tree("assets")?,
            db,
        })
    }

    /// Opens (or creates) a further tree in the same database, for an MCP extension's own
    /// records. Its name must not be one of the store's own (`renders`, `idempotency`,
    /// `assets`); [`Store::flush`] makes its writes durable too.
    pub fn open_tree(&self, name: &str) -> Result<sled::Tree, StoreError> {
        Ok(self.db.open_tree(name)?)
    }

    /// Makes every previous write durable.
    pub fn flush(&self) -> Result<(), StoreError> {
        self.db.flush()?;
        Ok(())
    }

    // ---- renders ----

    pub fn get_render(&self, id: &str) -> Result<Option<RenderRecord>, StoreError> {
        self.renders
            .get(id.as_bytes())?
            .map(|v| decode(id, &v))
            .transpose()
    }

    /// Inserts or replaces a record (not flushed).
    pub fn put_render(&self, rec: &RenderRecord) -> Result<(), StoreError> {
        self.renders.insert(rec.id.as_bytes(), encode(rec)?)?;
        Ok(())
    }

    pub fn delete_render(&self, id: &str) -> Result<(), StoreError> {
        self.renders.remove(id.as_bytes())?;
        Ok(())
    }

    /// Read-modify-write of one record with compare-and-swap, retried on concurrent change, so
    /// worker progress, decisions and cancellations never overwrite each other. `f` may run more
    /// than once. Returns `None` when the record does not exist. Not flushed.
    pub fn update_render<T, E>(
        &self,
        id: &str,
        f: impl FnMut(&mut RenderRecord) -> Result<Change<T>, E>,
    ) -> Result<Option<Updated<RenderRecord, T>>, E>
    where
        E: From<StoreError>,
    {
        update_in(&self.renders, id, f)
    }

    /// Every render record (decode errors are logged and skipped so one bad record cannot
    /// stop the service).
    pub fn renders(&self) -> Result<Vec<RenderRecord>, StoreError> {
        all_in(&self.renders, "render")
    }

    // ---- idempotency ----

    fn idem_key(principal: &str, key: &str) -> Vec<u8> {
        let mut k = Vec::with_capacity(principal.len() + key.len() + 1);
        k.extend_from_slice(principal.as_bytes());
        k.push(0);
        k.extend_from_slice(key.as_bytes());
        k
    }

    pub fn get_idempotency(
        &self,
        principal: &str,
        key: &str,
    ) -> Result<Option<IdempotencyEntry>, StoreError> {
        self.idempotency
            .get(Self::idem_key(principal, key))?
            .map(|v| decode(key, &v))
            .transpose()
    }

    /// Inserts or replaces (not flushed).
    pub fn put_idempotency(
        &self,
        principal: &str,
        key: &str,
        entry: &IdempotencyEntry,
    ) -> Result<(), StoreError> {
        self.idempotency
            .insert(Self::idem_key(principal, key), encode(entry)?)?;
        Ok(())
    }

    /// Removes every idempotency entry created before `cutoff_ms`; returns how many.
    pub fn remove_idempotency_before(&self, cutoff_ms: u64) -> Result<usize, StoreError> {
        let mut removed = 0;
        for item in self.idempotency.iter() {
            let (k, v) = item?;
            let stale = match decode::<IdempotencyEntry>("idempotency", &v) {
                Ok(e) => e.created_at < cutoff_ms,
                Err(_) => true,
            };
            if stale {
                self.idempotency.remove(k)?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Number of idempotency entries (diagnostics and tests).
    pub fn idempotency_len(&self) -> usize {
        self.idempotency.len()
    }

    // ---- assets ----

    pub fn get_asset(&self, id: &str) -> Result<Option<AssetRecord>, StoreError> {
        self.assets
            .get(id.as_bytes())?
            .map(|v| decode(id, &v))
            .transpose()
    }

    /// Inserts or replaces (not flushed).
    pub fn put_asset(&self, rec: &AssetRecord) -> Result<(), StoreError> {
        self.assets.insert(rec.id.as_bytes(), encode(rec)?)?;
        Ok(())
    }

    /// Removes an asset record (not flushed); whether it existed.
    pub fn delete_asset(&self, id: &str) -> Result<bool, StoreError> {
        Ok(self.assets.remove(id.as_bytes())?.is_some())
    }

    /// Every asset record.
    pub fn assets(&self) -> Result<Vec<AssetRecord>, StoreError> {
        all_in(&self.assets, "asset")
    }
}

/// Compare-and-swap update of one JSON record in `tree` (see [`Store::update_render`]); for
/// any tree of JSON records keyed by id, an extension's own included. Not flushed.
pub fn update_in<R, T, E>(
    tree: &sled::Tree,
    id: &str,
    mut f: impl FnMut(&mut R) -> Result<Change<T>, E>,
) -> Result<Option<Updated<R, T>>, E>
where
    R: Serialize + for<'de> Deserialize<'de>,
    E: From<StoreError>,
{
    loop {
        let Some(old) = tree.get(id.as_bytes()).map_err(StoreError::from)? else {
            return Ok(None);
        };
        let mut rec: R = decode(id, &old)?;
        match f(&mut rec)? {
            Change::Keep(value) => {
                let record = decode(id, &old)?;
                return Ok(Some(Updated {
                    record,
                    value,
                    written: false,
                }));
            }
            Change::Write(value) => {
                let new = encode(&rec)?;
                let swapped = tree
                    .compare_and_swap(id.as_bytes(), Some(&old), Some(new))
                    .map_err(StoreError::from)?;
                if swapped.is_ok() {
                    return Ok(Some(Updated {
                        record: rec,
                        value,
                        written: true,
                    }));
                }
            }
        }
    }
}

/// Every record of `tree`; decode errors are logged and skipped so one bad record cannot stop
/// the service. `what` names the kind of record in that log line.
pub fn all_in<R: for<'de> Deserialize<'de>>(
    tree: &sled::Tree,
    what: &str,
) -> Result<Vec<R>, StoreError> {
    let mut out = Vec::new();
    for item in tree.iter() {
        let (k, v) = item?;
        let key = String::from_utf8_lossy(&k).into_owned();
        match decode::<R>(&key, &v) {
            Ok(r) => out.push(r),
            Err(e) => tracing::error!(error = %e, "skipping undecodable {what} record"),
        }
    }
    Ok(out)
}

fn encode<T: Serialize>(v: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(v).map_err(StoreError::Encode)
}

fn decode<T: for<'de> Deserialize<'de>>(key: &str, v: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(v).map_err(|e| StoreError::Decode {
        key: key.to_string(),
        source: e,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::ErrorCode;

    pub(crate) fn sample(id: &str) -> RenderRecord {
        RenderRecord {
            id: id.into(),
            principal: "alice".into(),
            args: RenderArgs {
                source_asset: "a_X".into(),
                output_format: OutputFormat::Webm,
                resolution: Resolution::P4k,
                watermark: Some(WatermarkArgs {
                    image_asset: "a_Y".into(),
                    position: "center".into(),
                    opacity: 0.6,
                }),
                idempotency_key: Some("k1".into()),
            },
            original_arguments: serde_json::json!({"source_asset_uri": "vidforge://assets/a_X", "idempotency_key": "k1"}),
            state: RenderState::Failed,
            progress: Some(ProgressSnapshot::new(ProgressStage::Rendering, 5, Some(10))),
            created_at: 1,
            updated_at: 2,
            approval: None,
            preview_path: None,
            outcome: Some(Outcome::Error {
                code: ErrorCode::WatermarkRejected,
                message: "m".into(),
                reason: Some("r".into()),
                field: Some("watermark".into()),
                retry_after_ms: None,
                temporary: None,
            }),
            cancel_requested: false,
            finished_at: Some(3),
            result_deleted: false,
            attempts: 1,
            crashes: 0,
        }
    }

    #[test]
    fn records_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let rec = sample("task_1");
        {
            let s = Store::open(dir.path()).unwrap();
            s.put_render(&rec).unwrap();
            s.flush().unwrap();
        }
        let s = Store::open(dir.path()).unwrap();
        assert_eq!(s.get_render("task_1").unwrap(), Some(rec.clone()));
        let json = serde_json::to_value(&rec).unwrap();
        assert_eq!(json["state"], "failed");
        assert_eq!(json["args"]["resolution"], "4k");
        assert_eq!(json["outcome"]["code"], "watermark_rejected");
        assert_eq!(
            rec.repair_arguments(),
            serde_json::json!({"source_asset_uri": "vidforge://assets/a_X"})
        );
    }

    #[test]
    fn second_open_reports_lock() {
        let dir = tempfile::tempdir().unwrap();
        let _s = Store::open(dir.path()).unwrap();
        // sled allows re-opening inside one process via a shared lock file, so spawn the check
        // through the lock semantics: a second sled::open in-process fails to lock too.
        match Store::open(dir.path()) {
            Err(StoreError::Locked { .. }) => {}
            other => panic!("expected Locked, got {other:?}"),
        }
    }

    #[test]
    fn update_is_compare_and_swap() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path()).unwrap();
        s.put_render(&sample("task_1")).unwrap();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        s.update_render::<(), StoreError>("task_1", |r| {
                            r.attempts += 1;
                            Ok(Change::Write(()))
                        })
                        .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(s.get_render("task_1").unwrap().unwrap().attempts, 201);
        let kept = s
            .update_render::<u32, StoreError>("task_1", |r| {
                r.attempts = 0;
                Ok(Change::Keep(7))
            })
            .unwrap()
            .unwrap();
        assert!(!kept.written);
        assert_eq!(kept.record.attempts, 201);
        assert!(
            s.update_render::<(), StoreError>("nope", |_| Ok(Change::Keep(())))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn idempotency_entries_expire() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path()).unwrap();
        let e = |t| IdempotencyEntry {
            render_id: "task_1".into(),
            args_hash: "h".into(),
            created_at: t,
        };
        s.put_idempotency("alice", "k", &e(10)).unwrap();
        s.put_idempotency("bob", "k", &e(100)).unwrap();
        assert_eq!(s.get_idempotency("alice", "k").unwrap(), Some(e(10)));
        assert_eq!(s.get_idempotency("carol", "k").unwrap(), None);
        assert_eq!(s.remove_idempotency_before(50).unwrap(), 1);
        assert_eq!(s.get_idempotency("alice", "k").unwrap(), None);
        assert!(s.get_idempotency("bob", "k").unwrap().is_some());
    }
}
