//! A short load run against the real binary on loopback: `vidforge load` (its own server, a
//! render kept running, concurrent pollers of `tasks/get` and `tools/list`) must see zero
//! errors. Its figures (req/s, latencies, RSS) are printed, never asserted: speed is measured
//! by `make load`, not by a timed test.

use crate::support::*;
use serde_json::Value;

#[test]
fn pollers_see_no_errors_while_a_render_runs() {
    let out = std::process::Command::new(vidforge_bin())
        .args([
            "load",
            "--clients",
            "16",
            "--seconds",
            "3",
            "--resolution",
            "720p",
        ])
        .args(["--backend", "cpu", "--json"])
        .output()
        .expect("run vidforge load");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "vidforge load failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(&stdout).expect("a JSON report");
    eprintln!("{report}");
    assert!(report["requests"].as_u64().unwrap() > 0, "{report}");
    assert_eq!(report["errors"], 0, "{report}");
}

/// The address space docs/reliability.md promises a server rendering one 720p video fits in
/// (its memory table; x264 and libvpx included). Containers are sized from that table.
const RENDER_720P_ADDRESS_SPACE_MIB: u64 = 1024;

/// Renders `resolution` / `format` on `server` (tasks path) and waits for the end; the task.
fn render_once(server: &Server, source: &str, resolution: &str, format: &str) -> Value {
    let mut mcp = server.mcp();
    let created = mcp.tool(
        "vidforge_render_video",
        serde_json::json!({"source_asset_uri": source, "output_format": format,
            "resolution": resolution}),
        Caps::TASKS,
    );
    let id = created.result()["taskId"].as_str().unwrap().to_string();
    mcp.wait_task(&id, Caps::TASKS, std::time::Duration::from_secs(600), |t| {
        t["status"] == "completed" || t["status"] == "failed"
    })
}

/// Caps the running server's address space at `bytes`, as a container limit would.
fn cap_address_space(server: &Server, bytes: u64) {
    let status = std::process::Command::new("prlimit")
        .arg(format!("--pid={}", server.pid()))
        .arg(format!("--as={bytes}:{bytes}"))
        .status()
        .expect("run prlimit (util-linux)");
    assert!(status.success(), "prlimit --as={bytes} failed");
}

/// A server capped at the documented address space (`prlimit --as` on the running process,
/// as a container limit would) renders 720p mp4 and webm. With `VIDFORGE_MEMORY_MATRIX=1`
/// it also prints the memory table (every resolution × format × backend, one fresh server
/// each, no cap): peak RSS and peak address space.
#[test]
fn a_720p_render_fits_the_documented_address_space() {
    let dir = tempfile::tempdir().unwrap();
    let clip = make_clip(dir.path(), "clip.mp4", 640, 360, 1.0, true);
    let server = Server::start(&dir.path().join("data"), &[]);
    let source = upload(&server, None, &clip);
    cap_address_space(&server, RENDER_720P_ADDRESS_SPACE_MIB * 1024 * 1024);
    for format in ["mp4", "webm"] {
        let task = render_once(&server, &source, "720p", format);
        assert_eq!(
            task["result"]["isError"], false,
            "720p {format} under {RENDER_720P_ADDRESS_SPACE_MIB} MiB of address space: {task}"
        );
    }
    eprintln!(
        "720p under a {RENDER_720P_ADDRESS_SPACE_MIB} MiB cap: peak RSS {} MiB, peak address space {} MiB",
        server.peak_rss_kib() / 1024,
        server.peak_vm_kib() / 1024
    );

    // Under a cap too small for a render (64 MiB over a fresh server's address space) the
    // render fails as the machine's fault (temporary `render_failed`, never "unsupported
    // codec"), and the server goes on serving.
    drop(server);
    let server = Server::start(&dir.path().join("data"), &[]);
    let tight = (server.vm_size_kib() + 64 * 1024) * 1024;
    cap_address_space(&server, tight);
    let task = render_once(&server, &source, "720p", "mp4");
    let env = &task["result"]["structuredContent"];
    eprintln!("720p under {} MiB: {env}", tight >> 20);
    assert_eq!(env["code"], "render_failed", "{task}");
    assert_eq!(env["temporary"], true, "{task}");
    let mut mcp = server.mcp();
    assert_eq!(
        mcp.call("tools/list", serde_json::json!({}), Caps::NONE)
            .status,
        200
    );

    if std::env::var_os("VIDFORGE_MEMORY_MATRIX").is_none() {
        return;
    }
    let clip = make_clip(dir.path(), "long.mp4", 1920, 1080, 4.0, true);
    println!("| resolution | format | backend | peak RSS | peak address space |");
    println!("|---|---|---|---|---|");
    for backend in ["cpu", "wgpu"] {
        for resolution in ["720p", "1080p", "4k"] {
            for format in ["mp4", "webm"] {
                let data = dir
                    .path()
                    .join(format!("m-{backend}-{resolution}-{format}"));
                let server = Server::start(&data, &["--backend", backend]);
                let source = upload(&server, None, &clip);
                let task = render_once(&server, &source, resolution, format);
                assert_eq!(task["result"]["isError"], false, "{task}");
                println!(
                    "| {resolution} | {format} | {backend} | {} MiB | {} MiB |",
                    server.peak_rss_kib() / 1024,
                    server.peak_vm_kib() / 1024
                );
            }
        }
    }
}
