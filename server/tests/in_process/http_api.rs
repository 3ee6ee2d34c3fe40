//! The HTTP surface over a real bound port: auth, uploads, Range and conditional downloads,
//! HEAD, previews, expiry.

use std::time::Duration;

use crate::common::{Harness, ScriptedRenderer, fixtures, render_args};
use reqwest::StatusCode;
use serde_json::Value;
use vidforge_core::catalog;
use vidforge_core::store::{AssetRecord, RenderState};

const ALICE: &str = "alice-token-123";
const BOB: &str = "bob-token-456";

struct Server {
    h: Harness,
    base: String,
    client: reqwest::Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

async fn start() -> Server {
    let h = Harness::start(ScriptedRenderer::new(10, Duration::from_millis(1)), |c| {
        c.tokens.insert(ALICE.into(), "alice".into());
        c.tokens.insert(BOB.into(), "bob".into());
        c.max_upload_bytes = 256 * 1024;
        c.per_principal_concurrent = 5;
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let service = h.service.clone();
    tokio::spawn(async move {
        vidforge::app::serve(&service, listener, async {
            let _ = rx.await;
        })
        .await
        .unwrap();
    });
    Server {
        h,
        base,
        client: reqwest::Client::new(),
        stop: Some(tx),
    }
}

impl Server {
    async fn upload(&self, token: &str, path: &std::path::Path, name: &str) -> reqwest::Response {
        self.client
            .post(format!("{}/assets?name={name}", self.base))
            .bearer_auth(token)
            .body(std::fs::read(path).unwrap())
            .send()
            .await
            .unwrap()
    }

    async fn get(&self, token: &str, path: &str, range: Option<&str>) -> reqwest::Response {
        let mut req = self
            .client
            .get(format!("{}{path}", self.base))
            .bearer_auth(token);
        if let Some(r) = range {
            req = req.header("Range", r);
        }
        req.send().await.unwrap()
    }

    /// A request with the given method and extra headers.
    async fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        headers: &[(&str, &str)],
    ) -> reqwest::Response {
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(ALICE);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req.send().await.unwrap()
    }
}

fn asset_from_json(v: &Value, h: &Harness, principal: &str) -> AssetRecord {
    h.service
        .resolve_asset(principal, v["uri"].as_str().unwrap())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_upload_download_ranges_and_expiry() {
    let s = start().await;

    // Health is open (liveness only); its details and everything else need a token.
    let r = s
        .client
        .get(format!("{}/healthz", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let health: Value = r.json().await.unwrap();
    assert_eq!(health, serde_json::json!({"status": "ok"}));
    let health: Value = s
        .client
        .get(format!("{}/healthz", s.base))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        health["fingerprint"]
            .as_str()
            .unwrap()
            .starts_with("vidforge@")
    );
    let r = s
        .client
        .post(format!("{}/assets?name=a.mp4", s.base))
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(
        r.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Bearer")
    );
    let r = s.upload("wrong-token-000", &fixtures().clip, "a.mp4").await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(
        r.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("invalid_token")
    );
    let r = s
        .client
        .post(format!("{}/mcp", s.base))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::UNAUTHORIZED,
        "/mcp is authenticated too"
    );

    // Uploads.
    let r = s.upload(ALICE, &fixtures().clip, "clip.mp4").await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["kind"], "video");
    assert_eq!(v["file_name"], "clip.mp4");
    assert!(
        v["uri"]
            .as_str()
            .unwrap()
            .starts_with("vidforge://assets/a_")
    );
    let video = asset_from_json(&v, &s.h, "alice");
    let r = s
        .client
        .post(format!("{}/assets", s.base))
        .bearer_auth(ALICE)
        .header("X-Filename", "logo.png")
        .body(std::fs::read(&fixtures().logo).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        (v["kind"].as_str(), v["width"].as_u64()),
        (Some("image"), Some(40))
    );
    let logo = asset_from_json(&v, &s.h, "alice");

    let assets_dir = s.h.service.config().assets_dir();
    let entries = || std::fs::read_dir(&assets_dir).unwrap().count();
    let before = entries();
    let r = s
        .client
        .post(format!("{}/assets?name=big.mp4", s.base))
        .bearer_auth(ALICE)
        .body(vec![0u8; 300 * 1024])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        r.headers()[reqwest::header::CONNECTION],
        "close",
        "the unread body leaves the connection unusable, so it is not reused"
    );
    let env: Value = r.json().await.unwrap();
    assert_eq!(env["code"], "asset_too_large");
    assert!(env["request_id"].as_str().unwrap().starts_with("req_"));
    let r = s.upload(ALICE, &fixtures().garbage, "noise.mp4").await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(r.json::<Value>().await.unwrap()["code"], "asset_invalid");
    assert_eq!(entries(), before, "rejected uploads leave nothing");

    // A finished render to download.
    let args = render_args(&video, Some(&logo), Some("dl"));
    let parsed = vidforge_mcp::inputs::render_args(&args).unwrap();
    let id =
        s.h.service
            .create_render("alice", parsed, args.clone())
            .await
            .unwrap()
            .record
            .id;
    s.h.wait_state("alice", &id, RenderState::AwaitingApproval)
        .await;
    let r = s
        .get(ALICE, &format!("/renders/{id}/watermark-preview.png"), None)
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["content-type"], "image/png");
    assert_eq!(&r.bytes().await.unwrap()[1..4], b"PNG");
    assert_eq!(
        s.get(BOB, &format!("/renders/{id}/watermark-preview.png"), None)
            .await
            .status(),
        StatusCode::NOT_FOUND
    );
    s.h.service
        .decide_approval("alice", &id, true, None)
        .await
        .unwrap();
    s.h.wait_state("alice", &id, RenderState::Succeeded).await;
    let file = s.h.service.resolve_result("alice", &id).unwrap();
    let bytes = std::fs::read(&file.path).unwrap();
    let len = bytes.len();
    let path = format!("/videos/{id}/final.mp4");

