//! One suite for both task-store backends: every test in `shared_suite` runs against the
//! embedded sled store and against a real PostgreSQL 15 (initdb into a temp dir, started on a
//! free loopback port by this test, stopped at the end). Then the work queue's leases and the
//! change feed, which only the PostgreSQL store has.
//!
//! PostgreSQL's binaries come from Debian's `postgresql` package (`scripts/install-deps.sh`);
//! when they are missing the test fails rather than skipping.

#[path = "../../store/tests/pg/mod.rs"]
mod pg;

use pg::psql;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::http::header::COOKIE;
use axum::http::{HeaderMap, HeaderValue};
use vidforge_core::catalog::ErrorCode;
use vidforge_core::clock::SystemClock;
use vidforge_core::store::*;
use vidforge_http::auth::Auth;
use vidforge_http::session::{SessionLimits, Sessions};

fn sample(id: &str, created_at: u64) -> RenderRecord {
    let args = RenderArgs {
        source_asset: "a_X".into(),
        output_format: OutputFormat::Webm,
        resolution: Resolution::P720,
        watermark: Some(WatermarkArgs {
            image_asset: "a_Y".into(),
            position: vidforge_core::store::Position::Center,
            opacity: 0.6,
        }),
        idempotency_key: Some("k1".into()),
        quality_report: None,
    };
    let original = serde_json::json!({"source_asset_uri": "vidforge://assets/a_X"});
    let mut r = RenderRecord::new(id.into(), "alice", args, original, created_at);
    r.progress = Some(ProgressSnapshot::new(ProgressStage::Rendering, 5, Some(10)));
    r
}

fn entry(render_id: &str, created_at: u64) -> IdempotencyEntry {
    IdempotencyEntry {
        render_id: render_id.into(),
        args_hash: "h".into(),
        created_at,
    }
}

// ---- the suite both backends pass ----

fn records_round_trip(s: &Store) {
    let mut rec = sample("task_rt", 1);
    rec.state = RenderState::Failed;
    rec.outcome = Some(Outcome::Error {
        code: ErrorCode::WatermarkRejected,
        message: "m".into(),
        reason: Some("r".into()),
        field: Some("watermark".into()),
        retry_after_ms: None,
        temporary: None,
    });
    s.put_render(&rec).unwrap();
    s.flush().unwrap();
    assert_eq!(s.get_render("task_rt").unwrap(), Some(rec.clone()));
    assert_eq!(s.get_render("task_none").unwrap(), None);
    s.put_render(&sample("task_open", 2)).unwrap();
    let unfinished: Vec<String> = s
        .unfinished_renders()
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert!(unfinished.contains(&"task_open".to_string()));
    assert!(!unfinished.contains(&"task_rt".to_string()));
    assert!(s.recent_renders(Some("alice"), 10).unwrap().len() >= 2);
    s.delete_render("task_rt").unwrap();
    assert_eq!(s.get_render("task_rt").unwrap(), None);
}

