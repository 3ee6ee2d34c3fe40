//! The repository stands on its own: a clone with nothing beside it builds, runs and tests.
//! (CI's first-contact check, `scripts/first-contact.sh`, proves the same end to end.)

use std::process::Command;

use crate::support::repo_root;

use crate::support;
use sha2::{Digest, Sha256};

/// The vendored schemas are the byte copies `spec/schemas/SOURCES.md` describes.
#[test]
fn vendored_schemas_match_their_checksums() {
    let dir = support::schemas_dir();
    let sums = std::fs::read_to_string(dir.join("SHA256SUMS")).expect("spec/schemas/SHA256SUMS");
    let mut checked = 0;
    for line in sums.lines().filter(|l| !l.trim().is_empty()) {
        let (want, file) = line.split_once("  ").expect("`<sha256>  <file>` lines");
        let bytes = std::fs::read(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let got: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            got, want,
            "{file} differs from the copy SOURCES.md describes"
        );
        checked += 1;
    }
    assert_eq!(checked, 2, "both schemas are listed in SHA256SUMS");
}

/// Nothing the project builds, tests or runs reads the reference folder beside the checkout
/// (prose may mention it; code, scripts and configuration may not).
#[test]
fn nothing_reads_outside_the_repository() {
    let out = Command::new("git")
        // Spelled in two pieces so that this file does not match itself.
        .args([
            "grep",
            "-n",
            "-I",
            "-F",
            "-e",
            concat!("..", "/shared"),
            "--",
            ":!*.md",
        ])
        .current_dir(repo_root())
        .output()
        .expect("git is installed");
    // git grep exits 0 on a match, 1 on none, and more on an error (e.g. not a checkout).
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "git grep failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hits = String::from_utf8_lossy(&out.stdout);
    let offending: Vec<&str> = hits.lines().collect();
    assert!(
        offending.is_empty(),
        "tracked files read outside the repository:\n{}",
        offending.join("\n")
    );
}
