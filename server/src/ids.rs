//! Opaque, high-entropy handles: `task_…` render ids, `a_…` asset ids, `req_…` request ids
//! (and whatever prefix an MCP extension mints its own task ids with, through [`new_id`]).
//!
//! Each id is 26 Crockford base32 characters, ULID-like: 48 bits of milliseconds (so ids sort
//! roughly by creation) followed by 80 random bits (so they cannot be guessed or enumerated).

use std::time::{SystemTime, UNIX_EPOCH};

/// Prefix of every render id (the render id is also the MCP `taskId`).
pub const RENDER_ID_PREFIX: &str = "task_";
/// Prefix of every asset id.
pub const ASSET_ID_PREFIX: &str = "a_";
/// Prefix of every request id in error envelopes.
pub const REQUEST_ID_PREFIX: &str = "req_";

const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// A fresh id: `prefix` + 26 Crockford base32 characters.
pub fn new_id(prefix: &str) -> String {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let mut random = [0u8; 10];
    fill_random(&mut random);
    let mut value: u128 = u128::from(millis & 0xFFFF_FFFF_FFFF) << 80;
    for (i, b) in random.iter().enumerate() {
        value |= u128::from(*b) << (8 * (9 - i));
    }
    let mut out = String::with_capacity(prefix.len() + 26);
    out.push_str(prefix);
    // 26 chars x 5 bits = 130 bits; the top two are always zero.
    for i in (0..26).rev() {
        let idx = ((value >> (5 * i)) & 0x1F) as usize;
        out.push(CROCKFORD[idx] as char);
    }
    out
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
    match s.strip_prefix(prefix) {
        Some(rest) => rest.len() == 26 && rest.bytes().all(|b| CROCKFORD.contains(&b)),
        None => false,
    }
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
    }
}
