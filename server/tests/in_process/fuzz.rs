//! Bounded mutation fuzzing (seeded, so a failure replays): JSON-RPC bodies into the framing
//! checks, tool arguments into the argument parser, and media bytes into the probe. The
//! property is "a typed answer, never a panic". CI runs a few thousand cases;
//! `make fuzz` runs far more (`VIDFORGE_FUZZ_CASES`, `VIDFORGE_FUZZ_SEED`).
//!
//! This is mutation fuzzing from valid seeds, not coverage-guided: cargo-fuzz needs a nightly
//! toolchain, which this project's CI does not install.

use serde_json::{Map, Value, json};
use vidforge_mcp::jsonrpc;

/// A number in `0..n` (0 when `n` is 0).
fn below(rng: &mut fastrand::Rng, n: usize) -> usize {
    rng.usize(..n.max(1))
}

fn cases(default: usize) -> usize {
    std::env::var("VIDFORGE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn seed() -> u64 {
    let seed = std::env::var("VIDFORGE_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
        .max(1);
    eprintln!("VIDFORGE_FUZZ_SEED={seed}");
    seed
}

/// A random JSON value of bounded depth, biased towards the shapes the parsers expect.
fn value(rng: &mut fastrand::Rng, depth: u32) -> Value {
    const WORDS: &[&str] = &[
        "",
        "mp4",
        "webm",
        "mov",
        "avi",
        "720p",
        "1080p",
        "4k",
        "8k",
        "top_left",
        "center",
        "vidforge://assets/a_01JVXD00000000000000000000",
        "vidforge://assets/",
        "/etc/passwd",
        "task_01JVXD00000000000000000000",
        "tools/call",
        "tasks/get",
        "2.0",
        "\u{0}",
        "é🎬",
    ];
    const KEYS: &[&str] = &[
        "source_asset_uri",
        "output_format",
        "resolution",
        "watermark",
        "idempotency_key",
        "image_asset_uri",
        "position",
        "opacity",
        "jsonrpc",
        "id",
        "method",
        "params",
        "name",
        "arguments",
        "taskId",
        "_meta",
        "x",
    ];
    match below(rng, if depth == 0 { 6 } else { 8 }) {
        0 => Value::Null,
        1 => json!(below(rng, 2) == 0),
        2 => json!(rng.i64(..)),
        3 => json!([0.0, -1.0, 0.5, 1.0, 1.5, 1e308, f64::MIN_POSITIVE][below(rng, 7)]),
        4 | 5 => json!(WORDS[below(rng, WORDS.len())]),
        6 => Value::Array((0..below(rng, 4)).map(|_| value(rng, depth - 1)).collect()),
        _ => {
            let mut m = Map::new();
            for _ in 0..below(rng, 6) {
                m.insert(KEYS[below(rng, KEYS.len())].into(), value(rng, depth - 1));
            }
            Value::Object(m)
        }
    }
}

/// Replaces a random node of `v` with a random value.
fn mutate(rng: &mut fastrand::Rng, v: &mut Value) {
    match v {
        Value::Object(m) if !m.is_empty() && below(rng, 3) != 0 => {
            let keys: Vec<String> = m.keys().cloned().collect();
            let k = &keys[below(rng, keys.len())];
            if below(rng, 5) == 0 {
                m.remove(k);
            } else {
                mutate(rng, m.get_mut(k).unwrap());
            }
        }
        Value::Array(a) if !a.is_empty() && below(rng, 3) != 0 => {
            let i = below(rng, a.len());
            mutate(rng, &mut a[i]);
        }
        _ => *v = value(rng, 3),
    }
}

/// Byte-level damage: flips, truncation, insertion, duplication.
fn damage(rng: &mut fastrand::Rng, bytes: &mut Vec<u8>) {
    for _ in 0..1 + below(rng, 8) {
        if bytes.is_empty() {
            bytes.push(rng.u8(..));
            continue;
        }
        let i = below(rng, bytes.len());
        match below(rng, 5) {
            0 => bytes[i] ^= 1 << below(rng, 8),
            1 => bytes[i] = rng.u8(..),
            2 => bytes.truncate(i),
            3 => bytes.insert(i, rng.u8(..)),
            _ => {
                let end = (i + 1 + below(rng, 4096)).min(bytes.len());
                let chunk = bytes[i..end].to_vec();
                let at = below(rng, bytes.len());
                bytes.splice(at..at, chunk);
            }
        }
    }
}

#[test]
fn json_rpc_bodies_never_panic_the_framing_checks() {
    let mut rng = fastrand::Rng::with_seed(seed());
    let seeds = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": "task_x"}}),
        json!({"jsonrpc": "2.0", "id": "a", "method": "tools/call",
            "params": {"name": "vidforge_render_video", "arguments": {"source_asset_uri": "vidforge://assets/a_1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
        json!({"jsonrpc": "2.0", "id": 3, "result": {}}),
    ];
    let n = cases(5_000);
    let (mut ok, mut refused) = (0, 0);
    for i in 0..n {
        let mut v = seeds[i % seeds.len()].clone();
        for _ in 0..1 + below(&mut rng, 4) {
            mutate(&mut rng, &mut v);
        }
        let mut bytes = v.to_string().into_bytes();
        if below(&mut rng, 4) == 0 {
            damage(&mut rng, &mut bytes);
        }
        match jsonrpc::check(&bytes) {
            Ok(_) => ok += 1,
            Err(r) => {
                assert!([-32700, -32600, -32602].contains(&r.code.0), "{r:?}");
                refused += 1;
            }
        }
    }
    eprintln!("{n} bodies: {ok} passed on, {refused} refused with a JSON-RPC code");
}

#[test]
fn tool_arguments_never_panic_the_parser() {
    let mut rng = fastrand::Rng::with_seed(seed());
    let valid = json!({"source_asset_uri": "vidforge://assets/a_01JVXD00000000000000000000",
        "output_format": "mp4", "resolution": "720p",
        "watermark": {"image_asset_uri": "vidforge://assets/a_01JVXD00000000000000000001",
            "position": "top_left", "opacity": 0.5},
        "idempotency_key": "k"});
    let n = cases(5_000);
    let mut accepted = 0;
    for _ in 0..n {
        let mut v = valid.clone();
        for _ in 0..1 + below(&mut rng, 3) {
            mutate(&mut rng, &mut v);
        }
        match vidforge_mcp::inputs::render_args(&v) {
            Ok(args) => {
                accepted += 1;
                // What parses is valid: the opacity is in range, the key bounded.
                if let Some(w) = &args.watermark {
                    assert!((0.0..=1.0).contains(&w.opacity), "{v}");
                }
            }
            Err(e) => assert_eq!(e.code().as_str(), "invalid_arguments", "{v}: {e}"),
        }
    }
    eprintln!("{n} argument sets: {accepted} accepted, the rest invalid_arguments");
}

#[test]
fn damaged_media_never_panics_the_probe() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = fastrand::Rng::with_seed(seed());
    let sources = [
        vidforge_fixtures::clip(dir.path(), &vidforge_fixtures::ClipSpec::h264(160, 90)).unwrap(),
        vidforge_fixtures::clip(dir.path(), &vidforge_fixtures::ClipSpec::vp9(160, 90)).unwrap(),
    ];
    let originals: Vec<Vec<u8>> = sources.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let limits = vidforge_media::SourceLimits::DEFAULT;
    let n = cases(2_000) / 10;
    let (mut readable, mut refused) = (0, 0);
    for i in 0..n {
        let mut bytes = originals[i % originals.len()].clone();
        damage(&mut rng, &mut bytes);
        let ext = if i % 2 == 0 { "mp4" } else { "webm" };
        let path = dir.path().join(format!("case.{ext}"));
        std::fs::write(&path, &bytes).unwrap();
        match vidforge_media::probe_within(&path, &limits) {
            Ok(_) => readable += 1,
            Err(e) => {
                assert!(!e.to_string().is_empty());
                refused += 1;
            }
        }
    }
    eprintln!("{n} damaged files: {readable} still readable, {refused} refused with a typed error");
}
