//! The served input schemas: the contract's, and the input types'.

use serde_json::{Value, json};

use vidforge_core::args::{DEFAULT_OPACITY, DEFAULT_POSITION, IDEMPOTENCY_KEY_MAX, OPACITY};
use vidforge_core::catalog::{Lifetimes, human_duration};

use super::*;
use crate::tools::{self, TOOL_ORDER};

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
