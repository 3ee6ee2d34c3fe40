//! Conformance fixtures: the fixed tools, prompts and resources the official MCP conformance
//! suite calls (`test_simple_text`, `slow_compute`, `test://static-text`, …; their behaviour
//! is fixed by the suite's scenario descriptions).
//!
//! Mounted only by the `vidforge-conformance` binary (through the MCP extension seam,
//! [`crate::ConformanceExtension`]), beside vidforge's own tools, on the same rmcp protocol
//! layer, HTTP stack and auth as production: the handler asks them for names it does not own.
//! The fixtures that are tasks run as durable jobs ([`crate::jobs`]) in the server's sled
//! database, so they go through the same `tasks/*` methods and `notifications/tasks` as
//! renders. Multi round-trip (MRTR) fixtures seal their
//! `requestState` with rmcp's HMAC codec, bound to the principal and the tool.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ErrorCode as RpcCode,
    GetPromptRequestParams, GetPromptResponse, InputRequiredResult, InputResponses,
    RequestStateCodec, SealOptions,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Map, Value, json};
use vidforge_mcp::capabilities::TASKS_EXTENSION;
use vidforge_mcp::extension::{Declared, ListChange};
use vidforge_mcp::from_json;
use vidforge_mcp::wire::{self, form_elicitation};

use crate::jobs::{JobError, JobFailure, JobOutcome, JobRecord, Jobs};

/// A 1×1 red PNG.
const TEST_IMAGE_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A minimal WAV file (one silent sample).
const TEST_AUDIO_BASE64: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";
/// How long a sealed `requestState` stays valid.
const REQUEST_STATE_TTL: Duration = Duration::from_secs(600);
/// Longest `slow_compute` run accepted.
const MAX_COMPUTE_SECONDS: f64 = 300.0;
/// The tool `test_trigger_tool_change` adds and removes.
const DYNAMIC_TOOL: &str = "test_dynamic_tool";
/// The prompt `test_trigger_prompt_change` adds and removes.
const DYNAMIC_PROMPT: &str = "test_dynamic_prompt";

/// Announces a tool or prompt list change (`subscriptions/listen`).
pub type ListChanged = Box<dyn Fn(ListChange) + Send + Sync>;

/// The fixture registry (one per server).
pub struct Fixtures {
    codec: RequestStateCodec,
    dynamic_tool: AtomicBool,
    dynamic_prompt: AtomicBool,
    list_changed: ListChanged,
}

type ToolResult = Result<CallToolResponse, McpError>;

fn text_result(text: impl Into<String>, is_error: bool) -> Value {
    json!({
        "resultType": "complete",
        "isError": is_error,
        "content": [{ "type": "text", "text": text.into() }],
    })
}

fn complete(result: Value) -> ToolResult {
    Ok(CallToolResponse::Complete(from_json(result)?))
}

fn complete_text(text: impl Into<String>) -> ToolResult {
    complete(text_result(text, false))
}

fn input_required<T: From<InputRequiredResult>>(
    requests: Value,
    state: Option<String>,
) -> Result<T, McpError> {
    let mut v = json!({ "resultType": "input_required", "inputRequests": requests });
    if let Some(state) = state {
        v["requestState"] = json!(state);
    }
    Ok(from_json::<InputRequiredResult>(v)?.into())
}

/// The elicitation several fixtures use: a required `name` string.
fn ask_name() -> Value {
    form_elicitation(
        "What is your name?",
        json!({ "name": { "type": "string" } }),
        &["name"],
    )
}

fn sample(prompt: &str, max_tokens: u32) -> Value {
    json!({
        "method": "sampling/createMessage",
        "params": {
            "messages": [{ "role": "user", "content": { "type": "text", "text": prompt } }],
            "maxTokens": max_tokens
        }
    })
}

fn list_roots() -> Value {
    json!({ "method": "roots/list", "params": {} })
}

fn invalid_params(message: impl Into<String>) -> McpError {
    McpError::new(RpcCode::INVALID_PARAMS, message.into(), None)
}

fn missing_capability(required: Value) -> McpError {
    match serde_json::from_value::<ClientCapabilities>(required) {
        Ok(caps) => McpError::missing_required_client_capability(caps),
        Err(e) => McpError::internal_error(format!("building a capability error: {e}"), None),
    }
}

fn tasks_required() -> McpError {
    missing_capability(json!({ "extensions": { TASKS_EXTENSION: {} } }))
}

fn checked(method: &str, key: &str, v: &Value) -> Result<(), McpError> {
    wire::check_input_response(method, v)
        .map_err(|reason| invalid_params(format!("inputResponses.{key}: {reason}")))
}

/// One elicitation answer of `inputResponses`, checked: `Some(content)` when accepted.
fn elicitation_answer<'a>(
    key: &str,
    v: &'a Value,
) -> Result<Option<&'a Map<String, Value>>, McpError> {
    checked("elicitation/create", key, v)?;
    Ok(v.get("content")
        .and_then(Value::as_object)
        .filter(|_| v["action"] == "accept"))
}

/// The `name` of an accepted name elicitation ("stranger" when declined).
fn answered_name(key: &str, v: &Value) -> Result<String, McpError> {
    Ok(elicitation_answer(key, v)?
        .and_then(|c| content_string(c, "name"))
        .unwrap_or_else(|| "stranger".into()))
}

