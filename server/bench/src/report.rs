//! The report: `report.json`'s shape, its Markdown table and the SVG fps chart.

use std::fmt::Write as _;
use std::process::Command;

use serde::Serialize;

use super::measure::{ConcurrencyResult, JobResult};
use super::quality;

#[derive(Clone, Debug, Serialize)]
pub(super) struct Report {
    pub(super) vidforge_version: String,
    pub(super) ffmpeg_version: String,
    pub(super) cpus: usize,
    pub(super) cpu_model: String,
    pub(super) quick: bool,
    pub(super) command: String,
    pub(super) repeats: u32,
    pub(super) opacity: f32,
    /// ffmpeg's GPU pipeline: how it runs, or why it was not measured.
    pub(super) gpu_peer: String,
    pub(super) jobs: Vec<JobResult>,
    pub(super) concurrency: Vec<ConcurrencyResult>,
    pub(super) concurrency_job: String,
    pub(super) total_s: f64,
}

pub(super) fn ffmpeg_version() -> String {
    Command::new("ffmpeg")
        .arg("-version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(str::to_string)
        })
        .unwrap_or_default()
}

pub(super) fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

pub(super) fn markdown(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "vidforge {} vs `{}` on {} × {} ({}; repeats {}, median; watermark at opacity {}).\n",
        r.vidforge_version,
        r.ffmpeg_version,
        r.cpus,
        r.cpu_model,
        if r.quick { "quick" } else { "full" },
        r.repeats,
        r.opacity
    );
    let _ = writeln!(s, "ffmpeg GPU pipeline: {}.\n", r.gpu_peer);
    s.push_str(
        "| job | backend (adapter) | decode / encoder | frames | PSNR dB vidforge / ffmpeg (/ GPU) | vidforge fps | ffmpeg fps | ratio | ffmpeg GPU fps | ratio (GPU) | vidforge RSS MB | ffmpeg RSS MB | vidforge CPU ms/frame | ffmpeg CPU ms/frame | decode fps | compose ms/frame | encode+mux fps |\n\
         |---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    job_rows(&mut s, &r.jobs);
    let gpu_errors: Vec<String> = r
        .jobs
        .iter()
        .filter(|j| j.ffmpeg_gpu.is_none())
        .filter_map(|j| {
            j.ffmpeg_gpu_error
                .as_ref()
                .map(|e| format!("- {} → {} {}: {e}", j.source, j.output, j.format))
        })
        .collect();
    if !r.gpu_peer.starts_with("not measured") && !gpu_errors.is_empty() {
        let _ = writeln!(s, "\nffmpeg GPU pipeline without numbers:\n");
        for e in gpu_errors {
            let _ = writeln!(s, "{e}");
        }
    }
    if !r.concurrency.is_empty() {
        let _ = writeln!(s, "\nConcurrent throughput ({}):\n", r.concurrency_job);
        s.push_str(
            "| tool | renders at once | wall s | renders/hour | aggregate fps | peak RSS MB (one render) |\n|---|---:|---:|---:|---:|---:|\n",
        );
        for c in &r.concurrency {
            let _ = writeln!(
                s,
                "| {} | {} | {:.2} | {:.0} | {:.1} | {:.0} |",
                c.tool,
                c.renders_at_once,
                c.wall_s,
                c.renders_per_hour,
                c.aggregate_fps,
                c.max_rss_mb
            );
        }
    }
    let flagged: Vec<&str> = r
        .jobs
        .iter()
        .filter(|j| j.quality.flagged)
        .map(|j| j.label.as_str())
        .collect();
    let _ = writeln!(
        s,
        "\nQuality first: PSNR (all planes) of each output against one reference, the job done by ffmpeg without loss (Lanczos scale, the same watermark, raw frames). A row where vidforge is more than {:.1} dB below a peer is marked ⚠: its speed ratio compares unequal videos. {}",
        quality::TOLERANCE_DB,
        if flagged.is_empty() {
            "No row is marked.".to_string()
        } else {
            format!("Marked: {}.", flagged.join(", "))
        }
    );
    let _ = writeln!(
        s,
        "\nfps = frames ÷ wall time of the whole process (start-up, probing, encoder flush and mux included) for both tools. Stage columns are vidforge's busy time per stage (stages run concurrently, so they overlap). Total benchmark time {:.0} s.",
        r.total_s
    );
    s
}

