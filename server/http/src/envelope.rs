//! The §6 error envelope, one shape on every carrier:
//! `{code, message, details, temporary, retry_after_ms, repair, request_id, fingerprint}`.
//! A refusal of a caller who proved nothing (the request policy's, a forged playback link's,
//! too many wrong tokens') carries `fingerprint: null` ([`Envelope::for_stranger`]): the
//! build is for clients, not for whoever knocks.
//!
//! Tool-result errors put [`Envelope::to_json`] in `structuredContent`; JSON-RPC errors put
//! [`Envelope::to_jsonrpc_data`] in `error.data` (keys `machine_code` / `human_message`); the
//! HTTP routes send `to_json` as the body.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Map, Value, json};

use vidforge_core::catalog::ErrorCode;
use vidforge_core::error::ServiceError;
use vidforge_core::ids;
use vidforge_core::store::{Outcome, OutputFormat, RenderRecord};
use vidforge_core::uri;

/// Tool names the repairs point at.
pub mod tools {
    pub const RENDER_VIDEO: &str = "vidforge_render_video";
    pub const GET_RENDER_STATUS: &str = "vidforge_get_render_status";
    pub const APPROVE_WATERMARK: &str = "vidforge_approve_watermark";
    pub const CANCEL_RENDER: &str = "vidforge_cancel_render";
}

/// The server version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// Short git commit of this build ("unknown" outside a checkout).
pub const GIT_SHA: &str = env!("VIDFORGE_GIT_SHA");

/// `vidforge@<version>+<git short sha>`.
pub fn fingerprint() -> String {
    format!("vidforge@{VERSION}+{GIT_SHA}")
}

/// A callable next step: `{next_step, tool, arguments, alternative}`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Repair {
    pub next_step: String,
    pub tool: String,
    pub arguments: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alternative: Option<String>,
}

impl Repair {
    pub fn new(next_step: &str, tool: &str, arguments: Value) -> Self {
        Repair {
            next_step: next_step.into(),
            tool: tool.into(),
            arguments,
            alternative: None,
        }
    }

    pub fn alternative(mut self, text: impl Into<String>) -> Self {
        self.alternative = Some(text.into());
        self
    }
}

/// What a default repair may use.
#[derive(Clone, Copy, Debug, Default)]
pub struct RepairContext<'a> {
    pub render_id: Option<&'a str>,
    /// Still-valid arguments of the original call, without `idempotency_key`.
    pub arguments: Option<&'a Value>,
    pub output_format: Option<OutputFormat>,
}

impl<'a> RepairContext<'a> {
    pub fn for_record(rec: &'a RenderRecord, repair_arguments: &'a Value) -> Self {
        RepairContext {
            render_id: Some(&rec.id),
            arguments: Some(repair_arguments),
            output_format: Some(rec.args.output_format),
        }
    }
}

