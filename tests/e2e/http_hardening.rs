//! The connection-level defences of a real `vidforge serve`, driven over real HTTP (and raw
//! TCP where a well-behaved client cannot misbehave enough) on loopback:
//!
//! - one Host/Origin policy on every route but `/healthz` (`/assets`, `/videos/…`,
//!   `/renders/…` and `/mcp` decide alike), answering `403` with the §6 envelope (no build
//!   fingerprint for strangers);
//! - `/healthz` is liveness for strangers: the build, node and hardware only with a token;
//! - uploads refuse the CORS-"simple" content types (`415`);
//! - a header-read timeout, an idle timeout, a body-progress timeout for uploads (`408`, no
//!   `.partial` file left) and a cap on open connections, set through `VIDFORGE_*` variables.
//!
//! Every wait is bounded in time.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::*;
use serde_json::{Value, json};

const EVIL: &str = "http://evil.example.com";

/// One raw HTTP/1.1 exchange's answer.
struct RawAnswer {
    status: u16,
    head: String,
    body: String,
}

impl RawAnswer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.body))
    }
}

fn connect(server: &Server) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// Reads one response (head, then a `Content-Length` body) within `limit`.
fn read_answer(stream: &mut TcpStream, limit: Duration) -> Result<RawAnswer, String> {
    let deadline = Instant::now() + limit;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Err(format!(
                "no complete answer within {limit:?}; got {:?}",
                String::from_utf8_lossy(&buf)
            ));
        }
        stream.set_read_timeout(Some(deadline - now)).unwrap();
        if let Some(answer) = parse_answer(&buf) {
            return match answer.status {
                0 => Err(format!("malformed status line: {}", answer.head)),
                _ => Ok(answer),
            };
        }
        match stream.read(&mut chunk) {
            Ok(0) => {
                return Err(format!(
                    "connection closed after {:?}",
                    String::from_utf8_lossy(&buf)
                ));
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => return Err(format!("read failed: {e}")),
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// One request over a fresh connection (`Connection: close`), answered within 20 s.
fn raw_request(server: &Server, head: &str, body: &[u8]) -> RawAnswer {
    let mut s = connect(server);
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    read_answer(&mut s, Duration::from_secs(20)).expect("an answer")
}

/// Waits until the peer closes `stream` (EOF or reset); returns how long that took, or `None`
/// if it was still open after `limit`. Bytes the server sends first (e.g. a `408`) are read
/// and ignored.
fn wait_closed(stream: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    let mut chunk = [0u8; 4096];
    loop {
        let elapsed = start.elapsed();
        if elapsed >= limit {
            return None;
        }
        stream.set_read_timeout(Some(limit - elapsed)).unwrap();
        match stream.read(&mut chunk) {
            Ok(0) => return Some(start.elapsed()),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return Some(start.elapsed()),
        }
    }
}

fn asset_dir_entries(server: &Server) -> Vec<String> {
    let dir = server.data_dir.join("assets");
    std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn partial_uploads(server: &Server) -> Vec<String> {
    asset_dir_entries(server)
        .into_iter()
        .filter(|n| n.starts_with(".partial"))
        .collect()
}

fn assert_envelope(answer: &RawAnswer, status: u16, code: &str) -> Value {
    assert_eq!(answer.status, status, "{} {}", answer.head, answer.body);
    let env = answer.json();
    assert_eq!(env["code"], code, "{env}");
    for key in [
        "message",
        "details",
        "temporary",
        "request_id",
        "fingerprint",
    ] {
        assert!(env.get(key).is_some(), "envelope lacks {key}: {env}");
    }
    if code == "request_forbidden" {
        // A stranger (no credential was checked yet) learns no build.
        assert!(env["fingerprint"].is_null(), "{env}");
    } else {
        assert!(
            env["fingerprint"]
                .as_str()
                .unwrap_or_default()
                .starts_with("vidforge@"),
            "{env}"
        );
    }
    env
}

fn upload_head(server: &Server, name: &str, extra: &[(&str, &str)], len: usize) -> String {
    let mut head = format!(
        "POST /assets?name={name} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {len}\r\n\
         Connection: close\r\n",
        server.port
    );
    for (k, v) in extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    head
}

fn clip(dir: &Path) -> Vec<u8> {
    let path = make_clip(dir, "clip.mp4", 64, 48, 0.2, false);
    std::fs::read(path).unwrap()
}

#[test]
fn every_route_but_healthz_checks_host_and_origin_like_mcp() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = clip(dir.path());
    // A configured origin is allowed on the side doors exactly as on /mcp (one list).
    let server = Server::start_with_env(
        &dir.path().join("data"),
        &[],
        &[("VIDFORGE_ALLOWED_ORIGINS", "http://localhost:3000")],
    );
    let port = server.port;
    let octet = ("Content-Type", "application/octet-stream");

    // A foreign Origin on an upload: refused before a byte is stored.
    let answer = raw_request(
        &server,
        &upload_head(&server, "clip.mp4", &[octet, ("Origin", EVIL)], bytes.len()),
        &bytes,
    );
    let env = assert_envelope(&answer, 403, "request_forbidden");
    assert_eq!(env["details"]["field"], "Origin", "{env}");
    assert_eq!(env["temporary"], false);
    // The same with the CORS-simple type a browser form sends.
    let answer = raw_request(
        &server,
        &upload_head(
            &server,
            "clip.mp4",
            &[("Content-Type", "text/plain"), ("Origin", EVIL)],
            bytes.len(),
        ),
        &bytes,
    );
    assert_envelope(&answer, 403, "request_forbidden");
    // A foreign Host (DNS rebinding): refused.
    let head = format!(
        "POST /assets?name=clip.mp4 HTTP/1.1\r\nHost: evil.example.com:{port}\r\n\
         Content-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        bytes.len()
    );
    let env = assert_envelope(
        &raw_request(&server, &head, &bytes),
        403,
        "request_forbidden",
    );
    assert_eq!(env["details"]["field"], "Host", "{env}");
    assert!(
        asset_dir_entries(&server).is_empty(),
        "a refused upload stored something: {:?}",
        asset_dir_entries(&server)
    );

    // Downloads and previews: 403 before the id is even looked up (not 404).
    for path in [
        "/videos/task_01JVXD00000000000000000000/final.mp4",
        "/renders/task_01JVXD00000000000000000000/watermark-preview.png",
    ] {
        let head = format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: {EVIL}\r\n\
             Connection: close\r\n\r\n"
        );
        assert_envelope(&raw_request(&server, &head, b""), 403, "request_forbidden");
        let head =
            format!("GET {path} HTTP/1.1\r\nHost: evil.example.com\r\nConnection: close\r\n\r\n");
        assert_envelope(&raw_request(&server, &head, b""), 403, "request_forbidden");
        // Allowed: a request without Origin gets the route's own answer.
        let head =
            format!("GET {path} HTTP/1.1\r\nHost: localhost:{port}\r\nConnection: close\r\n\r\n");
        assert_eq!(raw_request(&server, &head, b"").status, 404);
    }

    // /mcp decides alike, with the same envelope.
    let mut mcp = server.mcp();
    let body = mcp
        .envelope("tools/list", json!({}), Caps::NONE)
        .to_string();
    let mcp_head = |host: &str, origin: Option<&str>| {
        let mut h = format!(
            "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {PROTOCOL}\r\n\
             Mcp-Method: tools/list\r\nContent-Length: {}\r\nConnection: close\r\n",
            body.len()
        );
        if let Some(o) = origin {
            h.push_str(&format!("Origin: {o}\r\n"));
        }
        h.push_str("\r\n");
        h
    };
    let local = format!("127.0.0.1:{port}");
    for (host, origin) in [
        (local.as_str(), Some(EVIL)),
        ("evil.example.com", None),
        (local.as_str(), Some("http://localhost:3001")),
    ] {
        let answer = raw_request(&server, &mcp_head(host, origin), body.as_bytes());
        assert_envelope(&answer, 403, "request_forbidden");
    }
    let own = format!("http://127.0.0.1:{port}");
    for origin in [None, Some("http://localhost:3000"), Some(own.as_str())] {
        let answer = raw_request(&server, &mcp_head(&local, origin), body.as_bytes());
        assert_eq!(answer.status, 200, "{origin:?}: {}", answer.body);
    }

    // The side doors accept what /mcp accepts: no Origin, the server's own, a configured one.
    for origin in [
        None,
        Some(format!("http://localhost:{port}")),
        Some("http://localhost:3000".to_string()),
    ] {
        let mut extra = vec![octet];
        if let Some(o) = &origin {
            extra.push(("Origin", o.as_str()));
        }
        let answer = raw_request(
            &server,
            &upload_head(&server, "clip.mp4", &extra, bytes.len()),
            &bytes,
        );
        assert_eq!(answer.status, 201, "{origin:?}: {}", answer.body);
        assert!(
            answer.json()["uri"]
                .as_str()
                .unwrap()
                .starts_with("vidforge://assets/")
        );
    }

    // Liveness stays open to everyone.
    let head = format!(
        "GET /healthz HTTP/1.1\r\nHost: evil.example.com\r\nOrigin: {EVIL}\r\nConnection: close\r\n\r\n"
    );
    assert_eq!(raw_request(&server, &head, b"").status, 200);
}

#[test]
fn uploads_refuse_cors_simple_content_types() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = clip(dir.path());
    let server = Server::start(&dir.path().join("data"), &[]);
    for ct in [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=xyz",
        "Application/X-WWW-Form-Urlencoded",
    ] {
        let answer = raw_request(
            &server,
            &upload_head(&server, "clip.mp4", &[("Content-Type", ct)], bytes.len()),
            &bytes,
        );
        let env = assert_envelope(&answer, 415, "unsupported_media_type");
        assert_eq!(env["details"]["field"], "Content-Type", "{env}");
        assert!(
            env["message"]
                .as_str()
                .unwrap()
                .contains("application/octet-stream"),
            "{env}"
        );
    }
    assert!(asset_dir_entries(&server).is_empty());
    // What the clients send: application/octet-stream (curl -H, vidforge assets add), the
    // file's own type, or no Content-Type at all (reqwest, httpx with raw bytes).
    for ct in [Some("application/octet-stream"), Some("video/mp4"), None] {
        let extra: Vec<(&str, &str)> = ct.map(|c| ("Content-Type", c)).into_iter().collect();
        let answer = raw_request(
            &server,
            &upload_head(&server, "clip.mp4", &extra, bytes.len()),
            &bytes,
        );
        assert_eq!(answer.status, 201, "{ct:?}: {}", answer.body);
    }
}