/// One row of the jobs table per job.
fn job_rows(s: &mut String, jobs: &[JobResult]) {
    for j in jobs {
        let (gpu_fps, gpu_ratio) = match (&j.ffmpeg_gpu, j.ratio_gpu) {
            (Some(g), Some(ratio)) => (format!("{:.1}", g.fps), format!("**{ratio:.2}×**")),
            _ => ("–".to_string(), "–".to_string()),
        };
        let _ = writeln!(
            *s,
            "| {} → {} {} ({}x{}) | {} ({}) | {} / {} | {} | {} | {:.1} | {:.1} | **{:.2}×** | {} | {} | {:.0} | {:.0} | {:.1} | {:.1} | {:.0} | {:.2} | {:.0} |",
            j.source,
            j.output,
            j.format,
            j.width,
            j.height,
            j.backend,
            j.adapter,
            j.decoder,
            j.encoder,
            j.frames,
            j.quality.cell(),
            j.vidforge.fps,
            j.ffmpeg.fps,
            j.ratio,
            gpu_fps,
            gpu_ratio,
            j.vidforge.max_rss_mb,
            j.ffmpeg.max_rss_mb,
            j.vidforge.cpu_ms_per_frame,
            j.ffmpeg.cpu_ms_per_frame,
            j.stages.demux_decode,
            j.stages.compose_ms_per_frame,
            j.stages.encode_mux,
        );
    }
}

pub(super) fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The chart's bar groups: per job without the backend, vidforge's fps per backend and
/// ffmpeg's (measured with each backend's run: the first is taken).
fn chart_groups(r: &Report) -> Vec<(String, Vec<(String, f64)>)> {
    let mut groups: Vec<(String, Vec<(String, f64)>)> = Vec::new();
    for j in &r.jobs {
        let key = format!("{}→{} {}", j.source, j.output, j.format);
        let idx = match groups.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                groups.push((key, vec![("ffmpeg".into(), j.ffmpeg.fps)]));
                groups.len() - 1
            }
        };
        groups[idx]
            .1
            .insert(0, (format!("vidforge {}", j.backend), j.vidforge.fps));
    }
    groups
}

/// The chart's series: every bar name, vidforge's backends first, ffmpeg last.
fn chart_series(groups: &[(String, Vec<(String, f64)>)]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for (_, bars) in groups {
        for (name, _) in bars {
            if !v.contains(name) {
                v.push(name.clone());
            }
        }
    }
    v.sort_by_key(|n| (n == "ffmpeg", n.clone()));
    v
}

