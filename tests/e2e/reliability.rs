//! Reliability under faults, against the real binary over real HTTP (loopback only, every
//! loop bounded): renders whose attempts keep ending the server process fail instead of
//! looping at every boot, while clean stops never count against a render.

use std::time::{Duration, Instant};

use crate::support::*;
use serde_json::{Value, json};

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

/// Runs the ffmpeg CLI (quietly) and asserts it succeeded.
fn ffmpeg(args: &[&str]) {
    let status = std::process::Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-y"])
        .args(args)
        .status()
        .expect("run ffmpeg");
    assert!(status.success(), "ffmpeg {args:?}");
}

/// The hostile corpus: small files that declare huge pictures, broken and empty files. Each
/// is refused at upload with a clear `asset_invalid` envelope naming the problem, and the
/// server's peak memory stays bounded although the uploads run concurrently.
#[test]
fn hostile_uploads_are_refused_with_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    // 24 uploads at once from one address: over the default per-address cap.
    let server = Server::start(&dir.path().join("data"), &["--max-uploads-per-peer", "24"]);
    let p = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    // A PNG bomb: 8192x8192 RGBA 16-bit, all black (compresses to well under a megabyte).
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "color=black:s=8192x8192",
        "-frames:v",
        "1",
        "-pix_fmt",
        "rgba64be",
        &p("bomb.png"),
    ]);
    // Tiny files declaring huge pictures.
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "color=black:s=16000x16:d=1",
        "-c:v",
        "ffv1",
        &p("wide.mkv"),
    ]);
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "color=black:s=8192x8192:d=0.04",
        "-c:v",
        "ffv1",
        &p("square.mkv"),
    ]);
    let clip = make_clip(dir.path(), "clip.mp4", 320, 180, 1.0, false);
    let bytes = std::fs::read(&clip).unwrap();
    std::fs::write(p("truncated.mp4"), &bytes[..bytes.len() / 3]).unwrap();
    std::fs::write(
        p("garbage.mp4"),
        (0..65_536u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    std::fs::write(p("text.mp4"), "this is not a video\n".repeat(100)).unwrap();
    let cases: &[(&str, &str)] = &[
        ("bomb.png", "watermarks must be 1..=4096 pixels per side"),
        ("wide.mkv", "at most 8192 pixels per side"),
        ("square.mkv", "at most 35.4 megapixels"),
        ("truncated.mp4", ""),
        ("garbage.mp4", ""),
        ("text.mp4", "text file"),
    ];
    let baseline = server.peak_rss_kib();
    // Every file four times at once: the probe limit keeps memory flat.
    std::thread::scope(|s| {
        for round in 0..4 {
            for (name, expected) in cases {
                let server = &server;
                let path = dir.path().join(name);
                s.spawn(move || {
                    let (status, env) = upload_raw(server, &path);
                    assert_eq!(status, 422, "{name} (round {round}): {env}");
                    assert_eq!(env["code"], "asset_invalid", "{name}: {env}");
                    let message = env["message"].as_str().unwrap_or_default();
                    assert!(message.contains(expected), "{name}: {message}");
                });
            }
        }
    });
    let peak = server.peak_rss_kib();
    eprintln!(
        "peak RSS: {} MiB (baseline {} MiB)",
        peak / 1024,
        baseline / 1024
    );
    assert!(peak < 256 * 1024, "peak RSS {} MiB", peak / 1024);
    // Nothing half-written is left behind.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("data/assets"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

fn http() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

fn asset_id(uri: &str) -> &str {
    uri.rsplit('/').next().unwrap()
}

/// Assets have a TTL and a delete path (HTTP and `vidforge assets rm`); an asset an unfinished
/// render uses is kept; previews of renders that ended without a result are removed.
#[test]
fn assets_expire_and_delete_and_previews_go_with_their_render() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &["--asset-ttl", "3s", "--sweep-interval", "1s"]);
    let clip = upload(
        &server,
        None,
        &make_clip(dir.path(), "clip.mp4", 320, 180, 0.6, false),
    );
    let logo = upload(&server, None, &make_logo(dir.path()));
    let spare = upload(
        &server,
        None,
        &make_clip(dir.path(), "spare.mp4", 160, 90, 0.3, false),
    );
    let base = server.base();

    // The asset JSON states when it expires.
    let got: Value = http()
        .get(format!("{base}/assets/{}", asset_id(&spare)))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert!(got["expires_at"].is_string(), "{got}");

    // A render waiting for approval uses the clip and the logo: both are kept.
    let mut mcp = server.mcp();
    let args = json!({"source_asset_uri": clip, "output_format": "mp4", "resolution": "720p",
        "watermark": {"image_asset_uri": logo}});
    let created = mcp.tool("vidforge_render_video", args, Caps::TASKS);
    let id = created.result()["taskId"].as_str().unwrap().to_string();
    mcp.wait_task(&id, Caps::TASKS, WAIT, |t| t["status"] == "input_required");
    let refused = http()
        .delete(format!("{base}/assets/{}", asset_id(&clip)))
        .send()
        .unwrap();
    assert_eq!(refused.status().as_u16(), 409);
    let env: Value = refused.json().unwrap();
    assert_eq!(env["code"], "asset_in_use", "{env}");
    assert_eq!(env["temporary"], true);
    assert!(
        env["details"]["reason"].as_str().unwrap().contains(&id),
        "{env}"
    );

    // `vidforge assets rm --server` deletes a free asset; it is gone for good.
    let rm = std::process::Command::new(vidforge_bin())
        .args(["assets", "rm", &spare, "--server", &base])
        .output()
        .unwrap();
    assert!(
        rm.status.success(),
        "{}",
        String::from_utf8_lossy(&rm.stderr)
    );
    let gone = http()
        .get(format!("{base}/assets/{}", asset_id(&spare)))
        .send()
        .unwrap();
    assert_eq!(gone.status().as_u16(), 404);
    let env: Value = gone.json().unwrap();
    assert_eq!(env["code"], "asset_not_found");
    assert!(!data.join("assets").join(asset_id(&spare)).exists());

    // Past the TTL the sweeper keeps what the waiting render uses...
    std::thread::sleep(Duration::from_secs(5));
    for uri in [&clip, &logo] {
        let kept = http()
            .get(format!("{base}/assets/{}", asset_id(uri)))
            .send()
            .unwrap();
        assert_eq!(kept.status().as_u16(), 200, "{uri}");
    }
    // ...and once the render ends without a result (rejected), its preview goes, then the
    // expired assets.
    let preview = format!("{base}/renders/{id}/watermark-preview.png");
    assert_eq!(http().get(&preview).send().unwrap().status().as_u16(), 200);
    let rejected = mcp.tool(
        "vidforge_approve_watermark",
        json!({"render_id": id, "approved": false}),
        Caps::NONE,
    );
    assert_eq!(rejected.result()["isError"], false, "{}", rejected.body);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let preview_gone = http().get(&preview).send().unwrap().status().as_u16() == 404;
        let assets_gone = [&clip, &logo].iter().all(|uri| {
            http()
                .get(format!("{base}/assets/{}", asset_id(uri)))
                .send()
                .unwrap()
                .status()
                .as_u16()
                == 404
        });
        if preview_gone && assets_gone {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "preview gone: {preview_gone}, assets gone: {assets_gone}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(!data.join("previews").join(&id).exists());
    assert!(!data.join("assets").join(asset_id(&clip)).exists());
}

/// A small tmpfs mounted for one test (CI runs as root; without mount rights the test fails
/// and says why). Unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Tmpfs {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "the disk-full test mounts a small tmpfs and needs root (CI runs as root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs { dir }
    }

    fn path(&self) -> &std::path::Path {
        self.dir.path()
    }

    fn free_bytes(&self) -> u64 {
        let out = std::process::Command::new("df")
            .args(["--output=avail", "-B1"])
            .arg(self.path())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .nth(1)
            .and_then(|l| l.trim().parse().ok())
            .unwrap()
    }

    /// Fills the file system with `filler` until `leave` bytes are free (or none).
    fn fill(&self, filler: &std::path::Path, leave: u64) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(filler)
            .unwrap();
        let chunk = vec![0x5au8; 64 * 1024];
        for _ in 0..100_000 {
            let free = self.free_bytes();
            if free <= leave {
                break;
            }
            let n = ((free - leave) as usize).min(chunk.len());
            if f.write_all(&chunk[..n]).is_err() {
                break;
            }
            f.sync_all().unwrap();
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// On a full disk: new uploads and renders are refused early with `storage_full` (temporary,
/// `retry_after_ms`); an upload that hits ENOSPC says so and leaves nothing; finished results
/// stay downloadable; the server even starts on a completely full disk; and work resumes once
/// space is back.
#[test]
fn a_full_disk_refuses_new_work_but_keeps_serving_reads() {
    let fs = Tmpfs::mount("96m");
    let work = tempfile::tempdir().unwrap();
    let data = fs.path().join("data");
    // The log lives off the file system this test fills: the server must start on a full
    // disk, and the test must still read that it did.
    let mut server = Server::start_logging_to(
        &data,
        &["--min-free-bytes", "8MiB", "--disk-reserve-bytes", "4MiB"],
        &work.path().join("server.log"),
    );
    assert!(
        data.join(".disk-reserve").exists(),
        "the reserve is in place"
    );
    let clip_path = make_clip(work.path(), "clip.mp4", 320, 180, 0.6, false);
    let clip = upload(&server, None, &clip_path);
    let mut mcp = server.mcp();
    let created = mcp.tool(
        "vidforge_render_video",
        json!({"source_asset_uri": clip, "output_format": "mp4", "resolution": "720p"}),
        Caps::TASKS,
    );
    let id = created.result()["taskId"].as_str().unwrap().to_string();
    let done = mcp.wait_task(&id, Caps::TASKS, WAIT, |t| t["status"] == "completed");
    let url = done["result"]["content"][1]["_meta"]["com.vidforge/download_url"]
        .as_str()
        .unwrap()
        .to_string();
    let size = http().get(&url).send().unwrap().bytes().unwrap().len();
    assert!(size > 0);

    // Under the floor: refused before a byte is written.
    let filler = fs.path().join("filler");
    fs.fill(&filler, 6 << 20);
    let (status, env) = upload_raw(&server, &clip_path);
    assert_eq!(status, 507, "{env}");
    assert_eq!(env["code"], "storage_full");
    assert_eq!(env["temporary"], true);
    assert!(env["retry_after_ms"].as_u64().unwrap() > 0, "{env}");
    let refused = mcp.tool(
        "vidforge_render_video",
        json!({"source_asset_uri": clip, "output_format": "webm", "resolution": "720p"}),
        Caps::TASKS,
    );
    assert_eq!(
        refused.result()["structuredContent"]["code"],
        "storage_full"
    );
    // Reads go on.
    assert_eq!(
        http().get(&url).send().unwrap().bytes().unwrap().len(),
        size
    );

    // Completely full, then a crash: the server still starts and serves the result.
    fs.fill(&filler, 0);
    server.kill9();
    server.start_again();
    assert_eq!(
        http().get(&url).send().unwrap().bytes().unwrap().len(),
        size
    );
    let again = server.mcp().task_get(&id, Caps::TASKS);
    assert_eq!(again.result()["status"], "completed");
    let (status, env) = upload_raw(&server, &clip_path);
    assert_eq!(status, 507, "{env}");
    let leftovers: Vec<_> = std::fs::read_dir(data.join("assets"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // Space is back: work resumes.
    std::fs::remove_file(&filler).unwrap();
    let (status, env) = upload_raw(&server, &clip_path);
    assert_eq!(status, 201, "{env}");
}

/// A faststart mp4 cut to 30 % keeps an index of all its frames: rendering it is an error
/// naming the truncation, not a short video reported as a success.
#[test]
fn a_truncated_source_fails_instead_of_passing_off_a_short_video() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[]);
    let full = dir.path().join("full.mp4");
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=640x360:rate=30:duration=3",
        "-c:v",
        "libx264",
        "-preset",
        "ultrafast",
        "-movflags",
        "+faststart",
        full.to_str().unwrap(),
    ]);
    let cut = cut_copy(&full, dir.path().join("cut.mp4"), 0.3);
    let reason = render_fails_as_truncated(&server, dir.path(), &cut);
    assert!(reason.contains("frames"), "{reason}");
}

