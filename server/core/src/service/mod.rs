//! [`RenderService`]: the API the MCP layer and the HTTP routes call. It owns the store, the
//! worker pool, the approval-deadline timer and the sweeper.
//!
//! Reads (`get`, `resolve_result`, …) are synchronous and cheap. Calls that write and flush
//! (`create_render`, `decide_approval`, `cancel`, asset uploads) are `async` and run their
//! store work on tokio's blocking pool; each returns only after its write is durable.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use futures_util::Stream;
use serde_json::Value;
use tokio::sync::broadcast;

use crate::clock::SharedClock;
use crate::config::Config;
use crate::error::ServiceError;
use crate::maintenance::{self, SweepReport};
use crate::shared::Shared;
pub use crate::shared::Sweeper;
use crate::store::{AssetRecord, Outbox, Outcome, RenderArgs, RenderRecord, RenderState, Store};
use crate::sync::lock;

mod boot;
mod transactions;
mod work;

use boot::Lifecycle;
pub use boot::ServiceParts;

pub use crate::transitions::decisions::REJECTED_MESSAGE;
use transactions::{cancel_blocking, create_blocking, decide_blocking};

/// Result of [`RenderService::create_render`].
#[derive(Clone, Debug)]
pub struct CreateOutcome {
    pub record: RenderRecord,
    /// True when an idempotency key returned an existing render.
    pub replayed: bool,
}

/// Result of [`RenderService::decide_approval`].
#[derive(Clone, Debug)]
pub struct DecisionOutcome {
    pub record: RenderRecord,
    /// True when the same decision had already been recorded (idempotent no-op).
    pub already_recorded_same: bool,
}

/// A finished result on disk.
#[derive(Clone, Debug)]
pub struct ResultFile {
    pub record: RenderRecord,
    pub path: PathBuf,
    pub file_name: String,
    pub mime_type: String,
    pub size_bytes: u64,
}

/// The render service. Cheap to clone; the worker threads stop when the last clone is dropped
/// or [`RenderService::shutdown`] is called.
#[derive(Clone)]
pub struct RenderService {
    shared: Arc<Shared>,
    life: Arc<Lifecycle>,
}

impl std::fmt::Debug for RenderService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RenderService")
            .field("data_dir", &self.shared.config.data_dir)
            .finish_non_exhaustive()
    }
}

/// [`RenderService::load_snapshot`].
#[derive(Clone, Debug, Default)]
pub struct LoadSnapshot {
    /// Unfinished renders by state (states with none are absent).
    pub by_state: std::collections::BTreeMap<RenderState, usize>,
    /// Renders this node's workers are running.
    pub workers_busy: usize,
    /// This node's worker count.
    pub render_slots: usize,
}

impl RenderService {
    /// Stops the workers and the maintenance thread and flushes the store. Renders in flight
    /// are interrupted and resume on the next start. Idempotent.
    pub fn shutdown(&self) {
        self.life.stop();
    }

    /// The effective configuration (`data_dir` made absolute).
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    pub fn clock(&self) -> &SharedClock {
        &self.shared.ledger.clock
    }

    /// The task store itself, for what the fronts keep beside the renders: session epochs and
    /// server secrets (`vidforge-http`'s sessions and playback links), an MCP extension's own
    /// tree, what kind of store it is (the banner, `/healthz`, the dashboard), and the tests.
    /// Renders are read through this service's queries and changed only through it; webhook
    /// events through [`RenderService::outbox`].
    pub fn store(&self) -> &Store {
        &self.shared.ledger.store
    }

    /// This node's handle on the webhook outbox.
    pub fn outbox(&self) -> Outbox {
        let ledger = &self.shared.ledger;
        Outbox::new(
            ledger.store.clone(),
            ledger.clock.clone(),
            self.shared.pool.node.clone(),
        )
    }

    /// This node's name in work leases (cluster mode).
    pub fn node(&self) -> &str {
        &self.shared.pool.node
    }

    /// The render engine's backend name.
    pub fn backend_name(&self) -> String {
        self.shared.renderer.backend_name()
    }

    /// The compositor, decoder and encoder the render engine uses.
    pub fn hardware(&self) -> crate::engine::HardwareInfo {
        self.shared.renderer.hardware()
    }

