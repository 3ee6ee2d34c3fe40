//! The MCP front: vidforge's contract over MCP 2026-07-28 streamable HTTP at `/mcp`, and the
//! `initialize`-based revisions (2024-11-05 … 2025-11-25) on the same endpoint ([`legacy`]).
//!
//! rmcp 3.11 (`StreamableHttpService`: stateless for modern requests, its legacy session mode
//! for `initialize`-based clients) does the protocol plumbing: JSON-RPC
//! framing, `MCP-Protocol-Version` / `Mcp-Method` / `Mcp-Name` checks, `_meta` validation,
//! the tasks-extension gate and SSE. Host and Origin are checked before any of it by the one
//! request policy every route shares ([`vidforge_http::policy`], applied in
//! `vidforge::app::router_with`); rmcp's own copy of that check is switched off so `/mcp`
//! cannot decide differently from the other routes. Two thin axum layers around rmcp
//! supply what rmcp 3.11 lacks (ARCHITECTURE.md lists each gap):
//! - `taskIds` on `subscriptions/listen` (dropped by rmcp's `SubscriptionFilter`): read here,
//!   carried to the handler in request extensions, and echoed in the acknowledgement;
//! - `io.modelcontextprotocol/serverInfo` on every result's `_meta` (rmcp adds it only to
//!   `server/discover`).

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use http_body_util::BodyExt;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};

use vidforge_core::config::Config;
use vidforge_core::service::RenderService;
use vidforge_http::scope::{Need, Scopes};

pub mod app;
mod args;
pub mod capabilities;
mod declared;
pub mod discovery;
pub mod extension;
mod handler;
pub mod inputs;
pub mod jsonrpc;
pub mod legacy;
pub mod legacy_streams;
mod listen;
mod notify;
pub mod presentation;
mod request;
mod resources;
mod tasks;
mod tool_calls;
pub mod tools;
pub mod wire;

pub use extension::{ExtensionHost, ExtensionSpec, Extensions, McpExtension};
pub use request::{McpShared, VidforgeMcp, from_json};
pub use vidforge_http::auth::Principal;

pub const CAPABILITIES_URI: &str = "vidforge://capabilities";
/// [`INSTRUCTIONS`] for a legacy-era session, where the tasks extension does not exist.
pub const LEGACY_INSTRUCTIONS: &str = "vidforge renders uploaded video assets (vidforge://assets/…) to mp4/webm/mov at 720p, 1080p or 4k, optionally with a watermark that a human approves from a preview. Renders are long: vidforge_render_video answers status 'accepted' with a render_id; poll vidforge_get_render_status, approve the watermark with vidforge_approve_watermark (or on the approval page it names), cancel with vidforge_cancel_render. A finished render's result links to vidforge://videos/{render_id}/final.{ext} (resources/read, or the HTTP link). Read vidforge://capabilities for the full summary.";
/// `resources/list` lists at most this many of the principal's newest renders.
pub const MAX_LISTED_RENDERS: usize = 100;
/// Largest `/mcp` request body accepted.
pub const MAX_MCP_BODY_BYTES: usize = 4 * 1024 * 1024;

pub const INSTRUCTIONS: &str = "vidforge renders uploaded video assets (vidforge://assets/…) to mp4/webm/mov at 720p, 1080p or 4k, optionally with a watermark that a human approves from a preview. Renders are long: declare the io.modelcontextprotocol/tasks extension to get a task (poll tasks/get), or poll vidforge_get_render_status. A completed task is delivery, not success: always check result.isError. Read vidforge://capabilities for the full summary.";

/// Task ids a `subscriptions/listen` request asked for (carried beside rmcp, see module docs).
#[derive(Clone, Debug)]
pub struct RequestedTaskIds(pub Vec<String>);

