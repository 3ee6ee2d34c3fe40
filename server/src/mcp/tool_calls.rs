//! The tool calls vidforge owns: render, status, approve, cancel (native and fallback).

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResponse, CreateTaskResult};
use serde_json::{Value, json};

use crate::catalog::{self, ErrorCode};
use crate::store::{RenderArgs, RenderState};

use super::tools;
use super::wire;
use crate::envelope::{Envelope, Repair};

use super::handler::*;

impl VidforgeMcp {
    pub(super) async fn call_render(
        &self,
        principal: &str,
        arguments: Value,
        declared: &Declared,
    ) -> Result<CallToolResponse, McpError> {
        let args = match RenderArgs::from_tool_arguments(&arguments) {
            Ok(args) => args,
            Err(e) => return tool_error(service_envelope(&e, None)),
        };
        let outcome = match self
            .shared
            .service
            .create_render(principal, args, arguments.clone())
            .await
        {
            Ok(o) => o,
            Err(e) => return tool_error(service_envelope(&e, None)),
        };
        let rec = outcome.record;
        if declared.tasks {
            let task: CreateTaskResult = from_json({
                let mut t = self.task_fields(&rec, declared.elicitation_form);
                t["resultType"] = json!("task");
                t
            })?;
            return Ok(CallToolResponse::Task(task));
        }
        // Fallback path: never block; answer with the accepted envelope (or, on an
        // idempotent replay of a finished render, its terminal result).
        match rec.state {
            RenderState::Succeeded | RenderState::Failed => {
                let result = self
                    .terminal_tool_result(&rec)
                    .ok_or_else(|| internal("terminal render without an outcome"))?;
                Ok(CallToolResponse::Complete(from_json(result)?))
            }
            RenderState::Cancelled => tool_error(
                Envelope::new(
                    ErrorCode::RenderCancelled,
                    ErrorCode::RenderCancelled.description(&self.shared.lifetimes),
                )
                .field("idempotency_key")
                .repair(Some(
                    Repair::new("rerender", tools::RENDER_VIDEO, rec.repair_arguments())
                        .alternative("Pass a new idempotency_key to start a fresh render."),
                )),
            ),
            _ => {
                let state = rec.state.fallback_state();
                tool_ok(
                    format!(
                        "Render accepted as {}; poll {}.",
                        rec.id,
                        tools::GET_RENDER_STATUS
                    ),
                    json!({
                        "status": "accepted",
                        "render_id": rec.id,
                        "state": state,
                        "poll_after_ms": catalog::POLL_INTERVAL_WORKING.as_millis() as u64,
                        "expires_at": wire::rfc3339(self.result_expires_at(&rec)),
                        "follow_up": {
                            "next_step": "poll_render_status",
                            "tool": tools::GET_RENDER_STATUS,
                            "arguments": { "render_id": rec.id }
                        }
                    }),
                )
            }
        }
    }

    pub(super) fn call_status(
        &self,
        principal: &str,
        arguments: &Value,
    ) -> Result<CallToolResponse, McpError> {
        let id = match super::args::render_id_only(arguments) {
            Ok(id) => id,
            Err(env) => return tool_error(*env),
        };
        match self.shared.service.get(principal, &id) {
            Ok(rec) => {
                let status = self.fallback_status(&rec);
                let text = status["status_message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                tool_ok(text, status)
            }
            Err(e) => tool_error(service_envelope(&e, Some(&id))),
        }
    }

    pub(super) async fn call_approve(
        &self,
        principal: &str,
        arguments: &Value,
    ) -> Result<CallToolResponse, McpError> {
        let (id, approved, note) = match super::args::approval_args(arguments) {
            Ok(a) => a,
            Err(env) => return tool_error(*env),
        };
        match self
            .shared
            .service
            .decide_approval(principal, &id, approved, note)
            .await
        {
            Ok(outcome) => {
                let state = outcome.record.state.fallback_state();
                let verb = if approved { "approved" } else { "rejected" };
                tool_ok(
                    format!(
                        "Watermark {verb} for {id}; poll {}.",
                        tools::GET_RENDER_STATUS
                    ),
                    json!({
                        "render_id": id,
                        "approved": approved,
                        "state": state,
                        "already_recorded": outcome.already_recorded_same,
                    }),
                )
            }
            Err(e) => tool_error(service_envelope(&e, Some(&id))),
        }
    }

    pub(super) async fn call_cancel(
        &self,
        principal: &str,
        arguments: &Value,
    ) -> Result<CallToolResponse, McpError> {
        let id = match super::args::render_id_only(arguments) {
            Ok(id) => id,
            Err(env) => return tool_error(*env),
        };
        match self.shared.service.cancel(principal, &id).await {
            Ok(rec) => {
                let state = if rec.is_terminal() {
                    rec.state.fallback_state()
                } else {
                    "cancelling"
                };
                tool_ok(
                    format!(
                        "Cancellation of {id} acknowledged; confirm with {}.",
                        tools::GET_RENDER_STATUS
                    ),
                    json!({ "acknowledged": true, "state": state }),
                )
            }
            Err(e) => tool_error(service_envelope(&e, Some(&id))),
        }
    }
}