#[test]
fn half_sent_headers_and_idle_connections_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with_env(
        &dir.path().join("data"),
        &[],
        &[
            ("VIDFORGE_HEADER_READ_TIMEOUT", "1s"),
            ("VIDFORGE_IDLE_TIMEOUT", "30s"),
        ],
    );
    // Half a request head, then silence.
    let mut half = connect(&server);
    half.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        .unwrap();
    // A connection that never sends a byte.
    let mut silent = connect(&server);
    let limit = Duration::from_secs(8);
    let closed = wait_closed(&mut half, limit);
    assert!(
        closed.is_some_and(|d| d < Duration::from_secs(5)),
        "a half-sent header was still open after {limit:?}"
    );
    let closed = wait_closed(&mut silent, limit);
    assert!(
        closed.is_some_and(|d| d < Duration::from_secs(5)),
        "a silent connection was still open after {limit:?}"
    );
    // A complete request on a kept-alive connection is still answered.
    let mut ok = connect(&server);
    ok.write_all(
        format!(
            "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\r\n",
            server.port
        )
        .as_bytes(),
    )
    .unwrap();
    let answer = read_answer(&mut ok, Duration::from_secs(10)).expect("healthz answers");
    assert_eq!(answer.status, 200);
}

#[test]
fn idle_keep_alive_connections_close_but_sse_streams_live() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with_env(
        &dir.path().join("data"),
        &[],
        &[
            ("VIDFORGE_HEADER_READ_TIMEOUT", "60s"),
            ("VIDFORGE_IDLE_TIMEOUT", "2s"),
        ],
    );
    // A kept-alive connection after one answered request, then nothing.
    let mut kept = connect(&server);
    kept.write_all(
        format!(
            "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\r\n",
            server.port
        )
        .as_bytes(),
    )
    .unwrap();
    let answer = read_answer(&mut kept, Duration::from_secs(10)).expect("healthz answers");
    assert_eq!(answer.status, 200);
    let limit = Duration::from_secs(10);
    let closed = wait_closed(&mut kept, limit);
    assert!(
        closed.is_some_and(|d| d < Duration::from_secs(7)),
        "an idle keep-alive connection was still open after {limit:?}"
    );

    // An SSE stream (subscriptions/listen) outlives several idle timeouts: its keep-alives
    // count as traffic.
    let mut mcp = server.mcp();
    let body = mcp
        .envelope(
            "subscriptions/listen",
            json!({"notifications": {"taskIds": ["task_01JVXD00000000000000000000"]}}),
            Caps::TASKS,
        )
        .to_string();
    let mut sse = connect(&server);
    sse.write_all(
        format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {PROTOCOL}\r\n\
             Mcp-Method: subscriptions/listen\r\nContent-Length: {}\r\n\r\n{body}",
            server.port,
            body.len()
        )
        .as_bytes(),
    )
    .unwrap();
    let start = Instant::now();
    let mut seen = Vec::new();
    let mut chunk = [0u8; 4096];
    let hold = Duration::from_secs(7);
    while start.elapsed() < hold {
        sse.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        match sse.read(&mut chunk) {
            Ok(0) => panic!(
                "the SSE stream was closed after {:?}: {}",
                start.elapsed(),
                String::from_utf8_lossy(&seen)
            ),
            Ok(n) => seen.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => panic!("the SSE stream failed after {:?}: {e}", start.elapsed()),
        }
    }
    let text = String::from_utf8_lossy(&seen);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        text.contains("notifications/subscriptions/acknowledged"),
        "{text}"
    );
}