/// A sampling answer's text (`content` may be one block or an array of blocks).
fn sampling_text(key: &str, v: &Value) -> Result<String, McpError> {
    checked("sampling/createMessage", key, v)?;
    let block = match &v["content"] {
        Value::Array(blocks) => blocks.first().cloned().unwrap_or(Value::Null),
        other => other.clone(),
    };
    Ok(block
        .get("text")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string())
}

/// A roots/list answer's root URIs.
fn root_uris(key: &str, v: &Value) -> Result<Vec<String>, McpError> {
    checked("roots/list", key, v)?;
    Ok(v["roots"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("uri").and_then(Value::as_str).map(String::from))
        .collect())
}

/// The first string field of an accepted elicitation's content, preferring `field`.
fn content_string(content: &Map<String, Value>, field: &str) -> Option<String> {
    content
        .get(field)
        .and_then(Value::as_str)
        .or_else(|| content.values().find_map(Value::as_str))
        .map(String::from)
}

fn declares(caps: &Value, name: &str) -> bool {
    caps.get(name).is_some_and(|v| !v.is_null())
}

/// The text answer of a `confirm_delete` elicitation.
fn deletion_text(filename: &str, answer: Option<&Map<String, Value>>) -> String {
    match answer
        .and_then(|c| c.get("confirm"))
        .and_then(Value::as_bool)
    {
        Some(true) => format!("Deleted {filename}."),
        _ => format!("Kept {filename}: deletion was not confirmed."),
    }
}

fn confirm_delete_request(filename: &str) -> Value {
    form_elicitation(
        &format!("Delete {filename}?"),
        json!({ "confirm": { "type": "boolean", "description": "true to delete the file" } }),
        &["confirm"],
    )
}

fn multi_input_requests() -> BTreeMap<String, Value> {
    BTreeMap::from([
        ("name".to_string(), ask_name()),
        (
            "confirmation".to_string(),
            form_elicitation(
                "Confirm the operation?",
                json!({ "confirm": { "type": "boolean" } }),
                &["confirm"],
            ),
        ),
    ])
}

fn multi_input_text(answers: &BTreeMap<String, Value>) -> Result<String, McpError> {
    let name = match answers.get("name") {
        Some(v) => elicitation_answer("name", v)?.and_then(|c| content_string(c, "name")),
        None => None,
    };
    let confirmed = match answers.get("confirmation") {
        Some(v) => elicitation_answer("confirmation", v)?
            .and_then(|c| c.get("confirm"))
            .and_then(Value::as_bool)
            .unwrap_or(false),
        None => false,
    };
    Ok(format!(
        "Received both inputs: name={}, confirmed={confirmed}.",
        name.unwrap_or_else(|| "(none)".into())
    ))
}

fn arg_str<'a>(args: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

impl Fixtures {
    pub fn new(list_changed: ListChanged) -> Fixtures {
        let mut key = [0u8; 32];
        vidforge_core::ids::fill_random(&mut key);
        Fixtures {
            codec: RequestStateCodec::try_new(key.to_vec())
                .expect("a 32-byte key meets the codec's minimum length"),
            dynamic_tool: AtomicBool::new(false),
            dynamic_prompt: AtomicBool::new(false),
            list_changed,
        }
    }

    fn seal(&self, principal: &str, tool: &str, state: &Value) -> String {
        let bound = format!("{principal}\0{tool}");
        self.codec
            .seal_json_with(
                state,
                &SealOptions::new()
                    .associated_data(bound.as_bytes())
                    .ttl(REQUEST_STATE_TTL),
            )
            .unwrap_or_default()
    }

    /// The echoed `requestState`, verified; `None` when absent. A forged, tampered, expired or
    /// foreign state is `-32602`.
    fn open(
        &self,
        principal: &str,
        tool: &str,
        state: Option<&str>,
    ) -> Result<Option<Value>, McpError> {
        let Some(state) = state else { return Ok(None) };
        let bound = format!("{principal}\0{tool}");
        self.codec
            .open_json_with::<Value>(state, bound.as_bytes())
            .map(Some)
            .map_err(|e| invalid_params(format!("requestState failed its integrity check: {e}")))
    }

    // ---- tools ----

