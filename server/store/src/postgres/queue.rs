//! The cluster's work queue: leases on renders, timed by the database's clock.

use std::time::Duration;

use super::statement::params;
use super::{Claim, DB_NOW_MS, PgStore, StoreError};

/// When the database (re)started, in Unix ms: a lease that ran out before it ran out while
/// nobody could renew it.
const DB_START_MS: &str = "(extract(epoch from pg_postmaster_start_time()) * 1000)::bigint";

/// A lease that is free or ran out while its holder could renew it (`lease`: the parameter
/// holding the lease's length, ms): none, or one that ended by the database's clock, unless
/// it ended while the database was down (before it started) and the database has not been
/// up for one more lease since, for a living holder renews it by then. Shared by every
/// claim (renders here, segments in `segments.rs`).
pub(super) fn lease_free(lease: &str) -> String {
    format!(
        "(lease_until IS NULL OR lease_until < {DB_NOW_MS})
         AND (lease_until IS NULL OR lease_until >= {DB_START_MS}
              OR {DB_NOW_MS} >= {DB_START_MS} + {lease})"
    )
}

/// Renders a worker may run: a queued one, or a running one whose holder stopped renewing.
pub(super) const RUNNABLE_RENDERS: &str = "state IN ('queued', 'rendering', 'previewing')";
/// Renders awaiting approval that nobody renders speculatively: none begun, or one whose
/// holder stopped renewing (the record still says `running`).
pub(super) const SPECULATION_CANDIDATES: &str = "state = 'awaiting_approval'
    AND (doc->'speculation' IS NULL OR doc#>>'{speculation,state}' = 'running')";

impl PgStore {
    /// Takes the lease of the oldest render a worker may run (see [`RUNNABLE_RENDERS`]).
    /// `SKIP LOCKED` lets nodes claim side by side without waiting on each other's
    /// candidates. Lease times are the database's clock, so the nodes' clocks need not agree.
    pub(crate) fn claim(
        &self,
        node: &str,
        lease: Duration,
        max_work: Option<u64>,
    ) -> Result<Option<Claim>, StoreError> {
        self.claim_oldest(node, lease, max_work, RUNNABLE_RENDERS)
    }

    /// Takes the lease of the oldest render awaiting approval that nobody renders
    /// speculatively (see [`SPECULATION_CANDIDATES`]), by the same lease rules.
    pub(crate) fn claim_speculative(
        &self,
        node: &str,
        lease: Duration,
    ) -> Result<Option<Claim>, StoreError> {
        self.claim_oldest(node, lease, None, SPECULATION_CANDIDATES)
    }

    /// The lease of the oldest render matching `which` (a constant of this file) whose lease
    /// is free or ran out while its holder could renew it, and (`max_work`) whose estimated
    /// work is at most that.
    fn claim_oldest(
        &self,
        node: &str,
        lease: Duration,
        max_work: Option<u64>,
        which: &'static str,
    ) -> Result<Option<Claim>, StoreError> {
        let lease_ms = lease.as_millis() as i64;
        let max_work = max_work.map(|w| i64::try_from(w).unwrap_or(i64::MAX));
        let row = self.query_opt(
            claim_sql(which),
            params![node.to_string(), lease_ms, max_work],
        )?;
        Ok(row.map(|r| Claim { id: r.get(0) }))
    }

    /// Extends this node's leases on `ids` by `lease` from now; returns the ids it still holds
    /// (a lease lost to another node is not renewed).
    pub(crate) fn renew(
        &self,
        node: &str,
        ids: Vec<String>,
        lease: Duration,
    ) -> Result<Vec<String>, StoreError> {
        let lease_ms = lease.as_millis() as i64;
        let rows = self.query(
            format!(
                "UPDATE renders SET lease_until = {DB_NOW_MS} + $2
                             WHERE lease_owner = $1 AND id = ANY($3)
                             RETURNING id"
            ),
            params![node.to_string(), lease_ms, ids],
        )?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Gives up this node's lease on `id` (the render is finished, waits for a decision, or
    /// was handed back).
    pub(crate) fn release(&self, node: &str, id: &str) -> Result<(), StoreError> {
        self.execute(
            "UPDATE renders SET lease_owner = NULL, lease_until = NULL
                     WHERE id = $1 AND lease_owner = $2",
            params![id.to_string(), node.to_string()],
        )?;
        Ok(())
    }

    /// Gives up every lease `node` holds (at start-up: a node just started runs nothing, so
    /// what its previous life held may be taken over at once instead of after the lease).
    pub(crate) fn release_all(&self, node: &str) -> Result<usize, StoreError> {
        let n = self.execute(RELEASE_ALL, params![node.to_string()])?;
        Ok(n as usize)
    }
}

/// The claim of the oldest render matching `which` (`$1` node, `$2` lease ms, `$3` the most
/// work or NULL): reads `renders_runnable`, or `renders_awaiting` for speculation.
pub(super) fn claim_sql(which: &str) -> String {
    let free = lease_free("$2");
    format!(
        "UPDATE renders SET lease_owner = $1, lease_until = {DB_NOW_MS} + $2
         WHERE id = (
             SELECT id FROM renders
             WHERE {which}
               AND {free}
               AND ($3::bigint IS NULL
                    OR COALESCE((doc->>'estimated_pixel_frames')::bigint, 0) <= $3)
             ORDER BY created_at
             FOR UPDATE SKIP LOCKED
             LIMIT 1)
         RETURNING id"
    )
}

/// Every lease of node `$1` ended (its start): reads `renders_leased`.
pub(super) const RELEASE_ALL: &str = "UPDATE renders SET lease_until = 0 WHERE lease_owner = $1";
