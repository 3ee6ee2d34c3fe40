//! Render records on sled: the `renders` tree (id → JSON [`RenderRecord`]) and its indexes in
//! the `render_index` tree (`render_index.rs` says what they hold), written together in one
//! sled transaction by every write of a record, so an index never disagrees with the records,
//! whatever instant a process dies at. The keys (values are empty; times are big-endian Unix
//! ms, so byte order is time order):
//!
//! | key                                                   | entry                         |
//! |-------------------------------------------------------|-------------------------------|
//! | `p` principal's length (u32) principal created_at id  | every render of the principal |
//! | `u` created_at id                                     | an unfinished render          |
//! | `r` retained_since id                                 | a finished render's result    |
//! | `t` retained_since id                                 | a tombstone                   |
//! | `v` id                                                | a preview to delete           |
//!
//! A store written before these indexes existed gets them on its first open
//! (`sled_render_build.rs`).

use std::ops::Bound;

use sled::transaction::{
    ConflictableTransactionError, TransactionalTree, UnabortableTransactionError,
};
use sled::{IVec, Transactional};

use crate::render_index::{ExpiryCursor, Retained, Terms};
use crate::sled_keys::{Expiring, expiry_key};
use crate::sled_store::{SledStore, tx_result};
use crate::update::{self, Versioned, decode, encode};
use crate::{
    Change, IdempotencyEntry, Inserted, NewKey, OutboxEvent, RenderRecord, StoreError, Updated,
};

const PRINCIPAL: u8 = b'p';
const UNFINISHED: u8 = b'u';
const RESULT: u8 = b'r';
const TOMBSTONE: u8 = b't';
const PREVIEW: u8 = b'v';
/// The keys of `principal`'s entries begin so.
fn principal_prefix(principal: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(5 + principal.len() + 8 + 32);
    k.push(PRINCIPAL);
    k.extend_from_slice(&(principal.len() as u32).to_be_bytes());
    k.extend_from_slice(principal.as_bytes());
    k
}

/// `prefix` + `ms` (big-endian) + `id`.
fn timed(mut prefix: Vec<u8>, ms: u64, id: &str) -> Vec<u8> {
    prefix.extend_from_slice(&ms.to_be_bytes());
    prefix.extend_from_slice(id.as_bytes());
    prefix
}

fn stage_byte(stage: Retained) -> u8 {
    match stage {
        Retained::Result => RESULT,
        Retained::Tombstone => TOMBSTONE,
    }
}

/// Every index entry of a record with these terms.
pub(crate) fn keys(t: &Terms<'_>) -> Vec<Vec<u8>> {
    let mut keys = vec![timed(principal_prefix(&t.principal), t.created_at, &t.id)];
    if t.unfinished() {
        keys.push(timed(vec![UNFINISHED], t.created_at, &t.id));
    }
    if let Some((stage, since)) = t.retained() {
        keys.push(timed(vec![stage_byte(stage)], since, &t.id));
    }
    if t.stale_preview() {
        keys.push(preview_key(&t.id));
    }
    keys
}

fn preview_key(id: &str) -> Vec<u8> {
    let mut k = vec![PREVIEW];
    k.extend_from_slice(id.as_bytes());
    k
}

/// The record id at the end of an entry's key that has `skip` bytes before it.
fn id_at(key: &[u8], skip: usize) -> String {
    String::from_utf8_lossy(key.get(skip..).unwrap_or_default()).into_owned()
}

/// Moves the index from `old`'s entries to `new`'s (either may be absent), in a transaction.
fn reindex(
    index: &TransactionalTree,
    old: Option<&Terms<'_>>,
    new: Option<&Terms<'_>>,
) -> Result<(), UnabortableTransactionError> {
    let old = old.map(keys).unwrap_or_default();
    let new = new.map(keys).unwrap_or_default();
    move_keys(index, &old, &new)
}

/// Removes the entries of `old` that `new` lacks and inserts those `new` adds.
fn move_keys(
    index: &TransactionalTree,
    old: &[Vec<u8>],
    new: &[Vec<u8>],
) -> Result<(), UnabortableTransactionError> {
    for k in old.iter().filter(|k| !new.contains(k)) {
        index.remove(k.as_slice())?;
    }
    for k in new.iter().filter(|k| !old.contains(k)) {
        index.insert(k.as_slice(), &[][..])?;
    }
    Ok(())
}

/// The terms of a stored record that a write replaces or removes; one that cannot be read
/// is logged (its entries, if any, stay until a rebuild).
fn stored_terms<'a>(id: &str, old: &'a Option<IVec>) -> Option<Terms<'a>> {
    let old = old.as_ref()?;
    Terms::decode(id, old)
        .map_err(|e| tracing::error!(error = %e, "an undecodable render record is replaced"))
        .ok()
}

