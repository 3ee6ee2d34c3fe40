//! The segments' rules (`server/store/src/segment.rs`), one suite both backends pass: the
//! sled unit tests (`src/segment_tests.rs`) and the PostgreSQL tests (`main.rs`) include this
//! file. Each function takes a store of its own and `pass`, which lets `d` go by for the
//! store's lease clock (sled: its test clock moves; PostgreSQL: the test sleeps).

use std::collections::HashSet;
use std::time::Duration;

use super::store::fixtures::segments;
use super::store::{SegmentState, Store, StoredTally};

/// Leases in this suite: long enough that none runs out between two steps of a test on a
/// busy machine.
pub const LEASE: Duration = Duration::from_secs(2);
/// Long enough for a [`LEASE`] to run out.
pub const PAST_LEASE: Duration = Duration::from_millis(2_300);
const MAX: u32 = 3;

pub fn creating_segments_is_idempotent(s: &Store, _pass: &dyn Fn(Duration)) {
    let mut first = segments("task_a", 3, "alice", 10);
    first.reverse();
    let made = s.create_segments("task_a", &first).unwrap();
    assert_eq!(
        made.iter().map(|g| g.span.index).collect::<Vec<_>>(),
        [0, 1, 2]
    );
    assert!(
        made.iter()
            .all(|g| g.state == SegmentState::Queued && g.attempts == 0)
    );
    // A coordinator that took the render over, with another cut: the existing ones, unchanged.
    let again = s
        .create_segments("task_a", &segments("task_a", 5, "alice", 20))
        .unwrap();
    assert_eq!(again, made);
    assert_eq!(s.segments("task_a").unwrap(), made);
    assert!(s.segments("task_none").unwrap().is_empty());
    assert!(
        s.create_segments("task_b", &segments("task_a", 1, "a", 1))
            .is_err()
    );
    let mut twice = segments("task_b", 2, "bob", 1);
    twice[1].span.index = 0;
    assert!(s.create_segments("task_b", &twice).is_err());
    assert!(s.segments("task_b").unwrap().is_empty());
}

pub fn claims_are_fair_across_renders(s: &Store, _pass: &dyn Fn(Duration)) {
    s.create_segments("task_b", &segments("task_b", 2, "bob", 2_000))
        .unwrap();
    s.create_segments("task_a", &segments("task_a", 3, "alice", 1_000))
        .unwrap();
    // The render with the fewest running segments, then the oldest, then by index.
    let mut order = Vec::new();
    while let Some(g) = s.claim_segment("n1", LEASE, None, MAX).unwrap() {
        assert_eq!((g.state, g.attempts), (SegmentState::Running, 1));
        assert_eq!(g.lease_owner.as_deref(), Some("n1"));
        order.push((g.render_id, g.span.index));
    }
    let want = [
        ("task_a", 0),
        ("task_b", 0),
        ("task_a", 1),
        ("task_b", 1),
        ("task_a", 2),
    ];
    let want: Vec<(String, u32)> = want.iter().map(|(r, i)| (r.to_string(), *i)).collect();
    assert_eq!(order, want);
    // A coordinator helping its own render takes only that render's.
    s.create_segments("task_c", &segments("task_c", 1, "carol", 3_000))
        .unwrap();
    s.create_segments("task_d", &segments("task_d", 2, "dave", 500))
        .unwrap();
    let g = s.claim_segment("n1", LEASE, Some("task_c"), MAX).unwrap();
    assert_eq!(
        g.map(|g| (g.render_id, g.span.index)),
        Some(("task_c".into(), 0))
    );
    assert_eq!(
        s.claim_segment("n1", LEASE, Some("task_c"), MAX).unwrap(),
        None
    );
    let g = s.claim_segment("n1", LEASE, None, MAX).unwrap();
    assert_eq!(g.map(|g| g.render_id), Some("task_d".into()));
}

