//! The segments of renders split across the farm (`crate::segment`), and the farm's idle
//! slots. A segment row keeps the whole record in columns (every change is one statement of
//! SQL); its lease follows the render queue's rules exactly ([`lease_free`]: the database's
//! clock, the grace after a restart of the database), claims take rows `FOR UPDATE SKIP
//! LOCKED`, and the holder's writes are fenced by `attempts`, the claim count.

use std::time::Duration;

use postgres::Row;
use tokio_postgres::Transaction;
use vidforge_media::SegmentSpan;

use super::queue::lease_free;
use super::statement::params;
use super::{DB_NOW_MS, PgStore, StoreError, pg_error, to_i64};
use crate::segment::STOPPED_TEMPLATE;
use crate::{SegmentHold, SegmentRecord, SegmentState};

/// A segment's columns, in [`segment`]'s order.
const COLUMNS: &str = "render_id, idx, count, principal, start_pts, end_pts, start_seconds,
    end_seconds, frames, state, attempts, frames_done, output, error, created_at, lease_owner,
    lease_until, quality";
/// The segment `($1, $2)` while the holder of attempt `$3` runs it.
const HELD: &str = "render_id = $1 AND idx = $2 AND state = 'running' AND attempts = $3";
/// A write that ends the holder's lease.
const CLEAR_LEASE: &str = "lease_owner = NULL, lease_until = NULL";
/// Advisory lock class of segment creation (with the render id's hash): one creator per
/// render at a time ("vgsg").
const CREATE_LOCK: i32 = 0x7667_7367;
/// A node whose heartbeat ended this long ago (ms) is forgotten.
const FORGET_NODE_MS: i64 = 3_600_000;

/// Segments a worker may take: queued, or running under a lease that is free (`$2`: the
/// lease's length), see [`lease_free`]; with `$3` set, only that render's; `attempts` below
/// (`<`) or at the budget (`>=`) `$4`.
fn claimable(alias: &str, attempts: &str) -> String {
    format!(
        "{alias}state IN ('queued', 'running') AND {}
         AND ($3::text IS NULL OR {alias}render_id = $3) AND {alias}attempts {attempts} $4",
        lease_free("$2")
    )
}

impl PgStore {
    /// One transaction under the render's advisory lock: the rows are inserted only when it
    /// has none; either way its rows come back.
    pub(crate) fn create_segments(
        &self,
        render_id: &str,
        segments: &[SegmentRecord],
    ) -> Result<Vec<SegmentRecord>, StoreError> {
        let (render_id, segments) = (render_id.to_string(), segments.to_vec());
        let rows = self.call(move |c| {
            Box::pin(async move {
                let tx = c.transaction().await.map_err(pg_error)?;
                tx.execute(
                    "SELECT pg_advisory_xact_lock($1, hashtext($2))",
                    &[&CREATE_LOCK, &render_id],
                )
                .await
                .map_err(pg_error)?;
                let some = tx
                    .query_opt(
                        "SELECT 1 FROM segments WHERE render_id = $1 LIMIT 1",
                        &[&render_id],
                    )
                    .await
                    .map_err(pg_error)?;
                if some.is_none() {
                    insert_segments(&tx, &segments).await?;
                }
                let rows = tx
                    .query(
                        &format!(
                            "SELECT {COLUMNS} FROM segments WHERE render_id = $1 ORDER BY idx"
                        ),
                        &[&render_id],
                    )
                    .await
                    .map_err(pg_error)?;
                tx.commit().await.map_err(pg_error)?;
                Ok(rows)
            })
        })?;
        rows.iter().map(segment).collect()
    }

    pub(crate) fn segments(&self, render_id: &str) -> Result<Vec<SegmentRecord>, StoreError> {
        let rows = self.query(
            format!("SELECT {COLUMNS} FROM segments WHERE render_id = $1 ORDER BY idx"),
            params![render_id.to_string()],
        )?;
        rows.iter().map(segment).collect()
    }

