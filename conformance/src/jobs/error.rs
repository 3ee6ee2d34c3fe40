//! What goes wrong in the job layer: [`JobError`] for callers, [`Stop`] for a running job.

use vidforge_core::store::StoreError;

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
