//! Helpers shared by the end-to-end tests in `tests/`: a real `vidforge serve` process on a
//! free loopback port with its own temp data dir, a minimal MCP-over-HTTP client, and JSON
//! Schema validation against the official schemas vendored in `spec/schemas/`. Each test
//! file includes it as `mod support;`, so it is compiled with the test and sees the
//! `CARGO_BIN_EXE_*` paths Cargo gives that test target.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub mod oauth;
pub mod s3;
pub mod webhooks;

pub const PROTOCOL: &str = "2026-07-28";
pub const TASKS: &str = "io.modelcontextprotocol/tasks";

/// The `vidforge` binary Cargo built for this test run: these tests are targets of the
/// binary's own package (`server/Cargo.toml` declares them), so `cargo test` rebuilds it first
/// and hands its path over in `CARGO_BIN_EXE_vidforge`. Never a stale binary from `target/`.
pub fn vidforge_bin() -> PathBuf {
    built_bin("vidforge", option_env!("CARGO_BIN_EXE_vidforge"))
}

/// The `vidforge-conformance` binary (vidforge with the conformance suite's fixtures mounted),
/// built by Cargo for this test run: only tests declared in `conformance/Cargo.toml` have it.
pub fn conformance_bin() -> PathBuf {
    built_bin(
        "vidforge-conformance",
        option_env!("CARGO_BIN_EXE_vidforge-conformance"),
    )
}

fn built_bin(name: &str, path: Option<&str>) -> PathBuf {
    let path = path.unwrap_or_else(|| {
        panic!(
            "this test target has no `{name}` binary: declare it in the [[test]] list of the \
             package that builds {name}"
        )
    });
    PathBuf::from(path)
}

/// The repository's root: the test targets are declared in `server/` and `conformance/`,
/// one folder below it.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository root")
        .to_path_buf()
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// A running `vidforge serve`, killed (SIGKILL) on drop.
pub struct Server {
    pub port: u16,
    /// The address it binds (`127.0.0.1` unless [`Server::start_listening_on`] says otherwise);
    /// clients still reach it at [`Server::base`], on loopback.
    pub listen_host: String,
    pub data_dir: PathBuf,
    pub args: Vec<String>,
    /// The binary serving: [`vidforge_bin`] or [`conformance_bin`].
    pub bin: PathBuf,
    /// Extra environment variables of the server process.
    pub env: Vec<(String, String)>,
    child: Option<Child>,
    log_path: PathBuf,
}

/// What `vidforge serve` prints once it has bound its port.
const LISTENING: &str = "vidforge listening on http://";

/// How a start ended.
enum Ready {
    Serving,
    /// Another process holds the port.
    PortTaken,
}

impl Server {
    /// Starts a server on a fresh port with `extra` flags (e.g. `--token`, `--approval-timeout`).
    pub fn start(data_dir: &Path, extra: &[&str]) -> Server {
        Server::start_bin(vidforge_bin(), data_dir, extra)
    }

    /// [`Server::start`] with its console output written to `log` instead of beside the data
    /// dir, so a test that fills the data dir's file system still reads what the server said.
    pub fn start_logging_to(data_dir: &Path, extra: &[&str], log: &Path) -> Server {
        let mut server = Server::new(vidforge_bin(), data_dir, extra);
        server.log_path = log.to_path_buf();
        server.spawn();
        server
    }

    /// [`Server::start`] with extra environment variables (e.g. `VIDFORGE_*` settings).
    pub fn start_with_env(data_dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let mut server = Server::new(vidforge_bin(), data_dir, extra);
        server.env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        server.spawn();
        server
    }

    /// [`Server::start`] bound to `host` (e.g. `0.0.0.0`, so that the test can also connect
    /// from one of this machine's other addresses).
    pub fn start_listening_on(host: &str, data_dir: &Path, extra: &[&str]) -> Server {
        let mut server = Server::new(vidforge_bin(), data_dir, extra);
        server.listen_host = host.to_string();
        server.spawn();
        server
    }

