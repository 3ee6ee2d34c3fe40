//! Segments on sled (`segment.rs`): one tree, `segments`, keyed `render_id \0 index` (the
//! index zero-padded to ten digits, so a render's segments are adjacent and in order), each
//! value a JSON [`SegmentRecord`]. One node, so leases are timed by the store's clock (see
//! [`crate::Store::open_with_clock`]); every change is a compare-and-swap through the one
//! read-modify-write loop ([`update_in`]), and every change a client relies on (create,
//! claim, finish, fail, release, delete) is flushed before it returns, so it survives
//! `kill -9`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::clock::{SharedClock, add_ms};
use crate::segment::stopped_error;
use crate::update::{decode_each, encode};
use crate::{Change, SegmentHold, SegmentRecord, SegmentState, StoreError, update_in};

/// The `segments` tree and what its writes need.
#[derive(Clone, Debug)]
pub(crate) struct SegmentTree {
    /// The database, flushed after the writes a client relies on.
    db: sled::Db,
    tree: sled::Tree,
    /// Times the leases.
    clock: SharedClock,
    /// Held while a render's segments are created: "unless it has some" is a read, then a
    /// batch (one process writes this database).
    creating: Arc<Mutex<()>>,
}

impl SegmentTree {
    pub(crate) fn open(db: &sled::Db, clock: SharedClock) -> Result<SegmentTree, StoreError> {
        Ok(SegmentTree {
            db: db.clone(),
            tree: db.open_tree("segments")?,
            clock,
            creating: Arc::default(),
        })
    }
}

/// The key of segment `index` of `render_id`.
fn key(render_id: &str, index: u32) -> String {
    format!("{render_id}\0{index:010}")
}

/// The keys of `render_id`'s segments begin so.
fn prefix(render_id: &str) -> String {
    format!("{render_id}\0")
}

/// Queued, or running under a lease that ran out at `now`.
fn claimable(s: &SegmentRecord, now: u64) -> bool {
    match s.state {
        SegmentState::Queued => true,
        SegmentState::Running => s.lease_until.is_none_or(|until| until < now),
        SegmentState::Done | SegmentState::Failed => false,
    }
}

/// Running under a lease that has not run out at `now`.
fn running(s: &SegmentRecord, now: u64) -> bool {
    s.state == SegmentState::Running && !claimable(s, now)
}

fn clear_lease(s: &mut SegmentRecord) {
    s.lease_owner = None;
    s.lease_until = None;
}

impl SegmentTree {
    fn flush(&self) -> Result<(), StoreError> {
        self.db.flush()?;
        Ok(())
    }

    pub(crate) fn create_segments(
        &self,
        render_id: &str,
        segments: &[SegmentRecord],
    ) -> Result<Vec<SegmentRecord>, StoreError> {
        let _only_us = crate::sync::lock(&self.creating);
        let existing = self.segments(render_id)?;
        if !existing.is_empty() || segments.is_empty() {
            return Ok(existing);
        }
        let mut batch = sled::Batch::default();
        for s in segments {
            batch.insert(key(render_id, s.span.index).as_bytes(), encode(s)?);
        }
        self.tree.apply_batch(batch)?;
        self.flush()?;
        let mut out = segments.to_vec();
        out.sort_by_key(|s| s.span.index);
        Ok(out)
    }

    pub(crate) fn segments(&self, render_id: &str) -> Result<Vec<SegmentRecord>, StoreError> {
        decode_each(self.tree.scan_prefix(prefix(render_id)), "segment")
    }

    /// `only_render`'s segments, or every one.
    fn segments_of(&self, only_render: Option<&str>) -> Result<Vec<SegmentRecord>, StoreError> {
        match only_render {
            Some(r) => self.segments(r),
            None => decode_each(self.tree.iter(), "segment"),
        }
    }

