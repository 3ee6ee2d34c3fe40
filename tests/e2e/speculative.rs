//! Speculative rendering (`speculative = auto`, the default) over real HTTP against a real
//! `vidforge serve` with one render slot: a render awaiting its approval is rendered while
//! the person decides, approval publishes it at once, a rejection or cancel leaves nothing, another
//! principal's render takes the slot from it, and `kill -9` in the middle loses nothing.
//! The same request rendered after approval with `speculative = off` is the same video.
//! Behaviour only: how fast it is lives in `vidforge bench --human-wait`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::*;
use serde_json::{Value, json};

const ALICE: &str = "alice-spec-token";
const BOB: &str = "bob-spec-token";
const WAIT: Duration = Duration::from_secs(120);

fn status_of(task: &Value) -> &str {
    task["status"].as_str().unwrap_or_default()
}

fn http() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// The approval page: what the person sees.
fn approval_page(server: &Server, id: &str) -> String {
    let page = http()
        .get(format!("{}/approvals/{id}", server.base()))
        .header("Cookie", sign_in(&server.base(), ALICE))
        .send()
        .unwrap();
    assert_eq!(page.status().as_u16(), 200);
    let text = page.text().unwrap();
    assert!(text.contains("Watermark approval"), "{text}");
    text
}

/// The approval page's line about the speculative render: `Some("ready")`,
/// `Some("rendering")`, or `None`.
fn ahead(server: &Server, id: &str) -> Option<&'static str> {
    let text = approval_page(server, id);
    if text.contains("id=\"ahead\"") {
        Some(if text.contains("already rendered") {
            "ready"
        } else {
            "rendering"
        })
    } else {
        None
    }
}

