//! `vidforge bench --human-wait`: the two waits of the person in the loop of a watermarked
//! render, through real servers over real HTTP (loopback only): from the agent's create call
//! to the task's `input_required` with its preview written, and from the click on Approve to
//! `completed`. Speculative rendering on (`--speculative auto`) and off, side by side in one
//! run: two servers (this binary's `serve`, default render slots), runs alternating between
//! them, at each output resolution. The person looks at the preview for `--think-seconds`
//! before approving. Writes `human-wait.json` and `human-wait.md`.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;
use serde_json::{Value, json};
use vidforge_media::synthetic::{self, ClipSpec};

use crate::load::{ServerChild, approve, call, create_watermarked};
use crate::measure::median;
use crate::report::cpu_model;

/// How often the agent's side asks for the task's state while it waits.
const POLL: Duration = Duration::from_millis(5);
/// The longest any one wait may take before the run is given up.
const WAIT_LIMIT: Duration = Duration::from_secs(600);

/// The source every run renders: the clip, 10 s of 1080p at 25 fps, H.264 + AAC.
const SOURCE: (u32, u32, f64) = (1920, 1080, 10.0);

/// What `--human-wait` measures.
pub struct HumanWaitArgs<'a> {
    pub out: &'a Path,
    pub resolutions: &'a [String],
    pub runs: u32,
    pub think: Duration,
    pub backend: &'a str,
}

/// One mode at one resolution.
#[derive(Debug, Serialize)]
struct Row {
    resolution: String,
    speculative: &'static str,
    runs: usize,
    /// Create call → `input_required` (preview written), ms: median and max.
    preview_p50_ms: f64,
    preview_max_ms: f64,
    /// Approve call → `completed`, ms: median and max.
    result_p50_ms: f64,
    result_max_ms: f64,
    /// Runs whose approval found the speculative render finished (published at once).
    ready_at_approval: usize,
}

#[derive(Debug, Serialize)]
struct HumanWaitReport {
    vidforge_version: String,
    cpus: usize,
    cpu_model: String,
    command: String,
    source: String,
    think_seconds: f64,
    backend: String,
    rows: Vec<Row>,
    total_s: f64,
}

/// One run's two waits.
struct Waits {
    preview: Duration,
    result: Duration,
    ready_at_approval: bool,
}

