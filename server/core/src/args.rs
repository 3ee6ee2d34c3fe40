//! The domain's rules for render arguments: the defaults and bounds, [`ValidateArgs`] over the
//! typed values, and the canonical hashes that bind idempotency keys and watermark
//! decisions to exact parameters.
//!
//! Parsing a client's JSON into [`RenderArgs`] is the front's job (`vidforge_mcp::inputs`);
//! the domain only ever receives typed values.

use std::ops::RangeInclusive;

use sha2::{Digest, Sha256};

use crate::error::ServiceError;
use crate::store::{Position, RenderArgs, WatermarkArgs};

/// `watermark.position` when omitted.
pub const DEFAULT_POSITION: Position = Position::BottomRight;
/// `watermark.opacity` when omitted.
pub const DEFAULT_OPACITY: f64 = 1.0;
/// The range of `watermark.opacity` (also of `vidforge render --opacity`): 0 transparent,
/// 1 opaque.
pub const OPACITY: RangeInclusive<f64> = 0.0..=1.0;
/// `idempotency_key` length bound (characters; at least one).
pub const IDEMPOTENCY_KEY_MAX: usize = 128;

/// Whether `c` may not reach what others read from text a person or a token wrote: a
/// control character (a newline would forge a log line; ESC or NUL reach an operator's
/// terminal) or a bidirectional mark, override or isolate (which make one text read as
/// another). OAuth subjects holding one are refused; notes drop them ([`clean_note`]).
pub fn is_unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// A decision's note as it is kept and shown: line breaks and tabs as spaces, every other
/// [`is_unsafe_char`] dropped, trimmed; `None` when nothing is left.
pub fn clean_note(note: &str) -> Option<String> {
    let cleaned: String = note
        .chars()
        .filter_map(|c| match c {
            '\n' | '\r' | '\t' => Some(' '),
            c if is_unsafe_char(c) => None,
            c => Some(c),
        })
        .collect();
    let trimmed = cleaned.trim();
    (!trimmed.is_empty()).then(|| trimmed.to_string())
}

/// The domain's rules over [`RenderArgs`] (a record type of the store's: its rules are here).
pub trait ValidateArgs {
    /// Checks the rules the types cannot carry (non-empty asset ids, the opacity range, the
    /// idempotency key's length). The service runs it on every creation, whoever built the
    /// value.
    fn validate(&self) -> Result<(), ServiceError>;
}

