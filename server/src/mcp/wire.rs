//! Wire shapes built from render records: tasks, tool results, fallback status, envelopes.
//!
//! Native MCP fields are camelCase; vidforge's own fields (inside `structuredContent` and
//! envelopes) are snake_case. Everything here is pure: record + clock in, JSON out.

use serde_json::{Value, json};

use crate::catalog::{self, ErrorCode};

use super::capabilities::fingerprint;

/// The `inputRequests` key of the watermark approval elicitation.
pub const APPROVAL_INPUT_KEY: &str = "watermark-approval-1";

pub use crate::clock::rfc3339;

/// A callable next step: `{next_step, tool, arguments, alternative?}`.
#[derive(Clone, Debug)]
pub struct Repair {
    pub next_step: &'static str,
    pub tool: &'static str,
    pub arguments: Value,
    pub alternative: Option<String>,
}

impl Repair {
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "next_step": self.next_step,
            "tool": self.tool,
            "arguments": self.arguments,
        });
        if let Some(alt) = &self.alternative {
            v["alternative"] = json!(alt);
        }
        v
    }
}

/// One error, carried either in a tool result's `structuredContent` or in JSON-RPC
/// `error.data` (then `code`/`message` are renamed `machine_code`/`human_message`).
#[derive(Clone, Debug)]
pub struct Envelope {
    pub code: ErrorCode,
    pub message: String,
    pub field: Option<String>,
    pub value: Option<String>,
    pub reason: Option<String>,
    pub retry_after_ms: Option<u64>,
    pub repair: Option<Repair>,
    pub extra_details: Option<Value>,
}

impl Envelope {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            field: None,
            value: None,
            reason: None,
            retry_after_ms: None,
            repair: None,
            extra_details: None,
        }
    }

    pub fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    pub fn value(mut self, value: impl Into<String>) -> Self {
        self.value = Some(value.into());
        self
    }

    pub fn reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    pub fn retry_after(mut self, ms: Option<u64>) -> Self {
        self.retry_after_ms = ms;
        self
    }

    pub fn repair(mut self, repair: Repair) -> Self {
        self.repair = Some(repair);
        self
    }

    fn details(&self) -> Value {
        let mut d = serde_json::Map::new();
        if let Some(f) = &self.field {
            d.insert("field".into(), json!(f));
        }
        if let Some(v) = &self.value {
            d.insert("value".into(), json!(v));
        }
        if let Some(r) = &self.reason {
            d.insert("reason".into(), json!(r));
        }
        if let Some(Value::Object(extra)) = &self.extra_details {
            for (k, v) in extra {
                d.insert(k.clone(), v.clone());
            }
        }
        Value::Object(d)
    }

    fn body(&self, code_key: &str, message_key: &str) -> Value {
        let temporary = self.code.temporary();
        json!({
            code_key: self.code.as_str(),
            message_key: self.message,
            "details": self.details(),
            "temporary": temporary,
            // `retry_after_ms` only accompanies temporary errors.
            "retry_after_ms": if temporary { self.retry_after_ms } else { None },
            "repair": self.repair.as_ref().map(Repair::to_json),
            "request_id": crate::ids::new_request_id(),
            "fingerprint": fingerprint(),
        })
    }

    /// The tool-result carrier (`structuredContent`).
    pub fn tool_body(&self) -> Value {
        self.body("code", "message")
    }

    /// The JSON-RPC carrier (`error.data`).
    pub fn rpc_data(&self) -> Value {
        self.body("machine_code", "human_message")
    }

    /// A complete `isError: true` CallToolResult as wire JSON.
    pub fn tool_result(&self, text: Option<String>) -> Value {
        let text = text.unwrap_or_else(|| format!("{}: {}", self.code, self.message));
        json!({
            "resultType": "complete",
            "isError": true,
            "content": [{ "type": "text", "text": text }],
            "structuredContent": self.tool_body(),
        })
    }
}

pub fn status_repair(id: &str, alternative: Option<String>) -> Repair {
    Repair {
        next_step: "check_render_status",
        tool: super::tools::GET_RENDER_STATUS,
        arguments: json!({ "render_id": id }),
        alternative,
    }
}

/// `pollIntervalMs` for a task status: short while working, long while waiting for a human
/// or once terminal.
pub fn poll_interval_ms(working: bool) -> u64 {
    if working {
        catalog::POLL_INTERVAL_WORKING.as_millis() as u64
    } else {
        catalog::POLL_INTERVAL_AWAITING.as_millis() as u64
    }
}

/// The form elicitation asking for watermark approval.
pub fn approval_input_requests(id: &str, position: &str, opacity: f64) -> Value {
    json!({
        APPROVAL_INPUT_KEY: {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": format!(
                    "Approve this watermark? Preview: {} ({position}, opacity {opacity}). Rejecting ends the render.",
                    crate::uri::preview_uri(id)
                ),
                "requestedSchema": {
                    "type": "object",
                    "required": ["approved"],
                    "properties": {
                        "approved": { "type": "boolean", "description": "true to continue the render with this watermark; false to reject and end it." },
                        "note": { "type": "string", "description": "Optional reason or requested adjustment when rejecting." }
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rpc_carrier_renames_keys_and_drops_retry_for_permanent_errors() {
        let e = Envelope::new(ErrorCode::TaskExpired, "gone").retry_after(Some(5));
        let d = e.rpc_data();
        assert_eq!(d["machine_code"], "task_expired");
        assert_eq!(d["human_message"], "gone");
        assert!(d["retry_after_ms"].is_null());
        assert!(d.get("code").is_none());
        let t = Envelope::new(ErrorCode::RenderQuotaExceeded, "busy")
            .retry_after(Some(30_000))
            .tool_body();
        assert_eq!(t["retry_after_ms"], 30_000);
        assert_eq!(t["temporary"], true);
    }
}
