//! Media in an S3-compatible bucket (`--media-store s3://…`), against a real S3 server on
//! loopback (moto's, `tests/support/s3.rs`) and the real binary: the contract end to end
//! with the objects in the bucket and only the bounded cache in the data dir; presigned
//! downloads (Range, HEAD) and another principal's `404`; a source downloaded once for
//! repeat renders; the bucket frozen mid-render (the upload is retried and completes) and
//! frozen past the retry window (the render fails cleanly, temporary, nothing kept); uploads
//! refused with `retry_after_ms` meanwhile; `kill -9` mid-upload (the restarted node aborts
//! its orphaned multipart upload); an upload far larger than the memory bound, with the
//! server's peak RSS. The farm without a shared directory is in tests/e2e/cluster.rs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::s3::{ENV, S3};
use crate::support::*;
use serde_json::{Value, json};

const ALICE: &str = "alice-s3-token";
const BOB: &str = "bob-s3-token-22";
const WAIT: Duration = Duration::from_secs(120);
/// The prefix of this test's media in the bucket.
const PREFIX: &str = "media";

fn status_of(task: &Value) -> &str {
    task["status"].as_str().unwrap_or_default()
}

/// A client that does not follow redirects (to see the presigned link).
fn no_redirects() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// A client that follows them (as a player or `curl -L` does).
fn following() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(300))
        .build()
        .unwrap()
}

fn start_server(dir: &Path, s3: &S3) -> Server {
    let media = s3.media_args(PREFIX);
    let mut args: Vec<&str> = vec![
        "--token",
        "alice-s3-token=alice",
        "--token",
        "bob-s3-token-22=bob",
        // A frozen bucket fails a request within 2 s; a render retries its upload for 8 s.
        "--s3-request-timeout",
        "2s",
        "--media-retry-window",
        "8s",
        "--max-upload-bytes",
        "3GiB",
        // The sweeper removes what a timed-out upload left in the bucket once it thaws.
        "--sweep-interval",
        "1s",
    ];
    args.extend(media.iter().map(String::as_str));
    Server::start_with_env(&dir.join("data"), &args, &ENV)
}

/// Files under the data dir's media folders (`assets`, `results`, `previews`): none may stay
/// there once media is published to the bucket.
fn local_media_files(data: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack: Vec<PathBuf> = ["assets", "results", "previews"]
        .iter()
        .map(|d| data.join(d))
        .collect();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            if e.path().is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path());
            }
        }
    }
    out
}

fn render(mcp: &mut Mcp, args: Value) -> String {
    let created = mcp.tool("vidforge_render_video", args, Caps::FULL);
    assert_eq!(created.result()["resultType"], "task", "{}", created.body);
    created.result()["taskId"].as_str().unwrap().to_string()
}

fn asset_id(uri: &str) -> &str {
    uri.rsplit('/').next().unwrap()
}

