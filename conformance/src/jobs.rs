//! Durable generic jobs: tasks that are not renders (the conformance fixtures' tasks).
//!
//! A job is a [`JobRecord`] in the `jobs` tree of the server's sled database (opened through
//! the MCP extension seam, [`ExtensionHost::open_tree`]) plus, while it runs, a tokio task
//! driving a caller-supplied future through a [`JobContext`]. The record is the truth: it is flushed before a creation,
//! an input request, an answer, a cancellation or an outcome is reported to anyone, so every
//! state a client was told about survives `kill -9`. A job interrupted by a restart cannot
//! resume (its future died with the process), so boot recovery ends it as `failed`.
//!
//! Changes are announced on the same broadcast as renders ([`ExtensionHost::task_changed`]),
//! so task-status listeners see both kinds. Job ids are `job_…`; render ids are `task_…`.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::TaskStatus;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use vidforge_core::clock::{SharedClock, add_ms};
use vidforge_core::ids;
use vidforge_core::store::{Change, StoreError, Updated, all_in, update_in};
use vidforge_mcp::ExtensionHost;
use vidforge_mcp::wire;

/// Prefix of every job id (also its MCP `taskId`).
pub const JOB_ID_PREFIX: &str = "job_";
/// The sled tree the jobs live in.
pub const JOBS_TREE: &str = "jobs";

/// Where a generic job (a task that is not a render) stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl JobState {
    /// The MCP task status of this state.
    pub fn task_status(self) -> TaskStatus {
        match self {
            JobState::Working => TaskStatus::Working,
            JobState::InputRequired => TaskStatus::InputRequired,
            JobState::Completed => TaskStatus::Completed,
            JobState::Failed => TaskStatus::Failed,
            JobState::Cancelled => TaskStatus::Cancelled,
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobState::Completed | JobState::Failed | JobState::Cancelled
        )
    }
}

/// A protocol-level failure of a job (`failed` tasks carry it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobFailure {
    pub code: i64,
    pub message: String,
}

/// A durable generic job: the task record of work that is not a render. Inputs, answers and
/// the result are opaque JSON to the store; the code that runs the job gives them meaning.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    pub id: String,
    pub principal: String,
    /// What runs it (the tool name).
    pub kind: String,
    pub state: JobState,
    pub status_message: String,
    /// Outstanding requests for input, by key.
    #[serde(default)]
    pub input_requests: BTreeMap<String, Value>,
    /// Answers received so far, by key.
    #[serde(default)]
    pub input_responses: BTreeMap<String, Value>,
    pub result: Option<Value>,
    pub failure: Option<JobFailure>,
    pub created_at: u64,
    pub updated_at: u64,
}

/// The job records: one sled tree of JSON records keyed by job id. Writes are not flushed.
#[derive(Clone, Debug)]
pub struct JobStore {
    tree: sled::Tree,
}

impl JobStore {
    pub fn new(tree: sled::Tree) -> JobStore {
        JobStore { tree }
    }

    pub fn get(&self, id: &str) -> Result<Option<JobRecord>, StoreError> {
        self.tree
            .get(id.as_bytes())?
            .map(|v| {
                serde_json::from_slice(&v).map_err(|e| StoreError::Decode {
                    key: id.to_string(),
                    source: e,
                })
            })
            .transpose()
    }

    /// Inserts or replaces a job.
    pub fn put(&self, rec: &JobRecord) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec(rec).map_err(StoreError::Encode)?;
        self.tree.insert(rec.id.as_bytes(), bytes)?;
        Ok(())
    }

    pub fn delete(&self, id: &str) -> Result<(), StoreError> {
        self.tree.remove(id.as_bytes())?;
        Ok(())
    }

    /// Compare-and-swap read-modify-write of one job ([`update_in`]).
    pub fn update<T, E>(
        &self,
        id: &str,
        f: impl FnMut(&mut JobRecord) -> Result<Change<T>, E>,
    ) -> Result<Option<Updated<JobRecord, T>>, E>
    where
        E: From<StoreError>,
    {
        update_in(&self.tree, id, f)
    }

    /// Every job record (undecodable ones are logged and skipped).
    pub fn all(&self) -> Result<Vec<JobRecord>, StoreError> {
        all_in(&self.tree, "job")
    }
}

