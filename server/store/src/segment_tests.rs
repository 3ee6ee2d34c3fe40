//! The segments over sled: the suite both backends pass (`tests/pg/segment_suite.rs`), each
//! test on a store of its own whose lease clock the test moves; then what only the embedded
//! store does: a restart (the database reopened in its directory) keeps every segment, and
//! queues again the ones that were running.

use std::sync::Arc;
use std::time::Duration;

use crate as store;
use crate::clock::OffsetClock;
use crate::fixtures::segments;
use crate::{SegmentState, Store, StoreError};

#[macro_use]
#[path = "../tests/pg/segment_suite.rs"]
mod suite;

/// A sled store in a temp dir, timed by a clock the test moves.
fn sled() -> (tempfile::TempDir, Store, Arc<OffsetClock>) {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(OffsetClock::new());
    let store = Store::open_with_clock(dir.path(), clock.clone()).unwrap();
    (dir, store, clock)
}

macro_rules! on_sled {
    ($($name:ident),+) => {
        $(
            #[test]
            fn $name() {
                let (_dir, s, clock) = sled();
                suite::$name(&s, &|d| clock.advance(d));
            }
        )+
    };
}

segment_suite!(on_sled);

#[test]
fn segments_survive_a_restart_and_running_ones_are_queued_again() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Store::open(dir.path()).unwrap();
        s.create_segments("task_a", &segments("task_a", 3, "alice", 1))
            .unwrap();
        let g = s
            .claim_segment("n1", suite::LEASE, None, 3)
            .unwrap()
            .unwrap();
        assert!(s.finish_segment(g.hold(), "seg/0.mp4", 30, None).unwrap());
        let g = s
            .claim_segment("n1", suite::LEASE, None, 3)
            .unwrap()
            .unwrap();
        assert!(s.fail_segment(g.hold(), "oops", 3).unwrap().is_some());
        s.claim_segment("n1", suite::LEASE, None, 3)
            .unwrap()
            .unwrap();
        s.claim_segment("n1", suite::LEASE, None, 3)
            .unwrap()
            .unwrap();
        // No flush here: every one of those writes was durable when it returned.
    }
    let s = Store::open(dir.path()).unwrap();
    let before = s.segments("task_a").unwrap();
    let states: Vec<_> = before.iter().map(|g| (g.state, g.attempts)).collect();
    assert_eq!(
        states,
        [
            (SegmentState::Done, 1),
            (SegmentState::Running, 2),
            (SegmentState::Running, 1)
        ]
    );
    assert_eq!(before[1].error.as_deref(), Some("oops"));
    // The process that held them is gone: they may be taken at once, attempts kept.
    assert_eq!(s.release_node_segments("n2").unwrap(), 2);
    let after = s.segments("task_a").unwrap();
    let states: Vec<_> = after.iter().map(|g| (g.state, g.attempts)).collect();
    assert_eq!(
        states,
        [
            (SegmentState::Done, 1),
            (SegmentState::Queued, 2),
            (SegmentState::Queued, 1)
        ]
    );
    assert!(after[1..].iter().all(|g| g.lease_owner.is_none()));
    let g = s
        .claim_segment("n2", Duration::from_secs(1), None, 3)
        .unwrap()
        .unwrap();
    assert_eq!((g.span.index, g.attempts), (1, 3));
}

#[test]
fn idle_slots_are_the_shared_stores() {
    let (_dir, s, _clock) = sled();
    let ttl = Duration::from_secs(1);
    assert!(matches!(
        s.report_idle_slots("n1", 2, ttl),
        Err(StoreError::Unsupported(_))
    ));
    assert!(matches!(s.idle_slots(), Err(StoreError::Unsupported(_))));
}

#[test]
fn a_segment_is_stored_as_it_was_before_its_span_was_one_value() {
    // A record as sled kept it before the span was one value: it reads, and writes back the
    // same JSON (the span's fields flattened among the record's own).
    let old = r#"{"render_id":"task_a","index":1,"count":3,"principal":"alice",
        "start_pts":90000,"end_pts":null,"start_seconds":1.0,"end_seconds":2.5,"frames":30,
        "state":"running","attempts":2,"frames_done":7,"output":null,"error":"oops",
        "created_at":5,"lease_owner":"n1","lease_until":9}"#;
    let g: crate::SegmentRecord = serde_json::from_str(old).unwrap();
    assert_eq!(
        (g.span.index, g.span.start_pts, g.span.end_pts),
        (1, Some(90_000), None)
    );
    assert_eq!(
        (g.span.end_seconds, g.span.frames, g.attempts),
        (2.5, 30, 2)
    );
    let again: serde_json::Value = serde_json::to_value(&g).unwrap();
    let was: serde_json::Value = serde_json::from_str(old).unwrap();
    assert_eq!(again, was);
}
