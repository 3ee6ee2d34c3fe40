//! Reliability under faults, against the real binary over real HTTP (loopback only, every
//! loop bounded): renders whose attempts keep ending the server process fail instead of
//! looping at every boot, while clean stops never count against a render.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use vidforge_suite::*;

const WAIT: Duration = Duration::from_secs(120);

struct Fixture {
    _dir: tempfile::TempDir,
    server: Server,
    clip: String,
}

/// A server with a clip long enough at 4k that a render is still running when the test
/// stops the process.
fn fixture(extra: &[&str]) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), extra);
    let clip_path = make_clip(dir.path(), "clip.mp4", 320, 180, 4.0, false);
    let clip = upload(&server, None, &clip_path);
    Fixture {
        _dir: dir,
        server,
        clip,
    }
}

fn start_4k_render(f: &Fixture) -> String {
    let mut mcp = f.server.mcp();
    let created = mcp.tool(
        "vidforge_render_video",
        json!({"source_asset_uri": f.clip, "output_format": "mp4", "resolution": "4k"}),
        Caps::TASKS,
    );
    created.result()["taskId"].as_str().unwrap().to_string()
}

/// Waits until a worker has claimed the render (its status message is past "queued").
fn wait_claimed(f: &Fixture, id: &str) -> Value {
    f.server.mcp().wait_task(id, Caps::TASKS, WAIT, |t| {
        let message = t["statusMessage"].as_str().unwrap_or_default();
        t["status"] != "working" || !message.starts_with("Render queued")
    })
}

#[test]
fn a_render_that_keeps_ending_the_process_fails_instead_of_looping() {
    let mut f = fixture(&["--max-render-crashes", "3"]);
    let id = start_4k_render(&f);
    for crash in 1..=3 {
        let task = wait_claimed(&f, &id);
        assert_eq!(task["status"], "working", "crash {crash}: {task}");
        f.server.kill9();
        f.server.start_again();
    }
    // The third crash ends it at boot: terminal, not restarted, not temporary.
    let started = Instant::now();
    let task = f
        .server
        .mcp()
        .wait_task(&id, Caps::TASKS, WAIT, |t| t["status"] == "completed");
    assert!(started.elapsed() < Duration::from_secs(10), "{task}");
    let result = &task["result"];
    assert_eq!(result["isError"], true, "{task}");
    let env = &result["structuredContent"];
    assert_eq!(env["code"], "render_failed", "{env}");
    assert_eq!(env["temporary"], false, "{env}");
    let message = env["message"].as_str().unwrap();
    assert!(
        message.contains("3 attempts ended the server process"),
        "{message}"
    );
    // The repair is callable as-is: the original arguments.
    assert_eq!(env["repair"]["tool"], "vidforge_render_video");
    assert_eq!(env["repair"]["arguments"]["resolution"], "4k");
    // And it stays failed across further restarts (no crash loop, no second outcome).
    f.server.kill9();
    f.server.start_again();
    let again = f.server.mcp().task_get(&id, Caps::TASKS);
    assert_eq!(
        again.result()["result"]["structuredContent"]["code"],
        "render_failed"
    );
}

#[test]
fn clean_stops_do_not_count_as_crashes() {
    let mut f = fixture(&["--max-render-crashes", "1"]);
    let id = start_4k_render(&f);
    for stop in 1..=2 {
        let task = wait_claimed(&f, &id);
        assert_eq!(task["status"], "working", "stop {stop}: {task}");
        f.server.terminate();
        f.server.start_again();
    }
    let done = f
        .server
        .mcp()
        .wait_task(&id, Caps::TASKS, WAIT, |t| t["status"] == "completed");
    assert_eq!(done["result"]["isError"], false, "{done}");
}