fn updates_never_lose_a_write(s: &Store) {
    s.put_render(&sample("task_cas", 1)).unwrap();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let s = s.clone();
            std::thread::spawn(move || {
                for _ in 0..25 {
                    s.update_render::<(), StoreError>("task_cas", |r| {
                        r.attempts += 1;
                        Ok(Change::Write(()))
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(s.get_render("task_cas").unwrap().unwrap().attempts, 100);
    let kept = s
        .update_render::<u32, StoreError>("task_cas", |r| {
            r.attempts = 0;
            Ok(Change::Keep(7))
        })
        .unwrap()
        .unwrap();
    assert!(!kept.written);
    assert_eq!((kept.value, kept.record.attempts), (7, 100));
    assert!(
        s.update_render::<(), StoreError>("task_nope", |_| Ok(Change::Keep(())))
            .unwrap()
            .is_none()
    );
}

fn one_key_one_render_under_concurrency(s: &Store) {
    let winners: Vec<_> = (0..8)
        .map(|i| {
            let s = s.clone();
            std::thread::spawn(move || {
                let rec = sample(&format!("task_dup{i}"), 100);
                let key = NewKey {
                    principal: "alice",
                    key: "same-key",
                    entry: entry(&rec.id, 100),
                    stale_before: 50,
                };
                (rec.id.clone(), s.insert_render(&rec, Some(&key)).unwrap())
            })
        })
        .map(|t| t.join().unwrap())
        .collect();
    let created: Vec<&String> = winners
        .iter()
        .filter(|(_, r)| *r == Inserted::Created)
        .map(|(id, _)| id)
        .collect();
    assert_eq!(created.len(), 1, "exactly one creator wins: {winners:?}");
    for (id, r) in &winners {
        match r {
            Inserted::Created => assert!(s.get_render(id).unwrap().is_some()),
            Inserted::KeyTaken(e) => {
                assert_eq!(&e.render_id, created[0]);
                assert!(s.get_render(id).unwrap().is_none(), "a loser wrote {id}");
            }
        }
    }
    // Another principal's key of the same name is another key.
    let rec = sample("task_bob", 100);
    let key = NewKey {
        principal: "bob",
        key: "same-key",
        entry: entry("task_bob", 100),
        stale_before: 50,
    };
    assert_eq!(
        s.insert_render(&rec, Some(&key)).unwrap(),
        Inserted::Created
    );
    // A stale entry is replaced.
    let rec = sample("task_fresh", 500);
    let key = NewKey {
        principal: "alice",
        key: "same-key",
        entry: entry("task_fresh", 500),
        stale_before: 400,
    };
    assert_eq!(
        s.insert_render(&rec, Some(&key)).unwrap(),
        Inserted::Created
    );
    assert_eq!(
        s.get_idempotency("alice", "same-key")
            .unwrap()
            .unwrap()
            .render_id,
        "task_fresh"
    );
}

fn idempotency_entries_expire(s: &Store) {
    s.put_idempotency("carol", "k", &entry("task_1", 10))
        .unwrap();
    s.put_idempotency("dave", "k", &entry("task_2", 1_000_000))
        .unwrap();
    assert_eq!(
        s.get_idempotency("carol", "k").unwrap(),
        Some(entry("task_1", 10))
    );
    assert_eq!(s.get_idempotency("erin", "k").unwrap(), None);
    let before = s.idempotency_len().unwrap();
    assert!(s.remove_idempotency_before(50).unwrap() >= 1);
    assert!(s.idempotency_len().unwrap() < before);
    assert_eq!(s.get_idempotency("carol", "k").unwrap(), None);
    assert!(s.get_idempotency("dave", "k").unwrap().is_some());
}

fn assets_round_trip(s: &Store) {
    let a = AssetRecord {
        id: "a_1".into(),
        uri: "vidforge://assets/a_1".into(),
        principal: "alice".into(),
        kind: AssetKind::Video,
        file_name: "clip.mp4".into(),
        path: "/media/assets/a_1".into(),
        size_bytes: 42,
        created_at: 7,
        probe: AssetProbe::default(),
    };
    s.put_asset(&a).unwrap();
    assert_eq!(s.get_asset("a_1").unwrap(), Some(a.clone()));
    assert_eq!(s.expired_assets(7, None, 10).unwrap(), vec![a.clone()]);
    assert_eq!(s.expired_assets(6, None, 10).unwrap(), vec![]);
    assert!(s.delete_asset("a_1").unwrap());
    assert!(!s.delete_asset("a_1").unwrap());
    assert_eq!(s.get_asset("a_1").unwrap(), None);
    assert_eq!(s.expired_assets(u64::MAX / 2, None, 10).unwrap(), vec![]);

    // Expired ones oldest first (then by id), a batch after another, never a kept one.
    let at = |id: &str, created_at: u64| AssetRecord {
        id: id.into(),
        created_at,
        ..a.clone()
    };
    let all = [
        at("a_c", 30),
        at("a_a", 10),
        at("a_b", 10),
        at("a_d", 40),
        at("a_e", 50),
    ];
    for x in &all {
        s.put_asset(x).unwrap();
    }
    let ids = |v: Vec<AssetRecord>| v.into_iter().map(|x| x.id).collect::<Vec<_>>();
    let mut named = s
        .assets_named(&["a_e", "a_nope", "a_a"].map(String::from))
        .unwrap();
    named.sort();
    assert_eq!(named, ["a_a", "a_e"]);
    let first = s.expired_assets(40, None, 2).unwrap();
    assert_eq!(ids(first.clone()), ["a_a", "a_b"]);
    let last = first.last().map(|x| (x.created_at, x.id.as_str()));
    assert_eq!(ids(s.expired_assets(40, last, 2).unwrap()), ["a_c", "a_d"]);
    assert_eq!(
        ids(s.expired_assets(40, Some((40, "a_d")), 2).unwrap()),
        Vec::<String>::new()
    );
    for x in &all {
        assert!(s.delete_asset(&x.id).unwrap());
    }
    assert_eq!(s.expired_assets(u64::MAX / 2, None, 10).unwrap(), vec![]);
}

/// The dashboard's listing: newest first (sled by ULID key order, PostgreSQL by `created_at`;
/// the ids here sort like their creation times, as real ids do), one principal's or all.
fn newest_renders_first(s: &Store) {
    let newest = u64::MAX / 2;
    for i in 1..=5u64 {
        let mut rec = sample(&format!("task_z{i:02}"), newest + i);
        rec.principal = if i == 4 { "dave" } else { "carol" }.into();
        s.put_render(&rec).unwrap();
    }
    let ids = |recs: Vec<RenderRecord>| recs.into_iter().map(|r| r.id).collect::<Vec<_>>();
    assert_eq!(
        ids(s.recent_renders(Some("carol"), 3).unwrap()),
        ["task_z05", "task_z03", "task_z02"]
    );
    assert_eq!(
        ids(s.recent_renders(Some("dave"), 10).unwrap()),
        ["task_z04"]
    );
    assert_eq!(
        ids(s.recent_renders(None, 2).unwrap()),
        ["task_z05", "task_z04"]
    );
    assert!(s.recent_renders(Some("nobody"), 10).unwrap().is_empty());
    // Many read at once: those that exist, whatever the order.
    let named = ["task_z02", "task_nope", "task_z04"].map(String::from);
    let mut found = ids(s.renders_named(&named).unwrap());
    found.sort();
    assert_eq!(found, ["task_z02", "task_z04"]);
    assert!(s.renders_named(&[]).unwrap().is_empty());
}

/// Browser sign-out's revocation counter: per principal, starts at 0, every bump counts
/// (concurrent ones too), and is durable when the bump returns.
fn session_epochs_count_up(s: &Store) {
    assert_eq!(s.session_epoch("carol").unwrap(), 0);
    assert_eq!(s.bump_session_epoch("carol").unwrap(), 1);
    assert_eq!(s.bump_session_epoch("carol").unwrap(), 2);
    assert_eq!(s.session_epoch("carol").unwrap(), 2);
    assert_eq!(
        s.session_epoch("dave").unwrap(),
        0,
        "one counter per principal"
    );
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..5 {
                    s.bump_session_epoch("erin").unwrap();
                }
            });
        }
    });
    assert_eq!(s.session_epoch("erin").unwrap(), 20, "no bump lost");
}

