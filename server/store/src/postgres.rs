//! The cluster backend: PostgreSQL (`--store postgres://…`), shared by every node.
//!
//! The schema is in `server/store/migrations/` and applied at start-up by refinery
//! ([`migrations`]; a database migrated by vidforge's own runner before, recorded in
//! `vidforge_migrations`, is recognised). A render row keeps the whole record as JSON
//! (`doc`, the sled store's value) beside the columns queries need; updates are optimistic
//! (`version`), so the same closures that run under sled's compare-and-swap run here. Every
//! commit is durable when it returns (`synchronous_commit` is PostgreSQL's default), so
//! [`crate::Store::flush`] has nothing to do.
//!
//! The concepts, one file each: the connection pool and the runtime that drives it
//! ([`pool`]), the schema ([`migrations`]) and the render indexes built after it with the
//! queries that read them ([`indexes`]), the records ([`records`]), the work queue's
//! leases ([`queue`]), the change feed ([`feed`]), the webhook outbox ([`outbox`]) and the
//! segments of renders split across the farm, with the nodes' idle slots ([`segments`]); the
//! helper that runs one statement on a pool connection ([`statement`]). While the server is
//! down calls fail with [`StoreError::Unavailable`], which clients see as a temporary error.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{ClientWrapper, Pool};
use futures_util::future::BoxFuture;
use postgres::Row;
use postgres::types::Json;
use serde::de::DeserializeOwned;

use crate::{
    AssetRecord, Change, IdempotencyEntry, Inserted, NewKey, OutboxEvent, RenderRecord, StoreError,
    Updated,
};

mod feed;
mod indexes;
mod migrations;
mod outbox;
mod pool;
mod queue;
mod records;
mod segments;
mod statement;

pub use migrations::MIGRATIONS;

/// The database's clock in Unix ms: leases and webhook schedules are timed by it alone, so the
/// nodes' clocks need not agree.
const DB_NOW_MS: &str = "(extract(epoch from clock_timestamp()) * 1000)::bigint";
/// Longest wait for a connection to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Longest a statement may run on the server (`statement_timeout`).
const STATEMENT_TIMEOUT_MS: u64 = 10_000;
/// States of unfinished renders.
const UNFINISHED: &str = "('queued', 'rendering', 'previewing', 'awaiting_approval')";

/// Handle to the PostgreSQL store (cheap to clone; the pool and its runtime end with the
/// last clone).
#[derive(Clone)]
pub(crate) struct PgStore {
    pool: Pool,
    runtime: Arc<pool::StoreRuntime>,
    /// For the change feed's own connection.
    config: Arc<tokio_postgres::Config>,
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

/// What [`crate::Store::watch`] reports.
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
    pub(crate) fn connect(url: &str) -> Result<PgStore, StoreError> {
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|e: tokio_postgres::Error| StoreError::Config(format!("{url}: {e}")))?;
        config
            .connect_timeout(CONNECT_TIMEOUT)
            .application_name("vidforge")
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(10))
            .options(format!("-c statement_timeout={STATEMENT_TIMEOUT_MS}"));
        let runtime = Arc::new(pool::StoreRuntime::new()?);
        let pool = pool::build(config.clone(), &runtime)?;
        runtime.block_on_patiently(migrations::migrate(config.clone()))?;
        Ok(PgStore {
            pool,
            runtime,
            config: Arc::new(config),
            display: redact(url).into(),
        })
    }

    /// The URL without its password.
    pub(crate) fn display(&self) -> &str {
        &self.display
    }

    /// Runs `f` with a pool connection and waits for its answer ([`pool::call`]).
    fn call<R: Send + 'static>(
        &self,
        f: impl for<'c> FnOnce(&'c mut ClientWrapper) -> BoxFuture<'c, Result<R, StoreError>>
        + Send
        + 'static,
    ) -> Result<R, StoreError> {
        pool::call(&self.pool, &self.runtime, f)
    }
}

/// Every row (`id, doc`) decoded; undecodable ones are logged and skipped.
fn docs<T: DeserializeOwned>(rows: Vec<Row>, what: &'static str) -> Vec<T> {
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let id: String = row.get(0);
        match doc(&id, &row, 1) {
            Ok(r) => out.push(r),
            Err(e) => tracing::error!(error = %e, "skipping undecodable {what} record"),
        }
    }
    out
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
fn pg_error(e: tokio_postgres::Error) -> StoreError {
    classify(&e)
}

/// [`pg_error`] of a borrowed error.
fn classify(e: &tokio_postgres::Error) -> StoreError {
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
