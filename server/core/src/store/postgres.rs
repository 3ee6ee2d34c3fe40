//! The cluster backend: PostgreSQL (`--store postgres://…`), shared by every node.
//!
//! The schema is in `server/core/migrations/` and applied at start-up ([`MIGRATIONS`], recorded in
//! `vidforge_migrations`, under an advisory lock so nodes starting together apply it once).
//! A render row keeps the whole record as JSON (`doc`, the sled store's value) beside the
//! columns queries need; updates are optimistic (`version`), so the same closures that run
//! under sled's compare-and-swap run here. Every commit is durable when it returns
//! (`synchronous_commit` is PostgreSQL's default), so [`super::Store::flush`] has nothing to do.
//!
//! The service's calls are synchronous and some run on tokio's worker threads, where the
//! blocking `postgres` client may not run (it drives a runtime of its own). So the
//! connections live on [`POOL_THREADS`] plain threads, and a call sends its statement there
//! and waits for the answer ([`PgStore::call`]), at most [`CALL_TIMEOUT`]. A connection that
//! broke (PostgreSQL restarted) is replaced on the next call; one idle for [`REVALIDATE_AFTER`]
//! is checked with an empty query before it is used again (the blocking client only notices a
//! closed connection when it is used, so one idle through a restart would otherwise fail its
//! next call). While the server is down calls fail with [`StoreError::Unavailable`], which
//! clients see as a temporary error.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Sender, bounded, unbounded};
use postgres::fallible_iterator::FallibleIterator;
use postgres::types::Json;
use postgres::{Client, GenericClient, NoTls, Row};
use serde::de::DeserializeOwned;

use super::{
    AssetRecord, Change, IdempotencyEntry, Inserted, NewKey, RenderRecord, StoreError, Updated,
};

/// Connections per node.
const POOL_THREADS: usize = 4;
/// Longest wait for a connection to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Longest a statement may run on the server (`statement_timeout`).
const STATEMENT_TIMEOUT_MS: u64 = 10_000;
/// Longest a caller waits for its call to come back (queueing included).
const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// A pool connection idle this long is checked (an empty query) before its next use.
const REVALIDATE_AFTER: Duration = Duration::from_secs(1);
/// The channel every node LISTENs on (the migration's trigger NOTIFYs it).
const CHANGES_CHANNEL: &str = "vidforge_renders";
/// `pg_advisory_xact_lock` key serialising migrations between nodes ("vidf").
const MIGRATION_LOCK: i64 = 0x7669_6466;

/// The schema, in order. Never edit an applied one: add the next.
pub const MIGRATIONS: &[(i32, &str, &str)] = &[
    (1, "tasks", include_str!("../../migrations/0001_tasks.sql")),
    (
        2,
        "recent_renders",
        include_str!("../../migrations/0002_recent_renders.sql"),
    ),
    (
        3,
        "session_epochs",
        include_str!("../../migrations/0003_session_epochs.sql"),
    ),
];

/// States a worker may hold (a claim scans these).
const RUNNABLE: &str = "('queued', 'rendering', 'previewing')";
/// The database's clock in Unix ms (leases are timed by it alone).
const DB_NOW_MS: &str = "(extract(epoch from clock_timestamp()) * 1000)::bigint";
/// When the database (re)started, in Unix ms: a lease that ran out before it ran out while
/// nobody could renew it.
const DB_START_MS: &str = "(extract(epoch from pg_postmaster_start_time()) * 1000)::bigint";
/// States of unfinished renders.
const UNFINISHED: &str = "('queued', 'rendering', 'previewing', 'awaiting_approval')";

type Job = Box<dyn FnOnce(&mut Conn) + Send>;

/// One pool thread's connection, opened on first use and after it broke.
struct Conn {
    config: postgres::Config,
    client: Option<Client>,
    /// When `client` last answered a call.
    last_used: Instant,
}

impl Conn {
    fn client(&mut self) -> Result<&mut Client, StoreError> {
        let idle = self.last_used.elapsed() >= REVALIDATE_AFTER;
        if self
            .client
            .as_mut()
            .is_some_and(|c| c.is_closed() || (idle && c.is_valid(CONNECT_TIMEOUT).is_err()))
        {
            self.client = None;
        }
        if self.client.is_none() {
            self.client = Some(self.config.connect(NoTls).map_err(pg_error)?);
        }
        Ok(self.client.as_mut().expect("connected above"))
    }
}

