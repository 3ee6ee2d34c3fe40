//! Shared helpers for the server's integration tests: a scripted renderer (deterministic,
//! holdable, so scheduling can be tested without encoding video), real fixture assets made with
//! the ffmpeg CLI, and a service harness with an adjustable clock.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use vidforge_core::clock::OffsetClock;
use vidforge_core::config::Config;
use vidforge_core::engine::{
    EngineError, EngineProgress, EngineReport, EngineSegmentReport, FailureKind, QualityReport,
    RenderPlan, Renderer, SegmentFile, SegmentPlanOptions, SegmentSpan,
};
use vidforge_core::media_backend::MediaProber;
use vidforge_core::service::{RenderService, ServiceParts};
use vidforge_core::store::{AssetRecord, RenderRecord, RenderState, Resolution};
use vidforge_fixtures::{self as fixtures, ClipSpec};
use vidforge_media::quality::{QualityTally, SecondTally};

/// The scripted engine's quality measurements of `frames` frames in second `second`: every
/// frame off by one in one luma sample of four (a PSNR Y of 54.2 dB), SSIM 0.99.
pub fn scripted_tally(second: u32, frames: u64) -> QualityTally {
    QualityTally {
        peak: 255,
        plane_samples: [4, 1, 1],
        seconds: vec![SecondTally {
            second,
            frames: frames as u32,
            squared_error: [frames, 0, 0],
            ssim_sum: 0.99 * frames as f64,
        }],
    }
}

/// A renderer that "renders" `frames` frames with `frame_delay` each, optionally holds before
/// finishing (until released or cancelled), and writes a small real output file.
pub struct ScriptedRenderer {
    pub frames: u64,
    pub frame_delay: Duration,
    pub hold: AtomicBool,
    pub fail_next: Mutex<Option<EngineError>>,
    pub renders_started: AtomicUsize,
    pub previews: AtomicUsize,
    pub progress_calls: AtomicUsize,
    /// Segments `plan_segments` cuts a render into (under 2: one pass).
    pub split: AtomicU32,
    /// Segment index → how many more of its runs fail.
    pub segment_failures: Mutex<HashMap<u32, u32>>,
    pub segments_started: AtomicUsize,
    pub joins: AtomicUsize,
    /// Joins that fail before one succeeds (a split that cannot be joined).
    pub join_failures: AtomicU32,
}

impl ScriptedRenderer {
    pub fn new(frames: u64, frame_delay: Duration) -> Arc<Self> {
        Arc::new(ScriptedRenderer {
            frames,
            frame_delay,
            hold: AtomicBool::new(false),
            fail_next: Mutex::new(None),
            renders_started: AtomicUsize::new(0),
            previews: AtomicUsize::new(0),
            progress_calls: AtomicUsize::new(0),
            split: AtomicU32::new(0),
            segment_failures: Mutex::new(HashMap::new()),
            segments_started: AtomicUsize::new(0),
            joins: AtomicUsize::new(0),
            join_failures: AtomicU32::new(0),
        })
    }

    /// Frames of segment `index` of `count`: an equal share, the last one takes the rest.
    fn segment_frames(&self, index: u32, count: u32) -> u64 {
        let share = self.frames / u64::from(count);
        if index + 1 == count {
            self.frames - share * u64::from(count - 1)
        } else {
            share
        }
    }

    /// Frames with `frame_delay` each, then the hold; `Err` when cancelled.
    fn run_frames(
        &self,
        frames: u64,
        report: &mut dyn FnMut(u64),
        cancel: &AtomicBool,
    ) -> Result<u64, EngineError> {
        let mut done = 0;
        loop {
            if cancel.load(Ordering::SeqCst) {
                return Err(EngineError::new(FailureKind::Cancelled, "cancelled"));
            }
            if done < frames {
                std::thread::sleep(self.frame_delay);
                done += 1;
                report(done);
            } else if self.hold.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(5));
            } else {
                return Ok(done);
            }
        }
    }

    pub fn hold(&self, on: bool) {
        self.hold.store(on, Ordering::SeqCst);
    }
}

