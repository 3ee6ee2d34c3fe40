//! vidforge as an OAuth 2.1 resource server, end to end: the real binary against a real
//! authorization server (`oidc-provider`, tests/support/oauth.rs). Protected resource
//! metadata, the `401` challenges, a render with an OAuth token beside a static token, every
//! refusal the issue lists (each `401 invalid_token` for its own reason), scopes (`403
//! insufficient_scope` step-up challenges) and subjects, key rotation without a restart, and
//! the authorization server going down.
//!
//! An unknown `kid` makes vidforge fetch the issuer's keys again at most once per 30 s (and
//! it fetches them once at start-up), so the steps that need a fetch wait for that window:
//! [`resource_server_end_to_end`] rotates keys 31 s after its server's start-up fetch, and
//! [`authorization_server_down`] (its own servers, in parallel) tries a fetch with the issuer
//! down 31 s after its own. Everything else shares one vidforge server.

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

use crate::support::oauth::*;
use crate::support::*;

const WAIT: Duration = Duration::from_secs(120);
/// vidforge's minimum interval between two fetches of an issuer's keys (30 s), plus margin.
const REFETCH_GAP: Duration = Duration::from_secs(31);
const STATIC_TOKEN: &str = "static-token";
const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// An authorization server and a vidforge server that trusts it (and a static token).
struct Site {
    dir: tempfile::TempDir,
    auth: AuthServer,
    server: Server,
    /// When the server's start-up fetch of the issuer's keys had finished.
    keys_fetched: Instant,
}

impl Site {
    /// The vidforge port is chosen first: the tokens' audience names it.
    fn start() -> Site {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let auth = AuthServer::start(&format!("http://127.0.0.1:{port}/mcp"), &[]);
        let issuer = auth.issuer();
        let server = Server::start_on_port(
            port,
            &dir.path().join("data"),
            &[
                "--oauth-issuer",
                &issuer,
                "--token",
                &format!("{STATIC_TOKEN}=static"),
            ],
        );
        let keys_fetched = wait_for_log(&server, "OAuth issuer keys fetched");
        Site {
            dir,
            auth,
            server,
            keys_fetched,
        }
    }

    fn base(&self) -> String {
        self.server.base()
    }

    fn resource(&self) -> String {
        format!("{}/mcp", self.base())
    }

    fn metadata_url(&self) -> String {
        format!("{}{METADATA_PATH}/mcp", self.base())
    }

    fn token(&self, scope: &str) -> String {
        self.auth
            .token(CLIENT_ID, CLIENT_SECRET, scope, &self.resource())
    }

    fn mcp(&self, token: &str) -> Mcp {
        Mcp::new(&self.base()).with_token(token)
    }

    /// `tools/list` with this bearer token (none: no `Authorization`).
    fn list_tools(&self, token: Option<&str>) -> WireReply {
        let body = Mcp::new(&self.base()).envelope("tools/list", json!({}), Caps::NONE);
        post_wire(
            &self.resource(),
            token,
            &[
                ("MCP-Protocol-Version", PROTOCOL),
                ("Mcp-Method", "tools/list"),
            ],
            &body,
        )
    }

    /// A `tools/call` with this token, its headers kept.
    fn call_tool(&self, token: &str, name: &str, arguments: Value, caps: Caps) -> WireReply {
        let body = Mcp::new(&self.base()).envelope(
            "tools/call",
            json!({ "name": name, "arguments": arguments }),
            caps,
        );
        post_wire(
            &self.resource(),
            Some(token),
            &[
                ("MCP-Protocol-Version", PROTOCOL),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", name),
            ],
            &body,
        )
    }

    /// A tasks-extension request (`tasks/get`, `tasks/update`, `tasks/cancel`) with this token.
    fn task_request(&self, token: &str, method: &str, params: Value) -> WireReply {
        let task_id = params["taskId"].as_str().unwrap_or_default().to_string();
        let body = Mcp::new(&self.base()).envelope(method, params, Caps::TASKS);
        post_wire(
            &self.resource(),
            Some(token),
            &[
                ("MCP-Protocol-Version", PROTOCOL),
                ("Mcp-Method", method),
                ("Mcp-Name", &task_id),
            ],
            &body,
        )
    }

