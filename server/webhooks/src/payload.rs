//! The body of a delivery, in the Standard Webhooks shape (`type`, `timestamp`, `data`):
//!
//! ```json
//! { "type": "render.succeeded", "timestamp": "2026-12-02T09:14:03.120Z",
//!   "data": { "render_id": "task_…", "task": { …what tasks/get answers… },
//!             "download_url": "…", "video_uri": "…", "size_bytes": 1234, "duration_seconds": 4.0,
//!             "quality": { "psnr_db": 43.2, … } } }
//! ```
//!
//! `data.task` is the render exactly as `tasks/get` shows it (to a client that declared no
//! elicitation) at the moment of the transition, made by the MCP front's own presenter, so
//! the two cannot drift apart. Beside it, per type: `approval_url` (input required), the
//! result's links and figures (succeeded), the §6 error envelope as `error` (failed).

use serde_json::{Map, Value, json};

use vidforge_core::clock::rfc3339;
use vidforge_core::store::{EventKind, OutboxEvent};
use vidforge_mcp::presentation::{Elicitation, Presenter, to_value};

/// The JSON body of `event` (the same bytes on every attempt: it depends on the event alone).
pub fn body(presenter: &Presenter, event: &OutboxEvent) -> Vec<u8> {
    let rec = &event.render;
    let mut task = to_value(&presenter.detailed_task(rec, Elicitation::NONE));
    task["resultType"] = json!("complete");
    let mut data = Map::new();
    data.insert("render_id".into(), json!(rec.id));
    match event.kind {
        EventKind::InputRequired => {
            data.insert(
                "approval_url".into(),
                json!(presenter.approval_url(&rec.id)),
            );
        }
        EventKind::Succeeded => {
            data.insert("download_url".into(), json!(presenter.download_url(rec)));
            let result = &task["result"]["structuredContent"];
            // `quality` only when the render measured it.
            for key in [
                "video_uri",
                "size_bytes",
                "duration_seconds",
                "expires_at",
                "quality",
            ] {
                if let Some(v) = result.get(key) {
                    data.insert(key.into(), v.clone());
                }
            }
        }
        EventKind::Failed => {
            if let Some(envelope) = task["result"].get("structuredContent") {
                data.insert("error".into(), envelope.clone());
            }
        }
        EventKind::Cancelled => {}
    }
    data.insert("task".into(), task);
    let body = json!({
        "type": event.kind.as_str(),
        "timestamp": rfc3339(event.created_at),
        "data": Value::Object(data),
    });
    serde_json::to_vec(&body).unwrap_or_default()
}
