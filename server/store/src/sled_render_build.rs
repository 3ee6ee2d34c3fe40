//! The render indexes (`sled_renders.rs`) of a store written before them, built on its first
//! open in batches, each flushed before the cursor that records it: a process killed meanwhile
//! resumes after the last batch it recorded, and building twice writes the same entries.

use std::ops::Bound;

use sled::IVec;

use crate::StoreError;
use crate::render_index::Terms;
use crate::sled_renders::keys;
use crate::sled_store::SledStore;

/// The index's own state, below every entry's first byte: which version of the index is
/// complete, and how far a build in progress got (the last record id it indexed).
const BUILT: &[u8] = b"\0built";
const CURSOR: &[u8] = b"\0cursor";
/// This build's index (a store with another, or none, is indexed again on open).
const VERSION: &[u8] = &[1];
/// Records indexed per batch (and per flush) of a build.
const BUILD_BATCH: usize = 5_000;
/// How often a build logs its progress (and after its first batch).
const BUILD_LOG_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// Builds the render indexes of a store written before them (or by another version of them),
/// resuming where a build that was killed stopped; nothing when they are complete. Runs at
/// open, before anything else reads or writes the store. `max_batches` stops it early, as a
/// kill would (tests).
pub(crate) fn build(store: &SledStore, max_batches: Option<usize>) -> Result<(), StoreError> {
    let index = &store.render_index;
    if index.get(BUILT)?.as_deref() == Some(VERSION) {
        return Ok(());
    }
    let mut after = index.get(CURSOR)?;
    match &after {
        Some(id) => tracing::info!(
            after = %String::from_utf8_lossy(id),
            "resuming the render index build"
        ),
        None => {
            clear(index)?;
            tracing::info!(
                records = store.renders.len(),
                "building the render indexes (once, on the first start of this version)"
            );
        }
    }
    let mut done = 0usize;
    let mut logged = std::time::Instant::now();
    for _ in 0..max_batches.unwrap_or(usize::MAX) {
        let start = match &after {
            Some(id) => Bound::Excluded(id.clone()),
            None => Bound::Unbounded,
        };
        let mut batch = sled::Batch::default();
        let mut last = None;
        let mut n = 0;
        for item in store
            .renders
            .range::<IVec, _>((start, Bound::Unbounded))
            .take(BUILD_BATCH)
        {
            let (id, value) = item?;
            let key = String::from_utf8_lossy(&id).into_owned();
            match Terms::decode(&key, &value) {
                Ok(t) => keys(&t).into_iter().for_each(|k| batch.insert(k, &[][..])),
                Err(e) => {
                    tracing::error!(error = %e, "an undecodable render record is not indexed")
                }
            }
            last = Some(id);
            n += 1;
        }
        let Some(last) = last else { break };
        index.apply_batch(batch)?;
        store.db.flush()?;
        index.insert(CURSOR, last.clone())?;
        store.db.flush()?;
        done += n;
        // The first batch, then every few seconds.
        if done == n || logged.elapsed() >= BUILD_LOG_INTERVAL {
            logged = std::time::Instant::now();
            tracing::info!(records = done, "render index build: a batch is recorded");
        }
        after = Some(last);
        if n < BUILD_BATCH {
            break;
        }
    }
    if max_batches.is_some() {
        return Ok(());
    }
    index.insert(BUILT, VERSION)?;
    index.remove(CURSOR)?;
    store.db.flush()?;
    tracing::info!(records = done, "the render indexes are built");
    Ok(())
}

/// Removes another version's entries (none, for a store from before the indexes), a batch at
/// a time.
fn clear(index: &sled::Tree) -> Result<(), StoreError> {
    loop {
        let keys: Vec<IVec> = index
            .iter()
            .keys()
            .take(BUILD_BATCH)
            .collect::<Result<_, _>>()?;
        if keys.is_empty() {
            return Ok(());
        }
        let mut batch = sled::Batch::default();
        keys.into_iter().for_each(|k| batch.remove(k));
        index.apply_batch(batch)?;
    }
}