/// The `/mcp` router: bearer auth, then vidforge's wire layer, then rmcp's streamable HTTP
/// service. `extensions` are served beside vidforge's own tools (none in production).
///
/// It has no Host/Origin check of its own: serve it only through
/// `vidforge::app::router_with`, which puts every route behind [`vidforge_http::policy`].
pub fn router(
    service: RenderService,
    config: &Config,
    extensions: Extensions,
    auth: vidforge_http::auth::Auth,
) -> axum::Router {
    let lifetimes = config.lifetimes();
    let shared = Arc::new(McpShared {
        capabilities_summary: capabilities::summary(
            &lifetimes,
            &service.hardware(),
            capabilities::authorization(&auth),
        ),
        tools: tools::tool_definitions(&lifetimes),
        presenter: presentation::Presenter::new(lifetimes, config.base_url()),
        extensions,
        app: app::AppSurface::new(&service, config),
        service,
    });
    let discovery = discovery::router(&shared, config, &auth);
    let legacy = legacy::LegacySessions::new(legacy::Limits {
        idle_timeout: config.legacy_session_idle_timeout,
        max_sessions: config.max_legacy_sessions,
        max_per_principal: config.max_legacy_sessions_per_principal,
        streams: legacy_streams::StreamLimits::for_connections(config.max_connections),
    });
    // Host and Origin: decided by vidforge_http::policy for every route (this one included), from
    // the one list RequestPolicy::from_config builds; rmcp's duplicate check stays off. Modern
    // requests are served statelessly whatever legacy_session_mode says (rmcp classifies by
    // body); `initialize` opens a legacy session.
    let mcp_config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(true)
        .with_json_response(true)
        .with_stateless_protocol_metadata_required(true)
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_sse_keep_alive(Some(vidforge_http::connections::sse_keep_alive(
            config.idle_timeout,
        )))
        .with_max_request_body_bytes(MAX_MCP_BODY_BYTES);
    let mcp = StreamableHttpService::new(
        move || {
            Ok(VidforgeMcp {
                shared: shared.clone(),
            })
        },
        legacy.manager(),
        mcp_config,
    );
    let wire = Arc::new(Wire {
        sessions: legacy,
        auth: auth.clone(),
    });
    axum::Router::new()
        .route_service("/mcp", mcp)
        .layer(axum::middleware::from_fn_with_state(wire, wire_layer))
        .layer(axum::middleware::from_fn_with_state(
            auth,
            vidforge_http::auth::require_auth,
        ))
        .merge(discovery)
}

fn server_info() -> Value {
    json!({ "name": "vidforge", "version": env!("CARGO_PKG_VERSION") })
}

fn rpc_error_response(
    status: StatusCode,
    id: Value,
    code: rmcp::model::ErrorCode,
    message: &str,
    data: Value,
) -> Response {
    legacy::rpc_error(status, id, code, message, data, None)
}

