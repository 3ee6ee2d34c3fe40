//! The render indexes on PostgreSQL (what they hold: `render_index.rs`), the assets' expiry
//! index, and the queries that read them. Each index is over the row's columns and its `doc`
//! (the render ones partial), and each query repeats its index's expressions and predicate word
//! for word (the constants below), which is what lets the planner use it
//! (`docs/reliability.md` shows the plans). PostgreSQL maintains them in the statement that
//! writes the row, so they are as atomic as the row itself, and stay right whichever build
//! writes the row.
//!
//! | index | rows | order | read by |
//! |---|---|---|---|
//! | `renders_recent` (migration 2) | all | principal, `created_at` | [`PgStore::recent_renders`] |
//! | `renders_unfinished` (migration 1) | unfinished | principal | [`PgStore::unfinished_renders`] |
//! | `renders_results` | finished, result kept | retained since, id | [`PgStore::expired_renders`] |
//! | `renders_tombstones` | finished, result deleted | retained since, id | [`PgStore::expired_renders`] |
//! | `renders_stale_previews` | failed or cancelled, with a preview | id | [`PgStore::stale_previews`] |
//! | `renders_runnable` (migration 1) | queued or running | `created_at` | the work queue's claims |
//! | `renders_awaiting` | awaiting approval | `created_at` | speculative claims |
//! | `renders_leased` | leased | `lease_owner` | a starting node's release of its leases |
//! | `assets_expiry` | every asset | `created_at`, id | [`PgStore::expired_assets`] |
//!
//! The ones without a migration are built at start-up, after the schema's migrations, by [`ensure`]:
//! `CREATE INDEX CONCURRENTLY`, so the nodes already running on the database keep writing
//! meanwhile. A build that was interrupted (its node killed, the server restarted) leaves an
//! invalid index, which the next start drops and builds again; one that completed is left
//! alone, so starting again costs one catalog read per index.

use postgres::types::ToSql;
use tokio_postgres::Client;

use super::queue::{RELEASE_ALL, RUNNABLE_RENDERS, SPECULATION_CANDIDATES, claim_sql};
use super::statement::Params;

use super::statement::params;
use super::{AssetRecord, PgStore, RenderRecord, StoreError, UNFINISHED, docs, pg_error, to_i64};
use crate::{ExpiryCursor, Retained};