    /// One statement: the claimable segments out of attempts are failed (a data-modifying
    /// `WITH`), and the fairest of the others is claimed: the fewest live leases in its
    /// render, then the oldest, then by index. Rows another claim holds are skipped.
    pub(crate) fn claim_segment(
        &self,
        node: &str,
        lease: Duration,
        only_render: Option<&str>,
        max_attempts: u32,
    ) -> Result<Option<SegmentRecord>, StoreError> {
        let row = self.query_opt(
            format!(
                "WITH exhausted AS (
                     UPDATE segments SET state = 'failed',
                         error = replace($5, '{{n}}', attempts::text), {CLEAR_LEASE}
                     WHERE (render_id, idx) IN (
                         SELECT render_id, idx FROM segments WHERE {exhausted}
                         FOR UPDATE SKIP LOCKED))
                 UPDATE segments SET state = 'running', attempts = attempts + 1,
                     lease_owner = $1, lease_until = {DB_NOW_MS} + $2
                 WHERE (render_id, idx) = (
                     SELECT c.render_id, c.idx FROM segments c
                     LEFT JOIN (SELECT render_id, count(*) AS running FROM segments
                                WHERE state = 'running' AND lease_until >= {DB_NOW_MS}
                                GROUP BY render_id) r ON r.render_id = c.render_id
                     WHERE {candidate}
                     ORDER BY COALESCE(r.running, 0), c.created_at, c.render_id, c.idx
                     FOR UPDATE OF c SKIP LOCKED
                     LIMIT 1)
                 RETURNING {COLUMNS}",
                exhausted = claimable("", ">="),
                candidate = claimable("c.", "<"),
            ),
            params![
                node.to_string(),
                lease.as_millis() as i64,
                only_render.map(str::to_string),
                i64::from(max_attempts),
                STOPPED_TEMPLATE.to_string(),
            ],
        )?;
        row.as_ref().map(segment).transpose()
    }

    pub(crate) fn renew_segment_leases(
        &self,
        node: &str,
        held: &[(String, u32)],
        lease: Duration,
    ) -> Result<Vec<(String, u32)>, StoreError> {
        let renders: Vec<String> = held.iter().map(|(r, _)| r.clone()).collect();
        let indices: Vec<i64> = held.iter().map(|(_, i)| i64::from(*i)).collect();
        let rows = self.query(
            format!(
                "UPDATE segments SET lease_until = {DB_NOW_MS} + $2
                 WHERE lease_owner = $1 AND state = 'running'
                   AND (render_id, idx) IN (SELECT * FROM unnest($3::text[], $4::bigint[]))
                 RETURNING render_id, idx"
            ),
            params![node.to_string(), lease.as_millis() as i64, renders, indices],
        )?;
        Ok(rows.iter().map(|r| (r.get(0), u32_of(r.get(1)))).collect())
    }

    pub(crate) fn segment_progress(
        &self,
        hold: SegmentHold<'_>,
        frames_done: u64,
    ) -> Result<bool, StoreError> {
        let n = self.execute(
            format!("UPDATE segments SET frames_done = $4 WHERE {HELD}"),
            params![
                hold.render_id.to_string(),
                i64::from(hold.index),
                i64::from(hold.attempt),
                to_i64(frames_done),
            ],
        )?;
        Ok(n == 1)
    }

    pub(crate) fn finish_segment(
        &self,
        hold: SegmentHold<'_>,
        output: &str,
        frames: u64,
        quality: Option<&crate::StoredTally>,
    ) -> Result<bool, StoreError> {
        let n = self.execute(
            format!(
                "UPDATE segments SET state = 'done', output = $4, frames_done = $5, quality = $6,
                     {CLEAR_LEASE}
                 WHERE {HELD}"
            ),
            params![
                hold.render_id.to_string(),
                i64::from(hold.index),
                i64::from(hold.attempt),
                output.to_string(),
                to_i64(frames),
                tally_json(quality)?,
            ],
        )?;
        Ok(n == 1)
    }

    pub(crate) fn fail_segment(
        &self,
        hold: SegmentHold<'_>,
        error: &str,
        max_attempts: u32,
    ) -> Result<Option<SegmentState>, StoreError> {
        let row = self.query_opt(
            format!(
                "UPDATE segments SET error = $4, {CLEAR_LEASE},
                     state = CASE WHEN attempts < $5 THEN 'queued' ELSE 'failed' END
                 WHERE {HELD}
                 RETURNING state"
            ),
            params![
                hold.render_id.to_string(),
                i64::from(hold.index),
                i64::from(hold.attempt),
                error.to_string(),
                i64::from(max_attempts),
            ],
        )?;
        row.map(|r| state_of(hold.render_id, hold.index, r.get(0)))
            .transpose()
    }

    pub(crate) fn release_segment(
        &self,
        node: &str,
        render_id: &str,
        index: u32,
    ) -> Result<(), StoreError> {
        self.execute(
            format!(
                "UPDATE segments SET state = 'queued', {CLEAR_LEASE}
                 WHERE render_id = $2 AND idx = $3 AND state = 'running' AND lease_owner = $1"
            ),
            params![node.to_string(), render_id.to_string(), i64::from(index)],
        )?;
        Ok(())
    }

    pub(crate) fn delete_segments(&self, render_id: &str) -> Result<usize, StoreError> {
        let n = self.execute(
            "DELETE FROM segments WHERE render_id = $1",
            params![render_id.to_string()],
        )?;
        Ok(n as usize)
    }

    pub(crate) fn segmented_renders(&self) -> Result<Vec<String>, StoreError> {
        let rows = self.query(
            "SELECT DISTINCT render_id FROM segments ORDER BY render_id",
            params![],
        )?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Ends `node`'s leases now: a millisecond ago by the database's clock, so they are free
    /// at once, even just after a restart of the database (a lease ended before it started
    /// waits for the grace of [`lease_free`]). The segments stay running until claimed again.
    pub(crate) fn release_node_segments(&self, node: &str) -> Result<usize, StoreError> {
        let n = self.execute(
            format!(
                "UPDATE segments SET lease_until = {DB_NOW_MS} - 1
                 WHERE lease_owner = $1 AND state = 'running'"
            ),
            params![node.to_string()],
        )?;
        Ok(n as usize)
    }

    /// Upserts the node's heartbeat; forgets nodes silent for [`FORGET_NODE_MS`].
    pub(crate) fn report_idle_slots(
        &self,
        node: &str,
        idle: u32,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.execute(
            format!(
                "WITH gone AS (DELETE FROM node_slots WHERE until < {DB_NOW_MS} - $4 AND node <> $1)
                 INSERT INTO node_slots (node, idle, until) VALUES ($1, $2, {DB_NOW_MS} + $3)
                 ON CONFLICT (node) DO UPDATE SET idle = EXCLUDED.idle, until = EXCLUDED.until"
            ),
            params![
                node.to_string(),
                i64::from(idle),
                ttl.as_millis() as i64,
                FORGET_NODE_MS
            ],
        )?;
        Ok(())
    }

    pub(crate) fn idle_slots(&self) -> Result<u32, StoreError> {
        let row = self.query_one(
            format!(
                "SELECT COALESCE(sum(idle), 0)::bigint FROM node_slots WHERE until >= {DB_NOW_MS}"
            ),
            params![],
        )?;
        Ok(u32_of(row.get(0)))
    }
}

