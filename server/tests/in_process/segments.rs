//! Segment-parallel rendering (`fanout`) with a scripted engine: a split render's segments
//! run on idle slots and join in order, a segment that fails is retried alone, a split that
//! cannot be finished or joined falls back to one pass, cancel stops every segment, another
//! principal's render is not starved, a restart goes on with the segments already done, and
//! nothing of the segments is left when the render ends. (The real media, the seams and the
//! cluster: `media/tests/engine/segments.rs`, `tests/e2e/segments.rs`, `tests/e2e/cluster.rs`.)

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::common::{Harness, ScriptedRenderer, render_args};
use serde_json::Value;
use vidforge_core::catalog::ErrorCode;
use vidforge_core::config::Config;
use vidforge_core::engine::{EngineError, FailureKind};
use vidforge_core::store::{Outcome, RenderRecord, RenderState, SegmentState};

async fn create(h: &Harness, principal: &str, args: &Value) -> String {
    let parsed = vidforge_mcp::inputs::render_args(args).expect("valid arguments");
    h.service
        .create_render(principal, parsed, args.clone())
        .await
        .expect("render created")
        .record
        .id
}

/// A renderer that cuts every render into `split` segments of `frames / split` frames.
fn splitting(frames: u64, delay_ms: u64, split: u32) -> Arc<ScriptedRenderer> {
    let r = ScriptedRenderer::new(frames, Duration::from_millis(delay_ms));
    r.split.store(split, Ordering::SeqCst);
    r
}

fn slots(n: usize) -> impl FnOnce(&mut Config) {
    move |c| {
        c.render_slots = n;
        c.per_principal_concurrent = 4;
    }
}

fn output_of(rec: &RenderRecord) -> String {
    match &rec.outcome {
        Some(Outcome::Success { video_path, .. }) => {
            std::fs::read_to_string(video_path).expect("the output file")
        }
        other => panic!("no success: {other:?}"),
    }
}

fn joined(n: u32) -> String {
    (0..n).map(|i| format!("segment {i}\n")).collect()
}

