//! The budget of inline reads: a `resources/read` blob (a watermark preview, a small result)
//! and the MCP App's preview travel inside the JSON answer, which costs a few times their
//! bytes in memory (the file, its base64, the serialized answer, the wire layer's pass over
//! it). The bytes such reads may hold at once are bounded per principal
//! ([`INLINE_BYTES_PER_PRINCIPAL`]) and per node ([`INLINE_BYTES_PER_NODE`]): a read
//! reserves the most it may read (the cap it reads under) before it starts, in the wire layer,
//! and gives it back once its answer has been sent. A read that would pass a bound waits up
//! to [`INLINE_WAIT`] for others to finish, then is refused, temporary, with
//! `retry_after_ms` (`rate_limited` for the principal's bound, `service_unavailable` for the
//! node's): one principal's burst neither grows the node's memory without bound nor starves
//! anyone else.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use vidforge_core::catalog::{
    ErrorCode, INLINE_BYTES_PER_NODE, INLINE_BYTES_PER_PRINCIPAL, INLINE_RETRY_AFTER,
};
use vidforge_http::envelope::Envelope;

/// What inline reads hold now.
#[derive(Debug, Default)]
struct Held {
    total: u64,
    by_principal: HashMap<String, u64>,
}

/// How long a read waits for room in the budget before it is refused.
pub const INLINE_WAIT: Duration = Duration::from_secs(2);

/// The node's inline-read budget (one per MCP front).
#[derive(Debug)]
pub struct InlineBudget {
    per_principal: u64,
    per_node: u64,
    held: Mutex<Held>,
    /// Woken whenever bytes are given back.
    freed: Notify,
}

/// Bytes reserved by one read; given back when dropped.
#[derive(Debug)]
pub struct InlineGrant {
    budget: Arc<InlineBudget>,
    principal: String,
    bytes: u64,
}

/// Why a read was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InlineBusy {
    /// The principal's reads hold its budget.
    Principal,
    /// The node's reads hold its budget.
    Node,
}

impl Default for InlineBudget {
    fn default() -> Self {
        InlineBudget::new(INLINE_BYTES_PER_PRINCIPAL, INLINE_BYTES_PER_NODE)
    }
}

impl InlineBudget {
    pub fn new(per_principal: u64, per_node: u64) -> Self {
        InlineBudget {
            per_principal,
            per_node,
            held: Mutex::new(Held::default()),
            freed: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reserves `bytes` for `principal`'s read, or the bound it would pass.
    pub fn take(self: &Arc<Self>, principal: &str, bytes: u64) -> Result<InlineGrant, InlineBusy> {
        let mut held = self.lock();
        let mine = held.by_principal.get(principal).copied().unwrap_or(0);
        if mine + bytes > self.per_principal {
            return Err(InlineBusy::Principal);
        }
        if held.total + bytes > self.per_node {
            return Err(InlineBusy::Node);
        }
        held.total += bytes;
        *held.by_principal.entry(principal.to_string()).or_default() += bytes;
        Ok(InlineGrant {
            budget: self.clone(),
            principal: principal.to_string(),
            bytes,
        })
    }

    /// [`InlineBudget::take`], waiting up to `wait` for bytes to be given back.
    pub async fn take_within(
        self: &Arc<Self>,
        principal: &str,
        bytes: u64,
        wait: Duration,
    ) -> Result<InlineGrant, InlineBusy> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // Registered before the attempt, so a release between the two is not missed.
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            match self.take(principal, bytes) {
                Ok(grant) => return Ok(grant),
                Err(busy) if tokio::time::Instant::now() >= deadline => return Err(busy),
                Err(_) => {}
            }
            tokio::select! {
                () = freed => {}
                () = tokio::time::sleep_until(deadline) => {}
            }
        }
    }
}

impl Drop for InlineGrant {
    fn drop(&mut self) {
        let mut held = self.budget.lock();
        held.total = held.total.saturating_sub(self.bytes);
        if let Some(mine) = held.by_principal.get_mut(&self.principal) {
            *mine = mine.saturating_sub(self.bytes);
            if *mine == 0 {
                held.by_principal.remove(&self.principal);
            }
        }
        drop(held);
        self.budget.freed.notify_waiters();
    }
}

impl InlineBusy {
    /// The refusal's envelope (temporary, with `retry_after_ms`).
    pub fn envelope(self) -> Envelope {
        let (code, message) = match self {
            InlineBusy::Principal => (
                ErrorCode::RateLimited,
                "This principal's inline reads (previews, blobs) hold as many bytes as they may; \
                 retry shortly, or download the file over HTTP.",
            ),
            InlineBusy::Node => (
                ErrorCode::ServiceUnavailable,
                "The server is answering as many inline reads (previews, blobs) as it may; retry \
                 shortly, or download the file over HTTP.",
            ),
        };
        Envelope::new(code, message).retry_after(Some(INLINE_RETRY_AFTER.as_millis() as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_bounded_per_principal_and_node_and_given_back() {
        let budget = Arc::new(InlineBudget::new(10, 15));
        let a1 = budget.take("alice", 6).unwrap();
        assert_eq!(budget.take("alice", 5).unwrap_err(), InlineBusy::Principal);
        let b1 = budget.take("bob", 9).unwrap();
        assert_eq!(budget.take("carol", 1).unwrap_err(), InlineBusy::Node);
        drop(a1);
        let a2 = budget.take("alice", 6).unwrap();
        drop((a2, b1));
        assert_eq!(budget.lock().total, 0);
        assert!(budget.lock().by_principal.is_empty());
        let env = InlineBusy::Node.envelope();
        assert!(env.temporary);
        assert_eq!(env.retry_after_ms, Some(1000));
    }

    #[tokio::test]
    async fn a_read_waits_for_bytes_given_back_then_gives_up() {
        let budget = Arc::new(InlineBudget::new(10, 10));
        let held = budget.take("alice", 8).unwrap();
        let later = tokio::spawn({
            let budget = budget.clone();
            async move { budget.take_within("alice", 8, Duration::from_secs(5)).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(held);
        assert!(
            later.await.unwrap().is_ok(),
            "the waiting read got the bytes"
        );
        let _held = budget.take("bob", 1).unwrap();
        let refused = budget
            .take_within("carol", 10, Duration::from_millis(50))
            .await;
        assert_eq!(refused.unwrap_err(), InlineBusy::Node);
    }
}