    /// Picks the fairest claimable segment (see [`crate::Store::claim_segment`]) and takes it
    /// by compare-and-swap; when another thread took it first, picks again.
    pub(crate) fn claim_segment(
        &self,
        node: &str,
        lease: Duration,
        only_render: Option<&str>,
        max_attempts: u32,
    ) -> Result<Option<SegmentRecord>, StoreError> {
        loop {
            let now = self.clock.now_ms();
            let Some((render_id, index)) = self.pick(only_render, now, max_attempts)? else {
                return Ok(None);
            };
            let until = add_ms(now, lease);
            let taken = self.change(&render_id, index, true, |s| {
                if !claimable(s, now) || s.attempts >= max_attempts {
                    return false;
                }
                s.state = SegmentState::Running;
                s.attempts = s.attempts.saturating_add(1);
                s.lease_owner = Some(node.to_string());
                s.lease_until = Some(until);
                true
            })?;
            if taken.is_some() {
                return Ok(taken);
            }
        }
    }

    /// The segment to claim at `now`: of the render with the fewest running segments, then
    /// the oldest, then the first. Claimable segments out of attempts are failed on the way.
    fn pick(
        &self,
        only_render: Option<&str>,
        now: u64,
        max_attempts: u32,
    ) -> Result<Option<(String, u32)>, StoreError> {
        let all = self.segments_of(only_render)?;
        let mut busy: HashMap<&str, usize> = HashMap::new();
        for s in all.iter().filter(|s| running(s, now)) {
            *busy.entry(&s.render_id).or_default() += 1;
        }
        let mut best: Option<(usize, u64, &str, u32)> = None;
        for s in all.iter().filter(|s| claimable(s, now)) {
            if s.attempts >= max_attempts {
                self.fail_exhausted(s, now, max_attempts)?;
                continue;
            }
            let rank = (
                busy.get(s.render_id.as_str()).copied().unwrap_or(0),
                s.created_at,
                s.render_id.as_str(),
                s.span.index,
            );
            if best.is_none_or(|b| rank < b) {
                best = Some(rank);
            }
        }
        Ok(best.map(|(_, _, render_id, index)| (render_id.to_string(), index)))
    }

    /// Fails a claimable segment that is out of attempts (durably).
    fn fail_exhausted(
        &self,
        s: &SegmentRecord,
        now: u64,
        max_attempts: u32,
    ) -> Result<(), StoreError> {
        self.change(&s.render_id, s.span.index, true, |s| {
            if !claimable(s, now) || s.attempts < max_attempts {
                return false;
            }
            s.state = SegmentState::Failed;
            s.error = Some(stopped_error(s.attempts));
            clear_lease(s);
            true
        })?;
        Ok(())
    }

    /// Compare-and-swap of one segment: `f` changes it and says whether to write. The record
    /// as written (flushed first when `durable`), or `None` when nothing was.
    fn change(
        &self,
        render_id: &str,
        index: u32,
        durable: bool,
        mut f: impl FnMut(&mut SegmentRecord) -> bool,
    ) -> Result<Option<SegmentRecord>, StoreError> {
        let out = update_in(&self.tree, &key(render_id, index), |s| {
            Ok::<_, StoreError>(match f(s) {
                true => Change::Write(()),
                false => Change::Keep(()),
            })
        })?;
        match out {
            Some(u) if u.written => {
                if durable {
                    self.flush()?;
                }
                Ok(Some(u.record))
            }
            _ => Ok(None),
        }
    }

    /// [`SegmentTree::change`] of a running segment whose holder `holds` it.
    fn change_held(
        &self,
        render_id: &str,
        index: u32,
        durable: bool,
        holds: impl Fn(&SegmentRecord) -> bool,
        mut f: impl FnMut(&mut SegmentRecord),
    ) -> Result<Option<SegmentRecord>, StoreError> {
        self.change(render_id, index, durable, |s| {
            let held = s.state == SegmentState::Running && holds(s);
            if held {
                f(s);
            }
            held
        })
    }

