//! Tool-argument validation. Violations become `invalid_arguments` envelopes (tool results
//! with `isError: true`), never protocol errors. The rules mirror the input schemas in
//! [`super::tools`]: closed objects, strict enums, documented defaults.

use serde_json::{Map, Value};

use crate::catalog::ErrorCode;
use crate::store::{RenderArgs, WatermarkArgs};

use super::tools::{FORMATS, POSITIONS, RESOLUTIONS};
use super::wire::Envelope;

const ASSET_URI_PREFIX: &str = "vidforge://assets/";
const MAX_IDEMPOTENCY_KEY_CHARS: usize = 128;
const MAX_NOTE_CHARS: usize = 2000;

fn invalid(field: &str, reason: impl Into<String>) -> Envelope {
    let reason = reason.into();
    Envelope::new(
        ErrorCode::InvalidArguments,
        format!("Invalid arguments: {reason}"),
    )
    .field(field)
    .reason(reason)
}

fn object<'a>(v: &'a Value, field: &str) -> Result<&'a Map<String, Value>, Envelope> {
    v.as_object()
        .ok_or_else(|| invalid(field, format!("`{field}` must be an object")))
}

fn reject_unknown(map: &Map<String, Value>, allowed: &[&str], prefix: &str) -> Result<(), Envelope> {
    for key in map.keys() {
        if !allowed.contains(&key.as_str()) {
            let field = format!("{prefix}{key}");
            return Err(invalid(
                &field,
                format!("unknown property `{field}`; allowed: {}", allowed.join(", ")),
            ));
        }
    }
    Ok(())
}

fn required_str<'a>(map: &'a Map<String, Value>, key: &str, prefix: &str) -> Result<&'a str, Envelope> {
    let field = format!("{prefix}{key}");
    match map.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(invalid(&field, format!("`{field}` must be a string"))),
        None => Err(invalid(&field, format!("`{field}` is required"))),
    }
}

fn one_of(value: &str, allowed: &[&str], field: &str) -> Result<(), Envelope> {
    if allowed.contains(&value) {
        Ok(())
    } else {
        Err(invalid(
            field,
            format!("`{field}` must be one of {}; got {value:?}", allowed.join(", ")),
        ))
    }
}

fn asset_uri(value: &str, field: &str) -> Result<String, Envelope> {
    match value.strip_prefix(ASSET_URI_PREFIX) {
        Some(id) if !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') => {
            Ok(value.to_string())
        }
        _ => Err(invalid(
            field,
            format!("`{field}` must be an uploaded asset URI ({ASSET_URI_PREFIX}…), not a local path or external URL"),
        )),
    }
}

/// Validates `vidforge_render_video` arguments and applies the documented defaults.
pub fn parse_render_args(v: &Value) -> Result<RenderArgs, Envelope> {
    let map = object(v, "arguments")?;
    reject_unknown(
        map,
        &["source_asset_uri", "output_format", "resolution", "watermark", "idempotency_key"],
        "",
    )?;
    let source = asset_uri(required_str(map, "source_asset_uri", "")?, "source_asset_uri")?;
    let format = required_str(map, "output_format", "")?;
    one_of(format, &FORMATS, "output_format")?;
    let resolution = required_str(map, "resolution", "")?;
    one_of(resolution, &RESOLUTIONS, "resolution")?;
    let watermark = match map.get("watermark") {
        None => None,
        Some(wm) => {
            let wm = object(wm, "watermark")?;
            reject_unknown(wm, &["image_asset_uri", "position", "opacity"], "watermark.")?;
            let image = asset_uri(
                required_str(wm, "image_asset_uri", "watermark.")?,
                "watermark.image_asset_uri",
            )?;
            let position = match wm.get("position") {
                None => "bottom_right".to_string(),
                Some(Value::String(p)) => {
                    one_of(p, &POSITIONS, "watermark.position")?;
                    p.clone()
                }
                Some(_) => return Err(invalid("watermark.position", "`watermark.position` must be a string")),
            };
            let opacity = match wm.get("opacity") {
                None => 1.0,
                Some(Value::Number(n)) => match n.as_f64() {
                    Some(o) if (0.0..=1.0).contains(&o) => o,
                    _ => return Err(invalid("watermark.opacity", "`watermark.opacity` must be between 0 and 1")),
                },
                Some(_) => return Err(invalid("watermark.opacity", "`watermark.opacity` must be a number")),
            };
            Some(WatermarkArgs {
                image_asset: image,
                position,
                opacity,
            })
        }
    };
    let idempotency_key = match map.get("idempotency_key") {
        None => None,
        Some(Value::String(k)) if !k.is_empty() && k.chars().count() <= MAX_IDEMPOTENCY_KEY_CHARS => Some(k.clone()),
        Some(_) => {
            return Err(invalid(
                "idempotency_key",
                format!("`idempotency_key` must be a string of 1 to {MAX_IDEMPOTENCY_KEY_CHARS} characters"),
            ));
        }
    };
    Ok(RenderArgs {
        source_asset: source,
        output_format: format.to_string(),
        resolution: resolution.to_string(),
        watermark,
        idempotency_key,
    })
}

