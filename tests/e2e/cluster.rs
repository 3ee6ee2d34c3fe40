//! A three-node cluster on PostgreSQL behind nginx (`scripts/cluster.sh`), driven only
//! through the gateway, on loopback: renders on the task path with approval, idempotent
//! duplicates sent concurrently, isolation between principals, requests spread across every
//! node, and the faults a farm lives with: `kill -9` of the node that is rendering (another
//! node takes the render over after the lease), of the node that made a preview awaiting
//! approval, and a PostgreSQL restart (a clean temporary error meanwhile, then all resumes).
//! A legacy-era (initialize-based) client's session sticks to one node through the gateway.
//! The nodes share no directory: media lives in an S3-compatible bucket (moto's server,
//! `VIDFORGE_CLUSTER_MEDIA=s3`), and each node's data dir keeps only its own scratch and cache.
//! A long render splits into segments over the nodes; a node killed mid-segment costs that
//! segment only, and the joined file is seamless.
//! Every node delivers webhooks from the shared outbox to one verifying receiver: each event
//! arrives, and each attempt is one node's.
//!
//! Needs PostgreSQL 15 and nginx from Debian (`scripts/install-deps.sh`); fails without them.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support;
use crate::support::webhooks::{self, Receiver};
use crate::support::*;
use serde_json::{Value, json};

const ALICE: &str = "alice-cluster-token";
const BOB: &str = "bob-cluster-token-2";
const WAIT: Duration = Duration::from_secs(180);
/// Short leases, so a dead node's render moves on within seconds.
const LEASE: &str = "3s";
/// Sources longer than this split into 1 s segments (section 9); the 8 s `long` clip does not.
const SPLIT_OVER: &str = "9s";

struct Cluster {
    dir: tempfile::TempDir,
    env: HashMap<String, String>,
}

impl Cluster {
    /// Runs `scripts/cluster.sh` with its output in a file (never a pipe: the servers it
    /// starts could inherit one and hold it open); returns success and that output.
    fn script(state: &Path, args: &[&str], extra_env: &[(&str, String)]) -> (bool, String) {
        std::fs::create_dir_all(state.parent().unwrap()).unwrap();
        let log_path = state.with_extension(format!("{}.log", args[0]));
        let log = std::fs::File::create(&log_path).unwrap();
        let mut cmd = Command::new(repo_root().join("scripts/cluster.sh"));
        cmd.args(args)
            .env("VIDFORGE_CLUSTER_DIR", state)
            .env("VIDFORGE_BIN", vidforge_bin())
            .env("RUST_LOG", "info")
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let ok = cmd.status().expect("run scripts/cluster.sh").success();
        (ok, std::fs::read_to_string(&log_path).unwrap_or_default())
    }