    /// [`Server::start`] on a port chosen beforehand (e.g. [`free_port`], when something must
    /// name the server's URL before it starts: an OAuth token's audience). Panics if another
    /// process took the port meanwhile.
    pub fn start_on_port(port: u16, data_dir: &Path, extra: &[&str]) -> Server {
        let mut server = Server::new(vidforge_bin(), data_dir, extra);
        server.port = port;
        server.spawn();
        assert_eq!(
            server.port, port,
            "port {port} was taken before vidforge bound it"
        );
        server
    }

    /// [`Server::start`] with the conformance suite's fixtures mounted (`vidforge-conformance
    /// serve`).
    pub fn start_conformance(data_dir: &Path, extra: &[&str]) -> Server {
        Server::start_bin(conformance_bin(), data_dir, extra)
    }

    fn start_bin(bin: PathBuf, data_dir: &Path, extra: &[&str]) -> Server {
        let mut server = Server::new(bin, data_dir, extra);
        server.spawn();
        server
    }

    fn new(bin: PathBuf, data_dir: &Path, extra: &[&str]) -> Server {
        Server {
            port: free_port(),
            listen_host: "127.0.0.1".to_string(),
            data_dir: data_dir.to_path_buf(),
            args: extra.iter().map(|s| s.to_string()).collect(),
            env: Vec::new(),
            bin,
            child: None,
            log_path: data_dir.with_extension("log"),
        }
    }

    /// Starts the process and waits until it serves. On a first start, a port another
    /// process took between [`free_port`] and the bind is replaced by a fresh one (a few times,
    /// bounded); a restart keeps its port, so clients' URLs stay valid.
    fn spawn(&mut self) {
        let first_start = self.child.is_none() && !self.log_path.exists();
        for _ in 0..5 {
            match self.spawn_once() {
                Ready::Serving => return,
                Ready::PortTaken if first_start => self.port = free_port(),
                Ready::PortTaken => panic!(
                    "port {} was taken before the restart:\n{}",
                    self.port,
                    self.log()
                ),
            }
        }
        panic!("no free port after 5 tries:\n{}", self.log());
    }

