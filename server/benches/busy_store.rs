//! A week of a busy host (issue #49), on sled and on PostgreSQL side by side in one run:
//! `cargo bench -p vidforge --bench busy_store -- --records 1000000 --out FILE.json`
//! (`--principals N`, default 1000; `--compare BIN`: the same runs with another vidforge
//! binary too, e.g. main's, on the same stores).
//!
//! Each backend's store is filled in three steps, written directly through the store's
//! batched writer (no rendering), and after each step the real binary is started on it and
//! measured from outside, over HTTP on loopback:
//!
//! 1. **empty**: no record;
//! 2. **touched**: only what the measured operations touch: principal `one`'s render,
//!    principal `busy`'s 10,000, 100 renders awaiting approval (boot recovery reads them),
//!    and 2,000 expired ones (1,000 results past `result_ttl`, 1,000 tombstones past their
//!    grace) for the first sweep;
//! 3. **full**: the same plus the rest of `--records`, over `--principals` principals and 14
//!    days (7 of results kept, 7 of tombstones), none of them due; and what a host keeps beside
//!    those renders: for each kept result its source asset (record and directory) and its
//!    result directory, and for the last 22 hours' renders an idempotency key, none due either.
//!
//! The expired ones are written again before every measured start, so every first sweep has
//! the same to do. Measured: boot to ready (spawn to the first `/healthz` answer; the median
//! of three starts), the first sweep (the maintenance thread's, right after boot: the 2,000
//! due) and the next one (nothing due), each from the server's own log (`elapsed_ms`),
//! `resources/list` of `one` and of `busy`, `tasks/get` of `one`'s render (medians), and the
//! server's peak RSS (`VmHWM`) after all that; for sled, also what opening the database
//! alone costs (in a process of its own: `--open-only`). Last, the first start of this build on the
//! full store as a build from before the indexes left it (the upgrade: the index build is
//! in its boot). PostgreSQL is a private server the bench starts (tests/pg), analysed after
//! each fill as autovacuum would.

#[path = "../store/tests/pg/mod.rs"]
mod pg;
#[path = "busy_store/served.rs"]
mod served;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use vidforge_core::store::{
    AssetKind, AssetProbe, AssetRecord, IdempotencyEntry, RenderRecord, Store,
};
use vidforge_store_fixtures::{awaiting_render, finished_render};

use served::{Served, median_ms, vm_hwm_mib};

const HOUR: u64 = 3_600_000;
const DAY: u64 = 24 * HOUR;
const BUSY: u64 = 10_000;
const AWAITING: u64 = 100;
const DUE: u64 = 1_000;
const TOKENS: [&str; 4] = ["--token", "one-token=one", "--token", "busy-token=busy"];

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// `n` spread over `[from, to)` by a fixed permutation (so writes are out of time order).
fn spread(n: u64, count: u64, from: u64, to: u64) -> u64 {
    from + (n * 7_919 % count.max(1)) * ((to - from) / count.max(1))
}

/// What the measured operations touch (see the module doc); ids are numbered from `10^9`.
fn touched(now: u64) -> Vec<RenderRecord> {
    let mut out = vec![finished_render("one", now - HOUR, 1_000_000_000)];
    for i in 0..BUSY {
        let age = spread(i, BUSY, HOUR, 7 * DAY - 2 * HOUR);
        out.push(finished_render("busy", now - age, 1_000_000_001 + i));
    }
    for i in 0..AWAITING {
        let created = now - HOUR + i;
        out.push(awaiting_render(
            "waiting",
            created,
            1_100_000_000 + i,
            now + DAY,
        ));
    }
    out.extend(due(now));
    out
}

/// The expired renders each first sweep deletes: results past 7 days, tombstones past 14.
fn due(now: u64) -> Vec<RenderRecord> {
    (0..2 * DUE)
        .map(|i| {
            let tombstone = i >= DUE;
            let base = if tombstone { 14 * DAY } else { 7 * DAY };
            let age = spread(i % DUE, DUE, base + 60_000, base + HOUR);
            let mut r = finished_render(
                &format!("p{:03}", i % 97),
                now - age - 30_000,
                1_200_000_000 + i,
            );
            r.result_deleted = tombstone;
            r
        })
        .collect()
}

/// Filler record `i` of `count`: 14 days minus margins, results within 7 days, tombstones
/// after; none due while the bench runs.
fn filler(i: u64, count: u64, principals: u64, now: u64) -> RenderRecord {
    let age = spread(i, count, 0, 14 * DAY - 4 * HOUR);
    let (age, tombstone) = if age < 7 * DAY - 2 * HOUR {
        (age, false)
    } else {
        (age + 2 * HOUR, true)
    };
    let principal = format!("p{:03}", i % principals.saturating_sub(3).max(1));
    let mut r = finished_render(&principal, now - age - 30_000, i);
    r.result_deleted = tombstone;
    r
}

