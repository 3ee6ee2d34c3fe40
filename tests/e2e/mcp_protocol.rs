//! The MCP front's protocol surface, driven over real HTTP against a real `vidforge serve`:
//! discovery, tool listing, header and `_meta` errors, argument errors, unknown ids, auth and
//! principal isolation. Every response is validated against the official JSON Schemas.

use crate::support::*;
use serde_json::{Value, json};

fn server() -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[]);
    (dir, server)
}

#[test]
fn discover_advertises_tasks_extension_and_caching() {
    let (_dir, server) = server();
    let mut mcp = server.mcp();
    let reply = mcp.call("server/discover", json!({}), Caps::NONE);
    assert_eq!(reply.status, 200);
    assert_result("core", "DiscoverResult", &reply);
    let r = reply.result();
    assert_eq!(r["resultType"], "complete");
    assert_eq!(r["supportedVersions"], json!([PROTOCOL]));
    assert_eq!(r["capabilities"]["extensions"][TASKS], json!({}));
    assert!(r["capabilities"].get("tasks").is_none());
    assert!(r["ttlMs"].as_u64().unwrap() > 0);
    assert!(r["cacheScope"].is_string());
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "vidforge"
    );
}

#[test]
fn tools_list_is_deterministic_and_complete() {
    let (_dir, server) = server();
    let mut mcp = server.mcp();
    let first = mcp.call("tools/list", json!({}), Caps::NONE);
    assert_result("core", "ListToolsResult", &first);
    let names: Vec<&str> = first.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "vidforge_render_video",
            "vidforge_get_render_status",
            "vidforge_approve_watermark",
            "vidforge_cancel_render",
            "vidforge_get_capabilities"
        ]
    );
    let second = mcp.call("tools/list", json!({}), Caps::NONE);
    assert_eq!(first.result()["tools"], second.result()["tools"]);
    let render = &first.result()["tools"][0];
    assert_eq!(render["annotations"]["idempotentHint"], false);
    assert_eq!(render["inputSchema"]["additionalProperties"], false);
    let codes: Vec<&str> = render["_meta"]["com.vidforge/errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        [
            "source_not_found",
            "unsupported_codec",
            "watermark_rejected",
            "watermark_approval_timeout",
            "render_quota_exceeded",
            "render_failed"
        ]
    );
    assert!(
        render["description"]
            .as_str()
            .unwrap()
            .contains("30 minutes")
    );
    assert_eq!(
        first.result()["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "vidforge"
    );
}

fn header_set(method: &str) -> Vec<(String, String)> {
    vec![
        ("MCP-Protocol-Version".into(), PROTOCOL.into()),
        ("Mcp-Method".into(), method.into()),
    ]
}

#[test]
fn header_and_meta_errors_have_spec_codes_and_statuses() {
    let (_dir, server) = server();
    let mut mcp = server.mcp();

    // Missing MCP-Protocol-Version.
    let body = mcp.envelope("tools/list", json!({}), Caps::NONE);
    let reply = mcp.raw(&body, &[("Mcp-Method".into(), "tools/list".into())]);
    assert_eq!(reply.status, 400);
    assert_rpc_error(&reply, -32020);

    // Mcp-Method differs from the body.
    let reply = mcp.raw(&body, &header_set("tools/call"));
    assert_eq!(reply.status, 400);
    assert_rpc_error(&reply, -32020);

    // Mcp-Name differs from the tool name.
    let body = mcp.envelope(
        "tools/call",
        json!({"name": "vidforge_get_capabilities", "arguments": {}}),
        Caps::NONE,
    );
    let mut headers = header_set("tools/call");
    headers.push(("Mcp-Name".into(), "vidforge_render_video".into()));
    let reply = mcp.raw(&body, &headers);
    assert_eq!(reply.status, 400);
    assert_rpc_error(&reply, -32020);

    // Missing _meta.
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {}});
    let reply = mcp.raw(&body, &header_set("tools/list"));
    assert_eq!(reply.status, 400);
    assert_rpc_error(&reply, -32602);

    // Unsupported version (header and _meta agree).
    let mut body = mcp.envelope("tools/list", json!({}), Caps::NONE);
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("1900-01-01");
    let reply = mcp.raw(
        &body,
        &[
            ("MCP-Protocol-Version".into(), "1900-01-01".into()),
            ("Mcp-Method".into(), "tools/list".into()),
        ],
    );
    assert_eq!(reply.status, 400);
    assert_rpc_error(&reply, -32022);
    assert_eq!(reply.error()["data"]["requested"], "1900-01-01");

    // Removed and unknown methods.
    for method in ["tasks/result", "tasks/list", "ping", "unknown/method"] {
        let reply = mcp.call(method, json!({}), Caps::TASKS);
        assert_eq!(reply.status, 404, "{method}: {}", reply.body);
        assert_rpc_error(&reply, -32601);
    }

    // tasks/* without the extension on this request.
    let reply = mcp.call("tasks/get", json!({"taskId": "task_x"}), Caps::NONE);
    assert_eq!(reply.status, 400);
    assert_rpc_error(&reply, -32021);
    assert!(reply.error()["data"]["requiredCapabilities"]["extensions"][TASKS].is_object());
}

