//! Opaque, high-entropy handles: `task_…` render ids, `a_…` asset ids, `req_…` request ids
//! (and whatever prefix an MCP extension mints its own task ids with, through [`new_id`]).
//!
//! Each id is a ULID (the `ulid` crate encodes and parses it): 26 Crockford base32 characters,
//! 48 bits of milliseconds (so ids sort roughly by creation) followed by 80 random bits from the
//! OS source (so they cannot be guessed or enumerated).

use std::time::{SystemTime, UNIX_EPOCH};

/// Prefix of every render id (the render id is also the MCP `taskId`).
pub const RENDER_ID_PREFIX: &str = "task_";
/// Prefix of every asset id.
pub const ASSET_ID_PREFIX: &str = "a_";
/// Prefix of every request id in error envelopes.
pub const REQUEST_ID_PREFIX: &str = "req_";

/// A fresh id: `prefix` + a ULID (26 Crockford base32 characters) of the current time and 80
/// bits from the OS random source.
pub fn new_id(prefix: &str) -> String {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let mut random = [0u8; 16];
    fill_random(&mut random[6..]);
    let ulid = ulid::Ulid::from_parts(millis, u128::from_be_bytes(random));
    format!("{prefix}{ulid}")
}

/// A new render id (`task_…`).
pub fn new_render_id() -> String {
    new_id(RENDER_ID_PREFIX)
}

/// A new asset id (`a_…`).
pub fn new_asset_id() -> String {
    new_id(ASSET_ID_PREFIX)
}

/// A new request id (`req_…`) for error envelopes.
pub fn new_request_id() -> String {
    new_id(REQUEST_ID_PREFIX)
}

/// True when `s` has the shape of an id minted with `prefix` (cheap pre-check before a lookup;
/// it also keeps odd strings out of file paths).
pub fn is_well_formed(s: &str, prefix: &str) -> bool {
    // Canonical form only: a ULID that encodes back to exactly these characters.
    s.strip_prefix(prefix)
        .and_then(|rest| {
            ulid::Ulid::from_string(rest)
                .ok()
                .filter(|u| u.to_string() == rest)
        })
        .is_some()
}

pub fn fill_random(buf: &mut [u8]) {
    if getrandom::fill(buf).is_ok() {
        return;
    }
    // The OS source failed (practically never): fall back to std's per-process random hasher
    // keys mixed with a counter, which still gives unpredictable, unique ids.
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    for chunk in buf.chunks_mut(8) {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        let bytes = h.finish().to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_well_formed_and_unique() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            let id = new_render_id();
            assert!(is_well_formed(&id, RENDER_ID_PREFIX), "{id}");
            assert!(seen.insert(id));
        }
        assert!(!is_well_formed("task_../../etc/passwd", RENDER_ID_PREFIX));
        assert!(!is_well_formed("a_0123", ASSET_ID_PREFIX));
        // Only the canonical (upper-case) spelling, and never past the 128-bit range.
        let id = new_asset_id();
        assert!(!is_well_formed(&id.to_lowercase(), ASSET_ID_PREFIX));
        assert!(!is_well_formed(
            "a_ZZZZZZZZZZZZZZZZZZZZZZZZZZ",
            ASSET_ID_PREFIX
        ));
    }
}
