//! Chaos: `kill -9` at random moments while a client creates renders (some re-sending their
//! idempotency key), answers watermark approvals and polls, against the real binary on
//! loopback. Afterwards: no task, approval or key is lost, no key ever maps to two renders,
//! and every result has the size and resolution it claims.
//!
//! `VIDFORGE_CHAOS_CYCLES` (default 10; `make chaos` runs 100) and `VIDFORGE_CHAOS_SEED`
//! (default: the clock; printed, so a failing run can be replayed).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::*;
use serde_json::{Value, json};

/// A number in `0..n` (0 when `n` is 0).
fn below(rng: &mut fastrand::Rng, n: u64) -> u64 {
    rng.u64(..n.max(1))
}

#[derive(Default)]
struct Ledger {
    /// Idempotency key → the render id the server answered with.
    keys: BTreeMap<String, String>,
    /// Renders whose watermark approval the server acknowledged.
    approved: BTreeSet<String>,
    /// Renders created with a watermark.
    watermarked: BTreeSet<String>,
    violations: Vec<String>,
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn task_id(result: &Value) -> Option<String> {
    result["taskId"].as_str().map(String::from)
}

/// The client: creates, re-sends, approves and polls until `stop`, tolerating a server that is
/// down. Bounded by `stop` and by a count.
fn client(
    mut mcp: Mcp,
    clip: String,
    logo: String,
    ledger: Arc<Mutex<Ledger>>,
    stop: Arc<AtomicBool>,
    seed: u64,
) {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x9e37_79b9_7f4a_7c15);
    let mut created = 0u32;
    for _ in 0..100_000 {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        match below(&mut rng, 10) {
            // A new render (a third of them watermarked), or the same key again.
            0..=3 => {
                let known: Vec<String> = ledger.lock().unwrap().keys.keys().cloned().collect();
                let resend = !known.is_empty() && below(&mut rng, 3) == 0;
                let (key, watermark) = if resend {
                    let key = known[below(&mut rng, known.len() as u64) as usize].clone();
                    let wm = key.ends_with("-wm");
                    (key, wm)
                } else {
                    if created >= 40 {
                        continue;
                    }
                    created += 1;
                    let wm = below(&mut rng, 3) == 0;
                    (
                        format!("chaos-{seed}-{created}{}", if wm { "-wm" } else { "" }),
                        wm,
                    )
                };
                let mut args = json!({"source_asset_uri": clip, "output_format": "mp4",
                    "resolution": "720p", "idempotency_key": key});
                if watermark {
                    args["watermark"] = json!({"image_asset_uri": logo, "opacity": 0.5});
                }
                let Some(result) = mcp.try_call(
                    "tools/call",
                    json!({"name": "vidforge_render_video", "arguments": args}),
                    Caps::TASKS,
                ) else {
                    continue;
                };
                let Some(id) = task_id(&result) else {
                    // A refusal (quota): fine, nothing was created.
                    continue;
                };
                let mut l = ledger.lock().unwrap();
                match l.keys.get(&key) {
                    Some(prev) if *prev != id => {
                        let v = format!("key {key} answered {id} after {prev}");
                        l.violations.push(v);
                    }
                    _ => {
                        l.keys.insert(key, id.clone());
                    }
                }
                if watermark {
                    l.watermarked.insert(id);
                }
            }
            // Approve a render that waits for it.
            4..=5 => {
                let waiting: Vec<String> = {
                    let l = ledger.lock().unwrap();
                    l.watermarked.difference(&l.approved).cloned().collect()
                };
                if waiting.is_empty() {
                    continue;
                }
                let id = waiting[below(&mut rng, waiting.len() as u64) as usize].clone();
                let Some(task) = mcp.try_call("tasks/get", json!({"taskId": id}), Caps::TASKS)
                else {
                    continue;
                };
                if task["status"] != "input_required" {
                    continue;
                }
                let answer = mcp.try_call(
                    "tools/call",
                    json!({"name": "vidforge_approve_watermark",
                        "arguments": {"render_id": id, "approved": true}}),
                    Caps::TASKS,
                );
                if answer.is_some_and(|a| a["isError"] == false) {
                    ledger.lock().unwrap().approved.insert(id);
                }
            }
            // Poll something.
            _ => {
                let ids: Vec<String> = ledger.lock().unwrap().keys.values().cloned().collect();
                if let Some(id) = ids.get(below(&mut rng, ids.len() as u64 + 1) as usize) {
                    let _ = mcp.try_call("tasks/get", json!({"taskId": id}), Caps::TASKS);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(below(&mut rng, 60)));
    }
}

#[test]
fn kill_9_at_random_moments_loses_and_duplicates_nothing() {
    let cycles = env_u64("VIDFORGE_CHAOS_CYCLES", 10);
    let seed = env_u64(
        "VIDFORGE_CHAOS_SEED",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    )
    .max(1);
    eprintln!("chaos: {cycles} cycles, VIDFORGE_CHAOS_SEED={seed}");
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(
        &dir.path().join("data"),
        &[
            "--per-principal-concurrent",
            "64",
            "--queue-capacity",
            "256",
            // Every kill here is a crash by design; the crash limit has its own test.
            "--max-render-crashes",
            "1000000",
        ],
    );
    let clip = upload(
        &server,
        None,
        &make_clip(dir.path(), "clip.mp4", 320, 180, 0.6, true),
    );
    let logo = upload(&server, None, &make_logo(dir.path()));
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let worker = {
        let (mcp, ledger, stop) = (server.mcp(), ledger.clone(), stop.clone());
        let (clip, logo) = (clip.clone(), logo.clone());
        std::thread::spawn(move || client(mcp, clip, logo, ledger, stop, seed))
    };
    let mut rng = fastrand::Rng::with_seed(seed);
    for _ in 0..cycles {
        std::thread::sleep(Duration::from_millis(200 + below(&mut rng, 1800)));
        server.kill9();
        server.start_again();
    }
    stop.store(true, Ordering::SeqCst);
    worker.join().unwrap();

    let ledger = ledger.lock().unwrap();
    assert!(ledger.violations.is_empty(), "{:?}", ledger.violations);
    assert!(!ledger.keys.is_empty(), "the client created nothing");
    let mut mcp = server.mcp();
    // Every key still answers with its render; every render finishes.
    for (key, id) in &ledger.keys {
        let wm = key.ends_with("-wm");
        let mut args = json!({"source_asset_uri": clip, "output_format": "mp4",
            "resolution": "720p", "idempotency_key": key});
        if wm {
            args["watermark"] = json!({"image_asset_uri": logo, "opacity": 0.5});
        }
        let again = mcp.tool("vidforge_render_video", args, Caps::TASKS);
        assert_eq!(
            again.result()["taskId"],
            id.as_str(),
            "key {key} lost or duplicated"
        );
        let deadline = Instant::now() + Duration::from_secs(300);
        let done = loop {
            let task = mcp.task_get(id, Caps::TASKS).result().clone();
            match task["status"].as_str() {
                Some("completed") => break task,
                Some("input_required") => {
                    assert!(
                        !ledger.approved.contains(id),
                        "{id}: an acknowledged approval was lost: {task}"
                    );
                    mcp.tool(
                        "vidforge_approve_watermark",
                        json!({"render_id": id, "approved": true}),
                        Caps::TASKS,
                    );
                }
                _ => {}
            }
            assert!(Instant::now() < deadline, "{id} never finished: {task}");
            std::thread::sleep(Duration::from_millis(100));
        };
        let result = &done["result"];
        assert_eq!(result["isError"], false, "{id}: {done}");
        assert_eq!(result["structuredContent"]["watermark_applied"], wm, "{id}");
        // The file is what the result says it is.
        let url = result["content"][1]["_meta"]["com.vidforge/download_url"]
            .as_str()
            .unwrap();
        let bytes = reqwest::blocking::get(url).unwrap().bytes().unwrap();
        assert_eq!(
            bytes.len() as u64,
            result["structuredContent"]["size_bytes"].as_u64().unwrap(),
            "{id}"
        );
        let path = dir.path().join(format!("{id}.mp4"));
        std::fs::write(&path, &bytes).unwrap();
        let (w, h, _, _) = probe_video(&path);
        assert_eq!((w, h), (1280, 720), "{id}");
    }
    eprintln!(
        "chaos: {cycles} kills, {} renders, {} approvals, all intact",
        ledger.keys.len(),
        ledger.approved.len()
    );
}
