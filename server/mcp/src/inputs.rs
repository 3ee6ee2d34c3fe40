//! The tools' inputs: one serde type per tool, parsed once here at the edge. The domain
//! receives typed values ([`RenderArgs`], ids), never JSON to re-parse.
//!
//! Every type is closed (`deny_unknown_fields`, the schemas' `additionalProperties: false`);
//! optional properties may be omitted but not `null` (the schemas allow no null). A value that
//! does not fit becomes an [`ArgumentError`]: the dotted field and a reason a client can act
//! on. The served schemas ([`crate::tools`]) are held to these types and to the contract by
//! the tests in `inputs/schema_tests.rs` (the arguments' own in `inputs/tests.rs`).

mod de;
#[cfg(test)]
mod schema_tests;
#[cfg(test)]
mod tests;

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use vidforge_core::args::{DEFAULT_OPACITY, DEFAULT_POSITION, ValidateArgs};
use vidforge_core::catalog::MAX_NOTE_CHARS;
use vidforge_core::error::ServiceError;
use vidforge_core::store::by_name::{self, Named};
use vidforge_core::store::{OutputFormat, Position, RenderArgs, Resolution, WatermarkArgs};
use vidforge_core::uri;

pub use de::{Misfit, MisfitKind};

/// Arguments that do not fit a tool's input: the dotted field (`watermark.opacity`,
/// `arguments` for the whole) and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid argument `{field}`: {reason}")]
pub struct ArgumentError {
    pub field: String,
    pub reason: String,
}

impl From<ArgumentError> for ServiceError {
    fn from(e: ArgumentError) -> Self {
        ServiceError::InvalidArguments {
            field: e.field,
            reason: e.reason,
        }
    }
}

/// A tool's input type.
pub trait ToolInput: DeserializeOwned {
    /// Reasons for a value of the wrong JSON type where "must be a string" says too little:
    /// what omitting the optional property means (`(dotted field, reason)`).
    const TYPE_REASONS: &'static [(&'static str, &'static str)] = &[];
}

/// Parses a tool's arguments into its input type.
pub fn parse<T: ToolInput>(arguments: &Value) -> Result<T, ArgumentError> {
    T::deserialize(de::ValueDeserializer(arguments))
        .map_err(|m| explain::<T>(&missing_before::<T>(arguments, m)))
}

/// serde notices a missing required property only after reading the present ones; the
/// schema order reports it first when it comes before the misfit. So for each object on the
/// misfit's path, the properties declared before the misfit's are parsed alone: a required
/// one among them that is absent is the misfit reported.
fn missing_before<T: ToolInput>(arguments: &Value, misfit: Misfit) -> Misfit {
    if matches!(
        misfit.kind,
        MisfitKind::Missing | MisfitKind::Unknown { .. }
    ) {
        return misfit;
    }
    for level in 0..misfit.path.len() {
        let order = misfit.orders[level];
        let Some(at) = order.iter().position(|f| *f == misfit.path[level]) else {
            continue;
        };
        let mut earlier = arguments.clone();
        let Some(Value::Object(object)) = misfit.path[..level]
            .iter()
            .try_fold(&mut earlier, |v, key| v.get_mut(key.as_str()))
        else {
            continue;
        };
        object.retain(|k, _| order[..at].contains(&k.as_str()));
        if let Err(m) = T::deserialize(de::ValueDeserializer(&earlier))
            && m.kind == MisfitKind::Missing
            && m.path.len() == level + 1
            && m.path[..level] == misfit.path[..level]
            && order[..at].contains(&m.path[level].as_str())
        {
            return m;
        }
    }
    misfit
}

fn explain<T: ToolInput>(m: &Misfit) -> ArgumentError {
    let field = if m.path.is_empty() {
        "arguments".to_string()
    } else {
        m.path.join(".")
    };
    let reason = match &m.kind {
        MisfitKind::Unknown { allowed: [] } => {
            "is an unknown property (this tool takes no arguments)".to_string()
        }
        MisfitKind::Unknown { allowed } => {
            format!("is an unknown property (allowed: {})", allowed.join(", "))
        }
        MisfitKind::Missing => "is required".to_string(),
        MisfitKind::WrongType { .. } if m.path.is_empty() => "must be an object".to_string(),
        MisfitKind::WrongType { expected } => T::TYPE_REASONS
            .iter()
            .find(|(f, _)| *f == field)
            .map_or_else(|| format!("must be {expected}"), |(_, r)| r.to_string()),
        MisfitKind::Invalid(reason) => reason.clone(),
    };
    ArgumentError { field, reason }
}

/// `vidforge_render_video`'s arguments, parsed, defaults applied and checked against the
/// domain's rules ([`ValidateArgs::validate`]).
pub fn render_args(arguments: &Value) -> Result<RenderArgs, ServiceError> {
    let args = RenderArgs::from(parse::<RenderVideoInput>(arguments)?);
    args.validate()?;
    Ok(args)
}