fn declares_tasks(request: &Value) -> bool {
    request["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]["extensions"]
        .get(capabilities::TASKS_EXTENSION)
        .is_some()
}

fn session_id(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get(legacy::SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

fn caller(request: &Request) -> String {
    request
        .extensions()
        .get::<Principal>()
        .map(|p| p.0.clone())
        .unwrap_or_default()
}

/// What the wire layer needs: the legacy sessions, and the authenticator (for its scope
/// challenges).
struct Wire {
    sessions: legacy::LegacySessions,
    auth: vidforge_http::auth::Auth,
}

/// The scope a JSON-RPC request needs: creating, approving or cancelling a render (by tool or
/// by the tasks methods) needs `vidforge:render`; everything else reads.
fn needed_scope(message: &Value) -> Need {
    let changes = match message["method"].as_str() {
        Some("tools/call") => matches!(
            message["params"]["name"].as_str(),
            Some(tools::RENDER_VIDEO | tools::APPROVE_WATERMARK | tools::CANCEL_RENDER)
        ),
        Some("tasks/update" | "tasks/cancel") => true,
        _ => false,
    };
    if changes { Need::Render } else { Need::Read }
}

/// In front of rmcp: the scope the JSON-RPC method needs, legacy-session admission
/// ([`legacy`]), `taskIds` off `subscriptions/listen`, and on the way out `serverInfo` on
/// modern results and a JSON-RPC body on every refusal.
async fn wire_layer(State(wire): State<Arc<Wire>>, request: Request, next: Next) -> Response {
    let sessions = &wire.sessions;
    let principal = caller(&request);
    let scopes = request.extensions().get::<Scopes>().copied();
    if request.method() != Method::POST {
        // GET (the legacy server-message stream) and DELETE (end a legacy session) need a
        // session; without one they are 405 as on a modern-only server (nothing to stream).
        let session = session_id(request.headers());
        if session.is_none() {
            let mut refusal = rpc_error_response(
                StatusCode::METHOD_NOT_ALLOWED,
                Value::Null,
                rmcp::model::ErrorCode::INVALID_REQUEST,
                "Method Not Allowed: POST requests to /mcp; GET and DELETE only name a legacy session (Mcp-Session-Id).",
                json!({}),
            );
            refusal
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST"));
            return refusal;
        }
        if let Some(session) = &session
            && legacy::is_legacy(&Value::Null, request.headers())
            && let legacy::Admission::Refuse(refusal) =
                sessions.admit(session, &principal, Value::Null).await
        {
            return refusal;
        }
        let is_delete = request.method() == Method::DELETE;
        // A GET is the session's server-message stream: one per session, bounded per
        // principal and per node, ended with its session (`legacy_streams`).
        let stream = match (&session, request.method() == Method::GET) {
            (Some(session), true) => match sessions.open_stream(session, &principal) {
                Ok(stream) => Some(stream),
                Err(refused) => return refused.into_response(),
            },
            _ => None,
        };
        let mut response = next.run(request).await;
        if let Some(stream) = stream
            && response.status().is_success()
        {
            return stream.attach(response, sessions.manager());
        }
        if is_delete
            && response.status().is_success()
            && let Some(session) = session
        {
            sessions.ended(&session);
            // rmcp answers 202; the SDKs' clients expect 200 or 204 for an ended session (the
            // Python SDK 1.x logs "Session termination failed: 202"), and the TypeScript
            // SDK's own server answers 200.
            *response.status_mut() = StatusCode::OK;
        }
        return json_rpc_refusal(response, Value::Null).await;
    }
    let (mut parts, body) = request.into_parts();
    let bytes = match http_body_util::Limited::new(body, MAX_MCP_BODY_BYTES)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(e) if vidforge_http::connections::is_body_timeout(&*e) => {
            return rpc_error_response(
                StatusCode::REQUEST_TIMEOUT,
                Value::Null,
                rmcp::model::ErrorCode::INVALID_REQUEST,
                "The request body stalled and was abandoned.",
                json!({}),
            );
        }
        Err(_) => {
            return rpc_error_response(
                StatusCode::PAYLOAD_TOO_LARGE,
                Value::Null,
                rmcp::model::ErrorCode::INVALID_REQUEST,
                "Request body too large.",
                json!({ "max_bytes": MAX_MCP_BODY_BYTES }),
            );
        }
    };
    let message = match jsonrpc::check(&bytes) {
        Ok(message) => message,
        Err(refusal) => {
            return rpc_error_response(
                StatusCode::BAD_REQUEST,
                refusal.id,
                refusal.code,
                &refusal.message,
                refusal.data,
            );
        }
    };
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let need = needed_scope(&message);
    if scopes.is_some_and(|s| !s.allow(need)) {
        // 403 with the step-up challenge; the body a JSON-RPC error carrying the envelope.
        let challenge = wire.auth.insufficient_scope(need);
        let mut refusal = rpc_error_response(
            StatusCode::FORBIDDEN,
            id,
            rmcp::model::ErrorCode::INVALID_REQUEST,
            "Insufficient scope",
            json!({ "code": "insufficient_scope", "required_scope": need.scopes() }),
        );
        if let Some(h) = challenge.headers().get(header::WWW_AUTHENTICATE) {
            refusal
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, h.clone());
        }
        return refusal;
    }
    let is_legacy = legacy::is_legacy(&message, &parts.headers);
    if !is_legacy && message["method"] == "initialize" {
        // A 2026-07-28 request for `initialize`, a method that revision removed (rmcp would
        // take any `initialize` for a legacy handshake).
        return rpc_error_response(
            StatusCode::NOT_FOUND,
            id,
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            "Method not found",
            json!({ "method": "initialize", "removed_in": capabilities::PROTOCOL_REVISION }),
        );
    }
    let session = session_id(&parts.headers);
    let opens_session = is_legacy && message["method"] == "initialize" && session.is_none();
    if is_legacy {
        parts.extensions.insert(legacy::LegacyEra);
        let admission = match &session {
            Some(session) => sessions.admit(session, &principal, id.clone()).await,
            None if opens_session => sessions.admit_initialize(&message, &principal).await,
            None => legacy::Admission::Pass,
        };
        if let legacy::Admission::Refuse(refusal) = admission {
            return refusal;
        }
    }
    let mut task_ids: Option<Vec<String>> = None;
    if message["method"] == "subscriptions/listen"
        && let Some(ids) = message["params"]["notifications"].get("taskIds")
    {
        let Some(ids) = ids.as_array().and_then(|a| {
            a.iter()
                .map(|v| v.as_str().map(String::from))
                .collect::<Option<Vec<_>>>()
        }) else {
            return rpc_error_response(
                StatusCode::BAD_REQUEST,
                id,
                rmcp::model::ErrorCode::INVALID_PARAMS,
                "notifications.taskIds must be an array of strings.",
                json!({ "field": "notifications.taskIds" }),
            );
        };
        // The tasks extension governs taskIds subscriptions too (-32021 without it).
        if !declares_tasks(&message) {
            return rpc_error_response(
                StatusCode::BAD_REQUEST,
                id,
                rmcp::model::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
                "Missing required client capability",
                json!({ "requiredCapabilities": { "extensions": { capabilities::TASKS_EXTENSION: {} } } }),
            );
        }
        parts.extensions.insert(RequestedTaskIds(ids.clone()));
        task_ids = Some(ids);
    }
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    if opens_session
        && response.status().is_success()
        && let Some(opened) = session_id(response.headers())
    {
        sessions.opened(&opened, &principal);
    }
    let response = json_rpc_refusal(response, id).await;
    let rewrite = Rewrite {
        task_ids,
        server_info: !is_legacy,
    };
    rewrite_response(response, rewrite).await
}

/// rmcp answers some refusals (no session, unknown session, a bad header) in plain text; a
/// client tells a vidforge refusal by its JSON-RPC body (the reference's §2.11: a dual-era
/// client's probe reads it), so those get one: `-32001` on `404`, `-32600` otherwise.
async fn json_rpc_refusal(response: Response, id: Value) -> Response {
    let status = response.status();
    if !status.is_client_error() || content_type(&response).starts_with("application/json") {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = match body.collect().await {
        Ok(collected) => String::from_utf8_lossy(&collected.to_bytes()).into_owned(),
        Err(_) => String::new(),
    };
    let code = if status == StatusCode::NOT_FOUND {
        legacy::SESSION_NOT_FOUND
    } else {
        rmcp::model::ErrorCode::INVALID_REQUEST
    };
    let message = if text.trim().is_empty() {
        status.canonical_reason().unwrap_or("Refused").to_string()
    } else {
        text.trim().to_string()
    };
    let mut out = rpc_error_response(status, id, code, &message, json!({}));
    for (name, value) in parts.headers.iter() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            out.headers_mut().insert(name.clone(), value.clone());
        }
    }
    out
}

