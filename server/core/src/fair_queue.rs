//! The render queue, fair between principals: each principal has its own FIFO and workers
//! take from the principals in turn (round robin). One principal's backlog never keeps
//! another principal's first render waiting behind all of it.
//!
//! Entries know whether their render is long (estimated work above `long_render_seconds`):
//! the short lane ([`FairQueue::pop_short_timeout`]) takes only short ones, in the same turn
//! order, so a short render never waits behind a long one (see the `worker` module).

use std::collections::{HashMap, VecDeque};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crate::sync::lock;

struct Entry {
    id: String,
    long: bool,
}

#[derive(Default)]
struct Inner {
    queues: HashMap<String, VecDeque<Entry>>,
    /// Principals with queued renders, in the order they get their next turn.
    turn: VecDeque<String>,
}

impl Inner {
    /// Where the next render is: (turn index, position in that principal's queue).
    fn next(&self, short_only: bool) -> Option<(usize, usize)> {
        self.turn.iter().enumerate().find_map(|(i, principal)| {
            let queue = self.queues.get(principal)?;
            let pos = if short_only {
                queue.iter().position(|e| !e.long)?
            } else {
                0
            };
            (pos < queue.len()).then_some((i, pos))
        })
    }

    fn take(&mut self, short_only: bool) -> Option<String> {
        let (i, pos) = self.next(short_only)?;
        let principal = self.turn.remove(i)?;
        let queue = self.queues.get_mut(&principal)?;
        let entry = queue.remove(pos);
        if queue.is_empty() {
            self.queues.remove(&principal);
        } else {
            self.turn.push_back(principal);
        }
        entry.map(|e| e.id)
    }
}

/// Render ids waiting for a worker, grouped by principal.
#[derive(Default)]
pub struct FairQueue {
    inner: Mutex<Inner>,
    ready: Condvar,
}

impl FairQueue {
    /// Queues render `id` of `principal` behind that principal's earlier renders; `long`:
    /// its estimated work is above the long-render threshold.
    pub fn push(&self, principal: &str, id: &str, long: bool) {
        let mut inner = lock(&self.inner);
        let queue = inner.queues.entry(principal.to_string()).or_default();
        let was_idle = queue.is_empty();
        queue.push_back(Entry {
            id: id.to_string(),
            long,
        });
        if was_idle {
            inner.turn.push_back(principal.to_string());
        }
        drop(inner);
        // The short lane may not want it: wake every waiter, not one that might decline.
        self.ready.notify_all();
    }

    /// The next render: the front of the queue of the principal whose turn it is. Waits up
    /// to `timeout` for one.
    pub fn pop_timeout(&self, timeout: Duration) -> Option<String> {
        self.pop_where(timeout, false)
    }

    /// The next short render: the first short render of the first principal in turn order
    /// that has one. Waits up to `timeout` for one.
    pub fn pop_short_timeout(&self, timeout: Duration) -> Option<String> {
        self.pop_where(timeout, true)
    }

    fn pop_where(&self, timeout: Duration, short_only: bool) -> Option<String> {
        let mut inner = lock(&self.inner);
        if inner.next(short_only).is_none() {
            inner = self
                .ready
                .wait_timeout_while(inner, timeout, |i| i.next(short_only).is_none())
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        inner.take(short_only)
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
            q.push("alice", &format!("a{i}"), false);
        }
        q.push("bob", "b1", false);
        q.push("carol", "c1", false);
        q.push("bob", "b2", false);
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
        q.push("alice", "a1", false);
        assert_eq!(q.pop_timeout(Duration::from_secs(5)).as_deref(), Some("a1"));
    }

    #[test]
    fn the_short_lane_skips_long_renders() {
        let q = FairQueue::default();
        q.push("alice", "a-long", true);
        q.push("alice", "a-short", false);
        q.push("bob", "b-long", true);
        q.push("carol", "c-short", false);
        assert_eq!(
            q.pop_short_timeout(Duration::ZERO).as_deref(),
            Some("a-short")
        );
        assert_eq!(
            q.pop_short_timeout(Duration::ZERO).as_deref(),
            Some("c-short")
        );
        assert_eq!(q.pop_short_timeout(Duration::from_millis(20)), None);
        let rest: Vec<String> = std::iter::from_fn(|| q.pop_timeout(Duration::ZERO)).collect();
        assert_eq!(rest, ["b-long", "a-long"]);
    }
}
