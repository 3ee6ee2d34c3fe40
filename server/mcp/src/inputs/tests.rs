use serde_json::{Value, json};

use vidforge_core::args::{DEFAULT_OPACITY, DEFAULT_POSITION, IDEMPOTENCY_KEY_MAX, OPACITY};
use vidforge_core::catalog::{Lifetimes, MAX_NOTE_CHARS, human_duration};
use vidforge_core::error::ServiceError;
use vidforge_core::ids;

use super::*;
use crate::args::fallback_input;
use crate::tools::{self, TOOL_ORDER};

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
    let r2 = render_args(&explicit).unwrap();
    assert_eq!(r2.idempotency_key.as_deref(), Some("k"));
    assert_eq!(
        vidforge_core::args::canonical_args_hash(&r),
        vidforge_core::args::canonical_args_hash(&r2)
    );
}

/// Today's fields and reasons, word for word (the envelope's `details`).
#[test]
fn render_refusals_name_the_field_and_the_reason() {
    let (_, _, v) = ok_args();
    let with = |f: &dyn Fn(&mut Value)| {
        let mut x = v.clone();
        f(&mut x);
        refusal(&x)
    };
    let uri_reason =
        "must be a vidforge://assets/… URI of an uploaded asset (not a local path or external URL)";
    type Edit = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(Edit, &str, &str)> = vec![
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
            "is an unknown property (allowed: source_asset_uri, output_format, resolution, watermark, idempotency_key)",
        ),
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
            uri_reason,
        ),
        (
            Box::new(|x| x["watermark"] = Value::Null),
            "watermark",
            "must be an object (omit it to render without a watermark)",
        ),
        (
            Box::new(|x| x["source_asset_uri"] = json!("/etc/passwd")),
            "source_asset_uri",
            uri_reason,
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
    ];
    for (edit, field, reason) in cases {
        assert_eq!(with(&*edit), (field.to_string(), reason.to_string()));
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

// ---- The served input schemas: the contract's, and the input types' ----

const CONTRACT: &str = include_str!("contract_schemas.json");

fn served_input_schemas() -> Vec<(String, Value)> {
    tools::tool_definitions(&Lifetimes::default())
        .into_iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_string(),
                t["inputSchema"].clone(),
            )
        })
        .collect()
}

/// Every fact `contract` states is in `served`, and objects list the same properties.
fn covers(served: &Value, contract: &Value, at: &str) {
    match (served, contract) {
        (Value::Object(s), Value::Object(c)) => {
            for (k, cv) in c {
                let sv = s.get(k).unwrap_or_else(|| panic!("{at}.{k}: not served"));
                if k == "properties" {
                    let names =
                        |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
                    assert_eq!(names(sv), names(cv), "{at}.properties");
                }
                covers(sv, cv, &format!("{at}.{k}"));
            }
        }
        _ => assert_eq!(served, contract, "{at}"),
    }
}

#[test]
fn served_input_schemas_are_the_contracts() {
    let contract: Value = serde_json::from_str(CONTRACT).unwrap();
    let served = served_input_schemas();
    let ttl = human_duration(Lifetimes::default().idempotency_ttl);
    for (name, schema) in &served {
        if name == tools::GET_CAPABILITIES {
            // The contract states no input for it; its closedness is probed below.
            assert!(contract.get(name).is_none());
            continue;
        }
        let expected = contract
            .get(name)
            .unwrap_or_else(|| panic!("{name}: not in contract_schemas.json"));
        if name == tools::RENDER_VIDEO {
            // Copied verbatim: equal but for the configured idempotency lifetime, which the
            // server words as `24 hours` where the contract writes `24h`.
            let mut schema = schema.clone();
            let d = &mut schema["properties"]["idempotency_key"]["description"];
            *d = json!(
                d.as_str()
                    .unwrap()
                    .replace(&format!("within {ttl}"), "within 24h")
            );
            assert_eq!(&schema, expected, "{name}");
        } else {
            covers(schema, expected, name);
        }
    }
    let listed = contract
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| !k.starts_with('_'))
        .count();
    assert_eq!(
        listed,
        TOOL_ORDER.len() - 1,
        "a contract schema of no served tool"
    );
}

/// The schema's defaults and bounds are the domain's constants.
#[test]
fn schema_defaults_and_bounds_are_the_domains() {
    let render = &served_input_schemas()[0].1;
    let wm = &render["properties"]["watermark"]["properties"];
    assert_eq!(wm["position"]["default"], DEFAULT_POSITION.as_str());
    assert_eq!(wm["opacity"]["default"].as_f64(), Some(DEFAULT_OPACITY));
    assert_eq!(wm["opacity"]["minimum"].as_f64(), Some(*OPACITY.start()));
    assert_eq!(wm["opacity"]["maximum"].as_f64(), Some(*OPACITY.end()));
    let key = &render["properties"]["idempotency_key"];
    assert_eq!(key["maxLength"].as_u64(), Some(IDEMPOTENCY_KEY_MAX as u64));
    let minimal = json!({"source_asset_uri": "vidforge://assets/a_01JVXD00000000000000000000", "output_format": "mp4",
        "resolution": "720p", "watermark": {"image_asset_uri": "vidforge://assets/a_01JVXD00000000000000000001"}});
    let w = render_args(&minimal).unwrap().watermark.unwrap();
    assert_eq!(
        (w.position.as_str(), json!(w.opacity)),
        (
            wm["position"]["default"].as_str().unwrap(),
            wm["opacity"]["default"].clone()
        )
    );
}

/// A tool's input type as a probe: `Err(field)` on a refusal.
type Probe = fn(&Value) -> Result<(), String>;

