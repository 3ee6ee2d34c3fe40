//! Decisions about a render from outside its worker: the person's watermark decision, the
//! client's cancel, and the approval deadline passing.

use crate::catalog::ErrorCode;
use crate::clock::rfc3339;
use crate::error::ServiceError;
use crate::shared::Shared;
use crate::store::{Approval, Change, Decision, Outcome, RenderRecord, RenderState, Updated};

use super::speculative::{Approved, approve};
use super::{Written, mark_cancelled, mark_failed, write_durable};

/// Message of the `watermark_rejected` outcome.
pub const REJECTED_MESSAGE: &str =
    "User declined the watermark preview; the render was not finalized.";

/// Records the watermark decision (bound to `params_hash`, the exact watermark
/// parameters): approve queues the render or uses its speculation, reject fails it with
/// `watermark_rejected`. The same decision again writes nothing; another one is
/// `ApprovalAlreadyRecorded`, and a render not awaiting one `ApprovalNotPending`.
pub(crate) fn decide(
    shared: &Shared,
    id: &str,
    approved: bool,
    note: Option<&str>,
    params_hash: &str,
) -> Result<Updated<RenderRecord, Approved>, ServiceError> {
    let now = shared.ledger.now();
    write_durable(&shared.ledger, id, |r| {
        if let Some(d) = r.decision() {
            return if d.approved == approved {
                Ok(Change::Keep(Approved::Queue))
            } else {
                Err(ServiceError::ApprovalAlreadyRecorded {
                    recorded_approved: d.approved,
                })
            };
        }
        if r.state != RenderState::AwaitingApproval {
            return Err(ServiceError::ApprovalNotPending { state: r.state });
        }
        let approval = r.approval.get_or_insert(Approval {
            decision: None,
            requested_at: now,
            deadline: now,
        });
        approval.decision = Some(Decision {
            approved,
            note: note.map(str::to_string),
            decided_at: now,
            params_hash: params_hash.to_string(),
        });
        if approved {
            return Ok(Change::Write(approve(r, params_hash, now)));
        }
        let outcome = Outcome::Error {
            code: ErrorCode::WatermarkRejected,
            message: REJECTED_MESSAGE.into(),
            reason: Some(match note {
                Some(n) => format!("User note: '{n}'."),
                None => "The user rejected the preview without a note.".into(),
            }),
            field: Some("watermark".into()),
            retry_after_ms: None,
            temporary: None,
        };
        mark_failed(r, outcome, now);
        Ok(Change::Write(Approved::Queue))
    })?
    .ok_or(ServiceError::NotFound)
}

/// The client's cancel: a queued or awaiting render ends cancelled at once; a running one
/// gets the durable cancel flag its worker stops at; a finished one is left as it is.
pub(crate) fn request_cancel(
    shared: &Shared,
    id: &str,
) -> Result<Updated<RenderRecord, ()>, ServiceError> {
    let now = shared.ledger.now();
    write_durable(&shared.ledger, id, |r| {
        if r.is_terminal() {
            return Ok(Change::Keep(()));
        }
        match r.state {
            RenderState::Queued | RenderState::AwaitingApproval => {
                mark_cancelled(r, now);
                r.cancel_requested = true;
                Ok(Change::Write(()))
            }
            _ if r.cancel_requested => Ok(Change::Keep(())),
            _ => {
                r.cancel_requested = true;
                Ok(Change::Write(()))
            }
        }
    })?
    .ok_or(ServiceError::NotFound)
}

/// An undecided approval whose deadline has passed ends the render with
/// `watermark_approval_timeout` (`timeout`: the approval timeout in words). `true` in the
/// answer: it did.
pub(crate) fn time_out_approval(
    shared: &Shared,
    id: &str,
    timeout: &str,
) -> Result<Written<bool>, ServiceError> {
    let now = shared.ledger.now();
    write_durable(&shared.ledger, id, |r| {
        let deadline = match &r.approval {
            Some(a) if a.decision.is_none() => a.deadline,
            _ => return Ok(Change::Keep(false)),
        };
        if r.state != RenderState::AwaitingApproval || now < deadline {
            return Ok(Change::Keep(false));
        }
        let outcome = Outcome::Error {
            code: ErrorCode::WatermarkApprovalTimeout,
            message: format!(
                "No watermark decision arrived within {timeout}; the render was not finalized."
            ),
            reason: Some(format!(
                "The approval deadline {} passed.",
                rfc3339(deadline)
            )),
            field: Some("watermark".into()),
            retry_after_ms: None,
            temporary: None,
        };
        mark_failed(r, outcome, now);
        Ok(Change::Write(true))
    })
}
