//! One budget for every long-lived response on `/mcp`: the server-message streams of legacy
//! sessions (`GET` with `Mcp-Session-Id`) and `subscriptions/listen` streams (a `POST` whose
//! answer is an SSE stream that stays open), and any other answer that streams. Without it
//! one principal could hold every connection of the node with them (their keep-alives beat
//! the idle timeout):
//!
//! - **a bound per principal** and **a bound per node**, both well under the node's
//!   connection cap (`max_connections / 16` and `/ 4`), so other principals and `/healthz`
//!   always find a connection: past them a new stream is refused at once (`429` / `503`,
//!   `Retry-After`, and `Connection: close`, so a refused request gives its connection back);
//! - **a lifetime** (`stream_max_lifetime`): a listen stream then ends cleanly (its final
//!   `SubscriptionsListenResult`, see `listen.rs`; the client listens again), a legacy
//!   stream ends (the client reconnects with `GET`); a stream still open shortly after its
//!   lifetime is cut ([`LISTEN_GRACE`]);
//! - **one per legacy session**: a second `GET` for a session replaces the first, which ends
//!   at once (rmcp alone keeps up to 1 + 32 of them per session), and a session's stream ends
//!   with it: at once on `DELETE`, within [`WATCH`] of the session's end otherwise.
//!
//! Each stream's response body is wrapped: it ends when its entry is cancelled, its lifetime
//! is over or its session is gone, and dropping it (the client hung up) removes its entry.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use futures::StreamExt;
use rmcp::model::ErrorCode;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::jsonrpc::rpc_error;

/// How often a legacy stream checks that its session still exists.
pub const WATCH: Duration = Duration::from_millis(250);
/// How long past its lifetime a listen stream may take to end cleanly before it is cut.
pub const LISTEN_GRACE: Duration = Duration::from_secs(5);
/// How long a refused stream is told to wait.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// The bounds: how many streams, and for how long.
#[derive(Clone, Copy, Debug)]
pub struct StreamLimits {
    pub per_principal: usize,
    pub per_node: usize,
    pub max_lifetime: Duration,
}

impl StreamLimits {
    /// A sixteenth of the connections for one principal's streams, a quarter for all of them.
    pub fn for_connections(max_connections: usize, max_lifetime: Duration) -> Self {
        StreamLimits {
            per_principal: (max_connections / 16).max(1),
            per_node: (max_connections / 4).max(1),
            max_lifetime,
        }
    }
}

struct Entry {
    principal: String,
    /// The legacy session whose server-message stream this is.
    session: Option<String>,
    cancel: CancellationToken,
}

/// The node's open streams.
pub struct Streams {
    limits: StreamLimits,
    open: Mutex<HashMap<u64, Entry>>,
    next_id: AtomicU64,
}

impl Streams {
    pub fn new(limits: StreamLimits) -> Arc<Self> {
        Arc::new(Streams {
            limits,
            open: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
        })
    }

