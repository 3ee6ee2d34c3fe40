//! The webhook outbox in PostgreSQL (`webhook_outbox`, migration 5): events inserted with the
//! render change that makes them, claimed under a lease timed by the database's clock
//! (`FOR UPDATE SKIP LOCKED`, so each attempt is one node's), finished only by the holder.

use std::time::Duration;

use deadpool_postgres::GenericClient;
use postgres::types::Json;

use super::{DB_NOW_MS, OutboxEvent, PgStore, StoreError, doc, pg_error, to_i64};
use crate::store::{Next, OutboxStatus};

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
    pub(in crate::store) fn claim_webhooks(
        &self,
        node: &str,
        lease: Duration,
        limit: usize,
        skip: &[String],
    ) -> Result<Vec<OutboxEvent>, StoreError> {
        let node = node.to_string();
        let lease_ms = lease.as_millis() as i64;
        let limit = limit as i64;
        let skip = skip.to_vec();
        self.call(move |c| {
            Box::pin(async move {
                let rows = c
                    .query(
                        &format!(
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
                        &[&node, &lease_ms, &limit, &skip],
                    )
                    .await
                    .map_err(pg_error)?;
                rows.iter()
                    .map(|row| doc::<OutboxEvent>(&row.get::<_, String>(0), row, 1))
                    .collect()
            })
        })
    }

    pub(in crate::store) fn finish_webhook_attempt(
        &self,
        node: &str,
        event: &OutboxEvent,
        next: &Next,
    ) -> Result<bool, StoreError> {
        let node = node.to_string();
        let event = event.clone();
        let retry_ms = match next {
            Next::Retry(after) => after.as_millis() as i64,
            Next::Delivered | Next::Drop(_) => 0,
        };
        let finished = event.status != OutboxStatus::Pending;
        self.call(move |c| {
            Box::pin(async move {
                let n = c
                    .execute(
                        &format!(
                            "UPDATE webhook_outbox SET status = $3, doc = $4,
                                 next_attempt_at = {DB_NOW_MS} + $5,
                                 finished_at = CASE WHEN $6 THEN {DB_NOW_MS} END,
                                 lease_owner = NULL, lease_until = NULL
                             WHERE id = $1 AND lease_owner = $2 AND status = 'pending'"
                        ),
                        &[
                            &event.id,
                            &node,
                            &event.status.as_str(),
                            &Json(&event),
                            &retry_ms,
                            &finished,
                        ],
                    )
                    .await
                    .map_err(pg_error)?;
                Ok(n == 1)
            })
        })
    }

    pub(in crate::store) fn recent_webhooks(
        &self,
        principal: Option<&str>,
        limit: usize,
    ) -> Result<Vec<OutboxEvent>, StoreError> {
        let principal = principal.map(str::to_string);
        let limit = limit as i64;
        self.call(move |c| {
            Box::pin(async move {
                let rows = c
                    .query(
                        "SELECT id, doc FROM webhook_outbox
                         WHERE $1::text IS NULL OR principal = $1
                         ORDER BY id DESC LIMIT $2",
                        &[&principal, &limit],
                    )
                    .await
                    .map_err(pg_error)?;
                Ok(rows
                    .iter()
                    .filter_map(|row| {
                        doc(&row.get::<_, String>(0), row, 1)
                            .map_err(|e| tracing::error!(error = %e, "skipping undecodable event"))
                            .ok()
                    })
                    .collect())
            })
        })
    }

    pub(in crate::store) fn get_webhook(
        &self,
        id: &str,
    ) -> Result<Option<OutboxEvent>, StoreError> {
        let id = id.to_string();
        self.call(move |c| {
            Box::pin(async move {
                c.query_opt("SELECT doc FROM webhook_outbox WHERE id = $1", &[&id])
                    .await
                    .map_err(pg_error)?
                    .map(|row| doc(&id, &row, 0))
                    .transpose()
            })
        })
    }

    pub(in crate::store) fn remove_finished_webhooks_before(
        &self,
        cutoff_ms: u64,
    ) -> Result<usize, StoreError> {
        let cutoff = to_i64(cutoff_ms);
        self.call(move |c| {
            Box::pin(async move {
                let n = c
                    .execute(
                        "DELETE FROM webhook_outbox
                         WHERE status <> 'pending' AND finished_at < $1",
                        &[&cutoff],
                    )
                    .await
                    .map_err(pg_error)?;
                Ok(n as usize)
            })
        })
    }
}
