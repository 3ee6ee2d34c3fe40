//! Cluster mode: what a node does beside serving when its store is shared (PostgreSQL).
//!
//! - **Claims.** Workers take renders from the shared queue with a lease
//!   ([`crate::store::Store::claim`], `FOR UPDATE SKIP LOCKED`) instead of from this
//!   process's queue, which only wakes them early (`claim_next`).
//! - **Leases.** Every `lease_ttl / 3` the node extends the leases of the renders it runs. A
//!   node that dies stops renewing; when its leases run out another node claims the render,
//!   counts the crash and starts it over (a render that took down `max_render_crashes`
//!   nodes fails with `render_failed`). A lease this node lost (it could not renew in time)
//!   stops its worker without writing anything.
//! - **Changes.** One connection LISTENs for every committed change of a render record (any
//!   node's): the record is re-read into this node's index (quotas, approval deadlines,
//!   assets in use), a running render's cancel (or a speculative one's end) reaches its worker, and `subscriptions/listen`
//!   streams on this node hear about renders that run elsewhere. After the connection is
//!   re-opened (PostgreSQL restarted) the index is rebuilt from the store.

use std::collections::HashSet;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::ServiceError;
use crate::shared::Shared;
use crate::store::StoreEvent;
use crate::sync::lock;

/// In a shared media dir, an upload temporary is a crash's leftover only after this long
/// without a write (uploads in flight write at least every `body_idle_timeout`).
pub const PARTIAL_UPLOAD_MIN_AGE: Duration = Duration::from_secs(15 * 60);
/// How long an idle worker waits for a hint before asking the store again.
const CLAIM_POLL: Duration = Duration::from_millis(500);
/// How long a worker waits after the store failed to answer a claim.
const CLAIM_BACKOFF: Duration = Duration::from_secs(1);

/// Starts the lease keeper and the change listener.
pub(crate) fn spawn(shared: &Arc<Shared>) -> Result<Vec<JoinHandle<()>>, ServiceError> {
    let keeper = {
        let shared = shared.clone();
        std::thread::Builder::new()
            .name("vidforge-leases".into())
            .spawn(move || keep_leases(&shared))?
    };
    let listener = {
        let shared = shared.clone();
        std::thread::Builder::new()
            .name("vidforge-changes".into())
            .spawn(move || follow_changes(&shared))?
    };
    Ok(vec![keeper, listener])
}

/// The next render this worker holds the lease of. After a claim that found nothing
/// (`idle`), it first waits up to [`CLAIM_POLL`] for a hint (this node queued something: the
/// local queue's entries are hints to look now); while there is work it claims at once.
pub(crate) fn claim_next(shared: &Shared, idle: bool) -> Option<String> {
    if idle {
        let _hint = shared.pool.queue.pop_timeout(CLAIM_POLL);
    }
    if shared.pool.stopping() {
        return None;
    }
    match shared
        .ledger
        .store
        .claim(&shared.pool.node, shared.config.lease_ttl)
    {
        Ok(claim) => claim.map(|c| c.id),
        Err(e) => {
            tracing::warn!(error = %e, "claiming work from the store failed; retrying");
            std::thread::sleep(CLAIM_BACKOFF);
            None
        }
    }
}

/// The short lane's next render in a cluster: one whose estimated work is short, claimed from
/// the shared queue (waiting up to [`CLAIM_POLL`] between looks).
pub(crate) fn claim_short(shared: &Shared) -> Option<String> {
    match shared.ledger.store.claim_short(
        &shared.pool.node,
        shared.config.lease_ttl,
        shared.config.long_render_pixel_frames(),
    ) {
        Ok(Some(claim)) => Some(claim.id),
        Ok(None) => {
            std::thread::sleep(CLAIM_POLL);
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, "claiming short work from the store failed; retrying");
            std::thread::sleep(CLAIM_BACKOFF);
            None
        }
    }
}

/// Gives up this node's lease once its worker is done with a render.
pub(crate) fn release(shared: &Shared, id: &str) {
    lock(&shared.pool.lost).remove(id);
    if let Err(e) = shared.ledger.store.release_lease(&shared.pool.node, id) {
        // It runs out by itself; another node may then claim a finished render, which its
        // claim step sees as terminal and leaves alone.
        tracing::warn!(render_id = %id, error = %e, "releasing the lease failed");
    }
}

fn keep_leases(shared: &Shared) {
    let every = shared.config.lease_ttl / 3;
    let mut last = Instant::now();
    while !shared.pool.stopping() {
        std::thread::sleep(Duration::from_millis(100).min(every));
        if last.elapsed() < every {
            continue;
        }
        last = Instant::now();
        let ids: Vec<String> = lock(&shared.pool.running).keys().cloned().collect();
        if ids.is_empty() {
            continue;
        }
        match shared.ledger.store.renew_leases(
            &shared.pool.node,
            ids.clone(),
            shared.config.lease_ttl,
        ) {
            Ok(held) => {
                let held: HashSet<String> = held.into_iter().collect();
                for id in ids.into_iter().filter(|id| !held.contains(id)) {
                    tracing::warn!(render_id = %id, "lost the lease of a running render to another node; stopping it here");
                    lock(&shared.pool.lost).insert(id.clone());
                    shared.pool.cancel_running(&id);
                }
            }
            Err(e) => tracing::warn!(error = %e, "renewing leases failed; retrying"),
        }
    }
}

fn follow_changes(shared: &Shared) {
    let result = shared.ledger.store.watch(shared.pool.shutdown_flag(), |event| match event {
        StoreEvent::Changed(id) => {
            match shared.ledger.store.get_render(&id) {
                Ok(Some(rec)) => {
                    shared.ledger.index(&rec);
                    // A cancel, or an end reached elsewhere (a speculative render's
                    // rejection or timeout).
                    if rec.cancel_requested || rec.is_terminal() {
                        shared.pool.cancel_running(&id);
                    }
                }
                Ok(None) => {
                    lock(&shared.ledger.active).remove(&id);
                }
                Err(e) => tracing::warn!(render_id = %id, error = %e, "re-reading a changed render failed"),
            }
            shared.ledger.notify(&id);
        }
        StoreEvent::Resync => match shared.ledger.store.unfinished_renders() {
            Ok(records) => {
                lock(&shared.ledger.active).clear();
                for rec in &records {
                    shared.ledger.index(rec);
                }
                // Every listener sends its tasks again, not only the unfinished ones: a
                // render created and ended while the feed was down (a speculative render is
                // published in one write) would otherwise never reach its listeners here.
                shared.ledger.notify_all();
            }
            Err(e) => tracing::warn!(error = %e, "rebuilding the render index failed"),
        },
    });
    if let Err(e) = result {
        tracing::error!(error = %e, "cannot follow the store's changes");
    }
}