#[test]
fn the_contract_with_media_in_a_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let s3 = S3::start(&dir.path().join("s3"));
    let mut server = start_server(dir.path(), &s3);
    let data = dir.path().join("data");
    let clip_path = make_clip(dir.path(), "clip.mp4", 320, 180, 0.6, true);
    let clip = upload(&server, Some(ALICE), &clip_path);
    let logo = upload(&server, Some(ALICE), &make_logo(dir.path()));
    let clip_key = format!("{PREFIX}/assets/{}/clip.mp4", asset_id(&clip));
    let keys = s3.keys(PREFIX);
    assert!(keys.contains(&clip_key), "{keys:?}");

    // 1. Render with a watermark on the task path; the preview is in the bucket.
    let mut mcp = server.mcp().with_token(ALICE);
    let watermarked = json!({"source_asset_uri": clip, "output_format": "mp4", "resolution": "720p",
        "watermark": {"image_asset_uri": logo, "position": "top_left", "opacity": 0.6}});
    let id = render(&mut mcp, watermarked);
    mcp.wait_task(&id, Caps::FULL, WAIT, |t| status_of(t) == "input_required");
    let preview_uri = format!("vidforge://renders/{id}/watermark-preview.png");
    let read = mcp.call("resources/read", json!({"uri": preview_uri}), Caps::FULL);
    assert_eq!(read.result()["contents"][0]["mimeType"], "image/png");
    let preview_url = format!("{}/renders/{id}/watermark-preview.png", server.base());
    let redirect = no_redirects()
        .get(&preview_url)
        .bearer_auth(ALICE)
        .send()
        .unwrap();
    assert_eq!(redirect.status().as_u16(), 307);
    let location = redirect.headers()["location"].to_str().unwrap().to_string();
    assert!(
        location.starts_with(&s3.endpoint()) && location.contains("X-Amz-Signature="),
        "{location}"
    );
    assert!(
        location.contains("X-Amz-Expires=900"),
        "15 minutes: {location}"
    );
    assert_eq!(redirect.headers()["cache-control"], "no-store");
    let png = following().get(&location).send().unwrap().bytes().unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    // The pages (the approval page among them) load previews and results from the bucket:
    // their one policy admits that origin for images and media, and nothing else.
    let page = no_redirects()
        .get(format!("{}/signin", server.base()))
        .send()
        .unwrap();
    assert_eq!(page.status().as_u16(), 200);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    let origin = s3.endpoint();
    assert!(
        csp.contains(&format!("img-src 'self' {origin}"))
            && csp.contains(&format!("media-src 'self' {origin}"))
            && csp.contains("default-src 'self'"),
        "{csp}"
    );
    // Another principal: the same 404 as an unknown id, no link.
    let foreign = no_redirects()
        .get(&preview_url)
        .bearer_auth(BOB)
        .send()
        .unwrap();
    assert_eq!(foreign.status().as_u16(), 404);

    let update = mcp.call(
        "tasks/update",
        json!({"taskId": id, "inputResponses": {"watermark-approval-1": {"action": "accept", "content": {"approved": true}}}}),
        Caps::FULL,
    );
    assert_eq!(update.result()["resultType"], "complete");
    let done = mcp.wait_task(&id, Caps::FULL, WAIT, |t| status_of(t) == "completed");
    let sc = &done["result"]["structuredContent"];
    assert_eq!(sc["status"], "completed", "{done}");
    assert_eq!(
        sc["video_uri"].as_str().unwrap(),
        format!("vidforge://videos/{id}/final.mp4")
    );
    let size = sc["size_bytes"].as_u64().unwrap();

    // 2. Delivery: a presigned link; Range and HEAD come from the object store.
    let video_url = format!("{}/videos/{id}/final.mp4", server.base());
    let redirect = no_redirects()
        .get(&video_url)
        .bearer_auth(ALICE)
        .send()
        .unwrap();
    assert_eq!(redirect.status().as_u16(), 307);
    let full = following()
        .get(&video_url)
        .bearer_auth(ALICE)
        .send()
        .unwrap();
    assert_eq!(full.status().as_u16(), 200);
    let body = full.bytes().unwrap();
    assert_eq!(body.len() as u64, size);
    let out = dir.path().join("downloaded.mp4");
    std::fs::write(&out, &body).unwrap();
    assert_eq!(probe_video(&out), (1280, 720, "h264".to_string(), true));
    let ranged = following()
        .get(&video_url)
        .bearer_auth(ALICE)
        .header("Range", "bytes=0-99")
        .send()
        .unwrap();
    assert_eq!(ranged.status().as_u16(), 206);
    assert_eq!(ranged.bytes().unwrap().as_ref(), &body[..100]);
    let head = following()
        .head(&video_url)
        .bearer_auth(ALICE)
        .send()
        .unwrap();
    assert_eq!(head.status().as_u16(), 200);
    assert_eq!(head.headers()["content-length"], size.to_string().as_str());
    let foreign = no_redirects()
        .get(&video_url)
        .bearer_auth(BOB)
        .send()
        .unwrap();
    assert_eq!(foreign.status().as_u16(), 404);
    let anonymous = no_redirects().get(&video_url).send().unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);

    // The media is in the bucket; the data dir keeps only the cache.
    let keys = s3.keys(PREFIX);
    for key in [
        format!("{PREFIX}/results/{id}/final.mp4"),
        format!("{PREFIX}/previews/{id}/watermark-preview.png"),
        format!("{PREFIX}/assets/{}/logo.png", asset_id(&logo)),
    ] {
        assert!(keys.contains(&key), "{key} not in {keys:?}");
    }
    assert_eq!(local_media_files(&data), Vec::<PathBuf>::new());
    // Scratch no record claims (what a render's or a segment's worker leaves on the disk when
    // the render ends elsewhere) goes with the sweep, though the bucket never saw it.
    let scratch = data.join("segments/task_gone");
    std::fs::create_dir_all(&scratch).unwrap();
    std::fs::write(scratch.join(".a1-segment-000000.mp4.tmp"), b"x").unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while scratch.exists() {
        assert!(
            Instant::now() < deadline,
            "the sweep left {}",
            scratch.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // 3. A source is downloaded once: the uploading node kept its copy; once that copy is
    // gone (evicted), the next render downloads it, and the one after reuses it.
    let plain = json!({"source_asset_uri": clip, "output_format": "webm", "resolution": "720p"});
    let downloads = || s3.requests_matching(&format!("GET /vidforge/{clip_key} "));
    assert_eq!(downloads(), 0);
    for e in std::fs::read_dir(data.join("cache")).unwrap().flatten() {
        if e.file_name().to_string_lossy().ends_with("clip.mp4") {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
    for _ in 0..2 {
        let id = render(&mut mcp, plain.clone());
        let done = mcp.wait_task(&id, Caps::FULL, WAIT, |t| status_of(t) == "completed");
        assert_eq!(done["result"]["isError"], false, "{done}");
    }
    assert_eq!(downloads(), 1, "one download for two renders");

    // 4. The bucket freezes mid-render: new uploads and renders are refused (temporary,
    // retry_after_ms); the render in flight retries its upload and completes once it thaws.
    let id = render(&mut mcp, plain.clone());
    s3.pause();
    let refused = Command::new("curl")
        .args(["-sS", "--max-time", "30", "-X", "POST", "-H"])
        .arg(format!("Authorization: Bearer {ALICE}"))
        .args([
            "-H",
            "Content-Type: application/octet-stream",
            "--data-binary",
        ])
        .arg(format!("@{}", clip_path.display()))
        .arg(format!("{}/assets?name=again.mp4", server.base()))
        .output()
        .unwrap();
    let refused: Value = serde_json::from_slice(&refused.stdout).expect("a JSON refusal");
    assert_eq!(refused["code"], "service_unavailable", "{refused}");
    assert_eq!(refused["temporary"], true);
    assert!(refused["retry_after_ms"].as_u64().unwrap() > 0);
    assert_no_bucket_internals(&s3, &refused);
    let refused = mcp.tool("vidforge_render_video", plain.clone(), Caps::FULL);
    assert_eq!(
        refused.result()["structuredContent"]["code"],
        "service_unavailable",
        "{}",
        refused.body
    );
    assert_no_bucket_internals(&s3, &refused.result()["structuredContent"]);
    std::thread::sleep(Duration::from_secs(2));
    s3.resume();
    let done = mcp.wait_task(&id, Caps::FULL, WAIT, |t| status_of(t) == "completed");
    assert_eq!(done["result"]["isError"], false, "{done}");

    // 5. Frozen past the retry window: the render fails cleanly, temporary, nothing kept.
    let id = render(&mut mcp, plain.clone());
    s3.pause();
    let done = mcp.wait_task(&id, Caps::FULL, WAIT, |t| status_of(t) == "completed");
    s3.resume();
    let sc = &done["result"]["structuredContent"];
    assert_eq!(sc["code"], "service_unavailable", "{done}");
    assert_eq!(sc["temporary"], true);
    assert_no_bucket_internals(&s3, sc);
    // A request that timed out here may still land once the bucket thaws: the sweeper
    // deletes what no record claims.
    let deadline = Instant::now() + Duration::from_secs(30);
    while s3
        .keys(PREFIX)
        .iter()
        .any(|k| k.contains(&format!("results/{id}")))
    {
        assert!(
            Instant::now() < deadline,
            "the failed render's upload stayed"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(local_media_files(&data), Vec::<PathBuf>::new());
    assert_eq!(s3.multipart_uploads(), Vec::<String>::new());

    // 6. `kill -9` in the middle of an upload's multipart transfer: nothing is recorded, and
    // the restarted node aborts the upload it left in the bucket.
    let big = raw_video(dir.path(), "big.nut", 320);
    let base = server.base();
    let sender = {
        let big = big.clone();
        std::thread::spawn(move || stream_upload(&base, &big))
    };
    // Parts are being sent once the upload's marker is in the bucket.
    let deadline = Instant::now() + Duration::from_secs(120);
    while s3.keys(&format!("{PREFIX}/.uploads/")).is_empty() {
        assert!(
            Instant::now() < deadline && !sender.is_finished(),
            "no multipart upload began: {:?}\n{}",
            sender.is_finished().then(|| sender.join().ok()),
            server.log()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    server.kill9();
    let _ = sender.join();
    let orphans = s3.multipart_uploads();
    assert_eq!(orphans.len(), 1, "{orphans:?}");
    assert!(!s3.keys(PREFIX).iter().any(|k| k.ends_with("big.nut")));
    std::fs::remove_file(&big).unwrap();
    // The restarted node gets the default request bound back: a gigabyte's parts take the
    // server (moto) longer than 2 s each under load. Completing the upload, which moto spends
    // tens of seconds on, has its own longer bound whatever this one (`s3/src/bucket.rs`).
    let at = server
        .args
        .iter()
        .position(|a| a == "--s3-request-timeout")
        .unwrap();
    server.args[at + 1] = "30s".into();
    server.start_again();
    assert_eq!(s3.multipart_uploads(), Vec::<String>::new());
    assert!(
        !s3.keys(&format!("{PREFIX}/.uploads")).iter().any(|_| true),
        "markers left"
    );

    // 7. An upload far larger than the memory bound, through the restarted process: its
    // peak resident memory stays bounded whatever the size.
    let mb: u64 = std::env::var("VIDFORGE_S3_BIG_UPLOAD_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024);
    // The file, the bucket server's parts and its assembled object: a precondition that
    // fails clearly here rather than as a broken connection mid-upload.
    let free_mib = free_disk_mib(dir.path());
    assert!(
        free_mib > 3 * mb + 512,
        "the upload test needs about {} MiB free beside {}, there are {free_mib} MiB",
        3 * mb + 512,
        dir.path().display()
    );
    let huge = raw_video(dir.path(), "huge.nut", mb);
    let size = std::fs::metadata(&huge).unwrap().len();
    let started = Instant::now();
    let (status, answer) = stream_upload(&server.base(), &huge);
    let elapsed = started.elapsed();
    assert!(
        (200..300).contains(&status),
        "{status} {answer}\n{}",
        server.log()
    );
    let key = format!(
        "{PREFIX}/assets/{}/huge.nut",
        answer["asset_id"].as_str().unwrap()
    );
    assert!(s3.keys(PREFIX).contains(&key));
    let peak_mib = server.peak_rss_kib() / 1024;
    println!(
        "upload of {} MiB to the bucket: {:.1} s ({:.0} MiB/s end to end), server peak RSS {peak_mib} MiB",
        size >> 20,
        elapsed.as_secs_f64(),
        (size >> 20) as f64 / elapsed.as_secs_f64()
    );
    assert!(
        peak_mib < 512,
        "peak RSS {peak_mib} MiB for a {} MiB upload",
        size >> 20
    );
    std::fs::remove_file(&huge).unwrap();
}

/// An uncompressed video of about `mb` MiB (1280x720 yuv420p frames in NUT): large files in
/// seconds.
fn raw_video(dir: &Path, name: &str, mb: u64) -> PathBuf {
    let frame = 1280 * 720 * 3 / 2;
    let frames = (mb << 20) / frame + 1;
    let out = dir.join(name);
    ffmpeg_lavfi(
        "testsrc2=size=1280x720:rate=25",
        &[
            "-frames:v",
            &frames.to_string(),
            "-c:v",
            "rawvideo",
            "-pix_fmt",
            "yuv420p",
        ],
        &out,
    );
    out
}

/// Free space on the file system holding `dir`, in MiB.
fn free_disk_mib(dir: &Path) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and a zeroed statvfs that the call fills in.
    assert_eq!(unsafe { libc::statvfs(path.as_ptr(), &mut st) }, 0);
    (st.f_bavail as u64 * st.f_frsize as u64) >> 20
}

/// `POST /assets` streaming the file from disk (never whole in this process's memory);
/// the status and the JSON answer (status 0 and the client's error when the connection
/// broke).
fn stream_upload(base: &str, path: &Path) -> (u16, Value) {
    let file = std::fs::File::open(path).unwrap();
    let len = file.metadata().unwrap().len();
    let name = path.file_name().unwrap().to_str().unwrap();
    let reply = following()
        .post(format!("{base}/assets?name={name}"))
        .bearer_auth(ALICE)
        .header("Content-Type", "application/octet-stream")
        .body(reqwest::blocking::Body::sized(file, len))
        .send();
    match reply {
        Ok(r) => {
            let status = r.status().as_u16();
            (status, r.json().unwrap_or(Value::Null))
        }
        Err(e) => (0, Value::String(format!("{e:?}"))),
    }
}

/// The media store's cost, media on S3 beside media on local disk in one run (not run by
/// `make test`: `cargo test --release --test e2e s3_media:: -- --ignored --nocapture`; the figures
/// are in docs/bench/media-store.md). Per mode: upload throughput of a large file, download
/// throughput of a result through `GET /videos/…` (a redirect to the bucket on S3), and the
/// end-to-end time of upload + render + download of a short clip; medians of
/// `VIDFORGE_MEDIA_BENCH_RUNS` (default 5), modes taking turns.
#[test]
#[ignore]
fn bench_media_store_side_by_side() {
    let runs: usize = std::env::var("VIDFORGE_MEDIA_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let dir = tempfile::tempdir().unwrap();
    let s3 = S3::start(&dir.path().join("s3"));
    let local_dir = dir.path().join("local");
    let s3_dir = dir.path().join("s3-node");
    std::fs::create_dir_all(&local_dir).unwrap();
    std::fs::create_dir_all(&s3_dir).unwrap();
    let tokens = [
        "--token",
        "alice-s3-token=alice",
        "--max-upload-bytes",
        "3GiB",
    ];
    let local = Server::start(&local_dir.join("data"), &tokens);
    let mut s3_args: Vec<String> = tokens.iter().map(|s| s.to_string()).collect();
    s3_args.extend(s3.media_args("bench"));
    let s3_args: Vec<&str> = s3_args.iter().map(String::as_str).collect();
    let bucket = Server::start_with_env(&s3_dir.join("data"), &s3_args, &ENV);
    let big = raw_video(dir.path(), "big.nut", 256);
    let big_mib = std::fs::metadata(&big).unwrap().len() as f64 / (1 << 20) as f64;
    let clip = make_clip(dir.path(), "clip.mp4", 640, 360, 4.0, true);
    let median = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    let modes: [(&str, &Server); 2] = [("local disk", &local), ("S3 (moto)", &bucket)];
    let mut upload = [Vec::new(), Vec::new()];
    let mut download = [Vec::new(), Vec::new()];
    let mut end_to_end = [Vec::new(), Vec::new()];
    for _ in 0..runs {
        for (m, (_, server)) in modes.iter().enumerate() {
            let t = Instant::now();
            let (status, _) = stream_upload(&server.base(), &big);
            assert!((200..300).contains(&status));
            upload[m].push(big_mib / t.elapsed().as_secs_f64());

            let t = Instant::now();
            let (status, asset) = stream_upload(&server.base(), &clip);
            assert!((200..300).contains(&status));
            let mut mcp = server.mcp().with_token(ALICE);
            let id = render(
                &mut mcp,
                json!({"source_asset_uri": asset["uri"], "output_format": "mp4", "resolution": "1080p"}),
            );
            let done = mcp.wait_task(&id, Caps::FULL, WAIT, |t| status_of(t) == "completed");
            assert_eq!(done["result"]["isError"], false, "{done}");
            let url = format!("{}/videos/{id}/final.mp4", server.base());
            let d = Instant::now();
            let bytes = following()
                .get(&url)
                .bearer_auth(ALICE)
                .send()
                .unwrap()
                .bytes()
                .unwrap();
            let download_s = d.elapsed().as_secs_f64();
            end_to_end[m].push(t.elapsed().as_secs_f64());
            download[m].push(bytes.len() as f64 / (1 << 20) as f64 / download_s);
        }
    }
    let mut report = format!(
        "| measure ({runs} runs, median) | local disk | S3 (moto) | S3 / local |\n|---|---:|---:|---:|\n"
    );
    for (name, values, unit) in [
        (format!("upload {big_mib:.0} MiB (MiB/s)"), &upload, ""),
        ("download a 1080p result (MiB/s)".to_string(), &download, ""),
        (
            "upload + 1080p render + download, 4 s clip (s)".to_string(),
            &end_to_end,
            "",
        ),
    ] {
        let (l, s) = (median(values[0].clone()), median(values[1].clone()));
        report.push_str(&format!(
            "| {name} | {l:.2}{unit} | {s:.2}{unit} | {:.2} |\n",
            s / l
        ));
    }
    report.push_str(&format!(
        "\npeak RSS: local {} MiB, S3 {} MiB\n",
        local.peak_rss_kib() / 1024,
        bucket.peak_rss_kib() / 1024
    ));
    println!("{report}");
}

/// A client is told the contract's temporary error, never how the media store is laid out: no
/// endpoint, bucket, key prefix or object key in what it reads (the operator's log has them).
fn assert_no_bucket_internals(s3: &S3, answer: &Value) {
    let text = answer.to_string();
    let endpoint = s3.endpoint();
    let host = endpoint.trim_start_matches("http://");
    for internal in [host, "s3://", "media/", "results/", "/final."] {
        assert!(
            !text.contains(internal),
            "{internal:?} reached the client: {text}"
        );
    }
}
