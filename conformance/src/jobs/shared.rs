//! The state every job handle and running job shares: the store, the server's flush, clock,
//! task broadcast and TTL, and the live (running) jobs' cancel and wake-up signals.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use vidforge_core::clock::{SharedClock, add_ms};
use vidforge_core::store::StoreError;

use super::error::JobError;
use super::record::JobRecord;
use super::store::JobStore;

/// Makes every previous write durable (blocking).
pub type FlushFn = Arc<dyn Fn() -> Result<(), StoreError> + Send + Sync>;
/// Announces a change of job `id` to `notifications/tasks` subscribers.
pub type PublishFn = Arc<dyn Fn(&str) + Send + Sync>;

/// What the job layer needs from the server.
pub struct JobsParts {
    pub store: JobStore,
    pub flush: FlushFn,
    pub clock: SharedClock,
    pub publish: PublishFn,
    /// How long a job stays readable after creation (the task TTL).
    pub ttl: Duration,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub(super) struct Live {
    pub(super) cancel: CancellationToken,
    /// Woken when answers arrive.
    pub(super) input: Notify,
}

pub(super) struct Inner {
    pub(super) store: JobStore,
    pub(super) flush: FlushFn,
    pub(super) clock: SharedClock,
    pub(super) publish: PublishFn,
    pub(super) ttl: Duration,
    pub(super) live: Mutex<HashMap<String, Arc<Live>>>,
}

impl Inner {
    pub(super) fn now(&self) -> u64 {
        self.clock.now_ms()
    }

    pub(super) fn live(&self, id: &str) -> Option<Arc<Live>> {
        lock(&self.live).get(id).cloned()
    }

    pub(super) fn publish(&self, id: &str) {
        (self.publish)(id);
    }

    pub(super) async fn flush(&self) -> Result<(), JobError> {
        let flush = self.flush.clone();
        tokio::task::spawn_blocking(move || flush())
            .await
            .map_err(|e| JobError::Join(e.to_string()))??;
        Ok(())
    }

    pub(super) fn expired(&self, rec: &JobRecord) -> bool {
        self.now() >= add_ms(rec.created_at, self.ttl)
    }
}