/// The shared secret of OAuth browser sessions: made once (the first value stored wins, also
/// under concurrency), then the same for every caller.
fn server_secrets_are_made_once(s: &Store) {
    let first = s.server_secret("session", &[1; 32]).unwrap();
    assert_eq!(first, [1; 32]);
    std::thread::scope(|scope| {
        for i in 0..4u8 {
            scope.spawn(move || {
                assert_eq!(s.server_secret("session", &[i + 2; 32]).unwrap(), [1; 32]);
                s.server_secret("flow", &[i + 2; 32]).unwrap();
            });
        }
    });
    let flow = s.server_secret("flow", &[9; 32]).unwrap();
    assert_ne!(flow, [9; 32], "one of the racing values won and stays");
    assert_eq!(s.server_secret("flow", &[10; 32]).unwrap(), flow);
}

/// What one session check costs in the store (printed for the record; no assertion on time).
fn session_epoch_read_cost(s: &Store, backend: &str) {
    const READS: u32 = 200;
    let start = Instant::now();
    for _ in 0..READS {
        s.session_epoch("carol").unwrap();
    }
    eprintln!(
        "{backend}: session_epoch read: {:?} each (mean of {READS})",
        start.elapsed() / READS
    );
}

/// The webhook outbox: an event is written with the change that makes it (and not when the
/// change is kept), claimed by one node at a time under a lease, recorded only by its
/// holder, and finished for good.
fn webhook_outbox(s: &Store) {
    let rec = sample("task_hook", 1);
    s.put_render(&rec).unwrap();
    let emit = |old: &RenderRecord, new: &RenderRecord| {
        (old.state != new.state).then(|| OutboxEvent::new(EventKind::Succeeded, new, 10))
    };
    // A write that makes no event, then one that does, then a kept change: one event.
    let change = |f: &dyn Fn(&mut RenderRecord), write: bool| {
        s.update_render_emitting(
            "task_hook",
            |r| {
                f(r);
                Ok::<_, StoreError>(if write {
                    Change::Write(())
                } else {
                    Change::Keep(())
                })
            },
            &emit,
        )
        .unwrap();
    };
    change(&|r| r.attempts = 1, true);
    change(&|r| r.state = RenderState::Succeeded, true);
    change(&|r| r.state = RenderState::Failed, false);
    s.flush().unwrap();
    let events = s.recent_webhooks(Some("alice"), 10).unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].render.state, RenderState::Succeeded);
    assert!(s.recent_webhooks(Some("bob"), 10).unwrap().is_empty());
    // One node at a time.
    let lease = Duration::from_secs(30);
    let now = vidforge_core::clock::Clock::now_ms(&SystemClock);
    let mut held = s.claim_webhooks("node1", now, lease, 5, &[]).unwrap();
    assert_eq!(held.len(), 1);
    assert!(
        s.claim_webhooks("node2", now, lease, 5, &[])
            .unwrap()
            .is_empty()
    );
    assert!(
        s.claim_webhooks("node1", now, lease, 5, &["alice".into()])
            .unwrap()
            .is_empty()
    );
    // A failed attempt: pending again, due after the wait.
    let mut event = held.pop().unwrap();
    let failed = Attempt {
        at: now,
        node: "node1".into(),
        status: Some(503),
        error: None,
        millis: 3,
    };
    let retry = Next::Retry(Duration::from_secs(3600));
    event.record(failed, &retry);
    if s.is_shared() {
        assert!(
            !s.finish_webhook_attempt("node2", &event, &retry).unwrap(),
            "not its lease"
        );
    }
    assert!(s.finish_webhook_attempt("node1", &event, &retry).unwrap());
    assert!(
        s.claim_webhooks("node2", now, lease, 5, &[])
            .unwrap()
            .is_empty(),
        "not due yet"
    );
    let stored = s.get_webhook(&event.id).unwrap().unwrap();
    assert_eq!((stored.attempts, stored.status), (1, OutboxStatus::Pending));
    assert_eq!(stored.last_attempts[0].outcome(), "503");
    // Due again (an hour on, by this node's clock: sled; the database's clock schedules a
    // shared store, and tests/e2e/cluster.rs delivers there): delivered, never claimed again,
    // swept after retention.
    if s.is_shared() {
        return;
    }
    let later = now + 3_700_000;
    let mut event = s
        .claim_webhooks("node2", later, lease, 5, &[])
        .unwrap()
        .pop()
        .unwrap();
    let ok = Attempt {
        at: later,
        node: "node2".into(),
        status: Some(204),
        error: None,
        millis: 2,
    };
    event.record(ok, &Next::Delivered);
    assert!(
        s.finish_webhook_attempt("node2", &event, &Next::Delivered)
            .unwrap()
    );
    assert!(
        s.claim_webhooks("node1", later + 1, lease, 5, &[])
            .unwrap()
            .is_empty()
    );
    let done = s.get_webhook(&event.id).unwrap().unwrap();
    assert_eq!((done.attempts, done.status), (2, OutboxStatus::Delivered));
    assert_eq!(
        s.recent_webhooks(None, 10).unwrap()[0].status,
        OutboxStatus::Delivered
    );
    assert_eq!(
        s.remove_finished_webhooks_before(later + 10_000).unwrap(),
        1
    );
    assert!(s.get_webhook(&event.id).unwrap().is_none());
}

