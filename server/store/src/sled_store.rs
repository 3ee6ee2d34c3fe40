//! The embedded backend: one sled database with ten trees (the default; one host, no setup).
//!
//! | tree          | key                        | value (serde_json)   |
//! |---------------|----------------------------|----------------------|
//! | `renders`     | render id (`task_…`)       | [`RenderRecord`] (`sled_renders.rs`) |
//! | `render_index` | see `sled_renders.rs`     | empty: the key is the entry |
//! | `idempotency` | principal `\0` key         | [`IdempotencyEntry`] |
//! | `assets`      | asset id (`a_…`)           | [`AssetRecord`]      |
//! | `session_epochs` | principal               | epoch, `u64` big-endian |
//! | `server_secrets` | name                    | the secret's bytes   |
//! | `webhooks_pending` | event id (`msg_…`)    | [`OutboxEvent`] not yet delivered or dropped |
//! | `webhooks_done`  | event id (`msg_…`)      | [`OutboxEvent`] delivered or dropped (swept) |
//! | `segments`     | render id `\0` index     | [`crate::SegmentRecord`] (`sled_segments.rs`) |
//! | `expiry`       | see `sled_expiry.rs`      | empty: what expires besides renders, by time |
//!
//! sled makes a write durable only at `flush` (it flushes in the background every 500 ms);
//! callers flush ([`crate::Store::flush`]) after every write a client may rely on.

use std::path::Path;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sled::Transactional;
use sled::transaction::TransactionError;

use crate::clock::SharedClock;
use crate::sled_keys::{Expiring, expiry_key, webhook_time};
use crate::sled_segments::SegmentTree;
use crate::update::{decode, encode};
use crate::{AssetRecord, IdempotencyEntry, OutboxEvent, OutboxStatus, StoreError};

/// Handle to the sled database (cheap to clone).
#[derive(Clone, Debug)]
pub(crate) struct SledStore {
    pub(crate) db: sled::Db,
    pub(crate) renders: sled::Tree,
    /// The renders' indexes (`sled_renders.rs`), written in each record write's transaction.
    pub(crate) render_index: sled::Tree,
    pub(crate) idempotency: sled::Tree,
    pub(crate) assets: sled::Tree,
    session_epochs: sled::Tree,
    server_secrets: sled::Tree,
    pub(crate) webhooks_pending: sled::Tree,
    pub(crate) webhooks_done: sled::Tree,
    /// When assets, idempotency keys and finished webhook events expire (`sled_expiry.rs`).
    pub(crate) expiry: sled::Tree,
    /// Leases on pending events: one process delivers, so they live in its memory (a
    /// restart ends every attempt in flight, and their leases with it).
    webhook_leases: Arc<Mutex<HashMap<String, u64>>>,
    pub(crate) segments: SegmentTree,
}

impl SledStore {
    /// Opens (or creates) the database in `dir`, without building the render indexes (that is
    /// [`SledStore::open`], in `sled_open.rs`; tests of the build open with this). `clock`
    /// times the segments' leases.
    pub(crate) fn open_unbuilt(dir: &Path, clock: SharedClock) -> Result<SledStore, StoreError> {
        let db = sled::Config::new().path(dir).open().map_err(|e| match e {
            sled::Error::Io(io) if io.to_string().contains("could not acquire lock") => {
                StoreError::Locked {
                    path: dir.to_path_buf(),
                }
            }
            other => StoreError::Sled(other),
        })?;
        let store = SledStore {
            renders: db.open_tree("renders")?,
            render_index: db.open_tree("render_index")?,
            idempotency: db.open_tree("idempotency")?,
            assets: db.open_tree("assets")?,
            session_epochs: db.open_tree("session_epochs")?,
            server_secrets: db.open_tree("server_secrets")?,
            webhooks_pending: db.open_tree("webhooks_pending")?,
            webhooks_done: db.open_tree("webhooks_done")?,
            expiry: db.open_tree("expiry")?,
            webhook_leases: Arc::default(),
            segments: SegmentTree::open(&db, clock)?,
            db,
        };
        Ok(store)
    }

    pub(crate) fn flush(&self) -> Result<(), StoreError> {
        self.db.flush()?;
        Ok(())
    }

    pub(crate) fn get_idempotency(
        &self,
        principal: &str,
        key: &str,
    ) -> Result<Option<IdempotencyEntry>, StoreError> {
        self.idempotency
            .get(idem_key(principal, key))?
            .map(|v| decode(key, &v))
            .transpose()
    }

    pub(crate) fn put_idempotency(
        &self,
        principal: &str,
        key: &str,
        entry: &IdempotencyEntry,
    ) -> Result<(), StoreError> {
        let k = idem_key(principal, key);
        self.expiry.insert(
            expiry_key(Expiring::Idempotency, entry.created_at, &k),
            &[][..],
        )?;
        self.idempotency.insert(k, encode(entry)?)?;
        Ok(())
    }

    pub(crate) fn idempotency_len(&self) -> usize {
        self.idempotency.len()
    }

    pub(crate) fn get_asset(&self, id: &str) -> Result<Option<AssetRecord>, StoreError> {
        self.assets
            .get(id.as_bytes())?
            .map(|v| decode(id, &v))
            .transpose()
    }

    pub(crate) fn assets_named(&self, ids: &[String]) -> Result<Vec<String>, StoreError> {
        let mut out = Vec::new();
        for id in ids {
            if self.assets.contains_key(id.as_bytes())? {
                out.push(id.clone());
            }
        }
        Ok(out)
    }