fn size_for(r: Resolution) -> (u32, u32) {
    match r {
        Resolution::P720 => (1280, 720),
        Resolution::P1080 => (1920, 1080),
        Resolution::P4k => (3840, 2160),
    }
}

impl Renderer for ScriptedRenderer {
    fn backend_name(&self) -> String {
        "scripted".into()
    }

    fn render(
        &self,
        plan: &RenderPlan,
        progress: &mut dyn FnMut(EngineProgress),
        cancel: &AtomicBool,
    ) -> Result<EngineReport, EngineError> {
        let started = Instant::now();
        self.renders_started.fetch_add(1, Ordering::SeqCst);
        if !plan.input.is_file() {
            return Err(EngineError::new(
                FailureKind::SourceNotFound,
                "input missing",
            ));
        }
        let mut report = |stage, done| {
            self.progress_calls.fetch_add(1, Ordering::SeqCst);
            progress(EngineProgress {
                stage,
                frames_done: done,
                frames_total: Some(self.frames),
            })
        };
        report(vidforge_media::Stage::Preparing, 0);
        let done = self.run_frames(
            self.frames,
            &mut |done| report(vidforge_media::Stage::Rendering, done),
            cancel,
        )?;
        if let Some(e) = self.fail_next.lock().unwrap().take() {
            return Err(e);
        }
        report(vidforge_media::Stage::Finalizing, done);
        let body = format!(
            "scripted render of {} at {} wm={}",
            plan.input.display(),
            plan.resolution.as_str(),
            plan.watermark.is_some()
        )
        .repeat(64);
        let tmp = plan.output.with_extension("partial");
        std::fs::write(&tmp, &body)
            .map_err(|e| EngineError::new(FailureKind::RenderFailed, e.to_string()))?;
        std::fs::rename(&tmp, &plan.output)
            .map_err(|e| EngineError::new(FailureKind::RenderFailed, e.to_string()))?;
        let (width, height) = size_for(plan.resolution);
        let elapsed = started.elapsed();
        Ok(EngineReport {
            frames: done,
            duration_seconds: done as f64 / 30.0,
            width,
            height,
            size_bytes: body.len() as u64,
            backend: "scripted".into(),
            decoder: "scripted".into(),
            encoder: "scripted".into(),
            elapsed,
            fps: done as f64 / elapsed.as_secs_f64().max(1e-6),
            stage_times: Default::default(),
            quality: plan
                .encoder
                .measure_quality
                .then(|| QualityReport::single(scripted_tally(0, done))),
        })
    }

    fn plan_segments(
        &self,
        _plan: &RenderPlan,
        _options: &SegmentPlanOptions,
    ) -> Result<Vec<SegmentSpan>, EngineError> {
        let count = self.split.load(Ordering::SeqCst);
        if count < 2 {
            return Ok(Vec::new());
        }
        Ok((0..count)
            .map(|index| SegmentSpan {
                index,
                start_pts: (index > 0).then_some(i64::from(index) * 100),
                end_pts: (index + 1 < count).then_some(i64::from(index + 1) * 100),
                start_seconds: f64::from(index),
                end_seconds: f64::from(index + 1),
                frames: self.segment_frames(index, count),
            })
            .collect())
    }

