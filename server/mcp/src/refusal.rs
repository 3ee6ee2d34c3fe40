//! JSON-RPC bodies for the `/mcp` refusals: the wire layer's own, and rmcp's plain-text ones
//! rewritten.

use axum::http::{StatusCode, header};
use axum::response::Response;
use http_body_util::BodyExt;
use serde_json::{Value, json};

use crate::legacy;
use crate::rewrite::content_type;

/// A JSON-RPC error response with `status` (no legacy session header).
pub(crate) fn rpc_error_response(
    status: StatusCode,
    id: Value,
    code: rmcp::model::ErrorCode,
    message: &str,
    data: Value,
) -> Response {
    legacy::rpc_error(status, id, code, message, data, None)
}

/// rmcp answers some refusals (no session, unknown session, a bad header) in plain text; a
/// client tells a vidforge refusal by its JSON-RPC body (the reference's §2.11: a dual-era
/// client's probe reads it), so those get one: `-32001` on `404`, `-32600` otherwise.
pub(crate) async fn json_rpc_refusal(response: Response, id: Value) -> Response {
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