/// The repair vidforge suggests for `code` (`None` when no callable step helps, e.g. schema
/// errors the caller must fix from `details`, or when a render repair would need arguments
/// `ctx` does not have: every repair is callable as-is).
pub fn default_repair(code: ErrorCode, ctx: RepairContext<'_>) -> Option<Repair> {
    // Without the original arguments no render repair is callable as-is: none is offered.
    let args = || ctx.arguments.cloned();
    let status = |id: &str| json!({ "render_id": id });
    match code {
        ErrorCode::WatermarkRejected => args().map(|a| {
            Repair::new("revise_watermark_and_rerender", tools::RENDER_VIDEO, a).alternative(
                "Adjust `watermark.position` or `watermark.opacity` per the user's note before \
                 re-calling, or omit `watermark` to render without one.",
            )
        }),
        ErrorCode::WatermarkApprovalTimeout => args().map(|a| {
            Repair::new("rerender_and_approve", tools::RENDER_VIDEO, a).alternative(
                "Re-call and have the user answer the approval request within the timeout, or \
                 omit `watermark` to render without an approval pause.",
            )
        }),
        ErrorCode::RenderFailed => args().map(|a| {
            Repair::new("retry_render", tools::RENDER_VIDEO, a)
                .alternative("If it fails again, try another output_format or resolution.")
        }),
        ErrorCode::RenderQuotaExceeded => args().map(|a| {
            Repair::new("retry_after_delay", tools::RENDER_VIDEO, a).alternative(
                "Wait retry_after_ms, or cancel one of your running renders with \
                 vidforge_cancel_render.",
            )
        }),
        ErrorCode::UnsupportedCodec => args().map(|a| {
            Repair::new("use_different_source", tools::RENDER_VIDEO, a).alternative(
                "Upload the video in a supported codec (H.264, HEVC, VP8/VP9, AV1, ProRes) and \
                 pass its new vidforge://assets/… URI as source_asset_uri.",
            )
        }),
        ErrorCode::SourceNotFound => args().map(|a| {
            Repair::new("upload_asset_then_rerender", tools::RENDER_VIDEO, a).alternative(
                "Upload the file first (POST /assets on this server) and pass the returned \
                 vidforge://assets/… URI.",
            )
        }),
        ErrorCode::ResultExpired => args().map(|a| {
            Repair::new("rerender", tools::RENDER_VIDEO, a)
                .alternative("The result was deleted after its retention; re-render it.")
        }),
        ErrorCode::TaskExpired => ctx.render_id.map(|id| {
            let mut r = Repair::new("check_render_status", tools::GET_RENDER_STATUS, status(id));
            if let Some(f) = ctx.output_format {
                r = r.alternative(format!(
                    "If the render completed, read {} directly.",
                    uri::video_uri(id, f)
                ));
            }
            r
        }),
        ErrorCode::ApprovalNotPending | ErrorCode::ApprovalAlreadyRecorded => ctx
            .render_id
            .map(|id| Repair::new("check_render_status", tools::GET_RENDER_STATUS, status(id))),
        ErrorCode::IdempotencyConflict => args().map(|a| {
            Repair::new("use_new_idempotency_key", tools::RENDER_VIDEO, a).alternative(
                "Re-send the original arguments with this key to get the existing render, or \
                 use a new idempotency_key for the new arguments.",
            )
        }),
        ErrorCode::RenderCancelled => args().map(|a| {
            Repair::new("rerender", tools::RENDER_VIDEO, a)
                .alternative("Re-call with a new idempotency_key to restart the render.")
        }),
        // Schema errors (fixed from `details`), unknown ids, upload errors, and codes added to
        // the catalog later: no generic callable step.
        _ => None,
    }
}

/// The repair of a work refusal (`render_too_large`, `render_budget_exceeded`): the same
/// arguments at the highest lower resolution that fits now; without one, for the budget, the
/// same arguments after `retry_after_ms`. `None` for other errors.
fn work_repair(e: &ServiceError, ctx: RepairContext<'_>) -> Option<Repair> {
    let w = e.work_refusal()?;
    let mut args = ctx.arguments?.clone();
    match (w.fits, e) {
        (Some(res), _) => {
            args.as_object_mut()?
                .insert("resolution".into(), Value::String(res.as_str().into()));
            Some(
                Repair::new("lower_resolution", tools::RENDER_VIDEO, args).alternative(format!(
                    "At {} the render fits this server's limits now; or trim the source to \
                     a shorter clip and re-upload it.",
                    res.as_str()
                )),
            )
        }
        (None, ServiceError::RenderBudgetExceeded(_)) => Some(
            Repair::new("retry_after_delay", tools::RENDER_VIDEO, args).alternative(
                "Wait retry_after_ms for the credential's render budget to free up, or trim the \
                 source to a shorter clip.",
            ),
        ),
        // Too large at every resolution: only a shorter source helps, which no call can do.
        (None, _) => None,
    }
}

/// The §6 error envelope.
#[derive(Clone, Debug, PartialEq)]
pub struct Envelope {
    pub code: ErrorCode,
    pub message: String,
    /// `field`, `value` (only for server-minted values), `reason`, …
    pub details: Map<String, Value>,
    pub temporary: bool,
    pub retry_after_ms: Option<u64>,
    pub repair: Option<Repair>,
    pub request_id: String,
    /// `None` for a stranger ([`Envelope::for_stranger`]).
    pub fingerprint: Option<String>,
}

