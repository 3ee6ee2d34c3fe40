//! Quality reports through the domain with the scripted engine (its tallies: one luma sample
//! in four off by one, SSIM 0.99): who decides whether a render is measured (the render's
//! `quality_report`, else the node's setting, fixed at creation), and a split render's report
//! (each segment's tally kept with the segment, merged at the join). The real measurement:
//! `media/tests/engine/quality.rs`; over the wire: `tests/e2e/mcp_render.rs`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::{Harness, ScriptedRenderer, render_args};
use serde_json::{Value, json};
use vidforge_core::store::{Outcome, QualityFigures, RenderRecord, RenderState};

async fn render(h: &Harness, quality: Option<bool>) -> RenderRecord {
    let video = h.video("alice").await;
    let mut args = render_args(&video, None, None);
    if let Some(q) = quality {
        args["quality_report"] = json!(q);
    }
    let parsed = vidforge_mcp::inputs::render_args(&args).expect("valid arguments");
    let id = h
        .service
        .create_render("alice", parsed, args.clone())
        .await
        .expect("created")
        .record
        .id;
    h.wait_state("alice", &id, RenderState::Succeeded).await
}

fn quality_of(rec: &RenderRecord) -> Option<QualityFigures> {
    match &rec.outcome {
        Some(Outcome::Success { quality, .. }) => quality.as_deref().cloned(),
        other => panic!("no success: {other:?}"),
    }
}

/// PSNR Y of the scripted tallies: MSE 1/4 of 255².
fn scripted_psnr_y() -> f64 {
    10.0 * (255.0f64 * 255.0 / 0.25).log10()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_render_asks_else_the_node_decides_and_unmeasured_renders_report_nothing() {
    let h = Harness::start(ScriptedRenderer::new(10, Duration::ZERO), |_| {});
    // Off by default: nothing measured, nothing reported (and the record says so).
    let plain = render(&h, None).await;
    assert!(!plain.measure_quality);
    assert_eq!(quality_of(&plain), None);
    let asked = render(&h, Some(true)).await;
    assert!(asked.measure_quality);
    let q = quality_of(&asked).expect("measured");
    assert_eq!(q.whole.frames_measured, 10);
    assert!(
        (q.whole.psnr_y_db - scripted_psnr_y()).abs() < 1e-9,
        "{q:?}"
    );
    assert!(q.segments.is_empty());
    // A node that measures every render; one render opts out.
    let h = Harness::start(ScriptedRenderer::new(10, Duration::ZERO), |c| {
        c.quality_report = true
    });
    assert!(quality_of(&render(&h, None).await).is_some());
    assert_eq!(quality_of(&render(&h, Some(false)).await), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_render_reports_each_segment_and_their_merge() {
    let renderer = ScriptedRenderer::new(40, Duration::from_millis(2));
    renderer.split.store(4, Ordering::SeqCst);
    let h = Harness::start(Arc::clone(&renderer), |c| {
        c.render_slots = 3;
        c.per_principal_concurrent = 4;
    });
    let done = render(&h, Some(true)).await;
    assert_eq!(renderer.joins.load(Ordering::SeqCst), 1);
    let q = quality_of(&done).expect("measured");
    assert_eq!(q.whole.frames_measured, 40);
    let indices: Vec<u32> = q.segments.iter().map(|s| s.index).collect();
    assert_eq!(indices, [0, 1, 2, 3]);
    for s in &q.segments {
        assert_eq!(s.figures.frames_measured, 10);
        // Each scripted segment is its own second (its index).
        assert_eq!(s.figures.worst.at_seconds, s.index);
        assert!((s.figures.psnr_y_db - scripted_psnr_y()).abs() < 1e-9);
    }
    assert!((q.whole.ssim - 0.99).abs() < 1e-9);
    let wire: Value = vidforge_mcp::presentation::quality_wire(&q);
    assert_eq!(wire["segments"].as_array().map(Vec::len), Some(4));
}
