//! The fallback tools' typed arguments as this front's envelopes, and the elicitation answers.
//! Violations become `invalid_arguments` envelopes (tool results with `isError: true`), never
//! protocol errors. The input types themselves are in [`crate::inputs`]; the render tool's
//! refusals go through `ServiceError` ([`crate::inputs::render_args`]).

use serde_json::{Map, Value};

use vidforge_core::catalog::ErrorCode;
use vidforge_http::envelope::Envelope;

use crate::inputs::{self, Note, ToolInput};

// Errors are boxed: an envelope is large and these results are almost always Ok.

fn invalid(field: &str, reason: impl Into<String>) -> Box<Envelope> {
    let reason = reason.into();
    Box::new(
        Envelope::new(
            ErrorCode::InvalidArguments,
            format!("Invalid arguments: {reason}"),
        )
        .field(field)
        .reason(reason),
    )
}

fn object<'a>(v: &'a Value, field: &str) -> Result<&'a Map<String, Value>, Box<Envelope>> {
    v.as_object()
        .ok_or_else(|| invalid(field, format!("`{field}` must be an object")))
}

/// A fallback tool's (or `vidforge_get_capabilities`') arguments as its input type; a misfit
/// is this front's `invalid_arguments` envelope (the reason names the field).
pub fn fallback_input<T: ToolInput>(v: &Value) -> Result<T, Box<Envelope>> {
    inputs::parse(v).map_err(|e| invalid(&e.field, format!("`{}` {}", e.field, e.reason)))
}

fn optional_note(v: Option<&Value>) -> Result<Option<String>, Box<Envelope>> {
    match v {
        None => Ok(None),
        Some(Value::String(s)) => match Note::try_from(s.clone()) {
            Ok(note) => Ok(Some(note.0)),
            Err(reason) => Err(invalid("note", format!("`note` {reason}"))),
        },
        Some(_) => Err(invalid("note", format!("`note` {}", inputs::NOTE_REASON))),
    }
}

/// Reads a watermark decision from an elicitation result:
/// `accept` + `{approved, note?}` → decision; `decline` → rejection; `cancel` → no decision.
pub fn approval_from_elicitation(
    v: &Value,
) -> Result<Option<(bool, Option<String>)>, Box<Envelope>> {
    let map = object(v, "inputResponses.watermark-approval-1")?;
    match map.get("action").and_then(Value::as_str) {
        Some("accept") => {
            let content = map
                .get("content")
                .and_then(Value::as_object)
                .ok_or_else(|| {
                    invalid("content", "an accepted elicitation must carry `content`")
                })?;
            let approved = content
                .get("approved")
                .and_then(Value::as_bool)
                .ok_or_else(|| {
                    invalid("content.approved", "`content.approved` must be a boolean")
                })?;
            Ok(Some((approved, optional_note(content.get("note"))?)))
        }
        Some("decline") => Ok(Some((
            false,
            Some("The user declined the approval request.".into()),
        ))),
        Some("cancel") => Ok(None),
        _ => Err(invalid(
            "action",
            "`action` must be accept, decline or cancel",
        )),
    }
}

/// Reads the answer to the URL-mode approval request (the approval page): `accept` only
/// means the user agreed to open the page, and `cancel` that they dismissed it; neither
/// decides anything (the page does). `decline` is a rejection, as in form mode.
pub fn approval_from_page_elicitation(
    v: &Value,
) -> Result<Option<(bool, Option<String>)>, Box<Envelope>> {
    let map = object(v, "inputResponses.watermark-approval-page-1")?;
    match map.get("action").and_then(Value::as_str) {
        Some("accept" | "cancel") => Ok(None),
        Some("decline") => Ok(Some((
            false,
            Some("The user declined to open the approval page.".into()),
        ))),
        _ => Err(invalid(
            "action",
            "`action` must be accept, decline or cancel",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn page_elicitation_answers_decide_only_on_decline() {
        assert_eq!(
            approval_from_page_elicitation(&json!({"action": "accept"})).unwrap(),
            None
        );
        assert_eq!(
            approval_from_page_elicitation(&json!({"action": "cancel"})).unwrap(),
            None
        );
        assert!(
            !approval_from_page_elicitation(&json!({"action": "decline"}))
                .unwrap()
                .unwrap()
                .0
        );
        assert!(approval_from_page_elicitation(&json!({"action": "maybe"})).is_err());
    }

    #[test]
    fn elicitation_actions_map_to_decisions() {
        let accept = json!({"action": "accept", "content": {"approved": false, "note": "too big"}});
        assert_eq!(
            approval_from_elicitation(&accept).unwrap(),
            Some((false, Some("too big".into())))
        );
        assert_eq!(
            approval_from_elicitation(&json!({"action": "cancel"})).unwrap(),
            None
        );
        assert_eq!(
            approval_from_elicitation(&json!({"action": "decline"}))
                .unwrap()
                .map(|d| d.0),
            Some(false)
        );
        assert!(approval_from_elicitation(&json!({"action": "accept", "content": {}})).is_err());
    }
}
