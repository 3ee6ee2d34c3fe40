//! Dispatch: the rmcp `ServerHandler`, every MCP method vidforge serves, mapped onto
//! [`RenderService`] and the sibling modules (`presentation`, `tool_calls`, `resources`,
//! `tasks`, `listen`), plus the request helpers they share.
//!
//! rmcp builds one handler per HTTP request, so the handler is an `Arc` clone of shared state.

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CompleteRequestParams,
    CompleteResult, DiscoverResult, ErrorCode as RpcCode, GetPromptRequestParams,
    GetPromptResponse, GetTaskParams, GetTaskResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ServerConfig,
    SubscriptionFilter, UpdateTaskParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};

use vidforge_core::catalog::{self, ErrorCode};
use vidforge_core::error::ServiceError;
use vidforge_core::service::RenderService;
use vidforge_core::store::{Outcome, RenderState};
use vidforge_core::uri;

use super::Principal;
use super::capabilities::{self, TASKS_EXTENSION};
use super::extension::{Extensions, ToolCall};
use super::presentation::Presenter;
use super::resources::{ResourceRef, parse_resource_uri};
use super::tools;
use super::wire;
use vidforge_http::envelope::{Envelope, RepairContext};

/// State shared by every per-request handler.
pub struct McpShared {
    pub service: RenderService,
    /// What a binary mounted beside vidforge's own surface (none in production).
    pub extensions: Extensions,
    pub tools: Vec<Value>,
    pub capabilities_summary: Value,
    /// Render records as wire shapes, for the configured lifetimes.
    pub presenter: Presenter,
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
    pub elicitation_url: bool,
    /// The whole declared `clientCapabilities` object (`null` when absent).
    pub caps: Value,
}

pub(super) fn declared(ctx: &RequestContext<RoleServer>) -> Declared {
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
    let (elicitation_form, elicitation_url) = match caps_json.get("elicitation") {
        Some(Value::Object(e)) => (
            e.contains_key("form") || !e.contains_key("url"),
            e.contains_key("url"),
        ),
        _ => (false, false),
    };
    Declared {
        tasks,
        elicitation_form,
        elicitation_url,
        caps: caps_json,
    }
}

impl Declared {
    /// The declared elicitation modes.
    pub fn elicitation(&self) -> super::presentation::Elicitation {
        super::presentation::Elicitation {
            form: self.elicitation_form,
            url: self.elicitation_url,
        }
    }
}

pub(super) fn principal(ctx: &RequestContext<RoleServer>) -> Result<String, McpError> {
    ctx.extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Principal>())
        .map(|p| p.0.clone())
        .ok_or_else(|| McpError::internal_error("request reached MCP without a principal", None))
}

pub(super) fn invalid_params_unknown_task(id: &str) -> McpError {
    McpError::new(
        RpcCode::INVALID_PARAMS,
        "Unknown or expired task.",
        Some(json!({ "taskId": id })),
    )
}

pub(super) fn internal(e: impl std::fmt::Display) -> McpError {
    McpError::internal_error(format!("vidforge internal error: {e}"), None)
}

/// A service fault on a JSON-RPC method (`tasks/*`): `-32603`; when the task store is only
/// unreachable for now, with the §6 envelope in `data` (`temporary`, `retry_after_ms`), so a
/// client knows to retry.
pub(super) fn service_fault(e: ServiceError) -> McpError {
    match e {
        ServiceError::Unavailable { .. } => {
            let env = Envelope::from_service_error(&e, Default::default());
            McpError::internal_error(e.to_string(), Some(env.to_jsonrpc_data()))
        }
        other => internal(other),
    }
}

/// Maps a service error to the tool-level envelope, with its default repair.
pub(super) fn service_envelope(err: &ServiceError, render_id: Option<&str>) -> Envelope {
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

pub(super) fn tool_error(env: Envelope) -> Result<CallToolResponse, McpError> {
    Ok(CallToolResponse::Complete(wire::tool_error_result(
        &env, None,
    )))
}

pub(super) fn tool_ok(text: String, structured: Value) -> Result<CallToolResponse, McpError> {
    Ok(CallToolResponse::Complete(wire::tool_ok_result(
        text, structured,
    )))
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
                        "description": format!("Rendered {resolution} {ext}; expires {}.", wire::rfc3339(self.shared.presenter.result_expires_at(&rec))),
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
                "description": format!("The finished video of a render (ext: mp4, webm or mov); retained {}.", catalog::human_duration(self.shared.presenter.lifetimes().result_ttl)),
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
        self.task_get(request, ctx).await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.task_update(request, ctx).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.task_cancel(request, ctx).await
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
        self.run_listen(context).await
    }
}
