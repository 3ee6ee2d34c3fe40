//! Task-store operations per second and latency percentiles, the embedded sled store and
//! PostgreSQL side by side in one run: `cargo bench -p vidforge-store --bench store`
//! (`-- --ops N`, default 2000; `-- --out FILE.json` also writes the numbers).
//!
//! - **create**: `insert_render` with an idempotency key, then `flush` (durable before the
//!   client is answered, as the service does; PostgreSQL: one committed transaction).
//! - **get**: `get_render` of a random existing render.
//! - **update**: one compare-and-swap / version-checked progress write.
//! - **claim**: the cluster work queue's `claim` (`FOR UPDATE SKIP LOCKED` + lease) of a
//!   queued render; PostgreSQL only (the embedded store's queue is in memory).
//!
//! PostgreSQL is a private server started by the bench (initdb in a temp dir, loopback,
//! default settings: `synchronous_commit` and `fsync` on), like the tests' one.

#[path = "../tests/pg/mod.rs"]
mod pg;

use std::time::{Duration, Instant};

use serde_json::json;
use vidforge_store::*;

struct Stats {
    op: &'static str,
    backend: &'static str,
    n: usize,
    ops_per_s: f64,
    p50_us: f64,
    p99_us: f64,
}

fn measure(op: &'static str, backend: &'static str, n: usize, mut f: impl FnMut(usize)) -> Stats {
    let mut lat = Vec::with_capacity(n);
    let started = Instant::now();
    for i in 0..n {
        let t = Instant::now();
        f(i);
        lat.push(t.elapsed());
    }
    let total = started.elapsed();
    lat.sort();
    let pct = |p: f64| lat[((n as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1e6;
    Stats {
        op,
        backend,
        n,
        ops_per_s: n as f64 / total.as_secs_f64(),
        p50_us: pct(0.50),
        p99_us: pct(0.99),
    }
}

fn record(i: usize) -> RenderRecord {
    let args = RenderArgs {
        source_asset: "a_X".into(),
        output_format: OutputFormat::Mp4,
        resolution: Resolution::P1080,
        watermark: None,
        idempotency_key: Some(format!("key-{i}")),
        quality_report: None,
    };
    let original = json!({"source_asset_uri": "vidforge://assets/a_X"});
    RenderRecord::new(
        format!("task_bench{i:08}"),
        "bench",
        args,
        original,
        1_000 + i as u64,
    )
}

fn run(store: &Store, backend: &'static str, n: usize) -> Vec<Stats> {
    let mut out = Vec::new();
    out.push(measure("create", backend, n, |i| {
        let rec = record(i);
        let key = NewKey {
            principal: "bench",
            key: rec.args.idempotency_key.as_deref().unwrap(),
            entry: IdempotencyEntry {
                render_id: rec.id.clone(),
                args_hash: "h".into(),
                created_at: rec.created_at,
            },
            stale_before: 0,
        };
        assert_eq!(
            store.insert_render(&rec, Some(&key)).unwrap(),
            Inserted::Created
        );
        store.flush().unwrap();
    }));
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng as usize % n
    };
    out.push(measure("get", backend, n, |_| {
        let id = record(next()).id;
        assert!(store.get_render(&id).unwrap().is_some());
    }));
    out.push(measure("update", backend, n, |i| {
        store
            .update_render::<(), StoreError>(&record(i).id, |r| {
                r.progress = Some(ProgressSnapshot::new(ProgressStage::Rendering, 1, Some(2)));
                Ok(Change::Write(()))
            })
            .unwrap();
    }));
    if store.is_shared() {
        out.push(measure("claim", backend, n, |_| {
            assert!(
                store
                    .claim("bench-node", Duration::from_secs(60))
                    .unwrap()
                    .is_some()
            );
        }));
    }
    out
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let n: usize = arg("--ops").map_or(2000, |v| v.parse().expect("--ops N"));
    let dir = tempfile::tempdir().unwrap();
    let sled = Store::open(dir.path()).unwrap();
    let pg = pg::Postgres::start();
    let postgres = Store::connect_postgres(&pg.url()).unwrap();

    let mut rows = run(&sled, "sled", n);
    rows.extend(run(&postgres, "postgres", n));

    println!("| op | store | ops | ops/s | p50 µs | p99 µs |");
    println!("|---|---|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {:.0} | {:.0} | {:.0} |",
            r.op, r.backend, r.n, r.ops_per_s, r.p50_us, r.p99_us
        );
    }
    for op in ["create", "get", "update"] {
        let of = |b: &str| rows.iter().find(|r| r.op == op && r.backend == b);
        if let (Some(s), Some(p)) = (of("sled"), of("postgres")) {
            println!(
                "{op}: postgres/sled throughput ratio {:.2}",
                p.ops_per_s / s.ops_per_s
            );
        }
    }
    if let Some(path) = arg("--out") {
        let json: Vec<_> = rows
            .iter()
            .map(|r| {
                json!({"op": r.op, "store": r.backend, "ops": r.n, "ops_per_s": r.ops_per_s,
                    "p50_us": r.p50_us, "p99_us": r.p99_us})
            })
            .collect();
        std::fs::write(&path, serde_json::to_string_pretty(&json).unwrap()).unwrap();
    }
}