/// Stores `rec` (encoded: `value`) and moves its index entries from the record it replaces
/// (if any) to its own, in a transaction.
fn put(
    renders: &TransactionalTree,
    index: &TransactionalTree,
    rec: &RenderRecord,
    value: &[u8],
) -> Result<(), UnabortableTransactionError> {
    let old = renders.insert(rec.id.as_bytes(), value)?;
    reindex(
        index,
        stored_terms(&rec.id, &old).as_ref(),
        Some(&Terms::of(rec)),
    )
}

impl SledStore {
    pub(crate) fn get_render(&self, id: &str) -> Result<Option<RenderRecord>, StoreError> {
        self.renders
            .get(id.as_bytes())?
            .map(|v| decode(id, &v))
            .transpose()
    }

    pub(crate) fn renders_named(&self, ids: &[String]) -> Result<Vec<RenderRecord>, StoreError> {
        let mut out = Vec::new();
        for id in ids {
            out.extend(self.get_render(id)?);
        }
        Ok(out)
    }

    pub(crate) fn put_render(&self, rec: &RenderRecord) -> Result<(), StoreError> {
        self.put_renders(std::slice::from_ref(rec))
    }

    /// Inserts or replaces every record of `recs`, and their index entries, in one
    /// transaction.
    pub(crate) fn put_renders(&self, recs: &[RenderRecord]) -> Result<(), StoreError> {
        let values = recs.iter().map(encode).collect::<Result<Vec<_>, _>>()?;
        tx_result(
            (&self.renders, &self.render_index).transaction(|(renders, index)| {
                for (rec, value) in recs.iter().zip(&values) {
                    put(renders, index, rec, value)?;
                }
                Ok(())
            }),
        )
    }

    /// The record, its index entries and its idempotency key in one sled transaction: the key
    /// is taken only if it is free or older than `key.stale_before`.
    pub(crate) fn insert_render(
        &self,
        rec: &RenderRecord,
        key: Option<&NewKey<'_>>,
    ) -> Result<Inserted, StoreError> {
        let value = encode(rec)?;
        let entry = match key {
            Some(k) => {
                let ik = crate::sled_store::idem_key(k.principal, k.key);
                // Before the key (`sled_expiry.rs`): an entry whose key is not taken after
                // all is dropped by the sweep.
                let expiry = expiry_key(Expiring::Idempotency, k.entry.created_at, &ik);
                self.expiry.insert(expiry, &[][..])?;
                Some((ik, encode(&k.entry)?, k.stale_before))
            }
            None => None,
        };
        let trees = (&self.renders, &self.idempotency, &self.render_index);
        tx_result(trees.transaction(|(renders, idem, index)| {
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
            put(renders, index, rec, &value)?;
            Ok(Inserted::Created)
        }))
    }

    pub(crate) fn delete_render(&self, id: &str) -> Result<(), StoreError> {
        self.delete_renders(std::slice::from_ref(&id.to_string()))
    }

    /// Removes every record of `ids` and its index entries, in one transaction.
    pub(crate) fn delete_renders(&self, ids: &[String]) -> Result<(), StoreError> {
        tx_result(
            (&self.renders, &self.render_index).transaction(|(renders, index)| {
                for id in ids {
                    let old = renders.remove(id.as_bytes())?;
                    reindex(index, stored_terms(id, &old).as_ref(), None)?;
                }
                Ok(())
            }),
        )
    }

    /// Compare-and-swap of the record (retried, with `f` run again, on a concurrent change);
    /// its index entries, and the event `emit` makes of the change, in the same transaction,
    /// under the same check.
    pub(crate) fn update_render<T, E>(
        &self,
        id: &str,
        f: impl FnMut(&mut RenderRecord) -> Result<Change<T>, E>,
        emit: &dyn Fn(&RenderRecord, &RenderRecord) -> Option<OutboxEvent>,
    ) -> Result<Option<Updated<RenderRecord, T>>, E>
    where
        E: From<StoreError>,
    {
        update::update(&Renders { store: self, emit }, id, f)
    }

    /// Replaces the record `id` (if it is still `old`, the bytes read) with `rec`, moves its
    /// index entries from `before`'s to `rec`'s and adds `event` to the outbox, in one
    /// transaction; whether it was still `old`.
    fn swap(
        &self,
        old: &IVec,
        before: &RenderRecord,
        rec: &RenderRecord,
        event: Option<&OutboxEvent>,
    ) -> Result<bool, StoreError> {
        let new = encode(rec)?;
        let event = match event {
            Some(e) => Some((e.id.as_bytes(), encode(e)?)),
            None => None,
        };
        let id = rec.id.as_bytes();
        let (old_keys, new_keys) = (keys(&Terms::of(before)), keys(&Terms::of(rec)));
        if event.is_none() && old_keys == new_keys {
            // Nothing to index or emit (a progress write): one compare-and-swap.
            let swapped = self.renders.compare_and_swap(id, Some(old), Some(new))?;
            return Ok(swapped.is_ok());
        }
        let trees = (&self.renders, &self.render_index, &self.webhooks_pending);
        tx_result(trees.transaction(|(renders, index, pending)| {
            if renders.get(id)?.as_ref() != Some(old) {
                return Ok(false);
            }
            renders.insert(id, new.as_slice())?;
            move_keys(index, &old_keys, &new_keys)?;
            if let Some((key, value)) = &event {
                pending.insert(*key, value.as_slice())?;
            }
            Ok(true)
        }))
    }

