//! What expires on sled besides renders: assets, idempotency keys and finished webhook events,
//! each found by the sweep through the `expiry` tree, so a sweep reads what has expired, oldest
//! first, and never the records that are kept (a week of them on a busy host). Keys (values are
//! empty; the time is big-endian Unix ms, so byte order is time order):
//!
//! | key                               | entry                                   |
//! |-----------------------------------|-----------------------------------------|
//! | `a` created_at asset id           | an asset                                |
//! | `i` created_at principal `\0` key | an idempotency key                      |
//! | `w` finished_at event id          | a delivered or dropped webhook event    |
//!
//! An entry is written before its record (so a record always has one, whenever a process dies),
//! and an entry may outlive its record or name an older time than it (a record replaced, a
//! process killed between the two writes): the sweep checks each entry against its record and
//! drops the ones that no longer match. A store written before this index gets it on its first
//! open ([`build`]); one killed meanwhile builds it again (every entry is written the same way
//! twice).

use std::ops::Bound;

use sled::IVec;

use crate::sled_keys::{Expiring, expiry_key, parts, webhook_time};
use crate::sled_store::SledStore;
use crate::update::decode;
use crate::{AssetRecord, ExpiryCursor, IdempotencyEntry, OutboxEvent, StoreError};

/// Marks a complete index (no entry starts with `\0`).
const BUILT: &[u8] = b"\0built";
/// Records a build reads, and entries a sweep reads, at a time.
const BATCH: usize = 1024;

impl SledStore {
    /// Up to `limit` entries of `kind` from `start`, whose time is `until` or earlier.
    fn entries(
        &self,
        kind: Expiring,
        start: Bound<Vec<u8>>,
        until: u64,
        limit: usize,
    ) -> Result<Vec<IVec>, StoreError> {
        let end = match until.checked_add(1) {
            Some(next) => Bound::Excluded(expiry_key(kind, next, b"")),
            None => Bound::Excluded(vec![kind as u8 + 1]),
        };
        self.expiry
            .range((start, end))
            .keys()
            .take(limit)
            .map(|k| k.map_err(StoreError::from))
            .collect()
    }

    /// Up to `limit` assets created at `until` or before, oldest first (then by id), after
    /// `after`. An entry whose asset is gone or names another time is dropped on the way.
    pub(crate) fn expired_assets(
        &self,
        until: u64,
        after: Option<ExpiryCursor<'_>>,
        limit: usize,
    ) -> Result<Vec<AssetRecord>, StoreError> {
        let mut start = match after {
            Some((ms, id)) => Bound::Excluded(expiry_key(Expiring::Asset, ms, id.as_bytes())),
            None => Bound::Included(vec![Expiring::Asset as u8]),
        };
        let mut out = Vec::new();
        while out.len() < limit {
            let keys = self.entries(Expiring::Asset, start, until, limit - out.len())?;
            let Some(last) = keys.last().cloned() else {
                break;
            };
            for k in keys {
                let Some((ms, id)) = parts(&k) else { continue };
                let id = String::from_utf8_lossy(id).into_owned();
                match self.get_asset(&id)? {
                    Some(a) if a.created_at == ms => out.push(a),
                    // Gone, or replaced since (its own entry stands for it).
                    _ => {
                        self.expiry.remove(&k)?;
                    }
                }
            }
            start = Bound::Excluded(last.to_vec());
        }
        Ok(out)
    }

    /// Removes the idempotency keys created before `cutoff_ms`, a batch of entries at a time.
    pub(crate) fn remove_idempotency_before(&self, cutoff_ms: u64) -> Result<usize, StoreError> {
        self.remove_expired(
            Expiring::Idempotency,
            cutoff_ms,
            &self.idempotency,
            |k, v| decode::<IdempotencyEntry>(k, v).map(|e| e.created_at),
        )
    }

    /// Removes the delivered and dropped webhook events finished before `cutoff_ms`.
    pub(crate) fn remove_finished_webhooks_before(
        &self,
        cutoff_ms: u64,
    ) -> Result<usize, StoreError> {
        self.remove_expired(Expiring::Webhook, cutoff_ms, &self.webhooks_done, |k, v| {
            decode::<OutboxEvent>(k, v).map(|e| webhook_time(&e))
        })
    }