#[test]
fn a_stalled_upload_is_aborted_with_408_and_leaves_no_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with_env(
        &dir.path().join("data"),
        &[],
        &[("VIDFORGE_BODY_IDLE_TIMEOUT", "1s")],
    );
    let mut s = connect(&server);
    // Declares 1 GB, sends 256 KiB, then stops.
    s.write_all(
        upload_head(
            &server,
            "slow.mp4",
            &[("Content-Type", "application/octet-stream")],
            1_000_000_000,
        )
        .replace("Connection: close\r\n", "")
        .as_bytes(),
    )
    .unwrap();
    s.write_all(&vec![0u8; 256 * 1024]).unwrap();
    // The upload is in progress: its temporary file exists.
    let deadline = Instant::now() + Duration::from_secs(10);
    while partial_uploads(&server).is_empty() {
        assert!(
            Instant::now() < deadline,
            "no .partial file appeared: {:?}",
            asset_dir_entries(&server)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let started = Instant::now();
    let answer = read_answer(&mut s, Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("a stalled upload was not aborted: {e}"));
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );
    let env = assert_envelope(&answer, 408, "upload_timeout");
    assert_eq!(env["temporary"], true, "{env}");
    assert!(
        answer
            .head
            .to_ascii_lowercase()
            .contains("connection: close"),
        "{}",
        answer.head
    );
    assert!(
        partial_uploads(&server).is_empty(),
        "the aborted upload left {:?}",
        partial_uploads(&server)
    );
    assert!(
        wait_closed(&mut s, Duration::from_secs(5)).is_some(),
        "the connection of an aborted upload stayed open"
    );
}

