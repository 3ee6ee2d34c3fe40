//! Validation of `vidforge_render_video` arguments into [`RenderArgs`], and the canonical
//! hashes that bind idempotency keys and watermark decisions to exact parameters.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use vidforge_gpu::Position;

use crate::error::ServiceError;
use crate::store::{OutputFormat, RenderArgs, Resolution, WatermarkArgs};
use crate::uri;

/// `watermark.position` when omitted.
pub const DEFAULT_POSITION: Position = Position::BottomRight;
/// `watermark.opacity` when omitted.
pub const DEFAULT_OPACITY: f64 = 1.0;
/// `idempotency_key` length bounds.
pub const IDEMPOTENCY_KEY_MAX: usize = 128;

const TOP_LEVEL: [&str; 5] = [
    "source_asset_uri",
    "output_format",
    "resolution",
    "watermark",
    "idempotency_key",
];
const WATERMARK_KEYS: [&str; 3] = ["image_asset_uri", "position", "opacity"];

impl RenderArgs {
    /// Validates the literal tool arguments against the tool's input schema (closed objects,
    /// enums, ranges) and applies the documented defaults. Asset URIs become asset ids; whether
    /// they exist is checked at creation.
    pub fn from_tool_arguments(args: &Value) -> Result<RenderArgs, ServiceError> {
        let obj = args
            .as_object()
            .ok_or_else(|| ServiceError::invalid("arguments", "must be an object"))?;
        reject_unknown(obj, &TOP_LEVEL, "")?;
        let source = required_str(obj, "source_asset_uri", "")?;
        let source_asset = asset_id(source, "source_asset_uri")?;
        let fmt = required_str(obj, "output_format", "")?;
        let output_format = OutputFormat::from_name(fmt).ok_or_else(|| {
            ServiceError::invalid("output_format", "must be one of mp4, webm, mov")
        })?;
        let res = required_str(obj, "resolution", "")?;
        let resolution = Resolution::from_name(res)
            .ok_or_else(|| ServiceError::invalid("resolution", "must be one of 720p, 1080p, 4k"))?;
        // Optional properties are omitted, never `null` (the schema allows no null).
        let watermark = match obj.get("watermark") {
            None => None,
            Some(Value::Object(w)) => Some(parse_watermark(w)?),
            Some(_) => {
                return Err(ServiceError::invalid(
                    "watermark",
                    "must be an object (omit it to render without a watermark)",
                ));
            }
        };
        let idempotency_key = match obj.get("idempotency_key") {
            None => None,
            Some(Value::String(k)) => Some(k.clone()),
            Some(_) => {
                return Err(ServiceError::invalid(
                    "idempotency_key",
                    "must be a string (omit it for none)",
                ));
            }
        };
        let parsed = RenderArgs {
            source_asset: source_asset.to_string(),
            output_format,
            resolution,
            watermark,
            idempotency_key,
        };
        parsed.validate()?;
        Ok(parsed)
    }

    /// Checks the typed fields (for callers that build [`RenderArgs`] directly).
    pub fn validate(&self) -> Result<(), ServiceError> {
        if self.source_asset.is_empty() {
            return Err(ServiceError::invalid(
                "source_asset_uri",
                "must not be empty",
            ));
        }
        if let Some(w) = &self.watermark {
            if Position::parse(&w.position).is_none() {
                return Err(ServiceError::invalid(
                    "watermark.position",
                    "must be one of top_left, top_right, bottom_left, bottom_right, center",
                ));
            }
            if !(0.0..=1.0).contains(&w.opacity) {
                return Err(ServiceError::invalid(
                    "watermark.opacity",
                    "must be a number between 0 and 1",
                ));
            }
            if w.image_asset.is_empty() {
                return Err(ServiceError::invalid(
                    "watermark.image_asset_uri",
                    "must not be empty",
                ));
            }
        }
        if let Some(k) = &self.idempotency_key
            && (k.is_empty() || k.chars().count() > IDEMPOTENCY_KEY_MAX)
        {
            return Err(ServiceError::invalid(
                "idempotency_key",
                format!("must be 1 to {IDEMPOTENCY_KEY_MAX} characters"),
            ));
        }
        Ok(())
    }

    /// The watermark position as the compositor's type (validated at creation).
    pub fn watermark_position(&self) -> Option<Position> {
        self.watermark
            .as_ref()
            .and_then(|w| Position::parse(&w.position))
    }
}

fn parse_watermark(w: &Map<String, Value>) -> Result<WatermarkArgs, ServiceError> {
    reject_unknown(w, &WATERMARK_KEYS, "watermark.")?;
    let image = required_str(w, "image_asset_uri", "watermark.")?;
    let image_asset = asset_id(image, "watermark.image_asset_uri")?;
    let position = match w.get("position") {
        None => DEFAULT_POSITION,
        Some(Value::String(p)) => Position::parse(p).ok_or_else(|| {
            ServiceError::invalid(
                "watermark.position",
                "must be one of top_left, top_right, bottom_left, bottom_right, center",
            )
        })?,
        Some(_) => {
            return Err(ServiceError::invalid(
                "watermark.position",
                "must be a string (omit it for bottom_right)",
            ));
        }
    };
    let opacity = match w.get("opacity") {
        None => DEFAULT_OPACITY,
        Some(Value::Number(n)) => n.as_f64().unwrap_or(f64::NAN),
        Some(_) => {
            return Err(ServiceError::invalid(
                "watermark.opacity",
                "must be a number (omit it for 1.0)",
            ));
        }
    };
    Ok(WatermarkArgs {
        image_asset: image_asset.to_string(),
        position: position.as_str().to_string(),
        opacity,
    })
}

