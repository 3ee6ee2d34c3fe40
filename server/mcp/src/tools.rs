//! Tool definitions: names, schemas, descriptions, annotations and the `_meta` error catalog.
//!
//! Built once at start-up (rmcp builds a handler per HTTP request, so nothing here is rebuilt
//! per call). Descriptions interpolate the deployment's configured TTLs and timeouts
//! ([`catalog::Lifetimes`]), so they cannot drift from behaviour.

use serde_json::{Value, json};

use vidforge_gpu::Position;

use vidforge_core::catalog::{self, ErrorCode, Lifetimes};
use vidforge_core::store::{OutputFormat, Resolution};

pub use vidforge_http::envelope::tools::{
    APPROVE_WATERMARK, CANCEL_RENDER, GET_RENDER_STATUS, RENDER_VIDEO,
};
pub const GET_CAPABILITIES: &str = "vidforge_get_capabilities";

/// Deterministic `tools/list` order.
pub const TOOL_ORDER: [&str; 5] = [
    RENDER_VIDEO,
    GET_RENDER_STATUS,
    APPROVE_WATERMARK,
    CANCEL_RENDER,
    GET_CAPABILITIES,
];

pub const ACCEPTED_STATES: [&str; 3] = ["queued", "rendering", "awaiting_watermark_approval"];
pub const FALLBACK_STATES: [&str; 6] = [
    "queued",
    "rendering",
    "awaiting_watermark_approval",
    "succeeded",
    "failed",
    "cancelled",
];
pub const TERMINAL_FALLBACK_STATES: [&str; 3] = ["succeeded", "failed", "cancelled"];

const SCHEMA_DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

use std::time::Duration;

fn error_catalog(codes: &[ErrorCode], lifetimes: &Lifetimes) -> Value {
    Value::Array(
        codes
            .iter()
            .map(|c| {
                json!({"code": c.as_str(), "temporary": c.temporary(), "description": c.description(lifetimes)})
            })
            .collect(),
    )
}

/// The render tool's input schema, stating the configured idempotency-key lifetime.
pub fn render_input_schema(idempotency_ttl: Duration) -> Value {
    json!({
        "$schema": SCHEMA_DIALECT,
        "type": "object",
        "required": ["source_asset_uri", "output_format", "resolution"],
        "properties": {
            "source_asset_uri": { "type": "string", "format": "uri",
                "description": "Uploaded source asset URI (vidforge://assets/…). Not a local path or external URL." },
            "output_format": { "type": "string", "enum": OutputFormat::ALL.map(OutputFormat::as_str) },
            "resolution": { "type": "string", "enum": Resolution::ALL.map(Resolution::as_str) },
            "watermark": {
                "type": "object",
                "required": ["image_asset_uri"],
                "properties": {
                    "image_asset_uri": { "type": "string", "format": "uri",
                        "description": "Watermark image asset URI (vidforge://assets/…)." },
                    "position": { "type": "string", "enum": Position::ALL.map(Position::as_str),
                        "description": "Omitted means bottom_right (the server applies this default).",
                        "default": "bottom_right" },
                    "opacity": { "type": "number", "minimum": 0, "maximum": 1,
                        "description": "Omitted means 1.0 (the server applies this default).", "default": 1.0 }
                },
                "additionalProperties": false,
                "description": "Omit entirely to render without a watermark; when present, the render pauses for user approval of a preview."
            },
            "idempotency_key": { "type": "string", "minLength": 1, "maxLength": 128,
                "description": format!("Optional client-supplied key; calls with the same key within {} return the same render job instead of starting a new one. Omitted means no deduplication — each call renders.", catalog::human_duration(idempotency_ttl)) },
            "quality_report": { "type": "boolean",
                "description": QUALITY_REPORT_DESCRIPTION }
        },
        "additionalProperties": false
    })
}

/// The render tool's `quality_report` argument.
pub const QUALITY_REPORT_DESCRIPTION: &str = "Optional: true to measure how faithful the output is (PSNR and SSIM of the encoded video against the frames the encoder was given, the mean and the worst second), reported under `quality` in the result; false not to. It costs a decode and a comparison of every frame. Omitted means the server's default (its quality_report setting; off unless the operator turned it on).";

