//! What a request declared in its per-request `_meta` client capabilities (tasks, the
//! elicitation modes): read by the handler, passed to extensions. On a legacy session (the
//! capabilities its `initialize` declared) the tasks extension is undefined and vidforge
//! sends no elicitation: such clients use the fallback tools and the approval page.

use rmcp::RoleServer;
use rmcp::service::RequestContext;
use serde_json::Value;

use super::capabilities::TASKS_EXTENSION;

/// What this request declared in its per-request `_meta` client capabilities.
pub struct Declared {
    pub tasks: bool,
    pub elicitation_form: bool,
    pub elicitation_url: bool,
    /// The whole declared `clientCapabilities` object (`null` when absent).
    pub caps: Value,
}

pub(super) fn declared(ctx: &RequestContext<RoleServer>) -> Declared {
    let caps = ctx.client_capabilities();
    let caps_json = caps
        .as_ref()
        .and_then(|c| serde_json::to_value(c).ok())
        .unwrap_or(Value::Null);
    let legacy = super::legacy::in_legacy_session(ctx);
    let tasks = !legacy
        && caps_json
            .get("extensions")
            .and_then(|e| e.get(TASKS_EXTENSION))
            .is_some();
    // `elicitation: {}` means form only; `{url: {}}` alone means URL mode only.
    let (elicitation_form, elicitation_url) = match caps_json.get("elicitation") {
        Some(Value::Object(_)) if legacy => (false, false),
        Some(Value::Object(e)) => (
            e.contains_key("form") || !e.contains_key("url"),
            e.contains_key("url"),
        ),
        _ => (false, false),
    };
    Declared {
        tasks,
        elicitation_form,
        elicitation_url,
        caps: caps_json,
    }
}

impl Declared {
    /// The declared elicitation modes.
    pub fn elicitation(&self) -> super::presentation::Elicitation {
        super::presentation::Elicitation {
            form: self.elicitation_form,
            url: self.elicitation_url,
        }
    }
}
