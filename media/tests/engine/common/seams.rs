//! What the segment tests measure with the ffmpeg CLI: packet timestamps, per-frame PSNR
//! against the source and silences in the sound.

use std::path::Path;
use std::process::Command;

fn run(cmd: &mut Command) -> (String, String) {
    let out = cmd.output().expect("run ffmpeg/ffprobe");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{cmd:?}: {stderr}");
    (stdout, stderr)
}

/// The video packets' (pts, dts) in file order, in the stream's time base.
pub fn video_packets(path: &Path) -> Vec<(i64, i64)> {
    let (out, _) = run(Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v:0"])
        .args(["-show_entries", "packet=pts,dts", "-of", "csv=p=0"])
        .arg(path));
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut it = l.trim().split(',').map(|v| {
                v.parse::<i64>()
                    .unwrap_or_else(|_| panic!("{}: packet {l:?}", path.display()))
            });
            (it.next().expect("pts"), it.next().expect("dts"))
        })
        .collect()
}

/// Per-frame PSNR (average over the planes; 100 for identical frames) of `path`'s video
/// scaled back to `w`x`h` (area: the same for every output compared) against `source`, both
/// in RGB (each converted from YUV by its own matrix).
pub fn psnr_per_frame(path: &Path, source: &Path, w: u32, h: u32) -> Vec<f64> {
    let stats = path.with_extension("psnr.txt");
    let graph = format!(
        "[0:v]scale={w}:{h}:flags=area,format=gbrp[out];[1:v]format=gbrp[ref];\
         [out][ref]psnr=stats_file={}",
        stats.display()
    );
    run(Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(path)
        .arg("-i")
        .arg(source)
        .args(["-lavfi", &graph, "-f", "null", "-"]));
    let text = std::fs::read_to_string(&stats).expect("psnr stats");
    let _ = std::fs::remove_file(&stats);
    text.lines()
        .filter_map(|l| l.split_whitespace().find(|f| f.starts_with("psnr_avg:")))
        .map(|f| match &f["psnr_avg:".len()..] {
            "inf" => 100.0,
            v => v.parse().expect("psnr value"),
        })
        .collect()
}

/// Silences of `path`'s sound quieter than -50 dB and longer than `min_seconds`: (start, end).
pub fn silences(path: &Path, min_seconds: f64) -> Vec<(f64, f64)> {
    let (_, err) = run(Command::new("ffmpeg")
        .args(["-v", "info", "-nostats", "-i"])
        .arg(path)
        .args(["-map", "0:a:0", "-af"])
        .arg(format!("silencedetect=n=-50dB:d={min_seconds}"))
        .args(["-f", "null", "-"]));
    let value = |l: &str, key: &str| -> Option<f64> {
        let rest = &l[l.find(key)? + key.len()..];
        rest.split_whitespace().next()?.parse().ok()
    };
    let mut out = Vec::new();
    let mut start = None;
    for l in err.lines() {
        if let Some(s) = value(l, "silence_start: ") {
            start = Some(s);
        }
        if let Some(e) = value(l, "silence_end: ") {
            out.push((start.take().unwrap_or(0.0), e));
        }
    }
    if let Some(s) = start {
        out.push((s, f64::INFINITY));
    }
    out
}

/// Video packets that follow a keyframe in decode order but come before it in presentation
/// order: the leading pictures of open GOPs.
pub fn leading_pictures(path: &Path) -> usize {
    let (out, _) = run(Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v:0"])
        .args(["-show_entries", "packet=pts,flags", "-of", "csv=p=0"])
        .arg(path));
    let mut key: Option<i64> = None;
    let mut leading = 0;
    for l in out.lines().filter(|l| !l.trim().is_empty()) {
        let (pts, flags) = l.trim().split_once(',').expect("pts,flags");
        let pts: i64 = pts.parse().expect("pts");
        if flags.starts_with('K') {
            key = Some(pts);
        } else if key.is_some_and(|k| pts < k) {
            leading += 1;
        }
    }
    leading
}
