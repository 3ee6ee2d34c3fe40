//! Presentation: a render record as the MCP wire shapes, for the tool calls, `tasks/*` and
//! `listen`. Typed: rmcp's [`Task`], [`DetailedTask`] and [`CallToolResult`], and our own
//! serde structs for the shapes rmcp does not know (the structured results, the fallback
//! status), so a wrong shape is a compile error, not a run-time `from_json` failure.
//!
//! Pure: a [`Presenter`] holds what the shapes need beside the record (the configured
//! [`Lifetimes`] and the public base URL) and nothing else; it reads no clock and no store.
//! The store knows no MCP names: the task status of a [`RenderState`] is mapped here
//! ([`task_status`]).

use rmcp::model::{
    Annotations, CallToolResult, ContentBlock, DetailedTask, JsonObject, MetaObject, Resource,
    Role, Task, TaskPayload, TaskStatus,
};
use serde::Serialize;
use serde_json::Value;

use vidforge_core::catalog::{self, ErrorCode, Lifetimes};
use vidforge_core::store::{Outcome, RenderRecord, RenderState};
use vidforge_core::uri;
use vidforge_http::envelope::{Envelope, RepairContext, default_repair};

use super::tools;
use super::wire;

/// `_meta` key of a result link's HTTP download URL.
pub const DOWNLOAD_URL_META: &str = "com.vidforge/download_url";

/// The native task `status` of a render: tool-level failures are `completed` (delivery, not
/// success); `failed` is for JSON-RPC faults and never comes from a render record.
pub fn task_status(state: RenderState) -> TaskStatus {
    match state {
        RenderState::Queued | RenderState::Rendering | RenderState::Previewing => {
            TaskStatus::Working
        }
        RenderState::AwaitingApproval => TaskStatus::InputRequired,
        RenderState::Succeeded | RenderState::Failed => TaskStatus::Completed,
        RenderState::Cancelled => TaskStatus::Cancelled,
    }
}

/// The result fields of a succeeded render, shared by its `structuredContent` and the
/// fallback status.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResultFields {
    pub video_uri: String,
    pub duration_seconds: f64,
    pub size_bytes: u64,
    pub resolution: String,
    pub watermark_applied: bool,
    /// How faithful the video is ([`quality_wire`]): only when the render measured it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quality: Option<Value>,
}

/// `structuredContent` of a succeeded render's tool result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CompletedResult {
    /// Always `completed`.
    pub status: &'static str,
    #[serde(flatten)]
    pub fields: ResultFields,
    pub expires_at: String,
}

/// The text summary of a succeeded render (the first content block, as JSON text).
#[derive(Serialize)]
struct CompletedSummary<'a> {
    status: &'static str,
    video_uri: &'a str,
    duration_seconds: f64,
    size_bytes: u64,
}

/// A `follow_up`: the tool call that is the natural next step, callable as-is.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FollowUp {
    pub next_step: &'static str,
    pub tool: &'static str,
    pub arguments: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alternative: Option<&'static str>,
}

/// `vidforge_get_render_status` output (its `outputSchema` is in [`tools`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FallbackStatus {
    pub render_id: String,
    pub state: &'static str,
    pub terminal: bool,
    pub poll_after_ms: u64,
    pub status_message: String,
    pub expires_at: String,
    pub terminal_states: &'static [&'static str],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watermark_preview_uri: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub follow_up: Option<FollowUp>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub result: Option<ResultFields>,
    /// On `failed`: the whole §6 envelope.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
}

/// `structuredContent` of the fallback render call's `accepted` answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Accepted {
    /// Always `accepted`.
    pub status: &'static str,
    pub render_id: String,
    pub state: &'static str,
    pub poll_after_ms: u64,
    pub expires_at: String,
    pub follow_up: FollowUp,
}

/// The elicitation modes a request declared (`clientCapabilities.elicitation`): input
/// requests are offered only in these.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Elicitation {
    pub form: bool,
    pub url: bool,
}