/// What [`rewrite_response`] changes on the way out.
#[derive(Default)]
struct Rewrite {
    /// `taskIds` to echo in a listen acknowledgement.
    task_ids: Option<Vec<String>>,
    /// Add `io.modelcontextprotocol/serverInfo` to results (modern requests only: a legacy
    /// client learned it from `initialize`).
    server_info: bool,
}

fn content_type(response: &Response) -> String {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase()
}

/// Adds `serverInfo` to a JSON-RPC result, and `taskIds` to a listen acknowledgement; drops
/// the fields rmcp writes that the protocol removed ([`wire::drop_removed_fields`]).
fn rewrite_message(message: &mut Value, rewrite: &Rewrite) {
    wire::drop_removed_fields(message);
    if rewrite.server_info
        && let Some(result) = message.get_mut("result").and_then(Value::as_object_mut)
    {
        let meta = result.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.entry("io.modelcontextprotocol/serverInfo")
                .or_insert_with(server_info);
        }
    }
    if let Some(ids) = &rewrite.task_ids
        && message["method"] == "notifications/subscriptions/acknowledged"
        && let Some(notifications) = message["params"]
            .get_mut("notifications")
            .and_then(Value::as_object_mut)
    {
        notifications.insert("taskIds".into(), json!(ids));
    }
}