#[test]
fn transport_rejects_get_and_foreign_origins() {
    let (_dir, server) = server();
    let client = reqwest::blocking::Client::new();
    let get = client.get(format!("{}/mcp", server.base())).send().unwrap();
    assert_eq!(get.status().as_u16(), 405);

    let mut mcp = server.mcp();
    let body = mcp.envelope("tools/list", json!({}), Caps::NONE);
    let mut headers = header_set("tools/list");
    headers.push(("Origin".into(), "http://evil.example.com".into()));
    let reply = mcp.raw(&body, &headers);
    assert_eq!(reply.status, 403);

    let mut headers = header_set("tools/list");
    headers.push(("Origin".into(), format!("http://127.0.0.1:{}", server.port)));
    let reply = mcp.raw(&body, &headers);
    assert_eq!(reply.status, 200, "{}", reply.body);
}

#[test]
fn invalid_arguments_are_tool_errors_with_the_envelope() {
    let (_dir, server) = server();
    let mut mcp = server.mcp();
    let reply = mcp.tool(
        "vidforge_render_video",
        json!({"source_asset_uri": "/etc/passwd", "output_format": "avi", "resolution": "720p"}),
        Caps::TASKS,
    );
    assert_eq!(reply.status, 200);
    assert_result("core", "CallToolResult", &reply);
    let r = reply.result();
    assert_eq!(r["isError"], true);
    let env = &r["structuredContent"];
    assert_eq!(env["code"], "invalid_arguments");
    assert_eq!(env["temporary"], false);
    assert!(
        env["fingerprint"]
            .as_str()
            .unwrap()
            .starts_with("vidforge@")
    );
    assert!(env["request_id"].as_str().unwrap().starts_with("req_"));

    // A well-formed URI for an asset that does not exist.
    let reply = mcp.tool(
        "vidforge_render_video",
        json!({"source_asset_uri": "vidforge://assets/a_01JVXD00000000000000000000", "output_format": "mp4", "resolution": "720p"}),
        Caps::NONE,
    );
    assert_eq!(
        reply.result()["structuredContent"]["code"],
        "source_not_found",
        "{}",
        reply.body
    );
}

#[test]
fn unknown_ids_are_invalid_params_and_mcp_name_must_match() {
    let (_dir, server) = server();
    let mut mcp = server.mcp();
    let reply = mcp.task_get("task_00000000000000000000000000", Caps::TASKS);
    assert_rpc_error(&reply, -32602);

    let body = mcp.envelope("tasks/get", json!({"taskId": "task_a"}), Caps::TASKS);
    let mut headers = header_set("tasks/get");
    headers.push(("Mcp-Name".into(), "task_b".into()));
    let reply = mcp.raw(&body, &headers);
    assert_eq!(reply.status, 400);
    assert_rpc_error(&reply, -32020);

    let reply = mcp.tool(
        "vidforge_get_render_status",
        json!({"render_id": "task_nope"}),
        Caps::NONE,
    );
    assert_eq!(reply.result()["isError"], true);
    assert_eq!(
        reply.result()["structuredContent"]["code"],
        "render_not_found"
    );
}