impl Elicitation {
    /// Neither mode (no elicitation declared).
    pub const NONE: Elicitation = Elicitation {
        form: false,
        url: false,
    };
}

/// Builds the wire shapes of render records for one deployment.
#[derive(Clone, Debug)]
pub struct Presenter {
    lifetimes: Lifetimes,
    base_url: String,
}

impl Presenter {
    /// `lifetimes` as configured; `base_url` is where the HTTP routes answer
    /// (`Config::base_url`).
    pub fn new(lifetimes: Lifetimes, base_url: impl Into<String>) -> Self {
        Presenter {
            lifetimes,
            base_url: base_url.into(),
        }
    }

    /// The configured lifetimes.
    pub fn lifetimes(&self) -> &Lifetimes {
        &self.lifetimes
    }

    /// Unix ms when the result and the status of `rec` expire.
    pub fn result_expires_at(&self, rec: &RenderRecord) -> u64 {
        rec.result_expires_at(self.lifetimes.result_ttl)
    }

    /// The approval page of a render ([`uri::approval_url`]).
    pub fn approval_url(&self, id: &str) -> String {
        uri::approval_url(&self.base_url, id)
    }

    /// The HTTP download URL of a render's video.
    pub fn download_url(&self, rec: &RenderRecord) -> String {
        uri::download_url(&self.base_url, &rec.id, rec.args.output_format)
    }

    /// The HTTP link of a render's watermark preview.
    pub fn preview_url(&self, id: &str) -> String {
        format!("{}{}", self.base_url, uri::preview_http_path(id))
    }

    /// The inline `CallToolResult` of a terminal-success or tool-error render (`None` before
    /// that, and for cancelled renders).
    pub fn terminal_tool_result(&self, rec: &RenderRecord) -> Option<CallToolResult> {
        match rec.outcome.as_ref()? {
            Outcome::Success {
                video_file_name,
                mime_type,
                finished_at,
                quality,
                ..
            } => {
                let fields = result_fields(rec)?;
                let summary = to_json_text(&CompletedSummary {
                    status: "completed",
                    video_uri: &fields.video_uri,
                    duration_seconds: fields.duration_seconds,
                    size_bytes: fields.size_bytes,
                });
                let wm = if fields.watermark_applied {
                    "with approved watermark"
                } else {
                    "without watermark"
                };
                let mut meta = JsonObject::new();
                meta.insert(DOWNLOAD_URL_META.into(), self.download_url(rec).into());
                let mut link = Resource::new(fields.video_uri.clone(), video_file_name.clone());
                link.description = Some(format!(
                    "Rendered {} {} {wm}{}; retained {}.",
                    fields.resolution,
                    rec.args.output_format.extension(),
                    notes::quality_note(quality.as_deref()),
                    catalog::human_duration(self.lifetimes.result_ttl)
                ));
                link.mime_type = Some(mime_type.clone());
                link.size = Some(fields.size_bytes);
                link.meta = Some(MetaObject(meta));
                let mut annotations = Annotations::default()
                    .with_audience(vec![Role::User])
                    .with_priority(0.9);
                annotations.last_modified = Some(wire::rfc3339(*finished_at));
                link.annotations = Some(annotations);
                let structured = CompletedResult {
                    status: "completed",
                    fields,
                    expires_at: wire::rfc3339(self.result_expires_at(rec)),
                };
                let mut result = CallToolResult::success(vec![
                    ContentBlock::text(summary),
                    ContentBlock::resource_link(link),
                ]);
                result.structured_content = Some(to_value(&structured));
                Some(result)
            }
            Outcome::Error { .. } => {
                let env = Envelope::from_record(rec)?;
                let text = match env.code {
                    ErrorCode::WatermarkRejected => format!(
                        "User rejected the watermark{}. Adjust `watermark` and re-call {}.",
                        env.details
                            .get("reason")
                            .and_then(Value::as_str)
                            .map(|r| format!(" ({r})"))
                            .unwrap_or_default(),
                        tools::RENDER_VIDEO
                    ),
                    _ => format!("Render ended with {}: {}", env.code, env.message),
                };
                Some(wire::tool_error_result(&env, Some(text)))
            }
        }
    }

