//! `service.md`: the report as a table a person reads.

use super::{STARTUP_RUNS, ServiceReport};
use crate::quality::{QualityCheck, TOLERANCE_DB};

pub(super) fn markdown(r: &ServiceReport) -> String {
    let s = &r.startup;
    let mut md = format!(
        "# What one `vidforge serve` serves\n\n`{}` — vidforge {} against `{}`, {} CPUs ({}).\n\n\
         Job: {}. vidforge: one `vidforge serve` ({}), every render created, its preview \
         approved at once and its result awaited over MCP; ffmpeg: one process per render. \
         Renders/hour from the wall time of the whole batch, medians of {} runs, the tools \
         taking turns. ffmpeg GPU pipeline: {}.\n\n",
        r.command,
        r.vidforge_version,
        r.ffmpeg_version,
        r.cpus,
        r.cpu_model,
        r.source,
        if r.server_args.is_empty() {
            "default settings".to_string()
        } else {
            r.server_args.join(" ")
        },
        r.repeats,
        r.gpu_peer,
    );
    md.push_str("The server chose:\n\n");
    for line in &r.server_hardware {
        md.push_str(&format!("- {line}\n"));
    }
    md.push_str(&format!(
        "\nStart-up (not in the throughput): `vidforge render` with defaults on a 1 s clip \
         {:.2} s, `ffmpeg` {:.2} s (medians of {STARTUP_RUNS}); `vidforge serve` ready in {:.2} s.\n\n\
         | output | renders at once | PSNR dB vidforge / ffmpeg (/ GPU) | vidforge serve: s (renders/h) | ffmpeg: s (renders/h) | ratio | ffmpeg GPU: s (renders/h) | ratio (GPU) | vidforge p50: preview / result |\n\
         |---|---:|---|---:|---:|---:|---:|---:|---:|\n",
        s.vidforge_render_s, s.ffmpeg_s, s.serve_ready_s
    ));
    for row in &r.rows {
        let gpu = match (
            row.ffmpeg_gpu_s,
            row.ffmpeg_gpu_per_hour,
            &row.ffmpeg_gpu_error,
        ) {
            (Some(secs), Some(h), _) => format!("{secs:.2} ({h:.0})"),
            (_, _, Some(_)) => "failed".to_string(),
            _ => "–".to_string(),
        };
        md.push_str(&format!(
            "| {} | {} | {} | {:.2} ({:.0}) | {:.2} ({:.0}) | **{:.2}×** | {} | {} | {:.2} s / {:.2} s |\n",
            row.resolution,
            row.renders_at_once,
            row.quality.as_ref().map_or("–".to_string(), QualityCheck::cell),
            row.vidforge_s,
            row.vidforge_per_hour,
            row.ffmpeg_s,
            row.ffmpeg_per_hour,
            row.ratio,
            gpu,
            row.ratio_gpu.map_or("–".to_string(), |x| format!("**{x:.2}×**")),
            row.vidforge_preview_s,
            row.vidforge_latency_s,
        ));
    }
    md.push_str(&format!(
        "\nratio = vidforge's renders/hour ÷ the peer's. PSNR: each tool's first output of the \
         row against one lossless reference of the job (ffmpeg, Lanczos, the same watermark); ⚠ \
         marks a row where vidforge is more than {TOLERANCE_DB} dB below a peer, whose speed \
         ratio then compares unequal videos. Total {:.0} s.\n",
        r.total_s
    ));
    md
}