/// `{render_id}` only.
pub fn render_id_only(v: &Value) -> Result<String, Envelope> {
    let map = object(v, "arguments")?;
    reject_unknown(map, &["render_id"], "")?;
    let id = required_str(map, "render_id", "")?;
    if id.is_empty() {
        return Err(invalid("render_id", "`render_id` must not be empty"));
    }
    Ok(id.to_string())
}

/// `{render_id, approved, note?}`.
pub fn approval_args(v: &Value) -> Result<(String, bool, Option<String>), Envelope> {
    let map = object(v, "arguments")?;
    reject_unknown(map, &["render_id", "approved", "note"], "")?;
    let id = required_str(map, "render_id", "")?;
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

fn optional_note(v: Option<&Value>) -> Result<Option<String>, Envelope> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.chars().count() <= MAX_NOTE_CHARS => Ok(Some(s.clone())),
        Some(_) => Err(invalid("note", format!("`note` must be a string of at most {MAX_NOTE_CHARS} characters"))),
    }
}

/// No arguments at all (or an empty object).
pub fn no_arguments(v: &Value) -> Result<(), Envelope> {
    reject_unknown(object(v, "arguments")?, &[], "")
}

/// Reads a watermark decision from an elicitation result:
/// `accept` + `{approved, note?}` → decision; `decline` → rejection; `cancel` → no decision.
pub fn approval_from_elicitation(v: &Value) -> Result<Option<(bool, Option<String>)>, Envelope> {
    let map = object(v, "inputResponses.watermark-approval-1")?;
    match map.get("action").and_then(Value::as_str) {
        Some("accept") => {
            let content = map
                .get("content")
                .and_then(Value::as_object)
                .ok_or_else(|| invalid("content", "an accepted elicitation must carry `content`"))?;
            let approved = content
                .get("approved")
                .and_then(Value::as_bool)
                .ok_or_else(|| invalid("content.approved", "`content.approved` must be a boolean"))?;
            Ok(Some((approved, optional_note(content.get("note"))?)))
        }
        Some("decline") => Ok(Some((false, Some("The user declined the approval request.".into())))),
        Some("cancel") => Ok(None),
        _ => Err(invalid("action", "`action` must be accept, decline or cancel")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_are_applied() {
        let a = parse_render_args(&json!({
            "source_asset_uri": "vidforge://assets/a_1", "output_format": "mp4", "resolution": "720p",
            "watermark": { "image_asset_uri": "vidforge://assets/logo" }
        }))
        .unwrap();
        let wm = a.watermark.unwrap();
        assert_eq!(wm.position, "bottom_right");
        assert_eq!(wm.opacity, 1.0);
    }

    #[test]
    fn violations_name_the_field() {
        let cases = [
            (json!({"output_format": "mp4", "resolution": "720p"}), "source_asset_uri"),
            (json!({"source_asset_uri": "/tmp/x.mp4", "output_format": "mp4", "resolution": "720p"}), "source_asset_uri"),
            (json!({"source_asset_uri": "vidforge://assets/a", "output_format": "avi", "resolution": "720p"}), "output_format"),
            (json!({"source_asset_uri": "vidforge://assets/a", "output_format": "mp4", "resolution": "8k"}), "resolution"),
            (json!({"source_asset_uri": "vidforge://assets/a", "output_format": "mp4", "resolution": "720p", "extra": 1}), "extra"),
            (json!({"source_asset_uri": "vidforge://assets/a", "output_format": "mp4", "resolution": "720p", "watermark": {"image_asset_uri": "vidforge://assets/l", "opacity": 2}}), "watermark.opacity"),
            (json!({"source_asset_uri": "vidforge://assets/a", "output_format": "mp4", "resolution": "720p", "idempotency_key": ""}), "idempotency_key"),
        ];
        for (args, field) in cases {
            let env = parse_render_args(&args).unwrap_err();
            assert_eq!(env.code, ErrorCode::InvalidArguments);
            assert_eq!(env.field.as_deref(), Some(field), "{args}");
        }
    }
}
