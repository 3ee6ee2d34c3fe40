//! The agents' side of `--service`: renders created, previews approved, results awaited and
//! one downloaded and checked, over MCP against a real server.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use vidforge_media::Resolution;

use crate::load::{approve, call, create_watermarked};

/// How often the agents' side asks for a task's state.
const POLL: Duration = Duration::from_millis(50);
/// The longest one render may take before the run is given up.
const RENDER_LIMIT: Duration = Duration::from_secs(1800);

/// One render's times from its create call, seconds.
pub(super) struct Times {
    pub(super) preview: f64,
    pub(super) result: f64,
}

/// `n` watermarked renders at once through the server, each approved as soon as its preview
/// is ready; the batch's wall time and each render's times. `keep`: download one result there
/// and check that it lasts what the result says.
pub(super) async fn batch(
    client: &reqwest::Client,
    base: &str,
    clip: &str,
    wm: &str,
    res: Resolution,
    n: u32,
    keep: Option<&Path>,
) -> anyhow::Result<(f64, Vec<Times>)> {
    let t = Instant::now();
    let mut renders = tokio::task::JoinSet::new();
    for _ in 0..n {
        let (client, base) = (client.clone(), base.to_string());
        let (clip, wm) = (clip.to_string(), wm.to_string());
        renders.spawn(async move { one_render(&client, &base, &clip, &wm, res).await });
    }
    let mut latencies = Vec::new();
    let mut last = None;
    while let Some(done) = renders.join_next().await {
        let (times, result) = done.context("a render's task panicked")??;
        latencies.push(times);
        last = Some(result);
    }
    let wall = t.elapsed().as_secs_f64();
    if let (Some(path), Some(result)) = (keep, last) {
        check_output(client, base, &result, path).await?;
    }
    Ok((wall, latencies))
}

/// Create → `input_required` → approve → `completed`; its times, and the task's result.
async fn one_render(
    client: &reqwest::Client,
    base: &str,
    clip: &str,
    wm: &str,
    res: Resolution,
) -> anyhow::Result<(Times, Value)> {
    let t = Instant::now();
    let task = create_watermarked(client, base, clip, wm, res.as_str()).await?;
    let deadline = Instant::now() + RENDER_LIMIT;
    let mut preview = None;
    loop {
        let got = call(client, base, 2, "tasks/get", json!({"taskId": task})).await?;
        match got["status"].as_str() {
            Some("completed") => {
                if got["result"]["isError"] == true {
                    bail!("the render failed: {got}");
                }
                let result = t.elapsed().as_secs_f64();
                let preview = preview.unwrap_or(result);
                return Ok((Times { preview, result }, got["result"].clone()));
            }
            Some("input_required") if preview.is_none() => {
                preview = Some(t.elapsed().as_secs_f64());
                approve(client, base, &task).await?;
            }
            Some("failed" | "cancelled") => bail!("the task ended {}: {got}", got["status"]),
            _ => {}
        }
        if Instant::now() > deadline {
            bail!("the render never completed: {got}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Downloads the render's result (`vidforge://videos/…` is served at `<base>/videos/…`) and
/// checks that it lasts what the result says.
async fn check_output(
    client: &reqwest::Client,
    base: &str,
    result: &Value,
    path: &Path,
) -> anyhow::Result<()> {
    let sc = &result["structuredContent"];
    let url_path = sc["video_uri"]
        .as_str()
        .and_then(|u| u.strip_prefix("vidforge://"))
        .context("the result names no video_uri")?;
    let bytes = client
        .get(format!("{base}/{url_path}"))
        .send()
        .await?
        .error_for_status()?
        .bytes()
        .await?;
    std::fs::write(path, &bytes)?;
    let probe = vidforge_media::probe(path)?;
    let seconds = probe.duration_seconds;
    let expected = sc["duration_seconds"].as_f64().unwrap_or(seconds);
    if seconds <= 0.0 || (seconds - expected).abs() > 0.1 {
        bail!("the output lasts {seconds} s, the result says {expected} s");
    }
    Ok(())
}
