//! MCP-specific wire helpers built from render records. The error envelope itself lives in
//! [`vidforge_http::envelope`] (shared with the HTTP routes).

use rmcp::model::{CallToolResult, ContentBlock, InputRequests, Task, TaskStatus};
use serde_json::{Value, json};

use vidforge_core::catalog;
use vidforge_http::envelope::Envelope;

pub use vidforge_core::clock::rfc3339;

/// The `inputRequests` key of the watermark approval elicitation (form mode).
pub const APPROVAL_INPUT_KEY: &str = "watermark-approval-1";
/// The `inputRequests` key of the approval page offered in URL mode.
pub const APPROVAL_PAGE_INPUT_KEY: &str = "watermark-approval-page-1";

/// `pollIntervalMs` for a task status: short while working, long while waiting for a human
/// or once terminal.
pub fn poll_interval_ms(working: bool) -> u64 {
    if working {
        catalog::POLL_INTERVAL_WORKING.as_millis() as u64
    } else {
        catalog::POLL_INTERVAL_AWAITING.as_millis() as u64
    }
}

/// The `Task` every task carries, render or job (`CreateTaskResult`, `tasks/get`,
/// `notifications/tasks`).
pub fn task(
    id: &str,
    status: TaskStatus,
    status_message: impl Into<String>,
    created_at: u64,
    updated_at: u64,
    ttl: std::time::Duration,
) -> Task {
    Task::new(id, status, rfc3339(created_at), rfc3339(updated_at))
        .with_status_message(status_message)
        .with_ttl_ms(ttl.as_millis() as u64)
        .with_poll_interval_ms(poll_interval_ms(status == TaskStatus::Working))
}

/// A form-mode `elicitation/create` input request asking for an object with `properties`.
pub fn form_elicitation(message: &str, properties: Value, required: &[&str]) -> Value {
    json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": { "type": "object", "properties": properties, "required": required }
        }
    })
}

/// A complete `isError: true` CallToolResult (envelope in `structuredContent`).
pub fn tool_error_result(env: &Envelope, text: Option<String>) -> CallToolResult {
    let text = text.unwrap_or_else(|| format!("{}: {}", env.code, env.message));
    let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
    result.structured_content = Some(env.to_json());
    result
}

/// A complete successful CallToolResult: `text` for people, `structured` for programs.
pub fn tool_ok_result(text: impl Into<String>, structured: Value) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(structured);
    result
}

/// The watermark approval requests: the form ([`APPROVAL_INPUT_KEY`]) when `form`, and the
/// approval page in URL mode ([`APPROVAL_PAGE_INPUT_KEY`]) when `page_url` is given.
pub fn approval_input_requests(
    id: &str,
    position: &str,
    opacity: f64,
    form: bool,
    page_url: Option<&str>,
) -> InputRequests {
    let mut requests = serde_json::Map::new();
    if form {
        requests.insert(
            APPROVAL_INPUT_KEY.into(),
            approval_form(id, position, opacity),
        );
    }
    if let Some(url) = page_url {
        requests.insert(
            APPROVAL_PAGE_INPUT_KEY.into(),
            json!({
                "method": "elicitation/create",
                "params": {
                    "mode": "url",
                    "message": format!(
                        "Approve or reject the watermark preview of render {id} ({position}, opacity {opacity}) in your browser. Rejecting ends the render."
                    ),
                    "url": url,
                }
            }),
        );
    }
    // rmcp's typed requests, read from the wire shapes above (fixed, valid elicitations).
    serde_json::from_value(Value::Object(requests)).unwrap_or_default()
}

fn approval_form(id: &str, position: &str, opacity: f64) -> Value {
    form_elicitation(
        &format!(
            "Approve this watermark? Preview: {} ({position}, opacity {opacity}). Rejecting ends the render.",
            vidforge_core::uri::preview_uri(id)
        ),
        json!({
            "approved": { "type": "boolean", "description": "true to continue the render with this watermark; false to reject and end it." },
            "note": { "type": "string", "description": "Optional reason or requested adjustment when rejecting." }
        }),
        &["approved"],
    )
}