/// Makes every previous write durable (blocking).
pub type FlushFn = Arc<dyn Fn() -> Result<(), StoreError> + Send + Sync>;
/// Announces a change of job `id` to `notifications/tasks` subscribers.
pub type PublishFn = Arc<dyn Fn(&str) + Send + Sync>;

/// What the job layer needs from the server.
pub struct JobsParts {
    pub store: JobStore,
    pub flush: FlushFn,
    pub clock: SharedClock,
    pub publish: PublishFn,
    /// How long a job stays readable after creation (the task TTL).
    pub ttl: Duration,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// JSON-RPC "internal error": the code of a job that ended without producing its result.
pub const INTERRUPTED_CODE: i64 = rmcp::model::ErrorCode::INTERNAL_ERROR.0 as i64;
const INTERRUPTED_MESSAGE: &str = "The job was interrupted by a server restart before it finished.";

#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// Unknown, expired, or another principal's id (indistinguishable on purpose).
    #[error("unknown or expired job")]
    NotFound,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("a store task did not finish: {0}")]
    Join(String),
}

/// Why a running job stopped before producing an outcome.
#[derive(Debug)]
pub enum Stop {
    /// The client cancelled it (already recorded).
    Cancelled,
    /// Its state could not be stored; the job is ended as `failed` with this reason.
    Store(String),
}

impl From<StoreError> for Stop {
    fn from(e: StoreError) -> Self {
        Stop::Store(e.to_string())
    }
}

impl From<JobError> for Stop {
    fn from(e: JobError) -> Self {
        Stop::Store(e.to_string())
    }
}

/// How a job ended on its own.
#[derive(Debug)]
pub enum JobOutcome {
    /// Delivered a result (which may itself report a tool error).
    Completed(Value),
    /// A protocol-level failure.
    Failed(JobFailure),
}

struct Live {
    cancel: CancellationToken,
    /// Woken when answers arrive.
    input: Notify,
}

struct Inner {
    store: JobStore,
    flush: FlushFn,
    clock: SharedClock,
    publish: PublishFn,
    ttl: Duration,
    live: Mutex<HashMap<String, Arc<Live>>>,
}

impl Inner {
    fn now(&self) -> u64 {
        self.clock.now_ms()
    }

    fn live(&self, id: &str) -> Option<Arc<Live>> {
        lock(&self.live).get(id).cloned()
    }

    fn publish(&self, id: &str) {
        (self.publish)(id);
    }

    async fn flush(&self) -> Result<(), JobError> {
        let flush = self.flush.clone();
        tokio::task::spawn_blocking(move || flush())
            .await
            .map_err(|e| JobError::Join(e.to_string()))??;
        Ok(())
    }

    fn expired(&self, rec: &JobRecord) -> bool {
        self.now() >= add_ms(rec.created_at, self.ttl)
    }
}

/// Handle to the job layer (cheap to clone).
#[derive(Clone)]
pub struct Jobs {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Jobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jobs")
            .field("ttl", &self.inner.ttl)
            .finish()
    }
}