    /// The status message of a rendering render: stage, percentage and frame.
    pub fn progress_text(rec: &RenderRecord) -> String {
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

    /// The task's `statusMessage`; while awaiting approval it says how to decide: with form
    /// elicitation declared the form does; otherwise it names the approval page (unless the
    /// URL-mode request offers it) and, without form, the approval tool.
    pub fn status_message(&self, rec: &RenderRecord, modes: Elicitation) -> String {
        match rec.state {
            RenderState::Queued => "Render queued; encoding starts shortly.".into(),
            RenderState::Previewing => "Preparing the watermark preview.".into(),
            RenderState::Rendering => Self::progress_text(rec) + &hdr_note(rec),
            RenderState::AwaitingApproval => {
                let timeout = catalog::human_duration(self.lifetimes.approval_timeout);
                let base = format!(
                    "Waiting for user approval of the watermark preview at {}. Unanswered approvals time out after {timeout}.",
                    uri::preview_uri(&rec.id)
                );
                match modes {
                    Elicitation { form: true, .. } => base,
                    Elicitation { url: true, .. } => format!(
                        "{base} Open {} to approve or reject it in a browser.",
                        self.approval_url(&rec.id)
                    ),
                    Elicitation::NONE => format!(
                        "{base} Approve or reject it in a browser at {}, or call `{}` with {{render_id: '{}', approved: true|false}}.",
                        self.approval_url(&rec.id),
                        tools::APPROVE_WATERMARK,
                        rec.id
                    ),
                }
            }
            RenderState::Succeeded => format!(
                "Render completed.{}{}",
                hdr_note(rec),
                notes::quality_sentence(rec)
            ),
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
    pub fn task(&self, rec: &RenderRecord, modes: Elicitation) -> Task {
        wire::task(
            &rec.id,
            task_status(rec.state),
            self.status_message(rec, modes),
            rec.created_at,
            rec.updated_at,
            self.lifetimes.task_ttl,
        )
    }

    /// The `DetailedTask` of a render: the watermark approval requests (only in the modes
    /// the request declared: the form, and the approval page in URL mode; none without
    /// elicitation), or the terminal tool result.
    pub fn detailed_task(&self, rec: &RenderRecord, modes: Elicitation) -> DetailedTask {
        let task = self.task(rec, modes);
        let payload = match task.status {
            TaskStatus::InputRequired => {
                let input_requests = match &rec.args.watermark {
                    Some(wm) => wire::approval_input_requests(
                        &rec.id,
                        wm.position.as_str(),
                        wm.opacity,
                        modes.form,
                        modes.url.then(|| self.approval_url(&rec.id)).as_deref(),
                    ),
                    None => Default::default(),
                };
                TaskPayload::InputRequired { input_requests }
            }
            TaskStatus::Completed => TaskPayload::Completed {
                result: self
                    .terminal_tool_result(rec)
                    .map(|r| result_object(&r))
                    .unwrap_or_default(),
            },
            TaskStatus::Cancelled => TaskPayload::Cancelled,
            _ => TaskPayload::Working,
        };
        DetailedTask::new(task, payload)
    }

    /// `vidforge_get_render_status` output.
    pub fn fallback_status(&self, rec: &RenderRecord) -> FallbackStatus {
        let terminal = rec.is_terminal();
        let poll_after = match rec.state {
            RenderState::AwaitingApproval => catalog::POLL_AFTER_AWAITING_FALLBACK,
            _ if terminal => std::time::Duration::ZERO,
            _ => catalog::POLL_INTERVAL_WORKING,
        };
        let mut out = FallbackStatus {
            render_id: rec.id.clone(),
            state: rec.state.public_name(),
            terminal,
            poll_after_ms: poll_after.as_millis() as u64,
            status_message: self.status_message(rec, Elicitation::NONE),
            expires_at: wire::rfc3339(self.result_expires_at(rec)),
            terminal_states: &tools::TERMINAL_FALLBACK_STATES,
            progress: rec
                .progress
                .as_ref()
                .and_then(|p| p.fraction())
                .or(terminal.then_some(1.0)),
            watermark_preview_uri: None,
            follow_up: None,
            result: None,
            error: None,
        };
        match rec.state {
            RenderState::AwaitingApproval => {
                let deadline = rec
                    .approval
                    .as_ref()
                    .map(|a| a.deadline)
                    .unwrap_or(rec.updated_at);
                out.status_message = format!(
                    "Waiting for watermark approval; times out {}.",
                    wire::rfc3339(deadline)
                );
                out.watermark_preview_uri = Some(uri::preview_uri(&rec.id));
                out.follow_up = Some(FollowUp {
                    next_step: "approve_watermark",
                    tool: tools::APPROVE_WATERMARK,
                    arguments: serde_json::json!({ "render_id": rec.id, "approved": true }),
                    alternative: Some(
                        "Pass approved: false with a `note` to reject; rejection ends the render.",
                    ),
                });
            }
            RenderState::Succeeded => out.result = result_fields(rec),
            RenderState::Failed => out.error = Envelope::from_record(rec).map(|e| e.to_json()),
            _ => {}
        }
        out
    }

    /// The fallback render call's answer while the render runs.
    pub fn accepted(&self, rec: &RenderRecord) -> Accepted {
        Accepted {
            status: "accepted",
            render_id: rec.id.clone(),
            state: rec.state.public_name(),
            poll_after_ms: catalog::POLL_INTERVAL_WORKING.as_millis() as u64,
            expires_at: wire::rfc3339(self.result_expires_at(rec)),
            follow_up: FollowUp {
                next_step: "poll_render_status",
                tool: tools::GET_RENDER_STATUS,
                arguments: serde_json::json!({ "render_id": rec.id }),
                alternative: None,
            },
        }
    }

    /// The `task_expired` envelope of a render whose task TTL has passed (`expired_at`: Unix
    /// ms when it did).
    pub fn task_expired(&self, rec: &RenderRecord, expired_at: u64) -> Envelope {
        Envelope::new(
            ErrorCode::TaskExpired,
            format!(
                "Task state was deleted after its {} TTL; render results remain reachable for {}.",
                catalog::human_duration(self.lifetimes.task_ttl),
                catalog::human_duration(self.lifetimes.result_ttl)
            ),
        )
        .field("taskId")
        .value(&rec.id)
        .reason(format!("ttlMs elapsed at {}.", wire::rfc3339(expired_at)))
        .repair(default_repair(
            ErrorCode::TaskExpired,
            RepairContext {
                render_id: Some(&rec.id),
                output_format: Some(rec.args.output_format),
                ..Default::default()
            },
        ))
    }
}

/// The result fields of a succeeded render (`None` otherwise).
fn result_fields(rec: &RenderRecord) -> Option<ResultFields> {
    match rec.outcome.as_ref()? {
        Outcome::Success {
            size_bytes,
            duration_seconds,
            resolution,
            watermark_applied,
            quality,
            ..
        } => Some(ResultFields {
            video_uri: uri::video_uri(&rec.id, rec.args.output_format),
            duration_seconds: *duration_seconds,
            size_bytes: *size_bytes,
            resolution: resolution.clone(),
            watermark_applied: *watermark_applied,
            quality: quality.as_deref().map(quality_wire),
        }),
        Outcome::Error { .. } => None,
    }
}

/// A wire shape as a JSON value. Through the JSON text, so that `f32` fields (annotation
/// priorities) read as written (`0.9`), not widened (`0.8999999761581421`).
pub fn to_value<T: Serialize>(v: &T) -> Value {
    serde_json::to_string(v)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(Value::Null)
}

/// A tool result as the JSON object a task's `result` carries.
fn result_object(result: &CallToolResult) -> JsonObject {
    match to_value(result) {
        Value::Object(map) => map,
        _ => JsonObject::default(),
    }
}

fn to_json_text<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

mod notes;
use notes::hdr_note;
mod quality;
#[cfg(test)]
mod tests;
pub use quality::quality_wire;
