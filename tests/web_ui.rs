//! The pages' access rules and `/metrics` over real HTTP against a real `vidforge serve`.
//! The browser flow itself (sign in from a task's URL-mode input request, approve, reject,
//! forged POSTs, Prometheus) is `tests/browser/ui_test.py`, run by `make test` in headless
//! Chromium.

use std::time::Duration;

use reqwest::blocking::{Client, Response};
use reqwest::header::{CONTENT_TYPE, COOKIE, LOCATION, SET_COOKIE};
use serde_json::json;
mod support;
use support::*;

const FORM: &str = "application/x-www-form-urlencoded";

fn client() -> Client {
    Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(60))
        .build()
        .expect("http client")
}

/// `POST /signin`; the answer.
fn sign_in(server: &Server, token: &str, next: &str) -> Response {
    client()
        .post(format!("{}/signin", server.base()))
        .header(CONTENT_TYPE, FORM)
        .body(format!("token={token}&next={next}"))
        .send()
        .expect("POST /signin")
}

/// The `name=value` pair of the session cookie an answer sets.
fn session_cookie(resp: &Response) -> String {
    let set = resp
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("vidforge_session="))
        .expect("a session cookie is set")
        .to_string();
    assert!(set.contains("HttpOnly"), "{set}");
    assert!(set.contains("SameSite=Strict"), "{set}");
    assert!(!set.contains("Secure"), "plain http: no Secure flag: {set}");
    set.split(';').next().unwrap().to_string()
}

#[test]
fn a_session_reads_pages_but_never_writes_without_its_token() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &TWO_PRINCIPALS);
    let base = server.base();
    let http = client();

    // Signed out: the pages send the browser to sign in, coming back afterwards.
    let resp = http.get(format!("{base}/")).send().unwrap();
    assert_eq!(resp.status().as_u16(), 303);
    assert_eq!(resp.headers()[LOCATION], "/signin?next=/");
    let resp = sign_in(&server, "wrong-token-123", "/");
    assert_eq!(resp.status().as_u16(), 401);
    assert!(resp.text().unwrap().contains("id=\"error\""));

    // Signed in; `next` stays on this site: what a browser would normalise into another
    // origin (a tab or newline it strips, a backslash it reads as `/`) goes to `/`, and
    // control characters never make the answer a `500`.
    for next in [
        "//evil.example/",
        "/%09/evil.example/",
        "/%0A/evil.example/",
        "%5C%5Cevil.example",
        "/%0D%0ASet-Cookie:%20x=1",
        "/%00",
    ] {
        let resp = sign_in(&server, "token-alice-1", next);
        assert_eq!(resp.status().as_u16(), 303, "next={next}");
        assert_eq!(resp.headers()[LOCATION], "/", "next={next}");
    }
    let resp = sign_in(&server, "token-alice-1", "//evil.example/");
    let alice = session_cookie(&resp);
    assert!(!alice.contains("token-alice-1"));
    let page = http
        .get(format!("{base}/"))
        .header(COOKIE, &alice)
        .send()
        .unwrap();
    assert_eq!(page.status().as_u16(), 200);
    // Never framed (an Approve button under another site's overlay), own assets only.
    assert_eq!(page.headers()["x-frame-options"], "DENY");
    let csp = page.headers()["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("frame-ancestors 'none'") && csp.contains("default-src 'self'"));
    let page = page.text().unwrap();
    assert!(
        page.contains("id=\"renders\"") && page.contains("alice"),
        "{page}"
    );

    // The cookie reads (an unknown asset: 404, not 401) ...
    let resp = http
        .get(format!("{base}/assets/a_01M8QTNDWQTF75FBHVKSV4C6QT"))
        .header(COOKIE, &alice)
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 404);
    // ... but neither uploads nor MCP take it.
    let resp = http
        .post(format!("{base}/assets?name=x.mp4"))
        .header(COOKIE, &alice)
        .header(CONTENT_TYPE, "application/octet-stream")
        .body(vec![0u8; 16])
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 401);
    let mcp = server.mcp();
    let reply = mcp.raw(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": mcp_meta()}),
        &[
            ("Cookie".into(), alice.clone()),
            ("Mcp-Method".into(), "tools/list".into()),
        ],
    );
    assert_eq!(reply.status, 401);

    // A form without the session's CSRF token is refused; with another session's token too.
    let resp = http
        .post(format!("{base}/signout"))
        .header(COOKIE, &alice)
        .header(CONTENT_TYPE, FORM)
        .body("csrf=00ff")
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 403);
    let resp = http
        .post(format!("{base}/approvals/task_01M8QTNDWQTF75FBHVKSV4C6QT"))
        .header(COOKIE, &alice)
        .header(CONTENT_TYPE, FORM)
        .body("decision=approve")
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 403);

    // An unknown render and a tampered cookie.
    let bob = session_cookie(&sign_in(&server, "token-bob-22", "/"));
    let forged = bob.replace(&hex("bob"), &hex("alice"));
    let resp = http
        .get(format!("{base}/"))
        .header(COOKIE, &forged)
        .send()
        .unwrap();
    assert_eq!(
        resp.status().as_u16(),
        303,
        "a tampered cookie is no session"
    );
    let resp = http
        .get(format!("{base}/approvals/task_01M8QTNDWQTF75FBHVKSV4C6QT"))
        .header(COOKIE, &bob)
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 404);
    assert!(resp.text().unwrap().contains("id=\"not-found\""));
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

