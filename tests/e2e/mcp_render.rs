//! End-to-end renders through the MCP front over real HTTP with real media: the task path
//! with form-elicitation approval, the fallback tools, rejection with a callable repair,
//! approval timeout, cancellation, task expiry, idempotency, `kill -9` recovery, and what an
//! upload says of its colour (SDR, HLG, PQ with its HDR metadata).

use std::time::Duration;

use crate::support::*;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(120);

struct Fixture {
    dir: tempfile::TempDir,
    server: Server,
    clip: String,
    logo: String,
}

fn fixture(extra: &[&str]) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), extra);
    let clip_path = make_clip(dir.path(), "clip.mp4", 320, 180, 0.6, true);
    let logo_path = make_logo(dir.path());
    let clip = upload(&server, None, &clip_path);
    let logo = upload(&server, None, &logo_path);
    Fixture {
        dir,
        server,
        clip,
        logo,
    }
}

fn render_args(f: &Fixture, watermark: bool) -> Value {
    let mut args =
        json!({"source_asset_uri": f.clip, "output_format": "mp4", "resolution": "720p"});
    if watermark {
        args["watermark"] =
            json!({"image_asset_uri": f.logo, "position": "top_left", "opacity": 0.6});
    }
    args
}

fn status_of(task: &Value) -> &str {
    task["status"].as_str().unwrap_or_default()
}

#[test]
fn task_path_with_elicitation_approval_delivers_a_playable_video() {
    let f = fixture(&[]);
    let mut mcp = f.server.mcp();
    let created = mcp.tool("vidforge_render_video", render_args(&f, true), Caps::FULL);
    assert_result("tasks", "CreateTaskResult", &created);
    let task = created.result();
    assert_eq!(task["resultType"], "task");
    assert_eq!(task["status"], "working");
    assert_eq!(task["ttlMs"], 86_400_000);
    let id = task["taskId"].as_str().unwrap().to_string();
    assert!(id.starts_with("task_"));

    // Durable before the answer: an immediate tasks/get resolves.
    let first = mcp.task_get(&id, Caps::FULL);
    assert_result("tasks", "GetTaskResult", &first);

    let waiting = mcp.wait_task(&id, Caps::FULL, WAIT, |t| status_of(t) == "input_required");
    assert_eq!(waiting["pollIntervalMs"], 30_000);
    let request = &waiting["inputRequests"]["watermark-approval-1"];
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(request["params"]["mode"], "form");
    assert!(
        request["params"]["message"]
            .as_str()
            .unwrap()
            .contains("top_left, opacity 0.6")
    );

    // The preview is a readable PNG resource.
    let preview_uri = format!("vidforge://renders/{id}/watermark-preview.png");
    let preview = mcp.call("resources/read", json!({"uri": preview_uri}), Caps::FULL);
    assert_result("core", "ReadResourceResult", &preview);
    assert_eq!(preview.result()["contents"][0]["mimeType"], "image/png");

    let update = mcp.call(
        "tasks/update",
        json!({"taskId": id, "inputResponses": {"watermark-approval-1": {"action": "accept", "content": {"approved": true}}}}),
        Caps::FULL,
    );
    assert_eq!(update.result()["resultType"], "complete");

    let done = mcp.wait_task(&id, Caps::FULL, WAIT, |t| status_of(t) == "completed");
    assert_schema("tasks", "GetTaskResult", &done);
    let result = &done["result"];
    assert_eq!(result["isError"], false);
    assert_eq!(result["content"][1]["type"], "resource_link");
    let sc = &result["structuredContent"];
    assert_eq!(sc["status"], "completed");
    assert_eq!(sc["resolution"], "720p");
    assert_eq!(sc["watermark_applied"], true);
    let video_uri = sc["video_uri"].as_str().unwrap();
    assert_eq!(video_uri, format!("vidforge://videos/{id}/final.mp4"));

    // Download over plain HTTP, with Range support for players.
    let client = reqwest::blocking::Client::new();
    let url = format!("{}/videos/{id}/final.mp4", f.server.base());
    let partial = client
        .get(&url)
        .header("Range", "bytes=0-99")
        .send()
        .unwrap();
    assert_eq!(partial.status().as_u16(), 206);
    assert_eq!(partial.bytes().unwrap().len(), 100);
    let full = client.get(&url).send().unwrap().bytes().unwrap();
    assert_eq!(full.len() as u64, sc["size_bytes"].as_u64().unwrap());
    let out = f.dir.path().join("downloaded.mp4");
    std::fs::write(&out, &full).unwrap();
    let (w, h, codec, audio) = probe_video(&out);
    assert_eq!((w, h, codec.as_str(), audio), (1280, 720, "h264", true));
}

