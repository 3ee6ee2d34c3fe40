//! What a render will cost, bounded at creation: its estimated work in output pixel-frames
//! (output width × height × frames, the frames from the source's probed duration × frame
//! rate), checked against the per-render limit (`render_too_large`) and against the
//! principal's budget per window (`render_budget_exceeded`), both in seconds of work at the
//! configured `render_pixel_rate`. The bytes of an upload say nothing about this: a 236 KB
//! 16×16 clip declaring 600 s is 18,000 frames at whatever resolution is asked for. A render
//! that keeps HDR weighs more per pixel-frame ([`WorkCost`]): its 10-bit encoders are slower.
//!
//! The budget is the sum of the estimates stored on the principal's renders created within
//! the window (read back from the store, so it survives restarts and is shared by a
//! cluster's nodes), less those that ended before any worker started them.

use crate::config::Config;
use crate::error::{ServiceError, WorkRefusal};
use crate::shared::Shared;
use crate::store::{AssetProbe, HdrPolicy, OutputFormat, RenderRecord, Resolution};

/// Frame rate assumed for a source whose probe recorded none (assets probed before the rate
/// was recorded).
const ASSUMED_FPS: f64 = 30.0;
/// At most this many of a principal's newest renders are summed for the budget.
const BUDGET_SCAN_LIMIT: usize = 1_000;

/// What one output pixel-frame of a render weighs against the SDR renders `render_pixel_rate`
/// is measured with (x264 `veryfast` for mp4/mov), in halves. A render that keeps HDR encodes
/// 10 bits: HEVC with x265 at the same preset for mp4/mov, measured at 6.4 times x264's time
/// (13 halves), and 10-bit VP9 for webm, 1.5 times 8-bit VP9's (3 halves). Measured with the
/// ffmpeg CLI on 200 frames of 720p, 2 cores, medians of 3 (docs/color.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WorkCost(u64);

impl WorkCost {
    /// An SDR render, or an HDR source tone-mapped to SDR.
    pub(crate) const SDR: WorkCost = WorkCost(2);

    /// The cost of a render to `format` with its source's `hdr` policy (SDR sources: `ToSdr`).
    pub(crate) fn of(hdr: HdrPolicy, format: OutputFormat) -> WorkCost {
        match (hdr, format) {
            (HdrPolicy::ToSdr, _) => Self::SDR,
            (HdrPolicy::Keep, OutputFormat::Webm) => WorkCost(3),
            (HdrPolicy::Keep, OutputFormat::Mp4 | OutputFormat::Mov) => WorkCost(13),
        }
    }
}

/// Output pixel-frames of rendering a source probed as `probe` at `resolution`, weighed by
/// `cost`. A source of unknown duration counts as the longest accepted (`max_source_seconds`).
pub(crate) fn estimate_pixel_frames(
    probe: &AssetProbe,
    resolution: Resolution,
    cost: WorkCost,
    max_source_seconds: u64,
) -> u64 {
    let (bw, bh) = resolution.box_size();
    let (w, h) = vidforge_media::output_size(
        probe.width.unwrap_or(bw),
        probe.height.unwrap_or(bh),
        resolution,
    );
    let fps = probe
        .fps
        .filter(|f| f.is_finite() && *f > 0.0)
        .unwrap_or(ASSUMED_FPS);
    let seconds = probe
        .duration_seconds
        .filter(|d| d.is_finite() && *d > 0.0)
        .unwrap_or(max_source_seconds as f64);
    let frames = (seconds * fps).ceil().max(1.0);
    // Saturating: f64 → u64 casts clamp.
    (w as f64 * h as f64 * frames * cost.0 as f64 / 2.0) as u64
}

/// Pixel-frames as whole seconds of work at the configured rate, rounded up.
fn seconds(config: &Config, pixel_frames: u64) -> u64 {
    pixel_frames.div_ceil(config.render_pixel_rate)
}

/// The resolutions below `requested`, highest first.
fn lower_resolutions(requested: Resolution) -> impl Iterator<Item = Resolution> {
    Resolution::ALL
        .into_iter()
        .rev()
        .filter(move |r| r.box_size().1 < requested.box_size().1)
}