    pub fn limits(&self) -> StreamLimits {
        self.limits
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Entry>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a new stream for `principal` (the server-message stream of legacy `session`,
    /// ending that session's previous one), or the refusal when the principal or the node
    /// holds as many as it may.
    pub fn open(
        self: &Arc<Self>,
        principal: &str,
        session: Option<&str>,
    ) -> Result<Stream, Refused> {
        let mut open = self.lock();
        if let Some(session) = session {
            end_streams_of(&mut open, session);
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
            id,
            Entry {
                principal: principal.to_string(),
                session: session.map(str::to_owned),
                cancel: cancel.clone(),
            },
        );
        Ok(Stream {
            streams: self.clone(),
            id,
            cancel,
        })
    }

    /// Ends `session`'s stream, if it has one (its session was deleted).
    pub fn end_session(&self, session: &str) {
        end_streams_of(&mut self.lock(), session);
    }
}

/// Ends and forgets the stream of `session` in `open` (at most one).
fn end_streams_of(open: &mut HashMap<u64, Entry>, session: &str) {
    open.retain(|_, e| {
        let ended = e.session.as_deref() == Some(session);
        if ended {
            e.cancel.cancel();
        }
        !ended
    });
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
    /// The refusal of request `id`, closing its connection.
    pub fn into_response(self, id: Value) -> Response {
        let (status, message, mut data) = match self {
            Refused::Principal(max) => (
                StatusCode::TOO_MANY_REQUESTS,
                "This principal holds as many open streams (subscriptions/listen, legacy GET streams) as it may; close one.",
                json!({ "code": "rate_limited", "max_streams_per_principal": max }),
            ),
            Refused::Node(max) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "Too many streams (subscriptions/listen, legacy GET streams) are open on this server; try again shortly.",
                json!({ "code": "service_unavailable", "max_streams": max }),
            ),
        };
        data["temporary"] = json!(true);
        data["retry_after_ms"] = json!(RETRY_AFTER.as_millis() as u64);
        let mut refusal = rpc_error(
            status,
            id,
            ErrorCode::INVALID_REQUEST,
            message,
            data,
            Some(RETRY_AFTER),
        );
        refusal
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        refusal
    }
}

/// One registered stream; removes its entry when dropped.
pub struct Stream {
    streams: Arc<Streams>,
    id: u64,
    cancel: CancellationToken,
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.streams.lock().remove(&self.id);
    }
}

/// What else ends a stream: its legacy session's end.
pub type Until = Pin<Box<dyn Future<Output = ()> + Send>>;

impl Stream {
    /// `response`'s body, ending when this stream is cancelled (replaced, its session
    /// deleted), after `lifetime`, or when `until` resolves. The connection closes with the
    /// stream (`Connection: close`): an ended stream gives its connection back at once
    /// instead of idling on it.
    pub fn attach(self, response: Response, lifetime: Duration, until: Option<Until>) -> Response {
        let (mut parts, body) = response.into_parts();
        parts
            .headers
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        let cancel = self.cancel.clone();
        let until = until.unwrap_or_else(|| Box::pin(std::future::pending()));
        let ended = async move {
            tokio::select! {
                _ = cancel.cancelled() => {}
                _ = tokio::time::sleep(lifetime) => {}
                _ = until => {}
            }
        };
        let data = body.into_data_stream().take_until(Box::pin(ended));
        // The entry lives as long as the body does.
        held_until_sent(Response::from_parts(parts, Body::from_stream(data)), self)
    }
}

/// `response` holding `held` (a stream's entry, an inline read's grant) until its body has
/// been sent or dropped.
pub(crate) fn held_until_sent<T: Send + 'static>(response: Response, held: T) -> Response {
    let (parts, body) = response.into_parts();
    let data = body.into_data_stream().map(move |chunk| {
        let _held = &held;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_stream_per_session_and_bounds_per_principal_and_node_for_every_stream() {
        let streams = Streams::new(StreamLimits {
            per_principal: 2,
            per_node: 3,
            max_lifetime: Duration::from_secs(1),
        });
        let first = streams.open("alice", Some("s1")).unwrap();
        let second = streams.open("alice", Some("s1")).unwrap();
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
        // A listen stream counts against the same bounds.
        let listen = streams.open("alice", None).unwrap();
        assert_eq!(
            streams.open("alice", Some("s3")).err(),
            Some(Refused::Principal(2))
        );
        assert_eq!(
            streams.open("alice", None).err(),
            Some(Refused::Principal(2))
        );
        let _b1 = streams.open("bob", None).unwrap();
        assert_eq!(streams.open("carol", None).err(), Some(Refused::Node(3)));
        streams.end_session("s1");
        assert!(second.cancel.is_cancelled(), "DELETE ends the stream");
        drop(listen);
        assert!(streams.open("carol", None).is_ok());
        let limits = StreamLimits::for_connections(1024, Duration::from_secs(60));
        assert_eq!((limits.per_principal, limits.per_node), (64, 256));
        let refusal = Refused::Principal(2).into_response(json!(7));
        assert_eq!(refusal.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refusal.headers()[header::CONNECTION], "close");
    }
}
