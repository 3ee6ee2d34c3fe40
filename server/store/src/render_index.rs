//! What the store indexes of a render record, decided once for both backends, so that no
//! read a request, a sweep or a boot makes costs in proportion to every record kept:
//!
//! - **a principal's renders**, newest first (`created_at`, then id): listings and the render
//!   budget read that principal's newest few ([`crate::Store::recent_renders`]);
//! - **unfinished renders** (not terminal), oldest first: boot recovery, a cluster node's
//!   resync and the assets in use read only these ([`crate::Store::unfinished_renders`]);
//! - **finished renders by the time their retention counts from** ([`Retained`], the
//!   record's [`crate::RenderRecord::retained_since`]), one order per stage: the sweeper reads
//!   what has expired, in bounded batches ([`crate::Store::expired_renders`]);
//! - **previews to delete** (a render that ended without a result but still names its
//!   preview): [`crate::Store::stale_previews`].
//!
//! Each backend keeps them in step with the record in the same write: sled in the
//! `render_index` tree, in the record's transaction (`sled_renders.rs`); PostgreSQL in
//! partial indexes over the row (`postgres/indexes.rs`), which the database maintains in the
//! record's own statement. [`Terms`] is the part of a record they are made of, decodable from
//! the stored JSON alone (the sled migration reads no more of a record than this).

use std::borrow::Cow;

use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer};

use crate::{RenderRecord, RenderState};

/// The two stages of a finished render's retention, each an order of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retained {
    /// Its result (files) is kept until `result_ttl` after [`RenderRecord::retained_since`].
    Result,
    /// A tombstone: the result was deleted; the record goes `tombstone_grace` later.
    Tombstone,
}

/// Where a batched read of an expiry order goes on from: the last record read, as
/// ([`RenderRecord::retained_since`], id).
pub type ExpiryCursor<'a> = (u64, &'a str);

/// The fields of a render record its index entries are made of.
#[derive(Debug, Deserialize)]
pub(crate) struct Terms<'a> {
    #[serde(borrow)]
    pub id: Cow<'a, str>,
    #[serde(borrow)]
    pub principal: Cow<'a, str>,
    pub state: RenderState,
    pub created_at: u64,
    #[serde(default)]
    pub finished_at: Option<u64>,
    #[serde(default)]
    pub result_deleted: bool,
    /// Whether the record names a preview (its `preview_path`, present and not null).
    #[serde(default, rename = "preview_path", deserialize_with = "named")]
    has_preview: bool,
}

/// Whether a field holds something other than null (the value itself is skipped, not kept).
fn named<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(Option::<IgnoredAny>::deserialize(d)?.is_some())
}

impl<'a> Terms<'a> {
    /// The terms of `rec`.
    pub fn of(rec: &'a RenderRecord) -> Terms<'a> {
        Terms {
            id: Cow::Borrowed(&rec.id),
            principal: Cow::Borrowed(&rec.principal),
            state: rec.state,
            created_at: rec.created_at,
            finished_at: rec.finished_at,
            result_deleted: rec.result_deleted,
            has_preview: rec.preview_path.is_some(),
        }
    }

    /// The terms of a stored record (its JSON).
    pub fn decode(id: &str, json: &'a [u8]) -> Result<Terms<'a>, crate::StoreError> {
        serde_json::from_slice(json).map_err(|source| crate::StoreError::Decode {
            key: id.to_string(),
            source,
        })
    }

    /// Not terminal: in the unfinished index.
    pub fn unfinished(&self) -> bool {
        !self.state.is_terminal()
    }

    /// The retention stage of a finished render, and the time it counts from; `None` while
    /// it runs.
    pub fn retained(&self) -> Option<(Retained, u64)> {
        if !self.state.is_terminal() {
            return None;
        }
        let since = crate::render::retained_since(self.finished_at, self.created_at);
        Some(if self.result_deleted {
            (Retained::Tombstone, since)
        } else {
            (Retained::Result, since)
        })
    }

    /// Ended without a result (failed, cancelled) and still names a preview: the sweeper
    /// deletes it.
    pub fn stale_preview(&self) -> bool {
        matches!(self.state, RenderState::Failed | RenderState::Cancelled) && self.has_preview
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::sample;

    #[test]
    fn terms_decoded_from_json_match_the_record() {
        let mut rec = sample("task_t");
        rec.preview_path = Some("/p/preview.png".into());
        let json = serde_json::to_vec(&rec).unwrap();
        let decoded = Terms::decode(&rec.id, &json).unwrap();
        let of = Terms::of(&rec);
        for t in [&decoded, &of] {
            assert_eq!((t.id.as_ref(), t.principal.as_ref()), ("task_t", "alice"));
            assert!(!t.unfinished() && t.stale_preview());
            assert_eq!(t.retained(), Some((Retained::Result, 3)));
        }
        rec.preview_path = None;
        rec.result_deleted = true;
        rec.finished_at = None;
        let json = serde_json::to_vec(&rec).unwrap();
        let decoded = Terms::decode(&rec.id, &json).unwrap();
        assert!(!decoded.stale_preview() && !Terms::of(&rec).stale_preview());
        assert_eq!(decoded.retained(), Some((Retained::Tombstone, 1)));
        rec.state = RenderState::AwaitingApproval;
        assert!(Terms::of(&rec).unfinished() && Terms::of(&rec).retained().is_none());
    }
}
