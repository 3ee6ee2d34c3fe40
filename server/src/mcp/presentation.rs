//! Presentation: a render record as the MCP wire shapes (task fields, status messages,
//! terminal tool results, the fallback status) for the handler, `tasks/*` and `listen`.

use rmcp::ErrorData as McpError;
use rmcp::model::ErrorCode as RpcCode;
use serde_json::{Value, json};

use crate::catalog::{self, ErrorCode};
use crate::error::ServiceError;
use crate::store::{Outcome, RenderRecord, RenderState};
use crate::uri;

use super::tools;
use super::wire;
use crate::envelope::{Envelope, RepairContext, default_repair};

use super::handler::*;

impl VidforgeMcp {
    pub(super) fn task_expired(&self, rec: &RenderRecord) -> bool {
        self.shared.service.task_expired(rec)
    }

    pub(super) fn result_expires_at(&self, rec: &RenderRecord) -> u64 {
        self.shared.service.result_expires_at(rec)
    }

    /// The principal's newest renders (at most [`super::MAX_LISTED_RENDERS`]).
    pub(super) fn recent_renders(&self, principal: &str) -> Vec<RenderRecord> {
        let mut recs: Vec<RenderRecord> = self
            .shared
            .service
            .store()
            .renders()
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r.principal == principal && !r.result_deleted)
            .collect();
        recs.sort_by_key(|r| std::cmp::Reverse(r.created_at));
        recs.truncate(super::MAX_LISTED_RENDERS);
        recs
    }

    /// The inline CallToolResult of a terminal-success or tool-error render.
    pub(super) fn terminal_tool_result(&self, rec: &RenderRecord) -> Option<Value> {
        match &rec.outcome {
            Some(Outcome::Success {
                video_file_name,
                mime_type,
                size_bytes,
                duration_seconds,
                resolution,
                watermark_applied,
                finished_at,
                ..
            }) => {
                let ext = rec.args.output_format.extension();
                let uri = uri::video_uri(&rec.id, rec.args.output_format);
                let mime = mime_type.as_str();
                let summary = json!({
                    "status": "completed",
                    "video_uri": uri,
                    "duration_seconds": duration_seconds,
                    "size_bytes": size_bytes,
                });
                let wm = if *watermark_applied {
                    "with approved watermark"
                } else {
                    "without watermark"
                };
                Some(json!({
                    "resultType": "complete",
                    "isError": false,
                    "content": [
                        { "type": "text", "text": summary.to_string() },
                        {
                            "type": "resource_link",
                            "uri": uri,
                            "name": video_file_name,
                            "description": format!("Rendered {resolution} {ext} {wm}; retained {}.", catalog::human_duration(self.shared.lifetimes.result_ttl)),
                            "mimeType": mime,
                            "size": size_bytes,
                            "annotations": { "audience": ["user"], "priority": 0.9, "lastModified": wire::rfc3339(*finished_at) },
                            "_meta": { "com.vidforge/download_url": self.shared.service.download_url(rec) }
                        }
                    ],
                    "structuredContent": {
                        "status": "completed",
                        "video_uri": uri,
                        "duration_seconds": duration_seconds,
                        "size_bytes": size_bytes,
                        "resolution": resolution,
                        "watermark_applied": watermark_applied,
                        "expires_at": wire::rfc3339(self.result_expires_at(rec)),
                    }
                }))
            }
            Some(Outcome::Error { .. }) => {
                let env = Envelope::from_record(rec)?;
                let text = match env.code {
                    ErrorCode::WatermarkRejected => format!(
                        "User rejected the watermark{}. Adjust `watermark` and re-call vidforge_render_video.",
                        env.details
                            .get("reason")
                            .and_then(Value::as_str)
                            .map(|r| format!(" ({r})"))
                            .unwrap_or_default()
                    ),
                    _ => format!("Render ended with {}: {}", env.code, env.message),
                };
                Some(wire::tool_error_result(&env, Some(text)))
            }
            None => None,
        }
    }

    pub(super) fn progress_text(rec: &RenderRecord) -> String {
        match &rec.progress {
            Some(p) => match p.frames_total {
                Some(total) if total > 0 => format!(
                    "{}: {}% (frame {}/{}).",
                    p.stage.label(),
                    (p.frames_done * 100 / total).min(100),
                    p.frames_done,
                    total
                ),
                _ => format!("{}: frame {}.", p.stage.label(), p.frames_done),
            },
            None => "Rendering started.".into(),
        }
    }

    pub(super) fn status_message(&self, rec: &RenderRecord, elicitation_form: bool) -> String {
        match rec.state {
            RenderState::Queued => "Render queued; encoding starts shortly.".into(),
            RenderState::Previewing => "Preparing the watermark preview.".into(),
            RenderState::Rendering => Self::progress_text(rec),
            RenderState::AwaitingApproval => {
                let timeout = catalog::human_duration(self.shared.lifetimes.approval_timeout);
                let base = format!(
                    "Waiting for user approval of the watermark preview at {}. Unanswered approvals time out after {timeout}.",
                    uri::preview_uri(&rec.id)
                );
                if elicitation_form {
                    base
                } else {
                    format!(
                        "{base} To decide, call `{}` with {{render_id: '{}', approved: true|false}}.",
                        tools::APPROVE_WATERMARK,
                        rec.id
                    )
                }
            }
            RenderState::Succeeded => "Render completed.".into(),
            RenderState::Failed => match &rec.outcome {
                Some(Outcome::Error { code, message, .. }) => {
                    format!("Render ended with {code}: {message}")
                }
                _ => "Render failed.".into(),
            },
            RenderState::Cancelled => "Render cancelled.".into(),
        }
    }

    /// The task fields (no status payload), for `CreateTaskResult` and `tasks/get`.
    pub(super) fn task_fields(&self, rec: &RenderRecord, elicitation_form: bool) -> Value {
        wire::task_fields(
            &rec.id,
            rec.state.task_status(),
            &self.status_message(rec, elicitation_form),
            rec.created_at,
            rec.updated_at,
            self.shared.lifetimes.task_ttl,
        )
    }

    pub(super) fn detailed_task(&self, rec: &RenderRecord, elicitation_form: bool) -> Value {
        let mut task = self.task_fields(rec, elicitation_form);
        match rec.state {
            RenderState::AwaitingApproval => {
                let requests = match (&rec.args.watermark, elicitation_form) {
                    (Some(wm), true) => {
                        wire::approval_input_requests(&rec.id, &wm.position, wm.opacity)
                    }
                    // Only modes this polling request declared may appear.
                    _ => json!({}),
                };
                task["inputRequests"] = requests;
            }
            RenderState::Succeeded | RenderState::Failed => {
                if let Some(result) = self.terminal_tool_result(rec) {
                    task["result"] = result;
                }
            }
            _ => {}
        }
        task
    }

    /// Fallback `vidforge_get_render_status` output.
    pub(super) fn fallback_status(&self, rec: &RenderRecord) -> Value {
        let (state, terminal) = (rec.state.fallback_state(), rec.is_terminal());
        let poll_after = match rec.state {
            RenderState::AwaitingApproval => catalog::POLL_AFTER_AWAITING_FALLBACK,
            _ if terminal => std::time::Duration::ZERO,
            _ => catalog::POLL_INTERVAL_WORKING,
        };
        let mut out = json!({
            "render_id": rec.id,
            "state": state,
            "terminal": terminal,
            "poll_after_ms": poll_after.as_millis() as u64,
            "status_message": self.status_message(rec, false),
            "expires_at": wire::rfc3339(self.result_expires_at(rec)),
            "terminal_states": tools::TERMINAL_FALLBACK_STATES,
        });
        if let Some(progress) = rec.progress.as_ref().and_then(|p| p.fraction()) {
            out["progress"] = json!(progress);
        } else if terminal {
            out["progress"] = json!(1.0);
        }
        match rec.state {
            RenderState::AwaitingApproval => {
                let deadline = rec
                    .approval
                    .as_ref()
                    .map(|a| a.deadline)
                    .unwrap_or(rec.updated_at);
                out["status_message"] = json!(format!(
                    "Waiting for watermark approval; times out {}.",
                    wire::rfc3339(deadline)
                ));
                out["watermark_preview_uri"] = json!(uri::preview_uri(&rec.id));
                out["follow_up"] = json!({
                    "next_step": "approve_watermark",
                    "tool": tools::APPROVE_WATERMARK,
                    "arguments": { "render_id": rec.id, "approved": true },
                    "alternative": "Pass approved: false with a `note` to reject; rejection ends the render."
                });
            }
            RenderState::Succeeded => {
                if let Some(result) = self.terminal_tool_result(rec) {
                    for key in [
                        "video_uri",
                        "duration_seconds",
                        "size_bytes",
                        "resolution",
                        "watermark_applied",
                    ] {
                        out[key] = result["structuredContent"][key].clone();
                    }
                }
            }
            RenderState::Failed => {
                if let Some(env) = Envelope::from_record(rec) {
                    out["error"] = env.to_json();
                }
            }
            _ => {}
        }
        out
    }

    /// The `DetailedTask` of a render (or an extension's task) the principal owns, for task
    /// notifications.
    pub(super) fn detailed_any(
        &self,
        principal: &str,
        id: &str,
        elicitation_form: bool,
    ) -> Option<Value> {
        if let Some(owner) = self.shared.extensions.task_owner(id) {
            return owner.get_task(principal, id).ok();
        }
        let rec = self.shared.service.get(principal, id).ok()?;
        Some(self.detailed_task(&rec, elicitation_form))
    }

    /// Resolves a render for a task method: unknown and other principals' ids are the same
    /// `-32602`; an id past its task TTL is `-32602` with the `task_expired` envelope.
    pub(super) fn task_record(&self, principal: &str, id: &str) -> Result<RenderRecord, McpError> {
        let rec = match self.shared.service.get(principal, id) {
            Ok(rec) => rec,
            Err(ServiceError::NotFound) => return Err(invalid_params_unknown_task(id)),
            Err(e) => return Err(internal(e)),
        };
        if self.task_expired(&rec) {
            let env = Envelope::new(
                ErrorCode::TaskExpired,
                format!(
                    "Task state was deleted after its {} TTL; render results remain reachable for {}.",
                    catalog::human_duration(self.shared.lifetimes.task_ttl),
                    catalog::human_duration(self.shared.lifetimes.result_ttl)
                ),
            )
            .field("taskId")
            .value(id)
            .reason(format!(
                "ttlMs elapsed at {}.",
                wire::rfc3339(self.shared.service.task_expires_at(&rec))
            ))
            .repair(default_repair(
                ErrorCode::TaskExpired,
                RepairContext {
                    render_id: Some(id),
                    output_format: Some(rec.args.output_format),
                    ..Default::default()
                },
            ));
            return Err(McpError::new(
                RpcCode::INVALID_PARAMS,
                "Unknown or expired task.",
                Some(env.to_jsonrpc_data()),
            ));
        }
        Ok(rec)
    }
}
