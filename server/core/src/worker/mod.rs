//! The bounded worker pool: `render_slots` threads pull render ids from the queue and drive
//! each render through preview → approval → full render, writing every transition to the
//! store (durably) and progress at most every `catalog::PROGRESS_PUBLISH_INTERVAL`.
//!
//! Long renders (estimated work above `long_render_seconds`) do not starve short ones: on a
//! single node one more worker, the short lane, takes only short renders, and only while a
//! long render is running here. So a short render never waits behind a long one, and with no
//! long render running the pool behaves exactly as `render_slots` workers. (In a cluster
//! workers claim from the shared table, oldest first; the lane is single-node only.)

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::catalog::{self};
use crate::clock::add_ms;
use crate::engine::{
    EngineError, EngineProgress, FailureKind, PlanEncoder, PlanWatermark, RenderPlan,
};
use crate::error::ServiceError;
use crate::shared::Shared;
use crate::store::{ProgressSnapshot, RenderRecord, RenderState};
use crate::sync::lock;
use crate::transitions::speculative::Stop;
use crate::uri::{PREVIEW_FILE_NAME, VIEW_PREVIEW_FILE_NAME};
use finish::{
    finish_cancelled, finish_error, finish_media_error, finish_stopped, finish_succeeded,
};

mod finish;
mod segment_work;
pub(crate) mod segments;
mod speculation;

/// How long an idle worker waits before re-checking the shutdown flag.
const IDLE_POLL: Duration = Duration::from_millis(100);

pub(crate) fn spawn_workers(shared: &Arc<Shared>) -> Result<Vec<JoinHandle<()>>, ServiceError> {
    let mut workers = (0..shared.config.render_slots)
        .map(|i| {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("vidforge-render-{i}"))
                .spawn(move || {
                    crate::priority::lower_this_thread(
                        shared.config.render_sched,
                        shared.config.render_nice,
                    );
                    worker_loop(&shared)
                })
                .map_err(ServiceError::from)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let keeper = shared.clone();
    workers.push(
        std::thread::Builder::new()
            .name("vidforge-segment-leases".into())
            .spawn(move || segment_work::keep_leases(&keeper))?,
    );
    let shared = shared.clone();
    workers.push(
        std::thread::Builder::new()
            .name("vidforge-render-short".into())
            .spawn(move || {
                crate::priority::lower_this_thread(
                    shared.config.render_sched,
                    shared.config.render_nice,
                );
                short_lane_loop(&shared)
            })?,
    );
    Ok(workers)
}

/// Counts a long render as running on this node while it lives (the short lane works only
/// then).
struct LongGuard<'a>(&'a Shared);

impl<'a> LongGuard<'a> {
    fn new(shared: &'a Shared) -> Self {
        shared.pool.long_running.fetch_add(1, Ordering::SeqCst);
        LongGuard(shared)
    }
}

