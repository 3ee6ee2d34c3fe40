//! Segment-parallel rendering (`fanout = auto`) over real HTTP against a real `vidforge
//! serve` on sled with two render slots and, for these small sources, 1 s segments of
//! sources over 3 s: a render in every format splits, its segments run on both slots, and the
//! joined file has every frame, the audio whole (no silence at any seam), in sync; `kill -9`
//! in the middle costs the segments that were running, not the ones done; nothing of the
//! segments is left; at the default settings, sources with gaps and slides split and render
//! every frame. The seams' quality against a single pass: `media/tests/engine/segments.rs`;
//! a farm losing a node mid-segment: `tests/e2e/cluster.rs`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::*;
use serde_json::{Value, json};

const ALICE: &str = "alice-segments-token";
const WAIT: Duration = Duration::from_secs(240);
pub(crate) const FPS: u32 = 25;

fn start(data: &Path) -> Server {
    Server::start_with_env(
        data,
        &[
            "--token",
            &format!("{ALICE}=alice"),
            "--render-slots",
            "2",
            "--segment-min-duration",
            "3s",
            "--segment-seconds",
            "1s",
        ],
        &[("RUST_LOG", "info")],
    )
}

/// A `seconds`-long clip with a keyframe every second and a continuous 440 Hz tone.
pub(crate) fn tone_clip(dir: &Path, name: &str, (w, h): (u32, u32), seconds: f64) -> PathBuf {
    let out = dir.join(name);
    let status = Command::new("ffmpeg")
        .args(["-v", "error", "-y", "-f", "lavfi", "-i"])
        .arg(format!("testsrc2=s={w}x{h}:r={FPS}:d={seconds}"))
        .args(["-f", "lavfi", "-i"])
        .arg(format!("sine=f=440:r=48000:d={seconds}"))
        .args(["-c:v", "libx264", "-preset", "ultrafast", "-g"])
        .arg(FPS.to_string())
        .args(["-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest"])
        .arg(&out)
        .status()
        .expect("ffmpeg");
    assert!(status.success());
    out
}

/// A counter of `/metrics` (its label set as written there), 0 when absent.
fn metric(server: &Server, series: &str) -> u64 {
    let text = reqwest::blocking::get(format!("{}/metrics", server.base()))
        .unwrap()
        .text()
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{series} ")))
        .map_or(0, |v| v.trim().parse::<f64>().unwrap() as u64)
}

fn render(mcp: &mut Mcp, source: &str, format: &str, resolution: &str) -> (String, Value) {
    let id = mcp.render_task(&json!({
        "source_asset_uri": source,
        "output_format": format,
        "resolution": resolution,
    }));
    let done = mcp.wait_task(&id, Caps::TASKS, WAIT, |t| {
        t["status"] != "working" && t["status"] != "input_required"
    });
    assert_eq!(done["status"], "completed", "{done}");
    (id, done)
}

fn download(server: &Server, id: &str, format: &str, dir: &Path) -> PathBuf {
    let resp = reqwest::blocking::Client::new()
        .get(format!("{}/videos/{id}/final.{format}", server.base()))
        .bearer_auth(ALICE)
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200, "download of {id}");
    let out = dir.join(format!("{id}.{format}"));
    std::fs::write(&out, resp.bytes().unwrap()).unwrap();
    out
}

/// The video packets' presentation times in seconds (in file order) and the audio stream's
/// start and end.
fn timeline(path: &Path) -> (Vec<f64>, (f64, f64)) {
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-show_entries"])
        .arg("packet=codec_type,pts_time,duration_time")
        .args(["-of", "csv=p=0"])
        .arg(path)
        .output()
        .expect("ffprobe");
    assert!(out.status.success());
    let mut video = Vec::new();
    let (mut a_start, mut a_end) = (f64::MAX, 0f64);
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let f: Vec<&str> = line.split(',').collect();
        let pts: f64 = f.get(1).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN);
        let dur: f64 = f.get(2).and_then(|v| v.parse().ok()).unwrap_or(0.0);
        match f[0] {
            "video" => video.push(pts),
            "audio" => {
                a_start = a_start.min(pts);
                a_end = a_end.max(pts + dur);
            }
            _ => {}
        }
    }
    (video, (a_start, a_end))
}

/// Silences of at least 5 ms in the file's audio (ffmpeg's `silencedetect`), as their starts.
fn silences(path: &Path) -> Vec<String> {
    let out = Command::new("ffmpeg")
        .args(["-hide_banner", "-nostats", "-i"])
        .arg(path)
        .args(["-map", "0:a", "-af", "silencedetect=n=-50dB:d=0.005"])
        .args(["-f", "null", "-"])
        .output()
        .expect("ffmpeg");
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains("silence_start"))
        .map(str::to_string)
        .collect()
}