/// The per-request `_meta` every 2026-07-28 request carries.
fn mcp_meta() -> serde_json::Value {
    json!({"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "web-ui-test", "version": "1"}
    }})
}

#[test]
fn metrics_count_uploads_requests_and_renders() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[]);
    // Without tokens there is nothing to sign in to: `/signin` redirects at once, and only
    // to this site.
    for next in [
        "/%09/evil.example/",
        "/%0D%0A",
        "/%00",
        "/ui/fragments/renders",
    ] {
        let resp = client()
            .get(format!("{}/signin?next={next}", server.base()))
            .send()
            .unwrap();
        assert_eq!(resp.status().as_u16(), 303, "next={next}");
        let want = if next.starts_with("/ui") { next } else { "/" };
        assert_eq!(resp.headers()[LOCATION], want, "next={next}");
    }
    let clip = make_clip(dir.path(), "clip.mp4", 160, 90, 0.4, false);
    let source = upload(&server, None, &clip);
    let mut mcp = server.mcp();
    let created = mcp.tool(
        "vidforge_render_video",
        json!({"source_asset_uri": source, "output_format": "mp4", "resolution": "720p"}),
        Caps::TASKS,
    );
    let id = created.result()["taskId"].as_str().unwrap().to_string();
    mcp.wait_task(&id, Caps::TASKS, Duration::from_secs(120), |t| {
        t["status"] == "completed"
    });

    let resp = client()
        .get(format!("{}/metrics", server.base()))
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert!(
        resp.headers()[CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = resp.text().unwrap();
    for line in [
        "vidforge_uploads_total{outcome=\"created\"} 1",
        "vidforge_renders_created_total 1",
        "vidforge_renders_finished_total{state=\"succeeded\",outcome=\"succeeded\"} 1",
        "vidforge_renders{state=\"queued\"} 0",
        "vidforge_workers_busy 0",
        "vidforge_mcp_requests_total{method=\"tools/call\",status=\"200\"} 1",
    ] {
        assert!(text.contains(line), "missing `{line}` in:\n{text}");
    }
    for series in [
        "vidforge_render_duration_seconds_bucket{",
        "vidforge_render_fps_bucket{",
        "vidforge_http_request_duration_seconds_bucket{",
        "vidforge_store_flush_seconds_bucket{backend=\"sled\"",
        "vidforge_stage_busy_seconds_bucket{stage=\"encode\"",
    ] {
        assert!(text.contains(series), "missing `{series}` in:\n{text}");
    }
}

/// One of this machine's own IPv4 addresses that is not loopback (from the kernel's local
/// routing table): connecting to it from here makes the peer a non-loopback address.
fn non_loopback_ipv4() -> String {
    let trie = std::fs::read_to_string("/proc/net/fib_trie").expect("/proc/net/fib_trie");
    let mut last = "";
    for line in trie.lines() {
        if let Some(addr) = line.trim().strip_prefix("|-- ") {
            last = addr;
        } else if line.trim() == "/32 host LOCAL" && !last.starts_with("127.") {
            return last.to_string();
        }
    }
    panic!("this test needs a non-loopback IPv4 address on this machine:\n{trie}");
}

#[test]
fn metrics_from_another_address_need_an_admin_token() {
    let dir = tempfile::tempdir().unwrap();
    let mut extra = TWO_PRINCIPALS.to_vec();
    extra.extend(["--admin", "alice"]);
    let mut server = Server::start_listening_on("0.0.0.0", &dir.path().join("data"), &extra);
    let remote = format!("http://{}:{}/metrics", non_loopback_ipv4(), server.port);
    let local = format!("{}/metrics", server.base());
    let status = |url: &str, token: Option<&str>| {
        let mut req = client().get(url);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().expect("GET /metrics");
        (resp.status().as_u16(), resp.text().unwrap_or_default())
    };

    assert_eq!(status(&remote, None).0, 401);
    let (code, body) = status(&remote, Some("token-bob-22"));
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("only admins"), "{body}");
    let (code, body) = status(&remote, Some("token-alice-1"));
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("# TYPE vidforge_queue_depth gauge"), "{body}");
    // Loopback needs nothing; a wrong token from elsewhere is still refused.
    assert_eq!(status(&local, None).0, 200);
    assert_eq!(status(&remote, Some("not-a-token-000")).0, 401);

    // metrics_public opens it to every address.
    server.args.push("--metrics-public".to_string());
    server.restart();
    assert_eq!(status(&remote, None).0, 200);
}

