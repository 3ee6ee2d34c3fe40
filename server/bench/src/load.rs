//! `vidforge load`: a load benchmark of the MCP front, loopback only. It starts its own
//! `vidforge serve` (this binary, a temporary data dir, a free port), keeps a render running,
//! and either has `--clients` concurrent clients poll `tasks/get` and `tools/list` over
//! keep-alive connections for `--seconds` (closed loop: as fast as answers come), or, with
//! `--rate N`, sends `tasks/get` at a fixed N per second whatever the answers do (open loop:
//! each latency counts from the request's scheduled send time, so a stalled server shows as
//! latency instead of fewer requests). It reports requests per second, p50/p99/max latency,
//! errors, the renders finished meanwhile and their median time, and the server's peak RSS
//! (`VmHWM`). Figures come from here, never from a timed test.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use serde_json::{Value, json};

use vidforge_mcp::capabilities::{PROTOCOL_REVISION, TASKS_EXTENSION};

#[derive(Debug, Args)]
pub struct LoadArgs {
    /// Concurrent polling clients.
    #[arg(long, default_value_t = 64)]
    pub clients: usize,
    /// How long the load runs.
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// Resolution of the render kept running meanwhile (720p, 1080p, 4k).
    #[arg(long, default_value = "4k")]
    pub resolution: String,
    /// Compositor backend of the server under load (auto, wgpu, cpu).
    #[arg(long, default_value = "auto")]
    pub backend: String,
    /// Open loop: `tasks/get` at this fixed rate per second (`--clients` is then ignored).
    #[arg(long)]
    pub rate: Option<u32>,
    /// The server's `--render-nice` (the render threads' nice value; its default when unset).
    #[arg(long)]
    pub render_nice: Option<u8>,
    /// The server's `--render-sched` (normal, batch, idle; its default when unset).
    #[arg(long)]
    pub render_sched: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// What one load run measured.
#[derive(Debug, serde::Serialize)]
pub struct LoadReport {
    pub clients: usize,
    /// The fixed rate of an open-loop run.
    pub rate: Option<u32>,
    pub render_nice: Option<u8>,
    pub render_sched: Option<String>,
    pub seconds: f64,
    pub requests: u64,
    pub errors: u64,
    pub requests_per_second: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Renders that finished while the load ran (one is always running), and the median of
    /// their times from call to completion.
    pub renders_completed: u64,
    pub render_seconds_median: Option<f64>,
    pub server_peak_rss_mib: f64,
}

pub fn run_load(args: LoadArgs) -> anyhow::Result<()> {
    if args.clients == 0 || args.seconds == 0 || args.rate == Some(0) {
        bail!("--clients, --seconds and --rate must be at least 1");
    }
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let nice = args.render_nice.map(|n| n.to_string());
    let mut extra: Vec<&str> = Vec::new();
    if let Some(n) = &nice {
        extra.extend(["--render-nice", n]);
    }
    if let Some(s) = &args.render_sched {
        extra.extend(["--render-sched", s]);
    }
    let mut server = ServerChild::start(dir.path(), &args.backend, &extra)?;
    let report = runtime.block_on(measure(&server, dir.path(), &args));
    server.stop();
    let report = report?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let load = match report.rate {
            Some(rate) => format!("{rate} req/s fixed"),
            None => format!("{} clients", report.clients),
        };
        let nice = report
            .render_nice
            .map_or(String::new(), |n| format!(", render nice {n}"));
        let nice = match &report.render_sched {
            Some(s) => format!("{nice}, render sched {s}"),
            None => nice,
        };
        let renders = report
            .render_seconds_median
            .map_or(String::new(), |s| format!(" (median {s:.1} s each)"));
        println!(
            "{load}{nice}, {:.1} s: {} requests ({:.0} req/s), {} errors, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; {} renders completed meanwhile{renders}; server peak RSS {:.0} MiB",
            report.seconds,
            report.requests,
            report.requests_per_second,
            report.errors,
            report.p50_ms,
            report.p99_ms,
            report.max_ms,
            report.renders_completed,
            report.server_peak_rss_mib
        );
    }
    Ok(())
}

/// A server under measurement: this binary's `serve`, stopped with SIGTERM.
pub(crate) struct ServerChild {
    child: Child,
    pub(crate) base: String,
    /// Where its console (the banner) goes.
    console: std::path::PathBuf,
}