    pub(crate) fn renew_segment_leases(
        &self,
        node: &str,
        held: &[(String, u32)],
        lease: Duration,
    ) -> Result<Vec<(String, u32)>, StoreError> {
        let until = add_ms(self.clock.now_ms(), lease);
        let mut still = Vec::new();
        for (render_id, index) in held {
            let owned = |s: &SegmentRecord| s.lease_owner.as_deref() == Some(node);
            if self
                .change_held(render_id, *index, false, owned, |s| {
                    s.lease_until = Some(until)
                })?
                .is_some()
            {
                still.push((render_id.clone(), *index));
            }
        }
        Ok(still)
    }

    pub(crate) fn segment_progress(
        &self,
        hold: SegmentHold<'_>,
        frames_done: u64,
    ) -> Result<bool, StoreError> {
        let ours = |s: &SegmentRecord| s.attempts == hold.attempt;
        Ok(self
            .change_held(hold.render_id, hold.index, false, ours, |s| {
                s.frames_done = frames_done
            })?
            .is_some())
    }

    pub(crate) fn finish_segment(
        &self,
        hold: SegmentHold<'_>,
        output: &str,
        frames: u64,
        quality: Option<&crate::StoredTally>,
    ) -> Result<bool, StoreError> {
        let ours = |s: &SegmentRecord| s.attempts == hold.attempt;
        let done = self.change_held(hold.render_id, hold.index, true, ours, |s| {
            s.state = SegmentState::Done;
            s.output = Some(output.to_string());
            s.frames_done = frames;
            s.quality = quality.cloned();
            clear_lease(s);
        })?;
        Ok(done.is_some())
    }

    pub(crate) fn fail_segment(
        &self,
        hold: SegmentHold<'_>,
        error: &str,
        max_attempts: u32,
    ) -> Result<Option<SegmentState>, StoreError> {
        let ours = |s: &SegmentRecord| s.attempts == hold.attempt;
        let failed = self.change_held(hold.render_id, hold.index, true, ours, |s| {
            s.state = match s.attempts < max_attempts {
                true => SegmentState::Queued,
                false => SegmentState::Failed,
            };
            s.error = Some(error.to_string());
            clear_lease(s);
        })?;
        Ok(failed.map(|s| s.state))
    }

    pub(crate) fn release_segment(
        &self,
        node: &str,
        render_id: &str,
        index: u32,
    ) -> Result<(), StoreError> {
        let owned = |s: &SegmentRecord| s.lease_owner.as_deref() == Some(node);
        self.change_held(render_id, index, true, owned, queue_again)?;
        Ok(())
    }

    pub(crate) fn delete_segments(&self, render_id: &str) -> Result<usize, StoreError> {
        let mut batch = sled::Batch::default();
        let mut n = 0;
        for item in self.tree.scan_prefix(prefix(render_id)).keys() {
            batch.remove(item?);
            n += 1;
        }
        self.tree.apply_batch(batch)?;
        self.flush()?;
        Ok(n)
    }

    /// One key read per render: after each, the scan skips past that render's keys.
    pub(crate) fn segmented_renders(&self) -> Result<Vec<String>, StoreError> {
        let mut out = Vec::new();
        let mut from = Vec::new();
        while let Some(k) = self.tree.range(from.clone()..).keys().next() {
            let k = k?;
            let render = k.split(|b| *b == 0).next().unwrap_or_default();
            out.push(String::from_utf8_lossy(render).into_owned());
            from = [render, &[1]].concat();
        }
        Ok(out)
    }

    /// One node: every running segment is queued again (whoever held it), flushed once.
    pub(crate) fn release_node_segments(&self, _node: &str) -> Result<usize, StoreError> {
        let mut n = 0;
        for s in self.segments_of(None)? {
            if s.state == SegmentState::Running
                && self
                    .change_held(&s.render_id, s.span.index, false, |_| true, queue_again)?
                    .is_some()
            {
                n += 1;
            }
        }
        self.flush()?;
        Ok(n)
    }
}

/// Running → queued, lease cleared, attempts kept.
fn queue_again(s: &mut SegmentRecord) {
    s.state = SegmentState::Queued;
    clear_lease(s);
}