/// Where a store lives: a sled directory, or a PostgreSQL database.
enum Place {
    Sled(PathBuf),
    Postgres(String),
}

impl Place {
    fn open(&self) -> Store {
        match self {
            Place::Sled(dir) => Store::open(&dir.join("db")).unwrap(),
            Place::Postgres(url) => Store::connect_postgres(url).unwrap(),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Place::Sled(_) => "sled",
            Place::Postgres(_) => "postgres",
        }
    }
}

/// Writes `records` in batches of 10,000; records per second.
fn write(place: &Place, records: impl Iterator<Item = RenderRecord>) -> f64 {
    let store = place.open();
    let started = Instant::now();
    let mut batch = Vec::with_capacity(10_000);
    let mut n = 0usize;
    for r in records {
        batch.push(r);
        if batch.len() == 10_000 {
            store.put_renders(&batch).unwrap();
            n += batch.len();
            batch.clear();
            if n.is_multiple_of(100_000) {
                eprintln!(
                    "  {} records written ({:.0} s)",
                    n,
                    started.elapsed().as_secs_f64()
                );
            }
        }
    }
    store.put_renders(&batch).unwrap();
    n += batch.len();
    store.flush().unwrap();
    drop(store);
    if let Place::Postgres(url) = place {
        pg::psql(url, "VACUUM ANALYZE renders");
    }
    n as f64 / started.elapsed().as_secs_f64()
}

/// What a host keeps beside filler render `r`: its source asset (record and directory), its
/// result directory (while the result is kept), and its idempotency key (within the keys' 22
/// hours). Written directly, none due; the counts of each.
fn keep_beside(store: &Store, media: &Path, r: &RenderRecord, now: u64, kept: &mut [u64; 3]) {
    if r.result_deleted {
        return;
    }
    let asset = AssetRecord {
        id: r.args.source_asset.clone(),
        uri: format!("vidforge://assets/{}", r.args.source_asset),
        principal: r.principal.clone(),
        kind: AssetKind::Video,
        file_name: "clip.mp4".into(),
        path: media
            .join("assets")
            .join(&r.args.source_asset)
            .join("clip.mp4"),
        size_bytes: 1,
        created_at: r.created_at,
        probe: AssetProbe::default(),
    };
    store.put_asset(&asset).unwrap();
    std::fs::create_dir_all(media.join("assets").join(&asset.id)).unwrap();
    std::fs::create_dir_all(media.join("results").join(&r.id)).unwrap();
    kept[0] += 1;
    kept[1] += 1;
    if now - r.created_at < 22 * HOUR {
        let entry = IdempotencyEntry {
            render_id: r.id.clone(),
            args_hash: "bench".into(),
            created_at: r.created_at,
        };
        store.put_idempotency(&r.principal, &r.id, &entry).unwrap();
        kept[2] += 1;
    }
}

/// Writes [`keep_beside`] of every filler render of `count`; the counts of assets, result
/// directories and idempotency keys.
fn write_kept(place: &Place, media: &Path, count: u64, args: &Args) -> [u64; 3] {
    let store = place.open();
    let mut kept = [0; 3];
    for i in 0..count {
        let r = filler(i, count, args.principals, args.now);
        keep_beside(&store, media, &r, args.now, &mut kept);
    }
    store.flush().unwrap();
    drop(store);
    if let Place::Postgres(url) = place {
        pg::psql(url, "VACUUM ANALYZE assets");
        pg::psql(url, "VACUUM ANALYZE idempotency");
    }
    kept
}

/// What a run measures: the binary (its label and path), the one render's id, a scratch dir.
struct Run<'a> {
    label: &'a str,
    /// `--compare`'s binary.
    compared: bool,
    bin: &'a Path,
    one: &'a str,
    dir: &'a Path,
}

/// The row of a start that never served.
fn failed_row(run: &Run<'_>, place: &Place, stage: &str, records: u64, failed: String) -> Value {
    let row = json!({
        "binary": run.label, "store": place.name(), "stage": stage, "records": records,
        "failed": failed,
    });
    eprintln!("{row}");
    row
}