impl Envelope {
    /// An envelope with a fresh request id; `temporary` follows the catalog.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Envelope {
            code,
            message: message.into(),
            details: Map::new(),
            temporary: code.temporary(),
            retry_after_ms: None,
            repair: None,
            request_id: ids::new_request_id(),
            fingerprint: Some(fingerprint()),
        }
    }

    /// The envelope for a caller who has not authenticated: no build fingerprint.
    pub fn for_stranger(mut self) -> Self {
        self.fingerprint = None;
        self
    }

    pub fn field(self, field: impl Into<String>) -> Self {
        self.detail("field", Value::String(field.into()))
    }

    pub fn reason(self, reason: impl Into<String>) -> Self {
        self.detail("reason", Value::String(reason.into()))
    }

    /// `details.value`: only for values the server minted (ids), never echoed user input.
    pub fn value(self, value: impl Into<String>) -> Self {
        self.detail("value", Value::String(value.into()))
    }

    pub fn detail(mut self, key: &str, value: Value) -> Self {
        self.details.insert(key.to_string(), value);
        self
    }

    /// Sets `retry_after_ms` (ignored for permanent codes, which must carry null).
    pub fn retry_after(mut self, ms: Option<u64>) -> Self {
        self.retry_after_ms = if self.temporary { ms } else { None };
        self
    }

    pub fn repair(mut self, repair: Option<Repair>) -> Self {
        self.repair = repair;
        self
    }

    pub fn request_id(mut self, id: impl Into<String>) -> Self {
        self.request_id = id.into();
        self
    }

    /// From a service error, with the default repair for `ctx`.
    pub fn from_service_error(e: &ServiceError, ctx: RepairContext<'_>) -> Self {
        if let ServiceError::Internal(detail) = e {
            // A fault of ours, not the caller's: no internal text leaves the server (it is
            // logged under the request id), and repeating the call will not help by itself.
            let mut env = Envelope::new(
                e.code(),
                "The server hit an internal fault and could not complete the request; it was \
                 logged under this request_id.",
            );
            env.temporary = false;
            tracing::error!(request_id = %env.request_id, detail = %detail, "internal fault reported to a client");
            return env;
        }
        let mut env = Envelope::new(e.code(), e.to_string());
        if let Some(detail) = e.internal_detail() {
            tracing::warn!(request_id = %env.request_id, detail = %detail, "a store is unavailable; the client was told to retry");
        }
        if let Some(f) = e.field() {
            env = env.field(f);
        }
        if let Some(r) = e.reason() {
            env = env.reason(r);
        }
        if let Some(w) = e.work_refusal() {
            env = env
                .detail("estimated_pixel_frames", json!(w.estimated_pixel_frames))
                .detail("estimated_seconds", json!(w.estimated_seconds))
                .detail("limit_pixel_frames", json!(w.limit_pixel_frames))
                .detail("limit_seconds", json!(w.limit_seconds));
            if let Some(window) = w.window_seconds {
                env = env
                    .detail("remaining_pixel_frames", json!(w.remaining_pixel_frames))
                    .detail("window_seconds", json!(window));
            }
            if let Some(res) = w.fits {
                env = env.detail("fits_resolution", json!(res.as_str()));
            }
        }
        let repair = work_repair(e, ctx).or_else(|| default_repair(e.code(), ctx));
        env.retry_after(e.retry_after_ms()).repair(repair)
    }

    /// From a failed render's outcome (`None` unless the outcome is an error), with the default
    /// repair built from the record's original arguments.
    pub fn from_record(rec: &RenderRecord) -> Option<Self> {
        let Some(Outcome::Error {
            code,
            message,
            reason,
            field,
            retry_after_ms,
            temporary,
        }) = &rec.outcome
        else {
            return None;
        };
        let args = rec.repair_arguments();
        let mut env = Envelope::new(*code, message.clone());
        if let Some(f) = field {
            env = env.field(f.clone());
        }
        if let Some(r) = reason {
            env = env.reason(r.clone());
        }
        if let Some(t) = temporary {
            env.temporary = *t;
        }
        Some(
            env.retry_after(*retry_after_ms)
                .repair(default_repair(*code, RepairContext::for_record(rec, &args))),
        )
    }

    /// The envelope for `structuredContent` and HTTP bodies.
    pub fn to_json(&self) -> Value {
        json!({
            "code": self.code.as_str(),
            "message": self.message,
            "details": self.details,
            "temporary": self.temporary,
            "retry_after_ms": self.retry_after_ms,
            "repair": self.repair,
            "request_id": self.request_id,
            "fingerprint": self.fingerprint,
        })
    }

    /// The envelope for JSON-RPC `error.data` (`machine_code` / `human_message`).
    pub fn to_jsonrpc_data(&self) -> Value {
        let mut v = self.to_json();
        if let Some(obj) = v.as_object_mut() {
            if let Some(c) = obj.remove("code") {
                obj.insert("machine_code".into(), c);
            }
            if let Some(m) = obj.remove("message") {
                obj.insert("human_message".into(), m);
            }
        }
        v
    }
}