pub fn an_expired_lease_is_claimed_again_and_fences_the_old_holder(
    s: &Store,
    pass: &dyn Fn(Duration),
) {
    s.create_segments("task_a", &segments("task_a", 1, "alice", 1))
        .unwrap();
    let old = s.claim_segment("n1", LEASE, None, MAX).unwrap().unwrap();
    assert!(s.segment_progress(old.hold(), 10).unwrap());
    assert_eq!(s.claim_segment("n2", LEASE, None, MAX).unwrap(), None);
    pass(PAST_LEASE);
    // n1 died: n2 takes the segment over, one attempt more.
    let new = s.claim_segment("n2", LEASE, None, MAX).unwrap().unwrap();
    assert_eq!((new.span.index, new.attempts), (0, old.attempts + 1));
    assert_eq!(new.lease_owner.as_deref(), Some("n2"));
    // n1's writes are refused: its lease and token are gone.
    let held = [("task_a".to_string(), 0)];
    assert!(
        s.renew_segment_leases("n1", &held, LEASE)
            .unwrap()
            .is_empty()
    );
    assert!(!s.segment_progress(old.hold(), 20).unwrap());
    assert!(!s.finish_segment(old.hold(), "stale.mp4", 30, None).unwrap());
    assert_eq!(s.fail_segment(old.hold(), "x", MAX).unwrap(), None);
    // n2 finishes it.
    assert_eq!(s.renew_segment_leases("n2", &held, LEASE).unwrap(), held);
    assert!(s.segment_progress(new.hold(), 20).unwrap());
    // Its quality is kept with it, exactly (the join merges the segments' tallies).
    let tally = StoredTally {
        peak: 255,
        plane_samples: [6, 2, 2],
        seconds: vec![(0, 2, [7, 8, 9], 1.75), (1, 1, [1, 0, 2], 0.5)],
    };
    assert!(
        s.finish_segment(new.hold(), "seg/0.mp4", 29, Some(&tally))
            .unwrap()
    );
    let done = &s.segments("task_a").unwrap()[0];
    assert_eq!(done.state, SegmentState::Done);
    assert_eq!(done.quality.as_ref(), Some(&tally));
    assert_eq!(
        (done.output.as_deref(), done.frames_done),
        (Some("seg/0.mp4"), 29)
    );
    assert_eq!(
        (done.lease_owner.as_deref(), done.lease_until),
        (None, None)
    );
    // Done is final: no claim, no second finish.
    assert!(!s.finish_segment(new.hold(), "again.mp4", 30, None).unwrap());
    pass(PAST_LEASE);
    assert_eq!(s.claim_segment("n1", LEASE, None, MAX).unwrap(), None);
}

pub fn a_failed_segment_is_retried_up_to_its_budget(s: &Store, _pass: &dyn Fn(Duration)) {
    s.create_segments("task_a", &segments("task_a", 2, "alice", 1))
        .unwrap();
    for attempt in 1..=2 {
        let g = s
            .claim_segment("n1", LEASE, Some("task_a"), 2)
            .unwrap()
            .unwrap();
        assert_eq!((g.span.index, g.attempts), (0, attempt));
        let want = if attempt < 2 {
            SegmentState::Queued
        } else {
            SegmentState::Failed
        };
        let state = s.fail_segment(g.hold(), "decoder error", 2).unwrap();
        assert_eq!(state, Some(want));
        let g = &s.segments("task_a").unwrap()[0];
        assert_eq!((g.state, g.error.as_deref()), (want, Some("decoder error")));
        assert_eq!(g.lease_owner, None);
    }
    // Segment 1 is untouched by its sibling's failures.
    let g = s.claim_segment("n1", LEASE, None, 2).unwrap().unwrap();
    assert_eq!((g.span.index, g.attempts), (1, 1));
}

pub fn a_segment_out_of_attempts_is_failed_not_claimed(s: &Store, pass: &dyn Fn(Duration)) {
    s.create_segments("task_a", &segments("task_a", 1, "alice", 1))
        .unwrap();
    assert!(s.claim_segment("n1", LEASE, None, 1).unwrap().is_some());
    pass(PAST_LEASE);
    assert_eq!(s.claim_segment("n2", LEASE, None, 1).unwrap(), None);
    let g = &s.segments("task_a").unwrap()[0];
    assert_eq!((g.state, g.attempts), (SegmentState::Failed, 1));
    assert_eq!(g.error.as_deref(), Some("its node stopped 1 times"));
}

