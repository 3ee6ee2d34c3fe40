//! Sample records for tests (this crate's and the domain's).

use crate::catalog::ErrorCode;
use crate::*;

/// A terminal (rejected) 4k render of `alice`, for tests of code that reads records.
pub fn sample(id: &str) -> RenderRecord {
    RenderRecord {
        id: id.into(),
        principal: "alice".into(),
        args: RenderArgs {
            source_asset: "a_X".into(),
            output_format: OutputFormat::Webm,
            resolution: Resolution::P4k,
            watermark: Some(WatermarkArgs {
                image_asset: "a_Y".into(),
                position: Position::Center,
                opacity: 0.6,
            }),
            idempotency_key: Some("k1".into()),
            quality_report: None,
        },
        original_arguments: serde_json::json!({"source_asset_uri": "vidforge://assets/a_X", "idempotency_key": "k1"}),
        state: RenderState::Failed,
        progress: Some(ProgressSnapshot::new(ProgressStage::Rendering, 5, Some(10))),
        created_at: 1,
        updated_at: 2,
        approval: None,
        preview_path: None,
        preview_size: None,
        outcome: Some(Outcome::Error {
            code: ErrorCode::WatermarkRejected,
            message: "m".into(),
            reason: Some("r".into()),
            field: Some("watermark".into()),
            retry_after_ms: None,
            temporary: None,
        }),
        cancel_requested: false,
        finished_at: Some(3),
        result_deleted: false,
        attempts: 1,
        crashes: 0,
        estimated_pixel_frames: 0,
        speculation: None,
        source_hdr: None,
        keep_hdr: false,
        measure_quality: false,
    }
}

/// `count` queued segments of `render_id` (one second and 30 frames each), owned by
/// `principal`, created at `created_at`.
pub fn segments(
    render_id: &str,
    count: u32,
    principal: &str,
    created_at: u64,
) -> Vec<SegmentRecord> {
    (0..count)
        .map(|i| {
            let start = f64::from(i);
            let pts = i64::from(i) * 90_000;
            SegmentRecord::new(
                render_id,
                i,
                count,
                principal,
                Some(pts),
                Some(pts + 90_000),
                start,
                start + 1.0,
                30,
                created_at,
            )
        })
        .collect()
}