    /// Starts a server and kills it (SIGKILL) as soon as its log shows `line`, before it
    /// serves (panics when it serves first, or after 60 s): a crash at that point of its
    /// start. [`Server::start_again`] starts it again, on the same port.
    pub fn start_killed_at(data_dir: &Path, extra: &[&str], line: &str) -> Server {
        let mut server = Server::new(vidforge_bin(), data_dir, extra);
        server.launch();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !server.log().contains(line) {
            let log = server.log();
            assert!(
                Instant::now() < deadline && !log.contains(LISTENING),
                "the server never logged {line:?} before serving:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        server.kill9();
        server
    }

    fn spawn_once(&mut self) -> Ready {
        let listening_before = self.log().matches(LISTENING).count();
        self.launch();
        self.wait_ready(listening_before)
    }

    /// Starts the process, its console output appended to the log.
    fn launch(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .expect("server log file");
        let child = Command::new(&self.bin)
            .arg("serve")
            .arg("--listen")
            .arg(format!("{}:{}", self.listen_host, self.port))
            .arg("--data-dir")
            .arg(&self.data_dir)
            // The CPU compositor unless the test picks one.
            .args(
                (!self.args.iter().any(|a| a == "--backend"))
                    .then_some(["--backend", "cpu"])
                    .into_iter()
                    .flatten(),
            )
            .args(&self.args)
            .env("RUST_LOG", "info")
            // Test servers need little disk: a small floor and reserve keep them independent
            // of how full the CI disk is (tests that exercise the floor pass flags, which win).
            .env("VIDFORGE_MIN_FREE_BYTES", "64MiB")
            .env("VIDFORGE_DISK_RESERVE_BYTES", "1MiB")
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .expect("spawn vidforge serve");
        self.child = Some(child);
    }

    /// Ready once *this* process says it listens (its log gains a "listening on" line) and
    /// `/healthz` answers: a `/healthz` answer alone could come from another test's server
    /// that took the port first.
    fn wait_ready(&mut self, listening_before: usize) -> Ready {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                let log = self.log();
                if log.contains(&format!(
                    "cannot listen on {}:{}",
                    self.listen_host, self.port
                )) {
                    return Ready::PortTaken;
                }
                panic!("vidforge serve exited early ({status}):\n{log}");
            }
            if self.log().matches(LISTENING).count() > listening_before
                && ureq_get(&format!("{}/healthz", self.base())).is_ok()
            {
                return Ready::Serving;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("vidforge serve did not become ready:\n{}", self.log());
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// The server process's peak resident memory so far (`VmHWM` in `/proc/<pid>/status`),
    /// in KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        self.proc_status_kib("VmHWM")
    }

    /// The server process's resident memory now (`VmRSS`), in KiB.
    pub fn rss_kib(&self) -> u64 {
        self.proc_status_kib("VmRSS")
    }

    /// Starts [`Server::peak_rss_kib`] over from the resident memory now (Linux's
    /// `clear_refs` `5`), to measure the peak of what follows.
    pub fn reset_peak_rss(&self) {
        std::fs::write(format!("/proc/{}/clear_refs", self.pid()), "5").expect("clear_refs");
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("server is running").id()
    }

    /// The server process's address space now (`VmSize`), in KiB.
    pub fn vm_size_kib(&self) -> u64 {
        self.proc_status_kib("VmSize")
    }

    /// The server process's peak address space so far (`VmPeak`), in KiB.
    pub fn peak_vm_kib(&self) -> u64 {
        self.proc_status_kib("VmPeak")
    }

    /// A `kB` field of `/proc/<pid>/status`.
    fn proc_status_kib(&self, field: &str) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).expect("read /proc");
        status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("{field} in /proc/<pid>/status"))
    }

    /// SIGKILL, no shutdown hooks: what a crash looks like.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, then waits (bounded) for the graceful exit: what an operator's stop looks like.
    pub fn terminate(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
            panic!("vidforge serve did not stop on SIGTERM:\n{}", self.log());
        }
    }

    /// Starts the server again on the same port and data dir (after [`Server::kill9`] or
    /// [`Server::terminate`]; a running server is killed first).
    pub fn start_again(&mut self) {
        self.kill9();
        self.spawn();
    }

    /// Starts the server again on the same port and data dir.
    pub fn restart(&mut self) {
        self.kill9();
        self.spawn();
    }

    pub fn mcp(&self) -> Mcp {
        Mcp {
            url: format!("{}/mcp", self.base()),
            token: None,
            next_id: 1,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
        let _ = std::fs::remove_file(&self.log_path);
    }
}

fn ureq_get(url: &str) -> Result<(), ()> {
    reqwest::blocking::get(url).map_err(|_| ()).and_then(|r| {
        if r.status().is_success() {
            Ok(())
        } else {
            Err(())
        }
    })
}

/// `serve` flags for two principals: `alice` (`token-alice-1`) and `bob` (`token-bob-22`).
pub const TWO_PRINCIPALS: [&str; 4] = [
    "--token",
    "token-alice-1=alice",
    "--token",
    "token-bob-22=bob",
];

/// Client capabilities for a request.
#[derive(Clone, Copy, Debug)]
pub struct Caps {
    pub tasks: bool,
    /// Form-mode elicitation (`elicitation: {form: {}}`).
    pub elicitation: bool,
    /// URL-mode elicitation (`elicitation: {url: {}}`, beside form when both are set).
    pub elicitation_url: bool,
}

impl Caps {
    pub const NONE: Caps = Caps {
        tasks: false,
        elicitation: false,
        elicitation_url: false,
    };
    pub const TASKS: Caps = Caps {
        tasks: true,
        elicitation: false,
        elicitation_url: false,
    };
    pub const FULL: Caps = Caps {
        tasks: true,
        elicitation: true,
        elicitation_url: false,
    };
    /// Tasks and URL-mode elicitation only (the approval page, no form).
    pub const TASKS_URL: Caps = Caps {
        tasks: true,
        elicitation: false,
        elicitation_url: true,
    };

