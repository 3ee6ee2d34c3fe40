//! The budget of inline reads: a `resources/read` blob (a watermark preview, a small result)
//! and the MCP App's preview travel inside the JSON answer, which costs a few times their
//! bytes in memory (the file, its base64, the serialized answer). The bytes such reads hold
//! at once are bounded per principal ([`INLINE_BYTES_PER_PRINCIPAL`]) and per node
//! ([`INLINE_BYTES_PER_NODE`]): a read that would pass a bound is refused at once,
//! temporary, with `retry_after_ms` (`rate_limited` for the principal's bound,
//! `service_unavailable` for the node's), so one principal's burst neither grows the node's
//! memory without bound nor starves anyone else. A read reserves what it may read (the file's
//! size where known, else the cap it reads under) and gives it back when its answer is built.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

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

/// The node's inline-read budget (one per MCP front).
#[derive(Debug)]
pub struct InlineBudget {
    per_principal: u64,
    per_node: u64,
    held: Mutex<Held>,
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
}
