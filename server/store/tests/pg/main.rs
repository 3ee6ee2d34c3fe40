//! The store against a private PostgreSQL (`mod.rs`, the harness other crates' tests and the
//! benchmarks share): the segments' suite (`segment_suite.rs`) and the render indexes' suite
//! (`render_suite.rs`), which sled passes too, each test in a database of its own on one
//! server; then what only the shared store does: a restarted node's leases end at once, the
//! nodes' idle-slot heartbeats expire, every render query reads its index, and the index
//! build is idempotent and recovers from an interrupted one.

#[path = "mod.rs"]
mod harness;
#[macro_use]
mod render_suite;
#[macro_use]
mod segment_suite;

use std::time::Duration;

use harness::Postgres;
use segment_suite::{LEASE, PAST_LEASE};
use vidforge_store::{SegmentState, Store};
use vidforge_store_fixtures::segments;

/// The store as the shared suites name it (in the crate's own tests, the crate): its items and
/// its sample records.
mod store {
    pub use vidforge_store::*;
    pub use vidforge_store_fixtures as fixtures;
}

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

/// The suite's tests in turn, each on its own database; then, on the full store the first
/// one filled, the queries' plans and the index builds.
#[test]
fn postgres_store_passes_the_render_index_suite_and_its_queries_read_their_indexes() {
    let pg = Postgres::start();
    macro_rules! on_postgres {
        ($($name:ident),+) => {
            $(
                render_suite::$name(&fresh(&pg, stringify!($name)));
            )+
        };
    }
    render_suite!(on_postgres);
    let url = pg
        .url()
        .replace("/postgres", "/a_full_store_answers_from_its_indexes");
    queries_read_their_indexes_and_index_builds_recover(&url);
}

/// Whether the index `name` exists and is valid, and its object id.
fn index_state(db: &mut postgres::Client, name: &str) -> Option<(bool, u32)> {
    db.query_opt(
        "SELECT indisvalid, indexrelid::oid FROM pg_index WHERE indexrelid = to_regclass($1)",
        &[&name],
    )
    .unwrap()
    .map(|r| (r.get(0), r.get(1)))
}

/// On the suite's full store at `url`: every render and queue query reads its index; a second
/// start builds nothing; an interrupted build and a missing index are built at the next start.
fn queries_read_their_indexes_and_index_builds_recover(url: &str) {
    let s = Store::connect_postgres(url).unwrap();
    let all = render_suite::records();
    let mut db = postgres::Client::connect(url, postgres::NoTls).unwrap();
    // As many assets as renders, created over the same times (the sweep's plan reads them).
    db.batch_execute(
        "INSERT INTO assets (id, doc) SELECT 'a_' || id, jsonb_build_object('id', 'a_' || id,
             'created_at', coalesce((doc->>'finished_at')::bigint, created_at)) FROM renders",
    )
    .unwrap();
    db.batch_execute("ANALYZE renders; ANALYZE assets").unwrap();
    let plans = s.render_query_plans("busy", false).unwrap();
    let want = [
        ("recent_renders", "renders_recent"),
        ("unfinished_renders", "renders_unfinished"),
        ("expired_renders (results)", "renders_results"),
        ("expired_renders (tombstones)", "renders_tombstones"),
        ("stale_previews", "renders_stale_previews"),
        ("claim", "renders_runnable"),
        ("claim_speculative", "renders_awaiting"),
        ("release_node_leases", "renders_leased"),
        ("expired_assets", "assets_expiry"),
    ];
    assert_eq!(plans.len(), want.len());
    for ((name, plan), (want_name, index)) in plans.iter().zip(want) {
        assert_eq!(*name, want_name);
        // Awaiting renders are unfinished ones: either partial index bounds the read.
        let read = plan.contains(index)
            || (*name == "claim_speculative" && plan.contains("renders_unfinished"));
        assert!(read, "{name} does not read {index}:\n{plan}");
        assert!(
            !plan.contains("Seq Scan"),
            "{name} scans the table:\n{plan}"
        );
    }

    // A second start builds nothing: the same indexes stay.
    let built = [
        "renders_results",
        "renders_tombstones",
        "renders_stale_previews",
        "renders_awaiting",
        "renders_leased",
        "assets_expiry",
    ];
    let before: Vec<_> = built
        .iter()
        .map(|n| index_state(&mut db, n).unwrap())
        .collect();
    assert!(before.iter().all(|(valid, _)| *valid));
    drop(Store::connect_postgres(url).unwrap());
    for (n, state) in built.iter().zip(&before) {
        assert_eq!(index_state(&mut db, n).as_ref(), Some(state));
    }

    // An interrupted concurrent build leaves an invalid index (here: one that failed on a
    // duplicate), and a missing one is what a database from before them has: the next start
    // builds both, and the reads answer as before.
    db.batch_execute("DROP INDEX renders_results; DROP INDEX renders_tombstones;")
        .unwrap();
    assert!(
        db.batch_execute("CREATE UNIQUE INDEX CONCURRENTLY renders_results ON renders (principal)")
            .is_err()
    );
    assert_eq!(
        index_state(&mut db, "renders_results").map(|s| s.0),
        Some(false)
    );
    assert_eq!(index_state(&mut db, "renders_tombstones"), None);
    let again = Store::connect_postgres(url).unwrap();
    for n in ["renders_results", "renders_tombstones"] {
        assert_eq!(index_state(&mut db, n).map(|s| s.0), Some(true), "{n}");
    }
    render_suite::reads_agree_with_a_scan(&again, &all);
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
    assert_eq!((taken.span.index, taken.attempts), (g.span.index, 2));
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
