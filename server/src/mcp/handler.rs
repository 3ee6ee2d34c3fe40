//! The rmcp `ServerHandler`: every MCP method vidforge serves, mapped onto [`RenderService`].
//!
//! rmcp builds one handler per HTTP request, so the handler is an `Arc` clone of shared state.

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
    CompleteRequestParams, CompleteResult, CreateTaskResult, DiscoverResult, ErrorCode as RpcCode,
    GetPromptRequestParams, GetPromptResponse, GetTaskParams, GetTaskResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ServerConfig, SubscriptionFilter, UpdateTaskParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::catalog::{self, ErrorCode};
use crate::error::ServiceError;
use crate::service::RenderService;
use crate::store::{Outcome, OutputFormat, RenderArgs, RenderRecord, RenderState};
use crate::uri;

use super::capabilities::{self, TASKS_EXTENSION};
use super::extension::{Extensions, ListChange, ToolCall};
use super::tools;
use super::wire;
use super::{Principal, RequestedTaskIds};
use crate::envelope::{Envelope, Repair, RepairContext, default_repair};

/// State shared by every per-request handler.
pub struct McpShared {
    pub service: RenderService,
    /// What a binary mounted beside vidforge's own surface (none in production).
    pub extensions: Extensions,
    pub tools: Vec<Value>,
    pub capabilities_summary: Value,
    /// The configured TTLs and approval timeout.
    pub lifetimes: catalog::Lifetimes,
}

#[derive(Clone)]
pub struct VidforgeMcp {
    pub shared: Arc<McpShared>,
}

pub fn from_json<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, McpError> {
    serde_json::from_value(v)
        .map_err(|e| McpError::internal_error(format!("building a wire value: {e}"), None))
}

/// What this request declared in its per-request `_meta` client capabilities.
pub struct Declared {
    pub tasks: bool,
    pub elicitation_form: bool,
    /// The whole declared `clientCapabilities` object (`null` when absent).
    pub caps: Value,
}

fn declared(ctx: &RequestContext<RoleServer>) -> Declared {
    let caps = ctx.client_capabilities();
    let caps_json = caps
        .as_ref()
        .and_then(|c| serde_json::to_value(c).ok())
        .unwrap_or(Value::Null);
    let tasks = caps_json
        .get("extensions")
        .and_then(|e| e.get(TASKS_EXTENSION))
        .is_some();
    // `elicitation: {}` means form only; `{url: {}}` alone means URL mode only.
    let elicitation_form = match caps_json.get("elicitation") {
        Some(Value::Object(e)) => e.contains_key("form") || !e.contains_key("url"),
        _ => false,
    };
    Declared {
        tasks,
        elicitation_form,
        caps: caps_json,
    }
}

fn principal(ctx: &RequestContext<RoleServer>) -> Result<String, McpError> {
    ctx.extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Principal>())
        .map(|p| p.0.clone())
        .ok_or_else(|| McpError::internal_error("request reached MCP without a principal", None))
}

fn invalid_params_unknown_task(id: &str) -> McpError {
    McpError::new(
        RpcCode::INVALID_PARAMS,
        "Unknown or expired task.",
        Some(json!({ "taskId": id })),
    )
}

fn internal(e: impl std::fmt::Display) -> McpError {
    McpError::internal_error(format!("vidforge internal error: {e}"), None)
}

/// Maps a service error to the tool-level envelope, with its default repair.
fn service_envelope(err: &ServiceError, render_id: Option<&str>) -> Envelope {
    let env = Envelope::from_service_error(
        err,
        RepairContext {
            render_id,
            ..Default::default()
        },
    );
    if err.code() == ErrorCode::RenderNotFound {
        env.field("render_id")
    } else {
        env
    }
}

fn tool_error(env: Envelope) -> Result<CallToolResponse, McpError> {
    let result: CallToolResult = from_json(wire::tool_error_result(&env, None))?;
    Ok(CallToolResponse::Complete(result))
}

