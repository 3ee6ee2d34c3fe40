//! [`Jobs`], the handle to the job layer: building it on the server's store, reading a
//! principal's jobs as MCP tasks, answering their input requests and cancelling them.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use vidforge_core::ids;
use vidforge_core::store::{Change, StoreError};
use vidforge_mcp::ExtensionHost;
use vidforge_mcp::wire;

use super::error::JobError;
use super::record::{JOB_ID_PREFIX, JobRecord, JobState, end};
use super::shared::{Inner, JobsParts};
use super::store::{JOBS_TREE, JobStore};

/// Handle to the job layer (cheap to clone).
#[derive(Clone)]
pub struct Jobs {
    pub(super) inner: Arc<Inner>,
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
