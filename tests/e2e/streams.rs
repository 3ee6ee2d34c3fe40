//! Long-lived answers on `/mcp` against a real server: `subscriptions/listen` streams and
//! legacy sessions' `GET` streams share one budget per principal and per node, so at default
//! settings a flood of either leaves `/healthz` and another principal answered within a
//! second, and a refused stream gives its connection back at once; a stream's lifetime
//! (`stream_max_lifetime`) ends a listen cleanly with its final result, and a legacy stream.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::support::*;
use serde_json::{Value, json};

const ALICE: &str = "token-alice-1";
const BOB: &str = "token-bob-22";

/// The test holds a socket per stream, the server one per connection: raise the soft limit.
fn raise_open_files() {
    // SAFETY: getrlimit/setrlimit with a valid struct.
    unsafe {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < 4096 {
            lim.rlim_cur = lim.rlim_max.min(4096);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// Five rounds of `/healthz` and bob's `tools/list`, each answered within a second.
fn others_are_answered(server: &Server, what: &str) {
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    for round in 0..5 {
        let asked = Instant::now();
        let health = client.get(format!("{}/healthz", server.base())).send();
        assert!(
            health.as_ref().is_ok_and(|r| r.status() == 200),
            "{what}, round {round}: /healthz not answered within 1 s: {health:?}"
        );
        let body = Mcp::new(&server.base()).envelope("tools/list", json!({}), Caps::NONE);
        let reply = client
            .post(format!("{}/mcp", server.base()))
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", PROTOCOL)
            .header("Mcp-Method", "tools/list")
            .bearer_auth(BOB)
            .body(body.to_string())
            .send();
        assert!(
            reply.as_ref().is_ok_and(|r| r.status() == 200),
            "{what}, round {round}: bob's tools/list not answered within 1 s: {reply:?}"
        );
        eprintln!(
            "streams: {what}, round {round}: /healthz and bob's tools/list in {} ms",
            asked.elapsed().as_millis()
        );
    }
}

/// Reads `socket` for up to 2 s: until the status line when `to_end` is false, else until the
/// server closes it. What was read, and whether it was closed.
fn read_for(socket: &mut TcpStream, to_end: bool) -> (String, bool) {
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 2048];
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        match socket.read(&mut buf) {
            Ok(0) => return (String::from_utf8_lossy(&seen).into_owned(), true),
            Ok(n) => seen.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return (String::from_utf8_lossy(&seen).into_owned(), true),
        }
        if !to_end && seen.windows(2).any(|w| w == b"\r\n") {
            break;
        }
    }
    (String::from_utf8_lossy(&seen).into_owned(), false)
}

/// At default settings, one principal opening 32 legacy sessions and 33 streams on each
/// (1,056 `GET`s, what an SDK that reopens streams does at scale) holds one stream per session,
/// so another principal's `tools/list` and `/healthz` are answered within a second, and the
/// flood's own requests still work.
#[test]
fn a_legacy_stream_flood_leaves_room_for_everyone_else() {
    raise_open_files();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &TWO_PRINCIPALS);
    let mut sessions = Vec::new();
    for _ in 0..32 {
        let mut alice = Legacy::new(&server, Some(ALICE));
        assert_eq!(alice.initialize("2025-11-25", json!({})).status, 200);
        sessions.push(alice);
    }
    let mut sockets = Vec::new();
    for _ in 0..33 {
        for alice in &sessions {
            let mut socket = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
            write!(
                socket,
                "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: text/event-stream\r\n\
                 Authorization: Bearer {ALICE}\r\nMcp-Session-Id: {}\r\n\
                 MCP-Protocol-Version: 2025-11-25\r\n\r\n",
                server.port,
                alice.session.as_deref().unwrap()
            )
            .unwrap();
            sockets.push(socket);
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    others_are_answered(&server, "legacy GET flood");
    // The flood's own sessions still work.
    assert_eq!(sessions[0].request("ping", json!({})).status, 200);
    drop(sockets);
}

/// At default settings, one principal opening 1,100 `subscriptions/listen` streams (for a
/// made-up task) gets 64 (`max_connections / 16`); the rest are refused at once (`429`) and
/// their connections closed, so another principal's `tools/list` and `/healthz` are answered
/// within a second. (Before: 1,024 accepted, every connection of the node taken, nobody else
/// answered at 5 s.)
#[test]
fn a_listen_flood_leaves_room_for_everyone_else() {
    raise_open_files();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &TWO_PRINCIPALS);
    let mut alice = Mcp::new(&server.base());
    let mut sockets = Vec::new();
    let started = Instant::now();
    for _ in 0..1100 {
        let body = alice
            .envelope(
                "subscriptions/listen",
                json!({"notifications": {"taskIds": ["task_01JVXD00000000000000000000"]}}),
                Caps::TASKS,
            )
            .to_string();
        let mut socket = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        write!(
            socket,
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {PROTOCOL}\r\n\
             Mcp-Method: subscriptions/listen\r\nAuthorization: Bearer {ALICE}\r\n\
             Content-Length: {}\r\n\r\n{body}",
            server.port,
            body.len()
        )
        .unwrap();
        sockets.push(socket);
    }
    eprintln!(
        "streams: 1,100 listens sent in {:.2} s",
        started.elapsed().as_secs_f64()
    );
    std::thread::sleep(Duration::from_millis(500));
    others_are_answered(&server, "listen flood");
    let (mut open, mut refused) = (0, 0);
    for socket in &mut sockets {
        let (head, _) = read_for(socket, false);
        match head.split(' ').nth(1) {
            Some("200") => open += 1,
            Some("429") => {
                refused += 1;
                assert!(
                    read_for(socket, true).1,
                    "a refused listen's connection stays open"
                );
            }
            _ => panic!("a listen got {head:?}"),
        }
    }
    assert_eq!((open, refused), (64, 1036));
}

/// A listen ends cleanly after `stream_max_lifetime` with its final result (its
/// `subscriptionId`, `resultType: complete`), and so does a legacy session's `GET` stream.
#[test]
fn streams_end_cleanly_after_their_lifetime() {
    let dir = tempfile::tempdir().unwrap();
    let mut flags = TWO_PRINCIPALS.to_vec();
    flags.extend(["--stream-max-lifetime", "1s"]);
    let server = Server::start(&dir.path().join("data"), &flags);
    let mut alice = Mcp::new(&server.base()).with_token(ALICE);
    let body = alice.envelope(
        "subscriptions/listen",
        json!({"notifications": {"taskIds": ["task_01JVXD00000000000000000000"]}}),
        Caps::TASKS,
    );
    let opened = Instant::now();
    let mut listen = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
        .post(format!("{}/mcp", server.base()))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", PROTOCOL)
        .header("Mcp-Method", "subscriptions/listen")
        .bearer_auth(ALICE)
        .body(body.to_string())
        .send()
        .unwrap();
    assert_eq!(listen.status().as_u16(), 200);
    let mut text = String::new();
    listen
        .read_to_string(&mut text)
        .expect("the listen stream ends");
    let lasted = opened.elapsed();
    let messages: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect();
    let last = messages.last().expect("messages on the stream");
    assert_eq!(last["id"], body["id"], "{text}");
    assert_eq!(last["result"]["resultType"], "complete", "{text}");
    assert_eq!(
        last["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"], body["id"],
        "{text}"
    );
    assert!(
        lasted >= Duration::from_millis(900) && lasted < Duration::from_secs(4),
        "the listen lasted {lasted:?}"
    );

    let mut legacy = Legacy::new(&server, Some(ALICE));
    assert_eq!(legacy.initialize("2025-11-25", json!({})).status, 200);
    let opened = Instant::now();
    let mut stream = legacy.stream();
    let mut sink = Vec::new();
    stream
        .read_to_end(&mut sink)
        .expect("the legacy stream ends");
    let lasted = opened.elapsed();
    assert!(
        lasted >= Duration::from_millis(900) && lasted < Duration::from_secs(4),
        "the legacy stream lasted {lasted:?}"
    );
    assert_eq!(legacy.request("ping", json!({})).status, 200);
}