#[test]
fn connections_over_the_cap_wait_until_one_closes() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with_env(
        &dir.path().join("data"),
        &[],
        &[
            ("VIDFORGE_MAX_CONNECTIONS", "2"),
            ("VIDFORGE_HEADER_READ_TIMEOUT", "60s"),
            ("VIDFORGE_IDLE_TIMEOUT", "60s"),
        ],
    );
    // Let the readiness probe's connection go away (bounded).
    std::thread::sleep(Duration::from_millis(300));
    let healthz = format!(
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\r\n",
        server.port
    );
    // Two connections take the two places (each proves it is served).
    let mut first = connect(&server);
    first.write_all(healthz.as_bytes()).unwrap();
    assert_eq!(
        read_answer(&mut first, Duration::from_secs(10))
            .unwrap()
            .status,
        200
    );
    let mut second = connect(&server);
    second.write_all(healthz.as_bytes()).unwrap();
    assert_eq!(
        read_answer(&mut second, Duration::from_secs(10))
            .unwrap()
            .status,
        200
    );
    // A third waits: its request is not answered while both are open.
    let mut third = connect(&server);
    third.write_all(healthz.as_bytes()).unwrap();
    let early = read_answer(&mut third, Duration::from_millis(1500));
    assert!(
        early.is_err(),
        "a connection over the cap of 2 was served at once"
    );
    // One closes: the third is served.
    drop(first);
    let answer = read_answer(&mut third, Duration::from_secs(10))
        .expect("the waiting connection is served once a place is free");
    assert_eq!(answer.status, 200);
    drop(second);
}

