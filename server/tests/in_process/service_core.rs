//! RenderService behaviour with a scripted renderer: durability, idempotency, isolation, quota,
//! approvals, cancel, boot recovery, sweeping and upload limits.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::{Harness, ScriptedRenderer, fixtures, render_args};
use serde_json::Value;
use vidforge_core::ServiceError;
use vidforge_core::catalog::{self, ErrorCode};
use vidforge_core::engine::{EngineError, FailureKind};
use vidforge_core::service::CreateOutcome;
use vidforge_core::store::{AssetKind, Outcome, RenderState, Store};
use vidforge_core::uri;

async fn create(h: &Harness, principal: &str, args: &Value) -> Result<CreateOutcome, ServiceError> {
    let parsed = vidforge_mcp::inputs::render_args(args)?;
    h.service
        .create_render(principal, parsed, args.clone())
        .await
}

fn fast() -> std::sync::Arc<ScriptedRenderer> {
    ScriptedRenderer::new(20, Duration::from_millis(2))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn render_runs_to_success_with_throttled_progress() {
    let h = Harness::start(ScriptedRenderer::new(60, Duration::from_millis(10)), |_| {});
    let mut events = h.service.subscribe();
    let video = h.video("alice").await;
    assert_eq!(video.kind, AssetKind::Video);
    assert_eq!(video.probe.width, Some(160));
    let created = create(&h, "alice", &render_args(&video, None, None))
        .await
        .unwrap();
    assert!(!created.replayed);
    assert!(created.record.id.starts_with("task_"));
    assert_eq!(created.record.id.len(), 5 + 26);
    // Durable before the call returned: a fresh handle on the store sees it (sled shares the
    // open database within the process, so read through the service's own store handle).
    assert!(
        h.service
            .store()
            .get_render(&created.record.id)
            .unwrap()
            .is_some()
    );

    let mid = h
        .wait("alice", &created.record.id, "progress", |r| {
            r.progress
                .as_ref()
                .is_some_and(|p| p.frames_done > 0 && p.percent.is_some())
        })
        .await;
    assert_eq!(mid.state, RenderState::Rendering);
    let done = h
        .wait_state("alice", &created.record.id, RenderState::Succeeded)
        .await;
    let Some(Outcome::Success {
        video_path,
        size_bytes,
        width,
        height,
        watermark_applied,
        video_file_name,
        ..
    }) = &done.outcome
    else {
        panic!("expected success: {done:#?}");
    };
    assert_eq!((*width, *height), (1280, 720));
    assert!(!watermark_applied);
    assert_eq!(video_file_name, "final.mp4");
    assert_eq!(std::fs::metadata(video_path).unwrap().len(), *size_bytes);
    assert_eq!(done.attempts, 1);
    assert!(done.finished_at.is_some());

    // 60 frames over ~600 ms with a 250 ms publish interval: a handful of events, not 60.
    let mut n = 0;
    while let Ok(id) = events.try_recv() {
        assert_eq!(id, created.record.id);
        n += 1;
    }
    let calls = h.renderer.progress_calls.load(Ordering::SeqCst);
    assert!(calls >= 60, "renderer reported {calls} times");
    assert!(
        (3..30).contains(&n),
        "{n} change events for {calls} progress reports"
    );

    let file = h
        .service
        .resolve_result("alice", &created.record.id)
        .unwrap();
    assert_eq!(file.mime_type, "video/mp4");
    assert_eq!(file.path, *video_path);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_survive_a_restart() {
    let h = Harness::start(fast(), |_| {});
    let video = h.video("alice").await;
    let id = create(&h, "alice", &render_args(&video, None, Some("k")))
        .await
        .unwrap()
        .record
        .id;
    h.wait_state("alice", &id, RenderState::Succeeded).await;
    let h = h.restart(fast());
    let rec = h.service.get("alice", &id).unwrap();
    assert_eq!(rec.state, RenderState::Succeeded);
    assert_eq!(
        h.service.resolve_asset("alice", &video.uri).unwrap().id,
        video.id
    );
    // The idempotency key survived too.
    let again = create(&h, "alice", &render_args(&video, None, Some("k")))
        .await
        .unwrap();
    assert!(again.replayed);
    assert_eq!(again.record.id, id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_reopens_after_drop() {
    let h = Harness::start(fast(), |_| {});
    let video = h.video("alice").await;
    let id = create(&h, "alice", &render_args(&video, None, None))
        .await
        .unwrap()
        .record
        .id;
    h.wait_state("alice", &id, RenderState::Succeeded).await;
    let db = h.service.config().db_dir();
    let Harness { service, dir, .. } = h;
    drop(service);
    let store = Store::open(&db).expect("lock released after the service is dropped");
    let rec = store.get_render(&id).unwrap().unwrap();
    assert_eq!(rec.state, RenderState::Succeeded);
    drop(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_replays_conflicts_and_dedupes_concurrent_calls() {
    let h = Harness::start(fast(), |c| c.per_principal_concurrent = 20);
    let video = h.video("alice").await;
    let args = render_args(&video, None, Some("launch-1"));
    let first = create(&h, "alice", &args).await.unwrap();
    // Same key, same meaning (explicit defaults are the same arguments): replay.
    let replay = create(&h, "alice", &args).await.unwrap();
    assert!(replay.replayed);
    assert_eq!(replay.record.id, first.record.id);
    // Same key, different arguments: conflict.
    let mut other = args.clone();
    other["resolution"] = "1080p".into();
    let e = create(&h, "alice", &other).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::IdempotencyConflict);
    assert_eq!(e.field(), Some("idempotency_key"));
    // Keys are per principal: bob's "launch-1" is a different render.
    let bob_video = h.video("bob").await;
    let bob = create(&h, "bob", &render_args(&bob_video, None, Some("launch-1")))
        .await
        .unwrap();
    assert!(!bob.replayed);
    assert_ne!(bob.record.id, first.record.id);

    // Eight concurrent duplicates start exactly one render.
    let args = render_args(&video, None, Some("concurrent"));
    let mut joins = Vec::new();
    for _ in 0..8 {
        let service = h.service.clone();
        let args = args.clone();
        joins.push(tokio::spawn(async move {
            let parsed = vidforge_mcp::inputs::render_args(&args).unwrap();
            service.create_render("alice", parsed, args).await
        }));
    }
    let mut ids = std::collections::HashSet::new();
    let mut fresh = 0;
    for j in joins {
        let out = j.await.unwrap().unwrap();
        ids.insert(out.record.id.clone());
        if !out.replayed {
            fresh += 1;
        }
    }
    assert_eq!(ids.len(), 1);
    assert_eq!(fresh, 1);
    let with_key = h
        .service
        .store()
        .recent_renders(Some("alice"), 1_000)
        .unwrap()
        .into_iter()
        .filter(|r| r.args.idempotency_key.as_deref() == Some("concurrent"))
        .count();
    assert_eq!(with_key, 1);

    // After 24 h the key is forgotten and starts a new render.
    let id = ids.into_iter().next().unwrap();
    h.wait_state("alice", &id, RenderState::Succeeded).await;
    h.clock
        .advance(catalog::IDEMPOTENCY_TTL + Duration::from_secs(1));
    let later = create(&h, "alice", &args).await.unwrap();
    assert!(!later.replayed);
    assert_ne!(later.record.id, id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn principals_are_isolated() {
    let h = Harness::start(fast(), |_| {});
    let video = h.video("alice").await;
    let logo = h.logo("alice").await;
    // Bob cannot use alice's assets: exactly like a missing asset.
    let e = create(&h, "bob", &render_args(&video, None, None))
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::SourceNotFound);
    assert_eq!(e.field(), Some("source_asset_uri"));
    let missing = uri::asset_uri(&vidforge_core::ids::new_asset_id());
    let mut args = render_args(&video, None, None);
    args["source_asset_uri"] = missing.into();
    let e2 = create(&h, "bob", &args).await.unwrap_err();
    assert_eq!(e.to_string(), e2.to_string());
    let bob_video = h.video("bob").await;
    let e = create(&h, "bob", &render_args(&bob_video, Some(&logo), None))
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), e.field()),
        (ErrorCode::SourceNotFound, Some("watermark.image_asset_uri"))
    );
    assert!(matches!(
        h.service.resolve_asset("bob", &video.uri),
        Err(ServiceError::SourceNotFound { .. })
    ));

    // Bob cannot see, decide, cancel or download alice's render.
    let id = create(&h, "alice", &render_args(&video, None, None))
        .await
        .unwrap()
        .record
        .id;
    h.wait_state("alice", &id, RenderState::Succeeded).await;
    assert!(matches!(
        h.service.get("bob", &id),
        Err(ServiceError::NotFound)
    ));
    assert!(matches!(
        h.service.get("bob", "task_nope"),
        Err(ServiceError::NotFound)
    ));
    assert!(matches!(
        h.service.cancel("bob", &id).await,
        Err(ServiceError::NotFound)
    ));
    assert!(matches!(
        h.service.decide_approval("bob", &id, true, None).await,
        Err(ServiceError::NotFound)
    ));
    assert!(matches!(
        h.service.resolve_result("bob", &id),
        Err(ServiceError::NotFound)
    ));
    assert!(h.service.resolve_result("alice", &id).is_ok());

    // A video used as a watermark, and a PNG used as a source, are refused.
    let e = create(&h, "alice", &render_args(&video, Some(&video), None))
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArguments);
    let e = create(&h, "alice", &render_args(&logo, None, None))
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::UnsupportedCodec);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_is_checked_before_the_record_is_written() {
    let renderer = fast();
    renderer.hold(true);
    let h = Harness::start(renderer.clone(), |c| {
        c.per_principal_concurrent = 2;
        c.queue_capacity = 1;
        c.render_slots = 1;
    });
    let a = h.video("alice").await;
    let first = create(&h, "alice", &render_args(&a, None, None))
        .await
        .unwrap()
        .record
        .id;
    let second = create(&h, "alice", &render_args(&a, None, None))
        .await
        .unwrap()
        .record
        .id;
    let count = || {
        let store = h.service.store();
        let every = |p| store.recent_renders(Some(p), 1_000).unwrap().len();
        every("alice") + every("bob")
    };
    let before = count();
    let e = create(&h, "alice", &render_args(&a, None, None))
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::RenderQuotaExceeded);
    assert!(e.temporary());
    assert_eq!(
        e.retry_after_ms(),
        Some(catalog::QUOTA_RETRY_AFTER.as_millis() as u64)
    );
    assert_eq!(count(), before, "no record written");

    // The pool (1 slot + 1 queued) is full too: bob is refused although he has none running.
    let b = h.video("bob").await;
    let e = create(&h, "bob", &render_args(&b, None, None))
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::RenderQuotaExceeded);
    assert!(e.reason().unwrap().contains("queue"), "{e:?}");

    // Finishing renders frees the quota.
    renderer.hold(false);
    h.wait_state("alice", &first, RenderState::Succeeded).await;
    h.wait_state("alice", &second, RenderState::Succeeded).await;
    create(&h, "bob", &render_args(&b, None, None))
        .await
        .unwrap();
    create(&h, "alice", &render_args(&a, None, None))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_flow_approve_reject_conflict_and_noop() {
    let h = Harness::start(fast(), |c| c.per_principal_concurrent = 5);
    let video = h.video("alice").await;
    let logo = h.logo("alice").await;
    assert_eq!(logo.kind, AssetKind::Image);

    // Approve → full render with the watermark.
    let id = create(&h, "alice", &render_args(&video, Some(&logo), None))
        .await
        .unwrap()
        .record
        .id;
    let waiting = h
        .wait_state("alice", &id, RenderState::AwaitingApproval)
        .await;
    let approval = waiting.approval.clone().unwrap();
    assert_eq!(
        approval.deadline - approval.requested_at,
        catalog::APPROVAL_TIMEOUT.as_millis() as u64
    );
    let (_, preview) = h.service.preview_path("alice", &id).unwrap();
    assert_eq!(&std::fs::read(&preview).unwrap()[1..4], b"PNG");
    assert_eq!(
        h.renderer.renders_started.load(Ordering::SeqCst),
        0,
        "no full render before approval"
    );
    let d = h
        .service
        .decide_approval("alice", &id, true, None)
        .await
        .unwrap();
    assert!(!d.already_recorded_same);
    assert!(d.record.decision().unwrap().approved);
    let again = h
        .service
        .decide_approval("alice", &id, true, Some("sure".into()))
        .await
        .unwrap();
    assert!(
        again.already_recorded_same,
        "replaying the decision is a no-op"
    );
    let done = h.wait_state("alice", &id, RenderState::Succeeded).await;
    assert!(matches!(
        done.outcome,
        Some(Outcome::Success {
            watermark_applied: true,
            ..
        })
    ));
    let e = h
        .service
        .decide_approval("alice", &id, false, None)
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::ApprovalAlreadyRecorded);

    // Reject → failed with watermark_rejected carrying the note.
    let id = create(&h, "alice", &render_args(&video, Some(&logo), None))
        .await
        .unwrap()
        .record
        .id;
    h.wait_state("alice", &id, RenderState::AwaitingApproval)
        .await;
    let d = h
        .service
        .decide_approval("alice", &id, false, Some("logo too large".into()))
        .await
        .unwrap();
    assert_eq!(d.record.state, RenderState::Failed);
    match &d.record.outcome {
        Some(Outcome::Error {
            code,
            reason,
            field,
            ..
        }) => {
            assert_eq!(*code, ErrorCode::WatermarkRejected);
            assert_eq!(reason.as_deref(), Some("User note: 'logo too large'."));
            assert_eq!(field.as_deref(), Some("watermark"));
        }
        other => panic!("{other:?}"),
    }
    let env = vidforge_http::envelope::Envelope::from_record(&d.record)
        .unwrap()
        .to_json();
    assert_eq!(env["repair"]["next_step"], "revise_watermark_and_rerender");
    assert_eq!(env["repair"]["arguments"]["watermark"]["opacity"], 0.5);
    assert!(
        h.service
            .decide_approval("alice", &id, false, None)
            .await
            .unwrap()
            .already_recorded_same
    );
    let e = h
        .service
        .decide_approval("alice", &id, true, None)
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::ApprovalAlreadyRecorded);

    // No watermark → never pending.
    let plain = create(&h, "alice", &render_args(&video, None, None))
        .await
        .unwrap()
        .record
        .id;
    let e = h
        .service
        .decide_approval("alice", &plain, true, None)
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::ApprovalNotPending);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unanswered_approval_times_out_by_the_clock() {
    let h = Harness::start(fast(), |_| {});
    let video = h.video("alice").await;
    let logo = h.logo("alice").await;
    let id = create(&h, "alice", &render_args(&video, Some(&logo), None))
        .await
        .unwrap()
        .record
        .id;
    h.wait_state("alice", &id, RenderState::AwaitingApproval)
        .await;
    assert_eq!(h.service.expire_due_approvals().unwrap(), 0);
    h.clock
        .advance(catalog::APPROVAL_TIMEOUT + Duration::from_secs(1));
    // The maintenance thread (50 ms tick in tests) ends it.
    let rec = h.wait_state("alice", &id, RenderState::Failed).await;
    match &rec.outcome {
        Some(Outcome::Error { code, message, .. }) => {
            assert_eq!(*code, ErrorCode::WatermarkApprovalTimeout);
            assert!(message.contains("30 minutes"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let e = h
        .service
        .decide_approval("alice", &id, true, None)
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::ApprovalNotPending);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_queued_running_awaiting_and_terminal() {
    let renderer = ScriptedRenderer::new(5, Duration::from_millis(2));
    renderer.hold(true);
    let h = Harness::start(renderer.clone(), |c| {
        c.render_slots = 1;
        c.per_principal_concurrent = 5;
    });
    let video = h.video("alice").await;
    let logo = h.logo("alice").await;
    let running = create(&h, "alice", &render_args(&video, None, None))
        .await
        .unwrap()
        .record
        .id;
    h.wait("alice", &running, "running", |r| {
        r.state == RenderState::Rendering
    })
    .await;
    let queued = create(&h, "alice", &render_args(&video, None, None))
        .await
        .unwrap()
        .record
        .id;

    // Queued: cancelled at once, never started.
    let rec = h.service.cancel("alice", &queued).await.unwrap();
    assert_eq!(rec.state, RenderState::Cancelled);
    // Running: flag set durably, the render stops within a few frames.
    let rec = h.service.cancel("alice", &running).await.unwrap();
    assert!(rec.cancel_requested);
    let rec = h
        .wait_state("alice", &running, RenderState::Cancelled)
        .await;
    assert!(rec.outcome.is_none());
    assert!(
        !h.service.config().results_dir().join(&running).exists(),
        "partial output removed"
    );
    assert_eq!(renderer.renders_started.load(Ordering::SeqCst), 1);
    // Terminal: no-op acknowledgement.
    let rec = h.service.cancel("alice", &running).await.unwrap();
    assert_eq!(rec.state, RenderState::Cancelled);

    // Awaiting approval: cancelled at once; a later decision is not pending.
    renderer.hold(false);
    let wm = create(&h, "alice", &render_args(&video, Some(&logo), None))
        .await
        .unwrap()
        .record
        .id;
    h.wait_state("alice", &wm, RenderState::AwaitingApproval)
        .await;
    assert_eq!(
        h.service.cancel("alice", &wm).await.unwrap().state,
        RenderState::Cancelled
    );
    let e = h
        .service
        .decide_approval("alice", &wm, true, None)
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::ApprovalNotPending);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_failures_map_to_codes() {
    let h = Harness::start(fast(), |_| {});
    let video = h.video("alice").await;
    *h.renderer.fail_next.lock().unwrap() = Some(EngineError::new(
        FailureKind::UnsupportedCodec,
        "codec 'foo' has no decoder",
    ));
    let id = create(&h, "alice", &render_args(&video, None, None))
        .await
        .unwrap()
        .record
        .id;
    let rec = h.wait_state("alice", &id, RenderState::Failed).await;
    match rec.outcome {
        Some(Outcome::Error { code, reason, .. }) => {
            assert_eq!(code, ErrorCode::UnsupportedCodec);
            assert_eq!(reason.as_deref(), Some("codec 'foo' has no decoder"));
        }
        other => panic!("{other:?}"),
    }
    *h.renderer.fail_next.lock().unwrap() = Some(EngineError::new(
        FailureKind::RenderFailed,
        "encoder exploded",
    ));
    let id = create(&h, "alice", &render_args(&video, None, None))
        .await
        .unwrap()
        .record
        .id;
    let rec = h.wait_state("alice", &id, RenderState::Failed).await;
    let env = vidforge_http::envelope::Envelope::from_record(&rec)
        .unwrap()
        .to_json();
    assert_eq!(env["code"], "render_failed");
    assert_eq!(env["temporary"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn boot_recovery_requeues_and_rearms() {
    let held = fast();
    held.hold(true);
    let h = Harness::start(held.clone(), |c| {
        c.render_slots = 1;
        c.per_principal_concurrent = 5;
    });
    let video = h.video("alice").await;
    let logo = h.logo("alice").await;
    let running = create(&h, "alice", &render_args(&video, None, None))
        .await
        .unwrap()
        .record
        .id;
    h.wait("alice", &running, "running", |r| {
        r.state == RenderState::Rendering
    })
    .await;
    let queued = create(&h, "alice", &render_args(&video, None, None))
        .await
        .unwrap()
        .record
        .id;
    // Let the held render continue so the watermark one can reach approval, then restart.
    held.hold(false);
    let wm = create(&h, "alice", &render_args(&video, Some(&logo), None))
        .await
        .unwrap()
        .record
        .id;
    let waiting = h
        .wait_state("alice", &wm, RenderState::AwaitingApproval)
        .await;
    h.wait_state("alice", &queued, RenderState::Succeeded).await;

    // A render interrupted mid-way: hold one, then shut down under it.
    held.hold(true);
    let interrupted = create(&h, "alice", &render_args(&video, None, None))
        .await
        .unwrap()
        .record
        .id;
    // Frames flowing means the worker has prepared the result directory.
    h.wait("alice", &interrupted, "frames flowing", |r| {
        r.state == RenderState::Rendering && r.progress.as_ref().is_some_and(|p| p.frames_done > 0)
    })
    .await;
    std::fs::write(
        h.service
            .config()
            .results_dir()
            .join(&interrupted)
            .join("junk.partial"),
        b"x",
    )
    .unwrap();
    let h = h.restart(fast());

    let rec = h
        .wait_state("alice", &interrupted, RenderState::Succeeded)
        .await;
    assert_eq!(rec.attempts, 2, "restarted from the start");
    assert!(
        !h.service
            .config()
            .results_dir()
            .join(&interrupted)
            .join("junk.partial")
            .exists()
    );
    // The awaiting one kept its deadline and still accepts a decision after the restart.
    let after = h.service.get("alice", &wm).unwrap();
    assert_eq!(after.state, RenderState::AwaitingApproval);
    assert_eq!(
        after.approval.as_ref().unwrap().deadline,
        waiting.approval.as_ref().unwrap().deadline
    );
    h.service
        .decide_approval("alice", &wm, true, None)
        .await
        .unwrap();
    h.wait_state("alice", &wm, RenderState::Succeeded).await;
    let _ = running;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_awaiting_renders_time_out_at_boot() {
    let h = Harness::start(fast(), |_| {});
    let video = h.video("alice").await;
    let logo = h.logo("alice").await;
    let wm = create(&h, "alice", &render_args(&video, Some(&logo), None))
        .await
        .unwrap()
        .record
        .id;
    h.wait_state("alice", &wm, RenderState::AwaitingApproval)
        .await;
    h.service.shutdown();
    h.clock
        .advance(catalog::APPROVAL_TIMEOUT + Duration::from_secs(5));
    let h = h.restart(fast());
    let rec = h.service.get("alice", &wm).unwrap();
    assert_eq!(
        rec.state,
        RenderState::Failed,
        "timed out during boot recovery"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweeper_expires_results_then_records_and_keys() {
    let h = Harness::start(fast(), |_| {});
    let video = h.video("alice").await;
    let logo = h.logo("alice").await;
    let id = create(&h, "alice", &render_args(&video, Some(&logo), Some("k")))
        .await
        .unwrap()
        .record
        .id;
    h.wait_state("alice", &id, RenderState::AwaitingApproval)
        .await;
    h.service
        .decide_approval("alice", &id, true, None)
        .await
        .unwrap();
    let rec = h.wait_state("alice", &id, RenderState::Succeeded).await;
    let result_dir = h.service.config().results_dir().join(&id);
    let preview_dir = h.service.config().previews_dir().join(&id);
    assert!(result_dir.exists() && preview_dir.exists());

    // Within the task TTL nothing happens.
    h.clock.advance(Duration::from_secs(3600));
    assert_eq!(h.service.sweep().unwrap(), Default::default());
    assert!(!h.service.task_expired(&rec));

    // After 24 h: the task handle has expired, the idempotency key is gone, the result stays.
    h.clock.advance(catalog::TASK_TTL);
    assert!(h.service.task_expired(&rec));
    let r = h.service.sweep().unwrap();
    assert_eq!(r.idempotency_deleted, 1);
    assert_eq!(r.results_deleted, 0);
    assert!(h.service.resolve_result("alice", &id).is_ok());

    // After 7 days from finishing: files deleted, tombstone answers result_expired.
    h.clock.advance(catalog::RESULT_TTL);
    let r = h.service.sweep().unwrap();
    assert_eq!(r.results_deleted, 1);
    assert!(!result_dir.exists() && !preview_dir.exists());
    let e = h.service.resolve_result("alice", &id).unwrap_err();
    assert_eq!(e.code(), ErrorCode::ResultExpired);
    let tomb = h.service.get("alice", &id).unwrap();
    assert!(tomb.result_deleted && h.service.result_expired(&tomb));

    // After the tombstone grace the record goes too.
    h.clock.advance(h.service.config().tombstone_grace);
    assert_eq!(h.service.sweep().unwrap().records_deleted, 1);
    assert!(matches!(
        h.service.get("alice", &id),
        Err(ServiceError::NotFound)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_enforce_size_and_content() {
    let h = Harness::start(fast(), |c| c.max_upload_bytes = 64 * 1024);
    let assets_dir = h.service.config().assets_dir();
    let count = || std::fs::read_dir(&assets_dir).unwrap().count();
    let before = count();

    // 100 KiB streamed in 8 KiB chunks against a 64 KiB limit.
    let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = (0..13)
        .map(|_| Ok(bytes::Bytes::from(vec![7u8; 8192])))
        .collect();
    let e = h
        .service
        .add_asset_stream("alice", "big.mp4", futures_util::stream::iter(chunks))
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::AssetTooLarge);
    assert_eq!(count(), before, "no partial file left");

    let e = h
        .service
        .add_asset_path("alice", &fixtures().garbage, None)
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::AssetInvalid);
    assert_eq!(count(), before);

    let err_stream = futures_util::stream::iter(vec![
        Ok(bytes::Bytes::from_static(b"abc")),
        Err(std::io::Error::other("client went away")),
    ]);
    let e = h
        .service
        .add_asset_stream("alice", "x.mp4", err_stream)
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::AssetInvalid);
    assert_eq!(count(), before);

    let ok = h
        .service
        .add_asset_path("alice", &fixtures().logo, Some("../../evil name.png"))
        .await
        .unwrap();
    assert_eq!(ok.file_name, "evil_name.png");
    assert!(ok.path.starts_with(&assets_dir));
    assert_eq!((ok.probe.width, ok.probe.height), (Some(40), Some(20)));
}