fn tool_ok(text: String, structured: Value) -> Result<CallToolResponse, McpError> {
    let result: CallToolResult = from_json(json!({
        "resultType": "complete",
        "isError": false,
        "content": [{ "type": "text", "text": text }],
        "structuredContent": structured,
    }))?;
    Ok(CallToolResponse::Complete(result))
}

/// Waits for the next list change, or forever once the channel has closed.
async fn next_list_change(
    rx: &mut Option<tokio::sync::broadcast::Receiver<ListChange>>,
) -> Result<ListChange, tokio::sync::broadcast::error::RecvError> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

impl VidforgeMcp {
    fn task_expired(&self, rec: &RenderRecord) -> bool {
        self.shared.service.task_expired(rec)
    }

    fn result_expires_at(&self, rec: &RenderRecord) -> u64 {
        self.shared.service.result_expires_at(rec)
    }

    /// The principal's newest renders (at most [`super::MAX_LISTED_RENDERS`]).
    fn recent_renders(&self, principal: &str) -> Vec<RenderRecord> {
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
    fn terminal_tool_result(&self, rec: &RenderRecord) -> Option<Value> {
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

    fn progress_text(rec: &RenderRecord) -> String {
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

    fn status_message(&self, rec: &RenderRecord, elicitation_form: bool) -> String {
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
    fn task_fields(&self, rec: &RenderRecord, elicitation_form: bool) -> Value {
        wire::task_fields(
            &rec.id,
            rec.state.task_status(),
            &self.status_message(rec, elicitation_form),
            rec.created_at,
            rec.updated_at,
            self.shared.lifetimes.task_ttl,
        )
    }

    fn detailed_task(&self, rec: &RenderRecord, elicitation_form: bool) -> Value {
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
    fn fallback_status(&self, rec: &RenderRecord) -> Value {
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
    fn detailed_any(&self, principal: &str, id: &str, elicitation_form: bool) -> Option<Value> {
        if let Some(owner) = self.shared.extensions.task_owner(id) {
            return owner.get_task(principal, id).ok();
        }
        let rec = self.shared.service.get(principal, id).ok()?;
        Some(self.detailed_task(&rec, elicitation_form))
    }

    /// Resolves a render for a task method: unknown and other principals' ids are the same
    /// `-32602`; an id past its task TTL is `-32602` with the `task_expired` envelope.
    fn task_record(&self, principal: &str, id: &str) -> Result<RenderRecord, McpError> {
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

    async fn call_render(
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

    fn call_status(
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

    async fn call_approve(
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

    async fn call_cancel(
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

    fn read_capabilities(&self, uri: &str) -> Result<ReadResourceResult, McpError> {
        from_json(json!({
            "resultType": "complete",
            "contents": [{
                "uri": uri,
                "mimeType": "application/json",
                "text": serde_json::to_string_pretty(&self.shared.capabilities_summary).unwrap_or_default(),
            }],
            "ttlMs": catalog::CAPABILITIES_RESOURCE_TTL.as_millis() as u64,
            "cacheScope": "public",
        }))
    }

    fn blob_contents(uri: &str, mime: &str, bytes: &[u8]) -> Result<ReadResourceResult, McpError> {
        use base64::Engine as _;
        from_json(json!({
            "resultType": "complete",
            "contents": [{
                "uri": uri,
                "mimeType": mime,
                "blob": base64::engine::general_purpose::STANDARD.encode(bytes),
            }],
            "ttlMs": 0,
            "cacheScope": "private",
        }))
    }

    fn resource_not_found(uri: &str) -> McpError {
        McpError::new(
            RpcCode::INVALID_PARAMS,
            "Resource not found.",
            Some(json!({ "uri": uri })),
        )
    }

    async fn read_preview(
        &self,
        principal: &str,
        uri: &str,
        id: &str,
    ) -> Result<ReadResourceResult, McpError> {
        let path = match self.shared.service.preview_path(principal, id) {
            Ok((_, p)) => p,
            Err(_) => return Err(Self::resource_not_found(uri)),
        };
        let bytes = tokio::fs::read(&path)
            .await
            .map_err(|_| Self::resource_not_found(uri))?;
        Self::blob_contents(uri, "image/png", &bytes)
    }

    async fn read_video(
        &self,
        principal: &str,
        uri: &str,
        id: &str,
        format: OutputFormat,
    ) -> Result<ReadResourceResult, McpError> {
        let rec = match self.shared.service.get(principal, id) {
            Ok(rec) => rec,
            Err(_) => return Err(Self::resource_not_found(uri)),
        };
        if rec.args.output_format != format {
            return Err(Self::resource_not_found(uri));
        }
        // resolve_result has already stat'ed the file: its size decides inline or download.
        let (rec, path, size) = match self.shared.service.resolve_result(principal, id) {
            Ok(found) => (found.record, found.path, found.size_bytes),
            Err(e) if e.code() == ErrorCode::ResultExpired => {
                let args = rec.repair_arguments();
                let env = Envelope::from_service_error(&e, RepairContext::for_record(&rec, &args))
                    .field("uri")
                    .value(uri);
                return Err(McpError::new(
                    RpcCode::INVALID_PARAMS,
                    "Result expired.",
                    Some(env.to_jsonrpc_data()),
                ));
            }
            Err(_) => return Err(Self::resource_not_found(uri)),
        };
        if size > catalog::MAX_INLINE_RESOURCE_BYTES {
            let env = Envelope::new(
                ErrorCode::ResultTooLargeToInline,
                ErrorCode::ResultTooLargeToInline.description(&self.shared.lifetimes),
            )
            .field("uri")
            .value(uri)
            .detail(
                "download_url",
                json!(self.shared.service.download_url(&rec)),
            )
            .detail("size_bytes", json!(size));
            return Err(McpError::new(
                RpcCode::INVALID_PARAMS,
                "Result too large to inline.",
                Some(env.to_jsonrpc_data()),
            ));
        }
        let bytes = tokio::fs::read(&path).await.map_err(internal)?;
        Self::blob_contents(uri, rec.args.output_format.mime_type(), &bytes)
    }
}

/// The resources `resources/read` serves.
enum ResourceRef<'a> {
    Capabilities,
    Preview(&'a str),
    Video(&'a str, OutputFormat),
}

fn parse_resource_uri(u: &str) -> Option<ResourceRef<'_>> {
    if u == super::CAPABILITIES_URI {
        return Some(ResourceRef::Capabilities);
    }
    if let Some(id) = uri::parse_preview_uri(u) {
        return Some(ResourceRef::Preview(id));
    }
    uri::parse_video_uri(u).map(|(id, format)| ResourceRef::Video(id, format))
}

impl ServerHandler for VidforgeMcp {
    fn get_info(&self) -> ServerConfig {
        let mut caps = json!({
            "tools": { "listChanged": true },
            "resources": {},
            "extensions": { TASKS_EXTENSION: {} }
        });
        for extension in self.shared.extensions.iter() {
            if let (Some(caps), Value::Object(added)) =
                (caps.as_object_mut(), extension.capabilities())
            {
                caps.extend(added);
            }
        }
        let mut config: ServerConfig = serde_json::from_value(json!({
            "protocolVersion": capabilities::PROTOCOL_REVISION,
            "capabilities": caps,
            "serverInfo": { "name": "vidforge", "version": env!("CARGO_PKG_VERSION") },
        }))
        .expect("static server config is valid");
        config.instructions = Some(super::INSTRUCTIONS.to_string());
        config
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Owned(vec![ProtocolVersion::V_2026_07_28])
    }

    async fn discover(&self, _ctx: RequestContext<RoleServer>) -> Result<DiscoverResult, McpError> {
        let mut result = DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        );
        result.ttl_ms = catalog::DISCOVER_TTL.as_millis() as u64;
        result.cache_scope = rmcp::model::CacheScope::Private;
        Ok(result)
    }

    /// Tool definitions for rmcp's `Mcp-Param-*` header validation (SEP-2243).
    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        let extension_tools: Vec<Value> = self
            .shared
            .extensions
            .iter()
            .flat_map(|e| e.tools())
            .collect();
        self.shared
            .tools
            .iter()
            .chain(extension_tools.iter())
            .find(|t| t["name"] == name)
            .and_then(|t| serde_json::from_value(t.clone()).ok())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let mut tools = self.shared.tools.clone();
        let mut ttl_ms = catalog::DISCOVER_TTL.as_millis() as u64;
        for extension in self.shared.extensions.iter() {
            tools.extend(extension.tools());
            if extension.tools_change() {
                ttl_ms = 0;
            }
        }
        from_json(json!({
            "resultType": "complete",
            "tools": tools,
            "ttlMs": ttl_ms,
            "cacheScope": "public",
        }))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let principal = principal(&ctx)?;
        let declared = declared(&ctx);
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        match request.name.as_ref() {
            tools::RENDER_VIDEO => self.call_render(&principal, arguments, &declared).await,
            tools::GET_RENDER_STATUS => self.call_status(&principal, &arguments),
            tools::APPROVE_WATERMARK => self.call_approve(&principal, &arguments).await,
            tools::CANCEL_RENDER => self.call_cancel(&principal, &arguments).await,
            tools::GET_CAPABILITIES => {
                if let Err(env) = super::args::no_arguments(&arguments) {
                    return tool_error(*env);
                }
                tool_ok(
                    "vidforge capability summary (also at vidforge://capabilities).".into(),
                    self.shared.capabilities_summary.clone(),
                )
            }
            other => {
                for extension in self.shared.extensions.iter() {
                    let call = ToolCall {
                        principal: &principal,
                        request: &request,
                        declared: &declared,
                        ctx: &ctx,
                    };
                    if let Some(result) = extension.call_tool(call).await {
                        return result;
                    }
                }
                Err(McpError::new(
                    RpcCode::INVALID_PARAMS,
                    format!("Unknown tool: {other}"),
                    Some(json!({ "name": other, "tools": tools::TOOL_ORDER })),
                ))
            }
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let mut served = false;
        let mut prompts = Vec::new();
        for list in self.shared.extensions.iter().filter_map(|e| e.prompts()) {
            served = true;
            prompts.extend(list);
        }
        if !served {
            return Err(McpError::method_not_found::<
                rmcp::model::ListPromptsRequestMethod,
            >());
        }
        from_json(json!({
            "resultType": "complete",
            "prompts": prompts,
            "ttlMs": 0,
            "cacheScope": "public",
        }))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let mut served = false;
        for extension in self.shared.extensions.iter() {
            served |= extension.prompts().is_some();
            if let Some(answer) = extension.get_prompt(&request) {
                return answer;
            }
        }
        if !served {
            return Err(McpError::method_not_found::<
                rmcp::model::GetPromptRequestMethod,
            >());
        }
        Err(McpError::new(
            RpcCode::INVALID_PARAMS,
            format!("Unknown prompt: {}", request.name),
            None,
        ))
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let reference = serde_json::to_value(&request.r#ref).map_err(internal)?;
        let completion = self
            .shared
            .extensions
            .iter()
            .find_map(|e| e.complete(&reference, &request.argument.name, &request.argument.value))
            .ok_or_else(McpError::method_not_found::<rmcp::model::CompleteRequestMethod>)?;
        from_json(json!({ "resultType": "complete", "completion": completion }))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let principal = principal(&ctx)?;
        let mut resources = vec![json!({
            "uri": super::CAPABILITIES_URI,
            "name": "capabilities",
            "title": "vidforge capability summary",
            "description": "What vidforge does and does not do, error carriers, task semantics, fallbacks and the error catalog.",
            "mimeType": "application/json",
        })];
        for rec in self.recent_renders(&principal) {
            match (&rec.state, &rec.outcome) {
                (
                    RenderState::Succeeded,
                    Some(Outcome::Success {
                        video_file_name,
                        mime_type,
                        size_bytes,
                        resolution,
                        finished_at,
                        ..
                    }),
                ) => {
                    let ext = rec.args.output_format.extension();
                    resources.push(json!({
                        "uri": uri::video_uri(&rec.id, rec.args.output_format),
                        "name": format!("{}-{}", rec.id, video_file_name),
                        "description": format!("Rendered {resolution} {ext}; expires {}.", wire::rfc3339(self.result_expires_at(&rec))),
                        "mimeType": mime_type,
                        "size": size_bytes,
                        "annotations": { "audience": ["user"], "priority": 0.9, "lastModified": wire::rfc3339(*finished_at) }
                    }));
                }
                (RenderState::AwaitingApproval, _) => {
                    resources.push(json!({
                        "uri": uri::preview_uri(&rec.id),
                        "name": format!("{}-watermark-preview.png", rec.id),
                        "description": "Watermark preview awaiting approval.",
                        "mimeType": "image/png",
                        "annotations": { "audience": ["user"], "priority": 1.0 }
                    }));
                }
                _ => {}
            }
        }
        for extension in self.shared.extensions.iter() {
            resources.extend(extension.resources());
        }
        from_json(json!({
            "resultType": "complete",
            "resources": resources,
            "ttlMs": 0,
            "cacheScope": "private",
        }))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let mut templates = vec![
            json!({
                "uriTemplate": "vidforge://videos/{render_id}/final.{ext}",
                "name": "render-result",
                "title": "Rendered video",
                "description": format!("The finished video of a render (ext: mp4, webm or mov); retained {}.", catalog::human_duration(self.shared.lifetimes.result_ttl)),
            }),
            json!({
                "uriTemplate": "vidforge://renders/{render_id}/watermark-preview.png",
                "name": "watermark-preview",
                "title": "Watermark preview",
                "description": "One representative frame at output size with the watermark applied, for approval.",
                "mimeType": "image/png",
            }),
        ];
        for extension in self.shared.extensions.iter() {
            templates.extend(extension.resource_templates());
        }
        from_json(json!({
            "resultType": "complete",
            "resourceTemplates": templates,
            "ttlMs": catalog::DISCOVER_TTL.as_millis() as u64,
            "cacheScope": "public",
        }))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let uri = request.uri.clone();
        let result = match parse_resource_uri(&uri) {
            Some(ResourceRef::Capabilities) => self.read_capabilities(&uri)?,
            Some(ResourceRef::Preview(id)) => {
                let principal = principal(&ctx)?;
                self.read_preview(&principal, &uri, id).await?
            }
            Some(ResourceRef::Video(id, format)) => {
                let principal = principal(&ctx)?;
                self.read_video(&principal, &uri, id, format).await?
            }
            None => match self
                .shared
                .extensions
                .iter()
                .find_map(|e| e.read_resource(&uri))
            {
                Some(contents) => from_json(contents)?,
                None => return Err(Self::resource_not_found(&uri)),
            },
        };
        Ok(ReadResourceResponse::from(result))
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        let principal = principal(&ctx)?;
        let declared = declared(&ctx);
        if let Some(owner) = self.shared.extensions.task_owner(&request.task_id) {
            let mut detailed = owner.get_task(&principal, &request.task_id)?;
            detailed["resultType"] = json!("complete");
            return from_json(detailed);
        }
        let rec = self.task_record(&principal, &request.task_id)?;
        let mut detailed = self.detailed_task(&rec, declared.elicitation_form);
        detailed["resultType"] = json!("complete");
        from_json(detailed)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let principal = principal(&ctx)?;
        let id = request.task_id.clone();
        if let Some(owner) = self.shared.extensions.task_owner(&id) {
            return owner
                .update_task(&principal, &id, &request.input_responses)
                .await;
        }
        let rec = self.task_record(&principal, &id)?;
        let Some(response) = request.input_responses.get(wire::APPROVAL_INPUT_KEY) else {
            // Responses to keys that are not outstanding are ignored.
            return Ok(());
        };
        let decision = match super::args::approval_from_elicitation(response) {
            Ok(Some(decision)) => decision,
            // `cancel`: the user dismissed the form without deciding; keep waiting.
            Ok(None) => return Ok(()),
            Err(env) => {
                return Err(McpError::new(
                    RpcCode::INVALID_PARAMS,
                    env.message.clone(),
                    Some(env.to_jsonrpc_data()),
                ));
            }
        };
        if rec.state != RenderState::AwaitingApproval
            && rec
                .approval
                .as_ref()
                .and_then(|a| a.decision.as_ref())
                .is_none()
        {
            // Nothing outstanding: the response answers no current input request.
            return Ok(());
        }
        match self
            .shared
            .service
            .decide_approval(&principal, &id, decision.0, decision.1)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => {
                let env = service_envelope(&e, Some(&id));
                Err(McpError::new(
                    RpcCode::INVALID_PARAMS,
                    env.message.clone(),
                    Some(env.to_jsonrpc_data()),
                ))
            }
        }
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let principal = principal(&ctx)?;
        if let Some(owner) = self.shared.extensions.task_owner(&request.task_id) {
            return owner.cancel_task(&principal, &request.task_id).await;
        }
        self.task_record(&principal, &request.task_id)?;
        self.shared
            .service
            .cancel(&principal, &request.task_id)
            .await
            .map(|_| ())
            .map_err(internal)
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // rmcp narrows this to what get_info advertises. vidforge's own tools are static, so a
        // tools list-changed subscription fires only when a mounted extension changes its
        // list; task status notifications are handled beside rmcp (see `listen`).
        Some(requested.clone())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let request = context.request_context();
        let task_ids = request
            .extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.extensions.get::<RequestedTaskIds>())
            .map(|ids| ids.0.clone())
            .unwrap_or_default();
        let principal = principal(request)?;
        let declared = declared(request);
        // Subscribe before the snapshot so no change between the two is lost.
        let mut changes = self.shared.service.subscribe();
        let mut list_changes = Some(self.shared.extensions.list_changes.subscribe());
        let peer = request.peer.clone();
        let subscription_id = request.id.clone();
        // The last (status, statusMessage) sent per task: identical repeats are skipped.
        let mut last_sent: std::collections::HashMap<String, (Value, Value)> = Default::default();
        // Each subscribed task's current state first, so a subscriber that arrives while a
        // task already waits for input learns it without a further change.
        let mut pending: Vec<String> = task_ids.clone();
        loop {
            for id in pending.drain(..) {
                // Re-checks ownership every time: another principal's id never fires.
                let Some(detailed) = self.detailed_any(&principal, &id, declared.elicitation_form)
                else {
                    continue;
                };
                let key = (
                    detailed["status"].clone(),
                    detailed["statusMessage"].clone(),
                );
                if last_sent.get(&id) == Some(&key) {
                    continue;
                }
                last_sent.insert(id, key);
                let notification =
                    super::notify::task_status_notification(detailed, &subscription_id)?;
                if peer.send_notification(notification).await.is_err() {
                    return Ok(());
                }
            }
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
                changed = changes.recv(), if !task_ids.is_empty() => match changed {
                    Ok(id) if task_ids.contains(&id) => pending.push(id),
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(_) => return Ok(()),
                },
                change = next_list_change(&mut list_changes) => {
                    let sent = match change {
                        Ok(ListChange::Tools) => context.sink().notify_tool_list_changed().await,
                        Ok(ListChange::Prompts) => context.sink().notify_prompt_list_changed().await,
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => Ok(()),
                        Err(_) => {
                            list_changes = None;
                            Ok(())
                        }
                    };
                    match sent {
                        // Filtered out by what this subscription asked for.
                        Ok(())
                        | Err(rmcp::service::SubscriptionSendError::NotificationNotAccepted(_)) => {}
                        Err(_) => return Ok(()),
                    }
                }
            }
        }
    }
}