/// One trickling upload attempt of [`trickle`]: when its head was sent (from the flood's
/// start), how long until its answer, and the answer.
#[derive(Debug)]
struct Trickled {
    sent: Duration,
    waited: Duration,
    answer: Option<RawAnswer>,
    first: bool,
}

impl std::fmt::Debug for RawAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status, self.body)
    }
}

/// The complete answer in `buf` (head, then a `Content-Length` body), if it is there; status
/// 0 when the status line is malformed.
fn parse_answer(buf: &[u8]) -> Option<RawAnswer> {
    let end = find(buf, b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&buf[..end]).to_string();
    let length = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    (buf.len() >= end + 4 + length).then(|| RawAnswer {
        status: head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
        body: String::from_utf8_lossy(&buf[end + 4..end + 4 + length]).to_string(),
        head,
    })
}

/// A client at `from` that, until `until`, opens an upload declaring 10 MB and then sends one
/// byte a second, waiting (at most `bound`) for the answer; 500 ms after each answer it tries
/// again.
async fn trickle(
    server: std::net::SocketAddr,
    from: std::net::Ipv4Addr,
    head: String,
    epoch: tokio::time::Instant,
    until: tokio::time::Instant,
    bound: Duration,
) -> Vec<Trickled> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut attempts = Vec::new();
    while tokio::time::Instant::now() < until {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind((from, 0).into())
            .expect("bind a loopback address");
        let Ok(mut s) = socket.connect(server).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let sent = tokio::time::Instant::now();
        let first = attempts.is_empty();
        let mut answer = None;
        if s.write_all(head.as_bytes()).await.is_ok() {
            let mut buf = Vec::new();
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            let give_up = tokio::time::sleep_until(sent + bound);
            tokio::pin!(give_up);
            loop {
                tokio::select! {
                    read = s.read_buf(&mut buf) => match read {
                        Ok(n) if n > 0 => {
                            if let Some(a) = parse_answer(&buf) {
                                answer = Some(a);
                                break;
                            }
                        }
                        _ => break,
                    },
                    _ = tick.tick() => {
                        let _ = s.write_all(b"x").await;
                    }
                    () = &mut give_up => break,
                }
            }
        }
        attempts.push(Trickled {
            sent: sent - epoch,
            waited: sent.elapsed(),
            answer,
            first,
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    attempts
}

/// `tools/list` over a fresh connection, answered within `limit`.
fn timed_tools_list(server: &Server, body: &str, limit: Duration) -> Result<Duration, String> {
    let start = Instant::now();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], server.port));
    let mut s = TcpStream::connect_timeout(&addr, limit).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(limit)).unwrap();
    s.write_all(
        format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {PROTOCOL}\r\n\
             Mcp-Method: tools/list\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            server.port,
            body.len()
        )
        .as_bytes(),
    )
    .map_err(|e| e.to_string())?;
    let answer = read_answer(&mut s, limit.saturating_sub(start.elapsed()))?;
    if answer.status != 200 || !answer.body.contains("vidforge_render_video") {
        return Err(format!("{} {}", answer.status, answer.body));
    }
    match start.elapsed() {
        took if took > limit => Err(format!("answered after {took:?}")),
        took => Ok(took),
    }
}

