//! The state the service, the worker pool and the maintenance loop share, in three owned
//! parts with one job each: the `ledger` (records and their events), the `pool` (slots
//! and running work) and the `media` side (media and disk).
//!
//! Dependencies point one way: `service` starts `worker` and `maintenance`, and all three use
//! this module; none of them imports the service (so this module links to none of them).

pub(crate) mod ledger;
pub(crate) mod media;
pub(crate) mod pool;

use std::sync::Arc;

use crate::config::Config;
use crate::engine::Renderer;
use crate::error::ServiceError;

pub(crate) use ledger::Ledger;
pub(crate) use media::MediaSide;
pub(crate) use pool::Pool;

/// The change event that stands for every task: changes were missed (the cluster's change
/// feed was down), so every subscriber sends its tasks' current state again.
pub const ANY_TASK: &str = "*";

/// An extra sweep step registered with `RenderService::add_sweeper`: deletes what has
/// expired and returns how many records it removed.
pub type Sweeper = Box<dyn Fn() -> Result<usize, ServiceError> + Send + Sync>;

pub(crate) struct Shared {
    pub config: Arc<Config>,
    pub renderer: Arc<dyn Renderer>,
    pub ledger: Ledger,
    pub pool: Pool,
    pub media: MediaSide,
}

impl Shared {
    /// Queues a render for this node's workers. With a shared store the entry is only a
    /// hint to look now: workers claim renders from the store (the `cluster` module).
    pub fn enqueue(&self, principal: &str, id: &str) {
        self.pool.queue.push(principal, id, self.ledger.is_long(id));
    }
}
