//! A render's quality on the wire: the result's `quality` key (its schema: `tools.rs`,
//! `quality_schema`), built here from the store's figures so that the wire names stay the
//! front's.

use serde_json::Value;

use vidforge_core::store::{Figures, QualityFigures};

/// The result's `quality` key (schema: `tools.rs`, `quality_schema`): the whole render's
/// figures, and a split render's segments'.
pub fn quality_wire(q: &QualityFigures) -> Value {
    let mut v = figures_wire(&q.whole);
    if !q.segments.is_empty() {
        v["segments"] = q
            .segments
            .iter()
            .map(|s| {
                let mut f = figures_wire(&s.figures);
                f["index"] = s.index.into();
                f["start_seconds"] = s.start_seconds.into();
                f["end_seconds"] = s.end_seconds.into();
                f
            })
            .collect();
    }
    v
}

fn figures_wire(f: &Figures) -> Value {
    // Two decimals (dB) and four (SSIM): what the measurement can tell apart.
    let db = |v: f64| (v * 100.0).round() / 100.0;
    let unit = |v: f64| (v * 10_000.0).round() / 10_000.0;
    serde_json::json!({
        "psnr_y_db": db(f.psnr_y_db),
        "psnr_db": db(f.psnr_db),
        "ssim": unit(f.ssim),
        "frames_measured": f.frames_measured,
        "worst": {
            "at_seconds": f.worst.at_seconds,
            "psnr_y_db": db(f.worst.psnr_y_db),
            "psnr_db": db(f.worst.psnr_db),
            "ssim": unit(f.worst.ssim),
        }
    })
}