impl Drop for LongGuard<'_> {
    fn drop(&mut self) {
        self.0.pool.long_running.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The short lane: while a long render runs on this node, take short renders (never long
/// ones) so they do not wait for it: from the local fair queue, or in a cluster from the
/// shared queue by their stored estimate. Idle otherwise.
fn short_lane_loop(shared: &Shared) {
    let clustered = shared.ledger.store.is_shared();
    while !shared.pool.stopping() {
        if shared.pool.long_running.load(Ordering::SeqCst) == 0 {
            std::thread::sleep(IDLE_POLL);
            continue;
        }
        let next = if clustered {
            crate::cluster::claim_short(shared)
        } else {
            shared.pool.queue.pop_short_timeout(IDLE_POLL)
        };
        let Some(id) = next else {
            continue;
        };
        if shared.pool.stopping() {
            if clustered {
                crate::cluster::release(shared, &id);
            }
            break;
        }
        tracing::info!(render_id = %id, "short render runs beside a long one (short lane)");
        if let Err(e) = process(shared, &id) {
            tracing::error!(render_id = %id, error = %e, "render processing failed");
        }
        if clustered {
            crate::cluster::release(shared, &id);
        }
        crate::malloc::release_freed_memory();
    }
}

fn worker_loop(shared: &Shared) {
    let clustered = shared.ledger.store.is_shared();
    let mut idle = true;
    while !shared.pool.stopping() {
        shared.pool.idle_workers.fetch_add(1, Ordering::SeqCst);
        let next = if clustered {
            crate::cluster::claim_next(shared, idle)
        } else {
            shared.pool.queue.pop_timeout(IDLE_POLL)
        };
        shared.pool.idle_workers.fetch_sub(1, Ordering::SeqCst);
        idle = next.is_none();
        if let Some(id) = next {
            if shared.pool.stopping() {
                // Left queued in the store: boot recovery (or another node) picks it up.
                if clustered {
                    crate::cluster::release(shared, &id);
                }
                break;
            }
            let _long = shared.ledger.is_long(&id).then(|| LongGuard::new(shared));
            if let Err(e) = process(shared, &id) {
                tracing::error!(render_id = %id, error = %e, "render processing failed");
            }
            if clustered {
                crate::cluster::release(shared, &id);
            }
            crate::malloc::release_freed_memory();
        } else if let Some(seg) = segment_work::claim(shared) {
            // No render waits: render a segment of a split one (renders always come first).
            idle = false;
            segment_work::run_claimed(shared, &seg);
            crate::malloc::release_freed_memory();
        } else if let Some(id) = speculation::next_candidate(shared) {
            // Nothing to do but a render awaiting its approval: render it ahead.
            idle = false;
            if let Err(e) = speculate(shared, &id) {
                tracing::error!(render_id = %id, error = %e, "speculative render failed");
            }
            if clustered {
                crate::cluster::release(shared, &id);
            }
            crate::malloc::release_freed_memory();
        }
    }
}

/// Removes a render's cancel flag from the running map when its worker is done with it.
struct RunningGuard<'a> {
    shared: &'a Shared,
    id: &'a str,
}

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        lock(&self.shared.pool.running).remove(self.id);
    }
}

impl<'a> RunningGuard<'a> {
    /// Registers `id`'s cancel flag before its claim, so a cancel that lands after the claim
    /// always finds it (see `cancel_blocking`).
    fn register(shared: &'a Shared, id: &'a str) -> (Self, Arc<AtomicBool>) {
        let flag = Arc::new(AtomicBool::new(false));
        lock(&shared.pool.running).insert(id.to_string(), flag.clone());
        (RunningGuard { shared, id }, flag)
    }
}

/// Renders `id` ahead of its approval (see [`speculation`]).
fn speculate(shared: &Shared, id: &str) -> Result<(), ServiceError> {
    let (_guard, flag) = RunningGuard::register(shared, id);
    let Some(record) = crate::transitions::speculative::claim(shared, id)? else {
        return Ok(());
    };
    let started = Instant::now();
    let plan = match build_plan(shared, &record) {
        Ok(plan) => plan,
        Err(e) => {
            let reason = e.to_string();
            tracing::warn!(render_id = %id, %reason, "cannot render ahead of approval");
            speculation::abandon(shared, &record, Stop::Failed, started)?;
            return Ok(());
        }
    };
    run_render(shared, &record, &plan, &flag, Some(started))
}

fn process(shared: &Shared, id: &str) -> Result<(), ServiceError> {
    let (_guard, flag) = RunningGuard::register(shared, id);

    // In a cluster this node holds the render's lease: one still running was being run by
    // a node that stopped renewing its lease, i.e. died.
    let takeover = shared.ledger.store.is_shared();
    let claimed =
        crate::transitions::run::claim(shared, id, takeover, shared.config.max_render_crashes)?;
    let Some((record, state)) = claimed else {
        return Ok(());
    };
    let plan = match build_plan(shared, &record) {
        Ok(plan) => plan,
        Err(PlanError::Engine(e)) => return finish_error(shared, &record, &e),
        Err(PlanError::Media(e)) => return finish_media_error(shared, &record, &e),
    };
    match state {
        RenderState::Previewing => run_preview(shared, &record, &plan),
        _ => run_render(shared, &record, &plan, &flag, None),
    }
}

/// Why a render could not be planned: its inputs are gone or unreadable (the render fails),
/// or the media store could not hand them over (`media_store`).
#[derive(Debug, thiserror::Error)]
enum PlanError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Media(ServiceError),
}

