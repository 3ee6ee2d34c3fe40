//! What every MCP method shares: the per-request handler ([`VidforgeMcp`], an `Arc` clone of
//! [`McpShared`]; rmcp builds one per HTTP request) and the request helpers the method modules
//! (`handler.rs`, `tool_calls.rs`, `resources.rs`, `tasks.rs`, `listen.rs`) use: the caller's
//! principal, the JSON-RPC and tool-level error shapes.

use std::sync::Arc;

use rmcp::model::{CallToolResponse, ErrorCode as RpcCode};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};

use vidforge_core::catalog::ErrorCode;
use vidforge_core::error::ServiceError;
use vidforge_core::service::RenderService;
use vidforge_http::auth::Principal;
use vidforge_http::envelope::{Envelope, RepairContext};

use super::extension::Extensions;
use super::presentation::Presenter;
use super::wire;

/// State shared by every per-request handler.
pub struct McpShared {
    pub service: RenderService,
    /// What a binary mounted beside vidforge's own surface (none in production).
    pub extensions: Extensions,
    pub tools: Vec<Value>,
    pub capabilities_summary: Value,
    /// Render records as wire shapes, for the configured lifetimes.
    pub presenter: Presenter,
    /// The MCP App's playback links and CSP origins.
    pub app: super::app::AppSurface,
}

#[derive(Clone)]
pub struct VidforgeMcp {
    pub shared: Arc<McpShared>,
}

pub fn from_json<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, McpError> {
    serde_json::from_value(v)
        .map_err(|e| McpError::internal_error(format!("building a wire value: {e}"), None))
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
        ServiceError::Unavailable { .. } | ServiceError::MediaUnavailable { .. } => {
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