/// One start of the run's binary on `place` holding `records`, measured.
fn measure(run: &Run<'_>, place: &Place, stage: &str, records: u64) -> Value {
    let (served, boot) = match Served::start(run.bin, place, run.dir) {
        Ok(started) => started,
        Err(failed) => return failed_row(run, place, stage, records, failed),
    };
    // A build from before #49 sweeps during its boot and logs no sweep's time.
    let patience = Duration::from_secs(if run.compared { 120 } else { 600 });
    let sweeps = match served.sweeps(2, patience) {
        Some(times) => times.into_iter().map(Some).collect(),
        None => vec![None, None],
    };
    let base = &served.base;
    let timed =
        |token, method, params, n| (records > 0).then(|| median_ms(base, token, method, params, n));
    let list_one = timed("one-token", "resources/list", json!({}), 101);
    let list_busy = timed("busy-token", "resources/list", json!({}), 101);
    let get = timed("one-token", "tasks/get", json!({"taskId": run.one}), 201);
    let rss = served.peak_rss_mib();
    served.stop();
    // Two more starts, for the median boot.
    let mut boots = vec![boot];
    for _ in 0..2 {
        let Ok((again, boot)) = Served::start(run.bin, place, run.dir) else {
            continue;
        };
        boots.push(boot);
        again.stop();
    }
    boots.sort();
    let boot = boots[boots.len() / 2];
    let row = json!({
        "binary": run.label, "store": place.name(), "stage": stage, "records": records,
        "boot_to_ready_ms": boot.as_secs_f64() * 1000.0,
        "boot_to_ready_each_ms": boots.iter().map(|b| b.as_secs_f64() * 1000.0).collect::<Vec<_>>(),
        "first_sweep_ms": sweeps[0], "idle_sweep_ms": sweeps[1],
        "list_one_ms": list_one, "list_busy_ms": list_busy, "tasks_get_ms": get,
        "peak_rss_mib": rss,
    });
    eprintln!("{row}");
    row
}

/// The first start of this build on the full store as a build from before #49 left it: the
/// sled index tree emptied, or PostgreSQL's new indexes dropped. Its boot includes building
/// the indexes (sled: every record read once; PostgreSQL: `CREATE INDEX CONCURRENTLY`).
fn measure_upgrade(run: &Run<'_>, place: &Place, records: u64) -> Value {
    match place {
        Place::Sled(_) => {
            // The store's own tree, opened as an extension would open one: the bench only.
            let store = place.open();
            store.open_tree("render_index").unwrap().clear().unwrap();
            store.flush().unwrap();
        }
        Place::Postgres(url) => drop(pg::psql(
            url,
            "DROP INDEX renders_results, renders_tombstones, renders_stale_previews, \
             renders_awaiting, renders_leased",
        )),
    }
    let (served, boot) = match Served::start(run.bin, place, run.dir) {
        Ok(started) => started,
        Err(failed) => return failed_row(run, place, "upgrade", records, failed),
    };
    let row = json!({
        "binary": run.label, "store": place.name(), "stage": "upgrade", "records": records,
        "boot_to_ready_ms": boot.as_secs_f64() * 1000.0,
        "peak_rss_mib": served.peak_rss_mib(),
    });
    served.stop();
    eprintln!("{row}");
    row
}

/// Fills `place` in its three stages and measures each with every binary of `runs`.
fn bench_store(place: &Place, runs: &[Run<'_>], args: &Args) -> Vec<Value> {
    let now = args.now;
    let mut rows = Vec::new();
    let measure_all = |stage: &str, records: u64, rows: &mut Vec<Value>| {
        for run in runs {
            if records > 0 {
                write(place, due(now).into_iter());
            }
            let mut row = measure(run, place, stage, records);
            if !run.compared {
                row["sled_open"] = json!(sled_open_cost(place));
            }
            rows.push(row);
        }
    };
    drop(place.open());
    measure_all("empty", 0, &mut rows);
    let touched = touched(now);
    let base = touched.len() as u64;
    write(place, touched.into_iter());
    measure_all("touched", base, &mut rows);
    let rest = args.records.saturating_sub(base);
    eprintln!("{}: writing {rest} more records", place.name());
    let started = Instant::now();
    let per_s = write(
        place,
        (0..rest).map(|i| filler(i, rest, args.principals, now)),
    );
    let fill_seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "{}: {rest} records written in {fill_seconds:.0} s ({per_s:.0}/s)",
        place.name(),
    );
    let media = match place {
        Place::Sled(d) => d.clone(),
        Place::Postgres(_) => runs[0].dir.join("pg-node"),
    };
    let kept = write_kept(place, &media, rest, args);
    eprintln!(
        "{}: kept beside them: {} assets, {} result directories, {} idempotency keys",
        place.name(),
        kept[0],
        kept[1],
        kept[2]
    );
    let first_full = rows.len();
    measure_all("full", base + rest, &mut rows);
    rows[first_full]["fill_records_per_s"] = json!(per_s);
    rows[first_full]["fill_seconds"] = json!(fill_seconds);
    rows[first_full]["kept_assets"] = json!(kept[0]);
    rows[first_full]["kept_result_dirs"] = json!(kept[1]);
    rows[first_full]["kept_idempotency_keys"] = json!(kept[2]);
    if let Place::Postgres(_) = place {
        for (query, plan) in place.open().render_query_plans("busy", true).unwrap() {
            println!(
                "EXPLAIN ANALYZE of {query} on {} records:\n{plan}\n",
                base + rest
            );
        }
    }
    rows.push(measure_upgrade(&runs[0], place, base + rest));
    rows
}

