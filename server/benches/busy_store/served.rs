//! The busy store bench's servers (`../busy_store.rs`): a `vidforge serve` started on a store
//! and measured from outside, and the MCP calls it times.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Place, TOKENS};

/// The peak RSS (`VmHWM`) in a `/proc/<pid>/status`, in MiB.
pub fn vm_hwm_mib(status: &str) -> f64 {
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib / 1024.0
}

/// A `vidforge serve` under measurement, its log in a file.
pub struct Served {
    child: Child,
    pub base: String,
    log: PathBuf,
}

impl Served {
    /// Started, and how long it took to serve; or how it ended before it served.
    pub fn start(bin: &Path, place: &Place, dir: &Path) -> Result<(Served, Duration), String> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let log = dir.join(format!("serve-{port}.log"));
        let mut cmd = Command::new(bin);
        cmd.args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--backend", "cpu", "--sweep-interval", "2s"])
            .args(TOKENS)
            .arg("--data-dir");
        match place {
            Place::Sled(d) => cmd.arg(d),
            Place::Postgres(url) => cmd.arg(dir.join("pg-node")).args(["--store", url]),
        };
        let file = std::fs::File::create(&log).unwrap();
        let started = Instant::now();
        let child = cmd
            .env("RUST_LOG", "warn,vidforge_core::sweep=debug")
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap();
        let mut served = Served {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
        };
        let http = reqwest::blocking::Client::new();
        while http.get(format!("{}/healthz", served.base)).send().is_err() {
            if let Ok(Some(status)) = served.child.try_wait() {
                let log = std::fs::read_to_string(&served.log).unwrap_or_default();
                let last = log.lines().last().unwrap_or_default().to_string();
                return Err(format!("exited ({status}) before serving: {last}"));
            }
            assert!(started.elapsed() < Duration::from_secs(1800), "never ready");
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok((served, started.elapsed()))
    }

    /// The `elapsed_ms` of the first `n` sweeps the log reports (waits for them, up to
    /// `patience`; `None` if they were not all logged by then).
    pub fn sweeps(&self, n: usize, patience: Duration) -> Option<Vec<f64>> {
        let deadline = Instant::now() + patience;
        loop {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let found: Vec<f64> = log
                .lines()
                .filter(|l| l.contains("sweep "))
                .filter_map(|l| l.split("elapsed_ms=").nth(1))
                .filter_map(|v| v.split_whitespace().next()?.parse().ok())
                .collect();
            if found.len() >= n {
                return Some(found[..n].to_vec());
            }
            if Instant::now() >= deadline {
                eprintln!(
                    "{n} sweeps not logged in {patience:?}: {}",
                    self.log.display()
                );
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn peak_rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()));
        vm_hwm_mib(&status.unwrap())
    }

    pub fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.child.try_wait().unwrap().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The median milliseconds of `method` with `params` (as `token`), over `n` calls, or as
/// many (at least 3) as 30 s allow.
pub fn median_ms(base: &str, token: &str, method: &str, mut params: Value, n: usize) -> f64 {
    use vidforge_mcp::capabilities::{PROTOCOL_REVISION, TASKS_EXTENSION};
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(600))
        .build()
        .unwrap();
    let name = params["taskId"].as_str().map(String::from);
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_REVISION,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "busy-store-bench", "version": "1"}
    });
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut times = Vec::new();
    let started = Instant::now();
    while times.len() < n && (times.len() < 3 || started.elapsed() < Duration::from_secs(30)) {
        let t = Instant::now();
        let mut req = http
            .post(format!("{base}/mcp"))
            .bearer_auth(token)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", PROTOCOL_REVISION)
            .header("Mcp-Method", method);
        if let Some(id) = &name {
            req = req.header("Mcp-Name", id);
        }
        let reply: Value = req.body(body.to_string()).send().unwrap().json().unwrap();
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        assert!(reply.get("result").is_some(), "{method}: {reply}");
    }
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}