#[test]
fn capabilities_are_served_as_resource_and_tool() {
    let (_dir, server) = server();
    let mut mcp = server.mcp();
    let read = mcp.call(
        "resources/read",
        json!({"uri": "vidforge://capabilities"}),
        Caps::NONE,
    );
    assert_result("core", "ReadResourceResult", &read);
    let text = read.result()["contents"][0]["text"].as_str().unwrap();
    let summary: Value = serde_json::from_str(text).unwrap();
    assert_eq!(summary["server"]["spec_target"]["revision"], PROTOCOL);
    assert!(
        summary["server"]["fingerprint"]
            .as_str()
            .unwrap()
            .starts_with("vidforge@1.0.0+")
    );

    let tool = mcp.tool("vidforge_get_capabilities", json!({}), Caps::NONE);
    assert_result("core", "CallToolResult", &tool);
    assert_eq!(tool.result()["structuredContent"], summary);

    let list = mcp.call("resources/list", json!({}), Caps::NONE);
    assert_result("core", "ListResourcesResult", &list);
    let templates = mcp.call("resources/templates/list", json!({}), Caps::NONE);
    assert_result("core", "ListResourceTemplatesResult", &templates);
    assert_eq!(
        templates.result()["resourceTemplates"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn bearer_tokens_gate_access_and_isolate_principals() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &TWO_PRINCIPALS);

    let mut anonymous = server.mcp();
    let reply = anonymous.call("tools/list", json!({}), Caps::NONE);
    assert_eq!(reply.status, 401);

    let clip = make_clip(dir.path(), "clip.mp4", 160, 90, 0.4, false);
    let alice_asset = upload(&server, Some("token-alice-1"), &clip);

    // Bob cannot render Alice's asset: it behaves exactly like a missing one.
    let mut bob = server.mcp().with_token("token-bob-22");
    let reply = bob.tool(
        "vidforge_render_video",
        json!({"source_asset_uri": alice_asset, "output_format": "mp4", "resolution": "720p"}),
        Caps::TASKS,
    );
    assert_eq!(
        reply.result()["structuredContent"]["code"],
        "source_not_found"
    );

    // Alice's task is invisible to Bob: the same -32602 as an unknown id.
    let mut alice = server.mcp().with_token("token-alice-1");
    let created = alice.tool(
        "vidforge_render_video",
        json!({"source_asset_uri": alice_asset, "output_format": "mp4", "resolution": "720p"}),
        Caps::TASKS,
    );
    let task_id = created.result()["taskId"].as_str().unwrap().to_string();
    let theirs = bob.task_get(&task_id, Caps::TASKS);
    let unknown = bob.task_get("task_00000000000000000000000000", Caps::TASKS);
    assert_rpc_error(&theirs, -32602);
    assert_eq!(theirs.error()["code"], unknown.error()["code"]);
    assert_eq!(theirs.error()["message"], unknown.error()["message"]);
    let status = bob.tool(
        "vidforge_get_render_status",
        json!({"render_id": task_id}),
        Caps::NONE,
    );
    assert_eq!(
        status.result()["structuredContent"]["code"],
        "render_not_found"
    );
    assert_eq!(alice.task_get(&task_id, Caps::TASKS).status, 200);
}

/// POSTs a raw body with the standard headers; returns (HTTP status, JSON body).
fn post_raw(mcp: &Mcp, method: &str, body: &str) -> (u16, Value) {
    let client = reqwest::blocking::Client::new();
    let mut req = client
        .post(&mcp.url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(body.to_string());
    for (k, v) in header_set(method) {
        req = req.header(k, v);
    }
    let resp = req.send().expect("POST /mcp");
    let status = resp.status().as_u16();
    let text = resp.text().unwrap();
    let json = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("not a JSON body ({e}), status {status}: {text}"));
    (status, json)
}

#[test]
fn malformed_messages_get_their_json_rpc_codes() {
    let (_dir, server) = server();
    let mcp = server.mcp();
    let meta = r#""_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}, "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}"#;
    let cases = [
        ("tools/list", "{bad json".to_string(), -32700, Value::Null),
        ("tools/list", "[1, 2]".to_string(), -32600, Value::Null),
        (
            "tools/list",
            r#"{"id": 5, "method": "tools/list"}"#.to_string(),
            -32600,
            json!(5),
        ),
        (
            "tasks/get",
            format!(
                r#"{{"jsonrpc": "2.0", "id": 6, "method": "tasks/get", "params": {{"taskId": 1, {meta}}}}}"#
            ),
            -32602,
            json!(6),
        ),
        (
            "tools/call",
            format!(
                r#"{{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {{"name": "vidforge_get_render_status", "arguments": [], {meta}}}}}"#
            ),
            -32602,
            json!(7),
        ),
    ];
    for (method, body, code, id) in cases {
        let (status, reply) = post_raw(&mcp, method, &body);
        assert_eq!(status, 400, "{body}: {reply}");
        assert_eq!(reply["jsonrpc"], "2.0", "{reply}");
        assert_eq!(reply["error"]["code"], code, "{body}: {reply}");
        assert_eq!(reply["id"], id, "{body}: {reply}");
    }
}

#[test]
fn null_is_refused_where_the_schema_allows_none() {
    let (_dir, server) = server();
    let mut mcp = server.mcp();
    let base = json!({"source_asset_uri": "vidforge://assets/a_01JVXD00000000000000000000", "output_format": "mp4", "resolution": "720p"});
    let logo = json!({"image_asset_uri": "vidforge://assets/a_01JVXD00000000000000000001"});
    let mut cases = Vec::new();
    for (field, value) in [("watermark", Value::Null), ("idempotency_key", Value::Null)] {
        let mut args = base.clone();
        args[field] = value;
        cases.push((args, field.to_string()));
    }
    for key in ["position", "opacity"] {
        let mut args = base.clone();
        args["watermark"] = logo.clone();
        args["watermark"][key] = Value::Null;
        cases.push((args, format!("watermark.{key}")));
    }
    for (args, field) in cases {
        let reply = mcp.tool("vidforge_render_video", args.clone(), Caps::NONE);
        let env = &reply.result()["structuredContent"];
        assert_eq!(env["code"], "invalid_arguments", "{args}: {env}");
        assert_eq!(env["details"]["field"], field.as_str(), "{env}");
    }
    let reply = mcp.tool(
        "vidforge_approve_watermark",
        json!({"render_id": "task_x", "approved": false, "note": null}),
        Caps::NONE,
    );
    assert_eq!(
        reply.result()["structuredContent"]["details"]["field"],
        "note"
    );
}

/// `tools/list` from the local address `from` with `token`: (status, Retry-After, body).
fn list_from(url: &str, from: &str, token: &str) -> (u16, Option<u64>, Value) {
    list_via(url, from, None, token)
}

/// [`list_from`] with an `X-Forwarded-For` header.
fn list_via(
    url: &str,
    from: &str,
    forwarded_for: Option<&str>,
    token: &str,
) -> (u16, Option<u64>, Value) {
    let client = reqwest::blocking::Client::builder()
        .local_address(from.parse::<std::net::IpAddr>().unwrap())
        .timeout(std::time::Duration::from_secs(10))
        .build()
        .unwrap();
    let body = Mcp::new("http://unused").envelope("tools/list", json!({}), Caps::NONE);
    let resp = client
        .post(url)
        .bearer_auth(token)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", PROTOCOL)
        .header("Mcp-Method", "tools/list")
        .header("X-Forwarded-For", forwarded_for.unwrap_or(""))
        .body(body.to_string())
        .send()
        .expect("POST /mcp");
    let status = resp.status().as_u16();
    let retry = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    let text = resp.text().unwrap_or_default();
    (
        status,
        retry,
        serde_json::from_str(&text).unwrap_or(Value::Null),
    )
}

#[test]
fn wrong_tokens_are_rate_limited_per_peer_and_valid_tokens_never_slowed() {
    let dir = tempfile::tempdir().unwrap();
    let mut flags = TWO_PRINCIPALS.to_vec();
    flags.extend([
        "--auth-failure-burst",
        "10",
        "--auth-failure-interval",
        "30s",
    ]);
    // 127.0.0.3 plays a reverse proxy (the farm's nginx): its X-Forwarded-For names the client.
    flags.extend(["--trusted-proxy", "127.0.0.3"]);
    let server = Server::start(&dir.path().join("data"), &flags);
    let url = format!("{}/mcp", server.base());

    // Alice has used her token from 127.0.0.1 before the guessing starts there.
    assert_eq!(list_from(&url, "127.0.0.1", "token-alice-1").0, 200);

    // 200 wrong tokens from 127.0.0.1: the first 10 are 401, then every one is 429
    // `rate_limited` with Retry-After, instead of a free answer to every guess.
    let mut statuses = std::collections::BTreeMap::new();
    for i in 0..200 {
        let (status, retry, body) = list_from(&url, "127.0.0.1", &format!("guess-{i:08}"));
        *statuses.entry(status).or_insert(0) += 1;
        if status == 429 {
            assert_eq!(body["code"], "rate_limited", "{body}");
            assert_eq!(body["temporary"], true);
            assert!(body["retry_after_ms"].as_u64().unwrap() > 0);
            let retry = retry.expect("429 carries Retry-After");
            assert!((1..=30).contains(&retry), "Retry-After {retry}");
        }
    }
    assert_eq!(
        statuses,
        [(401, 10), (429, 190)].into_iter().collect(),
        "wrong tokens per status"
    );

    // A valid token is never slowed: alice, proven from this address, goes on; from another
    // address bob is untouched. Bob's token first seen from the limited address reads like
    // a guess (answering it differently would tell a guesser that it guessed right).
    for _ in 0..5 {
        assert_eq!(list_from(&url, "127.0.0.1", "token-alice-1").0, 200);
    }
    assert_eq!(list_from(&url, "127.0.0.2", "token-bob-22").0, 200);
    assert_eq!(list_from(&url, "127.0.0.1", "token-bob-22").0, 429);
    assert_eq!(list_from(&url, "127.0.0.2", "wrong-token-1").0, 401);

    // Behind the trusted proxy each client has its own budget; a client's own claim in the
    // header (left of what the proxy saw) is not read, and nobody else's header counts.
    for i in 0..10 {
        let guess = format!("proxied-{i}");
        assert_eq!(
            list_via(&url, "127.0.0.3", Some("198.51.100.7"), &guess).0,
            401
        );
    }
    assert_eq!(
        list_via(&url, "127.0.0.3", Some("198.51.100.7"), "x-guess").0,
        429
    );
    assert_eq!(
        list_via(
            &url,
            "127.0.0.3",
            Some("198.51.100.7, 198.51.100.8"),
            "x-guess"
        )
        .0,
        401,
        "the proxy saw 198.51.100.8"
    );
    assert_eq!(
        list_via(
            &url,
            "127.0.0.3",
            Some("198.51.100.8, 198.51.100.7"),
            "x-guess"
        )
        .0,
        429,
        "a client cannot escape its budget by writing the header itself"
    );
    assert_eq!(list_via(&url, "127.0.0.3", None, "token-bob-22").0, 200);
    assert_eq!(
        list_via(&url, "127.0.0.1", Some("198.51.100.9"), "token-bob-22").0,
        429,
        "an untrusted peer's header is ignored: still the limited 127.0.0.1"
    );

    // The sign-in form shares the budget: a limited address gets 429 there too.
    let resp = reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .post(format!("{}/signin", server.base()))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("token=another-guess&next=/")
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 429);
    assert!(resp.headers().contains_key("retry-after"));
}