/// A JSON argument that does not fit its schema: the dotted field and why, for the caller to
/// turn into its error (a [`ServiceError`] here, an envelope in the MCP front's fallback tools).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgError {
    pub field: String,
    pub reason: String,
}

impl From<ArgError> for ServiceError {
    fn from(e: ArgError) -> Self {
        ServiceError::invalid(e.field, e.reason)
    }
}

/// Closed objects (`additionalProperties: false`): the first key not in `allowed`.
pub fn reject_unknown(
    obj: &Map<String, Value>,
    allowed: &[&str],
    prefix: &str,
) -> Result<(), ArgError> {
    match obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(ArgError {
            field: format!("{prefix}{k}"),
            reason: if allowed.is_empty() {
                "is an unknown property (this tool takes no arguments)".into()
            } else {
                format!("is an unknown property (allowed: {})", allowed.join(", "))
            },
        }),
        None => Ok(()),
    }
}

/// A required string property.
pub fn required_str<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
    prefix: &str,
) -> Result<&'a str, ArgError> {
    let field = format!("{prefix}{key}");
    match obj.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(ArgError {
            field,
            reason: "must be a string".into(),
        }),
        None => Err(ArgError {
            field,
            reason: "is required".into(),
        }),
    }
}

fn asset_id<'a>(uri_str: &'a str, field: &str) -> Result<&'a str, ServiceError> {
    uri::parse_asset_uri(uri_str).ok_or_else(|| {
        ServiceError::invalid(
            field,
            "must be a vidforge://assets/… URI of an uploaded asset (not a local path or external URL)",
        )
    })
}

/// Lowercase hex of `bytes` (argument hashes, session tags).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Hash of the canonical arguments (defaults applied, idempotency key excluded): two calls
/// that mean the same render hash equally.
pub fn canonical_args_hash(args: &RenderArgs) -> String {
    let canonical = serde_json::json!({
        "source_asset": args.source_asset,
        "output_format": args.output_format.as_str(),
        "resolution": args.resolution.as_str(),
        "watermark": args.watermark.as_ref().map(|w| serde_json::json!({
            "image_asset": w.image_asset,
            "position": w.position,
            "opacity": w.opacity,
        })),
    });
    hex(&Sha256::digest(canonical.to_string().as_bytes()))
}

/// Hash binding a watermark decision to the exact image asset, position and opacity.
pub fn watermark_params_hash(w: &WatermarkArgs) -> String {
    let canonical = format!("{}\n{}\n{}", w.image_asset, w.position, w.opacity);
    hex(&Sha256::digest(canonical.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids;
    use serde_json::json;

    fn ok_args() -> (String, String, Value) {
        let a = ids::new_asset_id();
        let l = ids::new_asset_id();
        let v = json!({
            "source_asset_uri": uri::asset_uri(&a),
            "output_format": "mp4",
            "resolution": "1080p",
            "watermark": {"image_asset_uri": uri::asset_uri(&l)},
        });
        (a, l, v)
    }

    #[test]
    fn parses_and_applies_defaults() {
        let (a, l, v) = ok_args();
        let r = RenderArgs::from_tool_arguments(&v).unwrap();
        assert_eq!(r.source_asset, a);
        let w = r.watermark.clone().unwrap();
        assert_eq!(
            (w.image_asset.as_str(), w.position.as_str(), w.opacity),
            (l.as_str(), "bottom_right", 1.0)
        );
        let mut explicit = v.clone();
        explicit["watermark"]["position"] = json!("bottom_right");
        explicit["watermark"]["opacity"] = json!(1.0);
        explicit["idempotency_key"] = json!("k");
        let r2 = RenderArgs::from_tool_arguments(&explicit).unwrap();
        assert_eq!(canonical_args_hash(&r), canonical_args_hash(&r2));
        let mut other = explicit.clone();
        other["watermark"]["opacity"] = json!(0.5);
        let r3 = RenderArgs::from_tool_arguments(&other).unwrap();
        assert_ne!(canonical_args_hash(&r), canonical_args_hash(&r3));
        assert_ne!(
            watermark_params_hash(r.watermark.as_ref().unwrap()),
            watermark_params_hash(r3.watermark.as_ref().unwrap())
        );
    }

    #[test]
    fn rejects_with_field() {
        let (_, _, v) = ok_args();
        let field = |v: Value| match RenderArgs::from_tool_arguments(&v) {
            Err(ServiceError::InvalidArguments { field, .. }) => field,
            other => panic!("expected invalid arguments, got {other:?}"),
        };
        let mut x = v.clone();
        x["resolution"] = json!("8k");
        assert_eq!(field(x), "resolution");
        let mut x = v.clone();
        x["extra"] = json!(1);
        assert_eq!(field(x), "extra");
        let mut x = v.clone();
        x["watermark"]["opacity"] = json!(1.5);
        assert_eq!(field(x), "watermark.opacity");
        let mut x = v.clone();
        x["watermark"]["size"] = json!(3);
        assert_eq!(field(x), "watermark.size");
        let mut x = v.clone();
        x["source_asset_uri"] = json!("/etc/passwd");
        assert_eq!(field(x), "source_asset_uri");
        let mut x = v.clone();
        x["idempotency_key"] = json!("");
        assert_eq!(field(x), "idempotency_key");
        let mut x = v.clone();
        x["idempotency_key"] = json!("k".repeat(129));
        assert_eq!(field(x), "idempotency_key");
        let mut x = v;
        x.as_object_mut().unwrap().remove("output_format");
        assert_eq!(field(x), "output_format");
    }
}
