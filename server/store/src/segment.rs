//! Segments of a render (issue #41, segment-parallel rendering): a long render cut at source
//! keyframes into spans, each a durable work item with the render queue's lease and fencing
//! rules. Any idle worker on any node claims one under a lease
//! ([`Store::claim_segment`](crate::Store::claim_segment)), renders it and records it done;
//! a node that dies mid-segment stops renewing, its lease runs out and another node claims
//! the segment again (one more attempt); a failed segment is retried alone up to a budget.
//! The render's coordinator waits for all of them, then joins.
//!
//! `attempts` is the fencing token: every claim adds one, and the holder's writes (progress,
//! finish, fail) name the claim they belong to ([`SegmentHold`]), so a holder that lost its
//! lease can no longer write.
//!
//! The span a segment covers is media's [`SegmentSpan`], one value from where media plans
//! it to where a worker renders it: the record keeps it flattened, so its fields are stored
//! where they always were (the same JSON keys on sled, the same columns on PostgreSQL).
//!
//! Plain data with serde; [`Store`](crate::Store)'s segment methods are in
//! `store_segments.rs`, the backends in `sled_segments.rs` (one node, local clock) and
//! `postgres/segments.rs` (the farm, the database's clock).

use serde::{Deserialize, Serialize};
pub use vidforge_media::SegmentSpan;

use crate::{RenderRecord, StoreError};

/// The error of a segment that was claimed `max_attempts` times without finishing (`{n}`:
/// the attempts); PostgreSQL fills it in SQL, sled with [`stopped_error`].
pub(crate) const STOPPED_TEMPLATE: &str = "its node stopped {n} times";

/// [`STOPPED_TEMPLATE`] for `attempts`.
pub(crate) fn stopped_error(attempts: u32) -> String {
    STOPPED_TEMPLATE.replace("{n}", &attempts.to_string())
}

/// Where a segment is. Terminal: `Done`, `Failed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SegmentState {
    /// Waiting for a worker (new, failed with attempts left, or given back).
    Queued,
    /// A worker holds its lease (`lease_owner`, `lease_until`).
    Running,
    /// Rendered: `output` names the file.
    Done,
    /// Out of attempts: `error` says why.
    Failed,
}

// Storage names (`queued`, ...).
vidforge_names::enum_names!(SegmentState {
    Queued => "queued",
    Running => "running",
    Done => "done",
    Failed => "failed",
});

impl SegmentState {
    pub fn is_terminal(self) -> bool {
        matches!(self, SegmentState::Done | SegmentState::Failed)
    }
}

/// One segment of a render.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SegmentRecord {
    pub render_id: String,
    /// Segments in the render.
    pub count: u32,
    /// The render's owner.
    pub principal: String,
    /// What of the source it covers (its `index` among the render's segments, its frames
    /// expected), as media planned it; stored as the record's own fields.
    #[serde(flatten, with = "StoredSpan")]
    pub span: SegmentSpan,
    pub state: SegmentState,
    /// Claims so far: the fencing token of the current holder's writes.
    pub attempts: u32,
    pub frames_done: u64,
    /// Stored name (relative path or key) of the finished segment file.
    pub output: Option<String>,
    /// The last failure.
    pub error: Option<String>,
    /// Unix ms.
    pub created_at: u64,
    /// The holder's node and its lease's end (Unix ms); informational (PostgreSQL keeps them
    /// as columns, timed by the database's clock).
    pub lease_owner: Option<String>,
    pub lease_until: Option<u64>,
    /// The done segment's quality, when its render measures it (merged at the join).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<crate::StoredTally>,
}

/// What a holder's fenced writes name: the segment and the claim (attempt) they belong to.
/// A holder that lost its lease holds an old attempt, and its writes are refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHold<'a> {
    pub render_id: &'a str,
    pub index: u32,
    pub attempt: u32,
}

impl SegmentRecord {
    /// A queued segment of `render`, never claimed: `span`, one of `count`, created at
    /// `created_at` (Unix ms).
    pub fn new(
        render: &RenderRecord,
        span: SegmentSpan,
        count: u32,
        created_at: u64,
    ) -> SegmentRecord {
        SegmentRecord {
            render_id: render.id.clone(),
            count,
            principal: render.principal.clone(),
            span,
            state: SegmentState::Queued,
            attempts: 0,
            frames_done: 0,
            output: None,
            error: None,
            created_at,
            lease_owner: None,
            lease_until: None,
            quality: None,
        }
    }

    /// This claim of the segment, for its holder's writes.
    pub fn hold(&self) -> SegmentHold<'_> {
        SegmentHold {
            render_id: &self.render_id,
            index: self.span.index,
            attempt: self.attempts,
        }
    }
}

/// How the record stores media's [`SegmentSpan`]: its fields under their own names (a
/// mirror the compiler checks against the type, so the two cannot drift apart).
#[derive(Serialize, Deserialize)]
#[serde(remote = "SegmentSpan")]
struct StoredSpan {
    index: u32,
    /// The media span (opaque to the store).
    start_pts: Option<i64>,
    end_pts: Option<i64>,
    start_seconds: f64,
    end_seconds: f64,
    /// Frames expected.
    frames: u64,
}

/// Refuses a set of segments that are not all `render_id`'s, or repeat an index.
pub(crate) fn check_new(render_id: &str, segments: &[SegmentRecord]) -> Result<(), StoreError> {
    let mut seen = std::collections::HashSet::new();
    for s in segments {
        if s.render_id != render_id {
            return Err(StoreError::Invalid(format!(
                "segment {} of {} given as one of {render_id}",
                s.span.index, s.render_id
            )));
        }
        if !seen.insert(s.span.index) {
            return Err(StoreError::Invalid(format!(
                "segment {} of {render_id} given twice",
                s.span.index
            )));
        }
    }
    Ok(())
}
