//! The job record: where a job stands, how it ended, and the durable fields of both.

use std::collections::BTreeMap;

use rmcp::model::TaskStatus;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Prefix of every job id (also its MCP `taskId`).
pub const JOB_ID_PREFIX: &str = "job_";

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

/// How a job ended on its own.
#[derive(Debug)]
pub enum JobOutcome {
    /// Delivered a result (which may itself report a tool error).
    Completed(Value),
    /// A protocol-level failure.
    Failed(JobFailure),
}

/// JSON-RPC "internal error": the code of a job that ended without producing its result.
pub const INTERRUPTED_CODE: i64 = rmcp::model::ErrorCode::INTERNAL_ERROR.0 as i64;
pub(super) const INTERRUPTED_MESSAGE: &str =
    "The job was interrupted by a server restart before it finished.";

/// Moves a record to a terminal state, clearing outstanding requests.
pub(super) fn end(r: &mut JobRecord, now: u64, state: JobState, message: &str) {
    r.state = state;
    r.status_message = message.to_string();
    r.input_requests.clear();
    r.updated_at = now;
}
