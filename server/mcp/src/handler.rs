//! Dispatch: the rmcp `ServerHandler`, every MCP method vidforge serves, mapped onto
//! [`RenderService`] and the sibling modules (`presentation`, `tool_calls`, `resources`,
//! `tasks`, `listen`), plus the request helpers they share.
//!
//! rmcp builds one handler per HTTP request, so the handler is an `Arc` clone of shared state.

use std::borrow::Cow;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CompleteRequestParams,
    CompleteResult, DiscoverResult, ErrorCode as RpcCode, GetPromptRequestParams,
    GetPromptResponse, GetTaskParams, GetTaskResult, InitializeRequestParams, InitializeResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
    ServerConfig, SubscriptionFilter, UpdateTaskParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};

use vidforge_core::catalog::{self};
use vidforge_core::store::{Outcome, RenderState};
use vidforge_core::uri;

use super::app;
use super::capabilities::{self, TASKS_EXTENSION};
use super::declared::declared;
use super::extension::ToolCall;
use super::request::*;
use super::resources::{ResourceRef, parse_resource_uri};
use super::tools;
use super::wire;

impl ServerHandler for VidforgeMcp {
    fn get_info(&self) -> ServerConfig {
        let mut caps = json!({
            "tools": { "listChanged": true },
            "resources": {},
            "extensions": { TASKS_EXTENSION: {}, app::EXTENSION: app::capability() }
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

    /// A legacy-era client's handshake (`legacy.rs` has refused unserved revisions already):
    /// the revision it asked for, without the tasks extension (undefined before 2026-07-28).
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        let requested = request.protocol_version.as_str().to_owned();
        if !super::legacy::serves(&requested) {
            return Err(McpError::new(
                RpcCode::INVALID_PARAMS,
                "Unsupported protocol version",
                Some(
                    json!({ "supported": capabilities::LEGACY_REVISIONS, "requested": super::legacy::echo_requested(&json!(requested)) }),
                ),
            ));
        }
        ctx.peer.set_peer_info(request.clone());
        let mut info = serde_json::to_value(self.get_info()).map_err(internal)?;
        info["protocolVersion"] = json!(requested);
        info["instructions"] = json!(super::LEGACY_INSTRUCTIONS);
        // Of the extensions, only MCP Apps is defined before 2026-07-28: answered to a client
        // that declared it.
        let declares_ui =
            serde_json::to_value(&request.capabilities).is_ok_and(|caps| app::declares_ui(&caps));
        if let Some(caps) = info["capabilities"].as_object_mut() {
            caps.remove("extensions");
            if declares_ui {
                caps.insert(
                    "extensions".into(),
                    json!({ app::EXTENSION: app::capability() }),
                );
            }
        }
        from_json(info)
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
            .chain(app::app_tools(self.shared.presenter.lifetimes()).iter())
            .find(|t| t["name"] == name)
            .and_then(|t| serde_json::from_value(t.clone()).ok())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let mut tools = self.shared.tools.clone();
        if app::declares_ui(&declared(&ctx).caps) {
            app::with_ui(&mut tools, self.shared.presenter.lifetimes());
        }
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
            name if app::is_app_tool(name) && app::declares_ui(&declared.caps) => {
                self.call_app_tool(name, &principal, &arguments).await
            }
            tools::GET_CAPABILITIES => {
                if let Err(env) =
                    super::args::fallback_input::<super::inputs::NoArguments>(&arguments)
                {
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
        if app::declares_ui(&declared(&ctx).caps) {
            resources.push(app::listing());
        }
        for rec in self.recent_renders(&principal)? {
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
            None if uri == app::VIEW_URI => from_json(self.shared.app.read_view())?,
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