/// The first `fraction` of `full`'s bytes, written to `to`.
fn cut_copy(full: &std::path::Path, to: std::path::PathBuf, fraction: f64) -> std::path::PathBuf {
    let bytes = std::fs::read(full).unwrap();
    std::fs::write(&to, &bytes[..(bytes.len() as f64 * fraction) as usize]).unwrap();
    to
}

/// Uploads `cut` and renders it to 720p mp4: the task completes as an error whose
/// `unsupported_codec` envelope names the truncation, and no output is kept. Returns the
/// reason.
fn render_fails_as_truncated(
    server: &Server,
    dir: &std::path::Path,
    cut: &std::path::Path,
) -> String {
    let clip = upload(server, None, cut);
    let mut mcp = server.mcp();
    let created = mcp.tool(
        "vidforge_render_video",
        json!({"source_asset_uri": clip, "output_format": "mp4", "resolution": "720p"}),
        Caps::TASKS,
    );
    let id = created.result()["taskId"].as_str().unwrap().to_string();
    let done = mcp.wait_task(&id, Caps::TASKS, WAIT, |t| t["status"] == "completed");
    assert_eq!(done["result"]["isError"], true, "{}: {done}", cut.display());
    let content = &done["result"]["structuredContent"];
    assert_eq!(content["code"], "unsupported_codec", "{done}");
    let reason = content["details"]["reason"].as_str().unwrap();
    assert!(reason.contains("truncated"), "{reason}");
    let results = dir.join("data/results").join(&id);
    let kept: Vec<_> = std::fs::read_dir(&results)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().starts_with("final"))
        .collect();
    assert!(kept.is_empty(), "{kept:?}");
    reason.to_string()
}

