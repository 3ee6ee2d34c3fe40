//! The MCP front's protocol surface, driven over real HTTP against a real `vidforge serve`:
//! discovery, tool listing, header and `_meta` errors, argument errors, unknown ids, auth and
//! principal isolation. Every response is validated against the official JSON Schemas.

use serde_json::{Value, json};
mod support;
use support::*;

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
