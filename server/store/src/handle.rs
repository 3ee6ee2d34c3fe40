//! [`Store`], the handle every caller holds: one backend (sled or PostgreSQL) behind it, and
//! the records, idempotency keys, assets, session epochs, secrets and (PostgreSQL) the shared
//! work queue through it. The webhook outbox's methods are in `outbox.rs`.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use crate::clock::SharedClock;
use crate::postgres::{Claim, PgStore, StoreEvent};
use crate::sled_store::SledStore;
use crate::{
    AssetRecord, Change, ExpiryCursor, IdempotencyEntry, RenderRecord, Retained, StoreError,
    Updated,
};

/// An idempotency key taken together with a new render ([`Store::insert_render`]).
pub struct NewKey<'a> {
    pub principal: &'a str,
    pub key: &'a str,
    pub entry: IdempotencyEntry,
    /// An existing entry created before this (Unix ms) is past its TTL and is replaced.
    pub stale_before: u64,
}

/// What [`Store::insert_render`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Inserted {
    /// The record (and its key) were written.
    Created,
    /// The key is held by this live entry (another call won the race): nothing was written.
    KeyTaken(IdempotencyEntry),
}

/// Handle to the store (cheap to clone).
#[derive(Clone, Debug)]
pub struct Store {
    pub(crate) backend: Backend,
}

#[derive(Clone, Debug)]
pub(crate) enum Backend {
    Sled(SledStore),
    Postgres(PgStore),
}

