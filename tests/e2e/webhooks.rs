//! Completion webhooks over real HTTP: a real `vidforge serve` posts render events to a real
//! receiver (`tests/webhooks/receiver.py`) that verifies each with the official Standard
//! Webhooks library. Every transition arrives once per `webhook-id` with a payload that is
//! what `tasks/get` says; a receiver that is down, then up, gets everything; `kill -9` between
//! a transition and its delivery loses nothing; a receiver that hangs or redirects slows no
//! render and no MCP call; a principal's own endpoint, secret and event list are honoured;
//! bad settings are refused at start. The three-node case is in `tests/e2e/cluster.rs`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::support::webhooks::{OTHER_SECRET, Receiver, SECRET};
use crate::support::*;
use serde_json::{Value, json};

const ALICE: &str = "alice-hook-token";
const BOB: &str = "bob-hook-token";
const WAIT: Duration = Duration::from_secs(120);

fn status_of(task: &Value) -> &str {
    task["status"].as_str().unwrap_or_default()
}

fn decide(mcp: &mut Mcp, id: &str, approved: bool) {
    let reply = mcp.tool(
        "vidforge_approve_watermark",
        json!({"render_id": id, "approved": approved}),
        Caps::TASKS,
    );
    assert_eq!(reply.result()["isError"], false, "{}", reply.body);
}

/// Polls until `id` has `status`; the task as `tasks/get` shows it (without the result's
/// `_meta`, which the MCP layer adds to every answer).
fn wait_status(mcp: &mut Mcp, id: &str, status: &str) -> Value {
    let mut task = mcp.wait_task(id, Caps::TASKS, WAIT, |t| status_of(t) == status);
    task.as_object_mut().unwrap().remove("_meta");
    task
}

/// The event types each render got, sorted (deliveries run side by side, so their arrival
/// order is not the transitions'), one per `webhook-id` (duplicates, which at-least-once
/// delivery allows, removed as a receiver would).
fn types_by_render(deliveries: &[Value]) -> HashMap<String, Vec<String>> {
    let mut seen = std::collections::HashSet::new();
    let mut out: HashMap<String, Vec<String>> = HashMap::new();
    for d in deliveries {
        if seen.insert(d["id"].as_str().unwrap().to_string()) {
            out.entry(d["data"]["render_id"].as_str().unwrap().to_string())
                .or_default()
                .push(d["type"].as_str().unwrap().to_string());
        }
    }
    for types in out.values_mut() {
        types.sort();
    }
    out
}