/// The conformance suite's fixtures live in `vidforge-conformance` only.
#[test]
fn conformance_fixtures_are_absent_from_a_production_server() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[]);
    let mut mcp = server.mcp();

    let discover = mcp.call("server/discover", json!({}), Caps::NONE);
    let caps = &discover.result()["capabilities"];
    assert!(caps.get("prompts").is_none(), "{caps}");
    assert!(caps.get("completions").is_none(), "{caps}");

    let tools = mcp.call("tools/list", json!({}), Caps::NONE);
    let names: Vec<&str> = tools.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.iter().all(|n| n.starts_with("vidforge_")),
        "{names:?}"
    );

    let prompts = mcp.call("prompts/list", json!({}), Caps::NONE);
    assert_eq!(prompts.status, 404);
    assert_rpc_error(&prompts, -32601);
    let call = mcp.tool("slow_compute", json!({"seconds": 0}), Caps::TASKS);
    assert_rpc_error(&call, -32602);
    let read = mcp.call(
        "resources/read",
        json!({"uri": "test://static-text"}),
        Caps::NONE,
    );
    assert_rpc_error(&read, -32602);

    // The production binary has no fixtures to mount: the old flag says where they went.
    let out = std::process::Command::new(vidforge_bin())
        .args(["serve", "--conformance-fixtures", "--listen", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(dir.path().join("prod"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("vidforge-conformance"), "{stderr}");
}

/// The legacy-era revisions a dual-era server opens sessions for, newest first.
const LEGACY_REVISIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// Polls `vidforge_get_render_status` in a legacy session until the render is terminal
/// (bounded: 30 s); the whole tool result.
fn wait_render_legacy(client: &mut Legacy, render_id: &str) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let reply = client.tool(
            "vidforge_get_render_status",
            json!({ "render_id": render_id }),
        );
        assert_eq!(reply.status, 200, "{}", reply.body);
        let status = reply.result()["structuredContent"].clone();
        if status["terminal"] == true {
            return reply.result().clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "render {render_id} not terminal after 30 s: {status}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// A legacy session id that was never issued (the shape rmcp issues: a UUID).
const UNKNOWN_SESSION: &str = "00000000-0000-4000-8000-000000000000";

/// A legacy-era (initialize-based) client gets a session on the same `/mcp` endpoint: the
/// handshake, ping, the tools, a render without the tasks extension (even when declared),
/// the result as a resource, the GET stream, DELETE, refusals of unknown sessions and
/// unserved revisions, and a restart that costs the client only a new `initialize`. A
/// modern request on the same server stays stateless.
#[test]
fn legacy_clients_get_a_session_on_the_same_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(&dir.path().join("data"), &[]);
    let clip = make_clip(dir.path(), "clip.mp4", 160, 90, 0.4, false);
    let asset = upload(&server, None, &clip);

    // The handshake, declaring the tasks extension (which no legacy revision defines).
    let mut client = Legacy::new(&server, None);
    let init = client.initialize("2025-11-25", json!({ "extensions": { TASKS: {} } }));
    assert_eq!(init.status, 200, "{}", init.body);
    assert!(init.header("mcp-session-id").is_some_and(|s| !s.is_empty()));
    let result = init.result();
    assert_eq!(result["protocolVersion"], "2025-11-25");
    assert_eq!(result["serverInfo"]["name"], "vidforge");
    assert!(result["capabilities"]["tools"].is_object(), "{result}");
    assert!(
        result["capabilities"].get("extensions").is_none(),
        "{result}"
    );
    let session = client.session.clone().unwrap();

    // Each served revision is echoed (another session of the same principal).
    let mut older = Legacy::new(&server, None);
    let init = older.initialize("2025-06-18", json!({}));
    assert_eq!(init.status, 200, "{}", init.body);
    assert_eq!(init.result()["protocolVersion"], "2025-06-18");
    assert_ne!(older.session, client.session);

    let initialized = client.notify("notifications/initialized");
    assert_eq!(initialized.status, 202, "{}", initialized.body);
    let ping = client.request("ping", json!({}));
    assert_eq!(ping.status, 200, "{}", ping.body);
    assert_eq!(ping.result(), &json!({}));

    let tools = client.request("tools/list", json!({}));
    let names: Vec<&str> = tools.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "vidforge_render_video",
            "vidforge_get_render_status",
            "vidforge_approve_watermark",
            "vidforge_cancel_render",
            "vidforge_get_capabilities"
        ]
    );

    // No task in a legacy session: the accepted envelope, then polling.
    let render = client.tool(
        "vidforge_render_video",
        json!({"source_asset_uri": asset, "output_format": "mp4", "resolution": "720p"}),
    );
    assert_eq!(render.status, 200, "{}", render.body);
    let result = render.result();
    assert!(result.get("taskId").is_none(), "{result}");
    assert_ne!(result["resultType"], "task", "{result}");
    assert_eq!(result["isError"], false, "{result}");
    let accepted = &result["structuredContent"];
    assert_eq!(accepted["status"], "accepted", "{result}");
    let render_id = accepted["render_id"].as_str().unwrap().to_string();
    let done = wait_render_legacy(&mut client, &render_id);
    assert_eq!(done["structuredContent"]["state"], "succeeded", "{done}");
    // The video as a resource_link (the task result's), naming the structured video_uri.
    let link = done["content"]
        .as_array()
        .and_then(|c| c.iter().find(|b| b["type"] == "resource_link"))
        .unwrap_or_else(|| panic!("no resource_link in {done}"));
    let video_uri = link["uri"].as_str().unwrap().to_string();
    assert_eq!(done["structuredContent"]["video_uri"], video_uri.as_str());
    assert_eq!(link["mimeType"], "video/mp4");
    let read = client.request("resources/read", json!({ "uri": video_uri }));
    assert_eq!(read.status, 200, "{}", read.body);
    let contents = &read.result()["contents"][0];
    assert_eq!(contents["uri"], video_uri.as_str());
    assert!(
        contents["blob"].as_str().is_some_and(|b| !b.is_empty()),
        "{contents}"
    );

    // The server-message stream of the session; GET and DELETE name a session or are 405.
    let (status, content_type) = client.open_stream();
    assert_eq!(status, 200);
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    let (status, _) = Legacy::new(&server, None).open_stream();
    assert_eq!(status, 405);
    assert_eq!(Legacy::new(&server, None).delete(), 405);

    // DELETE ends the session: afterwards it is unknown, like one never issued.
    // 200, as the SDKs' clients expect (rmcp alone answers 202).
    assert_eq!(older.delete(), 200);
    let gone = older.request("ping", json!({}));
    gone.error(404, -32001);
    let mut stranger = Legacy::new(&server, None);
    stranger.session = Some(UNKNOWN_SESSION.to_string());
    stranger.request("ping", json!({})).error(404, -32001);

    // Unserved revisions: refused before a session exists, naming the served ones.
    for version in ["1.0.0", "2026-07-28"] {
        let refused = Legacy::new(&server, None).initialize(version, json!({}));
        let error = refused.error(400, -32602);
        assert_eq!(
            error["data"]["supported"],
            json!(LEGACY_REVISIONS),
            "{error}"
        );
        assert_eq!(error["data"]["requested"], version);
        assert!(refused.header("mcp-session-id").is_none());
    }

    // A modern request on the same server: served statelessly, no session.
    let mut modern = server.mcp();
    let body = modern.envelope("tools/list", json!({}), Caps::NONE);
    let reply = post_wire(
        &modern.url,
        None,
        &[
            ("MCP-Protocol-Version", PROTOCOL),
            ("Mcp-Method", "tools/list"),
        ],
        &body,
    );
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.header("mcp-session-id").is_none());
    assert_eq!(reply.result()["tools"].as_array().unwrap().len(), 5);
    assert_eq!(modern.call("tools/list", json!({}), Caps::NONE).status, 200);

    // `initialize` carrying the modern claim in `_meta` is a 2026-07-28 request (classified by
    // body, protocol reference §2.11) for a method that revision removed: 404 -32601 and no
    // session, whether or not it also names a legacy `protocolVersion` in its params.
    for params in [json!({}), json!({ "protocolVersion": "2025-11-25" })] {
        let body = modern.envelope("initialize", params, Caps::NONE);
        let reply = post_wire(
            &modern.url,
            None,
            &[
                ("MCP-Protocol-Version", PROTOCOL),
                ("Mcp-Method", "initialize"),
            ],
            &body,
        );
        reply.error(404, -32601);
        assert!(reply.header("mcp-session-id").is_none());
    }

    // A crash loses the sessions, not the renders: the old session is 404 (initialize
    // again), and the new session finds the render from before.
    server.kill9();
    server.start_again();
    client.request("ping", json!({})).error(404, -32001);
    assert_eq!(client.session.as_deref(), Some(session.as_str()));
    let init = client.initialize("2025-11-25", json!({}));
    assert_eq!(init.status, 200, "{}", init.body);
    assert_ne!(client.session.as_deref(), Some(session.as_str()));
    let again = client.tool(
        "vidforge_get_render_status",
        json!({ "render_id": render_id }),
    );
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.result()["structuredContent"]["state"], "succeeded");
}