fn build_plan(shared: &Shared, rec: &RenderRecord) -> Result<RenderPlan, PlanError> {
    // A local file with each input's content: the file itself, or this node's cached copy
    // of the object (downloaded once, retried while the bucket is away, until shutdown).
    let owned_asset = |asset_id: &str| -> Result<Option<PathBuf>, PlanError> {
        let asset = shared
            .ledger
            .store
            .get_asset(asset_id)
            .map_err(|e| EngineError::new(FailureKind::RenderFailed, e.to_string()))?;
        match asset.filter(|a| a.principal == rec.principal) {
            None => Ok(None),
            Some(a) => shared
                .media
                .store
                .local_copy_blocking(&a.path, &|| shared.pool.stopping())
                .map(Some)
                .map_err(PlanError::Media),
        }
    };
    let input = owned_asset(&rec.args.source_asset)?.ok_or_else(|| {
        EngineError::new(
            FailureKind::SourceNotFound,
            "the source asset no longer exists",
        )
    })?;
    let watermark = match &rec.args.watermark {
        None => None,
        Some(w) => {
            let image = owned_asset(&w.image_asset)?.ok_or_else(|| {
                EngineError::new(
                    FailureKind::SourceNotFound,
                    "the watermark image asset no longer exists",
                )
            })?;
            Some(PlanWatermark {
                image,
                position: w.position,
                opacity: w.opacity as f32,
            })
        }
    };
    Ok(RenderPlan {
        input,
        output: shared
            .media
            .result_dir(&rec.id)
            .join(crate::uri::final_file_name(rec.args.output_format)),
        resolution: rec.args.resolution,
        format: rec.args.output_format,
        watermark,
        encoder: PlanEncoder {
            threads: shared.pool.thread_budget(shared.config.render_slots),
            measure_quality: rec.measure_quality,
            ..Default::default()
        },
        hdr: rec.hdr,
    })
}

fn run_preview(shared: &Shared, rec: &RenderRecord, plan: &RenderPlan) -> Result<(), ServiceError> {
    let dir = shared.media.preview_dir(&rec.id);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let png = dir.join(PREVIEW_FILE_NAME);
    let view = dir.join(VIEW_PREVIEW_FILE_NAME);
    let started = Instant::now();
    let result = catch_unwind(AssertUnwindSafe(|| {
        shared.renderer.render_preview(plan, &png, &view)
    }))
    .unwrap_or_else(|_| {
        Err(EngineError::new(
            FailureKind::RenderFailed,
            "the engine panicked",
        ))
    });
    let stop = || shared.pool.stopping();
    // The view's copy first: the record names the full preview, published last.
    let publish = || {
        shared.media.store.publish_blocking(&view, &stop)?;
        shared.media.store.publish_blocking(&png, &stop)
    };
    let result = result.map(|size| (size, publish()));
    match result {
        Ok((_, Err(e))) => {
            let _ = std::fs::remove_dir_all(&dir);
            finish_media_error(shared, rec, &e)
        }
        Ok(((w, h), Ok(stored))) => {
            let now = shared.ledger.now();
            let deadline = add_ms(now, shared.config.approval_timeout);
            let updated =
                crate::transitions::run::preview_ready(shared, rec, stored, (w, h), deadline)?;
            if let Some(u) = updated
                && u.record.state == RenderState::AwaitingApproval
            {
                tracing::info!(
                    render_id = %rec.id,
                    width = w,
                    height = h,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    deadline = %crate::clock::rfc3339(deadline),
                    "watermark preview ready; awaiting approval"
                );
            }
            Ok(())
        }
        Err(e) if e.kind == FailureKind::Cancelled => finish_cancelled(shared, rec),
        Err(e) => finish_error(shared, rec, &e),
    }
}