/// The `quality` result property: a render's figures, present only when measured.
fn quality_schema() -> Value {
    let figures = json!({
        "psnr_y_db": { "type": "number", "description": "PSNR of the luma plane, dB (100 for identical pictures)." },
        "psnr_db": { "type": "number", "description": "PSNR of all planes weighted by their samples, dB (FFmpeg psnr's average)." },
        "ssim": { "type": "number", "minimum": 0, "maximum": 1, "description": "SSIM of all planes (FFmpeg ssim's All)." },
        "frames_measured": { "type": "integer", "minimum": 1 },
        "worst": {
            "type": "object",
            "required": ["at_seconds", "psnr_y_db", "psnr_db", "ssim"],
            "properties": {
                "at_seconds": { "type": "integer", "minimum": 0, "description": "The worst second's start, whole seconds into the output." },
                "psnr_y_db": { "type": "number" }, "psnr_db": { "type": "number" }, "ssim": { "type": "number" }
            },
            "additionalProperties": false,
            "description": "The one-second window with the lowest PSNR."
        }
    });
    let mut segment = figures.clone();
    let m = segment.as_object_mut().expect("an object");
    m.insert("index".into(), json!({ "type": "integer", "minimum": 0 }));
    m.insert("start_seconds".into(), json!({ "type": "number" }));
    m.insert("end_seconds".into(), json!({ "type": "number" }));
    let mut whole = figures;
    whole.as_object_mut().expect("an object").insert(
        "segments".into(),
        json!({ "type": "array", "description": "A split render's segments, each measured on its own.",
            "items": { "type": "object", "properties": segment, "additionalProperties": false,
                "required": ["index", "start_seconds", "end_seconds", "psnr_y_db", "psnr_db", "ssim", "frames_measured", "worst"] } }),
    );
    json!({
        "type": "object",
        "required": ["psnr_y_db", "psnr_db", "ssim", "frames_measured", "worst"],
        "properties": whole,
        "additionalProperties": false,
        "description": "How faithful the video is: PSNR and SSIM of the encoded output against the frames the encoder was given. Present only when the render measured it (quality_report)."
    })
}

fn render_output_schema() -> Value {
    json!({
        "$schema": SCHEMA_DIALECT,
        "type": "object",
        "required": ["status"],
        "properties": {
            "status": { "type": "string", "enum": ["completed", "accepted"],
                "description": "Discriminator. 'completed': the render finished (fields video_uri, duration_seconds, size_bytes, resolution, watermark_applied, expires_at are present). 'accepted': non-task clients only — the render was started (fields render_id, state, poll_after_ms, expires_at, follow_up are present)." },
            "video_uri": { "type": "string", "format": "uri" },
            "duration_seconds": { "type": "number" },
            "size_bytes": { "type": "integer" },
            "resolution": { "type": "string" },
            "watermark_applied": { "type": "boolean" },
            "expires_at": { "type": "string", "format": "date-time",
                "description": "When the result resource (completed) or the render handle (accepted) expires." },
            "render_id": { "type": "string" },
            "state": { "type": "string", "enum": ACCEPTED_STATES },
            "poll_after_ms": { "type": "integer", "minimum": 0 },
            "follow_up": follow_up_schema(),
            "quality": quality_schema()
        },
        "additionalProperties": false
    })
}

fn follow_up_schema() -> Value {
    json!({
        "type": "object",
        "required": ["next_step", "tool", "arguments"],
        "properties": {
            "next_step": { "type": "string" },
            "tool": { "type": "string" },
            "arguments": { "type": "object", "additionalProperties": true },
            "alternative": { "type": "string" }
        },
        "additionalProperties": false
    })
}

fn render_id_property() -> Value {
    json!({ "type": "string", "minLength": 1,
        "description": "The render id returned by vidforge_render_video (render_id, identical to the taskId)." })
}