/// An envelope as an HTTP response.
pub fn error_response(status: StatusCode, env: &Envelope) -> Response {
    let mut r = (status, axum::Json(env.to_json())).into_response();
    // HTTP clients and proxies read the wait from the header (whole seconds, rounded up).
    if let Some(ms) = env.retry_after_ms
        && let Ok(v) = axum::http::HeaderValue::from_str(&ms.div_ceil(1000).max(1).to_string())
    {
        r.headers_mut().insert(axum::http::header::RETRY_AFTER, v);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_faults_hide_their_text_and_are_not_temporary() {
        let e = ServiceError::Internal("sled: IO error: /var/lib/x: Input/output error".into());
        let env = Envelope::from_service_error(&e, RepairContext::default());
        assert_eq!(env.code, ErrorCode::RenderFailed);
        assert!(!env.temporary);
        assert!(!env.message.contains("sled") && !env.message.contains("/var/lib"));
        assert!(env.repair.is_none());
    }

    #[test]
    fn render_repairs_need_the_arguments() {
        assert!(default_repair(ErrorCode::RenderQuotaExceeded, RepairContext::default()).is_none());
        let args = json!({"source_asset_uri": "vidforge://assets/a_1"});
        let repair = default_repair(
            ErrorCode::RenderQuotaExceeded,
            RepairContext {
                arguments: Some(&args),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(repair.arguments, args);
    }

    #[test]
    fn shapes_match_the_contract() {
        let args = json!({"source_asset_uri": "vidforge://assets/a_X", "output_format": "mp4"});
        let env = Envelope::new(ErrorCode::WatermarkRejected, "declined")
            .field("watermark")
            .reason("User note: 'logo too large'.")
            .retry_after(Some(5))
            .repair(default_repair(
                ErrorCode::WatermarkRejected,
                RepairContext {
                    arguments: Some(&args),
                    ..Default::default()
                },
            ));
        let v = env.to_json();
        assert_eq!(v["code"], "watermark_rejected");
        assert_eq!(v["temporary"], false);
        assert!(v["retry_after_ms"].is_null(), "permanent codes carry null");
        assert_eq!(v["details"]["field"], "watermark");
        assert_eq!(v["repair"]["tool"], "vidforge_render_video");
        assert_eq!(v["repair"]["arguments"], args);
        assert!(v["request_id"].as_str().unwrap().starts_with("req_"));
        assert!(
            v["fingerprint"]
                .as_str()
                .unwrap()
                .starts_with("vidforge@1.0.0+")
        );
        let d = env.to_jsonrpc_data();
        assert_eq!(d["machine_code"], "watermark_rejected");
        assert_eq!(d["human_message"], "declined");
        assert!(d.get("code").is_none());

        let q =
            Envelope::from_service_error(&ServiceError::quota("full"), RepairContext::default());
        assert_eq!(q.to_json()["retry_after_ms"], 30_000);
        assert_eq!(q.to_json()["temporary"], true);
    }
}