/// A webm (VP9/Opus) and an mkv (H.264) cut at half keep their declared duration but
/// declare no frame count: the upload is refused, naming both lengths (a render of such a
/// file fails the same way: `media/tests/engine/errors.rs`).
#[test]
fn a_truncated_webm_or_mkv_fails_instead_of_passing_off_a_short_video() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[]);
    let webm = dir.path().join("full.webm");
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=640x360:rate=30:duration=4",
        "-f",
        "lavfi",
        "-i",
        "sine=duration=4",
        "-c:v",
        "libvpx-vp9",
        "-deadline",
        "realtime",
        "-cpu-used",
        "8",
        "-c:a",
        "libopus",
        webm.to_str().unwrap(),
    ]);
    let mkv = dir.path().join("full.mkv");
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=640x360:rate=30:duration=4",
        "-c:v",
        "libx264",
        "-preset",
        "ultrafast",
        mkv.to_str().unwrap(),
    ]);
    // Matroska declares its length in a header a cut file keeps, and has no index: the
    // upload reads its packets and refuses it, naming the truncation, instead of accepting a
    // file whose every render would fail.
    for (full, cut) in [(&webm, "cut.webm"), (&mkv, "cut.mkv")] {
        let cut = cut_copy(full, dir.path().join(cut), 0.5);
        let (status, env) = upload_raw(&server, &cut);
        assert_eq!(status, 422, "{}: {env}", cut.display());
        assert_eq!(env["code"], "asset_invalid", "{env}");
        let said = env.to_string();
        assert!(
            said.contains("truncated") && said.contains("declares 4.0"),
            "{env}"
        );
    }
    // The complete files are accepted.
    for full in [&webm, &mkv] {
        let (status, env) = upload_raw(&server, full);
        assert!(
            (200..300).contains(&status),
            "{}: {status} {env}",
            full.display()
        );
    }
}