impl ValidateArgs for RenderArgs {
    fn validate(&self) -> Result<(), ServiceError> {
        if self.source_asset.is_empty() {
            return Err(ServiceError::invalid(
                "source_asset_uri",
                "must not be empty",
            ));
        }
        if let Some(w) = &self.watermark {
            if !OPACITY.contains(&w.opacity) {
                return Err(ServiceError::invalid(
                    "watermark.opacity",
                    format!(
                        "must be a number between {} and {}",
                        OPACITY.start(),
                        OPACITY.end()
                    ),
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
}

/// Hash of the canonical arguments (defaults applied, idempotency key excluded): two calls
/// that mean the same render hash equally. Stored with idempotency entries: its input must
/// never change shape (pinned by a test).
pub fn canonical_args_hash(args: &RenderArgs) -> String {
    let canonical = serde_json::json!({
        "source_asset": args.source_asset,
        "output_format": args.output_format.as_str(),
        "resolution": args.resolution.as_str(),
        "watermark": args.watermark.as_ref().map(|w| serde_json::json!({
            "image_asset": w.image_asset,
            "position": w.position.as_str(),
            "opacity": w.opacity,
        })),
    });
    hex::encode(Sha256::digest(canonical.to_string().as_bytes()))
}

/// Hash binding a watermark decision to the exact image asset, position and opacity.
pub fn watermark_params_hash(w: &WatermarkArgs) -> String {
    let canonical = format!("{}\n{}\n{}", w.image_asset, w.position.as_str(), w.opacity);
    hex::encode(Sha256::digest(canonical.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{OutputFormat, Resolution};

    #[test]
    fn notes_keep_no_terminal_escape_nor_bidirectional_override() {
        let hostile = "\u{1b}[2J\u{1b}]0;owned\u{7} logo\u{202e}egral oot\r\nnext\u{2066}\u{0}";
        let clean = clean_note(hostile).unwrap();
        assert!(!clean.chars().any(is_unsafe_char), "{clean:?}");
        assert_eq!(clean, "[2J]0;owned logoegral oot  next");
        assert_eq!(clean_note("  \u{202e}\n "), None);
        assert_eq!(
            clean_note(" fine, but smaller "),
            Some("fine, but smaller".into())
        );
    }

    fn fixed() -> RenderArgs {
        RenderArgs {
            source_asset: "a_01JVXD00000000000000000000".into(),
            output_format: OutputFormat::Webm,
            resolution: Resolution::P1080,
            watermark: Some(WatermarkArgs {
                image_asset: "a_01JVXD00000000000000000001".into(),
                position: Position::TopLeft,
                opacity: 0.6,
            }),
            idempotency_key: Some("k".into()),
            quality_report: None,
        }
    }

    /// Idempotency entries and watermark decisions of existing data dirs store these hashes,
    /// and records store this JSON: the values were computed before `position` became typed,
    /// and must never change.
    #[test]
    fn hashes_and_stored_json_are_pinned() {
        let args = fixed();
        assert_eq!(
            canonical_args_hash(&args),
            "c753aa452ba2aa7427a5e510708ddc76f5d161209413466c181bb145c4d9f760"
        );
        let bare = RenderArgs {
            watermark: None,
            ..args.clone()
        };
        assert_eq!(
            canonical_args_hash(&bare),
            "2e89766e9f12f6e36caa1fa3137a5b74599eafa064c501b59085bc909743f49c"
        );
        assert_eq!(
            watermark_params_hash(args.watermark.as_ref().unwrap()),
            "e162ea07a431734585f9e05620f7d14700e975a6290ee93fb8a5f3279e9f9f79"
        );
        let stored = r#"{"source_asset":"a_01JVXD00000000000000000000","output_format":"webm","resolution":"1080p","watermark":{"image_asset":"a_01JVXD00000000000000000001","position":"top_left","opacity":0.6},"idempotency_key":"k"}"#;
        assert_eq!(serde_json::to_string(&args).unwrap(), stored);
        assert_eq!(serde_json::from_str::<RenderArgs>(stored).unwrap(), args);
    }

    #[test]
    fn hashes_tell_different_parameters_apart() {
        let a = fixed();
        let mut b = fixed();
        b.idempotency_key = None;
        assert_eq!(canonical_args_hash(&a), canonical_args_hash(&b));
        b.watermark.as_mut().unwrap().opacity = 0.5;
        assert_ne!(canonical_args_hash(&a), canonical_args_hash(&b));
        assert_ne!(
            watermark_params_hash(a.watermark.as_ref().unwrap()),
            watermark_params_hash(b.watermark.as_ref().unwrap())
        );
        b.watermark.as_mut().unwrap().opacity = 0.6;
        b.watermark.as_mut().unwrap().position = Position::Center;
        assert_ne!(canonical_args_hash(&a), canonical_args_hash(&b));
    }

    #[test]
    fn validate_names_the_field() {
        let field = |args: &RenderArgs| match args.validate() {
            Err(ServiceError::InvalidArguments { field, .. }) => field,
            other => panic!("expected invalid arguments, got {other:?}"),
        };
        assert!(fixed().validate().is_ok());
        for opacity in [1.5, -0.1, f64::NAN] {
            let mut x = fixed();
            x.watermark.as_mut().unwrap().opacity = opacity;
            assert_eq!(field(&x), "watermark.opacity");
        }
        let mut x = fixed();
        x.idempotency_key = Some(String::new());
        assert_eq!(field(&x), "idempotency_key");
        x.idempotency_key = Some("k".repeat(IDEMPOTENCY_KEY_MAX + 1));
        assert_eq!(field(&x), "idempotency_key");
        x.idempotency_key = Some("é".repeat(IDEMPOTENCY_KEY_MAX));
        assert!(x.validate().is_ok(), "the bound counts characters");
        let mut x = fixed();
        x.source_asset.clear();
        assert_eq!(field(&x), "source_asset_uri");
    }
}