#[test]
fn fallback_tools_render_without_the_tasks_extension() {
    let f = fixture(&[]);
    let mut mcp = f.server.mcp();
    let accepted = mcp.tool("vidforge_render_video", render_args(&f, true), Caps::NONE);
    assert_result("core", "CallToolResult", &accepted);
    let sc = &accepted.result()["structuredContent"];
    assert_eq!(sc["status"], "accepted");
    assert_eq!(sc["follow_up"]["tool"], "vidforge_get_render_status");
    let id = sc["render_id"].as_str().unwrap().to_string();

    let mut status = Value::Null;
    for _ in 0..1200 {
        let reply = mcp.tool(
            "vidforge_get_render_status",
            json!({"render_id": id}),
            Caps::NONE,
        );
        status = reply.result()["structuredContent"].clone();
        if status["state"] == "awaiting_watermark_approval" {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(status["state"], "awaiting_watermark_approval", "{status}");
    assert_eq!(status["follow_up"]["tool"], "vidforge_approve_watermark");
    assert_eq!(
        status["watermark_preview_uri"],
        format!("vidforge://renders/{id}/watermark-preview.png")
    );

    let approve = mcp.tool(
        "vidforge_approve_watermark",
        json!({"render_id": id, "approved": true}),
        Caps::NONE,
    );
    assert_eq!(approve.result()["isError"], false, "{}", approve.body);
    // Replaying the same decision is a no-op; a conflicting one is refused.
    let again = mcp.tool(
        "vidforge_approve_watermark",
        json!({"render_id": id, "approved": true}),
        Caps::NONE,
    );
    assert_eq!(again.result()["isError"], false);
    let conflict = mcp.tool(
        "vidforge_approve_watermark",
        json!({"render_id": id, "approved": false}),
        Caps::NONE,
    );
    assert_eq!(
        conflict.result()["structuredContent"]["code"],
        "approval_already_recorded"
    );

    for _ in 0..1200 {
        let reply = mcp.tool(
            "vidforge_get_render_status",
            json!({"render_id": id}),
            Caps::NONE,
        );
        status = reply.result()["structuredContent"].clone();
        if status["terminal"] == true {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(status["state"], "succeeded", "{status}");
    assert_eq!(
        status["video_uri"],
        format!("vidforge://videos/{id}/final.mp4")
    );
    assert_eq!(status["watermark_applied"], true);
}

#[test]
fn quota_refusals_carry_a_callable_repair() {
    let f = fixture(&["--per-principal-concurrent", "1"]);
    let mut mcp = f.server.mcp();
    // A watermarked render holds the principal's only slot while it waits for approval.
    let held = mcp.tool("vidforge_render_video", render_args(&f, true), Caps::TASKS);
    let id = held.result()["taskId"].as_str().unwrap().to_string();
    mcp.wait_task(&id, Caps::TASKS, WAIT, |t| status_of(t) == "input_required");
    let mut args = render_args(&f, false);
    args["idempotency_key"] = json!("second-render");
    let refused = mcp.tool("vidforge_render_video", args.clone(), Caps::TASKS);
    let env = &refused.result()["structuredContent"];
    assert_eq!(env["code"], "render_quota_exceeded", "{env}");
    assert_eq!(env["temporary"], true);
    assert!(env["retry_after_ms"].as_u64().unwrap() > 0);
    // Callable as-is: the original arguments (a new render, so without the key).
    assert_eq!(env["repair"]["tool"], "vidforge_render_video");
    assert_eq!(env["repair"]["arguments"], render_args(&f, false), "{env}");
}

#[test]
fn rejection_ends_completed_with_a_callable_repair() {
    let f = fixture(&[]);
    let mut mcp = f.server.mcp();
    let created = mcp.tool("vidforge_render_video", render_args(&f, true), Caps::TASKS);
    let id = created.result()["taskId"].as_str().unwrap().to_string();
    let waiting = mcp.wait_task(&id, Caps::TASKS, WAIT, |t| status_of(t) == "input_required");
    // No elicitation declared on this poll: no ElicitRequest, the message names the tool.
    assert_eq!(waiting["inputRequests"], json!({}));
    assert!(
        waiting["statusMessage"]
            .as_str()
            .unwrap()
            .contains("vidforge_approve_watermark")
    );

    let reject = mcp.tool(
        "vidforge_approve_watermark",
        // A terminal escape and a right-to-left override: kept out of the note.
        json!({"render_id": id, "approved": false, "note": "logo too large\u{1b}[2J\u{202e}"}),
        Caps::TASKS,
    );
    assert_eq!(reject.result()["isError"], false);
    let done = mcp.wait_task(&id, Caps::TASKS, WAIT, |t| status_of(t) == "completed");
    let result = &done["result"];
    assert_eq!(result["isError"], true);
    let env = &result["structuredContent"];
    assert_eq!(env["code"], "watermark_rejected");
    let reason = env["details"]["reason"].as_str().unwrap();
    assert!(reason.contains("logo too large[2J"), "{reason}");
    assert!(!reason.contains(['\u{1b}', '\u{202e}']), "{reason:?}");
    let repair = &env["repair"];
    assert_eq!(repair["tool"], "vidforge_render_video");
    assert_eq!(repair["arguments"], render_args(&f, true));

    // The repair is literally callable.
    let again = mcp.tool(
        "vidforge_render_video",
        repair["arguments"].clone(),
        Caps::TASKS,
    );
    assert_result("tasks", "CreateTaskResult", &again);
    assert_ne!(again.result()["taskId"], json!(id));
}

#[test]
fn unanswered_approval_times_out_and_cancel_is_cooperative() {
    let f = fixture(&["--approval-timeout", "2s"]);
    let mut mcp = f.server.mcp();
    let created = mcp.tool("vidforge_render_video", render_args(&f, true), Caps::TASKS);
    let id = created.result()["taskId"].as_str().unwrap().to_string();
    let done = mcp.wait_task(&id, Caps::TASKS, WAIT, |t| status_of(t) == "completed");
    assert_eq!(
        done["result"]["structuredContent"]["code"],
        "watermark_approval_timeout"
    );

    let created = mcp.tool("vidforge_render_video", render_args(&f, true), Caps::TASKS);
    let id = created.result()["taskId"].as_str().unwrap().to_string();
    let ack = mcp.call("tasks/cancel", json!({"taskId": id}), Caps::TASKS);
    assert_eq!(ack.result()["resultType"], "complete");
    let cancelled = mcp.wait_task(&id, Caps::TASKS, WAIT, |t| status_of(t) == "cancelled");
    assert!(cancelled.get("result").is_none());
    // Cancelling a terminal task is the same bare ack.
    let ack = mcp.call("tasks/cancel", json!({"taskId": id}), Caps::TASKS);
    assert_eq!(ack.result()["resultType"], "complete");
}

#[test]
fn expired_tasks_route_to_the_status_tool() {
    let f = fixture(&["--task-ttl", "1s"]);
    let mut mcp = f.server.mcp();
    let created = mcp.tool("vidforge_render_video", render_args(&f, false), Caps::TASKS);
    let id = created.result()["taskId"].as_str().unwrap().to_string();
    std::thread::sleep(Duration::from_millis(1500));
    let expired = mcp.task_get(&id, Caps::TASKS);
    assert_rpc_error(&expired, -32602);
    let data = &expired.error()["data"];
    assert_eq!(data["machine_code"], "task_expired");
    assert_eq!(data["repair"]["tool"], "vidforge_get_render_status");
    assert_eq!(data["repair"]["arguments"]["render_id"], json!(id));
    // The longer-lived surface still answers.
    let status = mcp.tool(
        "vidforge_get_render_status",
        json!({"render_id": id}),
        Caps::NONE,
    );
    assert_eq!(status.result()["isError"], false);
}

#[test]
fn idempotency_keys_replay_conflict_and_deduplicate_concurrent_calls() {
    let f = fixture(&[]);
    let mut args = render_args(&f, false);
    args["idempotency_key"] = json!("launch-video-1");
    let mut mcp = f.server.mcp();
    let first = mcp.tool("vidforge_render_video", args.clone(), Caps::TASKS);
    let second = mcp.tool("vidforge_render_video", args.clone(), Caps::TASKS);
    assert_eq!(first.result()["taskId"], second.result()["taskId"]);

    let mut changed = args.clone();
    changed["resolution"] = json!("1080p");
    let conflict = mcp.tool("vidforge_render_video", changed, Caps::TASKS);
    assert_eq!(
        conflict.result()["structuredContent"]["code"],
        "idempotency_conflict"
    );

    let mut concurrent = args.clone();
    concurrent["idempotency_key"] = json!("launch-video-2");
    let ids: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..6)
            .map(|_| {
                let mut mcp = f.server.mcp();
                let a = concurrent.clone();
                s.spawn(move || {
                    let reply = mcp.tool("vidforge_render_video", a, Caps::NONE);
                    reply.result()["structuredContent"]["render_id"]
                        .as_str()
                        .unwrap()
                        .to_string()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(ids.iter().all(|id| id == &ids[0]), "{ids:?}");
}

#[test]
fn tasks_survive_kill_9_and_finish_after_restart() {
    let mut f = fixture(&[]);
    let mut mcp = f.server.mcp();
    let created = mcp.tool("vidforge_render_video", render_args(&f, false), Caps::TASKS);
    let id = created.result()["taskId"].as_str().unwrap().to_string();
    f.server.kill9();
    f.server.restart();
    let mut mcp = f.server.mcp();
    let after = mcp.task_get(&id, Caps::TASKS);
    assert_result("tasks", "GetTaskResult", &after);
    let done = mcp.wait_task(&id, Caps::TASKS, WAIT, |t| status_of(t) == "completed");
    assert_eq!(done["result"]["isError"], false, "{done}");
}

#[test]
fn listen_streams_task_status_notifications() {
    use std::io::{BufRead, BufReader};
    let f = fixture(&[]);
    let mut mcp = f.server.mcp();
    let created = mcp.tool("vidforge_render_video", render_args(&f, true), Caps::TASKS);
    let id = created.result()["taskId"].as_str().unwrap().to_string();

    // Without the extension, a taskIds subscription is refused with -32021.
    let refused = mcp.call(
        "subscriptions/listen",
        json!({"notifications": {"taskIds": [id]}}),
        Caps::NONE,
    );
    assert_eq!(refused.status, 400);
    assert_rpc_error(&refused, -32021);

    let body = mcp.envelope(
        "subscriptions/listen",
        json!({"notifications": {"taskIds": [id]}}),
        Caps::TASKS,
    );
    let listen_id = body["id"].clone();
    let resp = reqwest::blocking::Client::builder()
        .timeout(WAIT)
        .build()
        .unwrap()
        .post(&mcp.url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", PROTOCOL)
        .header("Mcp-Method", "subscriptions/listen")
        .body(body.to_string())
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let mut lines = BufReader::new(resp).lines();
    let mut messages = Vec::new();
    let mut approved = false;
    while let Some(Ok(line)) = lines.next() {
        let Some(data) = line.strip_prefix("data:") else {
            continue;
        };
        let Ok(message) = serde_json::from_str::<Value>(data.trim()) else {
            continue;
        };
        if messages.is_empty() {
            // The first frame is the acknowledgement, naming the honoured task ids.
            assert_eq!(
                message["method"], "notifications/subscriptions/acknowledged",
                "{message}"
            );
            assert_eq!(message["params"]["notifications"]["taskIds"], json!([id]));
            assert_eq!(
                message["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
                listen_id
            );
        } else {
            assert_eq!(message["method"], "notifications/tasks", "{message}");
            assert_eq!(
                message["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
                listen_id
            );
            assert_eq!(message["params"]["taskId"], json!(id));
            assert_schema("tasks", "TaskStatusNotificationParams", &message["params"]);
            if message["params"]["status"] == "input_required" && !approved {
                let mut other = f.server.mcp();
                let approve = other.tool(
                    "vidforge_approve_watermark",
                    json!({"render_id": id, "approved": true}),
                    Caps::NONE,
                );
                assert_eq!(approve.result()["isError"], false);
                approved = true;
            }
        }
        let done = message["params"]["status"] == "completed";
        messages.push(message);
        if done {
            break;
        }
    }
    let last = messages.last().unwrap();
    assert_eq!(last["params"]["status"], "completed", "{messages:?}");
    assert_eq!(last["params"]["result"]["isError"], false);
    assert!(approved, "the stream showed input_required");
}

/// A tiny 16×16 H.264 clip of one flat colour at 30 fps that lasts `seconds`: a few hundred
/// bytes per minute, yet `seconds × 30` frames at whatever resolution a render asks for.
fn tiny_long_clip(dir: &std::path::Path, name: &str, seconds: u32) -> std::path::PathBuf {
    let out = dir.join(name);
    ffmpeg_lavfi(
        &format!("color=c=blue:s=16x16:r=30:d={seconds}"),
        &[
            "-c:v",
            "libx264",
            "-preset",
            "ultrafast",
            "-pix_fmt",
            "yuv420p",
        ],
        &out,
    );
    out
}

/// The render's state through the fallback status tool.
fn render_state(mcp: &mut Mcp, id: &str) -> String {
    let reply = mcp.tool(
        "vidforge_get_render_status",
        json!({"render_id": id}),
        Caps::NONE,
    );
    reply.result()["structuredContent"]["state"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn render_work_is_bounded_by_its_estimate_not_its_bytes() {
    // 1e8 output pixel-frames per second; at most 600 s of work per render and 350 s per
    // principal per hour (so the effective per-render limit is the budget's 3.5e10).
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(
        &dir.path().join("data"),
        &[
            "--render-pixel-rate",
            "100000000",
            "--max-render-seconds",
            "600",
            "--render-budget-seconds",
            "350",
            "--render-budget-window",
            "1h",
            "--per-principal-concurrent",
            "10",
        ],
    );
    let clip = tiny_long_clip(dir.path(), "tiny.mp4", 600);
    let bytes = std::fs::metadata(&clip).unwrap().len();
    assert!(
        bytes < 300 * 1024,
        "the amplification file is {bytes} bytes"
    );
    let source = upload(&server, None, &clip);
    let mut mcp = server.mcp();
    let args = json!({"source_asset_uri": source, "output_format": "mp4", "resolution": "4k"});

    // 4k: a 2160×2160 output of 18,000 frames, refused at creation.
    let refused = mcp.tool("vidforge_render_video", args.clone(), Caps::TASKS);
    let env = &refused.result()["structuredContent"];
    assert_eq!(env["code"], "render_too_large", "{env}");
    assert_eq!(env["temporary"], false);
    assert!(env["retry_after_ms"].is_null());
    assert_eq!(
        env["details"]["estimated_pixel_frames"],
        2160u64 * 2160 * 18_000,
        "{env}"
    );
    assert_eq!(env["details"]["limit_pixel_frames"], 35_000_000_000u64);
    assert_eq!(env["details"]["field"], "resolution");
    // The repair is the same call at the highest resolution that fits.
    let repair = &env["repair"];
    assert_eq!(repair["tool"], "vidforge_render_video");
    let mut at_1080 = args.clone();
    at_1080["resolution"] = json!("1080p");
    assert_eq!(repair["arguments"], at_1080, "{env}");

    // Callable as-is: 1080×1080×18,000 = 2.1e10 of the 3.5e10 budget.
    let accepted = mcp.tool(
        "vidforge_render_video",
        repair["arguments"].clone(),
        Caps::TASKS,
    );
    assert_result("tasks", "CreateTaskResult", &accepted);
    let running = accepted.result()["taskId"].as_str().unwrap().to_string();

    // The budget is read back from the stored renders: a restart does not reset it.
    server.restart();
    let mut mcp = server.mcp();
    let over = mcp.tool("vidforge_render_video", at_1080.clone(), Caps::TASKS);
    let env = &over.result()["structuredContent"];
    assert_eq!(env["code"], "render_budget_exceeded", "{env}");
    assert_eq!(env["temporary"], true);
    let retry = env["retry_after_ms"].as_u64().unwrap();
    // Free again when the first render leaves the one-hour window.
    assert!(
        (3_500_000..=3_600_000).contains(&retry),
        "retry_after_ms {retry}"
    );
    assert_eq!(
        env["details"]["remaining_pixel_frames"],
        35_000_000_000u64 - 1080 * 1080 * 18_000
    );
    let mut at_720 = args.clone();
    at_720["resolution"] = json!("720p");
    assert_eq!(env["repair"]["arguments"], at_720, "{env}");

    let ack = mcp.call("tasks/cancel", json!({"taskId": running}), Caps::TASKS);
    assert_eq!(ack.result()["resultType"], "complete");
}

#[test]
fn a_short_render_never_waits_behind_a_long_one() {
    // One render slot; at 1e8 pixel-frames/s anything over 5 s of estimated work is long.
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("data"),
        &[
            "--token",
            "token-alice-1=alice",
            "--token",
            "token-bob-22=bob",
            "--render-slots",
            "1",
            "--render-pixel-rate",
            "100000000",
            "--long-render-seconds",
            "5",
        ],
    );
    // Alice: 20 s of a tiny source at 4k, 600 frames of 2160×2160 (28 s estimated; about as
    // long for real with the CPU compositor on 2 cores).
    let long_clip = tiny_long_clip(dir.path(), "long.mp4", 20);
    let long_source = upload(&server, Some("token-alice-1"), &long_clip);
    // Bob: a 1 s clip at 720p (0.2 s estimated).
    let short_clip = make_clip(dir.path(), "short.mp4", 320, 180, 1.0, false);
    let short_source = upload(&server, Some("token-bob-22"), &short_clip);

    let mut alice = server.mcp().with_token("token-alice-1");
    let mut bob = server.mcp().with_token("token-bob-22");
    let long = alice.tool(
        "vidforge_render_video",
        json!({"source_asset_uri": long_source, "output_format": "mp4", "resolution": "4k"}),
        Caps::TASKS,
    );
    let long_id = long.result()["taskId"].as_str().unwrap().to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while render_state(&mut alice, &long_id) != "rendering" {
        assert!(
            std::time::Instant::now() < deadline,
            "the long render never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    let asked = std::time::Instant::now();
    let short = bob.tool(
        "vidforge_render_video",
        json!({"source_asset_uri": short_source, "output_format": "mp4", "resolution": "720p"}),
        Caps::TASKS,
    );
    let short_id = short.result()["taskId"].as_str().unwrap().to_string();
    let mut waited = None;
    let state = loop {
        let state = render_state(&mut bob, &short_id);
        if state != "queued" && waited.is_none() {
            waited = Some(asked.elapsed());
        }
        if matches!(state.as_str(), "succeeded" | "failed" | "cancelled") {
            break state;
        }
        assert!(
            asked.elapsed() < Duration::from_secs(20),
            "the short render was still {state} after {:?}, behind the long one (long: {})",
            asked.elapsed(),
            render_state(&mut alice, &long_id)
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let finished = asked.elapsed();
    let long_state = render_state(&mut alice, &long_id);
    eprintln!(
        "short render beside a long one: waited {:?} for a worker, finished after {finished:?}; \
         the long one was {long_state}",
        waited.unwrap_or(finished)
    );
    assert_eq!(state, "succeeded");
    assert_eq!(
        long_state, "rendering",
        "the short render finished only after the long one"
    );
    let ack = alice.call("tasks/cancel", json!({"taskId": long_id}), Caps::TASKS);
    assert_eq!(ack.result()["resultType"], "complete");
}

/// An upload says what colour its video is in: an HDR10 master (PQ with its mastering display
/// and content light level), a phone's HLG clip, an SDR clip; a PNG says nothing of colour.
#[test]
fn uploads_describe_their_colour() {
    use vidforge_fixtures as fixtures;
    use vidforge_media::DynamicRange;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[]);
    let asset = |path: &std::path::Path| {
        let (status, asset) = upload_raw(&server, path);
        assert!((200..300).contains(&status), "{status} {asset}");
        asset
    };
    let pq = asset(&fixtures::hdr_clip(dir.path(), DynamicRange::Pq).unwrap());
    let (max, min, cll, fall) = fixtures::HDR10_MASTERING;
    assert_eq!(
        pq["color"],
        json!({"primaries": "bt2020", "transfer": "smpte2084", "matrix": "bt2020nc",
               "range": "tv", "dynamic_range": "pq", "mastering_max_nits": max,
               "mastering_min_nits": min, "max_cll": cll, "max_fall": fall}),
        "{pq}"
    );
    let hlg = asset(&fixtures::hdr_clip(dir.path(), DynamicRange::Hlg).unwrap());
    assert_eq!(hlg["color"]["dynamic_range"], "hlg", "{hlg}");
    assert_eq!(hlg["color"]["transfer"], "arib-std-b67");
    // A render of it says it tone-maps.
    let mut mcp = server.mcp();
    let task = mcp.render_task(
        &json!({"source_asset_uri": hlg["uri"], "output_format": "mp4",
                                        "resolution": "720p"}),
    );
    let done = mcp.wait_task(&task, Caps::TASKS, WAIT, |t| status_of(t) == "completed");
    assert_eq!(
        done["statusMessage"],
        "Render completed. The source is HDR (HLG): tone-mapped to SDR (BT.709).",
        "{done}"
    );
    let sdr = asset(&make_clip(dir.path(), "sdr.mp4", 320, 180, 0.5, false));
    assert_eq!(sdr["color"]["dynamic_range"], "sdr", "{sdr}");
    let logo = asset(&make_logo(dir.path()));
    assert!(logo.get("color").is_none(), "{logo}");
    // Dolby Vision profile 5 has no layer vidforge can show: refused, and says why.
    let hlg_mp4 = fixtures::hdr_clip(dir.path(), DynamicRange::Hlg).unwrap();
    let p5 = fixtures::dolby_vision_clip(dir.path(), &hlg_mp4, 5, 0).unwrap();
    let (status, env) = upload_raw(&server, &p5);
    assert_eq!(status, 422, "{env}");
    assert_eq!(env["code"], "asset_invalid", "{env}");
    let message = env["message"].as_str().unwrap_or_default();
    assert!(message.contains("Dolby Vision profile 5"), "{env}");
}

/// The operator's `keep_hdr` keeps the HDR of the principals it names, and only theirs: the
/// same HLG upload comes out HEVC Main10 tagged HLG for one, tone-mapped H.264 for another.
/// On the wgpu compositor (lavapipe in CI), which makes both: 10-bit and tone-mapped frames.
#[test]
fn hdr_is_kept_only_for_the_principals_the_operator_names() {
    use vidforge_fixtures as fixtures;
    use vidforge_media::DynamicRange;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let args = [
        "--backend",
        "wgpu",
        "--token",
        "token-keep=keeper",
        "--token",
        "token-sdr=other",
        "--keep-hdr",
        "keeper",
    ];
    let server = Server::start(&data, &args);
    let clip = fixtures::hdr_clip(dir.path(), DynamicRange::Hlg).unwrap();
    for (token, note, codec, pix_fmt, transfer) in [
        (
            "token-keep",
            "kept HDR (HEVC Main10, 10-bit, its metadata carried).",
            "hevc",
            "yuv420p10le",
            "arib-std-b67",
        ),
        (
            "token-sdr",
            "tone-mapped to SDR (BT.709).",
            "h264",
            "yuv420p",
            "bt709",
        ),
    ] {
        let uri = upload(&server, Some(token), &clip);
        let mut mcp = server.mcp().with_token(token);
        let task = mcp.render_task(
            &json!({"source_asset_uri": uri, "output_format": "mov", "resolution": "720p"}),
        );
        let done = mcp.wait_task(&task, Caps::TASKS, WAIT, |t| status_of(t) == "completed");
        assert_eq!(
            done["statusMessage"],
            format!("Render completed. The source is HDR (HLG): {note}"),
            "{token}: {done}"
        );
        let result = data.join("results").join(&task).join("final.mov");
        let out = std::process::Command::new("ffprobe")
            .args(["-v", "error", "-select_streams", "v:0", "-show_entries"])
            .args(["stream=codec_name,pix_fmt,color_transfer", "-of", "csv=p=0"])
            .arg(&result)
            .output()
            .expect("ffprobe runs");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("{codec},{pix_fmt},{transfer}"),
            "{token}: {}",
            result.display()
        );
    }
}