/// Removes what rmcp 3.11 still writes but 2026-07-28 dropped: the empty `elicitationId` of
/// URL-mode elicitations in the `inputRequests` of a task. Called on every outgoing message
/// by the wire layer, so it looks only where a task can stand: the `result` or `params`, and
/// one level below them (a notification's task, a list of tasks), never through a whole tree.
pub fn drop_removed_fields(message: &mut Value) {
    for top in ["result", "params"] {
        let Some(Value::Object(body)) = message.get_mut(top) else {
            continue;
        };
        strip_url_elicitation_ids(body);
        for child in body.values_mut() {
            match child {
                Value::Object(task) => strip_url_elicitation_ids(task),
                Value::Array(items) => items
                    .iter_mut()
                    .filter_map(Value::as_object_mut)
                    .for_each(strip_url_elicitation_ids),
                _ => {}
            }
        }
    }
}

fn strip_url_elicitation_ids(task: &mut serde_json::Map<String, Value>) {
    let Some(Value::Object(requests)) = task.get_mut("inputRequests") else {
        return;
    };
    for request in requests.values_mut() {
        if let Some(params) = request.get_mut("params").and_then(Value::as_object_mut)
            && params.get("mode").and_then(Value::as_str) == Some("url")
            && params.get("elicitationId").and_then(Value::as_str) == Some("")
        {
            params.remove("elicitationId");
        }
    }
}

/// Why a response cannot answer the input request it names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputResponseError {
    #[error("an accepted elicitation result needs a `content` object")]
    AcceptedWithoutContent,
    #[error("unknown elicitation action '{0}'")]
    UnknownAction(String),
    #[error("not an elicitation result (an object with an `action`)")]
    NotElicitation,
    #[error("not a sampling result (no `content`)")]
    NotSampling,
    #[error("not a roots/list result (no `roots` array)")]
    NotRoots,
}

/// Checks that `response` can answer an input request of `method` (MRTR `inputResponses`,
/// `tasks/update`): an elicitation result needs an `action` (and a `content` object when
/// accepted), a sampling result `content`, a roots result a `roots` array.
pub fn check_input_response(method: &str, response: &Value) -> Result<(), InputResponseError> {
    match method {
        "elicitation/create" => match response.get("action").and_then(Value::as_str) {
            Some("accept") if response.get("content").is_some_and(Value::is_object) => Ok(()),
            Some("accept") => Err(InputResponseError::AcceptedWithoutContent),
            Some("decline" | "cancel") => Ok(()),
            Some(other) => Err(InputResponseError::UnknownAction(other.to_string())),
            None => Err(InputResponseError::NotElicitation),
        },
        "sampling/createMessage" if response.get("content").is_none() => {
            Err(InputResponseError::NotSampling)
        }
        "roots/list" if !response.get("roots").is_some_and(Value::is_array) => {
            Err(InputResponseError::NotRoots)
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vidforge_core::catalog::ErrorCode;

    #[test]
    fn error_results_carry_the_envelope() {
        let env = Envelope::new(ErrorCode::RenderQuotaExceeded, "busy").retry_after(Some(30_000));
        let r = serde_json::to_value(tool_error_result(&env, None)).unwrap();
        assert_eq!(r["isError"], true);
        assert_eq!(r["structuredContent"]["code"], "render_quota_exceeded");
        assert_eq!(r["structuredContent"]["retry_after_ms"], 30_000);
        assert_eq!(r["content"][0]["text"], "render_quota_exceeded: busy");
    }

    #[test]
    fn input_responses_are_checked_by_request_method() {
        let elicit = "elicitation/create";
        assert!(check_input_response(elicit, &json!(12345)).is_err());
        assert!(check_input_response(elicit, &json!({"action": "accept"})).is_err());
        assert!(check_input_response(elicit, &json!({"action": "maybe"})).is_err());
        assert!(check_input_response(elicit, &json!({"action": "decline"})).is_ok());
        assert!(check_input_response(elicit, &json!({"action": "accept", "content": {}})).is_ok());
        assert!(check_input_response("sampling/createMessage", &json!({})).is_err());
        assert!(check_input_response("roots/list", &json!({"roots": {}})).is_err());
        assert!(check_input_response("roots/list", &json!({"roots": []})).is_ok());
    }

    #[test]
    fn approval_request_is_a_form_elicitation() {
        let r = serde_json::to_value(approval_input_requests(
            "task_1", "top_left", 0.6, true, None,
        ))
        .unwrap();
        let req = &r[APPROVAL_INPUT_KEY];
        assert_eq!(req["method"], "elicitation/create");
        assert_eq!(
            req["params"]["requestedSchema"]["required"],
            json!(["approved"])
        );
    }
}