/// Inserts `segments` (one prepared statement).
async fn insert_segments(
    tx: &Transaction<'_>,
    segments: &[SegmentRecord],
) -> Result<(), StoreError> {
    let insert = tx
        .prepare(&format!(
            "INSERT INTO segments ({COLUMNS}) VALUES
             ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)"
        ))
        .await
        .map_err(pg_error)?;
    for s in segments {
        let quality = tally_json(s.quality.as_ref())?;
        tx.execute(
            &insert,
            &[
                &s.render_id,
                &i64::from(s.span.index),
                &i64::from(s.count),
                &s.principal,
                &s.span.start_pts,
                &s.span.end_pts,
                &s.span.start_seconds,
                &s.span.end_seconds,
                &to_i64(s.span.frames),
                &s.state.as_str(),
                &i64::from(s.attempts),
                &to_i64(s.frames_done),
                &s.output,
                &s.error,
                &to_i64(s.created_at),
                &s.lease_owner,
                &s.lease_until.map(to_i64),
                &quality,
            ],
        )
        .await
        .map_err(pg_error)?;
    }
    Ok(())
}

/// A row of [`COLUMNS`].
fn segment(row: &Row) -> Result<SegmentRecord, StoreError> {
    let render_id: String = row.get(0);
    let index = u32_of(row.get(1));
    let state = state_of(&render_id, index, row.get(9))?;
    Ok(SegmentRecord {
        count: u32_of(row.get(2)),
        principal: row.get(3),
        span: SegmentSpan {
            index,
            start_pts: row.get(4),
            end_pts: row.get(5),
            start_seconds: row.get(6),
            end_seconds: row.get(7),
            frames: u64_of(row.get(8)),
        },
        state,
        attempts: u32_of(row.get(10)),
        frames_done: u64_of(row.get(11)),
        output: row.get(12),
        error: row.get(13),
        created_at: u64_of(row.get(14)),
        lease_owner: row.get(15),
        lease_until: row.get::<_, Option<i64>>(16).map(u64_of),
        quality: row
            .get::<_, Option<serde_json::Value>>(17)
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| {
                StoreError::Postgres(format!(
                    "segment {index} of {render_id} has an unreadable quality: {e}"
                ))
            })?,
        render_id,
    })
}

/// A segment's quality as the `jsonb` column holds it.
fn tally_json(
    quality: Option<&crate::StoredTally>,
) -> Result<Option<serde_json::Value>, StoreError> {
    quality
        .map(serde_json::to_value)
        .transpose()
        .map_err(|e| StoreError::Postgres(format!("cannot encode a segment's quality: {e}")))
}

/// The state stored as `name` (the table's check admits only [`SegmentState`]'s names).
fn state_of(render_id: &str, index: u32, name: &str) -> Result<SegmentState, StoreError> {
    SegmentState::from_name(name).ok_or_else(|| {
        StoreError::Postgres(format!(
            "segment {index} of {render_id} has an unknown state {name:?}"
        ))
    })
}

/// A stored `bigint` as `u32` (negative: 0; too large: `u32::MAX`).
fn u32_of(v: i64) -> u32 {
    u32::try_from(v.max(0)).unwrap_or(u32::MAX)
}

/// A stored `bigint` as `u64` (negative: 0).
fn u64_of(v: i64) -> u64 {
    v.max(0) as u64
}
