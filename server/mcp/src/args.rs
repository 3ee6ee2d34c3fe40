//! Argument validation of the fallback tools and of elicitation answers. Violations become
//! `invalid_arguments` envelopes (tool results with `isError: true`), never protocol errors.
//! The render tool's arguments are validated by [`vidforge_core::store::RenderArgs::from_tool_arguments`].

use serde_json::{Map, Value};

use vidforge_core::args::{ArgError, reject_unknown, required_str};
use vidforge_core::catalog::{ErrorCode, MAX_NOTE_CHARS};
use vidforge_http::envelope::Envelope;

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

/// A schema misfit found by the shared JSON helpers, as this front's `invalid_arguments`.
fn misfit(e: ArgError) -> Box<Envelope> {
    invalid(&e.field, format!("`{}` {}", e.field, e.reason))
}

/// `{render_id}` only.
pub fn render_id_only(v: &Value) -> Result<String, Box<Envelope>> {
    let map = object(v, "arguments")?;
    reject_unknown(map, &["render_id"], "").map_err(misfit)?;
    let id = required_str(map, "render_id", "").map_err(misfit)?;
    if id.is_empty() {
        return Err(invalid("render_id", "`render_id` must not be empty"));
    }
    Ok(id.to_string())
}

/// `{render_id, approved, note?}`.
pub fn approval_args(v: &Value) -> Result<(String, bool, Option<String>), Box<Envelope>> {
    let map = object(v, "arguments")?;
    reject_unknown(map, &["render_id", "approved", "note"], "").map_err(misfit)?;
    let id = required_str(map, "render_id", "").map_err(misfit)?;
    if id.is_empty() {
        return Err(invalid("render_id", "`render_id` must not be empty"));
    }
    let approved = match map.get("approved") {
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(invalid("approved", "`approved` must be a boolean")),
        None => return Err(invalid("approved", "`approved` is required")),
    };
    let note = optional_note(map.get("note"))?;
    Ok((id.to_string(), approved, note))
}

fn optional_note(v: Option<&Value>) -> Result<Option<String>, Box<Envelope>> {
    match v {
        None => Ok(None),
        Some(Value::String(s)) if s.chars().count() <= MAX_NOTE_CHARS => Ok(Some(s.clone())),
        Some(_) => Err(invalid(
            "note",
            format!("`note` must be a string of at most {MAX_NOTE_CHARS} characters"),
        )),
    }
}

/// No arguments at all (or an empty object).
pub fn no_arguments(v: &Value) -> Result<(), Box<Envelope>> {
    reject_unknown(object(v, "arguments")?, &[], "").map_err(misfit)
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
    fn approval_arguments_are_closed_and_typed() {
        assert!(approval_args(&json!({"render_id": "task_1", "approved": true})).is_ok());
        let env = approval_args(&json!({"render_id": "task_1", "approved": "yes"})).unwrap_err();
        assert_eq!(env.details["field"], "approved");
        let env =
            approval_args(&json!({"render_id": "task_1", "approved": true, "x": 1})).unwrap_err();
        assert_eq!(env.details["field"], "x");
        assert!(render_id_only(&json!({})).is_err());
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
