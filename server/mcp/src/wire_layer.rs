//! The axum layer in front of rmcp ([`wire_layer`]), in steps: a legacy session's `GET` /
//! `DELETE`, the body read within [`MAX_MCP_BODY_BYTES`], the JSON-RPC check, the scope the
//! method needs, legacy-session admission ([`legacy`]), `taskIds` off `subscriptions/listen`
//! and its place in the node's stream budget ([`streams`]), an inline read's place in the
//! inline budget ([`crate::inline`]); and on the way out every answer that streams held to
//! the stream budget, a JSON-RPC body on every refusal ([`crate::refusal`]), `serverInfo` on
//! modern results ([`crate::rewrite`]), and the inline budget held until the answer is sent.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use http_body_util::BodyExt;
use serde_json::{Value, json};

use vidforge_core::{catalog, uri};
use vidforge_http::auth::Principal;
use vidforge_http::scope::{Need, Scopes};

use crate::inline::{INLINE_WAIT, InlineBudget, InlineBusy};
use crate::refusal::{json_rpc_refusal, rpc_error_response};
use crate::rewrite::{Rewrite, rewrite_response};
use crate::streams::{LISTEN_GRACE, Stream, Streams, held_until_sent};
use crate::{capabilities, jsonrpc, legacy, tools};

/// Largest `/mcp` request body accepted.
pub const MAX_MCP_BODY_BYTES: usize = 4 * 1024 * 1024;

/// Task ids a `subscriptions/listen` request asked for (carried beside rmcp, see the crate
/// docs).
#[derive(Clone, Debug)]
pub struct RequestedTaskIds(pub Vec<String>);

