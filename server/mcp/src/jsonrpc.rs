//! JSON-RPC 2.0 framing checks in front of rmcp, so malformed messages get the codes the
//! specification assigns instead of rmcp's fallbacks (an HTTP 415 text body for unparsable
//! JSON, `-32601` for a known method whose params do not fit its schema):
//! - not JSON → `-32700` Parse error;
//! - JSON that is not one request, notification or response object (batches included: MCP
//!   2026-07-28 has none) → `-32600` Invalid Request;
//! - a method rmcp types whose params do not deserialise into its typed params → `-32602`
//!   Invalid params.
//!
//! Every refusal is HTTP 400 with a JSON-RPC error body.

use rmcp::model::{ClientJsonRpcMessage, ClientRequest, ErrorCode, JsonRpcMessage};
use std::time::Duration;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// The request methods vidforge serves with typed params (MCP 2026-07-28 + the tasks
/// extension). A request naming one of these whose params do not fit is `-32602`, not "method
/// not found". Methods 2026-07-28 removed (`initialize`, `ping`, `logging/setLevel`,
/// `resources/subscribe`, `resources/unsubscribe`) are not here: on the modern wire they are
/// `-32601` whatever their params (the conformance suite's `server-stateless` checks it);
/// `initialize` opens a legacy session instead (`legacy.rs` checks its revision) and `ping`
/// is answered inside one.
pub const TYPED_METHODS: &[&str] = &[
    "server/discover",
    "completion/complete",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "subscriptions/listen",
    "tools/call",
    "tools/list",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
];

/// A refused message: the JSON-RPC error to answer with.
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    /// The request's id when it could be read, else `null`.
    pub id: Value,
    pub code: ErrorCode,
    pub message: String,
    pub data: Value,
}

/// Checks one POSTed body. `Ok` carries the parsed message for the layers that read it.
pub fn check(body: &[u8]) -> Result<Value, Refusal> {
    let message: Value = serde_json::from_slice(body).map_err(|e| Refusal {
        id: Value::Null,
        code: ErrorCode::PARSE_ERROR,
        message: "Parse error: the body is not valid JSON.".into(),
        data: json!({ "reason": e.to_string() }),
    })?;
    let invalid = |id: Value, reason: &str| Refusal {
        id,
        code: ErrorCode::INVALID_REQUEST,
        message: format!("Invalid Request: {reason}"),
        data: json!({ "reason": reason }),
    };
    let Some(object) = message.as_object() else {
        let reason = if message.is_array() {
            "batches are not supported; send one JSON-RPC message per request"
        } else {
            "a JSON-RPC message is an object"
        };
        return Err(invalid(Value::Null, reason));
    };
    let id = object.get("id").cloned().unwrap_or(Value::Null);
    let id_ok = match object.get("id") {
        None => true,
        Some(v) => v.is_string() || v.is_i64() || v.is_u64(),
    };
    if object.get("jsonrpc") != Some(&json!("2.0")) {
        return Err(invalid(id_if(id_ok, id), "`jsonrpc` must be \"2.0\""));
    }
    if !id_ok {
        return Err(invalid(Value::Null, "`id` must be a string or an integer"));
    }
    let method = match object.get("method") {
        Some(Value::String(m)) => m.as_str(),
        Some(_) => return Err(invalid(id, "`method` must be a string")),
        None if object.contains_key("result") || object.contains_key("error") => {
            return Ok(message);
        }
        None => return Err(invalid(id, "a request needs a `method`")),
    };
    if let Some(params) = object.get("params")
        && !params.is_object()
    {
        return Err(invalid_params(id, method, "`params` must be an object"));
    }
    if object.contains_key("id") && TYPED_METHODS.contains(&method) && !typed(&message) {
        return Err(invalid_params(
            id,
            method,
            "they do not match the method's schema (wrong type or missing required field)",
        ));
    }
    Ok(message)
}

fn id_if(ok: bool, id: Value) -> Value {
    if ok { id } else { Value::Null }
}

fn invalid_params(id: Value, method: &str, reason: &str) -> Refusal {
    Refusal {
        id,
        code: ErrorCode::INVALID_PARAMS,
        message: format!("Invalid params for {method}: {reason}."),
        data: json!({ "method": method, "reason": reason }),
    }
}

/// Whether rmcp reads the request into its typed variant (not the catch-all custom one).
fn typed(message: &Value) -> bool {
    matches!(
        serde_json::from_value::<ClientJsonRpcMessage>(message.clone()),
        Ok(JsonRpcMessage::Request(r)) if !matches!(r.request, ClientRequest::CustomRequest(_))
    )
}

/// A JSON-RPC error response with this HTTP status (and `Retry-After` when given).
pub fn rpc_error(
    status: StatusCode,
    id: Value,
    code: ErrorCode,
    message: &str,
    data: Value,
    retry_after: Option<Duration>,
) -> Response {
    let body = json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code.0, "message": message, "data": data } });
    let mut response = (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response();
    if let Some(wait) = retry_after {
        response.headers_mut().insert(
            header::RETRY_AFTER,
            header::HeaderValue::from(wait.as_secs().max(1)),
        );
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(body: &str) -> i32 {
        check(body.as_bytes()).unwrap_err().code.0
    }

    #[test]
    fn framing_errors_get_their_json_rpc_codes() {
        assert_eq!(code("{bad json"), -32700);
        assert_eq!(code(""), -32700);
        assert_eq!(code("[1, 2]"), -32600);
        assert_eq!(code("42"), -32600);
        assert_eq!(code(r#"{"id": 1, "method": "ping"}"#), -32600);
        assert_eq!(code(r#"{"jsonrpc": "2.0", "id": 1}"#), -32600);
        assert_eq!(
            code(r#"{"jsonrpc": "2.0", "id": {}, "method": "ping"}"#),
            -32600
        );
        assert_eq!(code(r#"{"jsonrpc": "2.0", "id": 1, "method": 7}"#), -32600);
    }

    #[test]
    fn ill_typed_params_of_known_methods_are_invalid_params() {
        let bad = [
            r#"{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": 1}}"#,
            r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x", "arguments": []}}"#,
            r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": []}"#,
            r#"{"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {}}"#,
        ];
        for body in bad {
            let refusal = check(body.as_bytes()).unwrap_err();
            assert_eq!(refusal.code.0, -32602, "{body}");
            assert_eq!(refusal.id, json!(1));
        }
    }

    #[test]
    fn removed_methods_stay_method_not_found() {
        for method in [
            "initialize",
            "ping",
            "logging/setLevel",
            "resources/subscribe",
        ] {
            let body = format!(
                r#"{{"jsonrpc": "2.0", "id": 1, "method": "{method}", "params": {{"x": []}}}}"#
            );
            assert!(
                check(body.as_bytes()).is_ok(),
                "{method}: left to rmcp (-32601)"
            );
        }
    }

    #[test]
    fn well_formed_messages_pass() {
        let ok = [
            r#"{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": "task_1"}}"#,
            r#"{"jsonrpc": "2.0", "id": "a", "method": "tools/call", "params": {"name": "x", "arguments": {}}}"#,
            r#"{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}"#,
            r#"{"jsonrpc": "2.0", "id": 3, "method": "vendor/custom", "params": {"anything": []}}"#,
            r#"{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}"#,
            r#"{"jsonrpc": "2.0", "id": 4, "result": {}}"#,
        ];
        for body in ok {
            assert!(check(body.as_bytes()).is_ok(), "{body}");
        }
    }
}
