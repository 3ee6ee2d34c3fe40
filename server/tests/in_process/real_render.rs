//! One real render through the whole service: media engine (CPU compositor), watermark preview,
//! approval, encode, and the output probed back.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{fixtures, render_args, test_config};
use vidforge_core::clock::SystemClock;
use vidforge_core::config::BackendSetting;
use vidforge_core::media_backend::{MediaProber, MediaRenderer};
use vidforge_core::service::{RenderService, ServiceParts};
use vidforge_core::store::{Outcome, RenderState};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watermarked_render_on_the_cpu_backend() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path());
    config.backend = BackendSetting::Cpu;
    let renderer = MediaRenderer::new(&config).expect("cpu engine");
    let service = RenderService::start(ServiceParts {
        config,
        clock: Arc::new(SystemClock),
        renderer: Arc::new(renderer),
        prober: Arc::new(MediaProber),
        objects: None,
    })
    .unwrap();
    assert_eq!(service.backend_name(), "cpu");
    let video = service
        .add_asset_path("alice", &fixtures().clip, None)
        .await
        .unwrap();
    assert_eq!(video.probe.video_codec.as_deref(), Some("h264"));
    assert_eq!(video.probe.audio_codec.as_deref(), Some("aac"));
    let logo = service
        .add_asset_path("alice", &fixtures().logo, None)
        .await
        .unwrap();
    let args = render_args(&video, Some(&logo), None);
    let id = service
        .create_render(
            "alice",
            vidforge_mcp::inputs::render_args(&args).unwrap(),
            args.clone(),
        )
        .await
        .unwrap()
        .record
        .id;

    let wait = |state: RenderState| {
        let service = service.clone();
        let id = id.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(90);
            loop {
                let r = service.get("alice", &id).unwrap();
                if r.state == state {
                    return r;
                }
                assert!(!r.is_terminal() || r.state == state, "ended early: {r:#?}");
                assert!(
                    Instant::now() < deadline,
                    "timed out waiting for {state:?}: {r:#?}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    wait(RenderState::AwaitingApproval).await;
    let (_, preview) = service.preview_path("alice", &id).unwrap();
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&preview).unwrap(),
    ));
    let info = decoder.read_info().unwrap();
    // 160x120 (4:3) fitted into 720p keeps its aspect: 960x720.
    assert_eq!(info.info().height, 720, "preview is at output size");
    eprintln!("preview {}x{}", info.info().width, info.info().height);

    service
        .decide_approval("alice", &id, true, None)
        .await
        .unwrap();
    let done = wait(RenderState::Succeeded).await;
    let Some(Outcome::Success {
        video_path,
        width,
        height,
        size_bytes,
        backend,
        fps,
        frames,
        ..
    }) = &done.outcome
    else {
        panic!("{done:#?}");
    };
    eprintln!(
        "rendered {frames} frames {width}x{height} {size_bytes} bytes on {backend} at {fps:.1} fps"
    );
    assert_eq!(*height, 720);
    assert_eq!(backend, "cpu");
    let probe = vidforge_media::probe(video_path).unwrap();
    let v = probe.video.expect("video stream");
    assert_eq!((v.width, v.height), (*width, *height));
    assert_eq!(v.codec, "h264");
    assert!(
        (probe.duration_seconds - 0.4).abs() < 0.15,
        "{}",
        probe.duration_seconds
    );
    assert!(probe.audio.is_some(), "audio passed through");
    assert_eq!(std::fs::metadata(video_path).unwrap().len(), *size_bytes);
    service.shutdown();
}