    fn render_segment(
        &self,
        plan: &RenderPlan,
        span: &SegmentSpan,
        out: &Path,
        progress: &mut dyn FnMut(EngineProgress),
        cancel: &AtomicBool,
    ) -> Result<EngineSegmentReport, EngineError> {
        self.segments_started.fetch_add(1, Ordering::SeqCst);
        let mut report = |done| {
            progress(EngineProgress {
                stage: vidforge_media::Stage::Rendering,
                frames_done: done,
                frames_total: Some(span.frames),
            })
        };
        let done = self.run_frames(span.frames, &mut report, cancel)?;
        if let Some(left) = self.segment_failures.lock().unwrap().get_mut(&span.index)
            && *left > 0
        {
            *left -= 1;
            return Err(EngineError::new(
                FailureKind::RenderFailed,
                format!("scripted failure of segment {}", span.index),
            ));
        }
        let tmp = out.with_extension("partial");
        std::fs::write(&tmp, format!("segment {}\n", span.index))
            .and_then(|_| std::fs::rename(&tmp, out))
            .map_err(|e| EngineError::new(FailureKind::RenderFailed, e.to_string()))?;
        Ok(EngineSegmentReport {
            frames: done,
            size_bytes: 0,
            elapsed: Duration::ZERO,
            quality: plan
                .encoder
                .measure_quality
                .then(|| scripted_tally(span.index, done)),
        })
    }

    fn join_segments(
        &self,
        plan: &RenderPlan,
        segments: &[SegmentFile],
        _progress: &mut dyn FnMut(EngineProgress),
        _cancel: &AtomicBool,
    ) -> Result<EngineReport, EngineError> {
        self.joins.fetch_add(1, Ordering::SeqCst);
        let failing = self
            .join_failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if failing.is_ok() {
            return Err(EngineError::new(
                FailureKind::RenderFailed,
                "scripted join failure: segment 1 starts at 2.000 s, where its span starts at 1.000 s",
            ));
        }
        let mut body = String::new();
        for s in segments {
            body += &std::fs::read_to_string(&s.path)
                .map_err(|e| EngineError::new(FailureKind::RenderFailed, e.to_string()))?;
        }
        std::fs::write(&plan.output, &body)
            .map_err(|e| EngineError::new(FailureKind::RenderFailed, e.to_string()))?;
        let (width, height) = size_for(plan.resolution);
        Ok(EngineReport {
            frames: self.frames,
            duration_seconds: self.frames as f64 / 30.0,
            width,
            height,
            size_bytes: body.len() as u64,
            backend: "scripted".into(),
            decoder: "scripted".into(),
            encoder: "scripted".into(),
            elapsed: Duration::ZERO,
            fps: 0.0,
            stage_times: Default::default(),
            // A join reports none: the coordinator merges the segments' tallies.
            quality: None,
        })
    }

    fn render_preview(
        &self,
        plan: &RenderPlan,
        png_out: &Path,
        view_out: &Path,
    ) -> Result<(u32, u32), EngineError> {
        self.previews.fetch_add(1, Ordering::SeqCst);
        if !plan.input.is_file() {
            return Err(EngineError::new(
                FailureKind::SourceNotFound,
                "input missing",
            ));
        }
        let dir = png_out.parent().expect("preview has a parent dir");
        let made = fixtures::watermark_png(dir, 32, 18, [10, 200, 30, 255])
            .map_err(|e| EngineError::new(FailureKind::RenderFailed, e.to_string()))?;
        std::fs::copy(&made, view_out)
            .and_then(|_| std::fs::rename(made, png_out))
            .map_err(|e| EngineError::new(FailureKind::RenderFailed, e.to_string()))?;
        Ok((32, 18))
    }
}

/// Fixture files shared by every test in a binary (generated once).
pub struct Fixtures {
    _dir: tempfile::TempDir,
    pub clip: PathBuf,
    pub logo: PathBuf,
    pub garbage: PathBuf,
}

pub fn fixtures() -> &'static Fixtures {
    static F: OnceLock<Fixtures> = OnceLock::new();
    F.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let clip = fixtures::clip(
            dir.path(),
            &ClipSpec {
                width: 160,
                height: 120,
                fps: 15,
                seconds: 0.4,
                audio: true,
                ..ClipSpec::default()
            },
        )
        .expect("ffmpeg CLI generates the fixture clip");
        let logo = fixtures::watermark_png(dir.path(), 40, 20, [255, 255, 255, 200]).expect("png");
        let garbage = fixtures::garbage_file(dir.path(), "mp4", 4096).expect("garbage");
        Fixtures {
            _dir: dir,
            clip,
            logo,
            garbage,
        }
    })
}

