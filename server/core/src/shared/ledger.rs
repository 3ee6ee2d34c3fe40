//! The ledger: the store (the truth), the clock, the in-memory index of unfinished renders
//! and the change broadcast. Records change only through `crate::transitions`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::broadcast;

use crate::clock::SharedClock;
use crate::config::Config;
use crate::error::ServiceError;
use crate::ids;
use crate::store::{RenderRecord, RenderState, Store};
use crate::sync::lock;

use super::{ANY_TASK, Sweeper};

/// An unfinished render as the index holds it.
#[derive(Clone, Debug)]
pub(crate) struct Active {
    pub principal: String,
    pub state: RenderState,
    pub deadline: Option<u64>,
    /// Estimated work above `long_render_seconds` (the worker's short lane).
    pub long: bool,
    /// Unix ms.
    pub created_at: u64,
    /// Awaiting a decision with no speculative render done or failed: a candidate for one
    /// (unless a worker is running it).
    pub speculate: bool,
    /// Since when this node has seen it queued (a cluster's idle speculations give way to
    /// work that stays queued).
    pub queued_since: Option<Instant>,
}

/// Records and their events (see the module documentation).
pub(crate) struct Ledger {
    config: Arc<Config>,
    pub store: Store,
    pub clock: SharedClock,
    events: broadcast::Sender<String>,
    /// Non-terminal renders (rebuilt from the store at boot).
    pub active: Mutex<HashMap<String, Active>>,
    /// Serialises creation: idempotency lookup, quota check and the durable write are one step.
    pub create_lock: Mutex<()>,
    /// Extra sweep steps (an MCP extension's own expired records), run with every sweep.
    pub sweepers: Mutex<Vec<Sweeper>>,
}

impl Ledger {
    pub fn new(
        config: Arc<Config>,
        store: Store,
        clock: SharedClock,
        events: broadcast::Sender<String>,
    ) -> Self {
        Ledger {
            config,
            store,
            clock,
            events,
            active: Mutex::new(HashMap::new()),
            create_lock: Mutex::new(()),
            sweepers: Mutex::new(Vec::new()),
        }
    }

    pub fn now(&self) -> u64 {
        self.clock.now_ms()
    }

    /// A new receiver of the change broadcast.
    pub fn subscribe(&self) -> broadcast::Receiver<String> {
        self.events.subscribe()
    }

    /// Keeps the in-memory index of non-terminal renders in step with a stored record.
    pub fn index(&self, rec: &RenderRecord) {
        let mut active = lock(&self.active);
        if rec.is_terminal() {
            active.remove(&rec.id);
        } else {
            let queued_since = (rec.state == RenderState::Queued).then(|| {
                active
                    .get(&rec.id)
                    .and_then(|a| a.queued_since)
                    .unwrap_or_else(Instant::now)
            });
            active.insert(
                rec.id.clone(),
                Active {
                    principal: rec.principal.clone(),
                    state: rec.state,
                    deadline: match rec.state {
                        RenderState::AwaitingApproval => rec.approval.as_ref().map(|a| a.deadline),
                        _ => None,
                    },
                    long: rec.estimated_pixel_frames > self.config.long_render_pixel_frames(),
                    created_at: rec.created_at,
                    speculate: rec.awaits_speculation(),
                    queued_since,
                },
            );
        }
    }

    /// Asset id → the unfinished renders that use it, from the index of non-terminal renders
    /// (so it costs a lookup per unfinished render, not a scan of the store). Callers that act
    /// on it hold `create_lock`, so no render starts using an asset meanwhile.
    pub fn assets_in_use(&self) -> Result<HashMap<String, Vec<String>>, ServiceError> {
        let ids: Vec<String> = lock(&self.active).keys().cloned().collect();
        let mut in_use: HashMap<String, Vec<String>> = HashMap::new();
        for id in ids {
            if let Some(rec) = self.store.get_render(&id)?
                && !rec.is_terminal()
            {
                for asset in crate::assets::used_by(&rec) {
                    in_use
                        .entry(asset.to_string())
                        .or_default()
                        .push(id.clone());
                }
            }
        }
        Ok(in_use)
    }

    pub fn notify(&self, id: &str) {
        // No receivers is fine.
        let _ = self.events.send(id.to_string());
    }

    /// Tells every subscriber that any task may have changed (changes were missed: the
    /// cluster's change feed was down), so each sends its tasks' current state again.
    pub fn notify_all(&self) {
        self.notify(ANY_TASK);
    }

    /// Whether an unfinished render's estimated work is above `long_render_seconds` (from the
    /// index; false for renders it does not hold).
    pub fn is_long(&self, id: &str) -> bool {
        lock(&self.active).get(id).is_some_and(|a| a.long)
    }

    /// The webhook event a transition from `old` to `new` makes, if any (`crate::webhook`).
    pub fn webhook_event(
        &self,
        old: &RenderRecord,
        new: &RenderRecord,
        now: u64,
    ) -> Option<crate::store::OutboxEvent> {
        crate::webhook::event_for(&self.config, old, new, now)
    }

    /// The record if it exists and belongs to `principal`; otherwise `NotFound` (the two cases
    /// are indistinguishable on purpose).
    pub fn load_owned(&self, principal: &str, id: &str) -> Result<RenderRecord, ServiceError> {
        if !ids::is_well_formed(id, ids::RENDER_ID_PREFIX) {
            return Err(ServiceError::NotFound);
        }
        match self.store.get_render(id)? {
            Some(r) if r.principal == principal => Ok(r),
            _ => Err(ServiceError::NotFound),
        }
    }
}