/// Runs the full render of `rec`; `speculative`: ahead of its approval, since then.
fn run_render(
    shared: &Shared,
    rec: &RenderRecord,
    plan: &RenderPlan,
    cancel: &AtomicBool,
    speculative: Option<Instant>,
) -> Result<(), ServiceError> {
    let dir = shared.media.result_dir(&rec.id);
    // A previous attempt may have left partial files.
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let backend = shared.renderer.backend_name();
    tracing::info!(
        render_id = %rec.id,
        backend = %backend,
        resolution = rec.args.resolution.as_str(),
        format = rec.args.output_format.as_str(),
        watermark = plan.watermark.is_some(),
        attempt = rec.attempts,
        speculative = speculative.is_some(),
        "render started"
    );
    let preempted = AtomicBool::new(false);
    let mut on_progress = progress_publisher(shared, rec, cancel, backend);
    let mut on_progress = |p: EngineProgress| {
        if speculative.is_some()
            && !preempted.load(Ordering::Relaxed)
            && speculation::still_speculative(shared, &rec.id)
            && speculation::work_waiting(shared)
        {
            tracing::info!(render_id = %rec.id, "real work waits: the speculative render gives its slot up");
            preempted.store(true, Ordering::SeqCst);
            cancel.store(true, Ordering::SeqCst);
        }
        on_progress(p)
    };
    let result = catch_unwind(AssertUnwindSafe(|| {
        segments::render(shared, rec, plan, &mut on_progress, cancel)
    }))
    .unwrap_or_else(|_| {
        Err(EngineError::new(
            FailureKind::RenderFailed,
            "the engine panicked",
        ))
    });

    let id = rec.id.as_str();
    let lost = || shared.pool.is_lost(id);
    match (result, speculative) {
        (Err(e), _) if e.kind == FailureKind::Cancelled && lost() => {
            // Another node holds the lease now. With a shared directory it renders into the
            // same one: leave both the record and the files to it. With a bucket, this
            // node's scratch files are its own.
            if shared.media.store.is_object() {
                let _ = std::fs::remove_dir_all(&dir);
            }
            tracing::warn!(render_id = %id, "render abandoned here: another node took it over");
            Ok(())
        }
        (Ok(report), None) => finish_succeeded(shared, rec, plan, &report),
        (Ok(report), Some(started)) => speculation::finish(shared, rec, plan, &report, started),
        (Err(e), None) if e.kind == FailureKind::Cancelled => {
            let _ = std::fs::remove_dir_all(&dir);
            finish_stopped(shared, rec)
        }
        (Err(e), None) => {
            let _ = std::fs::remove_dir_all(&dir);
            finish_error(shared, rec, &e)
        }
        (Err(e), Some(started)) => {
            let _ = std::fs::remove_dir_all(&dir);
            let stop = if e.kind != FailureKind::Cancelled {
                Stop::Failed
            } else if preempted.load(Ordering::SeqCst) {
                Stop::Preempted
            } else {
                Stop::Ended
            };
            if speculation::abandon(shared, rec, stop, started)? {
                finish_error(shared, rec, &e)?;
            }
            Ok(())
        }
    }
}

/// The engine's progress callback for `rec`: publishes a snapshot (stage, frames, rate) at
/// most every `PROGRESS_PUBLISH_INTERVAL` and at every stage change, and raises `cancel`
/// when the record says another node cancelled it.
fn progress_publisher<'a>(
    shared: &'a Shared,
    rec: &'a RenderRecord,
    cancel: &'a AtomicBool,
    backend: String,
) -> impl FnMut(EngineProgress) + 'a {
    let id = rec.id.as_str();
    let mut last_publish: Option<Instant> = None;
    let mut last_stage: Option<vidforge_media::Stage> = None;
    let started = Instant::now();
    move |p: EngineProgress| {
        let due = last_publish.is_none_or(|t| t.elapsed() >= catalog::PROGRESS_PUBLISH_INTERVAL)
            || last_stage != Some(p.stage);
        if !due {
            return;
        }
        last_publish = Some(Instant::now());
        last_stage = Some(p.stage);
        let elapsed = started.elapsed().as_secs_f64();
        let fps = if elapsed > 0.0 {
            p.frames_done as f64 / elapsed
        } else {
            0.0
        };
        let snap = ProgressSnapshot::new(p.stage.into(), p.frames_done, p.frames_total)
            .with_rate(fps, backend.clone());
        let res = crate::transitions::run::progress(shared, rec, &snap, cancel);
        match res {
            Ok(_) => shared.ledger.notify(id),
            Err(e) => tracing::warn!(render_id = %id, error = %e, "progress write failed"),
        }
    }
}