/// `--human-wait`: the source made, both servers started, every run measured, the report
/// written.
pub fn run(args: HumanWaitArgs<'_>) -> anyhow::Result<()> {
    if !synthetic::ffmpeg_available() {
        bail!("vidforge bench --human-wait needs the ffmpeg CLI on PATH (it makes the source)");
    }
    let started = Instant::now();
    std::fs::create_dir_all(args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let work = tempfile::tempdir().context("creating a temporary directory")?;
    let (w, h, secs) = SOURCE;
    let clip = synthetic::clip(
        work.path(),
        &ClipSpec {
            fps: 25,
            seconds: secs,
            ..ClipSpec::h264(w, h)
        },
    )
    .context("generating the source clip")?;
    let logo = synthetic::watermark_png(work.path(), 400, 200, [255, 255, 255, 200])?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let mut servers = Vec::new();
    for mode in MODES {
        let dir = work.path().join(mode);
        servers.push(ServerChild::start(
            &dir,
            args.backend,
            &["--speculative", mode],
        )?);
    }
    let rows = runtime.block_on(measure(&args, &servers, &clip, &logo));
    for server in &mut servers {
        server.stop();
    }
    let report = HumanWaitReport {
        vidforge_version: env!("CARGO_PKG_VERSION").to_string(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        cpu_model: cpu_model(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        source: format!(
            "{w}x{h}, {secs} s at 25 fps, H.264 + AAC (testsrc2), mp4 output with a 400x200 watermark"
        ),
        think_seconds: args.think.as_secs_f64(),
        backend: args.backend.to_string(),
        rows: rows?,
        total_s: started.elapsed().as_secs_f64(),
    };
    write_report(args.out, &report)
}

/// The `--speculative` modes compared, in the order of `servers`.
const MODES: [&str; 2] = ["auto", "off"];

/// Every run at every resolution on both servers (one per mode of [`MODES`]): a row per
/// resolution and mode.
async fn measure(
    args: &HumanWaitArgs<'_>,
    servers: &[ServerChild],
    clip: &Path,
    logo: &Path,
) -> anyhow::Result<Vec<Row>> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()?;
    let mut assets = Vec::new();
    for server in servers {
        server.ready(&client).await?;
        assets.push((
            server.upload(&client, clip).await?,
            server.upload(&client, logo).await?,
        ));
    }
    let mut rows = Vec::new();
    for res in args.resolutions {
        let mut waits: Vec<Vec<Waits>> = MODES.iter().map(|_| Vec::new()).collect();
        for run in 0..args.runs {
            // Modes take turns, so machine noise hits both alike.
            let order: Vec<usize> = if run % 2 == 0 { vec![0, 1] } else { vec![1, 0] };
            for m in order {
                let (clip, logo) = &assets[m];
                let one = one_run(&client, &servers[m].base, clip, logo, res, args.think)
                    .await
                    .with_context(|| format!("{res}, speculative {}", MODES[m]))?;
                eprintln!(
                    "{res} speculative={:<4} run {}: preview {:.0} ms, result {:.0} ms after approval{}",
                    MODES[m],
                    run + 1,
                    ms(one.preview),
                    ms(one.result),
                    if one.ready_at_approval {
                        " (ready at approval)"
                    } else {
                        ""
                    }
                );
                waits[m].push(one);
            }
        }
        for (m, mode) in MODES.iter().enumerate() {
            rows.push(row(res, mode, &waits[m]));
        }
    }
    Ok(rows)
}

/// Writes `human-wait.json` and `human-wait.md` into `out` and prints the table.
fn write_report(out: &Path, report: &HumanWaitReport) -> anyhow::Result<()> {
    std::fs::write(
        out.join("human-wait.json"),
        serde_json::to_string_pretty(report)?,
    )?;
    let md = markdown(report);
    std::fs::write(out.join("human-wait.md"), &md)?;
    println!("{md}");
    println!(
        "wrote {}/human-wait.json and human-wait.md in {:.0} s",
        out.display(),
        report.total_s
    );
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn row(res: &str, mode: &'static str, waits: &[Waits]) -> Row {
    let preview: Vec<f64> = waits.iter().map(|w| ms(w.preview)).collect();
    let result: Vec<f64> = waits.iter().map(|w| ms(w.result)).collect();
    let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    Row {
        resolution: res.to_string(),
        speculative: mode,
        runs: waits.len(),
        preview_p50_ms: median(preview.clone()),
        preview_max_ms: max(&preview),
        result_p50_ms: median(result.clone()),
        result_max_ms: max(&result),
        ready_at_approval: waits.iter().filter(|w| w.ready_at_approval).count(),
    }
}

/// Create → preview → think → approve → completed, as an agent and a person do it.
async fn one_run(
    client: &reqwest::Client,
    base: &str,
    clip: &str,
    logo: &str,
    res: &str,
    think: Duration,
) -> anyhow::Result<Waits> {
    let created_at = Instant::now();
    let task = create_watermarked(client, base, clip, logo, res).await?;
    wait_for(client, base, &task, "input_required").await?;
    let preview = created_at.elapsed();
    tokio::time::sleep(think).await;
    let approved_at = Instant::now();
    let decided = approve(client, base, &task).await?;
    let ready_at_approval = decided["structuredContent"]["state"] == "succeeded";
    wait_for(client, base, &task, "completed").await?;
    Ok(Waits {
        preview,
        result: approved_at.elapsed(),
        ready_at_approval,
    })
}

/// Polls `tasks/get` every [`POLL`] until the task's status is `status` (a failed render is
/// an error).
async fn wait_for(
    client: &reqwest::Client,
    base: &str,
    task: &str,
    status: &str,
) -> anyhow::Result<Value> {
    let deadline = Instant::now() + WAIT_LIMIT;
    loop {
        let t = call(client, base, 3, "tasks/get", json!({"taskId": task})).await?;
        if t["status"] == status {
            if t["result"]["isError"] == true {
                bail!("the render failed: {t}");
            }
            return Ok(t);
        }
        if matches!(t["status"].as_str(), Some("failed" | "cancelled")) {
            bail!("the task ended {}: {t}", t["status"]);
        }
        if Instant::now() > deadline {
            bail!("the task never became {status}: {t}");
        }
        tokio::time::sleep(POLL).await;
    }
}

fn markdown(r: &HumanWaitReport) -> String {
    let mut md = format!(
        "# The human's wait\n\n`{}` — vidforge {}, {} CPUs ({}), {} backend.\n\n\
         Source: {}. The person approves {:.0} s after the preview is ready. Medians of {} runs \
         per row; the modes alternate run by run.\n\n\
         | output | speculative | preview ready (p50 / max) | result after approval (p50 / max) | ready at approval |\n\
         |---|---|---|---|---|\n",
        r.command,
        r.vidforge_version,
        r.cpus,
        r.cpu_model,
        r.backend,
        r.source,
        r.think_seconds,
        r.rows.first().map_or(0, |row| row.runs),
    );
    for row in &r.rows {
        md.push_str(&format!(
            "| {} | {} | {:.0} ms / {:.0} ms | {:.0} ms / {:.0} ms | {} of {} |\n",
            row.resolution,
            row.speculative,
            row.preview_p50_ms,
            row.preview_max_ms,
            row.result_p50_ms,
            row.result_max_ms,
            row.ready_at_approval,
            row.runs
        ));
    }
    md.push_str(&format!("\nTotal {:.0} s.\n", r.total_s));
    md
}