    pub fn to_json(self) -> Value {
        let mut caps = json!({});
        if self.elicitation {
            caps["elicitation"] = json!({ "form": {} });
        }
        if self.elicitation_url {
            caps["elicitation"]["url"] = json!({});
        }
        if self.tasks {
            caps["extensions"] = json!({ TASKS: {} });
        }
        caps
    }
}

/// One HTTP answer from `/mcp`.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub content_type: String,
    pub body: Value,
}

impl Reply {
    #[track_caller]
    pub fn result(&self) -> &Value {
        assert!(
            self.body.get("result").is_some(),
            "expected a result, got HTTP {} {}",
            self.status,
            self.body
        );
        &self.body["result"]
    }

    #[track_caller]
    pub fn error(&self) -> &Value {
        assert!(
            self.body.get("error").is_some(),
            "expected an error, got HTTP {} {}",
            self.status,
            self.body
        );
        &self.body["error"]
    }
}

/// A minimal MCP 2026-07-28 client: one POST per request with the standard headers.
pub struct Mcp {
    pub url: String,
    pub token: Option<String>,
    next_id: u64,
}

/// The `Mcp-Name` a method routes on, if any.
fn mcp_name(method: &str, params: &Value) -> Option<String> {
    match method {
        "tools/call" | "prompts/get" => params["name"].as_str().map(String::from),
        "resources/read" => params["uri"].as_str().map(String::from),
        "tasks/get" | "tasks/update" | "tasks/cancel" => {
            params["taskId"].as_str().map(String::from)
        }
        _ => None,
    }
}

impl Mcp {
    /// A client of the server at `base` (`http://127.0.0.1:PORT`) not started by [`Server`].
    pub fn new(base: &str) -> Mcp {
        Mcp {
            url: format!("{base}/mcp"),
            token: None,
            next_id: 1,
        }
    }

    pub fn with_token(mut self, token: &str) -> Self {
        self.token = Some(token.to_string());
        self
    }

