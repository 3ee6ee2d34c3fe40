//! The store against a private PostgreSQL (`mod.rs`, the harness other crates' tests and the
//! benchmarks share): the segments' suite (`segment_suite.rs`, which sled passes too), each
//! test in a database of its own on one server; then what only the shared store does: a
//! restarted node's leases end at once, and the nodes' idle-slot heartbeats expire.

#[path = "mod.rs"]
mod harness;
#[macro_use]
mod segment_suite;

use std::time::Duration;

use harness::Postgres;
use segment_suite::{LEASE, PAST_LEASE};
use vidforge_store as store;
use vidforge_store::fixtures::segments;
use vidforge_store::{SegmentState, Store};

/// A store on a fresh database `name` of `pg`.
fn fresh(pg: &Postgres, name: &str) -> Store {
    let mut admin = postgres::Client::connect(&pg.url(), postgres::NoTls).unwrap();
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .unwrap();
    let url = pg.url().replace("/postgres", &format!("/{name}"));
    Store::connect_postgres(&url).unwrap()
}

/// The suite's tests in turn, each on its own database; the lease clock is PostgreSQL's, so
/// time passes by sleeping.
#[test]
fn postgres_store_passes_the_segment_suite() {
    let pg = Postgres::start();
    macro_rules! on_postgres {
        ($($name:ident),+) => {
            $(
                let s = fresh(&pg, stringify!($name));
                segment_suite::$name(&s, &std::thread::sleep);
            )+
        };
    }
    segment_suite!(on_postgres);
}

#[test]
fn postgres_segments_of_a_restarted_node_and_idle_slot_heartbeats() {
    let pg = Postgres::start();
    let s = fresh(&pg, "farm");
    s.create_segments("task_a", &segments("task_a", 2, "alice", 1))
        .unwrap();
    let g = s.claim_segment("n1", LEASE, None, 3).unwrap().unwrap();
    // Another node's view (its own pool) sees the same rows.
    let other = Store::connect_postgres(&pg.url().replace("/postgres", "/farm")).unwrap();
    assert_eq!(
        other.segments("task_a").unwrap(),
        s.segments("task_a").unwrap()
    );
    // n1 restarts: its lease ends now, and n2 takes the segment over without waiting.
    assert_eq!(s.release_node_segments("n1").unwrap(), 1);
    assert_eq!(s.release_node_segments("n1").unwrap(), 1);
    let taken = other
        .claim_segment("n2", LEASE, Some("task_a"), 3)
        .unwrap()
        .unwrap();
    assert_eq!((taken.index, taken.attempts), (g.index, 2));
    assert_eq!(s.release_node_segments("n1").unwrap(), 0);
    assert!(!s.finish_segment(g.hold(), "old.mp4", 30, None).unwrap());
    assert!(
        other
            .finish_segment(taken.hold(), "seg/0.mp4", 30, None)
            .unwrap()
    );
    assert_eq!(s.segments("task_a").unwrap()[0].state, SegmentState::Done);

    // Heartbeats: live ones add up, and each counts until its ttl runs out.
    assert_eq!(s.idle_slots().unwrap(), 0);
    s.report_idle_slots("n1", 2, Duration::from_secs(60))
        .unwrap();
    other.report_idle_slots("n2", 3, LEASE).unwrap();
    assert_eq!(s.idle_slots().unwrap(), 5);
    s.report_idle_slots("n1", 1, Duration::from_secs(60))
        .unwrap();
    assert_eq!(other.idle_slots().unwrap(), 4);
    std::thread::sleep(PAST_LEASE);
    assert_eq!(s.idle_slots().unwrap(), 1);
    other.report_idle_slots("n2", 0, LEASE).unwrap();
    assert_eq!(s.idle_slots().unwrap(), 1);
}