/// Grouped bar chart: fps per job, one bar per vidforge backend and one for ffmpeg.
pub(super) fn svg_chart(r: &Report) -> String {
    let groups = chart_groups(r);
    let series = chart_series(&groups);
    let colors = ["#2b6cb0", "#38a169", "#d69e2e", "#e53e3e"];
    let color_of = |name: &str| {
        if name == "ffmpeg" {
            "#718096"
        } else {
            let i = series.iter().position(|s| s == name).unwrap_or(0);
            colors[i % colors.len()]
        }
    };
    let max = groups
        .iter()
        .flat_map(|(_, b)| b.iter().map(|(_, v)| *v))
        .fold(1.0f64, f64::max)
        * 1.1;
    let (left, top, plot_h, bar_w, gap) = (60.0, 50.0, 300.0, 22.0, 26.0);
    let group_w = series.len() as f64 * bar_w + gap;
    let width = left + groups.len() as f64 * group_w + 20.0;
    let height = top + plot_h + 90.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(
        s,
        r#"<rect width="100%" height="100%" fill="white"/><text x="{left}" y="20" font-size="14" font-weight="bold">End-to-end fps, vidforge vs ffmpeg CLI ({} cores, {})</text>"#,
        r.cpus,
        if r.quick { "quick" } else { "full" }
    );
    // Axis and grid.
    for k in 0..=5 {
        let v = max * k as f64 / 5.0;
        let y = top + plot_h - plot_h * k as f64 / 5.0;
        let _ = writeln!(
            s,
            r##"<line x1="{left}" x2="{:.0}" y1="{y:.1}" y2="{y:.1}" stroke="#e2e8f0"/><text x="{:.0}" y="{:.1}" text-anchor="end">{v:.0}</text>"##,
            width - 10.0,
            left - 5.0,
            y + 4.0
        );
    }
    for (gi, (key, bars)) in groups.iter().enumerate() {
        let gx = left + gi as f64 * group_w + gap / 2.0;
        for (si, name) in series.iter().enumerate() {
            let Some((_, v)) = bars.iter().find(|(n, _)| n == name) else {
                continue;
            };
            let h = plot_h * v / max;
            let x = gx + si as f64 * bar_w;
            let _ = writeln!(
                s,
                r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{h:.1}" fill="{}"><title>{} {}: {v:.1} fps</title></rect><text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="9">{v:.0}</text>"#,
                top + plot_h - h,
                bar_w - 2.0,
                color_of(name),
                xml_escape(name),
                xml_escape(key),
                x + bar_w / 2.0 - 1.0,
                top + plot_h - h - 3.0
            );
        }
        let cx = gx + series.len() as f64 * bar_w / 2.0;
        let _ = writeln!(
            s,
            r#"<text x="{cx:.1}" y="{:.1}" text-anchor="end" transform="rotate(-30 {cx:.1} {:.1})">{}</text>"#,
            top + plot_h + 14.0,
            top + plot_h + 14.0,
            xml_escape(key)
        );
    }
    for (si, name) in series.iter().enumerate() {
        let x = left + si as f64 * 130.0;
        let _ = writeln!(
            s,
            r#"<rect x="{x:.0}" y="30" width="10" height="10" fill="{}"/><text x="{:.0}" y="39">{}</text>"#,
            color_of(name),
            x + 14.0,
            xml_escape(name)
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::super::OPACITY;
    use super::super::measure::{Run, StageFps};
    use super::super::quality::QualityCheck;
    use super::*;

    #[test]
    fn markdown_and_svg_render_a_report() {
        let run = Run {
            wall_s: 1.0,
            fps: 100.0,
            max_rss_mb: 50.0,
            cpu_ms_per_frame: 15.0,
        };
        let job = JobResult {
            label: "x".into(),
            source: "1080p".into(),
            output: "720p".into(),
            width: 1280,
            height: 720,
            format: "mp4".into(),
            backend: "cpu".into(),
            adapter: "cpu".into(),
            decoder: "nvdec".into(),
            encoder: "libx264".into(),
            frames: 100,
            vidforge: run.clone(),
            ffmpeg: Run {
                fps: 80.0,
                ..run.clone()
            },
            ratio: 1.25,
            ffmpeg_gpu: Some(Run {
                fps: 200.0,
                ..run.clone()
            }),
            ratio_gpu: Some(0.5),
            ffmpeg_gpu_error: None,
            rss_ratio: 1.0,
            quality: QualityCheck {
                vidforge_psnr_db: 41.0,
                ffmpeg_psnr_db: 41.7,
                ffmpeg_gpu_psnr_db: None,
                flagged: true,
            },
            stages: StageFps {
                demux_decode: 300.0,
                compose: 900.0,
                compose_ms_per_frame: 1.1,
                encode_mux: 120.0,
                render_only: 110.0,
                engine_init_ms: 1.0,
            },
            vidforge_runs: vec![run.clone()],
            ffmpeg_runs: vec![run],
        };
        let report = Report {
            vidforge_version: "1".into(),
            ffmpeg_version: "ffmpeg version 5.1".into(),
            cpus: 2,
            cpu_model: "test".into(),
            quick: true,
            command: "vidforge bench --quick".into(),
            repeats: 1,
            opacity: OPACITY,
            gpu_peer: "NVDEC → scale_cuda → overlay_cuda → h264_nvenc".into(),
            jobs: vec![job],
            concurrency: vec![],
            concurrency_job: String::new(),
            total_s: 1.0,
        };
        let md = markdown(&report);
        assert!(md.contains("**1.25×**"), "{md}");
        assert!(md.contains("200.0 | **0.50×**"), "{md}");
        assert!(md.contains("nvdec / libx264"), "{md}");
        assert!(md.contains("overlay_cuda"), "{md}");
        assert!(md.contains("1080p → 720p mp4 (1280x720)"), "{md}");
        // Quality beside the speed: both PSNRs, and the row marked (0.7 dB below).
        assert!(md.contains("| 41.0 / 41.7 ⚠ lower |"), "{md}");
        assert!(md.contains("Marked: x."), "{md}");
        let svg = svg_chart(&report);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("vidforge cpu") && svg.contains("ffmpeg"));
    }
}
