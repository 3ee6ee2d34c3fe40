//! The embedded backend: one sled database with five trees (the default; one host, no setup).
//!
//! | tree          | key                        | value (serde_json)   |
//! |---------------|----------------------------|----------------------|
//! | `renders`     | render id (`task_…`)       | [`RenderRecord`]     |
//! | `idempotency` | principal `\0` key         | [`IdempotencyEntry`] |
//! | `assets`      | asset id (`a_…`)           | [`AssetRecord`]      |
//! | `session_epochs` | principal               | epoch, `u64` big-endian |
//! | `server_secrets` | name                    | the secret's bytes   |
//!
//! sled makes a write durable only at `flush` (it flushes in the background every 500 ms);
//! callers flush ([`super::Store::flush`]) after every write a client may rely on.

use std::path::Path;

use super::{
    AssetRecord, Change, IdempotencyEntry, Inserted, NewKey, RenderRecord, StoreError, Updated,
    all_in, decode, encode, update_in,
};

/// Handle to the sled database (cheap to clone).
#[derive(Clone, Debug)]
pub(super) struct SledStore {
    pub(super) db: sled::Db,
    renders: sled::Tree,
    idempotency: sled::Tree,
    assets: sled::Tree,
    session_epochs: sled::Tree,
    server_secrets: sled::Tree,
}

impl SledStore {
    pub(super) fn open(dir: &Path) -> Result<SledStore, StoreError> {
        let db = sled::Config::new().path(dir).open().map_err(|e| match e {
            sled::Error::Io(io) if io.to_string().contains("could not acquire lock") => {
                StoreError::Locked {
                    path: dir.to_path_buf(),
                }
            }
            other => StoreError::Sled(other),
        })?;
        Ok(SledStore {
            renders: db.open_tree("renders")?,
            idempotency: db.open_tree("idempotency")?,
            assets: db.open_tree("assets")?,
            session_epochs: db.open_tree("session_epochs")?,
            server_secrets: db.open_tree("server_secrets")?,
            db,
        })
    }

    pub(super) fn flush(&self) -> Result<(), StoreError> {
        self.db.flush()?;
        Ok(())
    }

    pub(super) fn get_render(&self, id: &str) -> Result<Option<RenderRecord>, StoreError> {
        self.renders
            .get(id.as_bytes())?
            .map(|v| decode(id, &v))
            .transpose()
    }

    pub(super) fn put_render(&self, rec: &RenderRecord) -> Result<(), StoreError> {
        self.renders.insert(rec.id.as_bytes(), encode(rec)?)?;
        Ok(())
    }

    /// The record and its idempotency key in one sled transaction: the key is taken only if
    /// it is free or older than `key.stale_before`.
    pub(super) fn insert_render(
        &self,
        rec: &RenderRecord,
        key: Option<&NewKey<'_>>,
    ) -> Result<Inserted, StoreError> {
        use sled::Transactional;
        use sled::transaction::{ConflictableTransactionError, TransactionError};
        let value = encode(rec)?;
        let entry = match key {
            Some(k) => Some((
                idem_key(k.principal, k.key),
                encode(&k.entry)?,
                k.stale_before,
            )),
            None => None,
        };
        let out = (&self.renders, &self.idempotency).transaction(|(renders, idem)| {
            if let Some((ik, v, stale_before)) = &entry {
                if let Some(old) = idem.get(ik)? {
                    let old: IdempotencyEntry =
                        decode("idempotency", &old).map_err(ConflictableTransactionError::Abort)?;
                    if old.created_at >= *stale_before {
                        return Ok(Inserted::KeyTaken(old));
                    }
                }
                idem.insert(ik.as_slice(), v.as_slice())?;
            }
            renders.insert(rec.id.as_bytes(), value.as_slice())?;
            Ok(Inserted::Created)
        });
        out.map_err(|e| match e {
            TransactionError::Abort(e) => e,
            TransactionError::Storage(e) => StoreError::Sled(e),
        })
    }

    pub(super) fn delete_render(&self, id: &str) -> Result<(), StoreError> {
        self.renders.remove(id.as_bytes())?;
        Ok(())
    }

    pub(super) fn update_render<T, E>(
        &self,
        id: &str,
        f: impl FnMut(&mut RenderRecord) -> Result<Change<T>, E>,
    ) -> Result<Option<Updated<RenderRecord, T>>, E>
    where
        E: From<StoreError>,
    {
        update_in(&self.renders, id, f)
    }