impl Jobs {
    pub fn new(parts: JobsParts) -> Jobs {
        Jobs {
            inner: Arc::new(Inner {
                store: parts.store,
                flush: parts.flush,
                clock: parts.clock,
                publish: parts.publish,
                ttl: parts.ttl,
                live: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The job layer on the server's store: the `jobs` tree, the server's flush, clock, task
    /// broadcast and task TTL.
    pub fn on_host(host: &ExtensionHost) -> Result<Jobs, StoreError> {
        let flush_host = host.clone();
        let publish_host = host.clone();
        Ok(Jobs::new(JobsParts {
            store: JobStore::new(host.open_tree(JOBS_TREE)?),
            flush: Arc::new(move || flush_host.flush()),
            clock: host.clock(),
            publish: Arc::new(move |id| publish_host.task_changed(id)),
            ttl: host.task_ttl(),
        }))
    }

    /// Whether `id` has the shape of a job id.
    pub fn is_job_id(id: &str) -> bool {
        ids::is_well_formed(id, JOB_ID_PREFIX)
    }

    /// The task fields of a job, for `CreateTaskResult`, `tasks/get` and notifications.
    pub fn task_fields(&self, rec: &JobRecord) -> Value {
        let task = wire::task(
            &rec.id,
            rec.state.task_status(),
            rec.status_message.as_str(),
            rec.created_at,
            rec.updated_at,
            self.inner.ttl,
        );
        serde_json::to_value(task).unwrap_or_default()
    }

    /// A job as a `DetailedTask`: outstanding `inputRequests`, the inlined `result`, or
    /// `error`.
    pub fn detailed(&self, rec: &JobRecord) -> Value {
        let mut task = self.task_fields(rec);
        match rec.state {
            JobState::InputRequired => task["inputRequests"] = json!(rec.input_requests),
            JobState::Completed => {
                if let Some(result) = &rec.result {
                    task["result"] = result.clone();
                }
            }
            JobState::Failed => {
                if let Some(f) = &rec.failure {
                    task["error"] = json!({ "code": f.code, "message": f.message });
                }
            }
            JobState::Working | JobState::Cancelled => {}
        }
        task
    }

    pub fn ttl(&self) -> Duration {
        self.inner.ttl
    }

    /// Boot recovery: ends every job a previous process left unfinished as `failed`, durably.
    /// Returns how many.
    pub fn recover(&self) -> Result<usize, StoreError> {
        let now = self.inner.now();
        let mut ended = 0;
        for rec in self.inner.store.all()? {
            if rec.state.is_terminal() {
                continue;
            }
            self.inner.store.update(&rec.id, |r| {
                if r.state.is_terminal() {
                    return Ok::<_, StoreError>(Change::Keep(()));
                }
                end(r, now, JobState::Failed, INTERRUPTED_MESSAGE);
                r.failure = Some(JobFailure {
                    code: INTERRUPTED_CODE,
                    message: INTERRUPTED_MESSAGE.into(),
                });
                Ok(Change::Write(()))
            })?;
            ended += 1;
        }
        (self.inner.flush)()?;
        Ok(ended)
    }

    /// Deletes jobs past their TTL (cancelling any still running). Returns how many.
    pub fn sweep(&self) -> Result<usize, StoreError> {
        let mut removed = 0;
        for rec in self.inner.store.all()? {
            if self.inner.expired(&rec) {
                if let Some(live) = self.inner.live(&rec.id) {
                    live.cancel.cancel();
                }
                self.inner.store.delete(&rec.id)?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Creates a job durably (flushed before returning), then runs `run` on the tokio runtime.
    /// The returned record is the job as created (`working`).
    pub async fn spawn<F, Fut>(
        &self,
        principal: &str,
        kind: &str,
        status_message: &str,
        run: F,
    ) -> Result<JobRecord, JobError>
    where
        F: FnOnce(JobContext) -> Fut + Send + 'static,
        Fut: Future<Output = Result<JobOutcome, Stop>> + Send + 'static,
    {
        let now = self.inner.now();
        let rec = JobRecord {
            id: ids::new_id(JOB_ID_PREFIX),
            principal: principal.to_string(),
            kind: kind.to_string(),
            state: JobState::Working,
            status_message: status_message.to_string(),
            input_requests: BTreeMap::new(),
            input_responses: BTreeMap::new(),
            result: None,
            failure: None,
            created_at: now,
            updated_at: now,
        };
        self.inner.store.put(&rec)?;
        self.inner.flush().await?;
        let live = Arc::new(Live {
            cancel: CancellationToken::new(),
            input: Notify::new(),
        });
        lock(&self.inner.live).insert(rec.id.clone(), live.clone());
        let ctx = JobContext {
            id: rec.id.clone(),
            inner: self.inner.clone(),
            live,
        };
        let inner = self.inner.clone();
        let id = rec.id.clone();
        tokio::spawn(async move {
            let outcome = run(ctx).await;
            if let Err(e) = finish(&inner, &id, outcome).await {
                tracing::error!(job = %id, error = %e, "could not record a job's outcome");
            }
            lock(&inner.live).remove(&id);
        });
        tracing::info!(job = %rec.id, kind, "job started");
        Ok(rec)
    }

    /// The principal's job, unless unknown, expired or someone else's.
    pub fn get(&self, principal: &str, id: &str) -> Result<JobRecord, JobError> {
        if !Jobs::is_job_id(id) {
            return Err(JobError::NotFound);
        }
        match self.inner.store.get(id)? {
            Some(rec) if rec.principal == principal && !self.inner.expired(&rec) => Ok(rec),
            _ => Err(JobError::NotFound),
        }
    }

    /// Applies `change` to the principal's job (it returns whether it changed anything); a
    /// change is flushed and announced before this returns.
    async fn update(
        &self,
        principal: &str,
        id: &str,
        mut change: impl FnMut(&mut JobRecord) -> bool,
    ) -> Result<(JobRecord, bool), JobError> {
        self.get(principal, id)?;
        let updated = self
            .inner
            .store
            .update(id, |r| {
                Ok::<_, StoreError>(if change(r) {
                    Change::Write(())
                } else {
                    Change::Keep(())
                })
            })?
            .ok_or(JobError::NotFound)?;
        if updated.written {
            self.inner.flush().await?;
            self.inner.publish(id);
        }
        Ok((updated.record, updated.written))
    }

    /// Records answers to outstanding input requests; keys that are not outstanding are
    /// ignored. When nothing is left outstanding the job resumes (`working`). Durable before
    /// returning.
    pub async fn answer(
        &self,
        principal: &str,
        id: &str,
        responses: BTreeMap<String, Value>,
    ) -> Result<JobRecord, JobError> {
        let now = self.inner.now();
        let (record, written) = self
            .update(principal, id, |r| {
                if r.state != JobState::InputRequired {
                    return false;
                }
                let mut answered = false;
                for (key, value) in &responses {
                    if r.input_requests.remove(key).is_some() {
                        r.input_responses.insert(key.clone(), value.clone());
                        answered = true;
                    }
                }
                if answered {
                    if r.input_requests.is_empty() {
                        r.state = JobState::Working;
                        r.status_message = "Input received; resuming.".into();
                    }
                    r.updated_at = now;
                }
                answered
            })
            .await?;
        if written && let Some(live) = self.inner.live(id) {
            live.input.notify_one();
        }
        Ok(record)
    }

    /// Cancels a job that has not ended (durably, then stops its future); a no-op on an ended
    /// job.
    pub async fn cancel(&self, principal: &str, id: &str) -> Result<JobRecord, JobError> {
        let now = self.inner.now();
        let (record, written) = self
            .update(principal, id, |r| {
                let running = !r.state.is_terminal();
                if running {
                    end(r, now, JobState::Cancelled, "Cancelled by the client.");
                }
                running
            })
            .await?;
        if written && let Some(live) = self.inner.live(id) {
            live.cancel.cancel();
        }
        Ok(record)
    }
}

/// Moves a record to a terminal state, clearing outstanding requests.
fn end(r: &mut JobRecord, now: u64, state: JobState, message: &str) {
    r.state = state;
    r.status_message = message.to_string();
    r.input_requests.clear();
    r.updated_at = now;
}

async fn finish(
    inner: &Inner,
    id: &str,
    outcome: Result<JobOutcome, Stop>,
) -> Result<(), JobError> {
    let now = inner.now();
    let written = inner
        .store
        .update(id, |r| {
            if r.state.is_terminal() {
                return Ok::<_, StoreError>(Change::Keep(()));
            }
            match &outcome {
                Ok(JobOutcome::Completed(result)) => {
                    end(r, now, JobState::Completed, "Completed.");
                    r.result = Some(result.clone());
                }
                Ok(JobOutcome::Failed(failure)) => {
                    end(r, now, JobState::Failed, &failure.message);
                    r.failure = Some(failure.clone());
                }
                // A cancellation is recorded by `cancel` before the future stops.
                Err(Stop::Cancelled) => return Ok(Change::Keep(())),
                Err(Stop::Store(e)) => {
                    let message = format!("The job's state could not be stored: {e}");
                    end(r, now, JobState::Failed, &message);
                    r.failure = Some(JobFailure {
                        code: INTERRUPTED_CODE,
                        message,
                    });
                }
            }
            Ok(Change::Write(()))
        })?
        .is_some_and(|u| u.written);
    if written {
        inner.flush().await?;
        inner.publish(id);
    }
    Ok(())
}

/// What a running job can do: wait (cancellably) and ask its client for input.
pub struct JobContext {
    id: String,
    inner: Arc<Inner>,
    live: Arc<Live>,
}

impl JobContext {
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Sleeps `d`, or stops early with [`Stop::Cancelled`].
    pub async fn sleep(&self, d: Duration) -> Result<(), Stop> {
        tokio::select! {
            _ = tokio::time::sleep(d) => Ok(()),
            _ = self.live.cancel.cancelled() => Err(Stop::Cancelled),
        }
    }

    /// Puts the job in `input_required` with `requests` (durably), waits until every key is
    /// answered, then returns the answers by key.
    pub async fn ask(
        &self,
        requests: BTreeMap<String, Value>,
        status_message: &str,
    ) -> Result<BTreeMap<String, Value>, Stop> {
        let keys: Vec<String> = requests.keys().cloned().collect();
        let now = self.inner.now();
        let updated = self.inner.store.update(&self.id, |r| {
            if r.state.is_terminal() {
                return Ok::<_, StoreError>(Change::Keep(()));
            }
            for key in &keys {
                r.input_responses.remove(key);
            }
            r.input_requests = requests.clone();
            r.state = JobState::InputRequired;
            r.status_message = status_message.to_string();
            r.updated_at = now;
            Ok(Change::Write(()))
        })?;
        if !updated.is_some_and(|u| u.written) {
            return Err(Stop::Cancelled);
        }
        self.inner.flush().await?;
        self.inner.publish(&self.id);
        loop {
            let Some(rec) = self.inner.store.get(&self.id)? else {
                return Err(Stop::Cancelled);
            };
            if rec.state.is_terminal() {
                return Err(Stop::Cancelled);
            }
            if rec.state == JobState::Working {
                return Ok(keys
                    .iter()
                    .filter_map(|k| rec.input_responses.get(k).map(|v| (k.clone(), v.clone())))
                    .collect());
            }
            tokio::select! {
                _ = self.live.input.notified() => {}
                _ = self.live.cancel.cancelled() => return Err(Stop::Cancelled),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vidforge_core::clock::OffsetClock;
    use vidforge_core::store::Store;

    fn parts(store: &Store, clock: SharedClock) -> JobsParts {
        let flushed = store.clone();
        JobsParts {
            store: JobStore::new(store.open_tree(JOBS_TREE).unwrap()),
            flush: Arc::new(move || flushed.flush()),
            clock,
            publish: Arc::new(|_| {}),
            ttl: Duration::from_secs(60),
        }
    }

    fn jobs(dir: &std::path::Path) -> (Jobs, JobStore) {
        let store = Store::open(dir).unwrap();
        let parts = parts(&store, Arc::new(OffsetClock::new()));
        let tree = parts.store.clone();
        (Jobs::new(parts), tree)
    }

    async fn wait_for(jobs: &Jobs, id: &str, state: JobState) -> JobRecord {
        for _ in 0..200 {
            let rec = jobs.get("alice", id).unwrap();
            if rec.state == state {
                return rec;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("job {id} never reached {state:?}");
    }

    #[tokio::test]
    async fn a_job_asks_resumes_and_completes_durably() {
        let dir = tempfile::tempdir().unwrap();
        let (jobs, store) = jobs(dir.path());
        let rec = jobs
            .spawn("alice", "ask", "Starting.", |ctx| async move {
                let answers = ctx
                    .ask(
                        BTreeMap::from([
                            ("a".into(), json!({"q": 1})),
                            ("b".into(), json!({"q": 2})),
                        ]),
                        "Need a and b.",
                    )
                    .await?;
                Ok(JobOutcome::Completed(json!({ "answers": answers })))
            })
            .await
            .unwrap();
        assert_eq!(rec.state, JobState::Working);
        // Durable at once: a fresh read of the tree sees it.
        assert!(store.get(&rec.id).unwrap().is_some());
        let waiting = wait_for(&jobs, &rec.id, JobState::InputRequired).await;
        assert_eq!(waiting.input_requests.len(), 2);
        // Unknown keys are ignored; a partial answer keeps the job waiting for the rest.
        let partial = jobs
            .answer(
                "alice",
                &rec.id,
                BTreeMap::from([("a".into(), json!(1)), ("zz".into(), json!(0))]),
            )
            .await
            .unwrap();
        assert_eq!(partial.state, JobState::InputRequired);
        assert_eq!(partial.input_requests.keys().collect::<Vec<_>>(), ["b"]);
        jobs.answer("alice", &rec.id, BTreeMap::from([("b".into(), json!(2))]))
            .await
            .unwrap();
        let done = wait_for(&jobs, &rec.id, JobState::Completed).await;
        assert_eq!(done.result, Some(json!({"answers": {"a": 1, "b": 2}})));
        // Other principals cannot see it.
        assert!(matches!(jobs.get("bob", &rec.id), Err(JobError::NotFound)));
    }

    #[tokio::test]
    async fn cancel_stops_a_running_job_and_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let (jobs, _store) = jobs(dir.path());
        let rec = jobs
            .spawn("alice", "sleep", "Sleeping.", |ctx| async move {
                ctx.sleep(Duration::from_secs(600)).await?;
                Ok(JobOutcome::Completed(json!("never")))
            })
            .await
            .unwrap();
        let cancelled = jobs.cancel("alice", &rec.id).await.unwrap();
        assert_eq!(cancelled.state, JobState::Cancelled);
        let again = jobs.cancel("alice", &rec.id).await.unwrap();
        assert_eq!(again.state, JobState::Cancelled);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let rec = jobs.get("alice", &rec.id).unwrap();
        assert_eq!(rec.state, JobState::Cancelled);
        assert_eq!(rec.result, None);
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn recovery_fails_interrupted_jobs_and_sweep_expires_them() {
        let dir = tempfile::tempdir().unwrap();
        // First "process": a job starts; dropping the runtime kills its future mid-sleep and
        // releases every store handle.
        let id = {
            let rt = runtime();
            let id = rt.block_on(async {
                let (jobs, _store) = jobs(dir.path());
                jobs.spawn("alice", "sleep", "Sleeping.", |ctx| async move {
                    ctx.sleep(Duration::from_secs(600)).await?;
                    Ok(JobOutcome::Completed(json!("never")))
                })
                .await
                .unwrap()
                .id
            });
            drop(rt);
            id
        };
        let store = Store::open(dir.path()).unwrap();
        let clock = Arc::new(OffsetClock::new());
        let jobs = Jobs::new(parts(&store, clock.clone()));
        assert_eq!(jobs.recover().unwrap(), 1);
        let rec = jobs.get("alice", &id).unwrap();
        assert_eq!(rec.state, JobState::Failed);
        assert_eq!(rec.failure.unwrap().code, INTERRUPTED_CODE);
        assert_eq!(jobs.sweep().unwrap(), 0);
        clock.advance(Duration::from_secs(61));
        assert!(matches!(jobs.get("alice", &id), Err(JobError::NotFound)));
        assert_eq!(jobs.sweep().unwrap(), 1);
    }
}