    /// Builds the request body with the required `_meta` envelope.
    pub fn envelope(&mut self, method: &str, mut params: Value, caps: Caps) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": PROTOCOL,
            "io.modelcontextprotocol/clientCapabilities": caps.to_json(),
            "io.modelcontextprotocol/clientInfo": { "name": "vidforge-e2e", "version": "1.0.0" }
        });
        json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
    }

    /// Sends `method` with the standard headers.
    pub fn call(&mut self, method: &str, params: Value, caps: Caps) -> Reply {
        let name = mcp_name(method, &params);
        let body = self.envelope(method, params, caps);
        let method_name = method.to_string();
        let mut headers = vec![
            ("MCP-Protocol-Version".to_string(), PROTOCOL.to_string()),
            ("Mcp-Method".to_string(), method.to_string()),
        ];
        if let Some(name) = name {
            headers.push(("Mcp-Name".to_string(), name));
        }
        let reply = self.raw(&body, &headers);
        validate_reply(&method_name, &reply);
        reply
    }

    /// Sends a body with exactly these extra headers (for header-validation tests).
    pub fn raw(&self, body: &Value, headers: &[(String, String)]) -> Reply {
        let client = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .expect("http client");
        let mut req = client
            .post(&self.url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .body(body.to_string());
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        for (k, v) in headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let resp = req.send().expect("POST /mcp");
        let status = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let text = resp.text().unwrap_or_default();
        let body = json_rpc_body(&content_type, text);
        Reply {
            status,
            content_type,
            body,
        }
    }

    /// [`Mcp::call`] that tolerates a server that is down or restarting: the `result`, or
    /// `None` on a transport failure or a JSON-RPC error (nothing is validated or asserted).
    pub fn try_call(&mut self, method: &str, params: Value, caps: Caps) -> Option<Value> {
        let name = mcp_name(method, &params);
        let body = self.envelope(method, params, caps);
        let client = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .ok()?;
        let mut req = client
            .post(&self.url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", PROTOCOL)
            .header("Mcp-Method", method)
            .body(body.to_string());
        if let Some(name) = name {
            req = req.header("Mcp-Name", name);
        }
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        let text = req.send().ok()?.text().ok()?;
        let json: Value = serde_json::from_str(&text).ok()?;
        json.get("result").cloned()
    }

    pub fn tool(&mut self, name: &str, arguments: Value, caps: Caps) -> Reply {
        self.call(
            "tools/call",
            json!({ "name": name, "arguments": arguments }),
            caps,
        )
    }

    /// Calls `vidforge_render_video` with `arguments` on the task path; the new task's id.
    pub fn render_task(&mut self, arguments: &Value) -> String {
        let created = self.tool("vidforge_render_video", arguments.clone(), Caps::TASKS);
        created.result()["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("no task: {}", created.body))
            .to_string()
    }

    pub fn task_get(&mut self, task_id: &str, caps: Caps) -> Reply {
        self.call("tasks/get", json!({ "taskId": task_id }), caps)
    }

    /// Polls `tasks/get` until `pred` holds (ignoring the suggested interval: tests are fast).
    pub fn wait_task(
        &mut self,
        task_id: &str,
        caps: Caps,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let reply = self.task_get(task_id, caps);
            let task = reply.result().clone();
            if pred(&task) {
                return task;
            }
            assert!(
                Instant::now() < deadline,
                "task {task_id} never reached the expected state; last: {task}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The JSON-RPC message of an `/mcp` answer: for `text/event-stream`, the final response (the
/// last `data:` line carrying an id); otherwise the JSON body (or the text, as a string).
fn json_rpc_body(content_type: &str, text: String) -> Value {
    if content_type.starts_with("text/event-stream") {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .rfind(|m| m.get("id").is_some())
            .unwrap_or(Value::Null)
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    }
}

/// One HTTP answer from `/mcp` with its headers (`Mcp-Session-Id`, `Retry-After`, …).
#[derive(Debug)]
pub struct WireReply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    /// The JSON-RPC message ([`Value::Null`] for an empty body, e.g. a `202`).
    pub body: Value,
}

impl WireReply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn result(&self) -> &Value {
        assert!(
            self.body.get("result").is_some(),
            "expected a result, got HTTP {} {}",
            self.status,
            self.body
        );
        &self.body["result"]
    }

    /// The JSON-RPC error, after checking the HTTP status, the envelope (official schema)
    /// and the code.
    pub fn error(&self, status: u16, code: i64) -> &Value {
        assert_eq!(self.status, status, "{}", self.body);
        assert_schema("core", "JSONRPCErrorResponse", &self.body);
        assert_eq!(self.body["error"]["code"], code, "{}", self.body);
        &self.body["error"]
    }
}

/// POSTs `body` to `url` with these extra headers and an optional bearer token.
pub fn post_wire(
    url: &str,
    token: Option<&str>,
    headers: &[(&str, &str)],
    body: &Value,
) -> WireReply {
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("http client");
    let mut req = client
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(body.to_string());
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().expect("POST /mcp");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = json_rpc_body(&content_type, resp.text().unwrap_or_default());
    WireReply {
        status,
        headers,
        body,
    }
}

/// A client for GET and DELETE on `/mcp` (bounded: a test never waits forever).
fn stream_client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("http client")
}

/// A legacy-era MCP client (`initialize`-based, 2025-11-25 and older): one session on the
/// same `/mcp` endpoint, named by the `Mcp-Session-Id` header on every later request.
pub struct Legacy {
    pub url: String,
    pub token: Option<String>,
    /// Set by a successful [`Legacy::initialize`].
    pub session: Option<String>,
    next_id: u64,
}

impl Legacy {
    pub fn new(server: &Server, token: Option<&str>) -> Legacy {
        Legacy {
            url: format!("{}/mcp", server.base()),
            token: token.map(String::from),
            session: None,
            next_id: 1,
        }
    }

    /// POSTs a message (with the session header once there is a session).
    pub fn post(&self, message: &Value) -> WireReply {
        let session = self.session.as_deref().map(|s| ("Mcp-Session-Id", s));
        post_wire(
            &self.url,
            self.token.as_deref(),
            session.as_slice(),
            message,
        )
    }

    /// Sends `initialize` naming `version` with these client capabilities; on a `200` the
    /// session it opened becomes this client's (its previous one is forgotten, not ended).
    pub fn initialize(&mut self, version: &str, capabilities: Value) -> WireReply {
        self.session = None;
        let reply = self.request(
            "initialize",
            json!({
                "protocolVersion": version,
                "capabilities": capabilities,
                "clientInfo": { "name": "vidforge-e2e-legacy", "version": "1.0.0" }
            }),
        );
        if reply.status == 200 {
            self.session = Some(
                reply
                    .header("mcp-session-id")
                    .unwrap_or_else(|| panic!("initialize opened no session: {:?}", reply))
                    .to_string(),
            );
        }
        reply
    }

    /// A request (with a fresh id).
    pub fn request(&mut self, method: &str, params: Value) -> WireReply {
        let id = self.next_id;
        self.next_id += 1;
        self.post(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
    }

    /// A notification (no id).
    pub fn notify(&self, method: &str) -> WireReply {
        self.post(&json!({ "jsonrpc": "2.0", "method": method }))
    }

    pub fn tool(&mut self, name: &str, arguments: Value) -> WireReply {
        self.request(
            "tools/call",
            json!({ "name": name, "arguments": arguments }),
        )
    }

    /// Opens the GET stream of the session and reads only its status and content type.
    pub fn open_stream(&self) -> (u16, String) {
        let mut req = stream_client()
            .get(&self.url)
            .header("Accept", "text/event-stream");
        if let Some(session) = &self.session {
            req = req.header("Mcp-Session-Id", session);
        }
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        let resp = req.send().expect("GET /mcp");
        let content_type = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        // Dropped unread: the stream stays open on the server until the connection closes.
        (resp.status().as_u16(), content_type)
    }

    /// Opens the session's server-message stream (`GET` with its header) and hands it over
    /// open, unread (reads are bounded by the client's 10 s).
    pub fn stream(&self) -> reqwest::blocking::Response {
        let mut req = stream_client()
            .get(&self.url)
            .header("Accept", "text/event-stream")
            .header("MCP-Protocol-Version", "2025-11-25");
        if let Some(session) = &self.session {
            req = req.header("Mcp-Session-Id", session);
        }
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        let resp = req.send().expect("GET /mcp");
        assert_eq!(resp.status(), 200, "GET /mcp");
        resp
    }

    /// Ends the session (`DELETE` with its header); the HTTP status.
    pub fn delete(&self) -> u16 {
        let mut req = stream_client().delete(&self.url);
        if let Some(session) = &self.session {
            req = req.header("Mcp-Session-Id", session);
        }
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        req.send().expect("DELETE /mcp").status().as_u16()
    }
}

/// Uploads a file through `POST /assets`; returns the HTTP status and the JSON answer
/// (an asset, or an error envelope).
pub fn upload_raw(server: &Server, path: &Path) -> (u16, Value) {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("upload");
    let resp = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .expect("http client")
        .post(format!("{}/assets?name={name}", server.base()))
        .header("Content-Type", "application/octet-stream")
        .body(std::fs::read(path).expect("read upload"))
        .send()
        .expect("POST /assets");
    let status = resp.status().as_u16();
    (status, resp.json().expect("upload answer is JSON"))
}

/// Uploads a file through `POST /assets` and returns its `vidforge://assets/…` URI.
pub fn upload(server: &Server, token: Option<&str>, path: &Path) -> String {
    let client = reqwest::blocking::Client::new();
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("upload");
    let mut req = client
        .post(format!("{}/assets?name={name}", server.base()))
        .body(std::fs::read(path).expect("read upload"));
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    let resp = req.send().expect("POST /assets");
    let status = resp.status();
    let body: Value = resp.json().expect("upload answer is JSON");
    assert!(status.is_success(), "upload failed: {status} {body}");
    body["uri"]
        .as_str()
        .expect("upload answer has a uri")
        .to_string()
}

/// The official MCP and tasks-extension JSON Schemas, vendored in the repository
/// (`spec/schemas/`, with `SOURCES.md` naming each file's origin).
pub fn schemas_dir() -> PathBuf {
    let dir = repo_root().join("spec/schemas");
    assert!(dir.exists(), "{} is missing", dir.display());
    dir
}

fn load_schema(file: &str) -> Value {
    let path = schemas_dir().join(file);
    serde_json::from_str(&std::fs::read_to_string(&path).expect("read schema"))
        .expect("schema is JSON")
}

/// Validates every JSON-RPC answer of [`Mcp::call`] against the official schemas: the
/// response envelope, and the method's result type where the schemas define one.
pub fn validate_reply(method: &str, reply: &Reply) {
    if reply.body.get("jsonrpc").is_none() {
        // Not a JSON-RPC body (e.g. the auth layer's 401): nothing to validate.
        return;
    }
    if reply.body.get("error").is_some() {
        assert_schema("core", "JSONRPCErrorResponse", &reply.body);
        return;
    }
    assert_schema("core", "JSONRPCResultResponse", &reply.body);
    let result = &reply.body["result"];
    let (schema, def) = match method {
        "server/discover" => ("core", "DiscoverResult"),
        "tools/list" => ("core", "ListToolsResult"),
        "tools/call" | "prompts/get" | "resources/read"
            if result["resultType"] == "input_required" =>
        {
            ("core", "InputRequiredResult")
        }
        "tools/call" if result["resultType"] == "task" => ("tasks", "CreateTaskResult"),
        "tools/call" => ("core", "CallToolResult"),
        "resources/list" => ("core", "ListResourcesResult"),
        "resources/templates/list" => ("core", "ListResourceTemplatesResult"),
        "resources/read" => ("core", "ReadResourceResult"),
        "prompts/list" => ("core", "ListPromptsResult"),
        "prompts/get" => ("core", "GetPromptResult"),
        "completion/complete" => ("core", "CompleteResult"),
        "tasks/get" => ("tasks", "GetTaskResult"),
        "tasks/update" => ("tasks", "UpdateTaskResult"),
        "tasks/cancel" => ("tasks", "CancelTaskResult"),
        _ => return,
    };
    assert_schema(schema, def, result);
}

/// Validates `value` against `#/$defs/<def>` of the core 2026-07-28 schema (`core`) or the
/// tasks-extension draft schema (`tasks`).
pub fn assert_schema(schema: &str, def: &str, value: &Value) {
    let file = match schema {
        "core" => "mcp-2026-07-28.schema.json",
        "tasks" => "ext-tasks-draft.schema.json",
        other => panic!("unknown schema {other}"),
    };
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    // Compiling the big schemas is slow: one validator per definition, per test process.
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<jsonschema::Validator>>>> = OnceLock::new();
    let key = format!("{file}#{def}");
    let cached = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .get(&key)
        .cloned();
    let validator = match cached {
        Some(v) => v,
        None => {
            let doc = load_schema(file);
            assert!(doc["$defs"].get(def).is_some(), "{file} has no $defs/{def}");
            let root = json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "$defs": doc["$defs"],
                "$ref": format!("#/$defs/{def}"),
            });
            let v = Arc::new(jsonschema::validator_for(&root).expect("schema compiles"));
            CACHE.get().unwrap().lock().unwrap().insert(key, v.clone());
            v
        }
    };
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "{def} ({file}) rejects {value}:\n{}",
        errors.join("\n")
    );
}