/// [`RenderRecord::retained_since`] of a row.
const SINCE: &str = "coalesce((doc->>'finished_at')::bigint, created_at)";
/// Whether a row is finished.
const FINISHED: &str = "state IN ('succeeded', 'failed', 'cancelled')";
/// Whether a row's result was deleted (a tombstone).
const DELETED: &str = "coalesce((doc->>'result_deleted')::boolean, false)";
/// [`AssetRecord::created_at`](crate::AssetRecord) of an asset row.
const ASSET_CREATED: &str = "((doc->>'created_at')::bigint)";
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
fn indexes() -> [(&'static str, String); 6] {
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
        (
            "renders_awaiting",
            "renders (created_at) WHERE state = 'awaiting_approval'".into(),
        ),
        (
            "renders_leased",
            "renders (lease_owner) WHERE lease_owner IS NOT NULL".into(),
        ),
        ("assets_expiry", format!("assets ({ASSET_CREATED}, id)")),
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

/// The statement of [`PgStore::recent_renders`]: `$1` limit, and with a principal `$2` it.
fn recent_sql(of_principal: bool) -> &'static str {
    if of_principal {
        "SELECT id, doc FROM renders WHERE principal = $2
         ORDER BY created_at DESC, id DESC LIMIT $1"
    } else {
        "SELECT id, doc FROM renders ORDER BY created_at DESC, id DESC LIMIT $1"
    }
}

/// The statement of [`PgStore::unfinished_renders`].
fn unfinished_sql() -> String {
    format!("SELECT id, doc FROM renders WHERE state IN {UNFINISHED} ORDER BY created_at, id")
}

/// The statement of [`PgStore::expired_renders`]: `$1` until, `$2` limit, and with a cursor
/// `$3` its time and `$4` its id.
fn expired_sql(stage: Retained, after: bool) -> String {
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

/// The statement of [`PgStore::expired_assets`]: `$1` until, `$2` limit, and with a cursor
/// `$3` its time and `$4` its id.
fn expired_assets_sql(after: bool) -> String {
    let after = if after {
        format!("AND ({ASSET_CREATED}, id) > ($3, $4)")
    } else {
        String::new()
    };
    format!(
        "SELECT id, doc FROM assets WHERE {ASSET_CREATED} <= $1 {after}
         ORDER BY {ASSET_CREATED}, id LIMIT $2"
    )
}

/// The statement of [`PgStore::stale_previews`]: `$1` the id to start after, `$2` limit.
fn stale_sql() -> String {
    format!("SELECT id, doc FROM renders WHERE {STALE_PREVIEW} AND id > $1 ORDER BY id LIMIT $2")
}

/// A limit as PostgreSQL's `bigint`.
fn limit_of(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

impl PgStore {
    /// The newest `limit` renders (of `principal`, or everyone's), newest first.
    pub(crate) fn recent_renders(
        &self,
        principal: Option<&str>,
        limit: usize,
    ) -> Result<Vec<RenderRecord>, StoreError> {
        let sql = recent_sql(principal.is_some());
        let rows = match principal {
            Some(p) => self.query(sql, params![limit_of(limit), p.to_string()]),
            None => self.query(sql, params![limit_of(limit)]),
        }?;
        Ok(docs(rows, "render"))
    }

    /// Every unfinished render, oldest first (each node's index of them is rebuilt from this).
    pub(crate) fn unfinished_renders(&self) -> Result<Vec<RenderRecord>, StoreError> {
        Ok(docs(self.query(unfinished_sql(), params![])?, "render"))
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
        let (until, limit) = (to_i64(until), limit_of(limit));
        let sql = expired_sql(stage, after.is_some());
        let rows = match after {
            Some((since, id)) => {
                self.query(sql, params![until, limit, to_i64(since), id.to_string()])
            }
            None => self.query(sql, params![until, limit]),
        }?;
        Ok(docs(rows, "render"))
    }

    /// Up to `limit` assets created at `until` or before, oldest first (then by id), after
    /// `after`.
    pub(crate) fn expired_assets(
        &self,
        until: u64,
        after: Option<ExpiryCursor<'_>>,
        limit: usize,
    ) -> Result<Vec<AssetRecord>, StoreError> {
        let (until, limit) = (to_i64(until), limit_of(limit));
        let sql = expired_assets_sql(after.is_some());
        let rows = match after {
            Some((ms, id)) => self.query(sql, params![until, limit, to_i64(ms), id.to_string()]),
            None => self.query(sql, params![until, limit]),
        }?;
        Ok(docs(rows, "asset"))
    }

    /// Up to `limit` renders whose preview is to be deleted, by id, after `after`.
    pub(crate) fn stale_previews(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<RenderRecord>, StoreError> {
        let after = after.unwrap_or_default().to_string();
        let rows = self.query(stale_sql(), params![after, limit_of(limit)])?;
        Ok(docs(rows, "render"))
    }

    /// The plans PostgreSQL makes for the render queries (`EXPLAIN`, costs left out; with
    /// `analyze`, run, with their times and buffers), the work queue's and the asset sweep's
    /// included: with `principal`'s listing, and a sweep's batch of 256 (of results and of
    /// assets: everything up to the newest, from a cursor in the middle; of tombstones: up to
    /// the middle). In one transaction, rolled back (an analysed claim takes no lease). For
    /// the docs, and the tests that check each query reads its index.
    pub(crate) fn render_query_plans(
        &self,
        principal: &str,
        analyze: bool,
    ) -> Result<Vec<(&'static str, String)>, StoreError> {
        let principal = principal.to_string();
        self.call(move |c| {
            Box::pin(async move {
                let tx = c.transaction().await.map_err(pg_error)?;
                let times = tx
                    .query_one(
                        &format!(
                            "SELECT coalesce(percentile_disc(0.5) WITHIN GROUP
                                 (ORDER BY {SINCE}), 0), coalesce(max({SINCE}), 0) FROM renders"
                        ),
                        &[],
                    )
                    .await
                    .map_err(pg_error)?;
                let (middle, last): (i64, i64) = (times.get(0), times.get(1));
                let how = if analyze { "ANALYZE, BUFFERS, " } else { "" };
                let (list, batch, lease, none) = (100i64, 256i64, 60_000i64, None::<i64>);
                let queries: Vec<(&'static str, String, Params)> = vec![
                    (
                        "recent_renders",
                        recent_sql(true).into(),
                        params![list, principal],
                    ),
                    ("unfinished_renders", unfinished_sql(), params![]),
                    (
                        "expired_renders (results)",
                        expired_sql(Retained::Result, true),
                        params![last, batch, middle, String::new()],
                    ),
                    (
                        "expired_renders (tombstones)",
                        expired_sql(Retained::Tombstone, false),
                        params![middle, batch],
                    ),
                    ("stale_previews", stale_sql(), params![String::new(), batch]),
                    (
                        "claim",
                        claim_sql(RUNNABLE_RENDERS),
                        params!["plan".to_string(), lease, none],
                    ),
                    (
                        "claim_speculative",
                        claim_sql(SPECULATION_CANDIDATES),
                        params!["plan".to_string(), lease, none],
                    ),
                    (
                        "release_node_leases",
                        RELEASE_ALL.into(),
                        params!["plan".to_string()],
                    ),
                    (
                        "expired_assets",
                        expired_assets_sql(true),
                        params![last, batch, middle, String::new()],
                    ),
                ];
                let mut plans = Vec::new();
                for (name, sql, params) in queries {
                    let refs: Vec<&(dyn ToSql + Sync)> =
                        params.iter().map(|p| &**p as &(dyn ToSql + Sync)).collect();
                    let rows = tx
                        .query(&format!("EXPLAIN ({how}COSTS OFF) {sql}"), &refs)
                        .await
                        .map_err(pg_error)?;
                    let lines: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
                    plans.push((name, lines.join("\n")));
                }
                tx.rollback().await.map_err(pg_error)?;
                Ok(plans)
            })
        })
    }
}
