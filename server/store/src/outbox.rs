//! The webhook outbox: one record per event (a render's transition that a principal's
//! endpoint wants to hear of), written in the same transaction as the transition itself
//! ([`Store::update_render_emitting`]), so a `kill -9` between the two cannot lose it. A
//! delivery worker claims due events under a lease (one node per attempt), records each
//! attempt's result, and finishes the event as delivered or dropped.
//!
//! Plain data with serde; the rules (which transitions make events, the retry schedule, the
//! endpoints) are `vidforge_core::webhook`'s. [`Outbox`] is a node's handle on it: exactly
//! what delivery and the dashboard do with it (lease, record an attempt, list).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::SharedClock;
use crate::handle::Backend;
use crate::{Change, RenderRecord, Store, StoreError, Updated};

/// Prefix of every webhook event id (the `webhook-id` header: stable across retries, so a
/// receiver can de-duplicate).
pub const EVENT_ID_PREFIX: &str = "msg_";
/// Attempts a record keeps the details of (the newest).
pub const KEPT_ATTEMPTS: usize = 5;

/// What happened to a render, as a webhook event's `type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventKind {
    /// The watermark preview is ready and waits for a human decision.
    #[serde(rename = "render.input_required")]
    InputRequired,
    #[serde(rename = "render.succeeded")]
    Succeeded,
    /// Ended with an error (a rejected watermark, an approval timeout, a bad source, ...).
    #[serde(rename = "render.failed")]
    Failed,
    #[serde(rename = "render.cancelled")]
    Cancelled,
}

// The event's `type` (`render.succeeded`, ...).
vidforge_names::enum_names!(EventKind {
    InputRequired => "render.input_required",
    Succeeded => "render.succeeded",
    Failed => "render.failed",
    Cancelled => "render.cancelled",
});

impl EventKind {
    /// The kind named `s` leniently (`render.succeeded`; the `render.` prefix may be left
    /// out; spaces around it are ignored).
    pub fn parse_lenient(s: &str) -> Option<EventKind> {
        let s = s.trim();
        let short = s.strip_prefix("render.").unwrap_or(s);
        EventKind::ALL
            .into_iter()
            .find(|k| k.as_str().strip_prefix("render.") == Some(short))
    }
}

/// Where an event is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutboxStatus {
    /// Not yet delivered: due at `next_attempt_at`.
    Pending,
    /// A receiver answered `2xx`.
    Delivered,
    /// Given up: no success within the retry window, or no endpoint for it any more.
    Dropped,
}

vidforge_names::enum_names!(OutboxStatus {
    Pending => "pending",
    Delivered => "delivered",
    Dropped => "dropped",
});

/// One delivery attempt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// Unix ms when it began.
    pub at: u64,
    /// The node that made it.
    pub node: String,
    /// The receiver's HTTP status, when it answered.
    pub status: Option<u16>,
    /// Why it failed without an answer (timeout, connection refused, ...).
    pub error: Option<String>,
    pub millis: u64,
}

impl Attempt {
    /// Unix ms when it ended.
    pub fn ended_at(&self) -> u64 {
        self.at + self.millis
    }

    /// A `2xx` answer.
    pub fn succeeded(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }

    /// The outcome as people read it: `200`, `503`, `timeout`, ...
    pub fn outcome(&self) -> String {
        match (&self.status, &self.error) {
            (Some(s), _) => s.to_string(),
            (None, Some(e)) => e.clone(),
            (None, None) => "no answer".into(),
        }
    }
}

/// One event and its delivery so far.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutboxEvent {
    /// `msg_…`: the `webhook-id` of every attempt.
    pub id: String,
    pub principal: String,
    pub kind: EventKind,
    /// The render as the transition left it (the payload is made from this, whatever
    /// happened to the render since).
    pub render: RenderRecord,
    /// Unix ms of the transition.
    pub created_at: u64,
    pub status: OutboxStatus,
    /// Attempts made.
    pub attempts: u32,
    /// Unix ms of the next attempt (by the writing node's clock; a shared store schedules by
    /// the database's).
    pub next_attempt_at: u64,
    /// The newest [`KEPT_ATTEMPTS`] attempts, oldest first.
    pub last_attempts: Vec<Attempt>,
    /// Unix ms when it was delivered or dropped.
    pub finished_at: Option<u64>,
    /// Why it was dropped.
    pub dropped_reason: Option<String>,
}

impl OutboxEvent {
    /// A new pending event for `render`, due now.
    pub fn new(kind: EventKind, render: &RenderRecord, now: u64) -> OutboxEvent {
        OutboxEvent {
            id: crate::ids::new_id(EVENT_ID_PREFIX),
            principal: render.principal.clone(),
            kind,
            render: render.clone(),
            created_at: now,
            status: OutboxStatus::Pending,
            attempts: 0,
            next_attempt_at: now,
            last_attempts: Vec::new(),
            finished_at: None,
            dropped_reason: None,
        }
    }

    /// Records `attempt` and what follows it.
    pub fn record(&mut self, attempt: Attempt, next: &Next) {
        let now = attempt.ended_at();
        self.attempts += 1;
        self.last_attempts.push(attempt);
        if self.last_attempts.len() > KEPT_ATTEMPTS {
            self.last_attempts.remove(0);
        }
        match next {
            Next::Delivered => {
                self.status = OutboxStatus::Delivered;
                self.finished_at = Some(now);
            }
            Next::Retry(after) => {
                self.next_attempt_at = now + after.as_millis() as u64;
            }
            Next::Drop(reason) => {
                self.status = OutboxStatus::Dropped;
                self.finished_at = Some(now);
                self.dropped_reason = Some(reason.clone());
            }
        }
    }
}