/// Polls the approval page until its speculative line says `want` (bounded by [`WAIT`]).
fn wait_ahead(server: &Server, id: &str, want: &str) {
    let deadline = Instant::now() + WAIT;
    while ahead(server, id) != Some(want) {
        assert!(
            Instant::now() < deadline,
            "the page of {id} never said {want}:\n{}\n{}",
            approval_page(server, id),
            server.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A `vidforge_speculative_renders_total` sample, 0 when absent.
fn speculative_renders(server: &Server, end: &str) -> u64 {
    let text = http()
        .get(format!("{}/metrics", server.base()))
        .send()
        .unwrap()
        .text()
        .unwrap();
    let series = format!("vidforge_speculative_renders_total{{end=\"{end}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .map_or(0, |v| v.trim().parse().unwrap())
}

fn decide(mcp: &mut Mcp, id: &str, approved: bool) -> Value {
    let reply = mcp.tool(
        "vidforge_approve_watermark",
        json!({"render_id": id, "approved": approved}),
        Caps::TASKS,
    );
    assert_eq!(reply.result()["isError"], false, "{}", reply.body);
    reply.result().clone()
}

/// Downloads a completed render's video into `dir`.
fn download(server: &Server, id: &str, dir: &Path, name: &str) -> PathBuf {
    let resp = http()
        .get(format!("{}/videos/{id}/final.mp4", server.base()))
        .bearer_auth(ALICE)
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200, "download of {id}");
    let out = dir.join(name);
    std::fs::write(&out, resp.bytes().unwrap()).unwrap();
    out
}

/// Stream kinds and codecs, and the video's frame count (ffprobe, counting packets).
fn streams_and_frames(path: &Path) -> (String, u64) {
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-count_packets", "-show_entries"])
        .arg("stream=codec_type,codec_name,width,height,nb_read_packets")
        .args(["-of", "csv=p=0"])
        .arg(path)
        .output()
        .expect("ffprobe");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let frames = text
        .lines()
        .find(|l| l.contains("video"))
        .and_then(|l| l.rsplit(',').next())
        .and_then(|n| n.trim().parse().ok())
        .expect("a video stream");
    let kinds = text
        .lines()
        .map(|l| l.rsplit_once(',').map_or(l, |(k, _)| k))
        .collect::<Vec<_>>()
        .join(" | ");
    (kinds, frames)
}

/// The average PSNR of `b` against `a` (`inf` for identical frames), by ffmpeg's filter.
fn psnr(a: &Path, b: &Path) -> f64 {
    let out = Command::new("ffmpeg")
        .args(["-hide_banner", "-i"])
        .arg(a)
        .arg("-i")
        .arg(b)
        .args(["-lavfi", "psnr", "-f", "null", "-"])
        .output()
        .expect("ffmpeg");
    let text = String::from_utf8_lossy(&out.stderr);
    let avg = text
        .split("average:")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no PSNR in:\n{text}"));
    if avg == "inf" {
        f64::INFINITY
    } else {
        avg.parse().unwrap()
    }
}

#[test]
fn speculative_renders_publish_at_approval_and_never_get_in_the_way() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut server = Server::start(
        &data,
        &[
            "--token",
            &format!("{ALICE}=alice"),
            "--token",
            &format!("{BOB}=bob"),
            "--render-slots",
            "1",
        ],
    );
    let clip = make_clip(dir.path(), "clip.mp4", 640, 360, 2.0, true);
    let long_clip = make_clip(dir.path(), "long.mp4", 1280, 720, 6.0, true);
    let plain_clip = make_clip(dir.path(), "plain.mp4", 320, 240, 1.0, false);
    let logo = make_logo(dir.path());
    let (clip, long_clip, logo) = (
        upload(&server, Some(ALICE), &clip),
        upload(&server, Some(ALICE), &long_clip),
        upload(&server, Some(ALICE), &logo),
    );
    let plain_clip = upload(&server, Some(BOB), &plain_clip);
    let watermarked = |source: &str, resolution: &str| {
        json!({
            "source_asset_uri": source,
            "output_format": "mp4",
            "resolution": resolution,
            "watermark": {"image_asset_uri": logo, "position": "bottom_right", "opacity": 0.6},
        })
    };
    let mut alice = server.mcp().with_token(ALICE);
    let results = data.join("results");

    // 1. Rendered while the person decides; invisible until approved; approval publishes it
    // at once (the decision's own answer and the next tasks/get say completed).
    let id = alice.render_task(&watermarked(&clip, "720p"));
    alice.wait_task(&id, Caps::TASKS, WAIT, |t| status_of(t) == "input_required");
    wait_ahead(&server, &id, "ready");
    let task = alice.task_get(&id, Caps::TASKS).result().clone();
    assert_eq!(status_of(&task), "input_required", "{task}");
    assert!(task.get("result").is_none(), "{task}");
    let early = http()
        .get(format!("{}/videos/{id}/final.mp4", server.base()))
        .bearer_auth(ALICE)
        .send()
        .unwrap();
    assert_eq!(
        early.status().as_u16(),
        404,
        "a speculative render is no result"
    );
    let decided = decide(&mut alice, &id, true);
    assert_eq!(
        decided["structuredContent"]["state"], "succeeded",
        "{decided}"
    );
    let done = alice.task_get(&id, Caps::TASKS).result().clone();
    assert_eq!(status_of(&done), "completed", "{done}");
    assert_eq!(
        done["result"]["structuredContent"]["watermark_applied"],
        true
    );
    let speculated = download(&server, &id, dir.path(), "speculated.mp4");
    assert_eq!(speculative_renders(&server, "used"), 1);

    // 2. Rejected after it was rendered: nothing of it anywhere, the outcome as always.
    let rejected = alice.render_task(&watermarked(&clip, "720p"));
    alice.wait_task(&rejected, Caps::TASKS, WAIT, |t| {
        status_of(t) == "input_required"
    });
    wait_ahead(&server, &rejected, "ready");
    assert!(results.join(&rejected).exists());
    decide(&mut alice, &rejected, false);
    let ended = alice.task_get(&rejected, Caps::TASKS).result().clone();
    assert_eq!(status_of(&ended), "completed");
    assert_eq!(
        ended["result"]["structuredContent"]["code"], "watermark_rejected",
        "{ended}"
    );
    assert!(
        !results.join(&rejected).exists(),
        "a rejected speculative render left files"
    );
    let gone = http()
        .get(format!("{}/videos/{rejected}/final.mp4", server.base()))
        .bearer_auth(ALICE)
        .send()
        .unwrap();
    assert_eq!(gone.status().as_u16(), 404);
    assert_eq!(speculative_renders(&server, "discarded"), 1);
    // Cancelled after it was rendered: the same.
    let cancelled = alice.render_task(&watermarked(&clip, "720p"));
    alice.wait_task(&cancelled, Caps::TASKS, WAIT, |t| {
        status_of(t) == "input_required"
    });
    wait_ahead(&server, &cancelled, "ready");
    let ack = alice.call("tasks/cancel", json!({"taskId": cancelled}), Caps::TASKS);
    assert_eq!(ack.result()["resultType"], "complete", "{}", ack.body);
    assert_eq!(
        status_of(alice.task_get(&cancelled, Caps::TASKS).result()),
        "cancelled"
    );
    assert!(
        !results.join(&cancelled).exists(),
        "a cancelled speculative render left files"
    );
    assert_eq!(speculative_renders(&server, "discarded"), 2);

    // 3. Bob's plain render, queued while Alice's speculative render holds the only slot,
    // takes the slot: the speculative render gives it up and is picked up again later.
    let long = alice.render_task(&watermarked(&long_clip, "1080p"));
    alice.wait_task(&long, Caps::TASKS, WAIT, |t| {
        status_of(t) == "input_required"
    });
    wait_ahead(&server, &long, "rendering");
    let mut bob = server.mcp().with_token(BOB);
    let plain = bob.render_task(
        &json!({"source_asset_uri": plain_clip, "output_format": "mp4", "resolution": "720p"}),
    );
    bob.wait_task(&plain, Caps::TASKS, WAIT, |t| status_of(t) == "completed");
    assert_eq!(speculative_renders(&server, "preempted"), 1);
    let still = alice.task_get(&long, Caps::TASKS).result().clone();
    assert_eq!(status_of(&still), "input_required", "{still}");

    // 4. kill -9 while it renders again; after the restart (speculation off) nothing of it
    // is left, and approving renders it anew, correctly.
    wait_ahead(&server, &long, "rendering");
    server.kill9();
    server.args.extend(["--speculative".into(), "off".into()]);
    server.start_again();
    assert!(
        !results.join(&long).exists(),
        "the interrupted attempt's files stay"
    );
    assert_eq!(ahead(&server, &long), None);
    let mut alice = server.mcp().with_token(ALICE);
    decide(&mut alice, &long, true);
    alice.wait_task(&long, Caps::TASKS, WAIT, |t| status_of(t) == "completed");
    let (kinds, frames) = streams_and_frames(&download(&server, &long, dir.path(), "long.mp4"));
    assert_eq!(kinds, "h264,video,1920,1080 | aac,audio");
    assert_eq!(frames, 150);

    // 5. The same request as 1. with speculation off, rendered after approval: the same
    // video (streams, frame count, pictures).
    let plain_way = alice.render_task(&watermarked(&clip, "720p"));
    alice.wait_task(&plain_way, Caps::TASKS, WAIT, |t| {
        status_of(t) == "input_required"
    });
    assert_eq!(ahead(&server, &plain_way), None);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !results.join(&plain_way).exists(),
        "off renders nothing ahead"
    );
    decide(&mut alice, &plain_way, true);
    alice.wait_task(&plain_way, Caps::TASKS, WAIT, |t| {
        status_of(t) == "completed"
    });
    let after = download(&server, &plain_way, dir.path(), "after.mp4");
    assert_eq!(streams_and_frames(&speculated), streams_and_frames(&after));
    let db = psnr(&after, &speculated);
    assert!(db >= 50.0, "PSNR {db} dB between the two ways");
}
