//! Embeds the short git commit in the build (`VIDFORGE_GIT_SHA`) for the error-envelope
//! fingerprint `vidforge@<version>+<sha>`; "unknown" outside a git checkout.

use std::process::Command;

fn main() {
    let sha = Command::new("git")
        .args(["rev-parse", "--short=7", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_hexdigit()))
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=VIDFORGE_GIT_SHA={sha}");
    // Rebuild when HEAD moves (a commit or a checkout).
    if let Ok(out) = Command::new("git")
        .args(["rev-parse", "--git-dir"])
        .output()
        && out.status.success()
    {
        let git_dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
        println!("cargo:rerun-if-changed={git_dir}/HEAD");
        if let Ok(head) = std::fs::read_to_string(format!("{git_dir}/HEAD"))
            && let Some(r) = head.strip_prefix("ref: ")
        {
            // Packed refs have no loose file; a missing path would rerun this script always.
            let loose = format!("{git_dir}/{}", r.trim());
            if std::path::Path::new(&loose).exists() {
                println!("cargo:rerun-if-changed={loose}");
            }
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