/// What follows an attempt.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    Delivered,
    /// Try again this long after the attempt ended.
    Retry(Duration),
    /// Give up, for this reason.
    Drop(String),
}

impl Store {
    /// [`Store::update_render`] that also writes the event `emit` makes of the record before
    /// and after `f` (when it makes one) into the outbox, in the same transaction: the event
    /// exists exactly when the change does. Not flushed.
    pub fn update_render_emitting<T, E>(
        &self,
        id: &str,
        f: impl FnMut(&mut RenderRecord) -> Result<Change<T>, E>,
        emit: &dyn Fn(&RenderRecord, &RenderRecord) -> Option<OutboxEvent>,
    ) -> Result<Option<Updated<RenderRecord, T>>, E>
    where
        E: From<StoreError>,
    {
        match &self.backend {
            Backend::Sled(s) => s.update_render(id, f, emit),
            Backend::Postgres(p) => {
                // Each PostgreSQL write is durable when it returns: its latency is the flush.
                let start = std::time::Instant::now();
                let out = p.update_render(id, f, emit);
                if matches!(&out, Ok(Some(u)) if u.written) {
                    crate::metrics::store_flush("postgres", start.elapsed());
                }
                out
            }
        }
    }

    /// Takes a lease (for `lease`) on up to `limit` pending events that are due and not held
    /// by a live lease, oldest due first, none of `skip` principals (whose receivers already
    /// have all the deliveries in flight they may). Only the holder records an attempt.
    /// `now` is this node's clock (sled); a shared store times leases by the database's.
    pub fn claim_webhooks(
        &self,
        node: &str,
        now: u64,
        lease: Duration,
        limit: usize,
        skip: &[String],
    ) -> Result<Vec<OutboxEvent>, StoreError> {
        match &self.backend {
            Backend::Sled(s) => s.claim_webhooks(node, now, lease, limit, skip),
            Backend::Postgres(p) => p.claim_webhooks(node, lease, limit, skip),
        }
    }

    /// Records an attempt at `event` (as `event.record` left it) and releases the lease;
    /// false when `node` no longer held it (it ran out and another node took over: that
    /// node's attempt is the one that counts). Durable when it returns.
    pub fn finish_webhook_attempt(
        &self,
        node: &str,
        event: &OutboxEvent,
        next: &Next,
    ) -> Result<bool, StoreError> {
        match &self.backend {
            Backend::Sled(s) => s.finish_webhook_attempt(node, event),
            Backend::Postgres(p) => p.finish_webhook_attempt(node, event, next),
        }
    }

    /// The newest `limit` events (of `principal`, or everyone's), newest first.
    pub fn recent_webhooks(
        &self,
        principal: Option<&str>,
        limit: usize,
    ) -> Result<Vec<OutboxEvent>, StoreError> {
        each!(self, s => s.recent_webhooks(principal, limit))
    }

    /// The event `id`, pending or finished.
    pub fn get_webhook(&self, id: &str) -> Result<Option<OutboxEvent>, StoreError> {
        each!(self, s => s.get_webhook(id))
    }

    /// Deletes delivered and dropped events finished before `cutoff_ms`; returns how many.
    pub fn remove_finished_webhooks_before(&self, cutoff_ms: u64) -> Result<usize, StoreError> {
        each!(self, s => s.remove_finished_webhooks_before(cutoff_ms))
    }
}

/// This node's handle on the webhook outbox (`vidforge_core::RenderService::outbox`):
/// its leases are this node's, timed by this node's clock. Blocking: call it off the async
/// runtime.
#[derive(Clone, Debug)]
pub struct Outbox {
    store: Store,
    clock: SharedClock,
    node: String,
}

impl Outbox {
    /// `node`'s handle on `store`'s outbox, timed by `clock`.
    pub fn new(store: Store, clock: SharedClock, node: String) -> Outbox {
        Outbox { store, clock, node }
    }

    /// Leases up to `limit` due events for `lease`, oldest due first, none of the `skip`
    /// principals' ([`Store::claim_webhooks`]).
    pub fn claim(
        &self,
        lease: Duration,
        limit: usize,
        skip: &[String],
    ) -> Result<Vec<OutboxEvent>, StoreError> {
        let now = self.clock.now_ms();
        self.store
            .claim_webhooks(&self.node, now, lease, limit, skip)
    }

    /// Records an attempt at `event` and releases its lease: false when this node no longer
    /// held it ([`Store::finish_webhook_attempt`]). Durable when it returns.
    pub fn finish_attempt(&self, event: &OutboxEvent, next: &Next) -> Result<bool, StoreError> {
        self.store.finish_webhook_attempt(&self.node, event, next)
    }

    /// The newest `limit` events (of `principal`, or everyone's), newest first.
    pub fn recent(
        &self,
        principal: Option<&str>,
        limit: usize,
    ) -> Result<Vec<OutboxEvent>, StoreError> {
        self.store.recent_webhooks(principal, limit)
    }
}
