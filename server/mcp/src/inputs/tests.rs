use serde_json::{Value, json};

use vidforge_core::catalog::MAX_NOTE_CHARS;
use vidforge_core::error::ServiceError;
use vidforge_core::ids;

use super::*;
use crate::args::fallback_input;

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

/// The render tool's refusal: (field, reason).
fn refusal(v: &Value) -> (String, String) {
    match render_args(v) {
        Err(ServiceError::InvalidArguments { field, reason }) => (field, reason),
        other => panic!("expected invalid arguments for {v}, got {other:?}"),
    }
}

#[test]
fn render_arguments_parse_with_defaults() {
    let (a, l, v) = ok_args();
    let r = render_args(&v).unwrap();
    assert_eq!(r.source_asset, a);
    let w = r.watermark.clone().unwrap();
    assert_eq!(
        (w.image_asset.as_str(), w.position, w.opacity),
        (l.as_str(), Position::BottomRight, 1.0)
    );
    let mut explicit = v.clone();
    explicit["watermark"]["position"] = json!("bottom_right");
    explicit["watermark"]["opacity"] = json!(1);
    explicit["idempotency_key"] = json!("k");
    explicit["quality_report"] = json!(true);
    let r2 = render_args(&explicit).unwrap();
    assert_eq!(r2.idempotency_key.as_deref(), Some("k"));
    // Asked for or not, the quality report does not change the video: one idempotency hash.
    assert_eq!((r.quality_report, r2.quality_report), (None, Some(true)));
    assert_eq!(
        vidforge_core::args::canonical_args_hash(&r),
        vidforge_core::args::canonical_args_hash(&r2)
    );
}

/// A change to valid arguments, and the refusal's field and reason.
type Case = (Box<dyn Fn(&mut Value)>, &'static str, &'static str);

const URI_REASON: &str =
    "must be a vidforge://assets/… URI of an uploaded asset (not a local path or external URL)";

/// The refusals of the render tool's own properties.
fn argument_refusals() -> Vec<Case> {
    vec![
        (
            Box::new(|x| x["resolution"] = json!("8k")),
            "resolution",
            "must be one of 720p, 1080p, 4k",
        ),
        (
            Box::new(|x| x["output_format"] = json!("avi")),
            "output_format",
            "must be one of mp4, webm, mov",
        ),
        (
            Box::new(|x| x["output_format"] = json!(4)),
            "output_format",
            "must be a string",
        ),
        (
            Box::new(|x| x["extra"] = json!(1)),
            "extra",
            "is an unknown property (allowed: source_asset_uri, output_format, resolution, watermark, idempotency_key, quality_report)",
        ),
        (
            Box::new(|x| x["source_asset_uri"] = json!("/etc/passwd")),
            "source_asset_uri",
            URI_REASON,
        ),
        (
            Box::new(|x| x["source_asset_uri"] = json!(true)),
            "source_asset_uri",
            "must be a string",
        ),
        (
            Box::new(|x| x["idempotency_key"] = json!("")),
            "idempotency_key",
            "must be 1 to 128 characters",
        ),
        (
            Box::new(|x| x["idempotency_key"] = json!("k".repeat(129))),
            "idempotency_key",
            "must be 1 to 128 characters",
        ),
        (
            Box::new(|x| x["idempotency_key"] = Value::Null),
            "idempotency_key",
            "must be a string (omit it for none)",
        ),
        (
            Box::new(|x| x["quality_report"] = json!("yes")),
            "quality_report",
            "must be a boolean (omit it for the server's default)",
        ),
        (
            Box::new(|x| x["quality_report"] = Value::Null),
            "quality_report",
            "must be a boolean (omit it for the server's default)",
        ),
        (
            Box::new(|x| {
                x.as_object_mut().unwrap().remove("output_format");
            }),
            "output_format",
            "is required",
        ),
        (
            Box::new(|x| *x = json!([1])),
            "arguments",
            "must be an object",
        ),
    ]
}

/// The refusals of `watermark` and its properties.
fn watermark_refusals() -> Vec<Case> {
    vec![
        (
            Box::new(|x| x["watermark"]["opacity"] = json!(1.5)),
            "watermark.opacity",
            "must be a number between 0 and 1",
        ),
        (
            Box::new(|x| x["watermark"]["opacity"] = json!("0.5")),
            "watermark.opacity",
            "must be a number (omit it for 1.0)",
        ),
        (
            Box::new(|x| x["watermark"]["opacity"] = Value::Null),
            "watermark.opacity",
            "must be a number (omit it for 1.0)",
        ),
        (
            Box::new(|x| x["watermark"]["position"] = json!("middle")),
            "watermark.position",
            "must be one of top_left, top_right, bottom_left, bottom_right, center",
        ),
        (
            Box::new(|x| x["watermark"]["position"] = Value::Null),
            "watermark.position",
            "must be a string (omit it for bottom_right)",
        ),
        (
            Box::new(|x| x["watermark"]["size"] = json!(3)),
            "watermark.size",
            "is an unknown property (allowed: image_asset_uri, position, opacity)",
        ),
        (
            Box::new(|x| x["watermark"] = json!({})),
            "watermark.image_asset_uri",
            "is required",
        ),
        (
            Box::new(|x| x["watermark"]["image_asset_uri"] = json!("https://x/logo.png")),
            "watermark.image_asset_uri",
            URI_REASON,
        ),
        (
            Box::new(|x| x["watermark"] = Value::Null),
            "watermark",
            "must be an object (omit it to render without a watermark)",
        ),
    ]
}