    /// Current time in unix ms, from the injected clock.
    pub fn now_ms(&self) -> u64 {
        self.shared.ledger.now()
    }

    /// Task ids fired on every state, progress or decision change: render ids, the ids an
    /// MCP extension announces with [`RenderService::publish_task_change`], and
    /// [`crate::shared::ANY_TASK`] when any task may have changed unannounced.
    pub fn subscribe(&self) -> broadcast::Receiver<String> {
        self.shared.ledger.subscribe()
    }

    /// Announces a change of task `id` to [`RenderService::subscribe`]rs (the
    /// `notifications/tasks` of `subscriptions/listen`), for tasks an MCP extension owns.
    pub fn publish_task_change(&self, id: &str) {
        self.shared.ledger.notify(id);
    }

    /// Adds a step to every later sweep (the maintenance thread runs one every
    /// `sweep_interval`): an MCP extension deleting its own expired records.
    pub fn add_sweeper(&self, sweeper: Sweeper) {
        lock(&self.shared.ledger.sweepers).push(sweeper);
    }

    // ---- renders ----

    /// Creates a render durably and queues it. Idempotency (key scoped to the principal, 24 h,
    /// bound to the canonical arguments), asset ownership and quota are checked first, under
    /// one lock, so concurrent duplicates create exactly one render. Returns after the flush.
    pub async fn create_render(
        &self,
        principal: &str,
        args: RenderArgs,
        original_arguments: Value,
    ) -> Result<CreateOutcome, ServiceError> {
        self.shared.media.store.check_available().await?;
        let shared = self.shared.clone();
        let principal = principal.to_string();
        blocking(move || create_blocking(&shared, &principal, args, original_arguments)).await
    }

    /// The render, if it exists and belongs to `principal` (otherwise `NotFound`). Records
    /// stay readable until their result retention ends (plus a tombstone grace); decide task
    /// expiry with [`RenderService::task_expired`].
    pub fn get(&self, principal: &str, id: &str) -> Result<RenderRecord, ServiceError> {
        self.shared.ledger.load_owned(principal, id)
    }

    /// The newest `limit` renders of `principal` (every principal's with `None`), newest
    /// first, for the dashboard; past their task lifetime they are left out.
    pub fn recent_renders(
        &self,
        principal: Option<&str>,
        limit: usize,
    ) -> Result<Vec<RenderRecord>, ServiceError> {
        self.newest(principal, limit, |r| !self.task_expired(r))
    }

    /// The newest `limit` renders of `principal` whose result is still kept (tombstones left
    /// out), newest first: what `resources/list` offers. Reads that principal's index, so it
    /// costs the `limit` records read whatever the store keeps (a tombstone among the newest
    /// `limit` still takes a place: results expire oldest first, so there are none in
    /// practice).
    pub fn listed_renders(
        &self,
        principal: &str,
        limit: usize,
    ) -> Result<Vec<RenderRecord>, ServiceError> {
        self.newest(Some(principal), limit, |r| !r.result_deleted)
    }

    /// The newest `limit` renders of `principal` (everyone's with `None`) that `keep` keeps.
    fn newest(
        &self,
        principal: Option<&str>,
        limit: usize,
        keep: impl Fn(&RenderRecord) -> bool,
    ) -> Result<Vec<RenderRecord>, ServiceError> {
        let recs = self.shared.ledger.store.recent_renders(principal, limit)?;
        Ok(recs.into_iter().filter(|r| keep(r)).collect())
    }

    /// How busy this service is now: unfinished renders by state (from the in-memory index,
    /// which in cluster mode follows the whole cluster), and this node's busy workers.
    pub fn load_snapshot(&self) -> LoadSnapshot {
        let mut by_state = std::collections::BTreeMap::new();
        for a in lock(&self.shared.ledger.active).values() {
            *by_state.entry(a.state).or_insert(0usize) += 1;
        }
        LoadSnapshot {
            by_state,
            workers_busy: lock(&self.shared.pool.running).len(),
            render_slots: self.shared.config.render_slots,
        }
    }