/// What the wire layer needs: the legacy sessions, the node's stream and inline budgets, and
/// the authenticator (for its scope challenges).
pub(crate) struct Wire {
    pub(crate) sessions: legacy::LegacySessions,
    pub(crate) streams: Arc<Streams>,
    pub(crate) inline: Arc<InlineBudget>,
    pub(crate) auth: vidforge_http::auth::Auth,
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
pub(crate) async fn wire_layer(
    State(wire): State<Arc<Wire>>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::POST {
        return session_request(&wire.sessions, request, next).await;
    }
    let principal = caller(&request);
    let scopes = request.extensions().get::<Scopes>().copied();
    let (mut parts, body) = request.into_parts();
    let bytes = match read_body(body).await {
        Ok(bytes) => bytes,
        Err(refusal) => return refusal,
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
    if let Some(refusal) = check_scope(&wire.auth, scopes, &message, &id) {
        return refusal;
    }
    let is_legacy = legacy::is_legacy(&message, &parts.headers);
    if !is_legacy && message["method"] == "initialize" {
        return initialize_removed(id);
    }
    let opens_session =
        is_legacy && message["method"] == "initialize" && session_id(&parts.headers).is_none();
    if is_legacy
        && let Some(refusal) =
            admit_legacy(&wire.sessions, &mut parts, &message, &principal, &id).await
    {
        return refusal;
    }
    let task_ids = match listen_task_ids(&message, &id) {
        Ok(ids) => ids,
        Err(refusal) => return *refusal,
    };
    if let Some(ids) = &task_ids {
        parts.extensions.insert(RequestedTaskIds(ids.clone()));
    }
    // A read answered inline takes its bytes of the inline budget before it starts.
    let inline = match inline_cost(&message) {
        Some(bytes) => match wire
            .inline
            .take_within(&principal, bytes, INLINE_WAIT)
            .await
        {
            Ok(grant) => Some(grant),
            Err(busy) => return inline_refusal(busy, id),
        },
        None => None,
    };
    // A listen stream takes its place in the budget before it starts.
    let stream = if message["method"] == "subscriptions/listen" {
        match wire.streams.open(&principal, None) {
            Ok(stream) => Some(stream),
            Err(refused) => return refused.into_response(id),
        }
    } else {
        None
    };
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    let response = held_to_budget(&wire.streams, stream, response);
    if opens_session
        && response.status().is_success()
        && let Some(opened) = session_id(response.headers())
    {
        wire.sessions.opened(&opened, &principal);
    }
    let response = json_rpc_refusal(response, id).await;
    let rewrite = Rewrite {
        task_ids,
        server_info: !is_legacy,
    };
    // A legacy resource read has nothing to rewrite: its answer (a blob, maybe megabytes)
    // passes untouched rather than parsed and written again.
    let untouched = is_legacy && message["method"] == "resources/read";
    let response = if untouched {
        response
    } else {
        rewrite_response(response, rewrite).await
    };
    match inline {
        Some(grant) => held_until_sent(response, grant),
        None => response,
    }
}

/// The most a request may read into its answer inline (a watermark preview or a result as a
/// `resources/read` blob, the MCP App's preview), or `None` for any other request.
fn inline_cost(message: &Value) -> Option<u64> {
    match message["method"].as_str()? {
        "resources/read" => {
            let uri = message["params"]["uri"].as_str()?;
            let media =
                uri::parse_preview_uri(uri).is_some() || uri::parse_video_uri(uri).is_some();
            media.then_some(catalog::MAX_INLINE_RESOURCE_BYTES)
        }
        "tools/call" if message["params"]["name"] == crate::app::APP_PREVIEW => {
            Some(catalog::MAX_VIEW_PREVIEW_BYTES)
        }
        _ => None,
    }
}

/// The refusal of an inline read past its budget: `429` / `503` with `Retry-After`, the
/// temporary envelope in the JSON-RPC error's `data`.
fn inline_refusal(busy: InlineBusy, id: Value) -> Response {
    let env = busy.envelope();
    let status = match busy {
        InlineBusy::Principal => StatusCode::TOO_MANY_REQUESTS,
        InlineBusy::Node => StatusCode::SERVICE_UNAVAILABLE,
    };
    // Whole seconds, rounded up: never sooner than the envelope says.
    let retry_after = env
        .retry_after_ms
        .map(|ms| std::time::Duration::from_secs(ms.div_ceil(1000)));
    jsonrpc::rpc_error(
        status,
        id,
        rmcp::model::ErrorCode::INTERNAL_ERROR,
        &env.message,
        env.to_jsonrpc_data(),
        retry_after,
    )
}

/// A `GET` (the legacy server-message stream) or `DELETE` (end a legacy session): both need a
/// session; without one they are 405 as on a modern-only server (nothing to stream).
async fn session_request(
    sessions: &legacy::LegacySessions,
    request: Request,
    next: Next,
) -> Response {
    let principal = caller(&request);
    let Some(session) = session_id(request.headers()) else {
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
    };
    if legacy::is_legacy(&Value::Null, request.headers())
        && let legacy::Admission::Refuse(refusal) =
            sessions.admit(&session, &principal, Value::Null).await
    {
        return refusal;
    }
    let is_delete = request.method() == Method::DELETE;
    // A GET is the session's server-message stream: one per session, bounded per principal
    // and per node, ended with its session or its lifetime (`streams`).
    let stream = if request.method() == Method::GET {
        match sessions.open_stream(&session, &principal) {
            Ok(stream) => Some(stream),
            Err(refused) => return refused.into_response(Value::Null),
        }
    } else {
        None
    };
    let mut response = next.run(request).await;
    if let Some(stream) = stream
        && response.status().is_success()
    {
        return sessions.attach_stream(stream, &session, response);
    }
    if is_delete && response.status().is_success() {
        sessions.ended(&session);
        // rmcp answers 202; the SDKs' clients expect 200 or 204 for an ended session (the
        // Python SDK 1.x logs "Session termination failed: 202"), and the TypeScript SDK's
        // own server answers 200.
        *response.status_mut() = StatusCode::OK;
    }
    json_rpc_refusal(response, Value::Null).await
}

/// Whether `response` streams (server-sent events) rather than answering once.
fn streams_events(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// `response` held to the stream budget as `stream` (reserved before it started: a listen)
/// when it streams, ending after the streams' lifetime (a listen ends itself cleanly by then:
/// [`LISTEN_GRACE`] more). Every other answer ends with its request (a legacy session's `POST`
/// answered over SSE included), so it takes no place.
fn held_to_budget(budget: &Streams, stream: Option<Stream>, response: Response) -> Response {
    match stream {
        Some(stream) if response.status().is_success() && streams_events(&response) => {
            let lifetime = budget.limits().max_lifetime + LISTEN_GRACE;
            stream.attach(response, lifetime, None)
        }
        _ => response,
    }
}

/// The request body, at most [`MAX_MCP_BODY_BYTES`]; a stalled or larger one is refused.
async fn read_body(body: Body) -> Result<Bytes, Response> {
    match http_body_util::Limited::new(body, MAX_MCP_BODY_BYTES)
        .collect()
        .await
    {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if vidforge_http::connections::is_body_timeout(&*e) => Err(rpc_error_response(
            StatusCode::REQUEST_TIMEOUT,
            Value::Null,
            rmcp::model::ErrorCode::INVALID_REQUEST,
            "The request body stalled and was abandoned.",
            json!({}),
        )),
        Err(_) => Err(rpc_error_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            Value::Null,
            rmcp::model::ErrorCode::INVALID_REQUEST,
            "Request body too large.",
            json!({ "max_bytes": MAX_MCP_BODY_BYTES }),
        )),
    }
}

/// A refusal when the token's `scopes` lack what `message` needs: 403 with the step-up
/// challenge; the body a JSON-RPC error carrying the envelope.
fn check_scope(
    auth: &vidforge_http::auth::Auth,
    scopes: Option<Scopes>,
    message: &Value,
    id: &Value,
) -> Option<Response> {
    let need = needed_scope(message);
    if scopes.is_none_or(|s| s.allow(need)) {
        return None;
    }
    let challenge = auth.insufficient_scope(need);
    let mut refusal = rpc_error_response(
        StatusCode::FORBIDDEN,
        id.clone(),
        rmcp::model::ErrorCode::INVALID_REQUEST,
        "Insufficient scope",
        json!({ "code": "insufficient_scope", "required_scope": need.scopes() }),
    );
    if let Some(h) = challenge.headers().get(header::WWW_AUTHENTICATE) {
        refusal
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, h.clone());
    }
    Some(refusal)
}

/// A 2026-07-28 request for `initialize`, a method that revision removed (rmcp would take any
/// `initialize` for a legacy handshake).
fn initialize_removed(id: Value) -> Response {
    rpc_error_response(
        StatusCode::NOT_FOUND,
        id,
        rmcp::model::ErrorCode::METHOD_NOT_FOUND,
        "Method not found",
        json!({ "method": "initialize", "removed_in": capabilities::PROTOCOL_REVISION }),
    )
}

/// A legacy-era request: marked as one for the handler, and admitted to its session (or
/// opening one with `initialize`); the refusal when it is not.
async fn admit_legacy(
    sessions: &legacy::LegacySessions,
    parts: &mut Parts,
    message: &Value,
    principal: &str,
    id: &Value,
) -> Option<Response> {
    parts.extensions.insert(legacy::LegacyEra);
    let admission = match session_id(&parts.headers) {
        Some(session) => sessions.admit(&session, principal, id.clone()).await,
        None if message["method"] == "initialize" => {
            sessions.admit_initialize(message, principal).await
        }
        None => legacy::Admission::Pass,
    };
    match admission {
        legacy::Admission::Refuse(refusal) => Some(refusal),
        _ => None,
    }
}

/// The `taskIds` a `subscriptions/listen` request names (none for other requests), or its
/// refusal: not an array of strings, or without the tasks extension (-32021), which governs
/// `taskIds` subscriptions too.
fn listen_task_ids(message: &Value, id: &Value) -> Result<Option<Vec<String>>, Box<Response>> {
    if message["method"] != "subscriptions/listen" {
        return Ok(None);
    }
    let Some(ids) = message["params"]["notifications"].get("taskIds") else {
        return Ok(None);
    };
    let Some(ids) = ids.as_array().and_then(|a| {
        a.iter()
            .map(|v| v.as_str().map(String::from))
            .collect::<Option<Vec<_>>>()
    }) else {
        return Err(Box::new(rpc_error_response(
            StatusCode::BAD_REQUEST,
            id.clone(),
            rmcp::model::ErrorCode::INVALID_PARAMS,
            "notifications.taskIds must be an array of strings.",
            json!({ "field": "notifications.taskIds" }),
        )));
    };
    if !declares_tasks(message) {
        return Err(Box::new(rpc_error_response(
            StatusCode::BAD_REQUEST,
            id.clone(),
            rmcp::model::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
            "Missing required client capability",
            json!({ "requiredCapabilities": { "extensions": { capabilities::TASKS_EXTENSION: {} } } }),
        )));
    }
    Ok(Some(ids))
}