/// A running service over a temp data dir, a scripted renderer and an adjustable clock.
pub struct Harness {
    pub dir: tempfile::TempDir,
    pub service: RenderService,
    pub clock: Arc<OffsetClock>,
    pub renderer: Arc<ScriptedRenderer>,
    pub config: Config,
}

pub fn test_config(dir: &Path) -> Config {
    let mut c = Config::with_data_dir(dir);
    c.render_slots = 1;
    c.per_principal_concurrent = 2;
    c.tick_interval = Duration::from_millis(50);
    // Independent of how full the CI disk is.
    c.min_free_bytes = 64 << 20;
    c.disk_reserve_bytes = 1 << 20;
    c
}

impl Harness {
    pub fn start(renderer: Arc<ScriptedRenderer>, configure: impl FnOnce(&mut Config)) -> Harness {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = test_config(dir.path());
        configure(&mut config);
        let clock = Arc::new(OffsetClock::new());
        let service = start_service(&config, clock.clone(), renderer.clone());
        Harness {
            dir,
            service,
            clock,
            renderer,
            config,
        }
    }

    /// Stops the service (dropping it releases the database lock) and starts a new one on
    /// the same data dir and clock.
    pub fn restart(self, renderer: Arc<ScriptedRenderer>) -> Harness {
        let Harness {
            dir,
            service,
            clock,
            config,
            ..
        } = self;
        drop(service);
        // A blocking task of the old service may still hold its last `Arc` of the state (and
        // with it sled's lock) for a moment after the drop: wait for it, bounded.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let service = loop {
            match try_start_service(&config, clock.clone(), renderer.clone()) {
                Err(e)
                    if e.to_string().contains("locked") && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                other => break other.expect("service restarts"),
            }
        };
        Harness {
            dir,
            service,
            clock,
            renderer,
            config,
        }
    }

    pub async fn video(&self, principal: &str) -> AssetRecord {
        self.service
            .add_asset_path(principal, &fixtures().clip, None)
            .await
            .expect("video asset")
    }

    pub async fn logo(&self, principal: &str) -> AssetRecord {
        self.service
            .add_asset_path(principal, &fixtures().logo, Some("logo.png"))
            .await
            .expect("png asset")
    }

    /// Polls until `pred` holds for the record (panics after 15 s).
    pub async fn wait(
        &self,
        principal: &str,
        id: &str,
        what: &str,
        pred: impl Fn(&RenderRecord) -> bool,
    ) -> RenderRecord {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let rec = self.service.get(principal, id).expect("record exists");
            if pred(&rec) {
                return rec;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; record: {rec:#?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub async fn wait_state(&self, principal: &str, id: &str, state: RenderState) -> RenderRecord {
        self.wait(principal, id, state.as_str(), |r| r.state == state)
            .await
    }
}

pub fn start_service(
    config: &Config,
    clock: Arc<OffsetClock>,
    renderer: Arc<ScriptedRenderer>,
) -> RenderService {
    try_start_service(config, clock, renderer).expect("service starts")
}

pub fn try_start_service(
    config: &Config,
    clock: Arc<OffsetClock>,
    renderer: Arc<ScriptedRenderer>,
) -> Result<RenderService, vidforge_core::ServiceError> {
    RenderService::start(ServiceParts {
        config: config.clone(),
        clock,
        renderer,
        prober: Arc::new(MediaProber),
        objects: None,
    })
}

/// Tool arguments for a render of `video`, optionally watermarked with `logo`.
pub fn render_args(video: &AssetRecord, logo: Option<&AssetRecord>, key: Option<&str>) -> Value {
    let mut v = json!({
        "source_asset_uri": video.uri,
        "output_format": "mp4",
        "resolution": "720p",
    });
    if let Some(l) = logo {
        v["watermark"] = json!({"image_asset_uri": l.uri, "position": "top_left", "opacity": 0.5});
    }
    if let Some(k) = key {
        v["idempotency_key"] = json!(k);
    }
    v
}