impl ServerChild {
    pub(crate) fn start(dir: &Path, backend: &str, extra: &[&str]) -> anyhow::Result<ServerChild> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let exe = std::env::current_exe().context("locating the vidforge binary")?;
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let console = dir.join("console.txt");
        let out = std::fs::File::create(&console).context("creating the server's console file")?;
        let child = Command::new(exe)
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .arg("--data-dir")
            .arg(dir.join("data"))
            .args(["--backend", backend, "--max-connections", "4096"])
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(out)
            .spawn()
            .context("starting vidforge serve")?;
        Ok(ServerChild {
            child,
            base: format!("http://127.0.0.1:{port}"),
            console,
        })
    }

    /// The banner's lines saying what hardware the server uses and why.
    pub(crate) fn banner_hardware(&self) -> Vec<String> {
        let text = std::fs::read_to_string(&self.console).unwrap_or_default();
        text.lines()
            .map(str::trim)
            .filter(|l| {
                ["backend ", "decoder ", "h264 encoder ", "because "]
                    .iter()
                    .any(|k| l.starts_with(k))
            })
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect()
    }

    /// Waits (up to a minute) until it answers `/healthz`.
    pub(crate) async fn ready(&self, client: &reqwest::Client) -> anyhow::Result<()> {
        let ready_by = Instant::now() + Duration::from_secs(60);
        while client
            .get(format!("{}/healthz", self.base))
            .send()
            .await
            .is_err()
        {
            if Instant::now() > ready_by {
                bail!("the server did not become ready");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// Uploads `path` (no token: a loopback server's anonymous principal); its asset URI.
    pub(crate) async fn upload(
        &self,
        client: &reqwest::Client,
        path: &Path,
    ) -> anyhow::Result<String> {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("upload");
        let uploaded: Value = client
            .post(format!("{}/assets?name={name}", self.base))
            .header("Content-Type", "application/octet-stream")
            .body(std::fs::read(path)?)
            .send()
            .await?
            .json()
            .await?;
        Ok(uploaded["uri"]
            .as_str()
            .with_context(|| format!("upload failed: {uploaded}"))?
            .to_string())
    }

    fn peak_rss_mib(&self) -> f64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmHWM:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            })
            .map(|kib| kib / 1024.0)
            .unwrap_or(0.0)
    }

    pub(crate) fn stop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One MCP request with the headers and `_meta` the protocol asks for.
fn mcp_request(
    client: &reqwest::Client,
    base: &str,
    id: u64,
    method: &str,
    params: Value,
) -> reqwest::RequestBuilder {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_REVISION,
        "io.modelcontextprotocol/clientCapabilities": { "extensions": { TASKS_EXTENSION: {} } },
        "io.modelcontextprotocol/clientInfo": { "name": "vidforge-load", "version": env!("CARGO_PKG_VERSION") }
    });
    let name = params["taskId"]
        .as_str()
        .or(params["name"].as_str())
        .map(String::from);
    let mut req = client
        .post(format!("{base}/mcp"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", PROTOCOL_REVISION)
        .header("Mcp-Method", method)
        .body(
            json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }).to_string(),
        );
    if let Some(name) = name {
        req = req.header("Mcp-Name", name);
    }
    req
}

/// Sends one request; the JSON-RPC result, or why it failed.
pub(crate) async fn call(
    client: &reqwest::Client,
    base: &str,
    id: u64,
    method: &str,
    params: Value,
) -> anyhow::Result<Value> {
    let resp = mcp_request(client, base, id, method, params).send().await?;
    let status = resp.status();
    let body: Value = resp.json().await?;
    if !status.is_success() || body.get("result").is_none() {
        bail!("{method}: HTTP {status}: {body}");
    }
    Ok(body["result"].clone())
}

/// Creates a watermarked mp4 render of `clip` at `res` with `logo` (bottom right, the bench's
/// opacity), as an agent does; the task's id.
pub(crate) async fn create_watermarked(
    client: &reqwest::Client,
    base: &str,
    clip: &str,
    logo: &str,
    res: &str,
) -> anyhow::Result<String> {
    let created = call(
        client,
        base,
        1,
        "tools/call",
        json!({"name": "vidforge_render_video", "arguments": {
            "source_asset_uri": clip, "output_format": "mp4", "resolution": res,
            "watermark": {"image_asset_uri": logo, "position": "bottom_right",
                "opacity": crate::OPACITY}}}),
    )
    .await?;
    created["taskId"]
        .as_str()
        .map(String::from)
        .context("the render call answered without a task")
}

/// Approves the watermark of render `task`, as the person does; the tool's result.
pub(crate) async fn approve(
    client: &reqwest::Client,
    base: &str,
    task: &str,
) -> anyhow::Result<Value> {
    call(
        client,
        base,
        2,
        "tools/call",
        json!({"name": "vidforge_approve_watermark",
            "arguments": {"render_id": task, "approved": true}}),
    )
    .await
}

async fn start_render(
    client: &reqwest::Client,
    base: &str,
    clip: &str,
    res: &str,
) -> anyhow::Result<String> {
    let result = call(
        client,
        base,
        0,
        "tools/call",
        json!({"name": "vidforge_render_video",
            "arguments": {"source_asset_uri": clip, "output_format": "mp4", "resolution": res}}),
    )
    .await?;
    result["taskId"]
        .as_str()
        .map(String::from)
        .context("the render call answered without a task")
}

