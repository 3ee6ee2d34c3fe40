//! The webhook outbox in PostgreSQL (`webhook_outbox`, migration 5): events inserted with the
//! render change that makes them, claimed under a lease timed by the database's clock
//! (`FOR UPDATE SKIP LOCKED`, so each attempt is one node's), finished only by the holder.

use std::time::Duration;

use deadpool_postgres::GenericClient;
use postgres::types::Json;

use super::statement::params;
use super::{DB_NOW_MS, OutboxEvent, PgStore, StoreError, doc, pg_error, to_i64};
use crate::{Next, OutboxStatus};

/// Inserts a new event (due now by the database's clock) within the caller's transaction.
pub(super) async fn insert_event(
    c: &impl GenericClient,
    event: &OutboxEvent,
) -> Result<(), StoreError> {
    c.execute(
        &format!(
            "INSERT INTO webhook_outbox
                 (id, principal, status, created_at, next_attempt_at, doc)
             VALUES ($1, $2, 'pending', $3, {DB_NOW_MS}, $4)"
        ),
        &[
            &event.id,
            &event.principal,
            &to_i64(event.created_at),
            &Json(event),
        ],
    )
    .await
    .map_err(pg_error)?;
    Ok(())
}

impl PgStore {
    pub(crate) fn claim_webhooks(
        &self,
        node: &str,
        lease: Duration,
        limit: usize,
        skip: &[String],
    ) -> Result<Vec<OutboxEvent>, StoreError> {
        let lease_ms = lease.as_millis() as i64;
        let limit = limit as i64;
        let rows = self.query(
            format!(
                "UPDATE webhook_outbox SET lease_owner = $1,
                                 lease_until = {DB_NOW_MS} + $2
                             WHERE id IN (
                                 SELECT id FROM webhook_outbox
                                 WHERE status = 'pending' AND next_attempt_at <= {DB_NOW_MS}
                                   AND (lease_until IS NULL OR lease_until < {DB_NOW_MS})
                                   AND principal <> ALL($4)
                                 ORDER BY next_attempt_at
                                 FOR UPDATE SKIP LOCKED
                                 LIMIT $3)
                             RETURNING id, doc"
            ),
            params![node.to_string(), lease_ms, limit, skip.to_vec()],
        )?;
        rows.iter()
            .map(|row| doc::<OutboxEvent>(&row.get::<_, String>(0), row, 1))
            .collect()
    }

    pub(crate) fn finish_webhook_attempt(
        &self,
        node: &str,
        event: &OutboxEvent,
        next: &Next,
    ) -> Result<bool, StoreError> {
        let retry_ms = match next {
            Next::Retry(after) => after.as_millis() as i64,
            Next::Delivered | Next::Drop(_) => 0,
        };
        let finished = event.status != OutboxStatus::Pending;
        let n = self.execute(
            format!(
                "UPDATE webhook_outbox SET status = $3, doc = $4,
                                 next_attempt_at = {DB_NOW_MS} + $5,
                                 finished_at = CASE WHEN $6 THEN {DB_NOW_MS} END,
                                 lease_owner = NULL, lease_until = NULL
                             WHERE id = $1 AND lease_owner = $2 AND status = 'pending'"
            ),
            params![
                event.id.clone(),
                node.to_string(),
                event.status.as_str(),
                Json(event.clone()),
                retry_ms,
                finished,
            ],
        )?;
        Ok(n == 1)
    }

    pub(crate) fn recent_webhooks(
        &self,
        principal: Option<&str>,
        limit: usize,
    ) -> Result<Vec<OutboxEvent>, StoreError> {
        let rows = self.query(
            "SELECT id, doc FROM webhook_outbox
                         WHERE $1::text IS NULL OR principal = $1
                         ORDER BY id DESC LIMIT $2",
            params![principal.map(str::to_string), limit as i64],
        )?;
        Ok(rows
            .iter()
            .filter_map(|row| {
                doc(&row.get::<_, String>(0), row, 1)
                    .map_err(|e| tracing::error!(error = %e, "skipping undecodable event"))
                    .ok()
            })
            .collect())
    }

    pub(crate) fn get_webhook(&self, id: &str) -> Result<Option<OutboxEvent>, StoreError> {
        self.query_opt(
            "SELECT doc FROM webhook_outbox WHERE id = $1",
            params![id.to_string()],
        )?
        .map(|row| doc(id, &row, 0))
        .transpose()
    }

    pub(crate) fn remove_finished_webhooks_before(
        &self,
        cutoff_ms: u64,
    ) -> Result<usize, StoreError> {
        let n = self.execute(
            "DELETE FROM webhook_outbox
                         WHERE status <> 'pending' AND finished_at < $1",
            params![to_i64(cutoff_ms)],
        )?;
        Ok(n as usize)
    }
}