    /// Three nodes whose webhooks all go to `hooks`.
    fn up(hooks: &Receiver) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("cluster");
        let up = || {
            Self::script(
                &state,
                &["up"],
                &[
                    ("VIDFORGE_CLUSTER_PORT", free_port().to_string()),
                    // No shared directory: the nodes share PostgreSQL and a bucket only.
                    ("VIDFORGE_CLUSTER_MEDIA", "s3".to_string()),
                    (
                        "VIDFORGE_CLUSTER_TOKENS",
                        format!("{ALICE}=alice,{BOB}=bob"),
                    ),
                    (
                        "VIDFORGE_CLUSTER_ARGS",
                        format!(
                            "--lease-ttl {LEASE} --render-slots 1 --per-principal-concurrent 16 \
                             --webhook-url {} --webhook-secret {} --webhook-retry-initial 200ms \
                             --segment-min-duration {SPLIT_OVER} --segment-seconds 1s",
                            hooks.url(),
                            webhooks::SECRET
                        ),
                    ),
                ],
            )
        };
        let mut out = up();
        if !out.0 {
            // Free ports are picked, released and then bound: another test may take one in
            // between. Once more, on new ports, and say so.
            eprintln!(
                "cluster.sh up failed once; retrying on other ports:\n{}",
                out.1
            );
            let _ = Self::script(&state, &["down"], &[]);
            out = up();
        }
        assert!(out.0, "cluster.sh up failed:\n{}", out.1);
        let text = std::fs::read_to_string(state.join("cluster.env")).unwrap();
        let env = text
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.trim_matches('\'').to_string()))
            .collect();
        Cluster { dir, env }
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("cluster")
    }

    fn run(&self, args: &[&str]) {
        let out = Self::script(&self.state(), args, &[]);
        assert!(out.0, "cluster.sh {args:?} failed:\n{}", out.1);
    }

    fn base(&self) -> &str {
        &self.env["VIDFORGE_CLUSTER_URL"]
    }

    fn mcp(&self, token: &str) -> Mcp {
        Mcp::new(self.base()).with_token(token)
    }

    /// `psql -Atc SQL` against the cluster's database.
    fn sql(&self, sql: &str) -> String {
        let out = Command::new("psql")
            .args([&self.env["PG_URL"], "-Atc", sql])
            .output()
            .expect("psql");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Which nodes answered requests, from nginx's access log.
    fn upstreams_seen(&self) -> BTreeSet<String> {
        let log = std::fs::read_to_string(&self.env["NGINX_ACCESS_LOG"]).unwrap_or_default();
        // `upstream=A` or, when nginx moved on from a dead node, `upstream=A, B`.
        log.lines()
            .filter_map(|l| l.split_once("upstream=").map(|(_, rest)| rest))
            .flat_map(|rest| rest.split([',', ' ']))
            .filter(|u| u.starts_with("127.0.0.1:"))
            .map(str::to_string)
            .collect()
    }

    fn upload(&self, token: &str, path: &Path) -> String {
        let name = path.file_name().unwrap().to_str().unwrap();
        let resp = reqwest::blocking::Client::new()
            .post(format!("{}/assets?name={name}", self.base()))
            .bearer_auth(token)
            .header("Content-Type", "application/octet-stream")
            .body(std::fs::read(path).unwrap())
            .send()
            .expect("POST /assets through the gateway");
        let status = resp.status();
        let body: Value = resp.json().unwrap();
        assert!(status.is_success(), "upload failed: {status} {body}");
        body["uri"].as_str().unwrap().to_string()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // What the gateway saw: the reason behind a 502 is only in its error log, and the
            // access log says which nodes a failed or moved-on request tried.
            let read = |key: &str| std::fs::read_to_string(&self.env[key]).unwrap_or_default();
            let errors = read("NGINX_ERROR_LOG");
            let errors: Vec<&str> = errors.lines().collect();
            let errors = errors[errors.len().saturating_sub(40)..].join("\n");
            let access = read("NGINX_ACCESS_LOG");
            let failovers: Vec<&str> = access
                .lines()
                .filter(|l| l.contains("\" 5") || l.contains(", 127.0.0.1:"))
                .collect();
            eprintln!(
                "--- nginx error log (last 40 lines):\n{errors}\n--- requests that failed or \
                 moved on:\n{}",
                failovers.join("\n")
            );
        }
        let _ = Self::script(&self.state(), &["down"], &[]);
    }
}

/// One MCP call through the gateway, sent again while nginx answers 502 (a request in flight
/// to a node at the moment it dies fails that way: nginx does not resend a POST it may have
/// delivered; the next request skips the dead node) or while the answer is the store's
/// temporary outage (`service_unavailable`, `temporary`, `retry_after_ms`: just after a PostgreSQL
/// restart a node may still meet it once more), as the contract tells clients to.
#[track_caller]
fn call(m: &mut Mcp, method: &str, params: Value) -> Reply {
    for _ in 0..40 {
        let r = m.call(method, params.clone(), Caps::FULL);
        if r.status != 502 && !store_outage(&r.body) {
            return r;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    panic!("the gateway kept answering 502 or a store outage to {method}");
}

/// Whether `body` is the temporary store-outage error, as a JSON-RPC error (`tasks/*`) or as a
/// tool error (`tools/call`).
fn store_outage(body: &Value) -> bool {
    let (env, code) = if body["result"]["isError"] == true {
        (&body["result"]["structuredContent"], "code")
    } else {
        (&body["error"]["data"], "machine_code")
    };
    env[code] == "service_unavailable" && env["temporary"] == true && env["retry_after_ms"].is_u64()
}

/// Approves the watermark preview of task `id` (`tasks/update`).
#[track_caller]
fn approve(m: &mut Mcp, id: &str) {
    let update = call(
        m,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {"watermark-approval-1":
            {"action": "accept", "content": {"approved": true}}}}),
    );
    assert_eq!(update.result()["resultType"], "complete", "{}", update.body);
}

/// `vidforge_render_video` on the task path.
#[track_caller]
fn render(m: &mut Mcp, arguments: Value) -> Reply {
    call(
        m,
        "tools/call",
        json!({ "name": "vidforge_render_video", "arguments": arguments }),
    )
}

