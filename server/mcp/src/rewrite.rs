//! The way out of the wire layer: `io.modelcontextprotocol/serverInfo` on modern results,
//! `taskIds` echoed in a listen acknowledgement, and the fields the protocol removed dropped,
//! in JSON bodies and in SSE events as they stream past.

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use http_body_util::BodyExt;
use serde_json::{Value, json};

use crate::wire;

fn server_info() -> Value {
    json!({ "name": "vidforge", "version": env!("CARGO_PKG_VERSION") })
}

/// What [`rewrite_response`] changes on the way out.
#[derive(Default)]
pub(crate) struct Rewrite {
    /// `taskIds` to echo in a listen acknowledgement.
    pub(crate) task_ids: Option<Vec<String>>,
    /// Add `io.modelcontextprotocol/serverInfo` to results (modern requests only: a legacy
    /// client learned it from `initialize`).
    pub(crate) server_info: bool,
}

/// The response's `Content-Type`, lower case (empty without one).
pub(crate) fn content_type(response: &Response) -> String {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase()
}

/// Adds `serverInfo` to a JSON-RPC result, and `taskIds` to a listen acknowledgement; drops
/// the fields rmcp writes that the protocol removed ([`wire::drop_removed_fields`]).
fn rewrite_message(message: &mut Value, rewrite: &Rewrite) {
    wire::drop_removed_fields(message);
    if rewrite.server_info
        && let Some(result) = message.get_mut("result").and_then(Value::as_object_mut)
    {
        let meta = result.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.entry("io.modelcontextprotocol/serverInfo")
                .or_insert_with(server_info);
        }
    }
    if let Some(ids) = &rewrite.task_ids
        && message["method"] == "notifications/subscriptions/acknowledged"
        && let Some(notifications) = message["params"]
            .get_mut("notifications")
            .and_then(Value::as_object_mut)
    {
        notifications.insert("taskIds".into(), json!(ids));
    }
}

/// [`rewrite_message`] on a JSON body, or on each event of an SSE stream.
pub(crate) async fn rewrite_response(response: Response, rewrite: Rewrite) -> Response {
    let ct = content_type(&response);
    if ct.starts_with("application/json") {
        let (mut parts, body) = response.into_parts();
        let Ok(collected) = body.collect().await else {
            return (StatusCode::INTERNAL_SERVER_ERROR, "response body failed").into_response();
        };
        let bytes = collected.to_bytes();
        let Ok(mut message) = serde_json::from_slice::<Value>(&bytes) else {
            return Response::from_parts(parts, Body::from(bytes));
        };
        // Written once into room for it (a blob's answer is megabytes: no doubling copies),
        // the original gone first.
        let mut out = Vec::with_capacity(bytes.len() + 256);
        drop(bytes);
        rewrite_message(&mut message, &rewrite);
        if serde_json::to_writer(&mut out, &message).is_err() {
            return (StatusCode::INTERNAL_SERVER_ERROR, "response body failed").into_response();
        }
        drop(message);
        let out = Bytes::from(out);
        parts
            .headers
            .insert(header::CONTENT_LENGTH, HeaderValue::from(out.len()));
        return Response::from_parts(parts, Body::from(out));
    }
    if ct.starts_with("text/event-stream") {
        let (parts, body) = response.into_parts();
        let mut rewriter = SseRewriter {
            buffer: Vec::new(),
            rewrite,
        };
        let stream = body
            .into_data_stream()
            .map(move |chunk| chunk.map(|bytes| rewriter.push(&bytes)));
        return Response::from_parts(parts, Body::from_stream(stream));
    }
    response
}

/// Rewrites complete SSE events as they stream past; partial events wait in the buffer.
/// Buffers bytes, not text: an event is decoded only once whole, so a multi-byte character
/// split across chunks is never torn (the `\n\n` boundary is ASCII).
struct SseRewriter {
    buffer: Vec<u8>,
    rewrite: Rewrite,
}

impl SseRewriter {
    fn push(&mut self, bytes: &[u8]) -> Bytes {
        self.buffer.extend_from_slice(bytes);
        let mut out = String::new();
        while let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = self.buffer.drain(..end + 2).collect();
            out.push_str(&self.rewrite_event(&String::from_utf8_lossy(&event)));
        }
        Bytes::from(out)
    }

    fn rewrite_event(&self, event: &str) -> String {
        let mut out = String::with_capacity(event.len() + 64);
        for line in event.split_inclusive('\n') {
            if let Some(data) = line.strip_prefix("data:")
                && let Ok(mut message) = serde_json::from_str::<Value>(data.trim())
            {
                rewrite_message(&mut message, &self.rewrite);
                out.push_str("data: ");
                out.push_str(&message.to_string());
                out.push('\n');
            } else {
                out.push_str(line);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_rewriter_handles_split_events() {
        let mut r = SseRewriter {
            buffer: Vec::new(),
            rewrite: Rewrite {
                task_ids: Some(vec!["task_1".into()]),
                server_info: true,
            },
        };
        let ack = r#"{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{}}}"#;
        let first = r.push(format!("event: message\ndata: {}", &ack[..20]).as_bytes());
        assert!(first.is_empty());
        let second = r.push(format!("{}\n\n", &ack[20..]).as_bytes());
        let text = String::from_utf8(second.to_vec()).unwrap();
        assert!(text.starts_with("event: message\ndata: "));
        assert!(text.contains(r#""taskIds":["task_1"]"#), "{text}");
    }

    #[test]
    fn sse_rewriter_keeps_characters_split_across_chunks() {
        let mut r = SseRewriter {
            buffer: Vec::new(),
            rewrite: Rewrite::default(),
        };
        let event = "data: {\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{\"text\":\"caf\u{e9} \u{1f3ac}\"}}\n\n";
        let bytes = event.as_bytes();
        // Split inside the four-byte clapper emoji and inside the two-byte é.
        let e_acute = event.find('\u{e9}').unwrap() + 1;
        let clapper = event.find('\u{1f3ac}').unwrap() + 2;
        let mut out = Vec::new();
        for chunk in [
            &bytes[..e_acute],
            &bytes[e_acute..clapper],
            &bytes[clapper..],
        ] {
            out.extend_from_slice(&r.push(chunk));
        }
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("caf\u{e9} \u{1f3ac}"), "{text}");
        assert!(!text.contains('\u{fffd}'), "{text}");
    }

    #[test]
    fn results_gain_server_info() {
        let mut m = json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete"}});
        let mut legacy = m.clone();
        rewrite_message(
            &mut m,
            &Rewrite {
                server_info: true,
                ..Rewrite::default()
            },
        );
        assert_eq!(
            m["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
            "vidforge"
        );
        rewrite_message(&mut legacy, &Rewrite::default());
        assert!(legacy["result"].get("_meta").is_none(), "{legacy}");
    }
}
