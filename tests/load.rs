//! A short load run against the real binary on loopback: `vidforge load` (its own server, a
//! render kept running, concurrent pollers of `tasks/get` and `tools/list`) must see zero
//! errors. Its figures (req/s, latencies, RSS) are printed, never asserted: speed is measured
//! by `make load`, not by a timed test.

use serde_json::Value;
use vidforge_suite::*;

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
