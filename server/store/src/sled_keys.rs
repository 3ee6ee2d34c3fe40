//! The keys of the sled store's `expiry` tree (`sled_expiry.rs` says what it holds): what the
//! record writers in `sled_store.rs` and `sled_renders.rs` write before each record, and the
//! sweep reads back.

use crate::OutboxEvent;

/// The kinds of record in the `expiry` tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Expiring {
    Asset = b'a' as isize,
    Idempotency = b'i' as isize,
    Webhook = b'w' as isize,
}

/// The entry of the record at `key` of `kind`, expiring from `ms`.
pub(crate) fn expiry_key(kind: Expiring, ms: u64, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(9 + key.len());
    k.push(kind as u8);
    k.extend_from_slice(&ms.to_be_bytes());
    k.extend_from_slice(key);
    k
}

/// The time and the record key of an entry.
pub(crate) fn parts(entry: &[u8]) -> Option<(u64, &[u8])> {
    let ms = u64::from_be_bytes(entry.get(1..9)?.try_into().ok()?);
    Some((ms, &entry[9..]))
}

/// When a finished webhook event expires from.
pub(crate) fn webhook_time(event: &OutboxEvent) -> u64 {
    event.finished_at.unwrap_or(event.created_at)
}