/// Handle to the PostgreSQL store (cheap to clone; the pool threads end with the last clone).
#[derive(Clone)]
pub(super) struct PgStore {
    jobs: Sender<Job>,
    config: Arc<postgres::Config>,
    display: Arc<str>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("url", &self.display)
            .finish_non_exhaustive()
    }
}

/// What a claim found: a render this node now holds the lease of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    pub id: String,
}

/// What [`super::Store::watch`] reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreEvent {
    /// This render's record changed (on any node).
    Changed(String),
    /// Changes may have been missed (the connection was re-opened): re-read what matters.
    Resync,
}

impl PgStore {
    /// Parses `url`, starts the pool and applies pending migrations. Fails when the server
    /// cannot be reached or the schema is newer than this build knows.
    pub(super) fn connect(url: &str) -> Result<PgStore, StoreError> {
        let mut config: postgres::Config = url
            .parse()
            .map_err(|e: postgres::Error| StoreError::Config(format!("{url}: {e}")))?;
        config
            .connect_timeout(CONNECT_TIMEOUT)
            .application_name("vidforge")
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(10))
            .options(&format!("-c statement_timeout={STATEMENT_TIMEOUT_MS}"));
        let display = redact(url);
        let (tx, rx) = unbounded::<Job>();
        for i in 0..POOL_THREADS {
            let rx = rx.clone();
            let mut conn = Conn {
                config: config.clone(),
                client: None,
                last_used: Instant::now(),
            };
            std::thread::Builder::new()
                .name(format!("vidforge-pg-{i}"))
                .spawn(move || {
                    while let Ok(job) = rx.recv() {
                        job(&mut conn);
                    }
                })?;
        }
        let store = PgStore {
            jobs: tx,
            config: Arc::new(config),
            display: display.into(),
        };
        store.call(migrate)?;
        Ok(store)
    }

    /// The URL without its password.
    pub(super) fn display(&self) -> &str {
        &self.display
    }

    /// Runs `f` with a pool connection and waits for its answer.
    fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<R, StoreError> + Send + 'static,
    ) -> Result<R, StoreError> {
        let (tx, rx) = bounded(1);
        self.jobs
            .send(Box::new(move |conn: &mut Conn| {
                let out = conn.client().and_then(f);
                if matches!(out, Err(StoreError::Unavailable(_))) {
                    conn.client = None;
                }
                conn.last_used = Instant::now();
                let _ = tx.send(out);
            }))
            .map_err(|_| StoreError::Unavailable("the store is closed".into()))?;
        rx.recv_timeout(CALL_TIMEOUT).unwrap_or_else(|_| {
            Err(StoreError::Unavailable(format!(
                "PostgreSQL did not answer within {} s",
                CALL_TIMEOUT.as_secs()
            )))
        })
    }

    pub(super) fn get_render(&self, id: &str) -> Result<Option<RenderRecord>, StoreError> {
        let id = id.to_string();
        self.call(move |c| {
            c.query_opt("SELECT doc FROM renders WHERE id = $1", &[&id])
                .map_err(pg_error)?
                .map(|row| doc(&id, &row, 0))
                .transpose()
        })
    }

    pub(super) fn put_render(&self, rec: &RenderRecord) -> Result<(), StoreError> {
        let rec = rec.clone();
        self.call(move |c| {
            write_render(
                c,
                &rec,
                "ON CONFLICT (id) DO UPDATE SET principal = EXCLUDED.principal,
                     state = EXCLUDED.state, created_at = EXCLUDED.created_at,
                     doc = EXCLUDED.doc, version = renders.version + 1",
            )
        })
    }

    /// The record and its idempotency key in one transaction; the key's primary key decides
    /// between concurrent creators (the loser sees [`Inserted::KeyTaken`]).
    pub(super) fn insert_render(
        &self,
        rec: &RenderRecord,
        key: Option<&NewKey<'_>>,
    ) -> Result<Inserted, StoreError> {
        let rec = rec.clone();
        let key = key.map(|k| {
            (
                k.principal.to_string(),
                k.key.to_string(),
                k.entry.clone(),
                k.stale_before,
            )
        });
        self.call(move |c| {
            let mut tx = c.transaction().map_err(pg_error)?;
            if let Some((principal, key, entry, stale_before)) = &key {
                let took = tx
                    .query_opt(
                        "INSERT INTO idempotency (principal, key, render_id, args_hash, created_at)
                         VALUES ($1, $2, $3, $4, $5)
                         ON CONFLICT (principal, key) DO UPDATE SET
                             render_id = EXCLUDED.render_id, args_hash = EXCLUDED.args_hash,
                             created_at = EXCLUDED.created_at
                         WHERE idempotency.created_at < $6
                         RETURNING 1",
                        &[
                            principal,
                            key,
                            &entry.render_id,
                            &entry.args_hash,
                            &to_i64(entry.created_at),
                            &to_i64(*stale_before),
                        ],
                    )
                    .map_err(pg_error)?;
                if took.is_none() {
                    let row = tx
                        .query_one(
                            "SELECT render_id, args_hash, created_at FROM idempotency
                             WHERE principal = $1 AND key = $2",
                            &[principal, key],
                        )
                        .map_err(pg_error)?;
                    return Ok(Inserted::KeyTaken(idempotency_entry(&row)));
                }
            }
            write_render(&mut tx, &rec, "")?;
            tx.commit().map_err(pg_error)?;
            Ok(Inserted::Created)
        })
    }

    pub(super) fn delete_render(&self, id: &str) -> Result<(), StoreError> {
        let id = id.to_string();
        self.call(move |c| {
            c.execute("DELETE FROM renders WHERE id = $1", &[&id])
                .map_err(pg_error)?;
            Ok(())
        })
    }

    /// Optimistic read-modify-write: `f` runs here, on the caller's thread, and the write
    /// succeeds only if nobody wrote the record since it was read (else it is re-read and `f`
    /// runs again).
    pub(super) fn update_render<T, E>(
        &self,
        id: &str,
        mut f: impl FnMut(&mut RenderRecord) -> Result<Change<T>, E>,
    ) -> Result<Option<Updated<RenderRecord, T>>, E>
    where
        E: From<StoreError>,
    {
        loop {
            let key = id.to_string();
            let read = self.call(move |c| {
                c.query_opt("SELECT doc, version FROM renders WHERE id = $1", &[&key])
                    .map_err(pg_error)?
                    .map(|row| Ok((doc::<RenderRecord>(&key, &row, 0)?, row.get::<_, i64>(1))))
                    .transpose()
            })?;
            let Some((old, version)) = read else {
                return Ok(None);
            };
            let mut rec = old.clone();
            match f(&mut rec)? {
                Change::Keep(value) => {
                    return Ok(Some(Updated {
                        record: old,
                        value,
                        written: false,
                    }));
                }
                Change::Write(value) => {
                    let new = rec.clone();
                    let written = self.call(move |c| {
                        c.execute(
                            "UPDATE renders SET doc = $2, state = $3, principal = $4,
                                 version = version + 1
                             WHERE id = $1 AND version = $5",
                            &[
                                &new.id,
                                &Json(&new),
                                &new.state.as_str(),
                                &new.principal,
                                &version,
                            ],
                        )
                        .map_err(pg_error)
                    })?;
                    if written == 1 {
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

    pub(super) fn renders(&self) -> Result<Vec<RenderRecord>, StoreError> {
        self.call(|c| docs(c, "SELECT id, doc FROM renders", "render"))
    }

    /// The newest `limit` renders (of `principal`, or everyone's), newest first.
    pub(super) fn recent_renders(
        &self,
        principal: Option<&str>,
        limit: usize,
    ) -> Result<Vec<RenderRecord>, StoreError> {
        let principal = principal.map(str::to_string);
        let limit = limit as i64;
        self.call(move |c| {
            let rows = match &principal {
                Some(p) => c.query(
                    "SELECT id, doc FROM renders WHERE principal = $1
                     ORDER BY created_at DESC, id DESC LIMIT $2",
                    &[p, &limit],
                ),
                None => c.query(
                    "SELECT id, doc FROM renders ORDER BY created_at DESC, id DESC LIMIT $1",
                    &[&limit],
                ),
            }
            .map_err(pg_error)?;
            Ok(rows
                .iter()
                .filter_map(|row| {
                    let id: String = row.get(0);
                    doc(&id, row, 1)
                        .map_err(|e| tracing::error!(error = %e, "skipping undecodable render"))
                        .ok()
                })
                .collect())
        })
    }

    /// Every unfinished render (each node's index of them is rebuilt from this).
    pub(super) fn unfinished_renders(&self) -> Result<Vec<RenderRecord>, StoreError> {
        self.call(|c| {
            docs(
                c,
                &format!("SELECT id, doc FROM renders WHERE state IN {UNFINISHED}"),
                "render",
            )
        })
    }

    pub(super) fn get_idempotency(
        &self,
        principal: &str,
        key: &str,
    ) -> Result<Option<IdempotencyEntry>, StoreError> {
        let (principal, key) = (principal.to_string(), key.to_string());
        self.call(move |c| {
            Ok(c.query_opt(
                "SELECT render_id, args_hash, created_at FROM idempotency
                 WHERE principal = $1 AND key = $2",
                &[&principal, &key],
            )
            .map_err(pg_error)?
            .map(|row| idempotency_entry(&row)))
        })
    }

    pub(super) fn put_idempotency(
        &self,
        principal: &str,
        key: &str,
        entry: &IdempotencyEntry,
    ) -> Result<(), StoreError> {
        let (principal, key, entry) = (principal.to_string(), key.to_string(), entry.clone());
        self.call(move |c| {
            c.execute(
                "INSERT INTO idempotency (principal, key, render_id, args_hash, created_at)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (principal, key) DO UPDATE SET render_id = EXCLUDED.render_id,
                     args_hash = EXCLUDED.args_hash, created_at = EXCLUDED.created_at",
                &[
                    &principal,
                    &key,
                    &entry.render_id,
                    &entry.args_hash,
                    &to_i64(entry.created_at),
                ],
            )
            .map_err(pg_error)?;
            Ok(())
        })
    }

    pub(super) fn remove_idempotency_before(&self, cutoff_ms: u64) -> Result<usize, StoreError> {
        self.call(move |c| {
            let n = c
                .execute(
                    "DELETE FROM idempotency WHERE created_at < $1",
                    &[&to_i64(cutoff_ms)],
                )
                .map_err(pg_error)?;
            Ok(n as usize)
        })
    }

    pub(super) fn idempotency_len(&self) -> Result<usize, StoreError> {
        self.call(|c| {
            let row = c
                .query_one("SELECT count(*) FROM idempotency", &[])
                .map_err(pg_error)?;
            Ok(row.get::<_, i64>(0) as usize)
        })
    }

    pub(super) fn get_asset(&self, id: &str) -> Result<Option<AssetRecord>, StoreError> {
        let id = id.to_string();
        self.call(move |c| {
            c.query_opt("SELECT doc FROM assets WHERE id = $1", &[&id])
                .map_err(pg_error)?
                .map(|row| doc(&id, &row, 0))
                .transpose()
        })
    }

    pub(super) fn put_asset(&self, rec: &AssetRecord) -> Result<(), StoreError> {
        let rec = rec.clone();
        self.call(move |c| {
            c.execute(
                "INSERT INTO assets (id, doc) VALUES ($1, $2)
                 ON CONFLICT (id) DO UPDATE SET doc = EXCLUDED.doc",
                &[&rec.id, &Json(&rec)],
            )
            .map_err(pg_error)?;
            Ok(())
        })
    }

    pub(super) fn delete_asset(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_string();
        self.call(move |c| {
            let n = c
                .execute("DELETE FROM assets WHERE id = $1", &[&id])
                .map_err(pg_error)?;
            Ok(n > 0)
        })
    }

    pub(super) fn assets(&self) -> Result<Vec<AssetRecord>, StoreError> {
        self.call(|c| docs(c, "SELECT id, doc FROM assets", "asset"))
    }

    // ---- browser session epochs ----

    /// One primary-key read (a principal without a row is at epoch 0).
    pub(super) fn session_epoch(&self, principal: &str) -> Result<u64, StoreError> {
        let principal = principal.to_string();
        self.call(move |c| {
            let row = c
                .query_opt(
                    "SELECT epoch FROM session_epochs WHERE principal = $1",
                    &[&principal],
                )
                .map_err(pg_error)?;
            Ok(row.map_or(0, |r| r.get::<_, i64>(0).max(0) as u64))
        })
    }

    /// Adds one atomically (concurrent bumps on any node each count); committed on return.
    pub(super) fn bump_session_epoch(&self, principal: &str) -> Result<u64, StoreError> {
        let principal = principal.to_string();
        self.call(move |c| {
            let row = c
                .query_one(
                    "INSERT INTO session_epochs (principal, epoch) VALUES ($1, 1)
                     ON CONFLICT (principal) DO UPDATE SET epoch = session_epochs.epoch + 1
                     RETURNING epoch",
                    &[&principal],
                )
                .map_err(pg_error)?;
            Ok(row.get::<_, i64>(0).max(0) as u64)
        })
    }

    // ---- the work queue ----

    /// Takes the lease of the oldest render a worker may run: a queued one nobody holds, or
    /// a running one whose holder stopped renewing (its node died). `SKIP LOCKED` lets nodes
    /// claim side by side without waiting on each other's candidates. Lease times are the
    /// database's clock, so the nodes' clocks need not agree.
    pub(super) fn claim(
        &self,
        node: &str,
        lease: Duration,
        max_work: Option<u64>,
    ) -> Result<Option<Claim>, StoreError> {
        let node = node.to_string();
        let lease_ms = lease.as_millis() as i64;
        let max_work = max_work.map(|w| i64::try_from(w).unwrap_or(i64::MAX));
        self.call(move |c| {
            let row = c
                .query_opt(
                    &format!(
                        "UPDATE renders SET lease_owner = $1, lease_until = {DB_NOW_MS} + $2
                         WHERE id = (
                             SELECT id FROM renders
                             WHERE state IN {RUNNABLE}
                               AND (lease_until IS NULL OR lease_until < {DB_NOW_MS})
                               AND (lease_until IS NULL OR lease_until >= {DB_START_MS}
                                    OR {DB_NOW_MS} >= {DB_START_MS} + $2)
                               AND ($3::bigint IS NULL
                                    OR COALESCE((doc->>'estimated_pixel_frames')::bigint, 0) <= $3)
                             ORDER BY created_at
                             FOR UPDATE SKIP LOCKED
                             LIMIT 1)
                         RETURNING id"
                    ),
                    &[&node, &lease_ms, &max_work],
                )
                .map_err(pg_error)?;
            Ok(row.map(|r| Claim { id: r.get(0) }))
        })
    }

    /// Extends this node's leases on `ids` by `lease` from now; returns the ids it still holds
    /// (a lease lost to another node is not renewed).
    pub(super) fn renew(
        &self,
        node: &str,
        ids: Vec<String>,
        lease: Duration,
    ) -> Result<Vec<String>, StoreError> {
        let node = node.to_string();
        let lease_ms = lease.as_millis() as i64;
        self.call(move |c| {
            let rows = c
                .query(
                    &format!(
                        "UPDATE renders SET lease_until = {DB_NOW_MS} + $2
                         WHERE lease_owner = $1 AND id = ANY($3)
                         RETURNING id"
                    ),
                    &[&node, &lease_ms, &ids],
                )
                .map_err(pg_error)?;
            Ok(rows.iter().map(|r| r.get(0)).collect())
        })
    }

    /// Gives up this node's lease on `id` (the render is finished, waits for a decision, or
    /// was handed back).
    pub(super) fn release(&self, node: &str, id: &str) -> Result<(), StoreError> {
        let (node, id) = (node.to_string(), id.to_string());
        self.call(move |c| {
            c.execute(
                "UPDATE renders SET lease_owner = NULL, lease_until = NULL
                 WHERE id = $1 AND lease_owner = $2",
                &[&id, &node],
            )
            .map_err(pg_error)?;
            Ok(())
        })
    }

    /// Gives up every lease `node` holds (at start-up: a node just started runs nothing, so
    /// what its previous life held may be taken over at once instead of after the lease).
    pub(super) fn release_all(&self, node: &str) -> Result<usize, StoreError> {
        let node = node.to_string();
        self.call(move |c| {
            let n = c
                .execute(
                    "UPDATE renders SET lease_until = 0 WHERE lease_owner = $1",
                    &[&node],
                )
                .map_err(pg_error)?;
            Ok(n as usize)
        })
    }

    /// Blocks, reporting every committed change of a render record until `stop` is set. Runs
    /// on a connection of its own (LISTEN holds it), re-opened after a failure with a
    /// [`StoreEvent::Resync`], since notifications sent meanwhile are lost.
    pub(super) fn watch(&self, stop: &AtomicBool, mut on_event: impl FnMut(StoreEvent)) {
        const WAIT: Duration = Duration::from_millis(250);
        let mut client: Option<Client> = None;
        while !stop.load(Ordering::SeqCst) {
            if client.as_ref().is_none_or(Client::is_closed) {
                client = None;
                match self.config.connect(NoTls) {
                    Ok(mut c) => match c.batch_execute(&format!("LISTEN {CHANGES_CHANNEL}")) {
                        Ok(()) => {
                            client = Some(c);
                            on_event(StoreEvent::Resync);
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "LISTEN failed; retrying");
                            std::thread::sleep(Duration::from_secs(1));
                        }
                    },
                    Err(e) => {
                        tracing::debug!(error = %e, "store watch: PostgreSQL unreachable");
                        std::thread::sleep(Duration::from_secs(1));
                    }
                }
                continue;
            }
            let lost = {
                let c = client.as_mut().expect("connected above");
                let mut notes = c.notifications();
                let mut iter = notes.timeout_iter(WAIT);
                loop {
                    match iter.next() {
                        Ok(Some(n)) => on_event(StoreEvent::Changed(n.payload().to_string())),
                        Ok(None) => break false,
                        Err(e) => {
                            tracing::warn!(error = %e, "store watch: connection lost");
                            break true;
                        }
                    }
                }
            };
            if lost {
                client = None;
            }
        }
    }
}

/// Applies the migrations this database has not seen, each in its own transaction, under an
/// advisory lock (nodes starting together apply each once). A database with a migration
/// this build does not know is refused: an older build would misread it.
fn migrate(c: &mut Client) -> Result<(), StoreError> {
    let mut tx = c.transaction().map_err(pg_error)?;
    // The lock first, then the bookkeeping table: nodes starting together would otherwise
    // race on creating it (DDL is transactional, so the second waits and finds it).
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .map_err(pg_error)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS vidforge_migrations (
             version    integer PRIMARY KEY,
             name       text NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now())",
    )
    .map_err(pg_error)?;
    let applied: Vec<i32> = tx
        .query(
            "SELECT version FROM vidforge_migrations ORDER BY version",
            &[],
        )
        .map_err(pg_error)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let known = MIGRATIONS.last().map_or(0, |m| m.0);
    if let Some(newer) = applied.iter().find(|v| **v > known) {
        return Err(StoreError::Config(format!(
            "the database's schema is at migration {newer}, newer than this build knows \
             ({known}); run the newer vidforge"
        )));
    }
    for (version, name, sql) in MIGRATIONS {
        if applied.contains(version) {
            continue;
        }
        tx.batch_execute(sql).map_err(pg_error)?;
        tx.execute(
            "INSERT INTO vidforge_migrations (version, name) VALUES ($1, $2)",
            &[version, name],
        )
        .map_err(pg_error)?;
        tracing::info!(version, name, "applied store migration");
    }
    tx.commit().map_err(pg_error)
}

/// `INSERT` of a render row, with `on_conflict` (empty: a duplicate id is an error).
fn write_render(
    c: &mut impl GenericClient,
    rec: &RenderRecord,
    on_conflict: &str,
) -> Result<(), StoreError> {
    c.execute(
        &format!(
            "INSERT INTO renders (id, principal, state, created_at, doc)
             VALUES ($1, $2, $3, $4, $5) {on_conflict}"
        ),
        &[
            &rec.id,
            &rec.principal,
            &rec.state.as_str(),
            &to_i64(rec.created_at),
            &Json(rec),
        ],
    )
    .map_err(pg_error)?;
    Ok(())
}

fn docs<T: DeserializeOwned>(c: &mut Client, sql: &str, what: &str) -> Result<Vec<T>, StoreError> {
    let rows = c.query(sql, &[]).map_err(pg_error)?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let id: String = row.get(0);
        match doc(&id, &row, 1) {
            Ok(r) => out.push(r),
            Err(e) => tracing::error!(error = %e, "skipping undecodable {what} record"),
        }
    }
    Ok(out)
}

fn doc<T: DeserializeOwned>(key: &str, row: &Row, idx: usize) -> Result<T, StoreError> {
    let Json(value): Json<serde_json::Value> = row.get(idx);
    serde_json::from_value(value).map_err(|source| StoreError::Decode {
        key: key.to_string(),
        source,
    })
}

fn idempotency_entry(row: &Row) -> IdempotencyEntry {
    IdempotencyEntry {
        render_id: row.get(0),
        args_hash: row.get(1),
        created_at: row.get::<_, i64>(2).max(0) as u64,
    }
}

/// Unix ms as PostgreSQL's `bigint`.
fn to_i64(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// Connection faults (the server is down, restarting, or unreachable) are temporary; the rest
/// are the database's answer.
fn pg_error(e: postgres::Error) -> StoreError {
    match e.as_db_error() {
        Some(db) => {
            let code = db.code().code();
            if code.starts_with("08") || code.starts_with("57P") {
                StoreError::Unavailable(db.message().to_string())
            } else {
                StoreError::Postgres(format!("{} (SQLSTATE {code})", db.message()))
            }
        }
        None => StoreError::Unavailable(e.to_string()),
    }
}

/// `url` with any password replaced by `***`.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact("host=h user=u"), "host=h user=u");
    }
}