    /// Records a watermark decision (durably, bound to the exact watermark parameters).
    /// Approve → the full render is queued; reject → the render fails with
    /// `watermark_rejected`. Replaying the recorded decision is a no-op success; a different
    /// second decision is `ApprovalAlreadyRecorded`; a render not awaiting a decision is
    /// `ApprovalNotPending`.
    pub async fn decide_approval(
        &self,
        principal: &str,
        id: &str,
        approved: bool,
        note: Option<String>,
    ) -> Result<DecisionOutcome, ServiceError> {
        let shared = self.shared.clone();
        let (principal, id) = (principal.to_string(), id.to_string());
        blocking(move || decide_blocking(&shared, &principal, &id, approved, note)).await
    }

    /// Cooperative cancel: queued and awaiting renders end `Cancelled` at once; a running render
    /// gets a durable cancel flag and stops within a few frames; terminal renders are
    /// untouched (no-op acknowledgement). Returns the record as stored after the call.
    pub async fn cancel(&self, principal: &str, id: &str) -> Result<RenderRecord, ServiceError> {
        let shared = self.shared.clone();
        let (principal, id) = (principal.to_string(), id.to_string());
        blocking(move || cancel_blocking(&shared, &principal, &id)).await
    }

    /// The finished video of a render: `NotFound` (unknown / other principal), `NotReady`
    /// (not succeeded), `ResultExpired` (past retention or deleted).
    pub fn resolve_result(&self, principal: &str, id: &str) -> Result<ResultFile, ServiceError> {
        let rec = self.shared.ledger.load_owned(principal, id)?;
        if rec.state != RenderState::Succeeded {
            return Err(ServiceError::NotReady { state: rec.state });
        }
        self.check_retention(&rec)?;
        match &rec.outcome {
            Some(Outcome::Success {
                video_path,
                video_file_name,
                mime_type,
                size_bytes,
                ..
            }) => {
                // A local file is checked (a shared directory can lose it); an object is as
                // its record says until the sweeper marks it deleted.
                let size_bytes = if self.shared.media.store.is_object() && video_path.is_relative()
                {
                    *size_bytes
                } else {
                    std::fs::metadata(video_path)
                        .map_err(|_| ServiceError::ResultExpired {
                            expired_at: self.result_expires_at(&rec),
                        })?
                        .len()
                };
                Ok(ResultFile {
                    path: video_path.clone(),
                    file_name: video_file_name.clone(),
                    mime_type: mime_type.clone(),
                    size_bytes,
                    record: rec,
                })
            }
            _ => Err(ServiceError::NotReady { state: rec.state }),
        }
    }

    /// The watermark preview PNG of a render (`NotReady` until it exists).
    pub fn preview_path(
        &self,
        principal: &str,
        id: &str,
    ) -> Result<(RenderRecord, PathBuf), ServiceError> {
        let rec = self.shared.ledger.load_owned(principal, id)?;
        self.check_retention(&rec)?;
        match &rec.preview_path {
            Some(p) if p.is_relative() || p.is_file() => {
                let p = p.clone();
                Ok((rec, p))
            }
            _ => Err(ServiceError::NotReady { state: rec.state }),
        }
    }

    fn check_retention(&self, rec: &RenderRecord) -> Result<(), ServiceError> {
        let expires = self.result_expires_at(rec);
        if rec.result_deleted || self.shared.ledger.now() >= expires {
            return Err(ServiceError::ResultExpired {
                expired_at: expires,
            });
        }
        Ok(())
    }

    /// Unix ms when the task handle expires (`created_at + task_ttl`).
    pub fn task_expires_at(&self, rec: &RenderRecord) -> u64 {
        rec.task_expires_at(self.shared.config.task_ttl)
    }

    /// Whether `tasks/*` should answer `task_expired` for this record now.
    pub fn task_expired(&self, rec: &RenderRecord) -> bool {
        task_expired(rec, self.shared.ledger.now(), &self.shared.config)
    }

    /// Unix ms when the result and status expire.
    pub fn result_expires_at(&self, rec: &RenderRecord) -> u64 {
        rec.result_expires_at(self.shared.config.result_ttl)
    }

    /// Whether the result (and the fallback status) has expired now.
    pub fn result_expired(&self, rec: &RenderRecord) -> bool {
        result_expired(rec, self.shared.ledger.now(), &self.shared.config)
    }