struct Args {
    records: u64,
    principals: u64,
    compare: Option<PathBuf>,
    out: Option<PathBuf>,
    now: u64,
}

fn args() -> Args {
    let argv: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        argv.iter()
            .position(|a| a == name)
            .and_then(|i| argv.get(i + 1).cloned())
    };
    Args {
        records: arg("--records").map_or(1_000_000, |v| v.parse().expect("--records N")),
        principals: arg("--principals").map_or(1_000, |v| v.parse().expect("--principals N")),
        compare: arg("--compare").map(PathBuf::from),
        out: arg("--out").map(PathBuf::from),
        now: now_ms(),
    }
}

fn cell(v: &Value) -> String {
    match v.as_f64() {
        Some(x) if x >= 100.0 => format!("{x:.0}"),
        Some(x) => format!("{x:.2}"),
        None => "—".into(),
    }
}

/// `--open-only DIR`: opens the sled store in `DIR` (as a start does, nothing else) and
/// prints how long that took and the peak RSS it cost, as JSON: what sled itself costs, in a
/// process of its own.
fn open_only(dir: &Path) {
    let started = Instant::now();
    let store = Store::open(&dir.join("db")).unwrap();
    let open_ms = started.elapsed().as_secs_f64() * 1000.0;
    let rss_mib = vm_hwm_mib(&std::fs::read_to_string("/proc/self/status").unwrap());
    drop(store);
    println!("{}", json!({"open_ms": open_ms, "rss_mib": rss_mib}));
}

/// [`open_only`] in a child process.
fn sled_open_cost(place: &Place) -> Option<Value> {
    let Place::Sled(dir) = place else {
        return None;
    };
    let out = Command::new(std::env::current_exe().unwrap())
        .arg("--open-only")
        .arg(dir)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).ok()
}

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    if let Some(i) = argv.iter().position(|a| a == "--open-only") {
        return open_only(Path::new(&argv[i + 1]));
    }
    let args = args();
    let dir = tempfile::tempdir().unwrap();
    let ours = PathBuf::from(env!("CARGO_BIN_EXE_vidforge"));
    let one = finished_render("one", args.now - HOUR, 1_000_000_000).id;
    let mut runs = vec![Run {
        label: "this build",
        compared: false,
        bin: &ours,
        one: &one,
        dir: dir.path(),
    }];
    if let Some(other) = &args.compare {
        runs.push(Run {
            label: "compared",
            compared: true,
            bin: other,
            one: &one,
            dir: dir.path(),
        });
    }
    let pg = pg::Postgres::start();
    let sled = Place::Sled(dir.path().join("sled"));
    pg::psql(&pg.url(), "CREATE DATABASE busy");
    let postgres = Place::Postgres(pg.url().replace("/postgres", "/busy"));
    let mut rows = bench_store(&sled, &runs, &args);
    rows.extend(bench_store(&postgres, &runs, &args));

    println!(
        "| store | records | binary | boot to ready ms | first sweep (2,000 due) ms | next sweep (none due) ms | resources/list (1) ms | resources/list (10,000) ms | tasks/get ms | peak RSS MiB |"
    );
    println!("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        if let Some(failed) = r["failed"].as_str() {
            println!(
                "| {} | {} ({}) | {} | did not start: {failed} |||||||",
                r["store"].as_str().unwrap(),
                r["records"],
                r["stage"].as_str().unwrap(),
                r["binary"].as_str().unwrap(),
            );
            continue;
        }
        let c = |k: &str| cell(&r[k]);
        println!(
            "| {} | {} ({}) | {} | {} | {} | {} | {} | {} | {} | {} |",
            r["store"].as_str().unwrap(),
            r["records"],
            r["stage"].as_str().unwrap(),
            r["binary"].as_str().unwrap(),
            c("boot_to_ready_ms"),
            c("first_sweep_ms"),
            c("idle_sweep_ms"),
            c("list_one_ms"),
            c("list_busy_ms"),
            c("tasks_get_ms"),
            c("peak_rss_mib"),
        );
    }
    if let Some(out) = &args.out {
        std::fs::write(out, serde_json::to_string_pretty(&rows).unwrap()).unwrap();
    }
}