pub fn a_released_segment_is_queued_again_with_its_attempts(s: &Store, _pass: &dyn Fn(Duration)) {
    s.create_segments("task_a", &segments("task_a", 2, "alice", 1))
        .unwrap();
    let a = s.claim_segment("n1", LEASE, None, MAX).unwrap().unwrap();
    let b = s.claim_segment("n1", LEASE, None, MAX).unwrap().unwrap();
    s.release_segment("n2", "task_a", a.span.index).unwrap();
    assert_eq!(
        s.segments("task_a").unwrap()[0].state,
        SegmentState::Running
    );
    s.release_segment("n1", "task_a", a.span.index).unwrap();
    let g = &s.segments("task_a").unwrap()[0];
    assert_eq!(
        (g.state, g.attempts, g.lease_owner.as_deref()),
        (SegmentState::Queued, 1, None)
    );
    let held = [
        ("task_a".to_string(), a.span.index),
        ("task_a".to_string(), b.span.index),
    ];
    let still = s.renew_segment_leases("n1", &held, LEASE).unwrap();
    assert_eq!(still, [("task_a".to_string(), b.span.index)]);
    let again = s.claim_segment("n2", LEASE, None, MAX).unwrap().unwrap();
    assert_eq!((again.span.index, again.attempts), (a.span.index, 2));
}

pub fn deleting_segments_and_listing_segmented_renders(s: &Store, _pass: &dyn Fn(Duration)) {
    for (id, n) in [("task_b", 2), ("task_a", 3), ("task_c", 1)] {
        s.create_segments(id, &segments(id, n, "alice", 1)).unwrap();
    }
    let mut listed = s.segmented_renders().unwrap();
    listed.sort();
    assert_eq!(listed, ["task_a", "task_b", "task_c"]);
    assert_eq!(s.delete_segments("task_a").unwrap(), 3);
    assert_eq!(s.delete_segments("task_a").unwrap(), 0);
    assert!(s.segments("task_a").unwrap().is_empty());
    let mut listed = s.segmented_renders().unwrap();
    listed.sort();
    assert_eq!(listed, ["task_b", "task_c"]);
    // A render whose segments were deleted may be cut again.
    let made = s
        .create_segments("task_a", &segments("task_a", 1, "alice", 5))
        .unwrap();
    assert_eq!(made.len(), 1);
}

pub fn concurrent_claims_never_share_a_segment(s: &Store, _pass: &dyn Fn(Duration)) {
    s.create_segments("task_a", &segments("task_a", 12, "alice", 1))
        .unwrap();
    s.create_segments("task_b", &segments("task_b", 12, "bob", 2))
        .unwrap();
    let claimed: Vec<(String, u32)> = std::thread::scope(|scope| {
        let nodes: Vec<_> = (0..4)
            .map(|n| {
                scope.spawn(move || {
                    let node = format!("node-{n}");
                    let mut mine = Vec::new();
                    while let Some(g) = s.claim_segment(&node, LEASE, None, MAX).unwrap() {
                        assert_eq!(g.lease_owner.as_deref(), Some(node.as_str()));
                        mine.push((g.render_id, g.span.index));
                    }
                    mine
                })
            })
            .collect();
        nodes.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(claimed.len(), 24);
    assert_eq!(claimed.iter().collect::<HashSet<_>>().len(), 24);
    let all = [s.segments("task_a").unwrap(), s.segments("task_b").unwrap()].concat();
    assert!(
        all.iter()
            .all(|g| g.state == SegmentState::Running && g.attempts == 1)
    );
}

/// Calls `$run!(name, ...)` with the name of every test above (each includer's `$run`
/// makes a test of each).
macro_rules! segment_suite {
    ($run:ident) => {
        $run!(
            creating_segments_is_idempotent,
            claims_are_fair_across_renders,
            an_expired_lease_is_claimed_again_and_fences_the_old_holder,
            a_failed_segment_is_retried_up_to_its_budget,
            a_segment_out_of_attempts_is_failed_not_claimed,
            a_released_segment_is_queued_again_with_its_attempts,
            deleting_segments_and_listing_segmented_renders,
            concurrent_claims_never_share_a_segment
        );
    };
}
