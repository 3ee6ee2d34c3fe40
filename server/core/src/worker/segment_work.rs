//! One segment's run: a worker renders a claimed segment of a split render
//! ([`super::segments`]) and records it (`transitions/segments.rs`, every write fenced by
//! its claim's attempt).
//!
//! - **Claim.** A worker that found no render to claim takes a segment of any render (fair
//!   between renders, under a lease like a render's), so renders always come first; a
//!   render's coordinator takes its own render's.
//! - **Lease.** [`keep_leases`] renews the leases of this node's segments every
//!   `lease_ttl / 3` (and, in a cluster, reports this node's idle slots); a lease lost stops
//!   its worker, whose later writes the store refuses.
//! - **Stops.** The render ended or is cancelled (the record says so, or the change feed
//!   raised the flag), the service stops, or, rendered ahead of its approval, real work
//!   waits: the segment goes back to the queue unfinished.
//! - **Writes.** The file is written under `segments/<id>/` with the attempt in its name
//!   (a stale holder never overwrites a newer one's), published (uploaded with a bucket),
//!   and only then recorded done; a failure is recorded and the segment retried on its own
//!   until `segment_attempts`.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::speculation;
use crate::engine::{EngineError, EngineProgress, EngineSegmentReport, FailureKind, RenderPlan};
use crate::shared::Shared;
use crate::store::{RenderState, SegmentRecord, StoreError, StoredTally};
use crate::sync::lock;
use crate::transitions::segments as record;

/// How often a running segment records its progress and looks at its render's record.
const CHECK_EVERY: Duration = Duration::from_millis(500);

/// How a segment's run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Rendered, published and recorded done.
    Done,
    /// The engine failed; recorded (retried, or failed for good).
    Failed,
    /// Stopped before its end (cancel, shutdown, preemption, a lost lease).
    Stopped,
}

/// Tells the farm how many of this node's render slots are idle now (valid for `lease_ttl`):
/// what a worker deciding whether to split counts ([`crate::store::Store::idle_slots`]).
pub(super) fn report_idle_slots(shared: &Shared) -> Result<(), StoreError> {
    let idle = shared.pool.idle_workers.load(Ordering::SeqCst) as u32;
    shared
        .ledger
        .store
        .report_idle_slots(&shared.pool.node, idle, shared.config.lease_ttl)
}

/// A segment of any render for an idle worker, or `None`.
pub(super) fn claim(shared: &Shared) -> Option<SegmentRecord> {
    if shared.pool.stopping() {
        return None;
    }
    match record::claim(shared, None) {
        Ok(seg) => seg,
        Err(e) => {
            tracing::warn!(error = %e, "claiming a segment failed");
            None
        }
    }
}

/// An idle worker's run of `seg`: its render's plan, then [`run`].
pub(super) fn run_claimed(shared: &Shared, seg: &SegmentRecord) {
    let render = match shared.ledger.store.get_render(&seg.render_id) {
        Ok(Some(r)) if !r.is_terminal() && !r.cancel_requested => r,
        // Ended: its segments are of no more use.
        Ok(_) => {
            record::remove(shared, &seg.render_id);
            return;
        }
        Err(e) => {
            tracing::warn!(render_id = %seg.render_id, error = %e, "cannot read a segment's render");
            return record::release(shared, seg);
        }
    };
    match super::build_plan(shared, &render) {
        Ok(plan) => {
            run(shared, &plan, seg, None, &mut |_| {});
        }
        Err(e) => {
            let reason = e.to_string();
            record::fail(shared, seg, &reason);
        }
    }
}

/// Renders `seg` of `plan` and records the outcome. `render_cancel`: the coordinator's own
/// flag (its render is cancelled); `on_frames`: frames rendered so far.
pub(super) fn run(
    shared: &Shared,
    plan: &RenderPlan,
    seg: &SegmentRecord,
    render_cancel: Option<&AtomicBool>,
    on_frames: &mut dyn FnMut(u64),
) -> Outcome {
    let (_running, cancel) = Registration::new(shared, seg);
    let dir = shared.media.segments_dir(&seg.render_id);
    let out = dir.join(file_name(seg));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        record::fail(
            shared,
            seg,
            &format!("cannot create {}: {e}", dir.display()),
        );
        return Outcome::Failed;
    }
    let started = Instant::now();
    let mut watch = Watch::new(shared, seg, render_cancel, &cancel);
    let mut progress = |p: EngineProgress| {
        watch.check(p.frames_done);
        on_frames(p.frames_done);
    };
    let result = catch_unwind(AssertUnwindSafe(|| {
        shared
            .renderer
            .render_segment(plan, &seg.span, &out, &mut progress, &cancel)
    }))
    .unwrap_or_else(|_| {
        Err(EngineError::new(
            FailureKind::RenderFailed,
            "the engine panicked",
        ))
    });
    match result {
        Ok(report) => publish(shared, seg, out, &report, started),
        Err(e) if e.kind == FailureKind::Cancelled => {
            let _ = std::fs::remove_file(&out);
            record::release(shared, seg);
            Outcome::Stopped
        }
        Err(e) => {
            let _ = std::fs::remove_file(&out);
            record::fail(shared, seg, &e.message);
            Outcome::Failed
        }
    }
}

/// A segment's file name: its index and its claim's attempt.
fn file_name(seg: &SegmentRecord) -> String {
    format!(
        "a{}-{}",
        seg.attempts,
        vidforge_media::segment_file_name(seg.span.index)
    )
}