    /// Removes from `tree` each record of `kind` whose time (`time_of`; an undecodable record
    /// counts as expired) is before `cutoff_ms`, with its entry; drops entries that no longer
    /// match their record. A record replaced meanwhile is kept (compare-and-swap).
    fn remove_expired(
        &self,
        kind: Expiring,
        cutoff_ms: u64,
        tree: &sled::Tree,
        time_of: impl Fn(&str, &[u8]) -> Result<u64, StoreError>,
    ) -> Result<usize, StoreError> {
        let Some(until) = cutoff_ms.checked_sub(1) else {
            return Ok(0);
        };
        let mut removed = 0;
        let mut start = Bound::Included(vec![kind as u8]);
        loop {
            let keys = self.entries(kind, start, until, BATCH)?;
            let Some(last) = keys.last().cloned() else {
                return Ok(removed);
            };
            for k in &keys {
                let Some((_, key)) = parts(k) else { continue };
                if let Some(value) = tree.get(key)? {
                    let name = String::from_utf8_lossy(key);
                    let expired = time_of(&name, &value).map_or(true, |ms| ms < cutoff_ms);
                    if expired
                        && tree
                            .compare_and_swap(key, Some(&value), None as Option<&[u8]>)?
                            .is_ok()
                    {
                        removed += 1;
                    }
                }
                self.expiry.remove(k)?;
            }
            if keys.len() < BATCH {
                return Ok(removed);
            }
            start = Bound::Excluded(last.to_vec());
        }
    }
}

/// Builds the expiry index of a store written before it; nothing when it is complete. Runs at
/// open, before anything else reads or writes the store.
pub(crate) fn build(store: &SledStore) -> Result<(), StoreError> {
    if store.expiry.get(BUILT)?.is_some() {
        return Ok(());
    }
    tracing::info!(
        assets = store.assets.len(),
        idempotency_keys = store.idempotency.len(),
        finished_webhooks = store.webhooks_done.len(),
        "building the expiry index (once, on the first start of this version)"
    );
    let trees: [(Expiring, &sled::Tree, TimeOf); 3] = [
        (Expiring::Asset, &store.assets, |k, v| {
            decode::<AssetRecord>(k, v).map(|a| a.created_at)
        }),
        (Expiring::Idempotency, &store.idempotency, |k, v| {
            decode::<IdempotencyEntry>(k, v).map(|e| e.created_at)
        }),
        (Expiring::Webhook, &store.webhooks_done, |k, v| {
            decode::<OutboxEvent>(k, v).map(|e| webhook_time(&e))
        }),
    ];
    for (kind, tree, time_of) in trees {
        let mut batch = sled::Batch::default();
        let mut n = 0;
        for item in tree.iter() {
            let (key, value) = item?;
            // An undecodable record expires at once (the sweep removes it).
            let ms = time_of(&String::from_utf8_lossy(&key), &value).unwrap_or(0);
            batch.insert(expiry_key(kind, ms, &key), &[][..]);
            n += 1;
            if n % BATCH == 0 {
                store.expiry.apply_batch(std::mem::take(&mut batch))?;
            }
        }
        store.expiry.apply_batch(batch)?;
    }
    store.db.flush()?;
    store.expiry.insert(BUILT, &[][..])?;
    store.db.flush()?;
    tracing::info!("the expiry index is built");
    Ok(())
}

