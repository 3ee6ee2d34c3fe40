//! Equal quality before speed: each output's PSNR against one reference, so that a speed
//! ratio never hides a worse video.
//!
//! The reference is the job done without loss by the ffmpeg CLI: the source scaled to the
//! output size with a neutral, precise scaler (Lanczos, accurate rounding, full chroma
//! interpolation: neither tool's own), the watermark placed and blended exactly as the jobs
//! place it, kept as raw frames in memory (never encoded). `ffmpeg -lavfi psnr` then compares
//! each tool's output with it; the figure is the filter's `average` (all planes). A row whose
//! vidforge output is more than [`TOLERANCE_DB`] below a peer's is flagged: its speed ratio
//! compares unequal videos.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};
use serde::Serialize;

use super::OPACITY;
use super::child::{Job, geometry};

/// How far below a peer vidforge's PSNR may be before the row is flagged, dB.
pub(super) const TOLERANCE_DB: f64 = 0.5;

/// Both outputs' PSNR against the job's reference.
#[derive(Clone, Debug, Serialize)]
pub(super) struct QualityCheck {
    pub(super) vidforge_psnr_db: f64,
    pub(super) ffmpeg_psnr_db: f64,
    /// The GPU pipeline's output, when it ran.
    pub(super) ffmpeg_gpu_psnr_db: Option<f64>,
    /// vidforge is more than [`TOLERANCE_DB`] below a peer.
    pub(super) flagged: bool,
}

impl QualityCheck {
    /// The check of `job`'s outputs: vidforge's, plain ffmpeg's, and the GPU pipeline's when
    /// given.
    pub(super) fn of(
        job: &Job,
        vidforge: &Path,
        ffmpeg: &Path,
        ffmpeg_gpu: Option<&Path>,
    ) -> anyhow::Result<QualityCheck> {
        let vidforge_psnr_db = psnr_against_reference(job, vidforge)?;
        let ffmpeg_psnr_db = psnr_against_reference(job, ffmpeg)?;
        let ffmpeg_gpu_psnr_db = ffmpeg_gpu
            .map(|p| psnr_against_reference(job, p))
            .transpose()?;
        Ok(QualityCheck {
            vidforge_psnr_db,
            ffmpeg_psnr_db,
            ffmpeg_gpu_psnr_db,
            flagged: flagged(vidforge_psnr_db, ffmpeg_psnr_db, ffmpeg_gpu_psnr_db),
        })
    }

    /// The table cell: `45.1 / 45.3` (`/ GPU` when measured), `⚠` when flagged.
    pub(super) fn cell(&self) -> String {
        let gpu = self
            .ffmpeg_gpu_psnr_db
            .map(|g| format!(" / {g:.1}"))
            .unwrap_or_default();
        let flag = if self.flagged { " ⚠ lower" } else { "" };
        format!(
            "{:.1} / {:.1}{gpu}{flag}",
            self.vidforge_psnr_db, self.ffmpeg_psnr_db
        )
    }
}

/// Whether vidforge's PSNR is more than [`TOLERANCE_DB`] below the better peer's.
fn flagged(vidforge: f64, ffmpeg: f64, ffmpeg_gpu: Option<f64>) -> bool {
    vidforge < ffmpeg_gpu.map_or(ffmpeg, |g| g.max(ffmpeg)) - TOLERANCE_DB
}

/// The lossless reference of `job` as an ffmpeg filter graph ending in `[ref]`: inputs 1
/// (the source) and 2 (the watermark PNG).
fn reference_graph(job: &Job) -> anyhow::Result<String> {
    let ((ow, oh), _, p) = geometry(job.src, job.res)?;
    Ok(format!(
        "[1:v]scale={ow}:{oh}:flags=lanczos+accurate_rnd+full_chroma_int[v];\
         [2:v]scale={}:{}:flags=area,format=rgba,colorchannelmixer=aa={OPACITY}[wm];\
         [v][wm]overlay={}:{}:format=yuv420,format=yuv420p[ref]",
        p.width, p.height, p.x, p.y
    ))
}

/// `output`'s PSNR (all planes, dB; identical pictures: 100) against `job`'s reference.
pub(super) fn psnr_against_reference(job: &Job, output: &Path) -> anyhow::Result<f64> {
    let graph = format!(
        "{};[0:v]format=yuv420p[out];[out][ref]psnr",
        reference_graph(job)?
    );
    let o = Command::new("ffmpeg")
        .args(["-nostdin", "-hide_banner", "-nostats", "-i"])
        .arg(output)
        .arg("-i")
        .arg(job.src)
        .arg("-i")
        .arg(job.logo)
        .args(["-filter_complex", &graph, "-f", "null", "-"])
        .output()
        .context("running ffmpeg's psnr filter")?;
    let log = String::from_utf8_lossy(&o.stderr);
    if !o.status.success() {
        bail!(
            "ffmpeg's psnr filter failed on {}: {}",
            output.display(),
            log.lines().last().unwrap_or_default()
        );
    }
    average_psnr(&log).with_context(|| format!("no PSNR of {} in ffmpeg's log", output.display()))
}

/// The `average:` figure of the psnr filter's summary line (`inf` read as 100 dB).
fn average_psnr(log: &str) -> Option<f64> {
    let line = log.lines().rev().find(|l| l.contains("PSNR y:"))?;
    let value = line.split("average:").nth(1)?.split_whitespace().next()?;
    match value {
        "inf" => Some(100.0),
        v => v.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_average_is_read_from_the_summary_line() {
        let log =
            "[Parsed_psnr_5 @ 0x55] PSNR y:44.10 u:47.02 v:47.33 average:45.01 min:43.2 max:47.9\n";
        assert_eq!(average_psnr(log), Some(45.01));
        assert_eq!(
            average_psnr(
                "[Parsed_psnr_0 @ 0x1] PSNR y:inf u:inf v:inf average:inf min:inf max:inf"
            ),
            Some(100.0)
        );
        assert_eq!(average_psnr("nothing here"), None);
    }

    #[test]
    fn a_row_is_flagged_only_below_the_tolerance() {
        let check = |vf: f64, ff: f64, gpu: Option<f64>| QualityCheck {
            vidforge_psnr_db: vf,
            ffmpeg_psnr_db: ff,
            ffmpeg_gpu_psnr_db: gpu,
            flagged: flagged(vf, ff, gpu),
        };
        assert!(!check(44.6, 45.0, None).flagged);
        assert!(check(44.4, 45.0, None).flagged);
        assert!(check(44.6, 44.0, Some(45.2)).flagged);
        assert_eq!(check(44.4, 45.0, None).cell(), "44.4 / 45.0 ⚠ lower");
    }
}