fn probe_of(tool: &str) -> Probe {
    match tool {
        tools::RENDER_VIDEO => |v| {
            render_args(v)
                .map(drop)
                .map_err(|e| e.field().unwrap().into())
        },
        tools::GET_RENDER_STATUS | tools::CANCEL_RENDER => {
            |v| parse::<RenderIdInput>(v).map(drop).map_err(|e| e.field)
        }
        tools::APPROVE_WATERMARK => |v| parse::<ApprovalInput>(v).map(drop).map_err(|e| e.field),
        tools::GET_CAPABILITIES => |v| parse::<NoArguments>(v).map(drop).map_err(|e| e.field),
        other => panic!("{other}: no input type to probe (add it here)"),
    }
}

/// A value the schema accepts: every property (`all`) or the required ones.
fn sample(schema: &Value, all: bool) -> Value {
    match schema["type"].as_str().unwrap() {
        "object" => {
            let required = schema["required"].as_array().cloned().unwrap_or_default();
            let props = schema["properties"].as_object().unwrap();
            Value::Object(
                props
                    .iter()
                    .filter(|(k, _)| all || required.contains(&json!(k)))
                    .map(|(k, p)| (k.clone(), sample(p, all)))
                    .collect(),
            )
        }
        "string" if schema.get("enum").is_some() => schema["enum"][0].clone(),
        "string" if schema["format"] == "uri" => {
            json!("vidforge://assets/a_01JVXD00000000000000000000")
        }
        "string" => json!("k"),
        "boolean" => json!(true),
        "number" => schema
            .get("default")
            .or(schema.get("minimum"))
            .cloned()
            .unwrap(),
        other => panic!("no sample for type {other}"),
    }
}

fn at<'a>(v: &'a mut Value, path: &[String]) -> &'a mut Value {
    path.iter().fold(v, |v, k| &mut v[k.as_str()])
}

/// Probes the object schema at `path` of `base` (a full sample): what it requires, types,
/// enumerates and bounds, the input type must too.
fn probe_object(tool: &str, probe: Probe, base: &Value, path: &[String], schema: &Value) {
    let dotted = |k: &str| {
        path.iter()
            .map(String::as_str)
            .chain([k])
            .collect::<Vec<_>>()
            .join(".")
    };
    let refused = |edit: &dyn Fn(&mut Value), field: &str, what: &str| {
        let mut v = base.clone();
        edit(at(&mut v, path));
        assert_eq!(
            probe(&v),
            Err(field.to_string()),
            "{tool}: {what} at {field}: {v}"
        );
    };
    let accepted = |edit: &dyn Fn(&mut Value), what: &str| {
        let mut v = base.clone();
        edit(at(&mut v, path));
        assert_eq!(probe(&v), Ok(()), "{tool}: {what}: {v}");
    };
    assert_eq!(
        schema["additionalProperties"], false,
        "{tool}: closed objects only"
    );
    refused(
        &|o| o["zz_unknown"] = json!(1),
        &dotted("zz_unknown"),
        "unknown property",
    );
    let required = schema["required"].as_array().cloned().unwrap_or_default();
    for (k, p) in schema["properties"].as_object().unwrap() {
        let field = dotted(k);
        if required.contains(&json!(k)) {
            refused(
                &|o| drop(o.as_object_mut().unwrap().remove(k)),
                &field,
                "missing",
            );
        } else {
            accepted(
                &|o| drop(o.as_object_mut().unwrap().remove(k)),
                "optional omitted",
            );
        }
        refused(&|o| o[k] = Value::Null, &field, "null");
        let wrong = if p["type"] == "string" {
            json!(5)
        } else {
            json!("x")
        };
        refused(&|o| o[k] = wrong.clone(), &field, "wrong type");
        for value in p["enum"].as_array().into_iter().flatten() {
            accepted(&|o| o[k] = value.clone(), "enum value");
        }
        if p.get("enum").is_some() {
            refused(
                &|o| o[k] = json!("not_listed"),
                &field,
                "value outside the enum",
            );
        }
        if let Some(n) = p["maxLength"].as_u64() {
            accepted(&|o| o[k] = json!("é".repeat(n as usize)), "maxLength");
            refused(
                &|o| o[k] = json!("é".repeat(n as usize + 1)),
                &field,
                "over maxLength",
            );
        }
        if p["minLength"].as_u64() == Some(1) {
            refused(&|o| o[k] = json!(""), &field, "under minLength");
        }
        if let (Some(lo), Some(hi)) = (p["minimum"].as_f64(), p["maximum"].as_f64()) {
            accepted(&|o| o[k] = json!(lo), "minimum");
            accepted(&|o| o[k] = json!(hi), "maximum");
            refused(&|o| o[k] = json!(lo - 0.5), &field, "under minimum");
            refused(&|o| o[k] = json!(hi + 0.5), &field, "over maximum");
        }
        if p["type"] == "object" {
            let inner: Vec<String> = path.iter().cloned().chain([k.clone()]).collect();
            probe_object(tool, probe, base, &inner, p);
        }
    }
}

/// What each served schema says, its input type does: the same properties, required ones,
/// types, enums and bounds (so schema and type cannot drift apart).
#[test]
fn input_types_accept_exactly_what_the_served_schemas_describe() {
    for (tool, schema) in served_input_schemas() {
        let probe = probe_of(&tool);
        assert_eq!(
            probe(&sample(&schema, false)),
            Ok(()),
            "{tool}: required only"
        );
        let full = sample(&schema, true);
        assert_eq!(probe(&full), Ok(()), "{tool}: every property");
        probe_object(&tool, probe, &full, &[], &schema);
    }
}