/// Trickling uploads (one byte a second against a 10 MB `Content-Length`, each byte resetting
/// the body-progress timeout) from 50 addresses cannot take the server: uploads beyond
/// `max_concurrent_uploads` are refused at once (`503` `uploads_busy`, unread), admitted ones
/// are cut off with `408` `upload_timeout` once `upload_rate_grace` is over, another client's
/// `tools/list` keeps being answered throughout, the per-address cap answers `429`, nothing
/// is left behind and a normal upload succeeds afterwards.
#[test]
fn trickling_uploads_cannot_starve_other_clients() {
    const TRICKLERS: usize = 200;
    const ADDRESSES: usize = 50;
    const SLOTS: usize = 16;
    const PER_PEER: usize = 8;
    const CALLS: usize = 50;
    let grace = Duration::from_secs(2);
    let dir = tempfile::tempdir().unwrap();
    let bytes = clip(dir.path());
    let server = Server::start_with_env(
        &dir.path().join("data"),
        &[],
        &[
            ("VIDFORGE_MAX_CONNECTIONS", "64"),
            ("VIDFORGE_MAX_CONCURRENT_UPLOADS", "16"),
            ("VIDFORGE_MAX_UPLOADS_PER_PEER", "8"),
            ("VIDFORGE_UPLOAD_MIN_RATE", "1KiB"),
            ("VIDFORGE_UPLOAD_RATE_GRACE", "2s"),
        ],
    );
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], server.port).into();
    let head = upload_head(
        &server,
        "trickle.mp4",
        &[("Content-Type", "application/octet-stream")],
        10_000_000,
    )
    .replace("Connection: close\r\n", "");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let flood = Duration::from_secs(6);
    let bound = Duration::from_secs(8);
    let epoch = tokio::time::Instant::now();
    let tasks: Vec<_> = (0..TRICKLERS)
        .map(|i| {
            let from = std::net::Ipv4Addr::new(127, 0, 0, 10 + (i % ADDRESSES) as u8);
            runtime.spawn(trickle(
                addr,
                from,
                head.clone(),
                epoch,
                epoch + flood,
                bound,
            ))
        })
        .collect();

    // Meanwhile another client lists the tools, one call every 100 ms.
    std::thread::sleep(Duration::from_millis(500));
    let mut mcp = server.mcp();
    let list = mcp
        .envelope("tools/list", json!({}), Caps::NONE)
        .to_string();
    let mut latencies = Vec::new();
    let mut failures = Vec::new();
    let calls_until = Instant::now() + flood;
    while latencies.len() + failures.len() < CALLS && Instant::now() < calls_until {
        match timed_tools_list(&server, &list, Duration::from_secs(2)) {
            Ok(d) => latencies.push(d),
            Err(e) => failures.push(e),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let attempts: Vec<Trickled> = runtime.block_on(async {
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.expect("a trickler"));
        }
        all
    });
    latencies.sort();
    let pct = |p: usize| latencies[(latencies.len() * p / 100).min(latencies.len() - 1)];
    let count = |status: u16| {
        attempts
            .iter()
            .filter(|a| a.answer.as_ref().is_some_and(|r| r.status == status))
            .count()
    };
    eprintln!(
        "trickle flood: {} tools/list answered, {} failed; p50 {:?}, p99 {:?}, max {:?}; \
         {} upload attempts: {} cut off (408), {} refused (503), {} unanswered",
        latencies.len(),
        failures.len(),
        latencies.get(latencies.len() / 2),
        latencies.last().map(|_| pct(99)),
        latencies.last(),
        attempts.len(),
        count(408),
        count(503),
        attempts.iter().filter(|a| a.answer.is_none()).count(),
    );
    assert!(
        failures.is_empty() && latencies.len() == CALLS,
        "tools/list was not answered within 2 s during the flood ({} of {CALLS} answered): {:?}",
        latencies.len(),
        failures.first()
    );
    // Every upload attempt was answered: refused at once, or cut off after the grace period.
    for a in &attempts {
        let answer = a
            .answer
            .as_ref()
            .unwrap_or_else(|| panic!("a trickling upload was never answered: {a:?}"));
        match answer.status {
            408 => {
                let env = assert_envelope(answer, 408, "upload_timeout");
                assert_eq!(env["temporary"], true, "{env}");
                assert!(
                    a.waited >= grace - Duration::from_millis(200)
                        && a.waited < grace + Duration::from_secs(3),
                    "a trickler was cut off after {:?} (grace {grace:?})",
                    a.waited
                );
            }
            503 => {
                let env = assert_envelope(answer, 503, "uploads_busy");
                assert_eq!(env["retry_after_ms"], 1000, "{env}");
                assert!(
                    answer.head.to_ascii_lowercase().contains("retry-after: 1"),
                    "{}",
                    answer.head
                );
                assert!(
                    a.waited < Duration::from_secs(1),
                    "a refusal took {:?}",
                    a.waited
                );
            }
            _ => panic!("unexpected answer to a trickling upload: {a:?}"),
        }
        assert!(
            answer
                .head
                .to_ascii_lowercase()
                .contains("connection: close"),
            "{}",
            answer.head
        );
    }
    assert!(count(408) >= SLOTS, "too few tricklers were admitted");
    assert!(count(503) >= TRICKLERS - SLOTS, "too few were refused");
    // The first wave (every trickler at once) admitted no more than the cap.
    let first_wave = attempts
        .iter()
        .filter(|a| a.first && a.sent < Duration::from_millis(500))
        .filter(|a| a.answer.as_ref().is_some_and(|r| r.status == 408))
        .count();
    assert!(first_wave <= SLOTS, "{first_wave} uploads ran at once");

    // Nothing is left behind.
    let wait_partials = |n: usize, what: &str| {
        let deadline = Instant::now() + Duration::from_secs(5);
        while partial_uploads(&server).len() != n {
            assert!(
                Instant::now() < deadline,
                "{what}: {:?}",
                partial_uploads(&server)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait_partials(0, "the flood left temporary files");

    // The per-address cap: 8 uploads from one address run (each has its temporary file), the
    // 9th is refused at once (429); another address is still admitted.
    let hold = |from: [u8; 4]| {
        let socket = runtime.block_on(async {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket
                .bind((std::net::Ipv4Addr::from(from), 0).into())
                .unwrap();
            socket.connect(addr).await.unwrap().into_std().unwrap()
        });
        socket.set_nonblocking(false).unwrap();
        let mut s = socket;
        s.write_all(head.as_bytes()).unwrap();
        s
    };
    let held: Vec<TcpStream> = (0..PER_PEER).map(|_| hold([127, 0, 0, 200])).collect();
    wait_partials(PER_PEER, "uploads under the per-address cap did not start");
    let mut over = hold([127, 0, 0, 200]);
    let answer = read_answer(&mut over, Duration::from_secs(2)).expect("refused at once");
    let env = assert_envelope(&answer, 429, "uploads_busy");
    assert_eq!(env["details"]["field"], "max_uploads_per_peer", "{env}");
    assert!(answer.head.to_ascii_lowercase().contains("retry-after: 1"));
    let other = hold([127, 0, 0, 201]);
    wait_partials(PER_PEER + 1, "another address was not admitted");
    drop(held);
    drop(other);
    wait_partials(0, "abandoned uploads left temporary files");

    // The server takes a normal upload.
    let answer = raw_request(
        &server,
        &upload_head(
            &server,
            "clip.mp4",
            &[("Content-Type", "application/octet-stream")],
            bytes.len(),
        ),
        &bytes,
    );
    assert_eq!(answer.status, 201, "{}", answer.body);
    assert!(partial_uploads(&server).is_empty());
}

/// `/healthz` tells a stranger (no token, a wrong one, any `Host`) only that the node lives,
/// never its build commit or node id; a valid token gets the details. A forged playback link's
/// refusal names no build either.
#[test]
fn healthz_and_strangers_refusals_name_neither_build_nor_node() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("data"),
        &["--token", "token-ops-1=ops", "--node-id", "node-7f3a"],
    );
    let get = |extra: &str| {
        raw_request(
            &server,
            &format!(
                "GET /healthz HTTP/1.1\r\nHost: evil.example.com\r\n{extra}Connection: close\r\n\r\n"
            ),
            b"",
        )
    };
    let answer = get("Authorization: Bearer token-ops-1\r\n");
    let details = answer.json();
    assert_eq!(details["node"], "node-7f3a", "{details}");
    let fingerprint = details["fingerprint"].as_str().unwrap().to_string();
    let sha = fingerprint.rsplit('+').next().unwrap();
    assert!(
        fingerprint.starts_with("vidforge@") && sha.len() >= 7,
        "{details}"
    );
    for stranger in ["", "Authorization: Bearer wrong-token\r\n"] {
        let answer = get(stranger);
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert_eq!(answer.json(), json!({"status": "ok"}), "{stranger:?}");
        assert!(!answer.body.contains("node-7f3a") && !answer.body.contains(sha));
    }

    let forged = raw_request(
        &server,
        &format!(
            "GET /play/task_01JVXD00000000000000000000/final.mp4?u=616c696365&x=99999999999&s=00 \
             HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
            server.port
        ),
        b"",
    );
    assert_eq!(forged.status, 403, "{}", forged.body);
    assert!(forged.json()["fingerprint"].is_null(), "{}", forged.body);
    assert!(!forged.body.contains(sha), "{}", forged.body);
}