/// Legacy sessions belong to the principal that opened them (another principal naming one
/// gets the unknown-session `404`, and its own session sees none of the owner's renders) and
/// are bounded per principal (`429`) and per node (`503`), both with `Retry-After`.
#[test]
fn legacy_sessions_belong_to_their_principal_and_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let mut flags = TWO_PRINCIPALS.to_vec();
    flags.extend([
        "--token",
        "token-carol-333=carol",
        "--max-legacy-sessions",
        "2",
        "--max-legacy-sessions-per-principal",
        "1",
    ]);
    let server = Server::start(&dir.path().join("data"), &flags);

    let anonymous = Legacy::new(&server, None).initialize("2025-11-25", json!({}));
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);
    assert!(anonymous.header("mcp-session-id").is_none());

    let mut alice = Legacy::new(&server, Some("token-alice-1"));
    let init = alice.initialize("2025-11-25", json!({}));
    assert_eq!(init.status, 200, "{}", init.body);
    let clip = make_clip(dir.path(), "clip.mp4", 160, 90, 0.4, false);
    let asset = upload(&server, Some("token-alice-1"), &clip);
    let render = alice.tool(
        "vidforge_render_video",
        json!({"source_asset_uri": asset, "output_format": "mp4", "resolution": "720p"}),
    );
    assert_eq!(render.result()["structuredContent"]["status"], "accepted");
    let render_id = render.result()["structuredContent"]["render_id"]
        .as_str()
        .unwrap()
        .to_string();

    // Bob naming Alice's session: exactly the answer to a session never issued, and his
    // DELETE ends nothing.
    let mut bob_in_alices = Legacy::new(&server, Some("token-bob-22"));
    bob_in_alices.session = alice.session.clone();
    let foreign = bob_in_alices.request("ping", json!({}));
    let mut bob_unknown = Legacy::new(&server, Some("token-bob-22"));
    bob_unknown.session = Some(UNKNOWN_SESSION.to_string());
    let unknown = bob_unknown.request("ping", json!({}));
    assert_eq!(foreign.error(404, -32001), unknown.error(404, -32001));
    assert_eq!(bob_in_alices.delete(), 404);
    assert_eq!(alice.request("ping", json!({})).status, 200);

    // Alice's second session: over her bound (429), not the node's.
    let second = Legacy::new(&server, Some("token-alice-1")).initialize("2025-11-25", json!({}));
    assert_eq!(second.status, 429, "{}", second.body);
    assert_schema("core", "JSONRPCErrorResponse", &second.body);
    assert_eq!(second.body["error"]["data"]["code"], "rate_limited");
    assert!(
        second
            .header("retry-after")
            .is_some_and(|v| v.parse::<u64>().is_ok_and(|s| s >= 1))
    );
    assert!(second.header("mcp-session-id").is_none());

    // Bob's own session (two open now) sees none of Alice's renders.
    let mut bob = Legacy::new(&server, Some("token-bob-22"));
    let init = bob.initialize("2025-06-18", json!({}));
    assert_eq!(init.status, 200, "{}", init.body);
    let status = bob.tool(
        "vidforge_get_render_status",
        json!({ "render_id": render_id }),
    );
    assert_eq!(status.result()["isError"], true);
    assert_eq!(
        status.result()["structuredContent"]["code"],
        "render_not_found"
    );

    // A third principal: the node is full (503).
    let mut carol = Legacy::new(&server, Some("token-carol-333"));
    let full = carol.initialize("2025-11-25", json!({}));
    assert_eq!(full.status, 503, "{}", full.body);
    assert_schema("core", "JSONRPCErrorResponse", &full.body);
    assert!(
        full.header("retry-after")
            .is_some_and(|v| v.parse::<u64>().is_ok_and(|s| s >= 1))
    );
    assert!(full.header("mcp-session-id").is_none());

    // Alice ends hers: room for Carol.
    let ended = alice.delete();
    assert!((200..300).contains(&ended), "DELETE answered {ended}");
    let init = carol.initialize("2025-11-25", json!({}));
    assert_eq!(init.status, 200, "{}", init.body);
    assert_eq!(carol.request("ping", json!({})).status, 200);
}