/// The render's estimate, or `render_too_large` when it exceeds the per-render limit (or the
/// whole budget, which it could never fit in).
pub(super) fn check_size(
    config: &Config,
    probe: &AssetProbe,
    resolution: Resolution,
    cost: WorkCost,
) -> Result<u64, ServiceError> {
    let estimate = estimate_pixel_frames(probe, resolution, cost, config.max_source_seconds);
    let (limit, limit_seconds) = match config.render_budget_pixel_frames() {
        Some(budget) if budget < config.max_render_pixel_frames() => {
            (budget, config.render_budget_seconds)
        }
        _ => (config.max_render_pixel_frames(), config.max_render_seconds),
    };
    if estimate <= limit {
        return Ok(estimate);
    }
    let fits = lower_resolutions(resolution)
        .find(|r| estimate_pixel_frames(probe, *r, cost, config.max_source_seconds) <= limit);
    Err(ServiceError::RenderTooLarge(WorkRefusal {
        estimated_pixel_frames: estimate,
        estimated_seconds: seconds(config, estimate),
        limit_pixel_frames: limit,
        limit_seconds,
        remaining_pixel_frames: 0,
        remaining_seconds: 0,
        window_seconds: None,
        retry_after_ms: None,
        fits,
    }))
}

/// Whether a render counts against its principal's budget: every render created in the
/// window except those that ended before a worker started them (cancelled while queued).
fn counts(rec: &RenderRecord) -> bool {
    !(rec.is_terminal() && rec.attempts == 0)
}

