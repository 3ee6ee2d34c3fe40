//! Durable generic jobs: tasks that are not renders (the conformance fixtures' tasks).
//!
//! A job is a [`JobRecord`] in the `jobs` tree of the server's sled database (opened through
//! the MCP extension seam, [`ExtensionHost::open_tree`]) plus, while it runs, a tokio task
//! driving a caller-supplied future through a [`JobContext`]. The record is the truth: it is
//! flushed before a creation, an input request, an answer, a cancellation or an outcome is
//! reported to anyone, so every state a client was told about survives `kill -9`. A job
//! interrupted by a restart cannot resume (its future died with the process), so boot
//! recovery ends it as `failed`.
//!
//! Changes are announced on the same broadcast as renders ([`ExtensionHost::task_changed`]),
//! so task-status listeners see both kinds. Job ids are `job_…`; render ids are `task_…`.
//!
//! [`ExtensionHost::open_tree`]: vidforge_mcp::ExtensionHost::open_tree
//! [`ExtensionHost::task_changed`]: vidforge_mcp::ExtensionHost::task_changed

mod error;
mod handle;
mod record;
mod recovery;
mod runner;
mod shared;
mod store;

pub use error::{JobError, Stop};
pub use handle::Jobs;
pub use record::{INTERRUPTED_CODE, JOB_ID_PREFIX, JobFailure, JobOutcome, JobRecord, JobState};
pub use runner::JobContext;
pub use shared::{FlushFn, JobsParts, PublishFn};
pub use store::{JOBS_TREE, JobStore};

#[cfg(test)]
mod tests;
