//! The render indexes on PostgreSQL (what they hold: `render_index.rs`) and the queries that
//! read them. Each index is partial, over the row's columns and its `doc`, and each query
//! repeats its index's expressions and predicate word for word (the constants below), which is
//! what lets the planner use it (`docs/reliability.md` shows the plans). PostgreSQL maintains
//! them in the statement that writes the row, so they are as atomic as the row itself, and
//! stay right whichever build writes the row.
//!
//! | index | rows | order | read by |
//! |---|---|---|---|
//! | `renders_recent` (migration 2) | all | principal, `created_at` | [`PgStore::recent_renders`] |
//! | `renders_unfinished` (migration 1) | unfinished | principal | [`PgStore::unfinished_renders`] |
//! | `renders_results` | finished, result kept | retained since, id | [`PgStore::expired_renders`] |
//! | `renders_tombstones` | finished, result deleted | retained since, id | [`PgStore::expired_renders`] |
//! | `renders_stale_previews` | failed or cancelled, with a preview | id | [`PgStore::stale_previews`] |
//!
//! The last three are built at start-up, after the schema's migrations, by [`ensure`]:
//! `CREATE INDEX CONCURRENTLY`, so the nodes already running on the database keep writing
//! meanwhile. A build that was interrupted (its node killed, the server restarted) leaves an
//! invalid index, which the next start drops and builds again; one that completed is left
//! alone, so starting again costs one catalog read per index.

use tokio_postgres::Client;

use super::statement::params;
use super::{PgStore, RenderRecord, StoreError, UNFINISHED, docs, pg_error};
use crate::{ExpiryCursor, Retained};

/// [`RenderRecord::retained_since`] of a row.
const SINCE: &str = "coalesce((doc->>'finished_at')::bigint, created_at)";
/// Whether a row is finished.
const FINISHED: &str = "state IN ('succeeded', 'failed', 'cancelled')";
/// Whether a row's result was deleted (a tombstone).
const DELETED: &str = "coalesce((doc->>'result_deleted')::boolean, false)";
/// Whether a row's preview is to be deleted.
const STALE_PREVIEW: &str =
    "state IN ('failed', 'cancelled') AND (doc->>'preview_path') IS NOT NULL";

/// The rows of a retention stage.
fn stage_rows(stage: Retained) -> String {
    match stage {
        Retained::Result => format!("{FINISHED} AND NOT {DELETED}"),
        Retained::Tombstone => format!("{FINISHED} AND {DELETED}"),
    }
}

/// The indexes [`ensure`] builds: name and what follows `ON`.
fn indexes() -> [(&'static str, String); 3] {
    [
        (
            "renders_results",
            format!(
                "renders (({SINCE}), id) WHERE {}",
                stage_rows(Retained::Result)
            ),
        ),
        (
            "renders_tombstones",
            format!(
                "renders (({SINCE}), id) WHERE {}",
                stage_rows(Retained::Tombstone)
            ),
        ),
        (
            "renders_stale_previews",
            format!("renders (id) WHERE {STALE_PREVIEW}"),
        ),
    ]
}

/// Builds every index of [`indexes`] that is missing or invalid, on `client` (the migration
/// connection, holding the migrations' advisory lock, outside any transaction). Statements
/// here may take as long as the table needs.
pub(super) async fn ensure(client: &Client) -> Result<(), StoreError> {
    client
        .batch_execute("SET statement_timeout = 0")
        .await
        .map_err(pg_error)?;
    for (name, on) in indexes() {
        let valid = client
            .query_opt(
                "SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass($1)",
                &[&name],
            )
            .await
            .map_err(pg_error)?
            .map(|row| row.get::<_, bool>(0));
        match valid {
            Some(true) => continue,
            Some(false) => {
                tracing::warn!(index = name, "an interrupted index build is started again");
                client
                    .batch_execute(&format!("DROP INDEX CONCURRENTLY IF EXISTS {name}"))
                    .await
                    .map_err(pg_error)?;
            }
            None => {}
        }
        let started = std::time::Instant::now();
        client
            .batch_execute(&format!("CREATE INDEX CONCURRENTLY {name} ON {on}"))
            .await
            .map_err(pg_error)?;
        tracing::info!(
            index = name,
            seconds = started.elapsed().as_secs_f64(),
            "store index built"
        );
    }
    Ok(())
}

impl PgStore {
    /// The newest `limit` renders (of `principal`, or everyone's), newest first.
    pub(crate) fn recent_renders(
        &self,
        principal: Option<&str>,
        limit: usize,
    ) -> Result<Vec<RenderRecord>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = match principal {
            Some(p) => self.query(
                "SELECT id, doc FROM renders WHERE principal = $1
                 ORDER BY created_at DESC, id DESC LIMIT $2",
                params![p.to_string(), limit],
            ),
            None => self.query(
                "SELECT id, doc FROM renders ORDER BY created_at DESC, id DESC LIMIT $1",
                params![limit],
            ),
        }?;
        Ok(docs(rows, "render"))
    }

    /// Every unfinished render, oldest first (each node's index of them is rebuilt from this).
    pub(crate) fn unfinished_renders(&self) -> Result<Vec<RenderRecord>, StoreError> {
        let rows = self.query(
            format!(
                "SELECT id, doc FROM renders WHERE state IN {UNFINISHED}
                 ORDER BY created_at, id"
            ),
            params![],
        )?;
        Ok(docs(rows, "render"))
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
        let (until, limit) = (super::to_i64(until), i64::try_from(limit).unwrap_or(i64::MAX));
        let rows = self.query(expired_sql(stage, after.is_some()), match after {
            Some((since, id)) => {
                params![until, limit, super::to_i64(since), id.to_string()]
            }
            None => params![until, limit],
        })?;
        Ok(docs(rows, "render"))
    }

    /// Up to `limit` renders whose preview is to be deleted, by id, after `after`.
    pub(crate) fn stale_previews(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<RenderRecord>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.query(
            format!(
                "SELECT id, doc FROM renders WHERE {STALE_PREVIEW} AND id > $1
                 ORDER BY id LIMIT $2"
            ),
            params![after.unwrap_or_default().to_string(), limit],
        )?;
        Ok(docs(rows, "render"))
    }
}

/// The statement of [`PgStore::expired_renders`]: `$1` until, `$2` limit, and with a cursor
/// `$3` its time and `$4` its id.
pub(super) fn expired_sql(stage: Retained, after: bool) -> String {
    let after = if after {
        format!("AND ({SINCE}, id) > ($3, $4)")
    } else {
        String::new()
    };
    format!(
        "SELECT id, doc FROM renders WHERE {} AND {SINCE} <= $1 {after}
         ORDER BY {SINCE}, id LIMIT $2",
        stage_rows(stage)
    )
}