    pub(crate) fn put_asset(&self, rec: &AssetRecord) -> Result<(), StoreError> {
        let id = rec.id.as_bytes();
        self.expiry
            .insert(expiry_key(Expiring::Asset, rec.created_at, id), &[][..])?;
        self.assets.insert(id, encode(rec)?)?;
        Ok(())
    }

    pub(crate) fn delete_asset(&self, id: &str) -> Result<bool, StoreError> {
        let Some(old) = self.assets.remove(id.as_bytes())? else {
            return Ok(false);
        };
        if let Ok(old) = decode::<AssetRecord>(id, &old) {
            self.expiry
                .remove(expiry_key(Expiring::Asset, old.created_at, id.as_bytes()))?;
        }
        Ok(true)
    }

    /// One in-memory B-tree read (a principal without an entry is at epoch 0).
    pub(crate) fn session_epoch(&self, principal: &str) -> Result<u64, StoreError> {
        Ok(self
            .session_epochs
            .get(principal.as_bytes())?
            .map_or(0, |v| epoch_of(&v)))
    }

    /// Adds one atomically, then flushes: durable on return.
    pub(crate) fn bump_session_epoch(&self, principal: &str) -> Result<u64, StoreError> {
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
    pub(crate) fn server_secret(&self, name: &str, fresh: &[u8]) -> Result<Vec<u8>, StoreError> {
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

pub(crate) fn idem_key(principal: &str, key: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(principal.len() + key.len() + 1);
    k.extend_from_slice(principal.as_bytes());
    k.push(0);
    k.extend_from_slice(key.as_bytes());
    k
}

/// The webhook outbox (`outbox.rs`): pending events in one tree, finished ones in
/// another, so claims read only what may be due.
impl SledStore {
    pub(crate) fn claim_webhooks(
        &self,
        _node: &str,
        now: u64,
        lease: Duration,
        limit: usize,
        skip: &[String],
    ) -> Result<Vec<OutboxEvent>, StoreError> {
        let mut leases = crate::sync::lock(&self.webhook_leases);
        let mut due = Vec::new();
        for item in self.webhooks_pending.iter() {
            let (key, value) = item?;
            let key = String::from_utf8_lossy(&key).into_owned();
            if leases.get(&key).is_some_and(|until| *until > now) {
                continue;
            }
            let event: OutboxEvent = match decode(&key, &value) {
                Ok(e) => e,
                Err(e) => {
                    tracing::error!(error = %e, "skipping undecodable webhook event");
                    continue;
                }
            };
            if event.next_attempt_at <= now && !skip.contains(&event.principal) {
                due.push(event);
            }
        }
        due.sort_by_key(|e| e.next_attempt_at);
        due.truncate(limit);
        for e in &due {
            leases.insert(e.id.clone(), now + lease.as_millis() as u64);
        }
        Ok(due)
    }

    /// Stores `event` as its attempt left it: still pending, or moved to the finished tree
    /// (one transaction), then flushed.
    pub(crate) fn finish_webhook_attempt(
        &self,
        _node: &str,
        event: &OutboxEvent,
    ) -> Result<bool, StoreError> {
        let value = encode(event)?;
        let key = event.id.as_bytes();
        let finished = event.status != OutboxStatus::Pending;
        if finished {
            self.expiry.insert(
                expiry_key(Expiring::Webhook, webhook_time(event), key),
                &[][..],
            )?;
        }
        let out = (&self.webhooks_pending, &self.webhooks_done).transaction(|(pending, done)| {
            if pending.get(key)?.is_none() {
                return Ok(false);
            }
            if finished {
                pending.remove(key)?;
                done.insert(key, value.as_slice())?;
            } else {
                pending.insert(key, value.as_slice())?;
            }
            Ok(true)
        });
        let held = tx_result(out)?;
        crate::sync::lock(&self.webhook_leases).remove(&event.id);
        self.flush()?;
        Ok(held)
    }

    /// Event ids are ULIDs: each tree's reverse order is newest first; the two are merged.
    pub(crate) fn recent_webhooks(
        &self,
        principal: Option<&str>,
        limit: usize,
    ) -> Result<Vec<OutboxEvent>, StoreError> {
        let mut out: Vec<OutboxEvent> = Vec::new();
        for tree in [&self.webhooks_pending, &self.webhooks_done] {
            let mut taken = 0;
            for item in tree.iter().rev() {
                if taken >= limit {
                    break;
                }
                let (key, value) = item?;
                let key = String::from_utf8_lossy(&key).into_owned();
                match decode::<OutboxEvent>(&key, &value) {
                    Ok(e) if principal.is_none_or(|p| e.principal == p) => {
                        out.push(e);
                        taken += 1;
                    }
                    Ok(_) => {}
                    Err(e) => tracing::error!(error = %e, "skipping undecodable webhook event"),
                }
            }
        }
        out.sort_by(|a, b| b.id.cmp(&a.id));
        out.truncate(limit);
        Ok(out)
    }

    pub(crate) fn get_webhook(&self, id: &str) -> Result<Option<OutboxEvent>, StoreError> {
        for tree in [&self.webhooks_pending, &self.webhooks_done] {
            if let Some(v) = tree.get(id.as_bytes())? {
                return decode(id, &v).map(Some);
            }
        }
        Ok(None)
    }
}

/// A transaction's outcome as the store's error.
pub(crate) fn tx_result<T>(out: Result<T, TransactionError<StoreError>>) -> Result<T, StoreError> {
    out.map_err(|e| match e {
        TransactionError::Abort(e) => e,
        TransactionError::Storage(e) => StoreError::Sled(e),
    })
}