    /// The records of `entries` (index keys with the id after `skip` bytes), in that order;
    /// a record deleted since its entry was read is left out.
    fn records_of(
        &self,
        entries: impl Iterator<Item = sled::Result<(IVec, IVec)>>,
        skip: usize,
    ) -> Result<Vec<RenderRecord>, StoreError> {
        let mut out = Vec::new();
        for entry in entries {
            let id = id_at(&entry?.0, skip);
            match self.get_render(&id) {
                Ok(Some(r)) => out.push(r),
                Ok(None) => {}
                Err(e) => tracing::error!(error = %e, "skipping undecodable render record"),
            }
        }
        Ok(out)
    }

    /// The newest `limit` renders (of `principal`, from its index; or everyone's: render ids
    /// are ULIDs, so the tree's reverse order is newest first), newest first.
    pub(crate) fn recent_renders(
        &self,
        principal: Option<&str>,
        limit: usize,
    ) -> Result<Vec<RenderRecord>, StoreError> {
        match principal {
            Some(p) => {
                let prefix = principal_prefix(p);
                let skip = prefix.len() + 8;
                let entries = self.render_index.scan_prefix(prefix).rev().take(limit);
                self.records_of(entries, skip)
            }
            None => {
                let items = self.renders.iter().rev().take(limit);
                update::decode_each(items, "render")
            }
        }
    }

    /// Every unfinished render, oldest first.
    pub(crate) fn unfinished_renders(&self) -> Result<Vec<RenderRecord>, StoreError> {
        self.records_of(self.render_index.scan_prefix([UNFINISHED]), 9)
    }

    /// Up to `limit` finished renders in `stage` retained since `until` or before, in that
    /// order (then by id), after `after`.
    pub(crate) fn expired_renders(
        &self,
        stage: Retained,
        until: u64,
        after: Option<ExpiryCursor<'_>>,
        limit: usize,
    ) -> Result<Vec<RenderRecord>, StoreError> {
        let byte = stage_byte(stage);
        let start = match after {
            Some((since, id)) => Bound::Excluded(timed(vec![byte], since, id)),
            None => Bound::Included(vec![byte]),
        };
        let end = match until.checked_add(1) {
            Some(next) => Bound::Excluded(timed(vec![byte], next, "")),
            None => Bound::Excluded(vec![byte + 1]),
        };
        let entries = self.render_index.range((start, end)).take(limit);
        self.records_of(entries, 9)
    }

    /// Up to `limit` renders whose preview is to be deleted, by id, after `after`.
    pub(crate) fn stale_previews(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<RenderRecord>, StoreError> {
        let start = match after {
            Some(id) => Bound::Excluded(preview_key(id)),
            None => Bound::Included(vec![PREVIEW]),
        };
        let end = Bound::Excluded(vec![PREVIEW + 1]);
        let entries = self.render_index.range((start, end)).take(limit);
        self.records_of(entries, 1)
    }
}

/// The `renders` tree as [`update::update`] sees it: compare-and-swap of the stored bytes,
/// with the record's index entries and the change's outbox event (if `emit` makes one) in the
/// same transaction.
struct Renders<'a> {
    store: &'a SledStore,
    emit: &'a dyn Fn(&RenderRecord, &RenderRecord) -> Option<OutboxEvent>,
}

impl Versioned for Renders<'_> {
    type Record = RenderRecord;
    type Version = IVec;

    fn read(&self, id: &str) -> Result<Option<(RenderRecord, IVec)>, StoreError> {
        let Some(old) = self.store.renders.get(id.as_bytes())? else {
            return Ok(None);
        };
        Ok(Some((decode(id, &old)?, old)))
    }

    fn copy(&self, _: &str, rec: &RenderRecord, _: &IVec) -> Result<RenderRecord, StoreError> {
        Ok(rec.clone())
    }

    fn write_if(
        &self,
        _: &str,
        old: &IVec,
        before: &RenderRecord,
        rec: &RenderRecord,
    ) -> Result<bool, StoreError> {
        let event = (self.emit)(before, rec);
        self.store.swap(old, before, rec, event.as_ref())
    }
}