fn metric(server: &Server, series: &str) -> f64 {
    let text = reqwest::blocking::get(format!("{}/metrics", server.base()))
        .unwrap()
        .text()
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

fn wait_metric(server: &Server, series: &str, at_least: f64) {
    let deadline = Instant::now() + WAIT;
    while metric(server, series) < at_least {
        assert!(
            Instant::now() < deadline,
            "{series} never reached {at_least}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn every_transition_is_delivered_signed_once_and_survives_outages_and_crashes() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut hooks = Receiver::start(SECRET);
    let bobs = Receiver::start(OTHER_SECRET);
    // Bob has an endpoint of his own, for successes only; everyone else shares `--webhook-url`.
    let config = dir.path().join("vidforge.toml");
    std::fs::write(
        &config,
        format!(
            "[webhooks.bob]\nurl = \"{}\"\nsecret = \"{OTHER_SECRET}\"\nevents = [\"render.succeeded\"]\n",
            bobs.url()
        ),
    )
    .unwrap();
    let args = [
        "--config",
        config.to_str().unwrap(),
        "--token",
        &format!("{ALICE}=alice"),
        "--token",
        &format!("{BOB}=bob"),
        "--admin",
        "alice",
        "--webhook-url",
        &hooks.url(),
        "--webhook-retry-initial",
        "200ms",
        "--webhook-timeout",
        "2s",
    ];
    let env = [("VIDFORGE_WEBHOOK_SECRET", SECRET)];
    let mut server = Server::start_with_env(&data, &args, &env);
    assert!(
        server.log().contains("webhooks      on"),
        "{}",
        server.log()
    );
    let clip = make_clip(dir.path(), "clip.mp4", 320, 240, 1.0, true);
    let logo = make_logo(dir.path());
    let (clip_a, logo_a) = (
        upload(&server, Some(ALICE), &clip),
        upload(&server, Some(ALICE), &logo),
    );
    let clip_b = upload(&server, Some(BOB), &clip);
    let watermarked = json!({
        "source_asset_uri": clip_a, "output_format": "mp4", "resolution": "720p",
        "watermark": {"image_asset_uri": logo_a, "position": "bottom_right", "opacity": 0.6},
    });
    let plain = json!({"source_asset_uri": clip_a, "output_format": "webm", "resolution": "720p"});
    let mut alice = server.mcp().with_token(ALICE);
    let mut bob = server.mcp().with_token(BOB);

    // 1. Approval asked, then granted: input_required (with the page's URL), then succeeded
    // (with the result's link and figures); each payload is what tasks/get says.
    let approved = alice.render_task(&watermarked);
    let asked = wait_status(&mut alice, &approved, "input_required");
    let got = hooks.wait_for(&approved, "render.input_required", WAIT);
    // What tasks/get said then (a speculative render may have touched the record since,
    // moving lastUpdatedAt on).
    let without_time = |t: &Value| {
        let mut t = t.clone();
        t.as_object_mut().unwrap().remove("lastUpdatedAt");
        t
    };
    assert_eq!(without_time(&got["data"]["task"]), without_time(&asked));
    assert_eq!(
        got["data"]["approval_url"],
        format!("{}/approvals/{approved}", server.base())
    );
    decide(&mut alice, &approved, true);
    let done = wait_status(&mut alice, &approved, "completed");
    let got = hooks.wait_for(&approved, "render.succeeded", WAIT);
    assert_eq!(got["data"]["task"], done);
    let result = &done["result"]["structuredContent"];
    assert_eq!(got["data"]["size_bytes"], result["size_bytes"]);
    assert_eq!(got["data"]["duration_seconds"], result["duration_seconds"]);
    assert_eq!(got["data"]["video_uri"], result["video_uri"]);
    // Not measured (the node's default is off): no quality anywhere, never a made-up figure.
    assert!(result.get("quality").is_none() && got["data"].get("quality").is_none());
    assert!(
        got["data"]["download_url"]
            .as_str()
            .unwrap()
            .starts_with(&server.base())
    );

    // 2. Rejected: failed, with the §6 envelope; 3. cancelled while awaiting approval.
    let rejected = alice.render_task(&watermarked);
    wait_status(&mut alice, &rejected, "input_required");
    decide(&mut alice, &rejected, false);
    let ended = wait_status(&mut alice, &rejected, "completed");
    let got = hooks.wait_for(&rejected, "render.failed", WAIT);
    assert_eq!(got["data"]["error"]["code"], "watermark_rejected");
    // The same, but for the envelope's request_id (each presentation has its own).
    let without_request_id = |t: &Value| {
        let mut t = t.clone();
        t["result"]["structuredContent"]
            .as_object_mut()
            .unwrap()
            .remove("request_id");
        t
    };
    assert_eq!(
        without_request_id(&got["data"]["task"]),
        without_request_id(&ended)
    );
    assert!(
        got["data"]["error"]["request_id"]
            .as_str()
            .unwrap()
            .starts_with("req_")
    );
    let cancelled = alice.render_task(&watermarked);
    wait_status(&mut alice, &cancelled, "input_required");
    alice.call("tasks/cancel", json!({"taskId": cancelled}), Caps::TASKS);
    let gone = wait_status(&mut alice, &cancelled, "cancelled");
    assert_eq!(
        hooks.wait_for(&cancelled, "render.cancelled", WAIT)["data"]["task"],
        gone
    );

    // 4. Bob's own endpoint, secret and event list: his success there, nothing of his here.
    // He asks for a quality report: the result, its webhook, the dashboard and /metrics say
    // how faithful the video is.
    let bobs_render = bob.render_task(&json!({"source_asset_uri": clip_b, "output_format": "mp4",
        "resolution": "720p", "quality_report": true}));
    let bobs_done = wait_status(&mut bob, &bobs_render, "completed");
    let got = bobs.wait_for(&bobs_render, "render.succeeded", WAIT);
    let result = &bobs_done["result"]["structuredContent"];
    assert_quality(&mut bob, result);
    assert_eq!(got["data"]["quality"], result["quality"]);
    // Bob's row on the dashboard (alice is an admin) says it in one line.
    let page = dashboard(&server);
    assert!(page.contains("dB at 00:00, SSIM 0.9"), "{page}");
    let psnr_count = "vidforge_render_psnr_db_count{window=\"whole\",format=\"mp4\"}";
    assert!(metric(&server, psnr_count) >= 1.0);

    // 5. A receiver that redirects: the attempt fails, nothing follows the redirect, and the
    // retry (after it answers again) delivers.
    let failed = "vidforge_webhook_attempts_total{result=\"failed\"}";
    hooks.set_mode("redirect");
    let f0 = metric(&server, failed);
    let redirected = alice.render_task(&plain);
    wait_status(&mut alice, &redirected, "completed");
    wait_metric(&server, failed, f0 + 1.0);
    hooks.set_mode("ok");
    hooks.wait_for(&redirected, "render.succeeded", WAIT);
    assert_eq!(hooks.state()["elsewhere"], 0, "a redirect was followed");

    // 6. A receiver that hangs: renders and MCP go on as ever (each attempt ends at the
    // timeout); once it answers, the event arrives.
    hooks.set_mode("hang");
    let f0 = metric(&server, failed);
    let during_hang = alice.render_task(&plain);
    let started = Instant::now();
    wait_status(&mut alice, &during_hang, "completed");
    let second = alice.render_task(&plain);
    wait_status(&mut alice, &second, "completed");
    let listed = Instant::now();
    let tools = alice.call("tools/list", json!({}), Caps::TASKS);
    assert!(
        tools.result()["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
    );
    println!(
        "with a hanging receiver: two renders in {:?}, tools/list in {:?}",
        listed - started,
        listed.elapsed()
    );
    wait_metric(&server, failed, f0 + 2.0);
    hooks.set_mode("ok");
    hooks.wait_for(&during_hang, "render.succeeded", WAIT);
    hooks.wait_for(&second, "render.succeeded", WAIT);

    // Every event so far, once per webhook-id; every delivery verified (a forged one would
    // count as invalid).
    let before_outage = hooks.delivered();
    let types = types_by_render(&before_outage);
    let want = |v: &[&str]| {
        let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
        v.sort();
        Some(v)
    };
    assert_eq!(
        types.get(&approved).cloned(),
        want(&["render.input_required", "render.succeeded"])
    );
    assert_eq!(
        types.get(&rejected).cloned(),
        want(&["render.input_required", "render.failed"])
    );
    assert_eq!(
        types.get(&cancelled).cloned(),
        want(&["render.input_required", "render.cancelled"])
    );
    assert!(
        !types.contains_key(&bobs_render),
        "bob's events go to his endpoint"
    );
    assert_eq!(hooks.state()["invalid"], 0);

    // 7. The receiver down for a while, then up: every event arrives.
    hooks.stop();
    let f0 = metric(&server, failed);
    let while_down = alice.render_task(&plain);
    wait_status(&mut alice, &while_down, "completed");
    wait_metric(&server, failed, f0 + 1.0);
    hooks.start_again();
    hooks.wait_for(&while_down, "render.succeeded", WAIT);

    // 8. kill -9 after a transition, before its delivery (the receiver is down, so it cannot
    // have been delivered): after the restart it is.
    hooks.stop();
    let crashed = alice.render_task(&plain);
    wait_status(&mut alice, &crashed, "completed");
    server.kill9();
    hooks.start_again();
    server.start_again();
    let mut alice = server.mcp().with_token(ALICE);
    hooks.wait_for(&crashed, "render.succeeded", WAIT);
    let done = wait_status(&mut alice, &crashed, "completed");
    assert_eq!(
        hooks.wait_for(&crashed, "render.succeeded", WAIT)["data"]["task"],
        done
    );

    // The admins' dashboard lists the last attempts per principal.
    let page = dashboard(&server);
    assert!(page.contains("Webhook deliveries"), "{page}");
    assert!(page.contains(&crashed), "{page}");
    server.terminate();
    assert!(server.log().contains("vidforge stopped"));
}

/// `result` (a measured render's `structuredContent`) has figures a 720p x264 encode has,
/// and fits the render tool's served output schema.
fn assert_quality(mcp: &mut Mcp, result: &Value) {
    let q = &result["quality"];
    let psnr = q["psnr_db"].as_f64().expect("psnr_db");
    assert!((30.0..100.0).contains(&psnr), "{q}");
    assert!(
        q["psnr_y_db"].as_f64().is_some() && q["worst"]["at_seconds"] == 0,
        "{q}"
    );
    let ssim = q["ssim"].as_f64().expect("ssim");
    assert!(ssim > 0.9 && ssim <= 1.0, "{q}");
    let tools = mcp.call("tools/list", json!({}), Caps::NONE);
    let schema = tools.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "vidforge_render_video")
        .expect("the render tool")["outputSchema"]
        .clone();
    let validator = jsonschema::validator_for(&schema).expect("the output schema compiles");
    if let Err(e) = validator.validate(result) {
        panic!("{result} does not fit the output schema: {e}");
    }
}

/// The dashboard as alice (an admin) sees it.
fn dashboard(server: &Server) -> String {
    let page = reqwest::blocking::Client::new()
        .get(format!("{}/", server.base()))
        .header("Cookie", sign_in(&server.base(), ALICE))
        .send()
        .unwrap();
    assert_eq!(page.status().as_u16(), 200);
    page.text().unwrap()
}

/// Bad endpoints (and other bad settings) stop the server at start with one plain line naming
/// the setting: no Rust debug output or backtrace, even with `RUST_BACKTRACE=1`.
#[test]
fn bad_webhook_settings_are_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 6] = [
        (
            &[
                "--webhook-url",
                "ftp://127.0.0.1/h",
                "--webhook-secret",
                SECRET,
            ],
            "http:// or https://",
        ),
        (
            &[
                "--webhook-url",
                "http://u:p@127.0.0.1/h",
                "--webhook-secret",
                SECRET,
            ],
            "credentials",
        ),
        (
            &[
                "--webhook-url",
                "http://127.0.0.1/h",
                "--webhook-secret",
                "hunter2",
            ],
            "webhook_secret: the secret must be a Standard Webhooks secret: whsec_",
        ),
        (
            &["--token", "short=alice"],
            "every token needs at least 8 characters",
        ),
        (&["--webhook-url", "http://127.0.0.1/h"], "webhook_secret"),
        (
            &[
                "--webhook-url",
                "http://127.0.0.1/h",
                "--webhook-secret",
                SECRET,
                "--webhook-event",
                "render.started",
            ],
            "unknown event",
        ),
    ];
    for (args, says) in cases {
        let out = std::process::Command::new(vidforge_bin())
            .arg("serve")
            .args(["--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join("d"))
            .args(args)
            .env("RUST_BACKTRACE", "1")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(err.contains("vidforge: error: "), "{args:?}: {err}");
        for debug in ["backtrace", "Stack", "panicked", "Invalid {"] {
            assert!(!err.contains(debug), "{args:?}: {debug:?} in {err}");
        }
        assert!(!err.contains(SECRET), "the secret is never printed: {err}");
    }
}
