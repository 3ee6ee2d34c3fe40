//! Wire shapes built from render records: tasks, tool results, fallback status, envelopes.
//!
//! Native MCP fields are camelCase; vidforge's own fields (inside `structuredContent` and
//! envelopes) are snake_case. Everything here is pure: record + clock in, JSON out.

use serde_json::{Value, json};

use crate::catalog::{self, ErrorCode};

use super::capabilities::fingerprint;

/// The `inputRequests` key of the watermark approval elicitation.
pub const APPROVAL_INPUT_KEY: &str = "watermark-approval-1";

/// RFC 3339 UTC timestamp, second precision, from unix milliseconds.
pub fn rfc3339(unix_ms: u64) -> String {
    let secs = (unix_ms / 1000) as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (h, m, s) = (rem / 3600, (rem % 3600) / 60, rem % 60);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if mo <= 2 { y + 1 } else { y };
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{m:02}:{s:02}Z")
}

/// A fresh request id for an error envelope (`req_` + 16 hex chars).
pub fn request_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("req_{:016x}", nanos ^ n.rotate_left(40) ^ (std::process::id() as u64) << 20)
}

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
            "request_id": request_id(),
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

/// `vidforge://videos/{id}/final.{ext}`.
pub fn video_uri(id: &str, ext: &str) -> String {
    format!("vidforge://videos/{id}/final.{ext}")
}

/// `vidforge://renders/{id}/watermark-preview.png`.
pub fn preview_uri(id: &str) -> String {
    format!("vidforge://renders/{id}/watermark-preview.png")
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
                    preview_uri(id)
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
    fn rfc3339_formats_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_785_333_731_000), "2026-07-29T14:02:11Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00Z");
    }

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