    /// Where media lives.
    pub fn media(&self) -> &crate::media_store::MediaStore {
        &self.shared.media.store
    }

    // ---- assets ----

    /// Streams an upload to disk (size limit enforced while streaming), probes it and records
    /// it durably. Over the limit → `AssetTooLarge`; neither a video nor a PNG →
    /// `AssetInvalid`; either way nothing is kept.
    pub async fn add_asset_stream<S, E>(
        &self,
        principal: &str,
        file_name: &str,
        stream: S,
    ) -> Result<AssetRecord, ServiceError>
    where
        S: Stream<Item = Result<Bytes, E>> + Send,
        E: std::fmt::Display,
    {
        self.shared.media.disk.check()?;
        self.shared.media.store.check_available().await?;
        self.shared
            .media
            .assets
            .add_stream(principal, file_name, stream)
            .await
    }

    /// Deletes an asset `principal` owns (another principal's is `AssetNotFound`, like a
    /// missing one); refused with `AssetInUse` while an unfinished render uses it. Serialised
    /// with render creation, so no render can start using it meanwhile.
    pub async fn delete_asset(&self, principal: &str, uri_or_id: &str) -> Result<(), ServiceError> {
        let service = self.clone();
        let (principal, id) = (principal.to_string(), uri_or_id.to_string());
        blocking(move || {
            let shared = &service.shared;
            let _creating = lock(&shared.ledger.create_lock);
            let rec = shared
                .media
                .assets
                .lookup(&principal, &id)?
                .ok_or(ServiceError::AssetNotFound)?;
            if let Some(renders) = shared.ledger.assets_in_use()?.remove(&rec.id) {
                return Err(ServiceError::AssetInUse { renders });
            }
            shared.media.assets.remove(&rec)
        })
        .await
    }

    /// When an asset expires (Unix ms).
    pub fn asset_expires_at(&self, rec: &AssetRecord) -> u64 {
        crate::clock::add_ms(rec.created_at, self.shared.config.asset_ttl)
    }

    /// [`RenderService::add_asset_stream`] from a local file.
    pub async fn add_asset_path(
        &self,
        principal: &str,
        path: &Path,
        file_name: Option<&str>,
    ) -> Result<AssetRecord, ServiceError> {
        self.shared.media.store.check_available().await?;
        self.shared
            .media
            .assets
            .add_path(principal, path, file_name)
            .await
    }

    /// The asset behind `vidforge://assets/<id>` (or a bare id) if `principal` owns it;
    /// otherwise `SourceNotFound` with `field`.
    pub fn resolve_asset(
        &self,
        principal: &str,
        uri_or_id: &str,
    ) -> Result<AssetRecord, ServiceError> {
        self.shared
            .media
            .assets
            .lookup(principal, uri_or_id)?
            .ok_or_else(|| ServiceError::SourceNotFound {
                field: "source_asset_uri".into(),
                reason: "no asset with this URI is visible to this credential".into(),
            })
    }

    // ---- maintenance (also run by the background thread) ----

    /// Ends every undecided approval whose deadline has passed with
    /// `watermark_approval_timeout`; returns how many.
    pub fn expire_due_approvals(&self) -> Result<usize, ServiceError> {
        maintenance::expire_due_approvals(&self.shared)
    }

    /// Deletes result files past retention (keeping a tombstone), tombstones past their grace,
    /// and idempotency keys past their TTL, then runs the [`RenderService::add_sweeper`] steps.
    pub fn sweep(&self) -> Result<SweepReport, ServiceError> {
        maintenance::sweep(&self.shared, true)
    }
}

/// Whether the task handle of `rec` has expired at `now_ms`.
pub fn task_expired(rec: &RenderRecord, now_ms: u64, config: &Config) -> bool {
    now_ms >= rec.task_expires_at(config.task_ttl)
}

/// Whether the result/status retention of `rec` has ended at `now_ms`.
pub fn result_expired(rec: &RenderRecord, now_ms: u64, config: &Config) -> bool {
    rec.result_deleted || now_ms >= rec.result_expires_at(config.result_ttl)
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ServiceError> + Send + 'static,
) -> Result<T, ServiceError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ServiceError::Internal(format!("blocking task failed: {e}")))?
}
