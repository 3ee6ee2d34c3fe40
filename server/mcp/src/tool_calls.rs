//! The tool calls vidforge owns: render, status, approve, cancel (native and fallback).

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResponse, CreateTaskResult};
use serde_json::{Value, json};

use vidforge_core::catalog::ErrorCode;
use vidforge_core::store::{RenderState, without_idempotency_key};

use super::args::fallback_input;
use super::inputs::{self, ApprovalInput, RenderIdInput};
use super::presentation::to_value;
use super::tools;
use super::wire;
use vidforge_core::error::ServiceError;
use vidforge_http::envelope::{Envelope, Repair, RepairContext};

use super::declared::Declared;
use super::request::*;

impl VidforgeMcp {
    pub(super) async fn call_render(
        &self,
        principal: &str,
        arguments: Value,
        declared: &Declared,
    ) -> Result<CallToolResponse, McpError> {
        // Repairs of refused creations re-send these arguments (a new render: no key).
        let repair_arguments = without_idempotency_key(&arguments);
        let refused = |e: &ServiceError| {
            tool_error(Envelope::from_service_error(
                e,
                RepairContext {
                    arguments: Some(&repair_arguments),
                    ..Default::default()
                },
            ))
        };
        let args = match inputs::render_args(&arguments) {
            Ok(args) => args,
            Err(e) => return refused(&e),
        };
        let outcome = match self
            .shared
            .service
            .create_render(principal, args, arguments.clone())
            .await
        {
            Ok(o) => o,
            Err(e) => return refused(&e),
        };
        let rec = outcome.record;
        let presenter = &self.shared.presenter;
        if declared.tasks {
            let task = presenter.task(&rec, declared.elicitation());
            return Ok(CallToolResponse::Task(CreateTaskResult::new(task)));
        }
        // Fallback path: never block; answer with the accepted envelope (or, on an
        // idempotent replay of a finished render, its terminal result).
        match rec.state {
            RenderState::Succeeded | RenderState::Failed => {
                let result = presenter
                    .terminal_tool_result(&rec)
                    .ok_or_else(|| internal("terminal render without an outcome"))?;
                Ok(CallToolResponse::Complete(result))
            }
            RenderState::Cancelled => tool_error(
                Envelope::new(
                    ErrorCode::RenderCancelled,
                    ErrorCode::RenderCancelled.description(self.shared.presenter.lifetimes()),
                )
                .field("idempotency_key")
                .repair(Some(
                    Repair::new("rerender", tools::RENDER_VIDEO, rec.repair_arguments())
                        .alternative("Pass a new idempotency_key to start a fresh render."),
                )),
            ),
            _ => tool_ok(
                format!(
                    "Render accepted as {}; poll {}.",
                    rec.id,
                    tools::GET_RENDER_STATUS
                ),
                to_value(&presenter.accepted(&rec)),
            ),
        }
    }

    pub(super) fn call_status(
        &self,
        principal: &str,
        arguments: &Value,
    ) -> Result<CallToolResponse, McpError> {
        let id = match fallback_input::<RenderIdInput>(arguments) {
            Ok(input) => input.render_id.0,
            Err(env) => return tool_error(*env),
        };
        match self.shared.service.get(principal, &id) {
            Ok(rec) => {
                let status = self.shared.presenter.fallback_status(&rec);
                let mut result =
                    wire::tool_ok_result(status.status_message.clone(), to_value(&status));
                // A succeeded render's video also as the task result's `resource_link`
                // (delivered as a link, never inline): what a client without tasks, a legacy
                // one included, reads with resources/read or downloads.
                if let Some(done) = self.shared.presenter.terminal_tool_result(&rec)
                    && done.is_error != Some(true)
                {
                    result.content.extend(
                        done.content
                            .into_iter()
                            .filter(|c| c.as_resource_link().is_some()),
                    );
                }
                Ok(CallToolResponse::Complete(result))
            }
            Err(e) => tool_error(service_envelope(&e, Some(&id))),
        }
    }

    pub(super) async fn call_approve(
        &self,
        principal: &str,
        arguments: &Value,
    ) -> Result<CallToolResponse, McpError> {
        let (id, approved, note) = match fallback_input::<ApprovalInput>(arguments) {
            Ok(a) => (a.render_id.0, a.approved, a.note.map(|n| n.0)),
            Err(env) => return tool_error(*env),
        };
        match self
            .shared
            .service
            .decide_approval(principal, &id, approved, note)
            .await
        {
            Ok(outcome) => {
                let state = outcome.record.state.public_name();
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
        let id = match fallback_input::<RenderIdInput>(arguments) {
            Ok(input) => input.render_id.0,
            Err(env) => return tool_error(*env),
        };
        match self.shared.service.cancel(principal, &id).await {
            Ok(rec) => {
                let state = if rec.is_terminal() {
                    rec.state.public_name()
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