    /// Tool definitions, in a stable order, appended after vidforge's own.
    pub fn tools(&self) -> Vec<Value> {
        let none = json!({ "type": "object", "properties": {} });
        let mut tools: Vec<Value> = [
            ("test_simple_text", "Returns one text block."),
            ("test_image_content", "Returns one PNG image block."),
            ("test_audio_content", "Returns one WAV audio block."),
            ("test_embedded_resource", "Returns one embedded text resource."),
            ("test_multiple_content_types", "Returns text, image and embedded resource blocks."),
            ("test_error_handling", "Always fails with a tool error (isError: true)."),
            ("test_tool_with_progress", "Reports progress 0, 50, 100 of 100 when given a progressToken."),
            ("test_logging_tool", "Logs three messages, only when the request sets a logLevel."),
            ("test_missing_capability", "Needs the client's sampling capability (-32021 without it)."),
            ("test_streaming_elicitation", "Asks for input through an InputRequiredResult (never a server request)."),
            ("test_trigger_tool_change", "Adds or removes test_dynamic_tool (notifications/tools/list_changed)."),
            ("test_trigger_prompt_change", "Adds or removes test_dynamic_prompt (notifications/prompts/list_changed)."),
            ("test_input_required_result_elicitation", "MRTR: asks for a name by elicitation."),
            ("test_input_required_result_sampling", "MRTR: asks for a sampling completion."),
            ("test_input_required_result_list_roots", "MRTR: asks for the client's roots."),
            ("test_input_required_result_request_state", "MRTR: round-trips a sealed requestState."),
            ("test_input_required_result_multiple_inputs", "MRTR: elicitation, sampling and roots in one round."),
            ("test_input_required_result_multi_round", "MRTR: two rounds of input with an evolving requestState."),
            ("test_input_required_result_tampered_state", "MRTR: rejects a tampered requestState with -32602."),
            ("test_input_required_result_capabilities", "MRTR: asks only for inputs the client declared."),
            ("multi_input", "Task: waits for two inputs at once."),
            ("failing_job", "Task (required): ends completed with a tool error after ~1 s."),
            ("protocol_error_job", "Task: ends failed with a JSON-RPC error."),
            ("test_tool_with_task", "MRTR round for a name, then a task that greets it."),
        ]
        .into_iter()
        .map(|(name, description)| json!({ "name": name, "description": description, "inputSchema": none }))
        .collect();
        tools.push(json!({
            "name": "greet",
            "description": "Returns \"Hello, {name}!\" at once.",
            "inputSchema": { "type": "object", "properties": { "name": { "type": "string" } }, "required": ["name"] }
        }));
        tools.push(json!({
            "name": "slow_compute",
            "description": "Task: computes for `seconds` (0 answers at once).",
            "inputSchema": { "type": "object", "properties": {
                "seconds": { "type": "number", "minimum": 0, "maximum": MAX_COMPUTE_SECONDS },
                "label": { "type": "string" }
            } }
        }));
        tools.push(json!({
            "name": "confirm_delete",
            "description": "Task: asks the user to confirm deleting `filename`.",
            "inputSchema": { "type": "object", "properties": { "filename": { "type": "string" } }, "required": ["filename"] }
        }));
        tools.push(json!({
            "name": "json_schema_2020_12_tool",
            "description": "Tool with JSON Schema 2020-12 features",
            "inputSchema": {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": { "address": { "$anchor": "addressDef", "type": "object", "properties": {
                    "street": { "type": "string" }, "city": { "type": "string" } } } },
                "properties": {
                    "name": { "type": "string" },
                    "address": { "$ref": "#/$defs/address" },
                    "contactMethod": { "type": "string", "enum": ["phone", "email"] },
                    "phone": { "type": "string" },
                    "email": { "type": "string" }
                },
                "allOf": [{ "anyOf": [{ "required": ["phone"] }, { "required": ["email"] }] }],
                "if": { "properties": { "contactMethod": { "const": "phone" } }, "required": ["contactMethod"] },
                "then": { "required": ["phone"] },
                "else": { "required": ["email"] },
                "additionalProperties": false
            }
        }));
        tools.push(json!({
            "name": "test_custom_header",
            "description": "Echoes `region`, which HTTP clients also send as the Mcp-Param-Region header.",
            "inputSchema": { "type": "object", "properties": {
                "region": { "type": "string", "x-mcp-header": "Region" }
            }, "required": ["region"] }
        }));
        if self.dynamic_tool.load(Ordering::SeqCst) {
            tools.push(json!({
                "name": DYNAMIC_TOOL,
                "description": "Present while test_trigger_tool_change has toggled it on.",
                "inputSchema": none
            }));
        }
        tools
    }

    /// Runs a fixture tool; `None` when `name` is not one.
    pub async fn call(
        &self,
        jobs: &Jobs,
        principal: &str,
        request: &CallToolRequestParams,
        declared: &Declared,
        ctx: &RequestContext<RoleServer>,
    ) -> Option<ToolResult> {
        let args = request.arguments.clone().unwrap_or_default();
        let responses = request.input_responses.as_ref();
        let state = request.request_state.as_deref();
        let name = request.name.as_ref();
        Some(match name {
            "test_simple_text" => complete_text("This is a simple text response for testing."),
            "test_image_content" => complete(json!({
                "resultType": "complete",
                "content": [{ "type": "image", "data": TEST_IMAGE_BASE64, "mimeType": "image/png" }]
            })),
            "test_audio_content" => complete(json!({
                "resultType": "complete",
                "content": [{ "type": "audio", "data": TEST_AUDIO_BASE64, "mimeType": "audio/wav" }]
            })),
            "test_embedded_resource" => complete(json!({
                "resultType": "complete",
                "content": [{ "type": "resource", "resource": {
                    "uri": "test://embedded-resource", "mimeType": "text/plain",
                    "text": "This is an embedded resource content."
                } }]
            })),
            "test_multiple_content_types" => complete(json!({
                "resultType": "complete",
                "content": [
                    { "type": "text", "text": "Multiple content types test:" },
                    { "type": "image", "data": TEST_IMAGE_BASE64, "mimeType": "image/png" },
                    { "type": "resource", "resource": {
                        "uri": "test://mixed-content-resource", "mimeType": "application/json",
                        "text": json!({ "test": "data", "value": 123 }).to_string()
                    } }
                ]
            })),
            "test_error_handling" => complete(text_result(
                "This tool intentionally returns an error for testing",
                true,
            )),
            "test_tool_with_progress" => self.progress(ctx).await,
            "test_logging_tool" => self.logging(ctx).await,
            "test_missing_capability" => {
                if !declares(&declared.caps, "sampling") {
                    Err(missing_capability(json!({ "sampling": {} })))
                } else if let Some(answer) = responses.and_then(|r| r.get("completion")) {
                    sampling_text("completion", answer)
                        .and_then(|t| complete_text(format!("Sampling answered: {t}")))
                } else {
                    input_required(json!({ "completion": sample("Say hello.", 20) }), None)
                }
            }
            "test_streaming_elicitation" => {
                if !declared.elicitation_form {
                    Err(missing_capability(json!({ "elicitation": {} })))
                } else {
                    self.elicit_name(responses)
                }
            }
            "test_trigger_tool_change" => {
                let on = !self.dynamic_tool.fetch_xor(true, Ordering::SeqCst);
                (self.list_changed)(ListChange::Tools);
                complete_text(format!(
                    "{DYNAMIC_TOOL} is now {}.",
                    if on { "listed" } else { "removed" }
                ))
            }
            "test_trigger_prompt_change" => {
                let on = !self.dynamic_prompt.fetch_xor(true, Ordering::SeqCst);
                (self.list_changed)(ListChange::Prompts);
                complete_text(format!(
                    "{DYNAMIC_PROMPT} is now {}.",
                    if on { "listed" } else { "removed" }
                ))
            }
            DYNAMIC_TOOL if self.dynamic_tool.load(Ordering::SeqCst) => {
                complete_text("The dynamic tool ran.")
            }
            "test_input_required_result_elicitation" => self.elicit_name(responses),
            "test_input_required_result_sampling" => {
                match responses.and_then(|r| r.get("capital_question")) {
                    Some(answer) => sampling_text("capital_question", answer)
                        .and_then(|t| complete_text(format!("The model answered: {t}"))),
                    None => input_required(
                        json!({ "capital_question": sample("What is the capital of France?", 100) }),
                        None,
                    ),
                }
            }
            "test_input_required_result_list_roots" => match responses
                .and_then(|r| r.get("client_roots"))
            {
                Some(answer) => root_uris("client_roots", answer)
                    .and_then(|roots| complete_text(format!("Client roots: {}", roots.join(", ")))),
                None => input_required(json!({ "client_roots": list_roots() }), None),
            },
            "test_input_required_result_request_state"
            | "test_input_required_result_tampered_state" => {
                self.confirm_with_state(principal, name, responses, state)
            }
            "test_input_required_result_multiple_inputs" => {
                self.multiple_inputs(principal, name, responses, state)
            }
            "test_input_required_result_multi_round" => {
                self.multi_round(principal, name, responses, state)
            }
            "test_input_required_result_capabilities" => {
                self.declared_inputs_only(principal, name, responses, state, declared)
            }
            "json_schema_2020_12_tool" => {
                complete_text(format!("Received {}.", Value::Object(args.clone())))
            }
            "test_custom_header" => match arg_str(&args, "region") {
                Some(region) => complete_text(format!("Region {region}.")),
                None => Err(invalid_params("test_custom_header needs a string `region`")),
            },
            "greet" => match arg_str(&args, "name") {
                Some(who) => complete_text(format!("Hello, {who}!")),
                None => Err(invalid_params("greet needs a string `name`")),
            },
            "slow_compute" => self.slow_compute(jobs, principal, &args, declared).await,
            "failing_job" => {
                if !declared.tasks {
                    Err(tasks_required())
                } else {
                    task(jobs, jobs.spawn(principal, name, "Working on a job that will fail.", |ctx| async move {
                        ctx.sleep(Duration::from_secs(1)).await?;
                        Ok(JobOutcome::Completed(text_result("failing_job failed on purpose: the work itself reported an error.", true)))
                    }).await)
                }
            }
            "protocol_error_job" => {
                if !declared.tasks {
                    Err(McpError::internal_error(
                        "protocol_error_job failed on purpose.",
                        None,
                    ))
                } else {
                    task(
                        jobs,
                        jobs.spawn(
                            principal,
                            name,
                            "Working on a job that will fault.",
                            |ctx| async move {
                                ctx.sleep(Duration::from_millis(500)).await?;
                                Ok(JobOutcome::Failed(JobFailure {
                                    code: RpcCode::INTERNAL_ERROR.0 as i64,
                                    message: "protocol_error_job failed on purpose.".into(),
                                }))
                            },
                        )
                        .await,
                    )
                }
            }
            "confirm_delete" => {
                self.confirm_delete(jobs, principal, &args, declared, responses)
                    .await
            }
            "multi_input" => self.multi_input(jobs, principal, declared, responses).await,
            "test_tool_with_task" => {
                self.tool_with_task(jobs, principal, name, declared, responses, state)
                    .await
            }
            _ => return None,
        })
    }

    async fn progress(&self, ctx: &RequestContext<RoleServer>) -> ToolResult {
        // rmcp moves the request's `_meta` (progressToken included) into the context.
        let token = ctx.meta.get_progress_token();
        for (i, step) in [0.0, 50.0, 100.0].into_iter().enumerate() {
            if i > 0 {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            if let Some(token) = &token {
                let param = from_json(json!({
                    "progressToken": token, "progress": step, "total": 100.0,
                    "message": format!("Completed step {step} of 100")
                }))?;
                // The client may have gone; the tool still finishes.
                let _ = ctx.peer.notify_progress(param).await;
            }
        }
        complete_text(match token {
            Some(token) => format!(
                "Progress reported for token {}.",
                serde_json::to_string(&token).unwrap_or_default()
            ),
            None => "Done (no progressToken, so no progress was reported).".into(),
        })
    }

    // Per-request logging (SEP-2575 `logLevel`) is what the suite checks; rmcp marks its
    // logging API deprecated in favour of a later SEP, but it is the 2026-07-28 wire.
    #[allow(deprecated)]
    async fn logging(&self, ctx: &RequestContext<RoleServer>) -> ToolResult {
        use rmcp::model::LoggingLevel;
        // Logs only when the request asked for them, at `info` or a lower threshold.
        let wanted = ctx
            .meta
            .log_level()
            .is_some_and(|level| matches!(level, LoggingLevel::Debug | LoggingLevel::Info));
        let mut sent = 0;
        if wanted {
            for message in [
                "Tool execution started",
                "Tool processing data",
                "Tool execution completed",
            ] {
                let param = from_json(
                    json!({ "level": "info", "logger": "vidforge-fixtures", "data": message }),
                )?;
                if ctx.peer.notify_logging_message(param).await.is_ok() {
                    sent += 1;
                }
            }
        }
        complete_text(format!("Logging tool ran; {sent} log message(s) sent."))
    }

    /// Round 1: ask for a name; round 2: greet it. A missing answer is asked for again; a
    /// malformed one is `-32602`; unknown keys are ignored.
    fn elicit_name(&self, responses: Option<&InputResponses>) -> ToolResult {
        match responses.and_then(|r| r.get("user_name")) {
            Some(answer) => match elicitation_answer("user_name", answer)? {
                Some(content) => complete_text(format!(
                    "Hello, {}!",
                    content_string(content, "name").unwrap_or_else(|| "stranger".into())
                )),
                None => complete_text("The user declined to give a name."),
            },
            None => input_required(json!({ "user_name": ask_name() }), None),
        }
    }

    /// Round 1: one confirmation plus a sealed state; round 2 needs both back, the state intact.
    fn confirm_with_state(
        &self,
        principal: &str,
        tool: &str,
        responses: Option<&InputResponses>,
        state: Option<&str>,
    ) -> ToolResult {
        let opened = self.open(principal, tool, state)?;
        match (responses.and_then(|r| r.get("confirm")), opened) {
            (Some(answer), Some(_)) => {
                let ok = elicitation_answer("confirm", answer)?
                    .and_then(|c| c.get("ok"))
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                complete_text(format!("state-ok: requestState verified; confirmed={ok}."))
            }
            _ => input_required(
                json!({ "confirm": form_elicitation("Please confirm", json!({ "ok": { "type": "boolean" } }), &["ok"]) }),
                Some(self.seal(principal, tool, &json!({ "round": 1 }))),
            ),
        }
    }

    fn multiple_inputs(
        &self,
        principal: &str,
        tool: &str,
        responses: Option<&InputResponses>,
        state: Option<&str>,
    ) -> ToolResult {
        let opened = self.open(principal, tool, state)?;
        let keys = ["user_name", "greeting", "client_roots"];
        if let (Some(r), Some(_)) = (responses, opened)
            && keys.iter().all(|k| r.contains_key(*k))
        {
            let name = answered_name("user_name", &r["user_name"])?;
            let greeting = sampling_text("greeting", &r["greeting"])?;
            let roots = root_uris("client_roots", &r["client_roots"])?;
            return complete_text(format!(
                "name={name}; greeting={greeting}; roots={}",
                roots.join(", ")
            ));
        }
        input_required(
            json!({
                "user_name": ask_name(),
                "greeting": sample("Generate a greeting", 50),
                "client_roots": list_roots(),
            }),
            Some(self.seal(principal, tool, &json!({ "round": 1 }))),
        )
    }

    fn multi_round(
        &self,
        principal: &str,
        tool: &str,
        responses: Option<&InputResponses>,
        state: Option<&str>,
    ) -> ToolResult {
        let opened = self.open(principal, tool, state)?;
        let round = opened
            .as_ref()
            .and_then(|s| s["round"].as_u64())
            .unwrap_or(0);
        let step1 = || {
            input_required(
                json!({ "step1": form_elicitation("Step 1: What is your name?", json!({ "name": { "type": "string" } }), &["name"]) }),
                Some(self.seal(principal, tool, &json!({ "round": 1 }))),
            )
        };
        // Round 2 asks for the colour, carrying the name in the sealed state.
        let step2 = |name: &str| {
            input_required(
                json!({ "step2": form_elicitation("Step 2: What is your favorite color?", json!({ "color": { "type": "string" } }), &["color"]) }),
                Some(self.seal(principal, tool, &json!({ "round": 2, "name": name }))),
            )
        };
        match round {
            1 => match responses.and_then(|r| r.get("step1")) {
                Some(answer) => step2(&answered_name("step1", answer)?),
                None => step1(),
            },
            2 => {
                let name = opened
                    .as_ref()
                    .and_then(|s| s["name"].as_str())
                    .unwrap_or("stranger");
                match responses.and_then(|r| r.get("step2")) {
                    Some(answer) => {
                        let color = elicitation_answer("step2", answer)?
                            .and_then(|c| content_string(c, "color"))
                            .unwrap_or_else(|| "unknown".into());
                        complete_text(format!("{name}'s favorite color is {color}."))
                    }
                    None => step2(name),
                }
            }
            _ => step1(),
        }
    }

    /// Asks only for the inputs whose capability this request declared.
    fn declared_inputs_only(
        &self,
        principal: &str,
        tool: &str,
        responses: Option<&InputResponses>,
        state: Option<&str>,
        declared: &Declared,
    ) -> ToolResult {
        let caps = &declared.caps;
        let mut requests = Map::new();
        if declares(caps, "elicitation") {
            requests.insert("user_name".into(), ask_name());
        }
        if declares(caps, "sampling") {
            requests.insert("greeting".into(), sample("Generate a greeting", 50));
        }
        if declares(caps, "roots") {
            requests.insert("client_roots".into(), list_roots());
        }
        if requests.is_empty() {
            return Err(missing_capability(json!({ "sampling": {} })));
        }
        if self.open(principal, tool, state)?.is_some()
            && let Some(r) = responses
            && requests.keys().all(|k| r.contains_key(k))
        {
            return complete_text(format!("Received {} declared input(s).", requests.len()));
        }
        input_required(
            Value::Object(requests),
            Some(self.seal(principal, tool, &json!({ "round": 1 }))),
        )
    }

    async fn slow_compute(
        &self,
        jobs: &Jobs,
        principal: &str,
        args: &Map<String, Value>,
        declared: &Declared,
    ) -> ToolResult {
        let seconds = match args.get("seconds") {
            None => 1.0,
            Some(v) => match v.as_f64() {
                Some(s) if (0.0..=MAX_COMPUTE_SECONDS).contains(&s) => s,
                _ => {
                    return Err(invalid_params(format!(
                        "slow_compute: `seconds` must be a number from 0 to {MAX_COMPUTE_SECONDS}"
                    )));
                }
            },
        };
        let label = arg_str(args, "label").unwrap_or("job").to_string();
        let text = format!("Computed {label} in {seconds}s.");
        let duration = Duration::from_secs_f64(seconds);
        if !declared.tasks || seconds == 0.0 {
            tokio::time::sleep(duration).await;
            return complete_text(text);
        }
        task(
            jobs,
            jobs.spawn(
                principal,
                "slow_compute",
                &format!("Computing {label}."),
                move |ctx| async move {
                    ctx.sleep(duration).await?;
                    Ok(JobOutcome::Completed(text_result(text, false)))
                },
            )
            .await,
        )
    }

    async fn confirm_delete(
        &self,
        jobs: &Jobs,
        principal: &str,
        args: &Map<String, Value>,
        declared: &Declared,
        responses: Option<&InputResponses>,
    ) -> ToolResult {
        let Some(filename) = arg_str(args, "filename").map(String::from) else {
            return Err(invalid_params("confirm_delete needs a string `filename`"));
        };
        if !declared.elicitation_form {
            return Err(missing_capability(json!({ "elicitation": {} })));
        }
        if !declared.tasks {
            // Without tasks the same question goes through an ephemeral MRTR round.
            return match responses.and_then(|r| r.get("confirm_delete")) {
                Some(answer) => complete_text(deletion_text(
                    &filename,
                    elicitation_answer("confirm_delete", answer)?,
                )),
                None => input_required(
                    json!({ "confirm_delete": confirm_delete_request(&filename) }),
                    None,
                ),
            };
        }
        task(
            jobs,
            jobs.spawn(
                principal,
                "confirm_delete",
                &format!("Preparing to delete {filename}."),
                move |ctx| async move {
                    let answers = ctx
                        .ask(
                            BTreeMap::from([(
                                "confirm_delete".to_string(),
                                confirm_delete_request(&filename),
                            )]),
                            &format!("Waiting for the user to confirm deleting {filename}."),
                        )
                        .await?;
                    let answer = answers
                        .get("confirm_delete")
                        .cloned()
                        .unwrap_or(Value::Null);
                    let content = answer
                        .get("content")
                        .and_then(Value::as_object)
                        .filter(|_| answer["action"] == "accept");
                    Ok(JobOutcome::Completed(text_result(
                        deletion_text(&filename, content),
                        false,
                    )))
                },
            )
            .await,
        )
    }

    async fn multi_input(
        &self,
        jobs: &Jobs,
        principal: &str,
        declared: &Declared,
        responses: Option<&InputResponses>,
    ) -> ToolResult {
        if !declared.elicitation_form {
            return Err(missing_capability(json!({ "elicitation": {} })));
        }
        if !declared.tasks {
            let requests = multi_input_requests();
            return match responses {
                Some(r) if requests.keys().all(|k| r.contains_key(k)) => {
                    complete_text(multi_input_text(r)?)
                }
                _ => input_required(
                    serde_json::to_value(requests).map_err(|e| invalid_params(e.to_string()))?,
                    None,
                ),
            };
        }
        task(
            jobs,
            jobs.spawn(
                principal,
                "multi_input",
                "Gathering two inputs.",
                |ctx| async move {
                    let answers = ctx
                        .ask(multi_input_requests(), "Waiting for two inputs.")
                        .await?;
                    let text = multi_input_text(&answers)
                        .unwrap_or_else(|e| format!("Inputs were malformed: {}", e.message));
                    Ok(JobOutcome::Completed(text_result(text, false)))
                },
            )
            .await,
        )
    }

    /// MRTR for a name first (no task yet), then a task that greets it.
    async fn tool_with_task(
        &self,
        jobs: &Jobs,
        principal: &str,
        tool: &str,
        declared: &Declared,
        responses: Option<&InputResponses>,
        state: Option<&str>,
    ) -> ToolResult {
        let opened = self.open(principal, tool, state)?;
        let answer = match (responses.and_then(|r| r.get("user_name")), opened) {
            (Some(answer), Some(_)) => answer,
            _ => {
                if !declared.elicitation_form {
                    return Err(missing_capability(json!({ "elicitation": {} })));
                }
                return input_required(
                    json!({ "user_name": ask_name() }),
                    Some(self.seal(principal, tool, &json!({ "round": 1 }))),
                );
            }
        };
        let name = answered_name("user_name", answer)?;
        let text = format!("Hello, {name}! (greeted by a task)");
        if !declared.tasks {
            return complete_text(text);
        }
        task(
            jobs,
            jobs.spawn(
                principal,
                tool,
                &format!("Greeting {name}."),
                move |ctx| async move {
                    ctx.sleep(Duration::from_millis(200)).await?;
                    Ok(JobOutcome::Completed(text_result(text, false)))
                },
            )
            .await,
        )
    }

    // ---- prompts ----

    pub fn prompts(&self) -> Vec<Value> {
        let mut prompts = vec![
            json!({ "name": "test_simple_prompt", "description": "A simple prompt without arguments." }),
            json!({ "name": "test_prompt_with_arguments", "description": "A prompt with two required arguments.",
                    "arguments": [
                        { "name": "arg1", "description": "First test argument", "required": true },
                        { "name": "arg2", "description": "Second test argument", "required": true }
                    ] }),
            json!({ "name": "test_prompt_with_embedded_resource", "description": "A prompt embedding a resource.",
                    "arguments": [{ "name": "resourceUri", "description": "URI of the resource to embed", "required": true }] }),
            json!({ "name": "test_prompt_with_image", "description": "A prompt with an image." }),
            json!({ "name": "test_input_required_result_prompt", "description": "A prompt that first asks for context (MRTR)." }),
        ];
        if self.dynamic_prompt.load(Ordering::SeqCst) {
            prompts.push(json!({ "name": DYNAMIC_PROMPT, "description": "Present while test_trigger_prompt_change has toggled it on." }));
        }
        prompts
    }

    pub fn get_prompt(
        &self,
        request: &GetPromptRequestParams,
    ) -> Result<GetPromptResponse, McpError> {
        let args = request.arguments.clone().unwrap_or_default();
        let arg = |key: &str| -> Result<String, McpError> {
            arg_str(&args, key).map(String::from).ok_or_else(|| {
                invalid_params(format!(
                    "prompt {} needs the argument `{key}`",
                    request.name
                ))
            })
        };
        let user = |content: Value| json!({ "role": "user", "content": content });
        let text = |t: &str| json!({ "type": "text", "text": t });
        let messages = match request.name.as_str() {
            "test_simple_prompt" => vec![user(text("This is a simple prompt for testing."))],
            "test_prompt_with_arguments" => {
                let (a1, a2) = (arg("arg1")?, arg("arg2")?);
                vec![user(text(&format!(
                    "Prompt with arguments: arg1='{a1}', arg2='{a2}'"
                )))]
            }
            "test_prompt_with_embedded_resource" => vec![
                user(json!({ "type": "resource", "resource": {
                    "uri": arg("resourceUri")?, "mimeType": "text/plain",
                    "text": "Embedded resource content for testing."
                } })),
                user(text("Please process the embedded resource above.")),
            ],
            "test_prompt_with_image" => vec![
                user(
                    json!({ "type": "image", "data": TEST_IMAGE_BASE64, "mimeType": "image/png" }),
                ),
                user(text("Please analyze the image above.")),
            ],
            "test_input_required_result_prompt" => {
                match request
                    .input_responses
                    .as_ref()
                    .and_then(|r| r.get("user_context"))
                {
                    Some(answer) => {
                        let context = elicitation_answer("user_context", answer)?
                            .and_then(|c| content_string(c, "context"))
                            .unwrap_or_else(|| "no context".into());
                        vec![user(text(&format!("Answer using this context: {context}")))]
                    }
                    None => {
                        return input_required(
                            json!({ "user_context": form_elicitation("What context should the prompt use?", json!({ "context": { "type": "string" } }), &["context"]) }),
                            None,
                        );
                    }
                }
            }
            DYNAMIC_PROMPT if self.dynamic_prompt.load(Ordering::SeqCst) => {
                vec![user(text("The dynamic prompt."))]
            }
            other => return Err(invalid_params(format!("Unknown prompt: {other}"))),
        };
        Ok(GetPromptResponse::Complete(from_json(json!({
            "resultType": "complete",
            "messages": messages,
        }))?))
    }

    /// `completion/complete` for the fixture prompt's arguments and template variable.
    pub fn complete(&self, reference: &Value, argument: &str, value: &str) -> Value {
        let candidates: &[&str] = match (reference["type"].as_str(), argument) {
            (Some("ref/prompt"), "arg1" | "arg2")
                if reference["name"] == "test_prompt_with_arguments" =>
            {
                &["paris", "park", "party", "test", "testValue1", "testValue2"]
            }
            (Some("ref/resource"), "id") if reference["uri"] == "test://template/{id}/data" => {
                &["1", "2", "3", "123"]
            }
            _ => &[],
        };
        let values: Vec<&str> = candidates
            .iter()
            .copied()
            .filter(|c| c.starts_with(value))
            .collect();
        json!({ "values": values, "total": values.len(), "hasMore": false })
    }

    // ---- resources ----

    pub fn resources(&self) -> Vec<Value> {
        vec![
            json!({ "uri": "test://static-text", "name": "static-text", "description": "A static text resource.", "mimeType": "text/plain" }),
            json!({ "uri": "test://static-binary", "name": "static-binary", "description": "A static PNG resource.", "mimeType": "image/png" }),
            json!({ "uri": "test://watched-resource", "name": "watched-resource", "description": "A resource clients may watch.", "mimeType": "text/plain" }),
        ]
    }

    pub fn resource_templates(&self) -> Vec<Value> {
        vec![json!({
            "uriTemplate": "test://template/{id}/data", "name": "template-data",
            "description": "JSON data for any id.", "mimeType": "application/json"
        })]
    }

    /// `resources/read` contents for a fixture URI; `None` when it is not one.
    pub fn read(&self, uri: &str) -> Option<Value> {
        let content = match uri {
            "test://static-text" => {
                json!({ "uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource." })
            }
            "test://static-binary" => {
                json!({ "uri": uri, "mimeType": "image/png", "blob": TEST_IMAGE_BASE64 })
            }
            "test://watched-resource" => {
                json!({ "uri": uri, "mimeType": "text/plain", "text": "Watched resource content" })
            }
            _ => {
                let id = uri
                    .strip_prefix("test://template/")?
                    .strip_suffix("/data")?;
                if id.is_empty() || id.contains('/') {
                    return None;
                }
                json!({ "uri": uri, "mimeType": "application/json",
                        "text": json!({ "id": id, "templateTest": true, "data": format!("Data for ID: {id}") }).to_string() })
            }
        };
        Some(json!({ "resultType": "complete", "contents": [content] }))
    }
}