/// `render_budget_exceeded` when `estimate` does not fit in what is left of `principal`'s
/// budget in the window ending now; `retry_after_ms` says when enough of it frees up. Called
/// under the create lock, so this node's creators see each other's renders.
pub(super) fn check_budget(
    shared: &Shared,
    principal: &str,
    (probe, resolution, cost): (&AssetProbe, Resolution, WorkCost),
    estimate: u64,
    now: u64,
) -> Result<(), ServiceError> {
    let config = &shared.config;
    let Some(budget) = config.render_budget_pixel_frames() else {
        return Ok(());
    };
    let window_ms = config.render_budget_window.as_millis() as u64;
    let since = now.saturating_sub(window_ms);
    let mut recent: Vec<(u64, u64)> = shared
        .ledger
        .store
        .recent_renders(Some(principal), BUDGET_SCAN_LIMIT)?
        .iter()
        .filter(|r| r.created_at > since && counts(r))
        .map(|r| (r.created_at, r.estimated_pixel_frames))
        .collect();
    let used: u64 = recent.iter().map(|(_, e)| *e).sum();
    if used.saturating_add(estimate) <= budget {
        return Ok(());
    }
    // The oldest renders leave the window first: retry when enough of them have.
    recent.sort_unstable();
    let excess = used.saturating_add(estimate) - budget;
    let mut freed = 0u64;
    let mut retry_at = now.saturating_add(window_ms);
    for (created_at, e) in &recent {
        freed = freed.saturating_add(*e);
        if freed >= excess {
            retry_at = created_at.saturating_add(window_ms);
            break;
        }
    }
    let remaining = budget.saturating_sub(used);
    let fits = lower_resolutions(resolution)
        .find(|r| estimate_pixel_frames(probe, *r, cost, config.max_source_seconds) <= remaining);
    tracing::info!(
        principal,
        estimate,
        used,
        budget,
        "render refused: over the principal's render budget"
    );
    Err(ServiceError::RenderBudgetExceeded(WorkRefusal {
        estimated_pixel_frames: estimate,
        estimated_seconds: seconds(config, estimate),
        limit_pixel_frames: budget,
        limit_seconds: config.render_budget_seconds,
        remaining_pixel_frames: remaining,
        remaining_seconds: remaining / config.render_pixel_rate,
        window_seconds: Some(config.render_budget_window.as_secs()),
        retry_after_ms: Some(retry_at.saturating_sub(now).max(1)),
        fits,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(w: u32, h: u32, seconds: f64, fps: Option<f64>) -> AssetProbe {
        AssetProbe {
            width: Some(w),
            height: Some(h),
            duration_seconds: Some(seconds),
            fps,
            ..AssetProbe::default()
        }
    }

    #[test]
    fn the_estimate_is_output_pixels_times_frames() {
        // The amplification file: 16×16, 600 s at 30 fps → a 2160×2160 output of 18,000 frames.
        let tiny = probe(16, 16, 600.0, Some(30.0));
        assert_eq!(
            estimate_pixel_frames(&tiny, Resolution::P4k, WorkCost::SDR, 7200),
            2160 * 2160 * 18_000
        );
        assert_eq!(
            estimate_pixel_frames(&tiny, Resolution::P720, WorkCost::SDR, 7200),
            720 * 720 * 18_000
        );
        // Unknown rate: 30 fps; unknown duration: the longest accepted.
        let old = AssetProbe {
            width: Some(1920),
            height: Some(1080),
            ..AssetProbe::default()
        };
        assert_eq!(
            estimate_pixel_frames(&old, Resolution::P1080, WorkCost::SDR, 10),
            1920 * 1080 * 300
        );
    }

    #[test]
    fn kept_hdr_weighs_what_its_10_bit_encoders_cost() {
        let clip = probe(1920, 1080, 10.0, Some(25.0));
        let sdr = estimate_pixel_frames(&clip, Resolution::P720, WorkCost::SDR, 7200);
        assert_eq!(sdr, 1280 * 720 * 250);
        let kept = |format| {
            let cost = WorkCost::of(HdrPolicy::Keep, format);
            estimate_pixel_frames(&clip, Resolution::P720, cost, 7200)
        };
        assert_eq!(kept(OutputFormat::Mp4), sdr * 13 / 2);
        assert_eq!(kept(OutputFormat::Mov), sdr * 13 / 2);
        assert_eq!(kept(OutputFormat::Webm), sdr * 3 / 2);
        for format in OutputFormat::ALL {
            assert_eq!(WorkCost::of(HdrPolicy::ToSdr, format), WorkCost::SDR);
        }
        // A kept render whose SDR twin fits (138 s of 600) is refused at 899 s; 720p is the
        // lowest resolution, so none is named.
        let config = Config {
            render_pixel_rate: 100_000_000,
            max_render_seconds: 600,
            render_budget_seconds: 0,
            ..Config::default()
        };
        let long = probe(1920, 1080, 600.0, Some(25.0));
        assert!(check_size(&config, &long, Resolution::P720, WorkCost::SDR).is_ok());
        let cost = WorkCost::of(HdrPolicy::Keep, OutputFormat::Mp4);
        let Err(ServiceError::RenderTooLarge(w)) =
            check_size(&config, &long, Resolution::P720, cost)
        else {
            panic!("a kept 720p render of 10 minutes is over 10 minutes of work");
        };
        assert_eq!(w.estimated_pixel_frames, 1280 * 720 * 15_000 * 13 / 2);
        assert_eq!(w.estimated_seconds, 899);
        assert_eq!(w.fits, None);
    }

    #[test]
    fn too_large_names_the_highest_resolution_that_fits() {
        let mut config = Config {
            render_pixel_rate: 100_000_000,
            max_render_seconds: 600,
            render_budget_seconds: 0,
            ..Config::default()
        };
        let tiny = probe(16, 16, 600.0, Some(30.0));
        let Err(ServiceError::RenderTooLarge(w)) =
            check_size(&config, &tiny, Resolution::P4k, WorkCost::SDR)
        else {
            panic!("a 4k render of the amplification file must be refused");
        };
        assert_eq!(w.fits, Some(Resolution::P1080));
        assert_eq!(w.limit_pixel_frames, 60_000_000_000);
        assert_eq!(w.estimated_seconds, 840);
        assert!(check_size(&config, &tiny, Resolution::P1080, WorkCost::SDR).is_ok());
        // Nothing fits: no resolution is named.
        config.max_render_seconds = 1;
        let Err(ServiceError::RenderTooLarge(w)) =
            check_size(&config, &tiny, Resolution::P1080, WorkCost::SDR)
        else {
            panic!("refused");
        };
        assert_eq!(w.fits, None);
    }
}
