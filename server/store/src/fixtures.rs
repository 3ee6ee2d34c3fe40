//! Sample records for tests (this crate's and the domain's) and benchmarks, and a sled store
//! written the way a build from before the render indexes left it.

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
    let mut render = sample(render_id);
    render.principal = principal.into();
    (0..count)
        .map(|i| {
            let start = f64::from(i);
            let pts = i64::from(i) * 90_000;
            let span = vidforge_media::SegmentSpan {
                index: i,
                start_pts: Some(pts),
                end_pts: Some(pts + 90_000),
                start_seconds: start,
                end_seconds: start + 1.0,
                frames: 30,
            };
            SegmentRecord::new(&render, span, count, created_at)
        })
        .collect()
}

/// A well-formed render id minted at `ms` (a ULID of that time, with `n` in place of the
/// random bits, so distinct `n` give distinct ids).
pub fn render_id(ms: u64, n: u64) -> String {
    format!(
        "{}{}",
        crate::ids::RENDER_ID_PREFIX,
        ulid::Ulid::from_parts(ms, u128::from(n))
    )
}

/// A 1080p mp4 render of `principal` created at `created_at` (Unix ms) that succeeded
/// 30 s later, as a busy host keeps a week of them (about 1 KiB of JSON): the render index
/// tests' and the store benchmarks' records. `n` makes its id ([`render_id`]).
pub fn finished_render(principal: &str, created_at: u64, n: u64) -> RenderRecord {
    let id = render_id(created_at, n);
    let finished_at = created_at + 30_000;
    RenderRecord {
        principal: principal.into(),
        args: RenderArgs {
            source_asset: render_id(created_at, n).replace("task_", "a_"),
            output_format: OutputFormat::Mp4,
            resolution: Resolution::P1080,
            watermark: None,
            idempotency_key: None,
            quality_report: None,
        },
        original_arguments: serde_json::json!({
            "source_asset_uri": format!("vidforge://assets/a_{}", &id[5..]),
            "output_format": "mp4",
            "resolution": "1080p",
        }),
        state: RenderState::Succeeded,
        progress: Some(
            ProgressSnapshot::new(ProgressStage::Finalizing, 900, Some(900))
                .with_rate(112.5, "wgpu: NVIDIA H200"),
        ),
        created_at,
        updated_at: finished_at,
        outcome: Some(Outcome::Success {
            video_path: format!("/var/lib/vidforge/results/{id}/final.mp4").into(),
            video_file_name: "final.mp4".into(),
            mime_type: "video/mp4".into(),
            size_bytes: 4_718_592,
            duration_seconds: 30.0,
            width: 1920,
            height: 1080,
            resolution: "1080p".into(),
            watermark_applied: false,
            finished_at,
            backend: "wgpu: NVIDIA H200".into(),
            frames: 900,
            fps: 112.5,
            quality: None,
        }),
        finished_at: Some(finished_at),
        attempts: 1,
        estimated_pixel_frames: 1920 * 1080 * 900,
        id,
        ..sample("")
    }
}

/// [`finished_render`] not finished yet: in `state`, without outcome, end or progress.
pub fn unfinished_render(
    principal: &str,
    created_at: u64,
    n: u64,
    state: RenderState,
) -> RenderRecord {
    RenderRecord {
        state,
        outcome: None,
        finished_at: None,
        progress: None,
        ..finished_render(principal, created_at, n)
    }
}

/// [`unfinished_render`] with a watermark, awaiting its approval until `deadline` (Unix ms),
/// undecided.
pub fn awaiting_render(principal: &str, created_at: u64, n: u64, deadline: u64) -> RenderRecord {
    let mut r = unfinished_render(principal, created_at, n, RenderState::AwaitingApproval);
    r.args.watermark = Some(WatermarkArgs {
        image_asset: render_id(created_at, n).replace("task_", "a_"),
        position: Position::BottomRight,
        opacity: 1.0,
    });
    r.approval = Some(Approval {
        decision: None,
        requested_at: created_at + 1_000,
        deadline,
    });
    r
}

/// Writes `records` into a new sled store in `dir` the way a build from before the render
/// indexes left it (the records alone, flushed): the index migration's starting point.
pub fn write_unindexed(dir: &std::path::Path, records: &[RenderRecord]) -> Result<(), StoreError> {
    let db = sled::Config::new().path(dir).open()?;
    let renders = db.open_tree("renders")?;
    for chunk in records.chunks(10_000) {
        let mut batch = sled::Batch::default();
        for r in chunk {
            batch.insert(r.id.as_bytes(), crate::update::encode(r)?);
        }
        renders.apply_batch(batch)?;
    }
    db.flush()?;
    Ok(())
}