/// Reads a legacy server-message stream in a thread until its body ends (or the client's
/// 10 s bound); the receiver gets the moment it ended.
fn watch_stream_end(
    mut stream: reqwest::blocking::Response,
) -> std::sync::mpsc::Receiver<std::time::Instant> {
    use std::io::Read;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 1024];
        while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
        let _ = tx.send(std::time::Instant::now());
    });
    rx
}

/// A legacy session has one server-message stream at a time, and it ends with the session: a
/// second `GET` replaces the first (which ends at once), `DELETE` ends it within a second, and
/// so does the session's idle timeout, whatever keep-alives flowed on the stream.
#[test]
fn legacy_streams_are_one_per_session_and_end_with_it() {
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("data"),
        &["--legacy-session-idle-timeout", "2s"],
    );
    let mut client = Legacy::new(&server, None);
    assert_eq!(client.initialize("2025-11-25", json!({})).status, 200);
    let first = watch_stream_end(client.stream());
    let replaced_at = Instant::now();
    let second = watch_stream_end(client.stream());
    let ended = first
        .recv_timeout(Duration::from_secs(2))
        .expect("the first stream still open after a second GET");
    assert!(
        ended - replaced_at < Duration::from_secs(1),
        "{:?}",
        ended - replaced_at
    );
    assert!(second.try_recv().is_err(), "the new stream stays open");
    // Keep the session busy past its idle timeout: it is the requests that count.
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(800));
        assert_eq!(client.request("ping", json!({})).status, 200);
    }
    assert!(
        second.try_recv().is_err(),
        "the stream of a live session stays open"
    );
    let deleted_at = Instant::now();
    assert_eq!(client.delete(), 200);
    let ended = second
        .recv_timeout(Duration::from_secs(2))
        .expect("the stream outlived its session's DELETE");
    assert!(
        ended - deleted_at < Duration::from_secs(1),
        "{:?}",
        ended - deleted_at
    );

    // Left idle, the session expires after 2 s, and its stream with it within a second.
    let mut idle = Legacy::new(&server, None);
    assert_eq!(idle.initialize("2025-11-25", json!({})).status, 200);
    let opened_at = Instant::now();
    let stream = watch_stream_end(idle.stream());
    let ended = stream
        .recv_timeout(Duration::from_secs(6))
        .expect("the stream outlived its session's idle timeout");
    assert!(
        ended - opened_at < Duration::from_secs(4),
        "ended {:?} after it opened (idle timeout 2 s)",
        ended - opened_at
    );
    idle.request("ping", json!({})).error(404, -32001);
}