/// Validates a whole JSON-RPC response message: envelope + result/error shape.
pub fn assert_result(schema: &str, def: &str, reply: &Reply) {
    assert_schema("core", "JSONRPCResultResponse", &reply.body);
    assert_schema(schema, def, reply.result());
}

pub fn assert_rpc_error(reply: &Reply, code: i64) {
    assert_schema("core", "JSONRPCErrorResponse", &reply.body);
    assert_eq!(reply.error()["code"], code, "{}", reply.body);
}

/// Generates a short test clip with the ffmpeg CLI (testsrc2 + optional sine audio).
pub fn make_clip(
    dir: &Path,
    name: &str,
    width: u32,
    height: u32,
    seconds: f32,
    audio: bool,
) -> PathBuf {
    let out = dir.join(name);
    let mut cmd = Command::new("ffmpeg");
    cmd.args([
        "-hide_banner",
        "-loglevel",
        "error",
        "-y",
        "-f",
        "lavfi",
        "-i",
    ])
    .arg(format!(
        "testsrc2=size={width}x{height}:rate=25:duration={seconds}"
    ));
    if audio {
        cmd.args(["-f", "lavfi", "-i"])
            .arg(format!(
                "sine=frequency=440:sample_rate=48000:duration={seconds}"
            ))
            .args(["-c:a", "aac", "-b:a", "64k"]);
    }
    cmd.args([
        "-c:v",
        "libx264",
        "-preset",
        "ultrafast",
        "-pix_fmt",
        "yuv420p",
        "-shortest",
    ])
    .arg(&out);
    let status = cmd
        .status()
        .expect("run ffmpeg (install it: scripts/install-deps.sh)");
    assert!(status.success(), "ffmpeg failed to make {}", out.display());
    out
}