    let r = s.get(ALICE, &path, None).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["accept-ranges"], "bytes");
    assert_eq!(r.headers()["content-type"], "video/mp4");
    assert_eq!(r.headers()["content-length"], len.to_string().as_str());
    assert_eq!(r.bytes().await.unwrap().as_ref(), &bytes[..]);

    let r = s.get(ALICE, &path, Some("bytes=10-19")).await;
    assert_eq!(r.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(
        r.headers()["content-range"],
        format!("bytes 10-19/{len}").as_str()
    );
    assert_eq!(r.headers()["content-length"], "10");
    assert_eq!(r.bytes().await.unwrap().as_ref(), &bytes[10..20]);

    let r = s.get(ALICE, &path, Some("bytes=-5")).await;
    assert_eq!(r.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(r.bytes().await.unwrap().as_ref(), &bytes[len - 5..]);

    let r = s.get(ALICE, &path, Some(&format!("bytes={len}-"))).await;
    assert_eq!(r.status(), StatusCode::RANGE_NOT_SATISFIABLE);
    assert_eq!(
        r.headers()["content-range"],
        format!("bytes */{len}").as_str()
    );

    // Ranges in another unit are ignored (RFC 9110 §14.2); multi-range requests get it all.
    for range in ["items=0-9", "bytes=0-1,5-6"] {
        let r = s.get(ALICE, &path, Some(range)).await;
        assert_eq!(r.status(), StatusCode::OK, "{range}");
        assert_eq!(r.bytes().await.unwrap().len(), len, "{range}");
    }

    // HEAD: a GET's headers without the body.
    let r = s.request(reqwest::Method::HEAD, &path, &[]).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["content-length"], len.to_string().as_str());
    assert_eq!(r.headers()["content-type"], "video/mp4");
    assert_eq!(r.headers()["accept-ranges"], "bytes");
    assert_eq!(r.headers()["cache-control"], "private, max-age=3600");
    assert_eq!(
        r.headers()["content-disposition"],
        "inline; filename=\"final.mp4\""
    );
    let last_modified = r.headers()["last-modified"].to_str().unwrap().to_string();
    assert!(r.bytes().await.unwrap().is_empty());
    let r = s
        .request(reqwest::Method::HEAD, &path, &[("Range", "bytes=10-19")])
        .await;
    assert_eq!(r.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(r.headers()["content-length"], "10");

    // If-Range: the range applies while the validator matches Last-Modified; a stale date or
    // an entity tag (vidforge sends none) gets the whole file.
    let r = s
        .request(
            reqwest::Method::GET,
            &path,
            &[("Range", "bytes=10-19"), ("If-Range", &last_modified)],
        )
        .await;
    assert_eq!(r.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(r.bytes().await.unwrap().as_ref(), &bytes[10..20]);
    for stale in ["Wed, 21 Oct 2015 07:28:00 GMT", "\"an-etag\""] {
        let r = s
            .request(
                reqwest::Method::GET,
                &path,
                &[("Range", "bytes=10-19"), ("If-Range", stale)],
            )
            .await;
        assert_eq!(r.status(), StatusCode::OK, "If-Range: {stale}");
        assert_eq!(r.bytes().await.unwrap().as_ref(), &bytes[..]);
    }

    // Conditional GET: unchanged since Last-Modified → 304 without a body; changed → 200.
    let r = s
        .request(
            reqwest::Method::GET,
            &path,
            &[("If-Modified-Since", &last_modified)],
        )
        .await;
    assert_eq!(r.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(r.headers()["cache-control"], "private, max-age=3600");
    assert!(r.bytes().await.unwrap().is_empty());
    let r = s
        .request(
            reqwest::Method::GET,
            &path,
            &[("If-Modified-Since", "Wed, 21 Oct 2015 07:28:00 GMT")],
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.bytes().await.unwrap().len(), len);

    // Another principal and an unknown id look the same.
    let r = s.get(BOB, &path, None).await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let bob_env: Value = r.json().await.unwrap();
    let r = s
        .get(
            ALICE,
            "/videos/task_00000000000000000000000000/final.mp4",
            None,
        )
        .await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let unknown_env: Value = r.json().await.unwrap();
    assert_eq!(bob_env["code"], "render_not_found");
    assert_eq!(bob_env["message"], unknown_env["message"]);
    assert_eq!(
        s.get(ALICE, &format!("/videos/{id}/final.webm"), None)
            .await
            .status(),
        StatusCode::NOT_FOUND
    );

    // Past retention: 410 with a re-render repair built from the original arguments.
    s.h.clock
        .advance(catalog::RESULT_TTL + Duration::from_secs(1));
    let r = s.get(ALICE, &path, None).await;
    assert_eq!(r.status(), StatusCode::GONE);
    let env: Value = r.json().await.unwrap();
    assert_eq!(env["code"], "result_expired");
    assert_eq!(env["temporary"], false);
    assert_eq!(env["repair"]["tool"], "vidforge_render_video");
    let mut expected = args.clone();
    expected.as_object_mut().unwrap().remove("idempotency_key");
    assert_eq!(env["repair"]["arguments"], expected);
    assert_eq!(env["details"]["value"], id.as_str());
}

/// `vidforge serve` as a process: an acknowledged upload survives `kill -9`, and a second
/// server on the same data dir is refused with a clear message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_upload_survives_kill_9() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut child = Command::new(env!("CARGO_BIN_EXE_vidforge"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--backend",
            "cpu",
            "--data-dir",
        ])
        .arg(&data)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let base = first
        .strip_prefix("vidforge listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {first}"))
        .to_string();

    let second = Command::new(env!("CARGO_BIN_EXE_vidforge"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    assert!(!second.status.success());
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("locked by another process"), "{err}");

    let r = reqwest::Client::new()
        .post(format!("{base}/assets?name=clip.mp4"))
        .body(std::fs::read(&fixtures().clip).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let v: Value = r.json().await.unwrap();
    child.kill().unwrap(); // SIGKILL: no shutdown code runs.
    child.wait().unwrap();

    let store = vidforge_core::store::Store::open(&data.join("db")).unwrap();
    let asset = store
        .get_asset(v["asset_id"].as_str().unwrap())
        .unwrap()
        .expect("the acknowledged asset is durable");
    assert_eq!(asset.principal, "local");
    assert_eq!(
        std::fs::metadata(&asset.path).unwrap().len(),
        std::fs::metadata(&fixtures().clip).unwrap().len()
    );
}