async fn measure(server: &ServerChild, dir: &Path, args: &LoadArgs) -> anyhow::Result<LoadReport> {
    let base = server.base.clone();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(args.clients)
        .timeout(Duration::from_secs(30))
        .build()?;
    server.ready(&client).await?;
    let spec = vidforge_media::synthetic::ClipSpec {
        seconds: 4.0,
        ..vidforge_media::synthetic::ClipSpec::h264(1280, 720)
    };
    let clip_path = vidforge_media::synthetic::clip(dir, &spec).context("generating a clip")?;
    let clip = server.upload(&client, &clip_path).await?;
    let mut task = start_render(&client, &base, &clip, &args.resolution).await?;

    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let started = Instant::now();
    let mut workers = Vec::new();
    if let Some(rate) = args.rate {
        let (client, base, task) = (client.clone(), base.clone(), task.clone());
        workers.push(tokio::spawn(open_loop(client, base, task, rate, deadline)));
    }
    for c in 0..args.clients * usize::from(args.rate.is_none()) {
        let (client, base, task) = (client.clone(), base.clone(), task.clone());
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut errors = 0u64;
            let mut n = 0u64;
            while Instant::now() < deadline {
                n += 1;
                let id = (c as u64) << 32 | n;
                let t = Instant::now();
                let ok = if n.is_multiple_of(2) {
                    call(&client, &base, id, "tasks/get", json!({"taskId": task})).await
                } else {
                    call(&client, &base, id, "tools/list", json!({})).await
                };
                latencies.push(t.elapsed().as_micros() as u32);
                if ok.is_err() {
                    errors += 1;
                }
            }
            (latencies, errors)
        }));
    }
    // Keep a render running while the clients poll.
    let mut render_times = Vec::new();
    let mut render_started = Instant::now();
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let t = call(&client, &base, 1, "tasks/get", json!({"taskId": task})).await?;
        if t["status"] != "working" {
            render_times.push(render_started.elapsed().as_secs_f64());
            render_started = Instant::now();
            task = start_render(&client, &base, &clip, &args.resolution).await?;
        }
    }
    render_times.sort_by(f64::total_cmp);
    let mut latencies = Vec::new();
    let mut errors = 0;
    for w in workers {
        let (l, e) = w.await?;
        latencies.extend(l);
        errors += e;
    }
    let seconds = started.elapsed().as_secs_f64();
    latencies.sort_unstable();
    let pct = |p: f64| -> f64 {
        if latencies.is_empty() {
            return 0.0;
        }
        let i = ((latencies.len() as f64 * p).ceil() as usize).clamp(1, latencies.len()) - 1;
        latencies[i] as f64 / 1000.0
    };
    Ok(LoadReport {
        clients: args.clients,
        rate: args.rate,
        render_nice: args.render_nice,
        render_sched: args.render_sched.clone(),
        seconds,
        requests: latencies.len() as u64,
        errors,
        requests_per_second: latencies.len() as f64 / seconds,
        p50_ms: pct(0.50),
        p99_ms: pct(0.99),
        max_ms: pct(1.0),
        renders_completed: render_times.len() as u64,
        render_seconds_median: render_times.get(render_times.len() / 2).copied(),
        server_peak_rss_mib: server.peak_rss_mib(),
    })
}

/// `tasks/get` at a fixed `rate` per second until `deadline`, each on its own task so a slow
/// answer delays no later request; latencies (µs) count from each request's scheduled time.
async fn open_loop(
    client: reqwest::Client,
    base: String,
    task: String,
    rate: u32,
    deadline: Instant,
) -> (Vec<u32>, u64) {
    let period = Duration::from_secs(1) / rate;
    let start = tokio::time::Instant::now();
    let end = tokio::time::Instant::from_std(deadline);
    let mut sent = Vec::new();
    for k in 0u32.. {
        let scheduled = start + period * k;
        if scheduled >= end {
            break;
        }
        tokio::time::sleep_until(scheduled).await;
        let (client, base, task) = (client.clone(), base.clone(), task.clone());
        sent.push(tokio::spawn(async move {
            let ok = call(
                &client,
                &base,
                u64::from(k),
                "tasks/get",
                json!({"taskId": task}),
            )
            .await;
            (scheduled.elapsed().as_micros() as u32, ok.is_ok())
        }));
    }
    let mut latencies = Vec::with_capacity(sent.len());
    let mut errors = 0;
    for request in sent {
        match request.await {
            Ok((latency, ok)) => {
                latencies.push(latency);
                errors += u64::from(!ok);
            }
            Err(_) => errors += 1,
        }
    }
    (latencies, errors)
}