/// Makes the rendered file durable where media lives, then records the segment done.
fn publish(
    shared: &Shared,
    seg: &SegmentRecord,
    out: PathBuf,
    report: &EngineSegmentReport,
    started: Instant,
) -> Outcome {
    let frames = report.frames;
    let stop = || shared.pool.stopping();
    let stored = match shared.media.store.publish_blocking(&out, &stop) {
        Ok(stored) => stored,
        Err(e) => {
            let _ = std::fs::remove_file(&out);
            record::fail(shared, seg, &format!("cannot store the segment: {e}"));
            return Outcome::Failed;
        }
    };
    let stored = stored.to_string_lossy().into_owned();
    let quality = report.quality.as_ref().map(StoredTally::from);
    match record::finish(shared, seg, &stored, frames, quality.as_ref()) {
        Ok(true) => {
            tracing::info!(
                render_id = %seg.render_id,
                segment = seg.span.index + 1,
                of = seg.count,
                frames,
                elapsed_ms = started.elapsed().as_millis() as u64,
                node = %shared.pool.node,
                "segment rendered"
            );
            Outcome::Done
        }
        Ok(false) => {
            // Another worker holds it now; its own file is the one recorded.
            tracing::warn!(render_id = %seg.render_id, segment = seg.span.index + 1, "segment finished after its lease was lost; its file is dropped");
            Outcome::Stopped
        }
        Err(e) => {
            tracing::warn!(render_id = %seg.render_id, error = %e, "cannot record a finished segment; it runs again");
            Outcome::Stopped
        }
    }
}

/// A running segment in the pool's map (its cancel flag, its lease renewed) while it lives.
struct Registration<'a> {
    shared: &'a Shared,
    key: (String, u32),
}

impl<'a> Registration<'a> {
    fn new(shared: &'a Shared, seg: &SegmentRecord) -> (Self, Arc<AtomicBool>) {
        let cancel = Arc::new(AtomicBool::new(shared.pool.stopping()));
        let key = (seg.render_id.clone(), seg.span.index);
        lock(&shared.pool.segments).insert(key.clone(), cancel.clone());
        (Registration { shared, key }, cancel)
    }
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        lock(&self.shared.pool.segments).remove(&self.key);
    }
}

/// What a running segment watches: its render's record and the coordinator's flag (stop),
/// and its progress (recorded, fenced: refused once the lease is lost).
struct Watch<'a> {
    shared: &'a Shared,
    seg: &'a SegmentRecord,
    render_cancel: Option<&'a AtomicBool>,
    cancel: &'a AtomicBool,
    last: Instant,
}

impl<'a> Watch<'a> {
    fn new(
        shared: &'a Shared,
        seg: &'a SegmentRecord,
        render_cancel: Option<&'a AtomicBool>,
        cancel: &'a AtomicBool,
    ) -> Self {
        Watch {
            shared,
            seg,
            render_cancel,
            cancel,
            last: Instant::now(),
        }
    }

    fn check(&mut self, frames_done: u64) {
        if self.render_cancel.is_some_and(|c| c.load(Ordering::SeqCst)) {
            self.cancel.store(true, Ordering::SeqCst);
        }
        if self.last.elapsed() < CHECK_EVERY {
            return;
        }
        self.last = Instant::now();
        if let Some(why) = self.reason_to_stop(frames_done) {
            tracing::info!(render_id = %self.seg.render_id, segment = self.seg.span.index + 1, why, "segment stops");
            self.cancel.store(true, Ordering::SeqCst);
        }
    }

    fn reason_to_stop(&self, frames_done: u64) -> Option<&'static str> {
        let seg = self.seg;
        match record::progress(self.shared, seg, frames_done) {
            Ok(false) => return Some("its lease was lost"),
            Ok(true) => {}
            Err(e) => {
                tracing::warn!(render_id = %seg.render_id, error = %e, "segment progress not recorded")
            }
        }
        match self.shared.ledger.store.get_render(&seg.render_id) {
            Ok(None) => Some("its render is gone"),
            Ok(Some(r)) if r.is_terminal() || r.cancel_requested => Some("its render ended"),
            Ok(Some(r))
                if r.state == RenderState::AwaitingApproval
                    && speculation::work_waiting(self.shared) =>
            {
                Some("real work waits (it was rendered ahead of its approval)")
            }
            _ => None,
        }
    }
}

/// Renews this node's segment leases every `lease_ttl / 3` (a lost one's flag is raised)
/// and, in a cluster, reports this node's idle slots, until the service stops.
pub(crate) fn keep_leases(shared: &Shared) {
    let every = shared.config.lease_ttl / 3;
    let mut last: Option<Instant> = None;
    while !shared.pool.stopping() {
        std::thread::sleep(Duration::from_millis(100).min(every));
        if last.is_some_and(|t| t.elapsed() < every) {
            continue;
        }
        last = Some(Instant::now());
        if shared.ledger.store.is_shared()
            && let Err(e) = report_idle_slots(shared)
        {
            tracing::warn!(error = %e, "reporting idle slots failed");
        }
        let held: Vec<(String, u32)> = lock(&shared.pool.segments).keys().cloned().collect();
        if held.is_empty() {
            continue;
        }
        match record::renew(shared, &held) {
            Ok(still) => {
                for key in held.iter().filter(|k| !still.contains(k)) {
                    tracing::warn!(render_id = %key.0, segment = key.1 + 1, "lost a segment's lease; stopping it here");
                    if let Some(flag) = lock(&shared.pool.segments).get(key) {
                        flag.store(true, Ordering::SeqCst);
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "renewing segment leases failed; retrying"),
        }
    }
}