async fn rewrite_response(response: Response, rewrite: Rewrite) -> Response {
    let ct = content_type(&response);
    if ct.starts_with("application/json") {
        let (mut parts, body) = response.into_parts();
        let Ok(collected) = body.collect().await else {
            return (StatusCode::INTERNAL_SERVER_ERROR, "response body failed").into_response();
        };
        let bytes = collected.to_bytes();
        let Ok(mut message) = serde_json::from_slice::<Value>(&bytes) else {
            return Response::from_parts(parts, Body::from(bytes));
        };
        rewrite_message(&mut message, &rewrite);
        let out = Bytes::from(message.to_string());
        parts
            .headers
            .insert(header::CONTENT_LENGTH, HeaderValue::from(out.len()));
        return Response::from_parts(parts, Body::from(out));
    }
    if ct.starts_with("text/event-stream") {
        let (parts, body) = response.into_parts();
        let mut rewriter = SseRewriter {
            buffer: Vec::new(),
            rewrite,
        };
        let stream = body
            .into_data_stream()
            .map(move |chunk| chunk.map(|bytes| rewriter.push(&bytes)));
        return Response::from_parts(parts, Body::from_stream(stream));
    }
    response
}

/// Rewrites complete SSE events as they stream past; partial events wait in the buffer.
/// Buffers bytes, not text: an event is decoded only once whole, so a multi-byte character
/// split across chunks is never torn (the `\n\n` boundary is ASCII).
struct SseRewriter {
    buffer: Vec<u8>,
    rewrite: Rewrite,
}

impl SseRewriter {
    fn push(&mut self, bytes: &[u8]) -> Bytes {
        self.buffer.extend_from_slice(bytes);
        let mut out = String::new();
        while let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = self.buffer.drain(..end + 2).collect();
            out.push_str(&self.rewrite_event(&String::from_utf8_lossy(&event)));
        }
        Bytes::from(out)
    }

    fn rewrite_event(&self, event: &str) -> String {
        let mut out = String::with_capacity(event.len() + 64);
        for line in event.split_inclusive('\n') {
            if let Some(data) = line.strip_prefix("data:")
                && let Ok(mut message) = serde_json::from_str::<Value>(data.trim())
            {
                rewrite_message(&mut message, &self.rewrite);
                out.push_str("data: ");
                out.push_str(&message.to_string());
                out.push('\n');
            } else {
                out.push_str(line);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_rewriter_handles_split_events() {
        let mut r = SseRewriter {
            buffer: Vec::new(),
            rewrite: Rewrite {
                task_ids: Some(vec!["task_1".into()]),
                server_info: true,
            },
        };
        let ack = r#"{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{}}}"#;
        let first = r.push(format!("event: message\ndata: {}", &ack[..20]).as_bytes());
        assert!(first.is_empty());
        let second = r.push(format!("{}\n\n", &ack[20..]).as_bytes());
        let text = String::from_utf8(second.to_vec()).unwrap();
        assert!(text.starts_with("event: message\ndata: "));
        assert!(text.contains(r#""taskIds":["task_1"]"#), "{text}");
    }

    #[test]
    fn sse_rewriter_keeps_characters_split_across_chunks() {
        let mut r = SseRewriter {
            buffer: Vec::new(),
            rewrite: Rewrite::default(),
        };
        let event = "data: {\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{\"text\":\"caf\u{e9} \u{1f3ac}\"}}\n\n";
        let bytes = event.as_bytes();
        // Split inside the four-byte clapper emoji and inside the two-byte é.
        let e_acute = event.find('\u{e9}').unwrap() + 1;
        let clapper = event.find('\u{1f3ac}').unwrap() + 2;
        let mut out = Vec::new();
        for chunk in [
            &bytes[..e_acute],
            &bytes[e_acute..clapper],
            &bytes[clapper..],
        ] {
            out.extend_from_slice(&r.push(chunk));
        }
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("caf\u{e9} \u{1f3ac}"), "{text}");
        assert!(!text.contains('\u{fffd}'), "{text}");
    }

    #[test]
    fn results_gain_server_info() {
        let mut m = json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete"}});
        let mut legacy = m.clone();
        rewrite_message(
            &mut m,
            &Rewrite {
                server_info: true,
                ..Rewrite::default()
            },
        );
        assert_eq!(
            m["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
            "vidforge"
        );
        rewrite_message(&mut legacy, &Rewrite::default());
        assert!(legacy["result"].get("_meta").is_none(), "{legacy}");
    }
}