impl Store {
    /// Opens (or creates) the embedded database in `dir`. Fails with [`StoreError::Locked`]
    /// when another process holds it.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        Store::open_with_clock(dir, std::sync::Arc::new(crate::clock::SystemClock))
    }

    /// [`Store::open`] with `clock` timing the segments' leases (the service's clock, which
    /// tests move forward).
    pub fn open_with_clock(dir: &Path, clock: SharedClock) -> Result<Store, StoreError> {
        Ok(Store {
            backend: Backend::Sled(SledStore::open(dir, clock)?),
        })
    }

    /// Connects to PostgreSQL at `url` (`postgres://user[:password]@host:port/db`) and applies
    /// pending migrations.
    pub fn connect_postgres(url: &str) -> Result<Store, StoreError> {
        Ok(Store {
            backend: Backend::Postgres(PgStore::connect(url)?),
        })
    }

    /// Whether other nodes share this store (PostgreSQL): work is then claimed from it
    /// rather than from this process's queue.
    pub fn is_shared(&self) -> bool {
        matches!(self.backend, Backend::Postgres(_))
    }

    /// `sled` or the PostgreSQL URL (password redacted), for logs and `/healthz`.
    pub fn describe(&self) -> String {
        match &self.backend {
            Backend::Sled(_) => "sled".into(),
            Backend::Postgres(p) => p.display().to_string(),
        }
    }

    /// Opens (or creates) a further tree in the same database, for an MCP extension's own
    /// records. Its name must not be one of the store's own (`renders`, `render_index`,
    /// `idempotency`, `assets`, `session_epochs`, `server_secrets`, `webhooks_pending`, `webhooks_done`,
    /// `segments`); [`Store::flush`] makes its writes durable too. Embedded
    /// store only.
    pub fn open_tree(&self, name: &str) -> Result<sled::Tree, StoreError> {
        match &self.backend {
            Backend::Sled(s) => Ok(s.db.open_tree(name)?),
            Backend::Postgres(_) => Err(StoreError::Unsupported("an extension's own records")),
        }
    }

    /// Makes every previous write durable (PostgreSQL commits are already).
    pub fn flush(&self) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sled(s) => {
                let start = std::time::Instant::now();
                s.flush()?;
                crate::metrics::store_flush("sled", start.elapsed());
                Ok(())
            }
            Backend::Postgres(_) => Ok(()),
        }
    }

    // ---- renders ----

    pub fn get_render(&self, id: &str) -> Result<Option<RenderRecord>, StoreError> {
        each!(self, s => s.get_render(id))
    }

    /// The records of those of `ids` that exist, in any order: one read for many (PostgreSQL:
    /// one statement), for the walk over every kept media directory.
    pub fn renders_named(&self, ids: &[String]) -> Result<Vec<RenderRecord>, StoreError> {
        each!(self, s => s.renders_named(ids))
    }

    /// Inserts or replaces a record (not flushed).
    pub fn put_render(&self, rec: &RenderRecord) -> Result<(), StoreError> {
        each!(self, s => s.put_render(rec))
    }

    /// Writes a new record and, with `key`, its idempotency entry, atomically: the key is
    /// taken only if it is free (or stale), so of concurrent creators with one key exactly
    /// one writes (not flushed).
    pub fn insert_render(
        &self,
        rec: &RenderRecord,
        key: Option<&NewKey<'_>>,
    ) -> Result<Inserted, StoreError> {
        each!(self, s => s.insert_render(rec, key))
    }

    pub fn delete_render(&self, id: &str) -> Result<(), StoreError> {
        each!(self, s => s.delete_render(id))
    }

    /// Deletes every record of `ids` (those that exist) in one transaction (not flushed): the
    /// sweeper's batch of expired records, one commit instead of one each.
    pub fn delete_renders(&self, ids: &[String]) -> Result<(), StoreError> {
        each!(self, s => s.delete_renders(ids))
    }

    /// Read-modify-write of one record, retried on concurrent change (compare-and-swap on
    /// sled, a version check on PostgreSQL), so worker progress, decisions and cancellations
    /// never overwrite each other. `f` may run more than once. Returns `None` when the record
    /// does not exist. Not flushed.
    pub fn update_render<T, E>(
        &self,
        id: &str,
        f: impl FnMut(&mut RenderRecord) -> Result<Change<T>, E>,
    ) -> Result<Option<Updated<RenderRecord, T>>, E>
    where
        E: From<StoreError>,
    {
        self.update_render_emitting(id, f, &|_, _| None)
    }

    /// The newest `limit` renders of `principal` (everyone's with `None`), newest first
    /// (by `created_at`, then id). Reads that principal's index: it costs the `limit` records
    /// read, however many the store keeps.
    pub fn recent_renders(
        &self,
        principal: Option<&str>,
        limit: usize,
    ) -> Result<Vec<RenderRecord>, StoreError> {
        each!(self, s => s.recent_renders(principal, limit))
    }

    /// Every unfinished render record, oldest first (by `created_at`, then id), from the
    /// index of unfinished renders: it costs the renders in flight, not the store.
    pub fn unfinished_renders(&self) -> Result<Vec<RenderRecord>, StoreError> {
        each!(self, s => s.unfinished_renders())
    }

    /// Up to `limit` finished renders in retention `stage` whose retention counts from
    /// `until` or before ([`RenderRecord::retained_since`]), in that order, then by id,
    /// starting after `after` (the last one a previous batch returned): the sweeper's
    /// bounded batches, read from an expiry-ordered index.
    pub fn expired_renders(
        &self,
        stage: Retained,
        until: u64,
        after: Option<ExpiryCursor<'_>>,
        limit: usize,
    ) -> Result<Vec<RenderRecord>, StoreError> {
        each!(self, s => s.expired_renders(stage, until, after, limit))
    }

    /// Up to `limit` renders that ended without a result (failed, cancelled) and still name
    /// a preview, by id, starting after `after`: the previews the sweeper deletes.
    pub fn stale_previews(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<RenderRecord>, StoreError> {
        each!(self, s => s.stale_previews(after, limit))
    }

    /// The plans PostgreSQL makes for the render queries above, by name (`EXPLAIN`, costs
    /// left out; the listing's for `principal`; with `analyze`, run, with times and buffers):
    /// the docs show them, and tests check that each query reads its index. PostgreSQL only.
    pub fn render_query_plans(
        &self,
        principal: &str,
        analyze: bool,
    ) -> Result<Vec<(&'static str, String)>, StoreError> {
        match &self.backend {
            Backend::Postgres(p) => p.render_query_plans(principal, analyze),
            Backend::Sled(_) => Err(StoreError::Unsupported("PostgreSQL's query plans")),
        }
    }

    /// Inserts or replaces every record of `recs` in one transaction (not flushed): imports,
    /// fills and benchmarks, which write many records at once.
    pub fn put_renders(&self, recs: &[RenderRecord]) -> Result<(), StoreError> {
        each!(self, s => s.put_renders(recs))
    }

    // ---- idempotency ----

    pub fn get_idempotency(
        &self,
        principal: &str,
        key: &str,
    ) -> Result<Option<IdempotencyEntry>, StoreError> {
        each!(self, s => s.get_idempotency(principal, key))
    }

    /// Inserts or replaces (not flushed).
    pub fn put_idempotency(
        &self,
        principal: &str,
        key: &str,
        entry: &IdempotencyEntry,
    ) -> Result<(), StoreError> {
        each!(self, s => s.put_idempotency(principal, key, entry))
    }

    /// Removes every idempotency entry created before `cutoff_ms`; returns how many.
    pub fn remove_idempotency_before(&self, cutoff_ms: u64) -> Result<usize, StoreError> {
        each!(self, s => s.remove_idempotency_before(cutoff_ms))
    }

    /// Number of idempotency entries (diagnostics and tests).
    pub fn idempotency_len(&self) -> Result<usize, StoreError> {
        match &self.backend {
            Backend::Sled(s) => Ok(s.idempotency_len()),
            Backend::Postgres(p) => p.idempotency_len(),
        }
    }

    // ---- assets ----

    pub fn get_asset(&self, id: &str) -> Result<Option<AssetRecord>, StoreError> {
        each!(self, s => s.get_asset(id))
    }

    /// Inserts or replaces (not flushed).
    pub fn put_asset(&self, rec: &AssetRecord) -> Result<(), StoreError> {
        each!(self, s => s.put_asset(rec))
    }

    /// Which of `ids` name an asset: one read for many, like [`Store::renders_named`].
    pub fn assets_named(&self, ids: &[String]) -> Result<Vec<String>, StoreError> {
        each!(self, s => s.assets_named(ids))
    }

    /// Removes an asset record (not flushed); whether it existed.
    pub fn delete_asset(&self, id: &str) -> Result<bool, StoreError> {
        each!(self, s => s.delete_asset(id))
    }

    /// Up to `limit` assets created at `until` or before, oldest first (then by id), after
    /// `after` (the last one of the batch before): through the store's expiry index, so it
    /// costs what has expired, not every asset kept.
    pub fn expired_assets(
        &self,
        until: u64,
        after: Option<ExpiryCursor<'_>>,
        limit: usize,
    ) -> Result<Vec<AssetRecord>, StoreError> {
        each!(self, s => s.expired_assets(until, after, limit))
    }

    // ---- browser session epochs ----

    /// The session epoch of `principal` (0 until its first sign-out): browser session cookies
    /// are signed with it (`vidforge_http::session`), so raising it ends every session issued
    /// before, on every node sharing this store. sled: an in-memory read; PostgreSQL: one
    /// primary-key read.
    pub fn session_epoch(&self, principal: &str) -> Result<u64, StoreError> {
        each!(self, s => s.session_epoch(principal))
    }

    /// Raises the session epoch of `principal` by one and returns it: durable when this
    /// returns (sled is flushed; a PostgreSQL commit is), so it survives a crash or restart.
    pub fn bump_session_epoch(&self, principal: &str) -> Result<u64, StoreError> {
        each!(self, s => s.bump_session_epoch(principal))
    }

    /// The shared secret `name` (made of `fresh` when the store has none yet): generated once,
    /// durably (sled is flushed; a PostgreSQL commit is), the same for every node sharing the
    /// store and after restarts. Keys the MAC of OAuth browser sessions.
    pub fn server_secret(&self, name: &str, fresh: &[u8]) -> Result<Vec<u8>, StoreError> {
        each!(self, s => s.server_secret(name, fresh))
    }

    // ---- the shared work queue (PostgreSQL) ----

    fn shared_store(&self) -> Result<&PgStore, StoreError> {
        match &self.backend {
            Backend::Postgres(p) => Ok(p),
            Backend::Sled(_) => Err(StoreError::Unsupported("the shared work queue")),
        }
    }

    /// Takes the lease (for `lease`, by the database's clock) of the oldest render a worker
    /// may run: queued and unheld, or running under a lease that expired (its node died).
    /// A lease that ran out while the database was down is left to its holder for one more
    /// `lease` after the database is back: a living holder renews it by then, so an outage
    /// of the store is never taken for the death of the node.
    pub fn claim(&self, node: &str, lease: Duration) -> Result<Option<Claim>, StoreError> {
        self.shared_store()?.claim(node, lease, None)
    }

    /// [`Store::claim`] of a render whose estimated work is at most `max_pixel_frames` (the
    /// short lane of a node running a long render).
    pub fn claim_short(
        &self,
        node: &str,
        lease: Duration,
        max_pixel_frames: u64,
    ) -> Result<Option<Claim>, StoreError> {
        self.shared_store()?
            .claim(node, lease, Some(max_pixel_frames))
    }

    /// The lease of the oldest render awaiting approval that nobody renders speculatively
    /// (shared store only; `crate::speculation`).
    pub fn claim_speculative(
        &self,
        node: &str,
        lease: Duration,
    ) -> Result<Option<Claim>, StoreError> {
        self.shared_store()?.claim_speculative(node, lease)
    }

    /// Extends `node`'s leases on `ids` by `lease`; returns the ids it still holds.
    pub fn renew_leases(
        &self,
        node: &str,
        ids: Vec<String>,
        lease: Duration,
    ) -> Result<Vec<String>, StoreError> {
        self.shared_store()?.renew(node, ids, lease)
    }

    /// Gives up `node`'s lease on `id`.
    pub fn release_lease(&self, node: &str, id: &str) -> Result<(), StoreError> {
        self.shared_store()?.release(node, id)
    }

    /// Ends every lease `node` holds (at start-up); returns how many.
    pub fn release_node_leases(&self, node: &str) -> Result<usize, StoreError> {
        self.shared_store()?.release_all(node)
    }

    /// Blocks, reporting every committed change of a render record (on any node) until
    /// `stop` is set.
    pub fn watch(
        &self,
        stop: &AtomicBool,
        on_event: impl FnMut(StoreEvent),
    ) -> Result<(), StoreError> {
        self.shared_store()?.watch(stop, on_event);
        Ok(())
    }
}