/// A `CreateTaskResult` for a freshly spawned job.
fn task(jobs: &Jobs, spawned: Result<JobRecord, JobError>) -> ToolResult {
    let rec = spawned
        .map_err(|e| McpError::internal_error(format!("cannot create the task: {e}"), None))?;
    let mut fields = jobs.task_fields(&rec);
    fields["resultType"] = json!("task");
    Ok(CallToolResponse::Task(from_json(fields)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixtures() -> Fixtures {
        Fixtures::new(Box::new(|_| {}))
    }

    #[test]
    fn sealed_state_is_bound_to_principal_and_tool() {
        let f = fixtures();
        let state = f.seal("alice", "t", &json!({ "round": 1 }));
        assert_eq!(
            f.open("alice", "t", Some(&state)).unwrap(),
            Some(json!({ "round": 1 }))
        );
        assert!(f.open("bob", "t", Some(&state)).is_err());
        assert!(f.open("alice", "other", Some(&state)).is_err());
        assert!(
            f.open("alice", "t", Some(&format!("{state}-TAMPERED")))
                .is_err()
        );
        assert_eq!(f.open("alice", "t", None).unwrap(), None);
    }

    #[test]
    fn elicitation_answers_are_validated() {
        assert!(elicitation_answer("k", &json!(12345)).is_err());
        assert!(elicitation_answer("k", &json!({ "action": "accept" })).is_err());
        assert!(
            elicitation_answer("k", &json!({ "action": "decline" }))
                .unwrap()
                .is_none()
        );
        let v = json!({ "action": "accept", "content": { "name": "Alice" } });
        assert_eq!(
            content_string(elicitation_answer("k", &v).unwrap().unwrap(), "name").as_deref(),
            Some("Alice")
        );
    }

    #[test]
    fn template_reads_substitute_the_id_and_refuse_others() {
        let f = fixtures();
        let r = f.read("test://template/123/data").unwrap();
        assert!(
            r["contents"][0]["text"]
                .as_str()
                .unwrap()
                .contains("\"id\":\"123\"")
        );
        assert!(f.read("test://template//data").is_none());
        assert!(f.read("test://nope").is_none());
        assert_eq!(
            f.complete(
                &json!({ "type": "ref/prompt", "name": "test_prompt_with_arguments" }),
                "arg1",
                "par"
            )["values"],
            json!(["paris", "park", "party"])
        );
    }

    #[test]
    fn trigger_toggles_the_dynamic_tool() {
        let (tx, rx) = std::sync::mpsc::channel();
        let f = Fixtures::new(Box::new(move |change| {
            let _ = tx.send(change);
        }));
        let before = f.tools().len();
        assert!(!f.dynamic_tool.fetch_xor(true, Ordering::SeqCst));
        (f.list_changed)(ListChange::Tools);
        assert_eq!(f.tools().len(), before + 1);
        assert_eq!(rx.try_recv().unwrap(), ListChange::Tools);
    }
}