/// A semi-transparent PNG watermark (RGBA).
pub fn make_logo(dir: &Path) -> PathBuf {
    let out = dir.join("logo.png");
    ffmpeg_lavfi(
        "color=c=red@0.6:s=96x48,format=rgba",
        &["-frames:v", "1"],
        &out,
    );
    out
}

/// `ffmpeg -f lavfi -i INPUT ARGS… OUT` (quiet, overwriting); panics if it fails.
pub fn ffmpeg_lavfi(input: &str, args: &[&str], out: &Path) {
    let status = Command::new("ffmpeg")
        .args([
            "-hide_banner",
            "-loglevel",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
        ])
        .arg(input)
        .args(args)
        .arg(out)
        .status()
        .expect("run ffmpeg (install it: scripts/install-deps.sh)");
    assert!(status.success(), "ffmpeg failed to make {}", out.display());
}

/// `ffprobe` width, height, video codec and whether an audio stream exists.
pub fn probe_video(path: &Path) -> (u32, u32, String, bool) {
    let out = Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-show_entries",
            "stream=codec_type,codec_name,width,height",
            "-of",
            "json",
        ])
        .arg(path)
        .output()
        .expect("run ffprobe");
    assert!(out.status.success(), "ffprobe failed on {}", path.display());
    let v: Value = serde_json::from_slice(&out.stdout).expect("ffprobe json");
    let streams = v["streams"].as_array().cloned().unwrap_or_default();
    let video = streams
        .iter()
        .find(|s| s["codec_type"] == "video")
        .expect("a video stream");
    let audio = streams.iter().any(|s| s["codec_type"] == "audio");
    (
        video["width"].as_u64().unwrap_or(0) as u32,
        video["height"].as_u64().unwrap_or(0) as u32,
        video["codec_name"].as_str().unwrap_or_default().to_string(),
        audio,
    )
}

/// Signs in at `base` with a bearer `token` (`POST /signin`, as the sign-in page does) and
/// returns the browser session cookie (`vidforge_session=…`) to send as `Cookie`.
pub fn sign_in(base: &str, token: &str) -> String {
    let signed = reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
        .post(format!("{base}/signin"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(format!("token={token}&next=/"))
        .send()
        .unwrap();
    signed
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("vidforge_session="))
        .and_then(|v| v.split(';').next())
        .expect("a session cookie")
        .to_string()
}