/// Every frame once, in order, over the source's length, with the audio whole and in sync.
pub(crate) fn assert_seamless(path: &Path, seconds: f64) {
    let frame = 1.0 / f64::from(FPS);
    let (mut video, (a_start, a_end)) = timeline(path);
    let expected = (seconds * f64::from(FPS)).round() as usize;
    assert_eq!(video.len(), expected, "{} frames", path.display());
    video.sort_by(f64::total_cmp);
    for pair in video.windows(2) {
        let step = pair[1] - pair[0];
        assert!(
            (step - frame).abs() < frame / 4.0,
            "{}: frames {pair:?} are not one frame apart",
            path.display()
        );
    }
    let (v_start, v_end) = (video[0], video[video.len() - 1] + frame);
    assert!(
        (v_end - v_start - seconds).abs() <= frame + 1e-6,
        "video lasts {}",
        v_end - v_start
    );
    assert!(
        (a_start - v_start).abs() <= frame,
        "A/V start {a_start} vs {v_start}"
    );
    assert!((a_end - v_end).abs() <= frame, "A/V end {a_end} vs {v_end}");
    // The encoder's padding after the last sample is no seam.
    let quiet: Vec<String> = silences(path)
        .into_iter()
        .filter(|l| {
            l.rsplit("silence_start:")
                .next()
                .and_then(|v| v.trim().parse::<f64>().ok())
                .is_none_or(|t| t < v_end - frame)
        })
        .collect();
    assert!(
        quiet.is_empty(),
        "{}: silence in the tone: {quiet:?}",
        path.display()
    );
}

/// No segment record or file is left once the renders ended (the coordinator removes them).
fn assert_no_segment_files(data: &Path) {
    let dir = data.join("segments");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left: Vec<_> = std::fs::read_dir(&dir)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "segment files left: {left:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_long_render_splits_across_slots_and_joins_without_a_seam() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = start(&data);
    let seconds = 6.0;
    let clip = tone_clip(dir.path(), "tone.mp4", (320, 180), seconds);
    let source = upload(&server, Some(ALICE), &clip);
    let mut alice = server.mcp().with_token(ALICE);
    for (n, format) in ["mp4", "webm", "mov"].into_iter().enumerate() {
        let (id, done) = render(&mut alice, &source, format, "720p");
        let structured = &done["result"]["structuredContent"];
        assert_eq!(structured["status"], "completed", "{done}");
        assert_eq!(
            metric(&server, "vidforge_renders_split_total"),
            n as u64 + 1,
            "the {format} render was not split:\n{}",
            server.log()
        );
        let file = download(&server, &id, format, dir.path());
        assert_seamless(&file, seconds);
    }
    assert!(metric(&server, "vidforge_segments_total{end=\"done\"}") >= 18);
    assert_no_segment_files(&data);
}

#[test]
fn kill_9_mid_render_costs_the_running_segments_not_the_done_ones() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut server = start(&data);
    let seconds = 10.0;
    let clip = tone_clip(dir.path(), "long.mp4", (640, 360), seconds);
    let source = upload(&server, Some(ALICE), &clip);
    let mut alice = server.mcp().with_token(ALICE);
    let id = alice.render_task(&json!({
        "source_asset_uri": source,
        "output_format": "mp4",
        "resolution": "1080p",
    }));
    let deadline = Instant::now() + WAIT;
    while metric(&server, "vidforge_segments_total{end=\"done\"}") == 0 {
        assert!(
            Instant::now() < deadline,
            "no segment done:\n{}",
            server.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    server.kill9();
    server.start_again();
    let mut alice = server.mcp().with_token(ALICE);
    let done = alice.wait_task(&id, Caps::TASKS, WAIT, |t| t["status"] != "working");
    assert_eq!(done["status"], "completed", "{done}\n{}", server.log());
    let redone = metric(&server, "vidforge_segments_total{end=\"done\"}");
    assert!(
        redone < 10,
        "{redone} of 10 segments rendered after the restart: the done ones ran again"
    );
    let file = download(&server, &id, "mp4", dir.path());
    assert_seamless(&file, seconds);
    assert_no_segment_files(&data);
}

/// At the default fan-out settings on an idle two-slot node, valid sources whose timing is
/// odd split and render every frame: a screen recording paused from 25 s to 33 s (no frames
/// there) and a slideshow of one picture every 10 s (each a keyframe: 10 s segments would
/// hold one frame each). No split is given up for one pass.
#[test]
fn sources_with_gaps_and_slides_split_at_default_settings_and_render_every_frame() {
    use vidforge_fixtures as fixtures;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("data"),
        &["--token", &format!("{ALICE}=alice"), "--render-slots", "2"],
    );
    let mut alice = server.mcp().with_token(ALICE);
    let sources = [
        fixtures::paused_recording(dir.path(), 90.0, 2, (25.0, 33.0)).expect("recording"),
        fixtures::slideshow(dir.path(), 90.0, 10).expect("slideshow"),
    ];
    for (n, clip) in sources.iter().enumerate() {
        let frames = timeline(clip).0.len();
        let source = upload(&server, Some(ALICE), clip);
        let (id, _) = render(&mut alice, &source, "mp4", "720p");
        assert_eq!(
            metric(&server, "vidforge_renders_split_total"),
            n as u64 + 1,
            "{} was not split:\n{}",
            clip.display(),
            server.log()
        );
        let out = download(&server, &id, "mp4", dir.path());
        assert_eq!(timeline(&out).0.len(), frames, "{}", clip.display());
    }
    assert_eq!(metric(&server, "vidforge_splits_given_up_total"), 0);
}