/// Polls `tasks/get` through the gateway until `pred` holds.
#[track_caller]
fn wait(m: &mut Mcp, id: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let reply = call(m, "tasks/get", json!({ "taskId": id }));
        let task = reply.result().clone();
        if pred(&task) {
            return task;
        }
        assert!(
            Instant::now() < deadline,
            "task {id} never got there; last: {task}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// One JSON-RPC message of a legacy-era (2025-11-25) client, with the session header when it
/// has one: the HTTP status, the session id the response names, and the message.
fn legacy_post(
    url: &str,
    token: &str,
    session: Option<&str>,
    body: &Value,
) -> (u16, Option<String>, Value) {
    let headers: Vec<(&str, &str)> = match session {
        Some(s) => vec![
            ("Mcp-Session-Id", s),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        None => Vec::new(),
    };
    let reply = post_wire(url, Some(token), &headers, body);
    let opened = reply.header("mcp-session-id").map(str::to_owned);
    (reply.status, opened, reply.body)
}

fn status_of(task: &Value) -> &str {
    task["status"].as_str().unwrap_or_default()
}

/// The node index (1-based) that holds the render's lease, once one does.
fn rendering_node(c: &Cluster, id: &str) -> usize {
    let deadline = Instant::now() + WAIT;
    loop {
        let owner = c.sql(&format!(
            "SELECT coalesce(lease_owner, '') FROM renders WHERE id = '{id}' AND state = 'rendering' \
             AND doc->'progress'->>'frames_done' IS NOT NULL AND (doc->'progress'->>'frames_done')::int > 0"
        ));
        if let Some(n) = owner.strip_prefix("node") {
            return n.parse().unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "render {id} never started rendering"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn download_and_probe(c: &Cluster, token: &str, done: &Value, out: &Path) -> (u32, u32) {
    let sc = &done["result"]["structuredContent"];
    let uri = sc["video_uri"].as_str().unwrap();
    let path = uri.strip_prefix("vidforge:/").unwrap();
    let bytes = reqwest::blocking::Client::new()
        .get(format!("{}{path}", c.base()))
        .bearer_auth(token)
        .send()
        .unwrap()
        .bytes()
        .unwrap();
    assert_eq!(bytes.len() as u64, sc["size_bytes"].as_u64().unwrap());
    std::fs::write(out, &bytes).unwrap();
    let (w, h, codec, _) = probe_video(out);
    assert_eq!(codec, "h264");
    (w, h)
}

/// Opens `subscriptions/listen` for `id` on one node (directly, not through the gateway),
/// says so on `ready` once acknowledged, and reads until a `completed` status arrives.
fn listen_until_completed(node: &str, id: &str, ready: std::sync::mpsc::Sender<()>) -> bool {
    use std::io::{BufRead, BufReader};
    let mut mcp = Mcp::new(node).with_token(ALICE);
    let body = mcp.envelope(
        "subscriptions/listen",
        json!({"notifications": {"taskIds": [id]}}),
        Caps::TASKS,
    );
    let resp = reqwest::blocking::Client::builder()
        .timeout(WAIT)
        .build()
        .unwrap()
        .post(&mcp.url)
        .bearer_auth(ALICE)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", PROTOCOL)
        .header("Mcp-Method", "subscriptions/listen")
        .body(body.to_string())
        .send()
        .expect("listen");
    assert_eq!(resp.status().as_u16(), 200);
    for line in BufReader::new(resp).lines() {
        let Ok(line) = line else { return false };
        let Some(data) = line.strip_prefix("data:") else {
            continue;
        };
        let Ok(message) = serde_json::from_str::<Value>(data.trim()) else {
            continue;
        };
        if message["method"] == "notifications/subscriptions/acknowledged" {
            let _ = ready.send(());
        } else if message["params"]["taskId"] == json!(id)
            && message["params"]["status"] == "completed"
        {
            return true;
        }
    }
    false
}

#[test]
fn three_nodes_behind_nginx_serve_mcp_and_survive_node_and_database_faults() {
    let hooks = Receiver::start(webhooks::SECRET);
    let c = Cluster::up(&hooks);
    let dir = c.dir.path();
    let short = make_clip(dir, "short.mp4", 320, 180, 0.6, true);
    let long = make_clip(dir, "long.mp4", 640, 360, 8.0, false);
    let logo = make_logo(dir);
    let short = c.upload(ALICE, &short);
    let long = c.upload(ALICE, &long);
    let logo = c.upload(ALICE, &logo);
    let mut alice = c.mcp(ALICE);

    // ---- 1. The task path with approval, every call through the gateway (round-robin:
    // consecutive calls land on different nodes).
    let args = json!({"source_asset_uri": short, "output_format": "mp4", "resolution": "720p",
        "watermark": {"image_asset_uri": logo, "position": "top_left", "opacity": 0.6}});
    let created = render(&mut alice, args);
    let id = created.result()["taskId"].as_str().unwrap().to_string();
    // Durable before the answer, on every node: the next calls go to the other two.
    for _ in 0..3 {
        assert_eq!(alice.task_get(&id, Caps::FULL).status, 200);
    }
    wait(&mut alice, &id, |t| status_of(t) == "input_required");
    // The approval page through the gateway: a browser session signed in on one node is
    // accepted by every node (it derives from the token and the principal's session epoch
    // in the shared store), and each node's /metrics stays off the gateway.
    let http = reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let signed = http
        .post(format!("{}/signin", c.base()))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(format!("token={ALICE}&next=/"))
        .send()
        .unwrap();
    assert_eq!(signed.status().as_u16(), 303);
    let session = signed
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix("vidforge_session="))
        .and_then(|v| v.split(';').next())
        .map(|v| format!("vidforge_session={v}"))
        .expect("a session cookie");
    for _ in 0..3 {
        let page = http
            .get(format!("{}/approvals/{id}", c.base()))
            .header("Cookie", &session)
            .send()
            .unwrap();
        assert_eq!(page.status().as_u16(), 200);
        assert!(page.text().unwrap().contains("id=\"decide\""));
    }
    let metrics = http.get(format!("{}/metrics", c.base())).send().unwrap();
    assert_eq!(metrics.status().as_u16(), 404);
    // Signing out through one node ends the session on every node (round-robin: the next
    // three requests land on the three nodes).
    let page = http
        .get(format!("{}/approvals/{id}", c.base()))
        .header("Cookie", &session)
        .send()
        .unwrap()
        .text()
        .unwrap();
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the page carries the CSRF token")
        .to_string();
    let out = http
        .post(format!("{}/signout", c.base()))
        .header("Cookie", &session)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}"))
        .send()
        .unwrap();
    assert_eq!(out.status().as_u16(), 303);
    for _ in 0..3 {
        let page = http
            .get(format!("{}/approvals/{id}", c.base()))
            .header("Cookie", &session)
            .send()
            .unwrap();
        assert_eq!(
            page.status().as_u16(),
            303,
            "a signed-out cookie, on any node"
        );
    }
    // Rendered ahead while the person decides (a speculative render is claimed under a
    // lease like any other): parked in the shared record, no node holds it once it is done.
    let deadline = Instant::now() + WAIT;
    let parked = format!(
        "SELECT (doc->'speculation'->'state') ? 'done' AND lease_owner IS NULL \
         FROM renders WHERE id = '{id}'"
    );
    while c.sql(&parked) != "t" {
        assert!(
            Instant::now() < deadline,
            "never rendered ahead of approval"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The node that made the preview dies while the render awaits the decision: the
    // decision, taken by another node, still finishes it (awaiting holds no node), at once
    // (the speculative render's outcome becomes the result in the decision's write).
    let preview = call(
        &mut alice,
        "resources/read",
        json!({"uri": format!("vidforge://renders/{id}/watermark-preview.png")}),
    );
    assert_eq!(preview.result()["contents"][0]["mimeType"], "image/png");
    c.run(&["node-kill", "1"]);
    approve(&mut alice, &id);
    let done = alice.task_get(&id, Caps::FULL).result().clone();
    assert_eq!(status_of(&done), "completed", "{done}");
    assert_eq!(
        done["result"]["structuredContent"]["watermark_applied"],
        true
    );
    assert_eq!(
        download_and_probe(&c, ALICE, &done, &dir.join("approved.mp4")),
        (1280, 720)
    );
    c.run(&["node-start", "1"]);

    // ---- 1b. A legacy-era client (initialize, 2025-11-25) through the gateway: the gateway
    // keeps its session on one node (docs/cluster.md), so every call of the session works
    // and sees the render from section 1; the two other nodes answer the session 404.
    let gateway = format!("{}/mcp", c.base());
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "cluster-test", "version": "1"}}});
    let (status, session, body) = legacy_post(&gateway, ALICE, None, &init);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["protocolVersion"], "2025-11-25");
    let session = session.expect("an Mcp-Session-Id");
    let status_call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "vidforge_get_render_status", "arguments": {"render_id": id}}});
    for _ in 0..4 {
        let (status, _, body) = legacy_post(&gateway, ALICE, Some(&session), &status_call);
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            body["result"]["structuredContent"]["state"], "succeeded",
            "{body}"
        );
    }
    let (status, _, body) = legacy_post(&gateway, BOB, Some(&session), &status_call);
    assert_eq!(
        (status, &body["error"]["code"]),
        (404, &json!(-32001)),
        "{body}"
    );
    let answers: Vec<u16> = c.env["NODE_URLS"]
        .split_whitespace()
        .map(|node| legacy_post(&format!("{node}/mcp"), ALICE, Some(&session), &status_call).0)
        .collect();
    let mut sorted = answers.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [200, 404, 404],
        "one node holds the session: {answers:?}"
    );

    // ---- 2. Concurrent duplicates with one idempotency key, spread over the nodes: one
    // render. Another principal cannot see it.
    let dup_args = json!({"source_asset_uri": short, "output_format": "webm",
        "resolution": "720p", "idempotency_key": "cluster-dup"});
    let ids: BTreeSet<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..6)
            .map(|_| {
                let mut m = c.mcp(ALICE);
                let a = dup_args.clone();
                s.spawn(move || {
                    let r = m.tool("vidforge_render_video", a, Caps::FULL);
                    r.result()["taskId"].as_str().unwrap().to_string()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(ids.len(), 1, "one render for one key: {ids:?}");
    let dup = ids.into_iter().next().unwrap();
    let mut bob = c.mcp(BOB);
    for _ in 0..3 {
        let other = bob.task_get(&dup, Caps::FULL);
        assert!(
            other.body.get("error").is_some(),
            "bob must not see alice's task: {}",
            other.body
        );
    }
    wait(&mut alice, &dup, |t| status_of(t) == "completed");

    // ---- 3. kill -9 of the node that is rendering: another node takes over after the
    // lease, the client polling through the gateway sees working and then completed, and
    // the output exists once.
    let created = render(
        &mut alice,
        json!({"source_asset_uri": long, "output_format": "mp4", "resolution": "1080p"}),
    );
    let id = created.result()["taskId"].as_str().unwrap().to_string();
    let victim = rendering_node(&c, &id);
    c.run(&["node-kill", &victim.to_string()]);
    let working = call(&mut alice, "tasks/get", json!({ "taskId": id }));
    assert_eq!(status_of(working.result()), "working", "{}", working.body);
    let done = wait(&mut alice, &id, |t| {
        matches!(status_of(t), "completed" | "failed")
    });
    assert_eq!(status_of(&done), "completed", "{done}");
    assert_eq!(
        download_and_probe(&c, ALICE, &done, &dir.join("taken-over.mp4")),
        (1920, 1080)
    );
    let row = c.sql(&format!(
        "SELECT doc->>'attempts', doc->>'crashes', lease_owner IS NULL FROM renders WHERE id = '{id}'"
    ));
    assert_eq!(
        row, "2|1|t",
        "one crash counted, one more attempt, lease released"
    );
    let results = support::s3::list_keys(&c.env["S3_ENDPOINT"], &format!("cluster/results/{id}/"));
    assert_eq!(results.len(), 1, "no duplicate output: {results:?}");
    c.run(&["node-start", &victim.to_string()]);

    // ---- 4. PostgreSQL is down for longer than a lease while a render runs: calls during
    // the outage (a create, an upload, a poll) answer the temporary `service_unavailable`
    // (never `render_failed`, a hang or a dropped connection), the render's node stays its
    // holder (a lease that ran out while nobody could renew it is no crash), and everything
    // resumes.
    let created = render(
        &mut alice,
        json!({"source_asset_uri": long, "output_format": "mp4", "resolution": "1080p"}),
    );
    let through_outage = created.result()["taskId"].as_str().unwrap().to_string();
    let holder = rendering_node(&c, &through_outage);
    c.run(&["pg-stop"]);
    let stopped = Instant::now();
    let create = alice.tool(
        "vidforge_render_video",
        json!({"source_asset_uri": short, "output_format": "mp4", "resolution": "720p"}),
        Caps::FULL,
    );
    assert!(store_outage(&create.body), "create: {}", create.body);
    let upload = reqwest::blocking::Client::new()
        .post(format!("{}/assets?name=during-outage.mp4", c.base()))
        .bearer_auth(ALICE)
        .header("Content-Type", "application/octet-stream")
        .body(std::fs::read(dir.join("short.mp4")).unwrap())
        .send()
        .unwrap();
    assert_eq!(upload.status().as_u16(), 503);
    assert!(upload.headers().contains_key("retry-after"));
    let body: Value = upload.json().unwrap();
    assert_eq!(body["code"], "service_unavailable", "upload: {body}");
    assert_eq!(body["temporary"], true);
    // Twice the lease: every lease runs out while the database is away.
    std::thread::sleep((Duration::from_secs(6)).saturating_sub(stopped.elapsed()));
    c.run(&["pg-start"]);
    let mut outage_answers = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let body = alice.envelope("tasks/get", json!({"taskId": dup}), Caps::FULL);
        let r = alice.raw(
            &body,
            &[
                ("MCP-Protocol-Version".into(), PROTOCOL.into()),
                ("Mcp-Method".into(), "tasks/get".into()),
                ("Mcp-Name".into(), dup.clone()),
            ],
        );
        if r.status == 200 && r.body.get("result").is_some() {
            break;
        }
        // During the outage: a JSON-RPC error that says it is temporary and when to retry.
        assert!(
            r.status == 200 && r.body.get("error").is_some() && store_outage(&r.body),
            "an outage answers a temporary error, got {} {}",
            r.status,
            r.body
        );
        outage_answers += 1;
        assert!(
            Instant::now() < deadline,
            "the cluster never recovered: {}",
            r.body
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!("PostgreSQL outage: {outage_answers} temporary errors before recovery");
    let done = wait(&mut alice, &through_outage, |t| {
        matches!(status_of(t), "completed" | "failed")
    });
    assert_eq!(status_of(&done), "completed", "{done}");
    let row = c.sql(&format!(
        "SELECT doc->>'attempts', doc->>'crashes', lease_owner IS NULL FROM renders \
         WHERE id = '{through_outage}'"
    ));
    assert_eq!(
        row, "1|0|t",
        "the outage is no crash: node{holder} kept the render (attempts|crashes|released)"
    );
    // A restart (a short outage) too.
    c.run(&["pg-restart"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while alice
        .try_call("tasks/get", json!({"taskId": dup}), Caps::FULL)
        .is_none()
    {
        assert!(
            Instant::now() < deadline,
            "the cluster never recovered from a restart"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let created = render(
        &mut alice,
        json!({"source_asset_uri": short, "output_format": "mp4", "resolution": "720p"}),
    );
    let id = created.result()["taskId"].as_str().unwrap().to_string();
    wait(&mut alice, &id, |t| status_of(t) == "completed");

    // ---- 5. Push across nodes: `subscriptions/listen` on each node streams the status of a
    // render that runs on one of them (so at least two hear it through the store's feed).
    let args = json!({"source_asset_uri": short, "output_format": "mp4", "resolution": "720p",
        "watermark": {"image_asset_uri": logo, "position": "center", "opacity": 0.5}});
    let id = render(&mut alice, args).result()["taskId"]
        .as_str()
        .unwrap()
        .to_string();
    wait(&mut alice, &id, |t| status_of(t) == "input_required");
    let heard: Vec<bool> = std::thread::scope(|s| {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let listeners: Vec<_> = (1..=3)
            .map(|i| {
                let url = c.env[&format!("NODE{i}_URL")].clone();
                let (id, ready) = (id.clone(), ready_tx.clone());
                s.spawn(move || listen_until_completed(&url, &id, ready))
            })
            .collect();
        for _ in 0..3 {
            ready_rx
                .recv_timeout(WAIT)
                .expect("every listen stream opens");
        }
        approve(&mut alice, &id);
        listeners.into_iter().map(|l| l.join().unwrap()).collect()
    });
    assert_eq!(
        heard,
        vec![true; 3],
        "every node's stream saw the render complete"
    );

    // ---- 6. Cancel through the gateway reaches the node that renders (the change feed sets
    // its flag), and an expired task answers `task_expired` on every node.
    let created = render(
        &mut alice,
        json!({"source_asset_uri": long, "output_format": "mp4", "resolution": "1080p"}),
    );
    let id = created.result()["taskId"].as_str().unwrap().to_string();
    let renderer = rendering_node(&c, &id);
    let ack = call(&mut alice, "tasks/cancel", json!({ "taskId": id }));
    assert_eq!(ack.result()["resultType"], "complete", "{}", ack.body);
    let cancelled = wait(&mut alice, &id, |t| {
        matches!(status_of(t), "cancelled" | "completed")
    });
    assert_eq!(
        status_of(&cancelled),
        "cancelled",
        "node{renderer} stopped: {cancelled}"
    );
    let frames = c.sql(&format!(
        "SELECT doc->'progress'->>'frames_done', doc->'progress'->>'frames_total' FROM renders WHERE id = '{id}'"
    ));
    let (done_frames, total) = frames.split_once('|').unwrap();
    assert!(
        done_frames.parse::<u64>().unwrap_or(0) < total.parse::<u64>().unwrap_or(1),
        "stopped part-way: {frames}"
    );
    assert_eq!(
        support::s3::list_keys(&c.env["S3_ENDPOINT"], &format!("cluster/results/{id}/")),
        Vec::<String>::new(),
        "a cancelled render leaves no output"
    );
    // Expiry is the record's age, so any node answers it: age one on the database.
    c.sql(&format!(
        "UPDATE renders SET doc = jsonb_set(doc, '{{created_at}}', '1') WHERE id = '{dup}'"
    ));
    for _ in 0..3 {
        let expired = call(&mut alice, "tasks/get", json!({ "taskId": dup }));
        assert_eq!(
            expired.error()["data"]["machine_code"],
            "task_expired",
            "{}",
            expired.body
        );
    }

    // ---- 7. A node frozen past its lease (SIGSTOP: a stalled host, a long network cut): the
    // render moves on to another node; when the frozen one wakes up it finds its lease gone
    // and stops without writing (the attempt count is the fencing token).
    let created = render(
        &mut alice,
        json!({"source_asset_uri": long, "output_format": "mp4", "resolution": "1080p"}),
    );
    let id = created.result()["taskId"].as_str().unwrap().to_string();
    let frozen = rendering_node(&c, &id);
    let pid = std::fs::read_to_string(&c.env[&format!("NODE{frozen}_PID_FILE")])
        .unwrap()
        .trim()
        .to_string();
    let signal = |sig: &str| {
        assert!(
            Command::new("kill")
                .args([sig, &pid])
                .status()
                .unwrap()
                .success()
        );
    };
    signal("-STOP");
    let deadline = Instant::now() + WAIT;
    loop {
        let owner = c.sql(&format!(
            "SELECT lease_owner FROM renders WHERE id = '{id}'"
        ));
        if !owner.is_empty() && owner != format!("node{frozen}") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "nobody took the frozen node's render over"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    signal("-CONT");
    let done = wait(&mut alice, &id, |t| {
        matches!(status_of(t), "completed" | "failed")
    });
    assert_eq!(status_of(&done), "completed", "{done}");
    let row = c.sql(&format!(
        "SELECT doc->>'attempts', doc->>'crashes' FROM renders WHERE id = '{id}'"
    ));
    assert_eq!(row, "2|1", "one takeover");
    let log_path = c.env[&format!("NODE{frozen}_LOG")].clone();
    let deadline = Instant::now() + WAIT;
    while !std::fs::read_to_string(&log_path)
        .unwrap_or_default()
        .contains("another node took it over")
    {
        assert!(Instant::now() < deadline, "the woken node never noticed");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        download_and_probe(&c, ALICE, &done, &dir.join("after-freeze.mp4")),
        (1920, 1080)
    );

    // ---- 8. Webhooks: every event of the run (node kills, a frozen node and the database
    // restart included) reached the receiver, verified; then renders spread over the three
    // healthy nodes, whose dispatchers all compete for the outbox: each event is delivered
    // by exactly one node, once.
    let spread: Vec<String> = (0..6)
        .map(|_| {
            let r = render(
                &mut alice,
                json!({"source_asset_uri": short, "output_format": "webm", "resolution": "720p"}),
            );
            r.result()["taskId"].as_str().unwrap().to_string()
        })
        .collect();
    for id in &spread {
        wait(&mut alice, id, |t| status_of(t) == "completed");
        hooks.wait_for(id, "render.succeeded", WAIT);
    }
    let deadline = Instant::now() + WAIT;
    while c.sql("SELECT count(*) FROM webhook_outbox WHERE status = 'pending'") != "0" {
        assert!(Instant::now() < deadline, "webhook events still pending");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        c.sql("SELECT count(*) FROM webhook_outbox WHERE status <> 'delivered'"),
        "0"
    );
    let received = hooks.delivered();
    let mut receipts: HashMap<String, usize> = HashMap::new();
    for d in &received {
        *receipts
            .entry(d["id"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    let ids = c.sql("SELECT string_agg(id, ',') FROM webhook_outbox");
    for id in ids.split(',') {
        assert!(receipts.contains_key(id), "event {id} never arrived");
    }
    assert_eq!(hooks.state()["invalid"], 0, "every delivery verified");
    let mut nodes = BTreeSet::new();
    for id in &spread {
        let row = c.sql(&format!(
            "SELECT id, doc->>'attempts', doc->'last_attempts'->0->>'node' FROM webhook_outbox
             WHERE doc->'render'->>'id' = '{id}'"
        ));
        let mut fields = row.split('|');
        let (event, attempts, node) = (
            fields.next().unwrap().to_string(),
            fields.next().unwrap().to_string(),
            fields.next().unwrap().to_string(),
        );
        assert_eq!(attempts, "1", "{row}");
        assert_eq!(
            receipts.get(&event),
            Some(&1),
            "{event} arrived more than once"
        );
        nodes.insert(node);
    }
    println!(
        "webhooks: {} events, {} receipts; the last six delivered by {nodes:?}",
        ids.split(',').count(),
        received.len()
    );

    // ---- 9. Segment-parallel rendering across the farm: a 12 s source splits into 1 s
    // segments over the three nodes' slots. A node that is not the coordinator is killed while
    // it renders a segment: that segment alone runs again elsewhere (no other segment runs
    // twice), the render itself is never restarted, and the joined file is seamless. Nothing
    // of the segments is left: no record, no object in the bucket, no file on any node.
    let seconds = 12.0;
    let tone = crate::segments::tone_clip(dir, "tone.mp4", (640, 360), seconds);
    let tone = c.upload(ALICE, &tone);
    let created = render(
        &mut alice,
        json!({"source_asset_uri": tone, "output_format": "mp4", "resolution": "1080p"}),
    );
    let id = created.result()["taskId"].as_str().unwrap().to_string();
    // (index, state, claims, lease owner) of each of the render's segments.
    let row_of = |c: &Cluster| -> Vec<(u64, String, u64, String)> {
        c.sql(&format!(
            "SELECT idx, state, attempts, coalesce(lease_owner, '') FROM segments \
             WHERE render_id = '{id}' ORDER BY idx"
        ))
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('|').collect();
            (
                f[0].parse().unwrap(),
                f[1].into(),
                f[2].parse().unwrap(),
                f[3].into(),
            )
        })
        .collect()
    };
    let deadline = Instant::now() + WAIT;
    let victim = loop {
        let coordinator = c.sql(&format!(
            "SELECT coalesce(lease_owner, '') FROM renders WHERE id = '{id}'"
        ));
        let rows = row_of(&c);
        let done = rows.iter().filter(|r| r.1 == "done").count();
        let elsewhere = rows
            .iter()
            .find(|r| r.1 == "running" && !r.3.is_empty() && r.3 != coordinator);
        if let (true, Some(r)) = (done > 0 && !coordinator.is_empty(), elsewhere) {
            break r.3.strip_prefix("node").unwrap().to_string();
        }
        assert!(
            Instant::now() < deadline,
            "the render never ran a segment on a second node: {rows:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    c.run(&["node-kill", &victim]);
    // What the dead node held (it may have moved on to the next segment meanwhile).
    let lost: Vec<u64> = row_of(&c)
        .into_iter()
        .filter(|r| r.1 == "running" && r.3 == format!("node{victim}"))
        .map(|r| r.0)
        .collect();
    assert!(!lost.is_empty(), "node{victim} died holding no segment");
    eprintln!("split render: node{victim} killed holding segments {lost:?}");
    // Until the render completes: the lost segment is claimed again by another node, and no
    // segment is ever claimed more than once besides those the dead node held.
    let mut retaken = false;
    let deadline = Instant::now() + WAIT;
    let done = loop {
        let task = call(&mut alice, "tasks/get", json!({ "taskId": id }))
            .result()
            .clone();
        if matches!(status_of(&task), "completed" | "failed") {
            break task;
        }
        for (idx, _, attempts, owner) in row_of(&c) {
            if lost.contains(&idx) && attempts >= 2 {
                assert_ne!(owner, format!("node{victim}"));
                retaken = true;
            }
            assert!(
                lost.contains(&idx) || attempts <= 1,
                "segment {idx} ran again ({attempts} claims), not only the lost {lost:?}"
            );
        }
        assert!(
            Instant::now() < deadline,
            "the split render never ended: {task}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status_of(&done), "completed", "{done}");
    assert!(
        retaken,
        "segments {lost:?} of node{victim} were never taken over"
    );
    assert_eq!(
        c.sql(&format!(
            "SELECT doc->>'attempts', doc->>'crashes' FROM renders WHERE id = '{id}'"
        )),
        "1|0",
        "a lost segment is no lost render"
    );
    let file = dir.join("split.mp4");
    assert_eq!(download_and_probe(&c, ALICE, &done, &file), (1920, 1080));
    crate::segments::assert_seamless(&file, seconds);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let records = c.sql(&format!(
            "SELECT count(*) FROM segments WHERE render_id = '{id}'"
        ));
        let objects =
            support::s3::list_keys(&c.env["S3_ENDPOINT"], &format!("cluster/segments/{id}/"));
        if records == "0" && objects.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "segments left: {records} records, objects {objects:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The dead node comes back and sweeps what it was writing when it died.
    c.run(&["node-start", &victim]);

    // Every node answered some of it.
    assert_eq!(c.upstreams_seen().len(), 3, "{:?}", c.upstreams_seen());

    // No shared directory: the media is in the bucket, and no node's data dir holds an
    // asset, a preview or a result (only its bounded cache of sources).
    let keys = support::s3::list_keys(&c.env["S3_ENDPOINT"], "cluster/");
    for kind in ["assets/", "previews/", "results/"] {
        assert!(
            keys.iter()
                .any(|k| k.starts_with(&format!("cluster/{kind}"))),
            "no {kind} in the bucket: {keys:?}"
        );
    }
    for i in 1..=3 {
        let data = PathBuf::from(&c.env[&format!("NODE{i}_DATA_DIR")]);
        for kind in ["assets", "previews", "results"] {
            let files: Vec<_> = walk_files(&data.join(kind));
            assert!(files.is_empty(), "node{i} keeps media files: {files:?}");
        }
        // A restarted node's boot sweep is under way: give it a moment.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !walk_files(&data.join("segments")).is_empty() {
            assert!(
                Instant::now() < deadline,
                "node{i} keeps segment files: {:?}",
                walk_files(&data.join("segments"))
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Every file under `dir` (none when it does not exist).
fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.path().is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path());
            }
        }
    }
    out
}
