//! The server-message streams (`GET /mcp` with `Mcp-Session-Id`) of legacy sessions, bounded
//! so that no principal can hold the node's connections with them:
//!
//! - **one per session**: a second `GET` for a session replaces the first, which ends at once
//!   (the 2025-11-25 transport lets a server close a stream at any time; rmcp alone keeps up to
//!   1 + 32 of them per session);
//! - **a bound per principal** and **a bound per node**, both well under the node's connection
//!   cap (`max_connections / 16` and `/ 4`), so other principals and `/healthz` always find a
//!   connection: past them a new stream is refused (`429` / `503` with `Retry-After`);
//! - **ended with its session**: at once on `DELETE`, and within [`WATCH`] of the session's
//!   end otherwise (idle timeout, restart of rmcp's worker), whatever keep-alives flowed.
//!
//! Each stream's response body is wrapped: it ends when its entry is cancelled or its session
//! is gone, and dropping it (the client hung up) removes its entry.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::Response;
use futures::StreamExt;
use rmcp::model::ErrorCode;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::jsonrpc::rpc_error;

/// How often an open stream checks that its session still exists.
pub const WATCH: Duration = Duration::from_millis(250);
/// How long a refused stream is told to wait.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// The bounds, derived from the node's connection cap.
#[derive(Clone, Copy, Debug)]
pub struct StreamLimits {
    pub per_principal: usize,
    pub per_node: usize,
}

impl StreamLimits {
    /// A sixteenth of the connections for one principal's streams, a quarter for all of them.
    pub fn for_connections(max_connections: usize) -> Self {
        StreamLimits {
            per_principal: (max_connections / 16).max(1),
            per_node: (max_connections / 4).max(1),
        }
    }
}

struct Entry {
    id: u64,
    principal: String,
    cancel: CancellationToken,
}

/// The open streams of this node's legacy sessions, by session id.
pub struct LegacyStreams {
    limits: StreamLimits,
    open: Mutex<HashMap<String, Entry>>,
    next_id: AtomicU64,
}

impl LegacyStreams {
    pub fn new(limits: StreamLimits) -> Arc<Self> {
        Arc::new(LegacyStreams {
            limits,
            open: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a new stream of `session` for `principal`, ending the session's previous one;
    /// or the refusal when the principal or the node holds as many as it may.
    pub fn open(self: &Arc<Self>, session: &str, principal: &str) -> Result<Stream, Refused> {
        let mut open = self.lock();
        if let Some(previous) = open.remove(session) {
            previous.cancel.cancel();
        }
        let held = open.values().filter(|e| e.principal == principal).count();
        if held >= self.limits.per_principal {
            return Err(Refused::Principal(self.limits.per_principal));
        }
        if open.len() >= self.limits.per_node {
            return Err(Refused::Node(self.limits.per_node));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let cancel = CancellationToken::new();
        open.insert(
            session.to_string(),
            Entry {
                id,
                principal: principal.to_string(),
                cancel: cancel.clone(),
            },
        );
        Ok(Stream {
            streams: self.clone(),
            session: session.to_string(),
            id,
            cancel,
        })
    }

    /// Ends `session`'s stream, if it has one (its session was deleted).
    pub fn end(&self, session: &str) {
        if let Some(entry) = self.lock().remove(session) {
            entry.cancel.cancel();
        }
    }
}

/// Why a stream was not opened (each a temporary refusal with `Retry-After`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The principal holds this many streams already (`429`).
    Principal(usize),
    /// The node holds this many streams already (`503`).
    Node(usize),
}

impl Refused {
    pub fn into_response(self) -> Response {
        let (status, message, mut data) = match self {
            Refused::Principal(max) => (
                StatusCode::TOO_MANY_REQUESTS,
                "This principal holds as many legacy server-message streams as it may; close one (or end its session).",
                json!({ "code": "rate_limited", "max_streams_per_principal": max }),
            ),
            Refused::Node(max) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "Too many legacy server-message streams are open on this server; try again shortly.",
                json!({ "code": "service_unavailable", "max_streams": max }),
            ),
        };
        data["temporary"] = json!(true);
        data["retry_after_ms"] = json!(RETRY_AFTER.as_millis() as u64);
        rpc_error(
            status,
            Value::Null,
            ErrorCode::INVALID_REQUEST,
            message,
            data,
            Some(RETRY_AFTER),
        )
    }
}

/// One registered stream; removes its entry when dropped (if it is still the session's).
pub struct Stream {
    streams: Arc<LegacyStreams>,
    session: String,
    id: u64,
    cancel: CancellationToken,
}

impl Drop for Stream {
    fn drop(&mut self) {
        let mut open = self.streams.lock();
        if open.get(&self.session).is_some_and(|e| e.id == self.id) {
            open.remove(&self.session);
        }
    }
}

impl Stream {
    /// `response`'s body, ending when this stream is cancelled (replaced, its session
    /// deleted) or its session no longer exists in `manager` (checked every [`WATCH`]). The
    /// connection closes with the stream (`Connection: close`): an ended stream gives its
    /// connection back at once instead of idling on it.
    pub fn attach(self, response: Response, manager: Arc<LocalSessionManager>) -> Response {
        let (mut parts, body) = response.into_parts();
        parts.headers.insert(
            axum::http::header::CONNECTION,
            axum::http::HeaderValue::from_static("close"),
        );
        let cancel = self.cancel.clone();
        let session = self.session.clone();
        let ended = async move {
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(WATCH) => {
                        if !manager.sessions.read().await.contains_key(session.as_str()) {
                            return;
                        }
                    }
                }
            }
        };
        let data = body
            .into_data_stream()
            .take_until(Box::pin(ended))
            .map(move |chunk| {
                // The entry lives as long as the body does.
                let _held = &self;
                chunk
            });
        Response::from_parts(parts, Body::from_stream(data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_stream_per_session_and_bounds_per_principal_and_node() {
        let streams = LegacyStreams::new(StreamLimits {
            per_principal: 2,
            per_node: 3,
        });
        let first = streams.open("s1", "alice").unwrap();
        let second = streams.open("s1", "alice").unwrap();
        assert!(
            first.cancel.is_cancelled(),
            "a new stream replaces the session's old one"
        );
        assert!(!second.cancel.is_cancelled());
        drop(first);
        assert_eq!(
            streams.lock().len(),
            1,
            "the old stream's drop leaves the new entry"
        );
        let _a2 = streams.open("s2", "alice").unwrap();
        assert_eq!(
            streams.open("s3", "alice").err(),
            Some(Refused::Principal(2))
        );
        let _b1 = streams.open("s4", "bob").unwrap();
        assert_eq!(streams.open("s5", "carol").err(), Some(Refused::Node(3)));
        streams.end("s1");
        assert!(second.cancel.is_cancelled(), "DELETE ends the stream");
        assert!(streams.open("s5", "carol").is_ok());
        assert_eq!(StreamLimits::for_connections(1024).per_principal, 64);
        assert_eq!(StreamLimits::for_connections(1024).per_node, 256);
    }
}