fn shared_suite(s: &Store) {
    session_epochs_count_up(s);
    server_secrets_are_made_once(s);
    records_round_trip(s);
    newest_renders_first(s);
    updates_never_lose_a_write(s);
    one_key_one_render_under_concurrency(s);
    idempotency_entries_expire(s);
    assets_round_trip(s);
    webhook_outbox(s);
}

#[test]
fn sled_store_passes_the_shared_suite() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path()).unwrap();
    assert!(!s.is_shared());
    shared_suite(&s);
    session_epoch_read_cost(&s, "sled");
    // A restart keeps every sign-out.
    drop(s);
    let s = Store::open(dir.path()).unwrap();
    assert_eq!(s.session_epoch("carol").unwrap(), 2);
    assert_eq!(s.session_epoch("erin").unwrap(), 20);
    assert_eq!(s.server_secret("session", &[0; 32]).unwrap(), [1; 32]);
    // The queue is the cluster's: the embedded store says so rather than pretending.
    assert!(matches!(
        s.claim("n1", Duration::from_secs(5)),
        Err(StoreError::Unsupported(_))
    ));
}

#[test]
fn postgres_store_passes_the_shared_suite_and_runs_the_work_queue() {
    let pg = pg::Postgres::start();
    // Nodes starting together on an empty database: each applies or finds the schema, once.
    let url = pg.url();
    let mut stores: Vec<Store> = std::thread::scope(|scope| {
        let joins: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| Store::connect_postgres(&url).unwrap()))
            .collect();
        joins.into_iter().map(|j| j.join().unwrap()).collect()
    });
    let (s, s2) = (stores.remove(0), stores.remove(0));
    assert!(s.is_shared());
    shared_suite(&s);
    assert!(
        s2.get_render("task_open").unwrap().is_some(),
        "one database"
    );
    assert_eq!(
        s2.session_epoch("carol").unwrap(),
        2,
        "every node sees a sign-out"
    );
    assert_eq!(
        s2.server_secret("session", &[0; 32]).unwrap(),
        [1; 32],
        "every node has the same session secret"
    );
    session_epoch_read_cost(&s, "postgres");

    // ---- the work queue ----
    for r in s.unfinished_renders().unwrap() {
        s.delete_render(&r.id).unwrap();
    }
    // The short lane claims only renders estimated at most its limit, even past older ones.
    let mut big = sample("task_big", 900);
    big.estimated_pixel_frames = 1_000_000_000_000;
    let mut small = sample("task_small", 950);
    small.estimated_pixel_frames = 10;
    s.put_render(&big).unwrap();
    s.put_render(&small).unwrap();
    let two = Duration::from_secs(2);
    assert_eq!(
        s.claim_short("n9", two, 1_000).unwrap().map(|c| c.id),
        Some("task_small".to_string())
    );
    assert!(
        s.claim_short("n9", two, 1_000).unwrap().is_none(),
        "only long work left"
    );
    s.delete_render("task_big").unwrap();
    s.delete_render("task_small").unwrap();
    for i in 0..6 {
        s.put_render(&sample(&format!("task_q{i}"), 1000 + i))
            .unwrap();
    }
    // Two nodes claiming side by side never get the same render.
    let lease = Duration::from_secs(2);
    let claims: Vec<Vec<String>> = ["n1", "n2"]
        .into_iter()
        .map(|node| {
            let s = s.clone();
            std::thread::spawn(move || {
                let mut got = Vec::new();
                for _ in 0..3 {
                    got.push(s.claim(node, lease).unwrap().expect("work left").id);
                }
                got
            })
        })
        .map(|t| t.join().unwrap())
        .collect();
    let mut all: Vec<String> = claims.concat();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 6, "each render claimed once: {claims:?}");
    assert!(s.claim("n3", lease).unwrap().is_none(), "all leased");

    // n1 keeps renewing one render; n2 finishes one (releases it) and dies with the rest.
    let n1 = claims[0][0].clone();
    let released = claims[1][0].clone();
    s.update_render::<(), StoreError>(&n1, |r| {
        r.state = RenderState::Rendering;
        Ok(Change::Write(()))
    })
    .unwrap();
    s.release_lease("n2", &released).unwrap();
    assert_eq!(
        s.claim("n3", lease).unwrap().map(|c| c.id),
        Some(released.clone()),
        "a released queued render is claimable at once"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut taken = vec![released.clone()];
    while taken.len() < 3 && Instant::now() < deadline {
        let held = s.renew_leases("n1", claims[0].clone(), lease).unwrap();
        assert_eq!(held.len(), 3, "n1 keeps what it renews");
        let held = s.renew_leases("n3", taken.clone(), lease).unwrap();
        assert_eq!(held.len(), taken.len(), "n3 keeps what it renews");
        if let Some(c) = s.claim("n3", lease).unwrap() {
            taken.push(c.id);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    taken.retain(|id| *id != released);
    taken.sort();
    let mut expected: Vec<String> = claims[1][1..].to_vec();
    expected.sort();
    // n2's two unreleased renders expire and go to n3; n1's are never taken.
    assert_eq!(taken, expected);
    // A lease taken over is lost to its old holder.
    assert!(
        s.renew_leases("n2", claims[1].clone(), lease)
            .unwrap()
            .is_empty()
    );
    // A restarted node ends its old leases at once.
    assert_eq!(s.release_node_leases("n1").unwrap(), 3);
    assert!(s.claim("n3", lease).unwrap().is_some());

    // ---- the change feed ----
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let watcher = {
        let (s, stop) = (s.clone(), stop.clone());
        std::thread::spawn(move || {
            s.watch(&stop, |e| {
                let _ = tx.send(e);
            })
            .unwrap();
        })
    };
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(10)).unwrap(),
        StoreEvent::Resync
    );
    s2.update_render::<(), StoreError>(&n1, |r| {
        r.cancel_requested = true;
        Ok(Change::Write(()))
    })
    .unwrap();
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(10)).unwrap(),
        StoreEvent::Changed(n1.clone()),
        "a write on another connection is announced"
    );
    // A PostgreSQL restart (`pg_ctl -w` returns once it is up again; calls while it is down
    // are tests/e2e/cluster.rs's part): the feed re-opens with a Resync, and everything works
    // again. The pool's connections sat idle through the restart: each is checked before its
    // next use, so not one call fails once it is back.
    //
    // Leases that run out while the database is away are no death: n5 (alive) and n7 (dead)
    // hold the two oldest renders under 1 s leases that run out before the restart.
    let short = Duration::from_millis(1_000);
    for (id, node) in [("task_outage", "n5"), ("task_dead", "n7")] {
        let mut r = sample(id, 1 + u64::from(node == "n7"));
        r.state = RenderState::Rendering;
        s.put_render(&r).unwrap();
        assert_eq!(
            s.claim(node, short).unwrap().map(|c| c.id).as_deref(),
            Some(id)
        );
    }
    std::thread::sleep(short + Duration::from_millis(100));
    pg.restart();
    std::thread::sleep(Duration::from_millis(1_200));
    for i in 0..12 {
        match s.get_render(&n1) {
            Ok(r) => assert!(r.unwrap().cancel_requested),
            Err(e) => {
                panic!("call {i} after PostgreSQL came back failed on a stale connection: {e}")
            }
        }
    }
    // Within one lease of the database's start nobody takes a lease that ran out while it
    // was away (or just before): its holder may still be alive and about to renew.
    // (Claims go oldest first, and these two are the oldest renders.)
    let claimed = s
        .claim("n6", Duration::from_secs(30))
        .unwrap()
        .map(|c| c.id);
    assert!(
        !matches!(claimed.as_deref(), Some("task_outage" | "task_dead")),
        "a lease that ran out across a database restart is not taken over at once: {claimed:?}"
    );
    assert_eq!(
        s.renew_leases("n5", vec!["task_outage".into()], short)
            .unwrap(),
        vec!["task_outage".to_string()],
        "the living holder renews it"
    );
    // n7 never renews: one lease after the start its render is taken over.
    let deadline = Instant::now() + Duration::from_secs(10);
    let taken = loop {
        let _ = s.renew_leases("n5", vec!["task_outage".into()], short);
        if let Some(c) = s.claim("n6", short).unwrap()
            && matches!(c.id.as_str(), "task_outage" | "task_dead")
        {
            break c.id;
        }
        assert!(
            Instant::now() < deadline,
            "the dead holder's render was never taken over"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(taken, "task_dead");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(StoreEvent::Resync) => break,
            Ok(_) => {}
            Err(e) => panic!("the change feed never re-opened: {e}"),
        }
    }
    stop.store(true, Ordering::SeqCst);
    watcher.join().unwrap();

    // ---- browser sessions while the store is down: fail closed ----
    let mut config = vidforge_core::config::Config::default();
    config.tokens.insert("token-carol-1".into(), "carol".into());
    let sessions = Sessions::new(
        Auth::from_config(&config),
        s.clone(),
        Arc::new(SystemClock),
        SessionLimits::from_config(&config),
        false,
    );
    let (_, set_cookie) = sessions.sign_in("token-carol-1").unwrap().unwrap();
    let mut headers = HeaderMap::new();
    let pair = set_cookie.split(';').next().unwrap();
    headers.insert(COOKIE, HeaderValue::from_str(pair).unwrap());
    assert!(sessions.session(&headers).is_some());
    drop(pg);
    assert!(
        sessions.session(&headers).is_none(),
        "a session check that cannot read the epoch admits nobody"
    );
    assert!(sessions.check(&headers).is_err(), "and says why");
    assert!(sessions.sign_in("token-carol-1").is_err());
}