    pub(super) fn renders(&self) -> Result<Vec<RenderRecord>, StoreError> {
        all_in(&self.renders, "render")
    }

    /// The newest `limit` renders (of `principal`, or everyone's), newest first: render ids
    /// are ULIDs, so the tree's reverse order is newest first.
    pub(super) fn recent_renders(
        &self,
        principal: Option<&str>,
        limit: usize,
    ) -> Result<Vec<RenderRecord>, StoreError> {
        let mut out = Vec::new();
        for entry in self.renders.iter().rev() {
            if out.len() >= limit {
                break;
            }
            let (key, value) = entry?;
            let key = String::from_utf8_lossy(&key);
            match decode::<RenderRecord>(&key, &value) {
                Ok(r) if principal.is_none_or(|p| r.principal == p) => out.push(r),
                Ok(_) => {}
                Err(e) => tracing::error!(error = %e, "skipping undecodable render record"),
            }
        }
        Ok(out)
    }

    pub(super) fn get_idempotency(
        &self,
        principal: &str,
        key: &str,
    ) -> Result<Option<IdempotencyEntry>, StoreError> {
        self.idempotency
            .get(idem_key(principal, key))?
            .map(|v| decode(key, &v))
            .transpose()
    }

    pub(super) fn put_idempotency(
        &self,
        principal: &str,
        key: &str,
        entry: &IdempotencyEntry,
    ) -> Result<(), StoreError> {
        self.idempotency
            .insert(idem_key(principal, key), encode(entry)?)?;
        Ok(())
    }

    pub(super) fn remove_idempotency_before(&self, cutoff_ms: u64) -> Result<usize, StoreError> {
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

    pub(super) fn idempotency_len(&self) -> usize {
        self.idempotency.len()
    }

    pub(super) fn get_asset(&self, id: &str) -> Result<Option<AssetRecord>, StoreError> {
        self.assets
            .get(id.as_bytes())?
            .map(|v| decode(id, &v))
            .transpose()
    }

    pub(super) fn put_asset(&self, rec: &AssetRecord) -> Result<(), StoreError> {
        self.assets.insert(rec.id.as_bytes(), encode(rec)?)?;
        Ok(())
    }

    pub(super) fn delete_asset(&self, id: &str) -> Result<bool, StoreError> {
        Ok(self.assets.remove(id.as_bytes())?.is_some())
    }

    pub(super) fn assets(&self) -> Result<Vec<AssetRecord>, StoreError> {
        all_in(&self.assets, "asset")
    }

    /// One in-memory B-tree read (a principal without an entry is at epoch 0).
    pub(super) fn session_epoch(&self, principal: &str) -> Result<u64, StoreError> {
        Ok(self
            .session_epochs
            .get(principal.as_bytes())?
            .map_or(0, |v| epoch_of(&v)))
    }

    /// Adds one atomically, then flushes: durable on return.
    pub(super) fn bump_session_epoch(&self, principal: &str) -> Result<u64, StoreError> {
        let new = self
            .session_epochs
            .update_and_fetch(principal.as_bytes(), |old| {
                let next = old.map_or(0, epoch_of).checked_add(1).unwrap_or(1);
                Some(next.to_be_bytes().to_vec())
            })?
            .map_or(0, |v| epoch_of(&v));
        self.db.flush()?;
        Ok(new)
    }
}

impl SledStore {
    /// The secret `name`, or `fresh` stored (and flushed) now when there is none.
    pub(super) fn server_secret(&self, name: &str, fresh: &[u8]) -> Result<Vec<u8>, StoreError> {
        if let Some(v) = self.server_secrets.get(name.as_bytes())? {
            return Ok(v.to_vec());
        }
        match self
            .server_secrets
            .compare_and_swap(name.as_bytes(), None::<&[u8]>, Some(fresh))?
        {
            Ok(()) => {
                self.db.flush()?;
                Ok(fresh.to_vec())
            }
            // Another thread stored one first: that one.
            Err(e) => Ok(e
                .current
                .map(|v| v.to_vec())
                .unwrap_or_else(|| fresh.to_vec())),
        }
    }
}

/// A stored epoch; a malformed value reads as `u64::MAX`, which no issued cookie carries.
fn epoch_of(v: &[u8]) -> u64 {
    <[u8; 8]>::try_from(v).map_or(u64::MAX, u64::from_be_bytes)
}

fn idem_key(principal: &str, key: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(principal.len() + key.len() + 1);
    k.extend_from_slice(principal.as_bytes());
    k.push(0);
    k.extend_from_slice(key.as_bytes());
    k
}
