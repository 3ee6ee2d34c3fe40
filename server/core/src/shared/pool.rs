//! The pool: this node's render slots and the work they run: the fair queue, the cancel
//! flags of running renders, the renders another node took over, and the shutdown flag.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::fair_queue::FairQueue;
use crate::sync::lock;

/// Slots and running work (see the module documentation).
pub(crate) struct Pool {
    /// This node's name in work leases (`Config::node_name`).
    pub node: String,
    /// Renders waiting for a worker, fair between principals.
    pub queue: FairQueue,
    /// Cancel flags of renders a worker is running.
    pub running: Mutex<HashMap<String, Arc<AtomicBool>>>,
    /// Cancel flags of the segments this node's workers render, by (render id, index) (see
    /// `worker::segment_work`).
    pub segments: Mutex<HashMap<(String, u32), Arc<AtomicBool>>>,
    /// Renders this node was running when another node took their lease over (cluster mode):
    /// their workers stop without writing anything.
    pub lost: Mutex<HashSet<String>>,
    shutdown: AtomicBool,
    /// Long renders this node's workers are running (the worker's short lane works
    /// only while there is one).
    pub long_running: AtomicUsize,
    /// Workers waiting on the local queue right now (a speculative render gives its slot up
    /// when more renders are queued than this).
    pub idle_workers: AtomicUsize,
}

impl Pool {
    pub fn new(node: String) -> Self {
        Pool {
            node,
            queue: FairQueue::default(),
            running: Mutex::new(HashMap::new()),
            segments: Mutex::new(HashMap::new()),
            lost: Mutex::new(HashSet::new()),
            shutdown: AtomicBool::new(false),
            long_running: AtomicUsize::new(0),
            idle_workers: AtomicUsize::new(0),
        }
    }

    /// Whether the service is stopping.
    pub fn stopping(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }

    /// Stops the pool: no more work is taken, and every running render's cancel flag is
    /// raised (they stop at their next frame; their records stay unfinished and boot recovery
    /// restarts them).
    pub fn stop(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
        for flag in lock(&self.running).values() {
            flag.store(true, Ordering::SeqCst);
        }
        for flag in lock(&self.segments).values() {
            flag.store(true, Ordering::SeqCst);
        }
    }

    /// The shutdown flag itself, for loops that watch it (the cluster's change feed).
    pub fn shutdown_flag(&self) -> &AtomicBool {
        &self.shutdown
    }

    /// Raises the cancel flag of `id`, and of its segments, where workers here run them;
    /// whether one does.
    pub fn cancel_running(&self, id: &str) -> bool {
        let mut found = match lock(&self.running).get(id) {
            Some(flag) => {
                flag.store(true, Ordering::SeqCst);
                true
            }
            None => false,
        };
        for ((render, _), flag) in lock(&self.segments).iter() {
            if render == id {
                flag.store(true, Ordering::SeqCst);
                found = true;
            }
        }
        found
    }

    /// Whether another node took `id` over from this one.
    pub fn is_lost(&self, id: &str) -> bool {
        lock(&self.lost).contains(id)
    }
}