/// The time a stored record of one kind expires from.
type TimeOf = fn(&str, &[u8]) -> Result<u64, StoreError>;

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::clock::SystemClock;
    use crate::fixtures::sample;
    use crate::update::encode;
    use crate::{AssetKind, AssetProbe, EventKind, OutboxStatus};

    /// Opens the store in `dir`; just after a drop, sled's flusher may still hold its lock for
    /// a moment, so a `Locked` is tried again (for at most 5 s).
    fn open(dir: &std::path::Path) -> SledStore {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            match SledStore::open(dir, Arc::new(SystemClock)) {
                Err(StoreError::Locked { .. }) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                other => return other.unwrap(),
            }
        }
    }

    fn asset(id: &str, created_at: u64) -> AssetRecord {
        AssetRecord {
            id: id.into(),
            uri: format!("vidforge://assets/{id}"),
            principal: "alice".into(),
            kind: AssetKind::Video,
            file_name: "clip.mp4".into(),
            path: format!("/media/assets/{id}").into(),
            size_bytes: 1,
            created_at,
            probe: AssetProbe::default(),
        }
    }

    fn key(created_at: u64) -> IdempotencyEntry {
        IdempotencyEntry {
            render_id: "task_x".into(),
            args_hash: "h".into(),
            created_at,
        }
    }

    /// A delivered event finished at `finished_at`, through the outbox's own finish.
    fn deliver(s: &SledStore, id: &str, finished_at: u64) {
        let mut event = OutboxEvent::new(EventKind::Succeeded, &sample("task_w"), 1);
        event.id = id.into();
        s.webhooks_pending
            .insert(id.as_bytes(), encode(&event).unwrap())
            .unwrap();
        event.status = OutboxStatus::Delivered;
        event.finished_at = Some(finished_at);
        assert!(s.finish_webhook_attempt("node", &event).unwrap());
    }

    fn entries(s: &SledStore) -> usize {
        s.expiry
            .iter()
            .keys()
            .filter(|k| k.as_ref().unwrap()[0] != 0)
            .count()
    }

    #[test]
    fn a_sweep_removes_what_expired_and_keeps_what_was_replaced_since() {
        let dir = tempfile::tempdir().unwrap();
        let s = open(dir.path());
        s.put_idempotency("alice", "old", &key(10)).unwrap();
        s.put_idempotency("alice", "new", &key(30)).unwrap();
        // Taken again after it went stale: its first entry no longer matches it.
        s.put_idempotency("alice", "again", &key(10)).unwrap();
        s.put_idempotency("alice", "again", &key(40)).unwrap();
        deliver(&s, "msg_a", 10);
        deliver(&s, "msg_b", 50);
        assert_eq!(entries(&s), 6);

        assert_eq!(s.remove_idempotency_before(20).unwrap(), 1);
        assert!(s.get_idempotency("alice", "old").unwrap().is_none());
        assert!(s.get_idempotency("alice", "new").unwrap().is_some());
        assert_eq!(s.get_idempotency("alice", "again").unwrap(), Some(key(40)));
        assert_eq!(s.remove_finished_webhooks_before(20).unwrap(), 1);
        assert!(s.get_webhook("msg_a").unwrap().is_none());
        assert!(s.get_webhook("msg_b").unwrap().is_some());
        // The stale entry went with the sweep; one entry a record is left.
        assert_eq!(entries(&s), 3);
        assert_eq!(s.remove_idempotency_before(100).unwrap(), 2);
        assert_eq!(s.remove_finished_webhooks_before(100).unwrap(), 1);
        assert_eq!(entries(&s), 0);
    }

    #[test]
    fn an_entry_whose_asset_is_gone_is_dropped_and_batches_span_many_entries() {
        let dir = tempfile::tempdir().unwrap();
        let s = open(dir.path());
        let n = BATCH as u64 * 2 + 5;
        for i in 0..n {
            s.put_asset(&asset(&format!("a_{i:05}"), i)).unwrap();
        }
        // Killed between the entry and the record: an entry without an asset.
        s.expiry
            .insert(expiry_key(Expiring::Asset, 3, b"a_lost"), &[][..])
            .unwrap();
        let got = s.expired_assets(n, None, n as usize + 10).unwrap();
        assert_eq!(got.len() as u64, n);
        assert!(got.windows(2).all(|w| w[0].created_at <= w[1].created_at));
        assert_eq!(entries(&s) as u64, n, "the lost asset's entry went");
        assert_eq!(s.expired_assets(4, None, 100).unwrap().len(), 5);
        // Replaced with another time: found once, at its own; the old entry goes.
        s.put_asset(&asset("a_00000", n + 5)).unwrap();
        let got = s.expired_assets(n + 5, None, n as usize + 10).unwrap();
        assert_eq!(got.len() as u64, n);
        assert_eq!(got.last().unwrap().id, "a_00000");
        assert_eq!(entries(&s) as u64, n);
    }

    #[test]
    fn a_store_from_before_the_index_gets_it_on_its_first_open() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = open(dir.path());
            s.put_asset(&asset("a_1", 5)).unwrap();
            s.put_idempotency("alice", "k", &key(5)).unwrap();
            deliver(&s, "msg_1", 5);
            // As a version before the index left it: records, no entries.
            s.expiry.clear().unwrap();
            s.flush().unwrap();
        }
        let s = open(dir.path());
        assert_eq!(entries(&s), 3);
        assert_eq!(
            s.expired_assets(5, None, 10).unwrap(),
            vec![asset("a_1", 5)]
        );
        assert_eq!(s.remove_idempotency_before(6).unwrap(), 1);
        assert_eq!(s.remove_finished_webhooks_before(6).unwrap(), 1);
        // Built once: a second open does not read the records again.
        drop(s);
        let s = open(dir.path());
        assert!(s.expiry.get(BUILT).unwrap().is_some());
    }
}