fn render_description(approval_timeout: Duration) -> String {
    format!(
        "Render a source video asset to a finished video, optionally with a watermark.\n\n\
When to use: the source asset is already uploaded (a vidforge://assets/… URI) and you want a finished file. Do not use to trim, edit, or transcode interactively.\n\n\
Duration and execution mode: renders take 1–10 minutes. When the request declares the io.modelcontextprotocol/tasks extension, this tool always answers with a task (resultType: \"task\"); poll tasks/get, respecting pollIntervalMs. Without the extension it returns immediately with status: \"accepted\" and a render_id — poll vidforge_get_render_status.\n\n\
Watermark approval: if `watermark` is set, the render pauses before final encode for user approval of a preview. On the task path this surfaces as task status input_required (form elicitation when your request declares elicitation.form, the browser approval page in URL mode when it declares elicitation.url; otherwise statusMessage names that page and vidforge_approve_watermark). If approval does not arrive within {m}, the render ends as a completed task whose result carries the watermark_approval_timeout error. Omit `watermark` to render without a watermark and without any pause.\n\n\
Retries: each call starts a new paid render. If a call times out or the transport drops, do not blind-retry — re-send with the same `idempotency_key` (returns the existing job), or check vidforge_get_render_status first.\n\n\
Example: {{\"source_asset_uri\": \"vidforge://assets/a_9F3K\", \"output_format\": \"mp4\", \"resolution\": \"1080p\", \"watermark\": {{\"image_asset_uri\": \"vidforge://assets/logo_2B\", \"position\": \"bottom_right\", \"opacity\": 0.6}}}}",
        m = catalog::human_duration(approval_timeout)
    )
}