#[test]
fn url_mode_offers_the_approval_page_and_only_a_decline_decides() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[]);
    let clip = make_clip(dir.path(), "clip.mp4", 160, 90, 0.4, false);
    let source = upload(&server, None, &clip);
    let logo = upload(&server, None, &make_logo(dir.path()));
    let mut mcp = server.mcp();
    let created = mcp.tool(
        "vidforge_render_video",
        json!({"source_asset_uri": source, "output_format": "mp4", "resolution": "720p",
               "watermark": {"image_asset_uri": logo, "position": "bottom_right", "opacity": 0.5}}),
        Caps::TASKS_URL,
    );
    let id = created.result()["taskId"].as_str().unwrap().to_string();
    let wait = Duration::from_secs(120);
    let waiting = mcp.wait_task(&id, Caps::TASKS_URL, wait, |t| {
        t["status"] == "input_required"
    });
    // Only the declared mode: the page in URL mode, no form; exactly the 2026-07-28 fields.
    let page = format!("{}/approvals/{id}", server.base());
    let requests = waiting["inputRequests"].as_object().unwrap();
    assert_eq!(
        requests.keys().collect::<Vec<_>>(),
        ["watermark-approval-page-1"]
    );
    let params = &requests["watermark-approval-page-1"]["params"];
    assert_eq!(params["mode"], "url");
    assert_eq!(params["url"], page.as_str());
    assert_eq!(params.as_object().unwrap().len(), 3, "{params}");
    assert!(waiting["statusMessage"].as_str().unwrap().contains(&page));

    // `accept` only says the user opened the page: still waiting.
    let answer = |action: &str| json!({"taskId": id, "inputResponses": {"watermark-approval-page-1": {"action": action}}});
    let reply = mcp.call("tasks/update", answer("accept"), Caps::TASKS_URL);
    assert_eq!(reply.result()["resultType"], "complete");
    let still = mcp.task_get(&id, Caps::TASKS_URL);
    assert_eq!(still.result()["status"], "input_required");
    // `decline` rejects, as in form mode.
    mcp.call("tasks/update", answer("decline"), Caps::TASKS_URL);
    let done = mcp.wait_task(&id, Caps::TASKS_URL, wait, |t| t["status"] == "completed");
    assert_eq!(done["result"]["isError"], true);
    assert_eq!(
        done["result"]["structuredContent"]["code"],
        "watermark_rejected"
    );
}

