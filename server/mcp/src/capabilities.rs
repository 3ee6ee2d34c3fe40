//! The capability-summary block (contract §1), served by the `vidforge://capabilities` resource
//! and the `vidforge_get_capabilities` tool. Generated from [`vidforge_core::catalog`], the configured
//! [`Lifetimes`] and the tool definitions so it cannot drift from behaviour.

use serde_json::{Value, json};

use vidforge_core::catalog::{self, Lifetimes};
use vidforge_core::engine::HardwareInfo;

use super::tools;
use vidforge_http::envelope::fingerprint;

pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
pub const PROTOCOL_REVISION: &str = "2026-07-28";
/// The `initialize`-based revisions served too, newest first: a client that opens with
/// `initialize` naming one of these gets a legacy session on the same endpoint (`legacy.rs`).
/// The tasks extension is undefined there; such clients render through the fallback tools.
pub const LEGACY_REVISIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// How callers authenticate (the summary's `authorization` block): static bearer tokens,
/// and the OAuth issuers whose access tokens are accepted for `resource`.
pub fn authorization(auth: &vidforge_http::auth::Auth) -> Value {
    match auth.oauth() {
        Some(oauth) => json!({
            "bearer_tokens": true,
            "oauth": {
                "resource": oauth.resource(),
                "authorization_servers": oauth.issuers().collect::<Vec<_>>(),
                "resource_metadata": oauth.metadata_url(),
                "scopes": vidforge_http::scope::ALL,
            }
        }),
        None => json!({ "bearer_tokens": auth.required(), "oauth": null }),
    }
}

pub fn summary(lifetimes: &Lifetimes, hardware: &HardwareInfo, authorization: Value) -> Value {
    let approval = catalog::human_duration(lifetimes.approval_timeout);
    json!({
        "server": {
            "name": "vidforge",
            "version": env!("CARGO_PKG_VERSION"),
            "fingerprint": fingerprint(),
            "transport": "streamable-http",
            "spec_target": { "revision": PROTOCOL_REVISION, "extensions": [TASKS_EXTENSION] },
            "served_revisions": {
                "modern": [PROTOCOL_REVISION],
                "legacy": LEGACY_REVISIONS,
                "legacy_note": "initialize-based clients (2024-11-05 to 2025-11-25) get a session (Mcp-Session-Id) on the same /mcp endpoint; the tasks extension is undefined there, so they render through the fallback tools; an unknown or expired session answers 404 and the client initializes again (renders live outside sessions)."
            },
            "summary": "Render source video assets to finished videos, with optional watermark requiring user approval mid-render."
        },
        "does": [
            "Render an uploaded asset to mp4/webm/mov at 720p–4k.",
            "Pause a render for user watermark approval, then resume.",
            "Report status, deliver results as linked resources, cancel in-flight renders."
        ],
        "does_not": [
            "Upload or manage source assets (use your asset pipeline).",
            "Edit, trim, or transcode interactively.",
            "Stream partial video output."
        ],
        "hardware": {
            "compositor": hardware.compositor,
            "decoder": hardware.decoder,
            "h264_encoder": hardware.h264_encoder
        },
        "authorization": authorization,
        "tools": tools::TOOL_ORDER,
        "error_carriers": { "tool_errors": "structuredContent", "non_tool_rpc_errors": "error.data" },
        "error_catalog": tools::full_error_catalog(lifetimes),
        "task_semantics": {
            "note": "`completed` is a delivery statement, not a success statement: a render that fails semantically (including watermark rejection or approval timeout) arrives as a completed task whose result has isError: true. `failed` is reserved for JSON-RPC faults. Always inspect result.isError.",
            "task_ttl_ms": lifetimes.task_ttl.as_millis() as u64,
            "poll_interval_ms": {
                "working": catalog::POLL_INTERVAL_WORKING.as_millis() as u64,
                "input_required": catalog::POLL_INTERVAL_AWAITING.as_millis() as u64
            },
            "result_retention": format!(
                "render results and status remain reachable via vidforge_get_render_status and the vidforge://videos/{{render_id}}/final.{{ext}} resource for {}",
                catalog::human_duration(lifetimes.result_ttl)
            )
        },
        "negotiated_capabilities": {
            "server": [format!("capabilities.extensions[{TASKS_EXTENSION}]")],
            "client": [format!("clientCapabilities.extensions[{TASKS_EXTENSION}]"), "clientCapabilities.elicitation.form", "clientCapabilities.elicitation.url"],
            "fallbacks": {
                "legacy_clients": "an initialize-based session (2025-11-25 and older) never has the tasks extension or elicitation: vidforge_render_video answers accepted, approve with vidforge_approve_watermark or the approval page, poll vidforge_get_render_status, read the result's resource_link with resources/read or HTTP.",
                "no_tasks": "vidforge_render_video returns status:'accepted' with a render_id; poll vidforge_get_render_status, cancel via vidforge_cancel_render.",
                "no_elicitation": "watermark approval is requested via the task's input_required status message, which names the browser approval page (/approvals/{render_id}) and vidforge_approve_watermark; no ElicitRequest is sent.",
                "url_elicitation": "with elicitation.url declared, the task's inputRequests also offer the browser approval page in URL mode (key watermark-approval-page-1); the decision is made on the page, and accept only means the user opened it.",
                "approval_never_arrives": format!("after {approval} awaiting approval the render ends as a completed task whose result carries the watermark_approval_timeout error envelope.")
            },
            "fallback_tools_note": "vidforge_get_render_status, vidforge_approve_watermark and vidforge_cancel_render are a labelled convention mirroring tasks/get, tasks/update and tasks/cancel for clients without the tasks extension; task-capable clients should prefer the native lifecycle."
        }
    })
}