/// Every tool definition as wire JSON, in [`TOOL_ORDER`], for the deployment's configured
/// lifetimes.
pub fn tool_definitions(lifetimes: &Lifetimes) -> Vec<Value> {
    let status_output = json!({
        "$schema": SCHEMA_DIALECT,
        "type": "object",
        "required": ["render_id", "state", "terminal", "poll_after_ms", "status_message", "expires_at", "terminal_states"],
        "properties": {
            "render_id": { "type": "string" },
            "state": { "type": "string", "enum": FALLBACK_STATES },
            "terminal": { "type": "boolean" },
            "poll_after_ms": { "type": "integer", "minimum": 0 },
            "progress": { "type": "number", "minimum": 0, "maximum": 1 },
            "status_message": { "type": "string" },
            "expires_at": { "type": "string", "format": "date-time" },
            "terminal_states": { "type": "array", "items": { "type": "string", "enum": TERMINAL_FALLBACK_STATES } },
            "watermark_preview_uri": { "type": "string", "format": "uri" },
            "video_uri": { "type": "string", "format": "uri" },
            "duration_seconds": { "type": "number" },
            "size_bytes": { "type": "integer" },
            "resolution": { "type": "string" },
            "watermark_applied": { "type": "boolean" },
            "error": { "type": "object", "description": "On state failed: the full error envelope (code, message, details, temporary, retry_after_ms, repair, request_id, fingerprint)." },
            "follow_up": follow_up_schema(),
            "quality": quality_schema()
        },
        "additionalProperties": false
    });
    vec![
        json!({
            "name": RENDER_VIDEO,
            "title": "Render video",
            "description": render_description(lifetimes.approval_timeout),
            "inputSchema": render_input_schema(lifetimes.idempotency_ttl),
            "outputSchema": render_output_schema(),
            "annotations": { "readOnlyHint": false, "destructiveHint": false, "idempotentHint": false, "openWorldHint": false },
            "_meta": { "com.vidforge/errors": error_catalog(&ErrorCode::RENDER_TOOL_INLINE, lifetimes) }
        }),
        json!({
            "name": GET_RENDER_STATUS,
            "title": "Get render status",
            "description": format!("Fallback for clients without the io.modelcontextprotocol/tasks extension (a labelled convention mirroring tasks/get; task-capable clients should prefer tasks/get). Returns the render's state ({}), progress, and on success the result fields; on failure the full error envelope; while awaiting approval the watermark preview URI and a follow_up naming vidforge_approve_watermark. Status stays reachable for {}.", FALLBACK_STATES.join(" | "), catalog::human_duration(lifetimes.result_ttl)),
            "inputSchema": { "$schema": SCHEMA_DIALECT, "type": "object", "required": ["render_id"],
                "properties": { "render_id": render_id_property() }, "additionalProperties": false },
            "outputSchema": status_output,
            "annotations": { "readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false },
            "_meta": { "com.vidforge/errors": error_catalog(&[ErrorCode::RenderNotFound, ErrorCode::InvalidArguments], lifetimes) }
        }),
        json!({
            "name": APPROVE_WATERMARK,
            "title": "Approve or reject watermark",
            "description": format!("Record the user's decision on a render's watermark preview (vidforge://renders/{{render_id}}/watermark-preview.png). approved: true resumes the render; approved: false (optionally with a note) rejects it and ends the render with watermark_rejected. Serves clients without the tasks extension and task-capable clients without form elicitation. Replaying the same decision is a no-op; a conflicting second decision fails with approval_already_recorded. Unanswered previews time out after {}.", catalog::human_duration(lifetimes.approval_timeout)),
            "inputSchema": { "$schema": SCHEMA_DIALECT, "type": "object", "required": ["render_id", "approved"],
                "properties": {
                    "render_id": render_id_property(),
                    "approved": { "type": "boolean", "description": "true to continue the render with this watermark; false to reject and end it." },
                    "note": { "type": "string", "maxLength": 2000, "description": "Optional reason or requested adjustment when rejecting." }
                }, "additionalProperties": false },
            "outputSchema": { "$schema": SCHEMA_DIALECT, "type": "object", "required": ["render_id", "approved", "state"],
                "properties": {
                    "render_id": { "type": "string" },
                    "approved": { "type": "boolean" },
                    "state": { "type": "string", "enum": FALLBACK_STATES },
                    "already_recorded": { "type": "boolean" }
                }, "additionalProperties": false },
            "annotations": { "readOnlyHint": false, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false },
            "_meta": { "com.vidforge/errors": error_catalog(&[ErrorCode::RenderNotFound, ErrorCode::ApprovalAlreadyRecorded, ErrorCode::ApprovalNotPending, ErrorCode::InvalidArguments], lifetimes) }
        }),
        json!({
            "name": CANCEL_RENDER,
            "title": "Cancel render",
            "description": "Fallback mirror of tasks/cancel: asks a render to stop. Cooperative — the answer {\"acknowledged\": true, \"state\": \"cancelling\"} means intent received; confirm with vidforge_get_render_status. Not destructive: source assets and any completed result are untouched, and a cancelled render can be recreated by calling vidforge_render_video again. Cancelling a finished render is a no-op.",
            "inputSchema": { "$schema": SCHEMA_DIALECT, "type": "object", "required": ["render_id"],
                "properties": { "render_id": render_id_property() }, "additionalProperties": false },
            "outputSchema": { "$schema": SCHEMA_DIALECT, "type": "object", "required": ["acknowledged", "state"],
                "properties": {
                    "acknowledged": { "type": "boolean" },
                    "state": { "type": "string", "enum": ["cancelling", "succeeded", "failed", "cancelled"] }
                }, "additionalProperties": false },
            "annotations": { "readOnlyHint": false, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false },
            "_meta": { "com.vidforge/errors": error_catalog(&[ErrorCode::RenderNotFound, ErrorCode::InvalidArguments], lifetimes) }
        }),
        json!({
            "name": GET_CAPABILITIES,
            "title": "Get vidforge capabilities",
            "description": "Returns vidforge's capability summary: what it does and does not do, how errors are carried, task semantics (completed is delivery, not success), negotiated capabilities and fallbacks, and the full error catalog. Same content as the vidforge://capabilities resource.",
            "inputSchema": { "$schema": SCHEMA_DIALECT, "type": "object", "properties": {}, "additionalProperties": false },
            "annotations": { "readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false }
        }),
    ]
}

/// The full error catalog (capability summary).
pub fn full_error_catalog(lifetimes: &Lifetimes) -> Value {
    error_catalog(&ErrorCode::ALL, lifetimes)
}
