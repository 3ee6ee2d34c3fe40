//! The render queue, fair between principals: each principal has its own FIFO and workers
//! take from the principals in turn (round robin). One principal's backlog never keeps
//! another principal's first render waiting behind all of it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crate::shared::lock;

#[derive(Default)]
struct Inner {
    queues: HashMap<String, VecDeque<String>>,
    /// Principals with queued renders, in the order they get their next turn.
    turn: VecDeque<String>,
}

/// Render ids waiting for a worker, grouped by principal.
#[derive(Default)]
pub struct FairQueue {
    inner: Mutex<Inner>,
    ready: Condvar,
}

impl FairQueue {
    /// Queues render `id` of `principal` behind that principal's earlier renders.
    pub fn push(&self, principal: &str, id: &str) {
        let mut inner = lock(&self.inner);
        let queue = inner.queues.entry(principal.to_string()).or_default();
        let was_idle = queue.is_empty();
        queue.push_back(id.to_string());
        if was_idle {
            inner.turn.push_back(principal.to_string());
        }
        drop(inner);
        self.ready.notify_one();
    }

    /// The next render: the front of the queue of the principal whose turn it is. Waits up
    /// to `timeout` for one.
    pub fn pop_timeout(&self, timeout: Duration) -> Option<String> {
        let mut inner = lock(&self.inner);
        if inner.turn.is_empty() {
            inner = self
                .ready
                .wait_timeout_while(inner, timeout, |i| i.turn.is_empty())
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        let principal = inner.turn.pop_front()?;
        let queue = inner.queues.get_mut(&principal)?;
        let id = queue.pop_front();
        if queue.is_empty() {
            inner.queues.remove(&principal);
        } else {
            inner.turn.push_back(principal);
        }
        id
    }

    /// Renders waiting.
    pub fn len(&self) -> usize {
        lock(&self.inner).queues.values().map(VecDeque::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principals_take_turns() {
        let q = FairQueue::default();
        for i in 1..=3 {
            q.push("alice", &format!("a{i}"));
        }
        q.push("bob", "b1");
        q.push("carol", "c1");
        q.push("bob", "b2");
        let order: Vec<String> = std::iter::from_fn(|| q.pop_timeout(Duration::ZERO)).collect();
        assert_eq!(order, ["a1", "b1", "c1", "a2", "b2", "a3"]);
        assert!(q.is_empty());
    }

    #[test]
    fn an_empty_queue_waits_at_most_the_timeout() {
        let q = FairQueue::default();
        let started = std::time::Instant::now();
        assert_eq!(q.pop_timeout(Duration::from_millis(50)), None);
        assert!(started.elapsed() >= Duration::from_millis(50));
        q.push("alice", "a1");
        assert_eq!(q.pop_timeout(Duration::from_secs(5)).as_deref(), Some("a1"));
    }
}
