//! The segments' side of [`Store`] (the records: `segment.rs`): each call goes to the
//! backend's own (`sled_segments.rs`, `postgres/segments.rs`), both fencing the holder's
//! writes by its claim (see [`SegmentHold`]). Both backends; the farm's idle slots:
//! PostgreSQL only.

use std::time::Duration;

use crate::handle::Backend;
use crate::segment::check_new;
use crate::{SegmentHold, SegmentRecord, SegmentState, Store, StoreError};

/// Calls the same method on whichever backend's segments this is.
macro_rules! segments {
    ($self:ident, $s:ident => $e:expr) => {
        match &$self.backend {
            Backend::Sled(sled) => {
                let $s = &sled.segments;
                $e
            }
            Backend::Postgres($s) => $e,
        }
    };
}

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
        segments!(self, s => s.create_segments(render_id, segments))
    }

    /// The render's segments, by index.
    pub fn segments(&self, render_id: &str) -> Result<Vec<SegmentRecord>, StoreError> {
        segments!(self, s => s.segments(render_id))
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
        segments!(self, s => s.claim_segment(node, lease, only_render, max_attempts))
    }

    /// Extends `node`'s leases on these `(render_id, index)` segments by `lease`; returns
    /// those it still holds (running, same owner).
    pub fn renew_segment_leases(
        &self,
        node: &str,
        held: &[(String, u32)],
        lease: Duration,
    ) -> Result<Vec<(String, u32)>, StoreError> {
        segments!(self, s => s.renew_segment_leases(node, held, lease))
    }

    /// Records progress, fenced: only while the segment runs under `hold`'s attempt; false
    /// when the holder lost it. Not flushed (losing the last few is harmless).
    pub fn segment_progress(
        &self,
        hold: SegmentHold<'_>,
        frames_done: u64,
    ) -> Result<bool, StoreError> {
        segments!(self, s => s.segment_progress(hold, frames_done))
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
        segments!(self, s => s.finish_segment(hold, output, frames, quality))
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
        segments!(self, s => s.fail_segment(hold, error, max_attempts))
    }

    /// The holder gives the segment back unfinished (shutdown, or its render ended): running
    /// under `node`'s lease → queued, lease cleared, attempts kept; durably.
    pub fn release_segment(
        &self,
        node: &str,
        render_id: &str,
        index: u32,
    ) -> Result<(), StoreError> {
        segments!(self, s => s.release_segment(node, render_id, index))
    }

    /// Deletes every segment of the render (durably); how many.
    pub fn delete_segments(&self, render_id: &str) -> Result<usize, StoreError> {
        segments!(self, s => s.delete_segments(render_id))
    }

    /// The ids of renders that have segments (the sweeper removes those of ended renders).
    pub fn segmented_renders(&self) -> Result<Vec<String>, StoreError> {
        segments!(self, s => s.segmented_renders())
    }

    /// At start-up: this node runs nothing yet, so its running segments may be taken at once
    /// (PostgreSQL: its leases end now; sled, one node: every running segment is queued
    /// again, attempts kept, durably). How many.
    pub fn release_node_segments(&self, node: &str) -> Result<usize, StoreError> {
        segments!(self, s => s.release_node_segments(node))
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