/// `vidforge_render_video`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RenderVideoInput {
    pub source_asset_uri: AssetRef,
    #[serde(deserialize_with = "named")]
    pub output_format: OutputFormat,
    #[serde(deserialize_with = "named")]
    pub resolution: Resolution,
    #[serde(default, deserialize_with = "present")]
    pub watermark: Option<WatermarkInput>,
    /// Length bounds: [`ValidateArgs::validate`].
    #[serde(default, deserialize_with = "present")]
    pub idempotency_key: Option<String>,
    /// Omitted: the server's `quality_report` setting decides.
    #[serde(default, deserialize_with = "present")]
    pub quality_report: Option<bool>,
}

impl ToolInput for RenderVideoInput {
    const TYPE_REASONS: &'static [(&'static str, &'static str)] = &[
        (
            "watermark",
            "must be an object (omit it to render without a watermark)",
        ),
        (
            "watermark.position",
            "must be a string (omit it for bottom_right)",
        ),
        ("watermark.opacity", "must be a number (omit it for 1.0)"),
        ("idempotency_key", "must be a string (omit it for none)"),
        (
            "quality_report",
            "must be a boolean (omit it for the server's default)",
        ),
    ];
}

/// `vidforge_render_video`'s `watermark`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WatermarkInput {
    pub image_asset_uri: AssetRef,
    #[serde(default = "default_position", deserialize_with = "named")]
    pub position: Position,
    /// Range: [`ValidateArgs::validate`] (`vidforge_core::args::OPACITY`).
    #[serde(default = "default_opacity")]
    pub opacity: f64,
}

fn default_position() -> Position {
    DEFAULT_POSITION
}

fn default_opacity() -> f64 {
    DEFAULT_OPACITY
}

impl From<RenderVideoInput> for RenderArgs {
    fn from(input: RenderVideoInput) -> Self {
        RenderArgs {
            source_asset: input.source_asset_uri.0,
            output_format: input.output_format,
            resolution: input.resolution,
            watermark: input.watermark.map(|w| WatermarkArgs {
                image_asset: w.image_asset_uri.0,
                position: w.position,
                opacity: w.opacity,
            }),
            idempotency_key: input.idempotency_key,
            quality_report: input.quality_report,
        }
    }
}

/// `vidforge_get_render_status` and `vidforge_cancel_render`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RenderIdInput {
    pub render_id: RenderId,
}

impl ToolInput for RenderIdInput {}

/// `vidforge_approve_watermark`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalInput {
    pub render_id: RenderId,
    pub approved: bool,
    #[serde(default, deserialize_with = "present")]
    pub note: Option<Note>,
}

impl ToolInput for ApprovalInput {
    const TYPE_REASONS: &'static [(&'static str, &'static str)] = &[("note", NOTE_REASON)];
}

/// `vidforge_get_capabilities`: no arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoArguments {}

impl ToolInput for NoArguments {}

/// The asset id of a `vidforge://assets/…` URI.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct AssetRef(pub String);

impl TryFrom<String> for AssetRef {
    type Error = &'static str;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        uri::parse_asset_uri(&s)
            .map(|id| AssetRef(id.to_string()))
            .ok_or("must be a vidforge://assets/… URI of an uploaded asset (not a local path or external URL)")
    }
}

/// A non-empty render id (whether it exists is the service's question).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct RenderId(pub String);

impl TryFrom<String> for RenderId {
    type Error = &'static str;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        if s.is_empty() {
            Err("must not be empty")
        } else {
            Ok(RenderId(s))
        }
    }
}

pub(crate) const NOTE_REASON: &str = "must be a string of at most 2000 characters";
const _: () = assert!(MAX_NOTE_CHARS == 2000, "NOTE_REASON states MAX_NOTE_CHARS");

/// A user's note on a watermark decision, at most [`MAX_NOTE_CHARS`] characters.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct Note(pub String);

impl TryFrom<String> for Note {
    type Error = &'static str;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        if s.chars().count() <= MAX_NOTE_CHARS {
            Ok(Note(s))
        } else {
            Err(NOTE_REASON)
        }
    }
}

/// An optional property that, when present, must hold a `T` (`null` is a wrong type, not
/// "absent"): with `#[serde(default)]`, serde calls this only for present properties.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// One of an engine enum's canonical names.
fn named<'de, D: Deserializer<'de>, T: Named>(d: D) -> Result<T, D::Error> {
    let s = String::deserialize(d)?;
    T::from_name(&s)
        .ok_or_else(|| D::Error::custom(format!("must be one of {}", by_name::names::<T>(", "))))
}