/// Nothing of the render's segments is left: no record, no file.
fn assert_no_segments(h: &Harness, id: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let records = h.service.store().segments(id).expect("segments readable");
        let dir = h.service.config().segments_dir().join(id);
        if records.is_empty() && !dir.exists() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "segments left: {records:#?}, dir exists: {}",
            dir.exists()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_render_runs_its_segments_on_idle_slots_and_joins_them_in_order() {
    let h = Harness::start(splitting(80, 5, 4), slots(3));
    let video = h.video("alice").await;
    let id = create(&h, "alice", &render_args(&video, None, None)).await;
    // One render whose progress counts every segment's frames.
    let mid = h
        .wait("alice", &id, "aggregated progress", |r| {
            r.progress
                .as_ref()
                .is_some_and(|p| p.frames_total == Some(80) && p.frames_done > 0)
        })
        .await;
    assert!(matches!(
        mid.state,
        RenderState::Rendering | RenderState::Succeeded
    ));
    let done = h.wait_state("alice", &id, RenderState::Succeeded).await;
    assert_eq!(output_of(&done), joined(4));
    assert_eq!(h.renderer.segments_started.load(Ordering::SeqCst), 4);
    assert_eq!(h.renderer.joins.load(Ordering::SeqCst), 1);
    assert_eq!(h.renderer.renders_started.load(Ordering::SeqCst), 0);
    assert_no_segments(&h, &id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_segment_that_fails_once_is_retried_alone() {
    let h = Harness::start(splitting(40, 2, 4), slots(2));
    h.renderer.segment_failures.lock().unwrap().insert(1, 1);
    let video = h.video("alice").await;
    let id = create(&h, "alice", &render_args(&video, None, None)).await;
    let done = h.wait_state("alice", &id, RenderState::Succeeded).await;
    assert_eq!(output_of(&done), joined(4));
    // Four segments and one retry: the others did not run again.
    assert_eq!(h.renderer.segments_started.load(Ordering::SeqCst), 5);
    assert_no_segments(&h, &id);
}

/// A split that cannot be finished (a segment fails for good) or joined is given up: the
/// render runs in one pass, which decides its outcome, and nothing of the segments is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_that_cannot_be_finished_or_joined_falls_back_to_one_pass() {
    let h = Harness::start(splitting(40, 2, 4), |c| {
        slots(2)(c);
        c.segment_attempts = 2;
    });
    h.renderer.segment_failures.lock().unwrap().insert(2, 99);
    let video = h.video("alice").await;
    let id = create(&h, "alice", &render_args(&video, None, None)).await;
    let done = h.wait_state("alice", &id, RenderState::Succeeded).await;
    assert!(output_of(&done).starts_with("scripted render of"));
    assert_eq!(h.renderer.renders_started.load(Ordering::SeqCst), 1);
    assert_eq!(h.renderer.joins.load(Ordering::SeqCst), 0);
    assert_no_segments(&h, &id);

    // Every segment done, but the join refuses them.
    h.renderer.segment_failures.lock().unwrap().clear();
    h.renderer.join_failures.store(1, Ordering::SeqCst);
    let id = create(&h, "alice", &render_args(&video, None, None)).await;
    let done = h.wait_state("alice", &id, RenderState::Succeeded).await;
    assert!(output_of(&done).starts_with("scripted render of"));
    assert_eq!(h.renderer.renders_started.load(Ordering::SeqCst), 2);
    assert_eq!(h.renderer.joins.load(Ordering::SeqCst), 1);
    assert_no_segments(&h, &id);
    // And a render whose one pass fails too fails with that pass's code.
    *h.renderer.fail_next.lock().unwrap() = Some(EngineError::new(
        FailureKind::InvalidInput,
        "truncated at 3.2 s",
    ));
    h.renderer.join_failures.store(1, Ordering::SeqCst);
    let id = create(&h, "alice", &render_args(&video, None, None)).await;
    let failed = h.wait_state("alice", &id, RenderState::Failed).await;
    match &failed.outcome {
        Some(Outcome::Error { code, reason, .. }) => {
            assert_eq!(*code, ErrorCode::UnsupportedCodec);
            assert!(
                reason.as_deref().is_some_and(|r| r.contains("truncated")),
                "{reason:?}"
            );
        }
        other => panic!("expected the one pass's failure: {other:?}"),
    }
    assert_no_segments(&h, &id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_during_fan_out_stops_every_segment_and_leaves_nothing() {
    let h = Harness::start(splitting(400, 5, 4), slots(3));
    let video = h.video("alice").await;
    let id = create(&h, "alice", &render_args(&video, None, None)).await;
    h.wait("alice", &id, "segments running", |r| {
        r.progress.as_ref().is_some_and(|p| p.frames_done > 0)
    })
    .await;
    let store = h.service.store();
    assert!(
        store
            .segments(&id)
            .unwrap()
            .iter()
            .any(|s| s.state == SegmentState::Running)
    );
    let cancelled_at = Instant::now();
    h.service.cancel("alice", &id).await.expect("cancel");
    h.wait_state("alice", &id, RenderState::Cancelled).await;
    assert_no_segments(&h, &id);
    // Every slot is free again: a render after it runs at once, in one pass.
    h.renderer.split.store(0, Ordering::SeqCst);
    let next = create(&h, "alice", &render_args(&video, None, None)).await;
    h.wait_state("alice", &next, RenderState::Succeeded).await;
    let started = h.renderer.segments_started.load(Ordering::SeqCst);
    assert!(started <= 4, "{started} segment runs after a cancel");
    assert!(cancelled_at.elapsed() < Duration::from_secs(10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_principals_render_waits_for_one_segment_at_most() {
    let h = Harness::start(splitting(800, 5, 8), slots(2));
    let video = h.video("alice").await;
    let bobs_video = h.video("bob").await;
    let long = create(&h, "alice", &render_args(&video, None, None)).await;
    h.wait("alice", &long, "split", |r| {
        r.progress.as_ref().is_some_and(|p| p.frames_done > 0)
    })
    .await;
    h.renderer.split.store(0, Ordering::SeqCst);
    let short = create(&h, "bob", &render_args(&bobs_video, None, None)).await;
    h.wait("bob", &short, "bob's render started", |r| {
        r.state != RenderState::Queued
    })
    .await;
    let alice = h.service.get("alice", &long).unwrap();
    assert!(
        !alice.is_terminal(),
        "bob's render waited for alice's whole render"
    );
    h.wait_state("bob", &short, RenderState::Succeeded).await;
    let done = h.wait_state("alice", &long, RenderState::Succeeded).await;
    assert_eq!(output_of(&done), joined(8));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_goes_on_with_the_segments_already_done() {
    let renderer = splitting(400, 5, 4);
    let h = Harness::start(renderer.clone(), slots(2));
    let video = h.video("alice").await;
    let id = create(&h, "alice", &render_args(&video, None, None)).await;
    let deadline = Instant::now() + Duration::from_secs(15);
    let done_before = loop {
        let segs = h.service.store().segments(&id).unwrap();
        let done = segs
            .iter()
            .filter(|s| s.state == SegmentState::Done)
            .count();
        if done > 0 {
            break done;
        }
        assert!(Instant::now() < deadline, "no segment done: {segs:#?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let h = h.restart(renderer.clone());
    let rec = h.wait_state("alice", &id, RenderState::Succeeded).await;
    assert_eq!(output_of(&rec), joined(4));
    let runs = renderer.segments_started.load(Ordering::SeqCst);
    assert!(
        runs <= 4 + (4 - done_before),
        "{runs} segment runs: the {done_before} done before the restart ran again"
    );
    assert_no_segments(&h, &id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fanout_off_renders_in_one_pass() {
    let h = Harness::start(splitting(20, 2, 4), |c| {
        slots(3)(c);
        c.fanout = vidforge_core::config::Fanout::Off;
    });
    let video = h.video("alice").await;
    let id = create(&h, "alice", &render_args(&video, None, None)).await;
    h.wait_state("alice", &id, RenderState::Succeeded).await;
    assert_eq!(h.renderer.segments_started.load(Ordering::SeqCst), 0);
    assert_eq!(h.renderer.renders_started.load(Ordering::SeqCst), 1);
}