    /// Asserts that `token` is refused on `/mcp` with `401 invalid_token` whose description
    /// names `why`.
    fn assert_refused(&self, what: &str, token: &str, why: &str) {
        let reply = self.list_tools(Some(token));
        assert_eq!(reply.status, 401, "{what}: {}", brief(&reply));
        let challenge = challenge_of(&reply.headers, what);
        self.assert_challenge(&challenge, Some("invalid_token"), SCOPE_RENDER, what);
        let description = challenge
            .get("error_description")
            .cloned()
            .unwrap_or_default();
        assert!(
            description.contains(why),
            "{what}: refused for another reason: {description:?} (expected {why:?})"
        );
    }

    fn assert_accepted(&self, what: &str, token: &str) {
        let reply = self.list_tools(Some(token));
        assert_eq!(reply.status, 200, "{what}: {}", brief(&reply));
        assert!(reply.result()["tools"].as_array().is_some(), "{what}");
    }

    /// The challenge names the metadata and the scope; `error` as given (none: no `error`).
    fn assert_challenge(
        &self,
        challenge: &HashMap<String, String>,
        error: Option<&str>,
        scope: &str,
        what: &str,
    ) {
        assert_eq!(
            challenge.get("resource_metadata"),
            Some(&self.metadata_url()),
            "{what}: {challenge:?}"
        );
        assert_eq!(
            challenge.get("scope").map(String::as_str),
            Some(scope),
            "{what}: {challenge:?}"
        );
        assert_eq!(
            challenge.get("error").map(String::as_str),
            error,
            "{what}: {challenge:?}"
        );
    }
}

/// An answer's status, challenge and the start of its body, for failure messages.
fn brief(reply: &WireReply) -> String {
    let body = reply.body.to_string();
    format!(
        "HTTP {}, WWW-Authenticate {:?}, body {}",
        reply.status,
        reply.header("www-authenticate"),
        body.chars().take(300).collect::<String>()
    )
}

/// Waits (bounded) until the server's log has `line`; when it was seen.
fn wait_for_log(server: &Server, line: &str) -> Instant {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !server.log().contains(line) {
        assert!(
            Instant::now() < deadline,
            "no {line:?} in the log within 10 s:\n{}",
            server.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Instant::now()
}

/// The parameters of a `WWW-Authenticate: Bearer` challenge (the scheme checked).
fn challenge_of(headers: &reqwest::header::HeaderMap, what: &str) -> HashMap<String, String> {
    let value = headers
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("{what}: no WWW-Authenticate in {headers:?}"));
    let mut rest = value
        .strip_prefix("Bearer ")
        .unwrap_or_else(|| panic!("{what}: not a Bearer challenge: {value}"));
    let mut params = HashMap::new();
    while let Some((key, after)) = rest.split_once("=\"") {
        let (val, tail) = after
            .split_once('"')
            .unwrap_or_else(|| panic!("{what}: unterminated value in {value}"));
        params.insert(key.trim().to_string(), val.to_string());
        rest = tail.trim_start_matches(',').trim_start();
    }
    params
}

/// A plain HTTP answer: status, headers and the JSON body (or the text as a string).
struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Value,
}

fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("http client")
}

fn send(req: reqwest::blocking::RequestBuilder) -> Answer {
    let resp = req.send().expect("HTTP request");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let bytes = resp.bytes().unwrap_or_default();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(format!("<{} bytes>", bytes.len())));
    Answer {
        status,
        headers,
        body,
    }
}

fn get(url: &str, token: Option<&str>) -> Answer {
    let mut req = client().get(url);
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    send(req)
}