/// Today's fields and reasons, word for word (the envelope's `details`).
#[test]
fn render_refusals_name_the_field_and_the_reason() {
    let (_, _, v) = ok_args();
    for (edit, field, reason) in argument_refusals().into_iter().chain(watermark_refusals()) {
        let mut x = v.clone();
        edit(&mut x);
        assert_eq!(refusal(&x), (field.to_string(), reason.to_string()));
    }
}

/// Of several misfits, the one reported is the one the hand validation reported: an unknown
/// property first, else the first misfit in the schema's property order.
#[test]
fn the_first_misfit_is_reported_in_schema_order() {
    let args = json!({"zz": 1, "source_asset_uri": "/etc/passwd", "output_format": "avi"});
    assert_eq!(refusal(&args).0, "zz");
    let args =
        json!({"source_asset_uri": "/etc/passwd", "output_format": "avi", "resolution": "720p"});
    assert_eq!(refusal(&args).0, "source_asset_uri");
    let args = json!({"watermark": 1, "resolution": "8k", "source_asset_uri": "vidforge://assets/a_01JVXD00000000000000000000", "output_format": "mp4"});
    assert_eq!(refusal(&args).0, "resolution");
    // A required property missing before a bad value: the missing one, as the schema orders.
    let args = json!({"output_format": "avi", "resolution": "720p"});
    assert_eq!(
        refusal(&args),
        ("source_asset_uri".to_string(), "is required".to_string())
    );
    let args = json!({"source_asset_uri": "vidforge://assets/a_01JVXD00000000000000000000", "resolution": "8k"});
    assert_eq!(refusal(&args).0, "output_format");
    let args = json!({"source_asset_uri": "vidforge://assets/a_01JVXD00000000000000000000", "output_format": "avi"});
    assert_eq!(refusal(&args).0, "output_format");
    let args = json!({"source_asset_uri": "vidforge://assets/a_01JVXD00000000000000000000", "output_format": "mp4", "resolution": "720p", "watermark": {"position": "middle"}});
    assert_eq!(
        refusal(&args),
        (
            "watermark.image_asset_uri".to_string(),
            "is required".to_string()
        )
    );
    // A bad value before a missing property: the bad value.
    let args = json!({"source_asset_uri": "/etc/passwd"});
    assert_eq!(refusal(&args).0, "source_asset_uri");
}

#[test]
fn fallback_arguments_are_closed_and_typed() {
    let input =
        fallback_input::<ApprovalInput>(&json!({"render_id": "task_1", "approved": true})).unwrap();
    assert_eq!(
        (input.render_id.0.as_str(), input.approved),
        ("task_1", true)
    );
    let refused = |env: Box<vidforge_http::envelope::Envelope>| {
        let v = env.to_json();
        (
            v["details"]["field"].as_str().unwrap().to_string(),
            v["message"].as_str().unwrap().to_string(),
        )
    };
    let cases = [
        (
            json!({"render_id": "task_1", "approved": "yes"}),
            "approved",
            "Invalid arguments: `approved` must be a boolean",
        ),
        (
            json!({"render_id": "task_1"}),
            "approved",
            "Invalid arguments: `approved` is required",
        ),
        (
            json!({"render_id": "task_1", "approved": true, "x": 1}),
            "x",
            "Invalid arguments: `x` is an unknown property (allowed: render_id, approved, note)",
        ),
        (
            json!({"render_id": "", "approved": true}),
            "render_id",
            "Invalid arguments: `render_id` must not be empty",
        ),
        (
            json!({"render_id": "t", "approved": false, "note": null}),
            "note",
            "Invalid arguments: `note` must be a string of at most 2000 characters",
        ),
        (
            json!({"render_id": "t", "approved": false, "note": "n".repeat(MAX_NOTE_CHARS + 1)}),
            "note",
            "Invalid arguments: `note` must be a string of at most 2000 characters",
        ),
    ];
    for (args, field, message) in cases {
        let env = fallback_input::<ApprovalInput>(&args).unwrap_err();
        assert_eq!(
            refused(env),
            (field.to_string(), message.to_string()),
            "{args}"
        );
    }
    let env = fallback_input::<RenderIdInput>(&json!({})).unwrap_err();
    assert_eq!(refused(env).1, "Invalid arguments: `render_id` is required");
    let env = fallback_input::<RenderIdInput>(&json!({"render_id": 7})).unwrap_err();
    assert_eq!(
        refused(env).1,
        "Invalid arguments: `render_id` must be a string"
    );
    assert!(fallback_input::<NoArguments>(&json!({})).is_ok());
    let env = fallback_input::<NoArguments>(&json!({"a": 1})).unwrap_err();
    assert_eq!(
        refused(env),
        (
            "a".into(),
            "Invalid arguments: `a` is an unknown property (this tool takes no arguments)".into()
        )
    );
    let env = fallback_input::<NoArguments>(&json!("x")).unwrap_err();
    assert_eq!(
        refused(env),
        (
            "arguments".into(),
            "Invalid arguments: `arguments` must be an object".into()
        )
    );
}