/// Files are durable before any record points at them: traced with strace, an upload and a
/// render each fsync the file, rename it into place, then fsync its directory, all before
/// the database's fsync that makes the record durable.
#[test]
fn files_are_fsynced_then_renamed_then_their_directory_fsynced() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let data = dir.path().join("data");
    let trace = dir.path().join("strace.log");
    let mut child = std::process::Command::new("strace")
        .args([
            "-f",
            "-y",
            "-qq",
            "-e",
            "trace=fsync,rename,renameat2",
            "-o",
        ])
        .arg(&trace)
        .arg(vidforge_bin())
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--backend",
            "cpu",
        ])
        .arg("--data-dir")
        .arg(&data)
        .env("VIDFORGE_MIN_FREE_BYTES", "64MiB")
        .env("VIDFORGE_DISK_RESERVE_BYTES", "0")
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run strace (scripts/install-deps.sh installs it)");
    struct Kill<'a>(&'a mut std::process::Child);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let guard = Kill(&mut child);
    let base = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(60);
    while http().get(format!("{base}/healthz")).send().is_err() {
        assert!(Instant::now() < deadline, "the traced server did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    let clip = make_clip(dir.path(), "clip.mp4", 320, 180, 0.4, false);
    let uploaded: Value = http()
        .post(format!("{base}/assets?name=clip.mp4"))
        .header("Content-Type", "application/octet-stream")
        .body(std::fs::read(&clip).unwrap())
        .send()
        .unwrap()
        .json()
        .unwrap();
    let mut mcp = Mcp::new(&base);
    let created = mcp.tool(
        "vidforge_render_video",
        json!({"source_asset_uri": uploaded["uri"], "output_format": "mp4", "resolution": "720p"}),
        Caps::TASKS,
    );
    let id = created.result()["taskId"].as_str().unwrap().to_string();
    mcp.wait_task(&id, Caps::TASKS, WAIT, |t| t["status"] == "completed");
    // strace writes its log out when it ends: stop the traced server (and strace with it;
    // both command lines name the port).
    let _ = std::process::Command::new("pkill")
        .args(["-TERM", "-f", &format!("listen 127.0.0.1:{port} ")])
        .status();
    let stop_by = Instant::now() + Duration::from_secs(10);
    while guard.0.try_wait().ok().flatten().is_none() && Instant::now() < stop_by {
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = std::fs::read_to_string(&trace).unwrap();
    let calls: Vec<&str> = log
        .lines()
        // A call another thread interrupted is logged with its arguments first ("unfinished")
        // and completed later ("resumed"): the first line is the one to read.
        .filter(|l| !l.contains("resumed>"))
        .collect();
    for (file, what) in [
        (
            format!("{}/clip.mp4", uploaded["asset_id"].as_str().unwrap()),
            "upload",
        ),
        (format!("{id}/final.mp4"), "result"),
    ] {
        let rename = calls
            .iter()
            .position(|l| l.contains("rename") && l.contains(&format!("{file}\"")))
            .unwrap_or_else(|| panic!("{what}: no rename to {file} in\n{log}"));
        let before = &calls[..rename];
        assert!(
            before
                .iter()
                .any(|l| l.contains("fsync(") && l.contains(".partial")),
            "{what}: the file was not fsynced before its rename:\n{log}"
        );
        let parent = file.rsplit_once('/').unwrap().0;
        let after = &calls[rename..];
        let dir_sync = after
            .iter()
            .position(|l| l.contains("fsync(") && l.contains(&format!("{parent}>")))
            .unwrap_or_else(|| panic!("{what}: its directory was never fsynced:\n{log}"));
        let db_sync = after
            .iter()
            .position(|l| l.contains("fsync(") && l.contains("/db/"))
            .unwrap_or_else(|| panic!("{what}: no database fsync after it:\n{log}"));
        assert!(
            dir_sync < db_sync,
            "{what}: the record was made durable before the directory:\n{log}"
        );
    }
}

/// Work per render is bounded: a source longer than `max_source_seconds` is refused at
/// creation with `invalid_arguments` naming the limit.
#[test]
fn sources_over_the_duration_limit_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &["--max-source-seconds", "1"]);
    let clip = upload(
        &server,
        None,
        &make_clip(dir.path(), "long.mp4", 160, 90, 2.5, false),
    );
    let reply = server.mcp().tool(
        "vidforge_render_video",
        json!({"source_asset_uri": clip, "output_format": "mp4", "resolution": "720p"}),
        Caps::TASKS,
    );
    let env = &reply.result()["structuredContent"];
    assert_eq!(env["code"], "invalid_arguments", "{env}");
    assert_eq!(env["details"]["field"], "source_asset_uri");
    assert!(
        env["message"].as_str().unwrap().contains("at most 1 s"),
        "{env}"
    );
}
