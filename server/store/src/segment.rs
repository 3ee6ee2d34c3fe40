//! Segments of a render (issue #41, segment-parallel rendering): a long render cut at source
//! keyframes into spans, each a durable work item with the render queue's lease and fencing
//! rules. Any idle worker on any node claims one under a lease ([`Store::claim_segment`]),
//! renders it and records it done; a node that dies mid-segment stops renewing, its lease
//! runs out and another node claims the segment again (one more attempt); a failed segment is
//! retried alone up to a budget. The render's coordinator waits for all of them, then joins.
//!
//! `attempts` is the fencing token: every claim adds one, and the holder's writes
//! ([`Store::segment_progress`], [`Store::finish_segment`], [`Store::fail_segment`]) name the
//! claim they belong to ([`SegmentHold`]), so a holder that lost its lease can no longer write.
//!
//! Plain data with serde; the backends: `sled_segments.rs` (one node, local clock) and
//! `postgres/segments.rs` (the farm, the database's clock).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::handle::Backend;
use crate::{Store, StoreError};

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
    pub index: u32,
    /// Segments in the render.
    pub count: u32,
    /// The render's owner.
    pub principal: String,
    /// The media span (opaque to the store).
    pub start_pts: Option<i64>,
    pub end_pts: Option<i64>,
    pub start_seconds: f64,
    pub end_seconds: f64,
    /// Frames expected.
    pub frames: u64,
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
    /// This claim of the segment, for its holder's writes.
    pub fn hold(&self) -> SegmentHold<'_> {
        SegmentHold {
            render_id: &self.render_id,
            index: self.index,
            attempt: self.attempts,
        }
    }

    /// A queued segment, never claimed.
    #[allow(clippy::too_many_arguments)] // the span's fields, named by the caller's API
    pub fn new(
        render_id: &str,
        index: u32,
        count: u32,
        principal: &str,
        start_pts: Option<i64>,
        end_pts: Option<i64>,
        start_seconds: f64,
        end_seconds: f64,
        frames: u64,
        created_at: u64,
    ) -> SegmentRecord {
        SegmentRecord {
            render_id: render_id.to_string(),
            index,
            count,
            principal: principal.to_string(),
            start_pts,
            end_pts,
            start_seconds,
            end_seconds,
            frames,
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
}

/// Refuses a set of segments that are not all `render_id`'s, or repeat an index.
fn check_new(render_id: &str, segments: &[SegmentRecord]) -> Result<(), StoreError> {
    let mut seen = std::collections::HashSet::new();
    for s in segments {
        if s.render_id != render_id {
            return Err(StoreError::Invalid(format!(
                "segment {} of {} given as one of {render_id}",
                s.index, s.render_id
            )));
        }
        if !seen.insert(s.index) {
            return Err(StoreError::Invalid(format!(
                "segment {} of {render_id} given twice",
                s.index
            )));
        }
    }
    Ok(())
}

/// The segments (both backends; the farm's idle slots: PostgreSQL only).
impl Store {
    /// Writes the render's segments atomically and durably (sled is flushed), unless it
    /// already has some: then returns the existing ones unchanged (a coordinator that took a
    /// render over reuses the work done). Returned ordered by index. Segments of another
    /// render, or a repeated index, are refused ([`StoreError::Invalid`]).
    pub fn create_segments(
        &self,
        render_id: &str,
        segments: &[SegmentRecord],
    ) -> Result<Vec<SegmentRecord>, StoreError> {
        check_new(render_id, segments)?;
        each!(self, s => s.create_segments(render_id, segments))
    }

    /// The render's segments, by index.
    pub fn segments(&self, render_id: &str) -> Result<Vec<SegmentRecord>, StoreError> {
        each!(self, s => s.segments(render_id))
    }

    /// Takes the lease (for `lease`) of a segment to run: queued, or running under a lease
    /// that ran out (its node died; on PostgreSQL with the render queue's grace after a
    /// restart of the database, see [`Store::claim`]). Sets it running, adds one to
    /// `attempts` (the token) and records the lease. `only_render`: only that render's
    /// segments (its coordinator helps). Fair order: the segment of the render with the
    /// fewest running segments first, then the oldest (`created_at`), then by index. A
    /// segment whose attempts already reached `max_attempts` is never claimed again: it
    /// becomes failed ("its node stopped N times").
    pub fn claim_segment(
        &self,
        node: &str,
        lease: Duration,
        only_render: Option<&str>,
        max_attempts: u32,
    ) -> Result<Option<SegmentRecord>, StoreError> {
        each!(self, s => s.claim_segment(node, lease, only_render, max_attempts))
    }

    /// Extends `node`'s leases on these `(render_id, index)` segments by `lease`; returns
    /// those it still holds (running, same owner).
    pub fn renew_segment_leases(
        &self,
        node: &str,
        held: &[(String, u32)],
        lease: Duration,
    ) -> Result<Vec<(String, u32)>, StoreError> {
        each!(self, s => s.renew_segment_leases(node, held, lease))
    }

    /// Records progress, fenced: only while the segment runs under `hold`'s attempt; false
    /// when the holder lost it. Not flushed (losing the last few is harmless).
    pub fn segment_progress(
        &self,
        hold: SegmentHold<'_>,
        frames_done: u64,
    ) -> Result<bool, StoreError> {
        each!(self, s => s.segment_progress(hold, frames_done))
    }

    /// Fenced: running under `hold`'s attempt → done (`output`, `frames_done` = `frames`,
    /// its `quality` when measured, lease cleared), durably. False when the holder lost it.
    pub fn finish_segment(
        &self,
        hold: SegmentHold<'_>,
        output: &str,
        frames: u64,
        quality: Option<&crate::StoredTally>,
    ) -> Result<bool, StoreError> {
        each!(self, s => s.finish_segment(hold, output, frames, quality))
    }

    /// Fenced: running under `hold`'s attempt → queued again while `attempts < max_attempts`
    /// (lease cleared, `error` kept), else failed; durably. The new state; `None` when the
    /// holder lost it.
    pub fn fail_segment(
        &self,
        hold: SegmentHold<'_>,
        error: &str,
        max_attempts: u32,
    ) -> Result<Option<SegmentState>, StoreError> {
        each!(self, s => s.fail_segment(hold, error, max_attempts))
    }

    /// The holder gives the segment back unfinished (shutdown, or its render ended): running
    /// under `node`'s lease → queued, lease cleared, attempts kept; durably.
    pub fn release_segment(
        &self,
        node: &str,
        render_id: &str,
        index: u32,
    ) -> Result<(), StoreError> {
        each!(self, s => s.release_segment(node, render_id, index))
    }

    /// Deletes every segment of the render (durably); how many.
    pub fn delete_segments(&self, render_id: &str) -> Result<usize, StoreError> {
        each!(self, s => s.delete_segments(render_id))
    }

    /// The ids of renders that have segments (the sweeper removes those of ended renders).
    pub fn segmented_renders(&self) -> Result<Vec<String>, StoreError> {
        each!(self, s => s.segmented_renders())
    }

    /// At start-up: this node runs nothing yet, so its running segments may be taken at once
    /// (PostgreSQL: its leases end now; sled, one node: every running segment is queued
    /// again, attempts kept, durably). How many.
    pub fn release_node_segments(&self, node: &str) -> Result<usize, StoreError> {
        each!(self, s => s.release_node_segments(node))
    }

    /// `node`'s heartbeat of its idle render slots, valid for `ttl` by the database's clock
    /// (PostgreSQL only).
    pub fn report_idle_slots(
        &self,
        node: &str,
        idle: u32,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.farm()?.report_idle_slots(node, idle, ttl)
    }

    /// The farm's free slots: the idle slots of every node whose heartbeat is live
    /// (PostgreSQL only), to decide whether to split a render.
    pub fn idle_slots(&self) -> Result<u32, StoreError> {
        self.farm()?.idle_slots()
    }

    fn farm(&self) -> Result<&crate::postgres::PgStore, StoreError> {
        match &self.backend {
            Backend::Postgres(p) => Ok(p),
            Backend::Sled(_) => Err(StoreError::Unsupported("the farm's idle slots")),
        }
    }
}
