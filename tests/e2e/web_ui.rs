//! The pages' access rules and `/metrics` over real HTTP against a real `vidforge serve`.
//! The browser flow itself (sign in from a task's URL-mode input request, approve, reject,
//! forged POSTs, Prometheus) is `tests/browser/ui_test.py`, run by `make test` in headless
//! Chromium.

use std::time::Duration;

use crate::support;
use crate::support::*;
use reqwest::blocking::{Client, Response};
use reqwest::header::{CONTENT_TYPE, COOKIE, LOCATION, SET_COOKIE};
use serde_json::json;

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
    assert!(
        body.contains("insufficient_scope") && body.contains("vidforge:admin"),
        "{body}"
    );
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

/// The `name=value` of cookie `name` an answer sets, and its attributes.
fn set_cookie_named(resp: &Response, name: &str) -> Option<String> {
    resp.headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .map(str::to_string)
}

/// With an OAuth browser client configured, the pages sign in through the authorization
/// server (a real one: `oidc-provider`, tests/support/oauth.rs) by the authorization-code flow
/// with PKCE: `/oauth/login` → the authorization server (automatic sign-in and consent) →
/// `/oauth/callback` → a session of `ISSUER#SUB` that opens the approval page of a render that
/// principal created with its JWT, and approves it. A forged or missing `state`, an
/// `access_denied`, a replayed code: a page saying so, nobody signed in.
#[test]
fn pages_sign_in_through_the_authorization_server() {
    use support::oauth::*;
    let started = std::time::Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let callback = format!("http://127.0.0.1:{port}/oauth/callback");
    let auth = AuthServer::start(&format!("http://127.0.0.1:{port}/mcp"), &[&callback]);
    let issuer = auth.issuer();
    let server = Server::start_on_port(
        port,
        &dir.path().join("data"),
        &[
            "--oauth-issuer",
            &issuer,
            "--oauth-browser-client-id",
            BROWSER_CLIENT_ID,
            "--oauth-browser-client-secret",
            BROWSER_CLIENT_SECRET,
            "--token",
            "static-token-1=static",
        ],
    );
    let base = server.base();
    let http = client();

    // A render of `ISSUER#vidforge-tests` (a client-credentials token's `sub` is the client
    // id), waiting for its watermark's approval.
    let jwt = auth.token(
        CLIENT_ID,
        CLIENT_SECRET,
        &format!("{SCOPE_RENDER} {SCOPE_READ}"),
        &format!("{base}/mcp"),
    );
    let clip = make_clip(dir.path(), "clip.mp4", 160, 90, 0.4, false);
    let source = upload(&server, Some(&jwt), &clip);
    let logo = upload(&server, Some(&jwt), &make_logo(dir.path()));
    let mut mcp = server.mcp().with_token(&jwt);
    let created = mcp.tool(
        "vidforge_render_video",
        json!({"source_asset_uri": source, "output_format": "mp4", "resolution": "720p",
               "watermark": {"image_asset_uri": logo, "position": "bottom_right", "opacity": 0.5}}),
        Caps::TASKS_URL,
    );
    let id = created.result()["taskId"].as_str().unwrap().to_string();
    let wait = Duration::from_secs(120);
    mcp.wait_task(&id, Caps::TASKS_URL, wait, |t| {
        t["status"] == "input_required"
    });
    let page = format!("/approvals/{id}");

    // The sign-in page offers the authorization server beside the token form.
    let signin = http
        .get(format!("{base}/signin?next={page}"))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(
        signin.contains(&format!("Sign in with {issuer}")),
        "{signin}"
    );
    assert!(
        signin.contains(&format!("href=\"/oauth/login?next={page}\"")),
        "{signin}"
    );
    assert!(
        signin.contains("id=\"signin\""),
        "the token form stays: {signin}"
    );

    // `/oauth/login`: to the authorization endpoint, with PKCE S256, state and resource; the
    // verifier only in the flow cookie.
    let login = |next: &str| {
        let resp = http
            .get(format!("{base}/oauth/login?next={next}"))
            .send()
            .unwrap();
        assert_eq!(resp.status().as_u16(), 303, "{}", server.log());
        let to = reqwest::Url::parse(resp.headers()[LOCATION].to_str().unwrap()).unwrap();
        let flow = set_cookie_named(&resp, "vidforge_oauth_flow").expect("a flow cookie");
        for attr in ["HttpOnly", "SameSite=Lax", "Path=/oauth", "Max-Age=600"] {
            assert!(flow.contains(attr), "{flow}");
        }
        let flow = flow.split(';').next().unwrap().to_string();
        (to, flow)
    };
    let (to, flow) = login(&page);
    assert_eq!(to.origin().ascii_serialization(), issuer);
    let q: std::collections::HashMap<String, String> = to.query_pairs().into_owned().collect();
    assert_eq!(q["response_type"], "code");
    assert_eq!(q["client_id"], BROWSER_CLIENT_ID);
    assert_eq!(q["redirect_uri"], callback);
    assert_eq!(q["resource"], format!("{base}/mcp"));
    assert_eq!(q["code_challenge_method"], "S256");
    assert_eq!(q["scope"], format!("openid {SCOPE_RENDER} {SCOPE_READ}"));
    assert!(
        q["code_challenge"].len() == 43 && q["state"].len() >= 43,
        "{q:?}"
    );
    assert!(!q.contains_key("code_verifier"));
    let state = q["state"].clone();

    // A callback whose state is not this browser's, or with no flow at all: refused.
    let callback_with = |query: &str, flow: Option<&str>| {
        let mut req = http.get(format!("{base}/oauth/callback?{query}"));
        if let Some(f) = flow {
            req = req.header(COOKIE, f);
        }
        req.send().unwrap()
    };
    for (query, flow) in [
        ("code=forged&state=forged".to_string(), Some(flow.as_str())),
        (format!("code=forged&state={state}"), None),
        (
            format!("code=forged&state={state}"),
            Some("vidforge_oauth_flow=1.a.b.2f.00"),
        ),
    ] {
        let resp = callback_with(&query, flow);
        assert_eq!(resp.status().as_u16(), 400, "{query} {flow:?}");
        assert!(set_cookie_named(&resp, "vidforge_session").is_none());
    }

    // The authorization server: its automatic sign-in (as the account `login_hint` names) and
    // consent, its own redirects followed with its cookies, until it sends the browser back.
    let mut at = format!("{to}&login_hint=vidforge-tests");
    let mut jar: Vec<String> = Vec::new();
    let back = loop {
        assert!(jar.len() < 40, "too many hops at the authorization server");
        let mut req = http.get(&at);
        if !jar.is_empty() {
            req = req.header(COOKIE, jar.join("; "));
        }
        let resp = req.send().unwrap();
        for v in resp.headers().get_all(SET_COOKIE) {
            let pair = v.to_str().unwrap().split(';').next().unwrap().to_string();
            let name = pair.split('=').next().unwrap().to_string();
            jar.retain(|c| !c.starts_with(&format!("{name}=")));
            jar.push(pair);
        }
        assert!(
            resp.status().is_redirection(),
            "{at}: {} {}\n{}",
            resp.status(),
            resp.text().unwrap_or_default(),
            auth.log()
        );
        let next = resp.headers()[LOCATION].to_str().unwrap().to_string();
        let next = if next.starts_with('/') {
            format!("{issuer}{next}")
        } else {
            next
        };
        if next.starts_with(&callback) {
            break next;
        }
        at = next;
    };
    let back = back.split_once('?').unwrap().1.to_string();
    assert!(back.contains(&format!("state={state}")), "{back}");

    // The callback: signed in as ISSUER#vidforge-tests, back to the approval page.
    let resp = callback_with(&back, Some(&flow));
    assert_eq!(resp.status().as_u16(), 303, "{}", server.log());
    assert_eq!(resp.headers()[LOCATION], page.as_str());
    let cleared = set_cookie_named(&resp, "vidforge_oauth_flow").unwrap();
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
    let session = session_cookie(&resp);
    let approval = http
        .get(format!("{base}{page}"))
        .header(COOKIE, &session)
        .send()
        .unwrap();
    assert_eq!(approval.status().as_u16(), 200);
    let html = approval.text().unwrap();
    assert!(html.contains(&format!("{issuer}#vidforge-tests")), "{html}");
    let csrf = html
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the approval form carries the CSRF token")
        .to_string();
    let resp = http
        .post(format!("{base}{page}"))
        .header(COOKIE, &session)
        .header(CONTENT_TYPE, FORM)
        .body(format!("csrf={csrf}&decision=approve"))
        .send()
        .unwrap();
    assert_eq!(
        resp.status().as_u16(),
        303,
        "{}",
        resp.text().unwrap_or_default()
    );
    mcp.wait_task(&id, Caps::TASKS_URL, wait, |t| {
        t["status"] != "input_required"
    });

    // The same code again (a replayed callback): the authorization server refuses it.
    let resp = callback_with(&back, Some(&flow));
    assert_eq!(resp.status().as_u16(), 401);
    assert!(set_cookie_named(&resp, "vidforge_session").is_none());
    // The person declines at the authorization server: a page saying so, nobody signed in.
    let (to, flow) = login("/");
    let q: std::collections::HashMap<String, String> = to.query_pairs().into_owned().collect();
    let resp = callback_with(
        &format!("error=access_denied&state={}", q["state"]),
        Some(&flow),
    );
    assert_eq!(resp.status().as_u16(), 401);
    assert!(set_cookie_named(&resp, "vidforge_session").is_none());
    assert!(resp.text().unwrap().contains("access_denied"));
    eprintln!(
        "browser OAuth sign-in test: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