#[test]
fn postgres_database_migrated_by_the_old_runner_opens_without_migrating_again() {
    let pg = pg::Postgres::start();
    let url = pg.url();
    // What vidforge's own runner left (before refinery): the schema, and its versions in
    // `vidforge_migrations` only.
    psql(
        &url,
        "CREATE TABLE vidforge_migrations (
             version    integer PRIMARY KEY,
             name       text NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now())",
    );
    for (version, name, sql) in MIGRATIONS {
        psql(&url, sql);
        psql(
            &url,
            &format!(
                "INSERT INTO vidforge_migrations (version, name) VALUES ({version}, '{name}')"
            ),
        );
    }
    psql(
        &url,
        "INSERT INTO renders (id, principal, state, created_at, doc)
         VALUES ('task_old', 'alice', 'queued', 1, '{}')",
    );
    // It opens (migration 1 again would fail: its tables exist), twice, and keeps its rows.
    for _ in 0..2 {
        let s = Store::connect_postgres(&url).unwrap();
        assert_eq!(s.idempotency_len().unwrap(), 0);
        drop(s);
    }
    assert_eq!(
        psql(&url, "SELECT count(*) FROM renders WHERE id = 'task_old'"),
        "1"
    );
    // refinery's history now has every version, once, with refinery's own checksum, and the
    // old table is unchanged.
    let n = MIGRATIONS.len();
    assert_eq!(
        psql(
            &url,
            "SELECT count(DISTINCT version) || ' ' || count(*) || ' ' || count(checksum)
             FROM refinery_schema_history"
        ),
        format!("{n} {n} {n}")
    );
    assert_eq!(
        psql(&url, "SELECT count(*) FROM vidforge_migrations"),
        n.to_string()
    );
    // A database this build creates has both histories, complete (an older build reads the
    // old one).
    psql(&url, "CREATE DATABASE fresh");
    let fresh = url.replace("/postgres", "/fresh");
    drop(Store::connect_postgres(&fresh).unwrap());
    for table in ["vidforge_migrations", "refinery_schema_history"] {
        assert_eq!(
            psql(&fresh, &format!("SELECT count(*) FROM {table}")),
            n.to_string()
        );
    }
    // A schema newer than this build (recorded by either runner) is refused.
    psql(
        &url,
        "INSERT INTO vidforge_migrations (version, name) VALUES (999, 'from_the_future')",
    );
    match Store::connect_postgres(&url) {
        Err(StoreError::Config(m)) => assert!(m.contains("newer than this build"), "{m}"),
        other => panic!("a newer schema must be refused: {other:?}"),
    }
}