fn post_asset(base: &str, token: Option<&str>, path: &Path) -> Answer {
    let mut req = client()
        .post(format!("{base}/assets?name=clip.mp4"))
        .header("Content-Type", "application/octet-stream")
        .body(std::fs::read(path).expect("read upload"));
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    send(req)
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// The claims of a (real) token, unverified: the starting point of forged ones.
fn claims_of(token: &str) -> Value {
    let payload = token.split('.').nth(1).expect("a JWT payload");
    serde_json::from_slice(&B64.decode(payload).expect("base64url payload")).expect("JSON claims")
}

/// A token signed with `key` (RS256 with a PEM private key, or HS256 with a secret) and
/// this `kid`, `typ: at+jwt`.
fn forge(claims: &Value, alg: Algorithm, key: &EncodingKey, kid: &str) -> String {
    let mut header = Header::new(alg);
    header.typ = Some("at+jwt".into());
    header.kid = Some(kid.into());
    jsonwebtoken::encode(&header, claims, key).expect("encode a JWT")
}

fn rsa_key(pem: &str) -> EncodingKey {
    EncodingKey::from_rsa_pem(pem.as_bytes()).expect("the authorization server's RSA key")
}

/// `tools/list`, a render, downloads, uploads, scopes, subjects and every refusal on one
/// server, then key rotation once vidforge may fetch keys again.
#[test]
fn resource_server_end_to_end() {
    let started = Instant::now();
    let mut site = Site::start();
    let base = site.base();
    eprintln!(
        "oauth: servers up in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // 1. Protected resource metadata: both paths, no token, the policy still applies.
    for path in [METADATA_PATH.to_string(), format!("{METADATA_PATH}/mcp")] {
        let doc = get(&format!("{base}{path}"), None);
        assert_eq!(doc.status, 200, "{path}: {}", doc.body);
        let doc = doc.body;
        assert_eq!(doc["resource"], site.resource(), "{path}: {doc}");
        assert_eq!(
            doc["authorization_servers"],
            json!([site.auth.issuer()]),
            "{doc}"
        );
        assert_eq!(doc["bearer_methods_supported"], json!(["header"]), "{doc}");
        let scopes = doc["scopes_supported"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for scope in [SCOPE_RENDER, SCOPE_READ, SCOPE_ADMIN] {
            assert!(scopes.contains(&json!(scope)), "{path}: {doc}");
        }
        let foreign = send(
            client()
                .get(format!("{base}{path}"))
                .header("Host", "evil.example.com"),
        );
        assert_eq!(
            foreign.status, 403,
            "{path} with a foreign Host: {}",
            foreign.body
        );
        assert_eq!(
            foreign.body["code"], "request_forbidden",
            "{}",
            foreign.body
        );
    }

    // 2. No token: 401 with the challenge that leads a client to the metadata.
    let no_token = site.list_tools(None);
    assert_eq!(no_token.status, 401, "{}", no_token.body);
    site.assert_challenge(
        &challenge_of(&no_token.headers, "/mcp"),
        None,
        SCOPE_RENDER,
        "/mcp",
    );
    let clip = make_clip(site.dir.path(), "clip.mp4", 160, 90, 0.4, false);
    let refused = post_asset(&base, None, &clip);
    assert_eq!(refused.status, 401, "{}", refused.body);
    site.assert_challenge(
        &challenge_of(&refused.headers, "upload"),
        None,
        SCOPE_RENDER,
        "upload",
    );
    let unknown_video = format!("{base}/videos/task_01JVXD00000000000000000000/final.mp4");
    let refused = get(&unknown_video, None);
    assert_eq!(refused.status, 401, "{}", refused.body);
    site.assert_challenge(
        &challenge_of(&refused.headers, "download"),
        None,
        SCOPE_RENDER,
        "download",
    );

    // 3. A render-scope token uploads and renders; the static token still works beside it.
    let step = Instant::now();
    let render = site.token(SCOPE_RENDER);
    let asset = upload(&site.server, Some(&render), &clip);
    let mut mcp = site.mcp(&render);
    let created = mcp.tool(
        "vidforge_render_video",
        json!({"source_asset_uri": asset, "output_format": "mp4", "resolution": "720p"}),
        Caps::TASKS,
    );
    let task_id = created.result()["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("no taskId: {}", created.body))
        .to_string();
    let done = mcp.wait_task(&task_id, Caps::TASKS, WAIT, |t| {
        matches!(
            t["status"].as_str(),
            Some("completed" | "failed" | "cancelled")
        )
    });
    assert_eq!(done["status"], "completed", "{done}");
    let video = format!("{base}/videos/{task_id}/final.mp4");
    let download = get(&video, Some(&render));
    assert_eq!(download.status, 200, "{}", download.body);
    let refused = get(&video, None);
    assert_eq!(refused.status, 401);
    site.assert_challenge(
        &challenge_of(&refused.headers, "download"),
        None,
        SCOPE_RENDER,
        "download",
    );
    site.assert_accepted("the static token", STATIC_TOKEN);
    eprintln!(
        "oauth: render with an OAuth token in {:.1} s",
        step.elapsed().as_secs_f64()
    );

    // 5. Scopes: read-only reads its own render, and nothing more.
    let read = site.token(SCOPE_READ);
    site.assert_accepted("a read token", &read);
    let mut reader = site.mcp(&read);
    assert_eq!(
        reader.task_get(&task_id, Caps::TASKS).result()["status"],
        "completed"
    );
    let status = reader.tool(
        "vidforge_get_render_status",
        json!({"render_id": task_id}),
        Caps::NONE,
    );
    assert_eq!(
        status.result()["structuredContent"]["state"],
        "succeeded",
        "{}",
        status.body
    );
    assert_eq!(get(&video, Some(&read)).status, 200);
    let step_up = |what: &str, reply: &WireReply| {
        let error = reply.error(403, -32600);
        assert_eq!(
            error["data"]["code"], "insufficient_scope",
            "{what}: {}",
            reply.body
        );
        site.assert_challenge(
            &challenge_of(&reply.headers, what),
            Some("insufficient_scope"),
            SCOPE_RENDER,
            what,
        );
    };
    let refused = site.call_tool(
        &read,
        "vidforge_render_video",
        json!({"source_asset_uri": asset, "output_format": "mp4", "resolution": "720p"}),
        Caps::TASKS,
    );
    step_up("render_video with a read token", &refused);
    let refused = site.call_tool(
        &read,
        "vidforge_approve_watermark",
        json!({"render_id": task_id, "approved": true}),
        Caps::NONE,
    );
    step_up("approve_watermark with a read token", &refused);
    let refused = site.call_tool(
        &read,
        "vidforge_cancel_render",
        json!({"render_id": task_id}),
        Caps::NONE,
    );
    step_up("cancel_render with a read token", &refused);
    let refused = site.task_request(&read, "tasks/cancel", json!({"taskId": task_id}));
    step_up("tasks/cancel with a read token", &refused);
    let refused = site.task_request(
        &read,
        "tasks/update",
        json!({"taskId": task_id, "inputResponses": {}}),
    );
    step_up("tasks/update with a read token", &refused);
    let refused = post_asset(&base, Some(&read), &clip);
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert_eq!(
        refused.body["code"], "insufficient_scope",
        "{}",
        refused.body
    );
    site.assert_challenge(
        &challenge_of(&refused.headers, "upload with a read token"),
        Some("insufficient_scope"),
        SCOPE_RENDER,
        "upload with a read token",
    );
    // Another subject of the same issuer sees nothing of the first one's.
    let other = site
        .auth
        .token(CLIENT2_ID, CLIENT2_SECRET, SCOPE_RENDER, &site.resource());
    let theirs = site.task_request(&other, "tasks/get", json!({"taskId": task_id}));
    theirs.error(200, -32602);
    let status = site.mcp(&other).tool(
        "vidforge_get_render_status",
        json!({"render_id": task_id}),
        Caps::NONE,
    );
    assert_eq!(
        status.result()["structuredContent"]["code"],
        "render_not_found"
    );
    assert_eq!(get(&video, Some(&other)).status, 404);

    // 4. Refusals, each 401 invalid_token for its own reason. None needs a key fetch.
    let key = rsa_key(&site.auth.private_key_pem());
    let kid = site.auth.kid();
    let claims = claims_of(&render);
    assert_eq!(claims["aud"], site.resource(), "{claims}");
    assert_eq!(claims["iss"], site.auth.issuer(), "{claims}");
    // A forged token with the real claims and key is accepted: the forgery itself is sound.
    site.assert_accepted(
        "a re-signed real token",
        &forge(&claims, Algorithm::RS256, &key, &kid),
    );
    let for_other = site.auth.token(
        CLIENT_ID,
        CLIENT_SECRET,
        SCOPE_RENDER,
        "http://other.example/mcp",
    );
    site.assert_refused("wrong audience", &for_other, "another resource");
    let mut c = claims.clone();
    c["iss"] = json!("http://127.0.0.1:1/not-the-issuer");
    site.assert_refused(
        "wrong issuer",
        &forge(&c, Algorithm::RS256, &key, &kid),
        "not trusted",
    );
    {
        let untrusted = AuthServer::start(&site.resource(), &[]);
        let theirs = untrusted.token(CLIENT_ID, CLIENT_SECRET, SCOPE_RENDER, &site.resource());
        site.assert_refused("an untrusted issuer's token", &theirs, "not trusted");
    }
    let mut c = claims.clone();
    c["iat"] = json!(now() - 900);
    c["exp"] = json!(now() - 600);
    site.assert_refused(
        "expired",
        &forge(&c, Algorithm::RS256, &key, &kid),
        "expired",
    );
    let mut c = claims.clone();
    c["nbf"] = json!(now() + 600);
    c["exp"] = json!(now() + 900);
    site.assert_refused(
        "not yet valid",
        &forge(&c, Algorithm::RS256, &key, &kid),
        "not valid yet",
    );
    let none_header = json!({"alg": "none", "typ": "at+jwt", "kid": kid});
    let alg_none = format!(
        "{}.{}.",
        B64.encode(none_header.to_string()),
        B64.encode(claims.to_string())
    );
    // `none` is no algorithm jsonwebtoken knows: refused before anything else is looked at.
    site.assert_refused("alg none", &alg_none, "not a well-formed JWT");
    let hmac = EncodingKey::from_secret(site.auth.public_key_pem().as_bytes()).unwrap();
    site.assert_refused(
        "HS256 with the public key",
        &forge(&claims, Algorithm::HS256, &hmac, &kid),
        "algorithm is not accepted",
    );
    let mut c = claims.clone();
    c["sub"] = json!(CLIENT2_ID);
    let signature = render.rsplit('.').next().unwrap();
    let header = render.split('.').next().unwrap();
    let tampered = format!("{header}.{}.{signature}", B64.encode(c.to_string()));
    site.assert_refused("tampered payload", &tampered, "signature does not verify");
    site.assert_accepted("the render token, still", &render);
    // Subjects that would forge log lines, reach the operator's terminal or make an absurd
    // principal, each properly signed: refused, and nothing of them reaches the log.
    for (what, subject) in [
        ("an empty subject", String::new()),
        (
            "a newline in the subject",
            "alice\nINFO forged line".to_string(),
        ),
        ("ESC in the subject", "alice\u{1b}[31mred".to_string()),
        ("NUL in the subject", "alice\u{0}".to_string()),
        (
            "a right-to-left override in the subject",
            "alice\u{202e}ecila".to_string(),
        ),
        ("a 20,000-character subject", "a".repeat(20_000)),
    ] {
        let mut c = claims.clone();
        c["sub"] = json!(subject);
        site.assert_refused(
            what,
            &forge(&c, Algorithm::RS256, &key, &kid),
            "subject is not acceptable",
        );
    }
    // A token minted to last for years is refused (oauth_max_token_lifetime, 24 h).
    let mut c = claims.clone();
    c["exp"] = json!(now() + 400 * 24 * 3600);
    site.assert_refused(
        "a token valid for 400 days",
        &forge(&c, Algorithm::RS256, &key, &kid),
        "valid for longer than this server accepts",
    );
    let mut c = claims.clone();
    c["sub"] = json!("a".repeat(255));
    site.assert_accepted(
        "a 255-character subject",
        &forge(&c, Algorithm::RS256, &key, &kid),
    );
    let log = site.server.log();
    for forged in ["INFO forged line", "ecila"] {
        assert!(!log.contains(forged), "{forged:?} reached the log");
    }
    // A log that is no terminal carries no escape sequences at all (no colours either).
    assert!(
        !log.contains('\u{1b}'),
        "an escape sequence in the log file"
    );

    // 5b. One address, many users (a NAT, a gateway): a guesser there spends the address's
    // budget of wrong tokens (20), but a token whose signature verifies is no guess. A new
    // principal's valid token is served at once while the address is limited, an expired
    // signed token is told it expired (not 429), and only unverifiable tokens wait.
    let mut limited = 0;
    for i in 0..30 {
        let reply = site.list_tools(Some(&format!("guess-{i}")));
        assert!(matches!(reply.status, 401 | 429), "{}", brief(&reply));
        limited += usize::from(reply.status == 429);
    }
    assert!(
        limited >= 5,
        "the guesser was never limited ({limited} × 429)"
    );
    let mut c = claims.clone();
    c["sub"] = json!("someone-new-behind-the-same-address");
    site.assert_accepted(
        "a new principal's signed token while its address is limited",
        &forge(&c, Algorithm::RS256, &key, &kid),
    );
    let mut c = claims.clone();
    c["iat"] = json!(now() - 900);
    c["exp"] = json!(now() - 600);
    site.assert_refused(
        "an expired signed token while its address is limited",
        &forge(&c, Algorithm::RS256, &key, &kid),
        "expired",
    );
    assert_eq!(site.list_tools(Some("guess-again")).status, 429);

    // 6. Key rotation, once vidforge may fetch keys again (30 s after its start-up fetch).
    let wait = (site.keys_fetched + REFETCH_GAP).saturating_duration_since(Instant::now());
    eprintln!(
        "oauth: steps 1-5 took {:.1} s; waiting {:.1} s for the refetch window",
        started.elapsed().as_secs_f64(),
        wait.as_secs_f64()
    );
    std::thread::sleep(wait);
    let old_kid = site.auth.kid();
    let new_kid = site.auth.rotate_keys();
    // The old key is still cached: its tokens keep working until the next fetch...
    site.assert_accepted("an old-key token before any refetch", &render);
    // ...which the new key's unknown kid triggers, without a restart.
    let rotated = site.token(SCOPE_RENDER);
    assert_eq!(
        serde_json::from_slice::<Value>(&B64.decode(rotated.split('.').next().unwrap()).unwrap())
            .unwrap()["kid"],
        new_kid
    );
    let step = Instant::now();
    site.assert_accepted("a token signed with the rotated key", &rotated);
    eprintln!(
        "oauth: first request with the new kid (one refetch) took {} ms",
        step.elapsed().as_millis()
    );
    // The fetch replaced the cache: the old kid is gone (the issuer dropped it).
    site.assert_refused(
        "the old key after the refetch",
        &render,
        "signing key is unknown",
    );
    // 4, last: an unknown kid (forged with the real, current key) is refused without a fetch
    // (the last one was just now); the issuer's real tokens still pass.
    let key = rsa_key(&site.auth.private_key_pem());
    let c = claims_of(&rotated);
    site.assert_refused(
        "unknown kid",
        &forge(&c, Algorithm::RS256, &key, &format!("{old_kid}-unknown")),
        "signing key is unknown",
    );
    site.assert_accepted("the rotated token, still", &rotated);
    eprintln!(
        "oauth: resource_server_end_to_end took {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// The authorization server goes down: tokens whose key is cached keep working; an unknown
/// `kid` is a `401` within a few seconds (never a `500`), with a clear log line; once it is
/// back, nothing needs a restart.
#[test]
fn authorization_server_down() {
    let started = Instant::now();
    let mut site = Site::start();
    let token = site.token(SCOPE_RENDER);
    site.assert_accepted("a token while the issuer is up", &token);
    let key = rsa_key(&site.auth.private_key_pem());
    let claims = claims_of(&token);
    let issuer_port = site.auth.port();

    site.auth.stop();
    site.assert_accepted("a cached-key token while the issuer is down", &token);
    // Down, and worse than refusing connections: its port accepts them and never answers,
    // so vidforge's fetch bound (not a quick "connection refused") is what ends the wait.
    let hanging = TcpListener::bind(("127.0.0.1", issuer_port)).expect("the issuer's port");
    let wait = (site.keys_fetched + REFETCH_GAP).saturating_duration_since(Instant::now());
    std::thread::sleep(wait);
    let unknown = forge(&claims, Algorithm::RS256, &key, "a-kid-nobody-published");
    let asked = Instant::now();
    site.assert_refused(
        "an unknown kid while the issuer hangs",
        &unknown,
        "cannot be fetched",
    );
    let took = asked.elapsed();
    eprintln!(
        "oauth: unknown kid with the issuer down: 401 in {} ms",
        took.as_millis()
    );
    assert!(took < Duration::from_secs(5), "the refusal took {took:?}");
    wait_for_log(&site.server, "cannot fetch the OAuth issuer's keys");
    site.assert_accepted("a cached-key token after the failed fetch", &token);
    drop(hanging);

    site.auth.start_again();
    site.assert_accepted("a token once the issuer is back", &token);
    let fresh = site.token(SCOPE_READ);
    site.assert_accepted("a new token once the issuer is back", &fresh);
    eprintln!(
        "oauth: authorization_server_down took {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// The cost of validating a JWT per request: `tools/list` with a static token and with an
/// OAuth access token (cached key), alternating on one server, 3 rounds of 2000 requests from
/// 8 keep-alive clients. Prints req/s and the median ratio. A measurement, not a check:
/// `cargo test --release --test e2e oauth::auth_throughput -- --ignored --nocapture`.
#[test]
#[ignore]
fn auth_throughput() {
    const REQUESTS: usize = 2000;
    const CLIENTS: usize = 8;
    let site = Site::start();
    let jwt = site.token(SCOPE_RENDER);
    site.assert_accepted("the JWT", &jwt);
    let body = Mcp::new(&site.base())
        .envelope("tools/list", json!({}), Caps::NONE)
        .to_string();
    let url = site.resource();
    let run = |token: &str| -> f64 {
        let started = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..CLIENTS {
                s.spawn(|| {
                    let client = client();
                    for _ in 0..REQUESTS / CLIENTS {
                        let resp = client
                            .post(&url)
                            .header("Content-Type", "application/json")
                            .header("Accept", "application/json, text/event-stream")
                            .header("MCP-Protocol-Version", PROTOCOL)
                            .header("Mcp-Method", "tools/list")
                            .bearer_auth(token)
                            .body(body.clone())
                            .send()
                            .expect("POST /mcp");
                        assert_eq!(resp.status().as_u16(), 200);
                        let _ = resp.bytes();
                    }
                });
            }
        });
        REQUESTS as f64 / started.elapsed().as_secs_f64()
    };
    let mut ratios = Vec::new();
    for round in 1..=3 {
        let fixed = run(STATIC_TOKEN);
        let oauth = run(&jwt);
        eprintln!(
            "round {round}: static token {fixed:.0} req/s, JWT {oauth:.0} req/s, JWT/static {:.3}",
            oauth / fixed
        );
        ratios.push(oauth / fixed);
    }
    ratios.sort_by(f64::total_cmp);
    eprintln!(
        "median JWT/static throughput ratio over 3 rounds of {REQUESTS} tools/list from {CLIENTS} clients: {:.3}",
        ratios[1]
    );
}

/// A trusted issuer that answers its key set with a huge, close-delimited body (no
/// `Content-Length`: a faulty or compromised issuer, or a man in the middle of an `http://`
/// one) costs vidforge the document cap (256 KiB), not the body: it stops reading as soon as
/// the cap is passed, at start-up and at every refetch, its peak memory stays where it was, and
/// it goes on serving (the token that needed the keys is a clean `401`).
#[test]
fn a_huge_key_set_is_cut_at_the_cap_while_it_arrives() {
    const BODY: usize = 100 << 20;
    let issuer = HugeKeySet::start(BODY);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("data"),
        &[
            "--oauth-issuer",
            &issuer.url,
            "--token",
            &format!("{STATIC_TOKEN}=static"),
        ],
    );
    let failed = wait_for_log(&server, "cannot fetch the OAuth issuer's keys");
    let site_mcp = format!("{}/mcp", server.base());
    // A token naming a key nobody published makes vidforge fetch the key set again (at most
    // every 5 s after a failed fetch).
    let header = B64.encode(json!({"alg": "RS256", "typ": "at+jwt", "kid": "k-1"}).to_string());
    let claims = B64.encode(
        json!({"iss": issuer.url, "sub": "s", "aud": site_mcp, "exp": 4_000_000_000u64})
            .to_string(),
    );
    let token = format!("{header}.{claims}.c2lnbmF0dXJl");
    std::thread::sleep((failed + Duration::from_secs(6)).saturating_duration_since(Instant::now()));
    let body = Mcp::new(&server.base()).envelope("tools/list", json!({}), Caps::NONE);
    let reply = post_wire(
        &site_mcp,
        Some(&token),
        &[
            ("MCP-Protocol-Version", PROTOCOL),
            ("Mcp-Method", "tools/list"),
        ],
        &body,
    );
    assert_eq!(reply.status, 401, "{}", brief(&reply));
    let deadline = Instant::now() + Duration::from_secs(10);
    while issuer.served().len() < 2 {
        assert!(
            Instant::now() < deadline,
            "no refetch: {:?}",
            issuer.served()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let served = issuer.served();
    let peak_mib = server.peak_rss_kib() / 1024;
    eprintln!(
        "oauth: key-set bodies sent before vidforge hung up: {served:?} bytes; server peak RSS {peak_mib} MiB"
    );
    // What the sender could write before the reader hung up: the cap plus socket buffers.
    for sent in &served {
        assert!(
            *sent < 16 << 20,
            "vidforge read on past the cap: {served:?}"
        );
    }
    assert!(peak_mib < 160, "peak RSS {peak_mib} MiB");
    // Still serving, static tokens included.
    let ok = post_wire(
        &site_mcp,
        Some(STATIC_TOKEN),
        &[
            ("MCP-Protocol-Version", PROTOCOL),
            ("Mcp-Method", "tools/list"),
        ],
        &body,
    );
    assert_eq!(ok.status, 200, "{}", brief(&ok));
}

/// An issuer on loopback whose metadata is sound and whose key set is `body_len` bytes of JSON
/// whitespace, close-delimited, written until the reader hangs up. Records how many bytes of
/// each key-set answer were accepted by the socket.
struct HugeKeySet {
    url: String,
    served: std::sync::Arc<std::sync::Mutex<Vec<usize>>>,
}

impl HugeKeySet {
    fn start(body_len: usize) -> HugeKeySet {
        use std::io::{BufRead, BufReader, Write};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let served = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (issuer, log) = (url.clone(), served.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().take(64) {
                let Ok(mut stream) = stream else { continue };
                let mut line = String::new();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                // The rest of the request head.
                let mut header = String::new();
                while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                    header.clear();
                }
                let path = line.split(' ').nth(1).unwrap_or_default().to_string();
                if path.ends_with("/jwks") {
                    let _ = stream.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{\"keys\": [",
                    );
                    let chunk = vec![b' '; 64 * 1024];
                    let mut sent = 0;
                    while sent < body_len && stream.write_all(&chunk).is_ok() {
                        sent += chunk.len();
                    }
                    log.lock().unwrap().push(sent);
                } else {
                    let doc =
                        json!({"issuer": issuer, "jwks_uri": format!("{issuer}/jwks")}).to_string();
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{doc}",
                        doc.len()
                    );
                }
            }
        });
        HugeKeySet { url, served }
    }

    fn served(&self) -> Vec<usize> {
        self.served.lock().unwrap().clone()
    }
}