/// Sign-out ends the session for good: the old cookie is refused by the pages, the live
/// fragments and the downloads, also after the server is killed (`kill -9`) and started again
/// on the same data dir, while another principal's session lives on. An idle session ends
/// after `session_idle_timeout`; a used one slides (its cookie is re-issued by the pages, not
/// by the polled fragments) until `session_max_age`.
#[test]
fn signing_out_ends_the_session_everywhere_and_idle_sessions_expire() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(&dir.path().join("data"), &TWO_PRINCIPALS);
    let http = client();
    let get = |server: &Server, path: &str, cookie: &str| {
        http.get(format!("{}{path}", server.base()))
            .header(COOKIE, cookie)
            .send()
            .unwrap()
    };
    let signed_out = |server: &Server, cookie: &str, why: &str| {
        let page = get(server, "/", cookie);
        assert_eq!(page.status().as_u16(), 303, "{why}");
        assert_eq!(page.headers()[LOCATION], "/signin?next=/", "{why}");
        let status = |path: &str| get(server, path, cookie).status().as_u16();
        assert_eq!(status("/ui/fragments/renders"), 401, "{why}");
        assert_eq!(status("/assets/a_01M8QTNDWQTF75FBHVKSV4C6QT"), 401, "{why}");
    };
    let signed_in = |server: &Server, cookie: &str, why: &str| {
        let page = get(server, "/", cookie);
        assert_eq!(page.status().as_u16(), 200, "{why}");
        page
    };
    // The re-issued session cookie of an answer, if any.
    let renewed = |resp: &Response| {
        resp.headers()
            .get_all(SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find(|v| v.starts_with("vidforge_session="))
            .map(|v| v.split(';').next().unwrap().to_string())
    };

    let alice = session_cookie(&sign_in(&server, "token-alice-1", "/"));
    let bob = session_cookie(&sign_in(&server, "token-bob-22", "/"));
    let page = signed_in(&server, &alice, "signed in").text().unwrap();
    assert_eq!(get(&server, "/ui/fragments/renders", &alice).status(), 200);
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the page's sign-out form carries the CSRF token")
        .to_string();
    let resp = http
        .post(format!("{}/signout", server.base()))
        .header(COOKIE, &alice)
        .header(CONTENT_TYPE, FORM)
        .body(format!("csrf={csrf}"))
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 303);
    assert_eq!(resp.headers()[LOCATION], "/signin");
    assert_eq!(renewed(&resp).as_deref(), Some("vidforge_session="));
    // A copy of the old cookie (another tab, a thief) is refused, not just forgotten here.
    signed_out(&server, &alice, "the cookie of a signed-out session");
    signed_in(&server, &bob, "another principal stays signed in");
    // Killed without a goodbye and started again: still refused; bob's cookie still works,
    // so it is the sign-out that ends alice's, not the restart.
    server.restart();
    signed_out(&server, &alice, "signed out, after a restart");
    signed_in(&server, &bob, "a session survives a restart");

    // Short lifetimes: idle 2 s, at most 5 s.
    server
        .args
        .extend(["--session-idle-timeout", "2s", "--session-max-age", "5s"].map(String::from));
    server.restart();
    let start = std::time::Instant::now();
    let at = |secs: f64| {
        let due = start + Duration::from_secs_f64(secs);
        std::thread::sleep(due.saturating_duration_since(std::time::Instant::now()));
    };
    let first = session_cookie(&sign_in(&server, "token-alice-1", "/"));
    at(1.2);
    let used = renewed(&signed_in(&server, &first, "used after 1.2 s"))
        .expect("a page re-issues a cookie used after a quarter of the idle timeout");
    at(2.4);
    signed_out(&server, &first, "unused for 2.4 s > the 2 s idle timeout");
    let fragment = get(&server, "/ui/fragments/renders", &used);
    assert_eq!(fragment.status().as_u16(), 200);
    assert_eq!(renewed(&fragment), None, "polling is not using the pages");
    let used = renewed(&signed_in(&server, &used, "used 1.2 s ago")).expect("re-issued");
    at(3.6);
    let used = renewed(&signed_in(&server, &used, "used 1.2 s ago")).expect("re-issued");
    at(5.2);
    signed_out(
        &server,
        &used,
        "5.2 s after sign-in > the 5 s cap, used 1.6 s ago",
    );
}
