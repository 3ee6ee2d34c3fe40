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

    /// Threads a render (or segment) starting now may use in each of its decoder and its
    /// encoder: the host's cores shared among the renders that will run at once on this
    /// node's `slots` (those running, this one included, and those queued for a free slot).
    /// A render alone uses the whole host (0: its libraries choose, as in a process of its
    /// own); a full node about `cores / slots` each, so the cores stay busy without hundreds
    /// of threads fighting for them.
    pub fn thread_budget(&self, slots: usize) -> u32 {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let running = slots.saturating_sub(self.idle_workers.load(Ordering::SeqCst));
        threads_for(cores, running + self.queue.len(), slots)
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

/// `cores` shared by `demand` renders at once on at most `slots`, at least one thread each;
/// 0 (each library's own choice, as for a render alone in its process) when one render has
/// the host.
fn threads_for(cores: usize, demand: usize, slots: usize) -> u32 {
    let at_once = demand.clamp(1, slots.max(1));
    if at_once == 1 {
        return 0;
    }
    (cores / at_once).clamp(1, 64) as u32
}

#[cfg(test)]
mod tests {
    use super::threads_for;

    #[test]
    fn a_render_alone_takes_the_host_a_full_node_shares_it() {
        assert_eq!(threads_for(16, 1, 8), 0, "alone: the libraries' own choice");
        assert_eq!(threads_for(16, 4, 8), 4);
        assert_eq!(
            threads_for(16, 16, 8),
            2,
            "16 waiting on 8 slots: 8 at once"
        );
        assert_eq!(threads_for(16, 0, 8), 0, "nothing counted: this one alone");
        assert_eq!(threads_for(2, 5, 1), 0, "one slot: the render has the host");
        assert_eq!(threads_for(4, 8, 8), 1, "shared: never 0 ('the machine')");
        assert_eq!(threads_for(256, 2, 2), 64, "bounded");
    }
}
