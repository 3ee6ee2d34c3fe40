//! Hardware selection through the real binary: `vidforge probe --hardware` reports what it
//! finds; `--hwdecode cuda` and `--encoder nvenc` either work (a GPU host with the NVIDIA
//! driver) or fail at start with a clear error and no crash (CPU machines, CI); `auto` on a
//! machine without them renders with software decoding and libx264.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

fn vidforge(args: &[&str], dir: &Path) -> Output {
    Command::new(vidforge_bin())
        .args(args)
        .current_dir(dir)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run vidforge")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// What `probe --hardware` says about CUDA and NVENC: (cuda device opened, nvenc opened).
fn hardware(dir: &Path) -> (bool, bool) {
    let out = vidforge(&["probe", "--hardware"], dir);
    let t = text(&out);
    assert!(out.status.success(), "probe --hardware failed: {t}");
    for section in [
        "GPU compositor (wgpu)",
        "Decoding (NVDEC)",
        "Encoding (NVENC)",
        "What auto chooses, and why",
    ] {
        assert!(t.contains(section), "no '{section}' in: {t}");
    }
    assert!(!t.contains("panicked"), "{t}");
    (
        t.contains("CUDA device: opened"),
        t.contains("h264_nvenc: session opened"),
    )
}

#[test]
fn forced_hardware_works_or_fails_cleanly_and_auto_falls_back() {
    let dir = tempfile::tempdir().unwrap();
    let (cuda, nvenc) = hardware(dir.path());
    eprintln!("this machine: CUDA device {cuda}, NVENC {nvenc}");
    let clip = make_clip(dir.path(), "in.mp4", 320, 180, 0.4, false);
    let clip = clip.to_str().unwrap();

    // auto: whatever the machine has, the render works and says what it used. One render
    // decodes on NVDEC only where NVENC encodes (media/src/hardware/plan.rs).
    let out = vidforge(
        &["render", clip, "-o", "auto.mp4", "-r", "720p", "--quiet"],
        dir.path(),
    );
    let t = text(&out);
    assert!(out.status.success(), "auto render failed: {t}");
    let decode = if cuda && nvenc {
        "nvdec decode"
    } else {
        "software decode"
    };
    let encoder = if nvenc { "h264_nvenc" } else { "libx264" };
    assert!(
        t.contains(decode) && t.contains(encoder),
        "expected {decode} and {encoder}: {t}"
    );
    assert_eq!(probe_video(&dir.path().join("auto.mp4")).2, "h264");

    for (flag, value, available, what) in [
        ("--hwdecode", "cuda", cuda, "no CUDA device"),
        ("--encoder", "nvenc", nvenc, "no NVENC encoder session"),
    ] {
        let name = format!("{value}.mp4");
        let out = vidforge(
            &[
                "render", clip, "-o", &name, "-r", "720p", "--quiet", flag, value,
            ],
            dir.path(),
        );
        let t = text(&out);
        assert!(!t.contains("panicked"), "{flag} {value}: {t}");
        if available {
            assert!(
                out.status.success(),
                "{flag} {value} failed on a host that has it: {t}"
            );
        } else {
            assert_eq!(out.status.code(), Some(1), "{flag} {value}: {t}");
            assert!(
                t.contains(what),
                "{flag} {value}: expected '{what}' in: {t}"
            );
            assert!(
                !dir.path().join(&name).exists(),
                "{flag} {value} left an output"
            );
            // The server refuses to start the same way, at once.
            let data = dir.path().join(format!("data-{value}"));
            let mut child = Command::new(vidforge_bin())
                .args(["serve", "--listen", &format!("127.0.0.1:{}", free_port())])
                .args([flag, value])
                .arg("--data-dir")
                .arg(&data)
                .env("RUST_LOG", "warn")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("run vidforge serve");
            let deadline = Instant::now() + Duration::from_secs(60);
            let status = loop {
                if let Some(status) = child.try_wait().unwrap() {
                    break status;
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    panic!("serve {flag} {value} kept running without the hardware");
                }
                std::thread::sleep(Duration::from_millis(50));
            };
            let t = text(&child.wait_with_output().unwrap());
            assert!(!status.success(), "serve {flag} {value}: {t}");
            assert!(t.contains(what) && !t.contains("panicked"), "serve: {t}");
        }
    }
}

#[test]
fn probe_needs_a_file_or_hardware() {
    let dir = tempfile::tempdir().unwrap();
    let out = vidforge(&["probe"], dir.path());
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}
