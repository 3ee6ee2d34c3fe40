//! Legacy-era clients (`initialize`-based: 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25) on
//! the same `/mcp` endpoint as the 2026-07-28 wire (the protocol reference's "dual-era server").
//!
//! rmcp 3.11 does the session protocol (its legacy session mode and `LocalSessionManager`:
//! `Mcp-Session-Id`, `notifications/initialized`, `ping`, the GET stream, DELETE, `404` for an
//! unknown session, the idle timeout). This module adds what a multi-tenant service needs
//! around it, in front of rmcp:
//! - **classification** by body, as the reference says: a request carrying the modern `_meta`
//!   protocol-version claim (or the modern `MCP-Protocol-Version` header) is modern and served
//!   statelessly as before; anything else is legacy;
//! - **version check**: an `initialize` naming a revision vidforge does not serve is refused
//!   before a session exists (`400`, `-32602`, naming the supported ones);
//! - **bounds**: at most `max_legacy_sessions` sessions on this node (`503`) and
//!   `max_legacy_sessions_per_principal` per principal (`429`), both with `Retry-After`;
//! - **ownership**: a session belongs to the principal that opened it; another principal's
//!   request naming it is answered exactly like an unknown session (`404`), so session ids are
//!   no oracle;
//! - **JSON-RPC bodies** on every refusal, where rmcp answers session errors in plain text.
//!
//! Sessions hold nothing but the client's `initialize` parameters: renders live in the store,
//! so a restart or another node only costs the client a new `initialize`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use rmcp::model::ErrorCode;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::{Value, json};

use super::capabilities::{LEGACY_REVISIONS, PROTOCOL_REVISION};
pub use super::jsonrpc::rpc_error;
use super::streams::{Refused, Stream, Streams, WATCH};

/// The session header (both eras' clients spell it this way; header names are case-insensitive).
pub const SESSION_HEADER: &str = "mcp-session-id";
/// JSON-RPC code for "no such session" on a `404` (the TypeScript SDK's `-32001`).
pub const SESSION_NOT_FOUND: ErrorCode = ErrorCode(-32001);
/// How long a refused `initialize` is told to wait before trying again.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// Whether this message belongs to the legacy (`initialize`-based) era, by the reference's
/// classification by body (protocol reference §2.11), which rmcp's routing
/// (`is_legacy_request` in its tower service) follows: an `initialize` is legacy unless its
/// `_meta` claims 2026-07-28 or later (then it is a modern request for a removed method, which
/// the wire layer answers `404` `-32601` before rmcp sees it); a request carrying the full
/// modern `_meta` claim (protocol version and client capabilities) never is; otherwise the
/// version named in `_meta`, else the `MCP-Protocol-Version` header, else 2025-03-26, decides
/// (legacy when it predates 2026-07-28). Pass `Value::Null` for a GET or DELETE.
pub fn is_legacy(message: &Value, headers: &HeaderMap) -> bool {
    let is_request = message.get("id").is_some() && message.get("method").is_some();
    let meta = if is_request {
        &message["params"]["_meta"]
    } else {
        &Value::Null
    };
    let version = meta["io.modelcontextprotocol/protocolVersion"].as_str();
    if is_request && message["method"] == "initialize" {
        return version.is_none_or(|v| v < PROTOCOL_REVISION);
    }
    if version.is_some() && meta["io.modelcontextprotocol/clientCapabilities"].is_object() {
        return false;
    }
    let header = headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok());
    version.or(header).unwrap_or("2025-03-26") < PROTOCOL_REVISION
}

/// Marks a request the wire layer classified legacy-era (in the HTTP request's extensions,
/// which rmcp hands the handler): the handler reads it, never re-classifies.
#[derive(Clone, Copy, Debug)]
pub struct LegacyEra;

/// Whether this handler request came in on a legacy session.
pub fn in_legacy_session(ctx: &rmcp::service::RequestContext<rmcp::RoleServer>) -> bool {
    ctx.extensions
        .get::<http::request::Parts>()
        .is_some_and(|parts| parts.extensions.get::<LegacyEra>().is_some())
}

/// The longest requested revision echoed back in a refusal (a revision is 10 characters).
const MAX_ECHOED_VERSION: usize = 64;

/// The `requested` of an unsupported-version refusal: what the client sent when it is short
/// (a string of at most 64 bytes, a number, `null`), else `null`: a refusal never carries
/// back kilobytes of what the client wrote.
pub fn echo_requested(requested: &Value) -> Value {
    match requested {
        Value::String(s) if s.len() <= MAX_ECHOED_VERSION => requested.clone(),
        Value::Number(_) | Value::Bool(_) => requested.clone(),
        _ => Value::Null,
    }
}

/// Whether `version` is a revision a legacy session may be opened with.
pub fn serves(version: &str) -> bool {
    LEGACY_REVISIONS.contains(&version)
}

/// The bounds of the legacy sessions of one node (from `Config`).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub idle_timeout: Duration,
    pub max_sessions: usize,
    pub max_per_principal: usize,
}

/// This node's legacy sessions: rmcp's session manager plus who owns each session and its
/// server-message stream.
pub struct LegacySessions {
    manager: Arc<LocalSessionManager>,
    streams: Arc<Streams>,
    /// Session id → the principal that opened it. Entries of sessions rmcp has closed (idle,
    /// DELETE) are swept on the next `initialize`.
    owners: Mutex<HashMap<String, String>>,
    limits: Limits,
}

/// What the layer in front of rmcp decided about one request naming a session.
pub enum Admission {
    /// Serve it (the session exists and is the caller's, or rmcp will answer it).
    Pass,
    /// Refuse it with this response.
    Refuse(Response),
}

impl LegacySessions {
    /// Sessions within `limits`, their server-message streams in the node's `streams`.
    pub fn new(limits: Limits, streams: Arc<Streams>) -> Self {
        let mut manager = LocalSessionManager::default();
        manager.session_config.keep_alive = Some(limits.idle_timeout);
        Self {
            manager: Arc::new(manager),
            streams,
            owners: Mutex::new(HashMap::new()),
            limits,
        }
    }

    /// The session manager to hand to rmcp's `StreamableHttpService`.
    pub fn manager(&self) -> Arc<LocalSessionManager> {
        self.manager.clone()
    }

    /// Sessions open now (rmcp's count: idle ones it closed are gone).
    pub async fn open(&self) -> usize {
        self.manager.sessions.read().await.len()
    }

    /// Checks an `initialize` before rmcp opens a session for it: the revision, then the
    /// node's and the principal's bounds. Sweeps the owners of sessions rmcp has closed.
    pub async fn admit_initialize(&self, message: &Value, principal: &str) -> Admission {
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        let requested = &message["params"]["protocolVersion"];
        if !requested.as_str().is_some_and(serves) {
            return Admission::Refuse(rpc_error(
                StatusCode::BAD_REQUEST,
                id,
                ErrorCode::INVALID_PARAMS,
                "Unsupported protocol version",
                json!({
                    "supported": LEGACY_REVISIONS,
                    "requested": echo_requested(requested),
                    "modern": [PROTOCOL_REVISION],
                }),
                None,
            ));
        }
        let live: Vec<String> = self
            .manager
            .sessions
            .read()
            .await
            .keys()
            .map(|k| k.to_string())
            .collect();
        let mut owners = self.owners.lock().expect("owners lock");
        owners.retain(|session, _| live.contains(session));
        if live.len() >= self.limits.max_sessions {
            return Admission::Refuse(rpc_error(
                StatusCode::SERVICE_UNAVAILABLE,
                id,
                ErrorCode::INTERNAL_ERROR,
                "Too many legacy sessions are open on this server; try again shortly.",
                json!({
                    "code": "service_unavailable",
                    "temporary": true,
                    "retry_after_ms": RETRY_AFTER.as_millis() as u64,
                    "max_legacy_sessions": self.limits.max_sessions,
                }),
                Some(RETRY_AFTER),
            ));
        }
        let held = owners.values().filter(|p| *p == principal).count();
        if held >= self.limits.max_per_principal {
            return Admission::Refuse(rpc_error(
                StatusCode::TOO_MANY_REQUESTS,
                id,
                ErrorCode::INVALID_REQUEST,
                "This principal holds as many legacy sessions as it may; end one (HTTP DELETE with its Mcp-Session-Id) or let one idle out.",
                json!({
                    "code": "rate_limited",
                    "temporary": true,
                    "retry_after_ms": RETRY_AFTER.as_millis() as u64,
                    "max_legacy_sessions_per_principal": self.limits.max_per_principal,
                }),
                Some(RETRY_AFTER),
            ));
        }
        Admission::Pass
    }

    /// Records who opened the session an `initialize` response names.
    pub fn opened(&self, session: &str, principal: &str) {
        self.owners
            .lock()
            .expect("owners lock")
            .insert(session.to_string(), principal.to_string());
    }

    /// Forgets a session the client ended (DELETE answered 2xx), ending its stream.
    pub fn ended(&self, session: &str) {
        self.owners.lock().expect("owners lock").remove(session);
        self.streams.end_session(session);
    }

    /// A new server-message stream (`GET`) of `session` for `principal`: it replaces the
    /// session's previous one, and is refused past the principal's or the node's bound
    /// ([`crate::streams`]).
    pub fn open_stream(&self, session: &str, principal: &str) -> Result<Stream, Refused> {
        self.streams.open(principal, Some(session))
    }

    /// `response` (the stream rmcp answered a `GET` with) as `stream`: it ends after the
    /// streams' lifetime, and within [`WATCH`] of its session's end.
    pub fn attach_stream(&self, stream: Stream, session: &str, response: Response) -> Response {
        let manager = self.manager.clone();
        let session = session.to_string();
        let gone = async move {
            loop {
                tokio::time::sleep(WATCH).await;
                if !manager.sessions.read().await.contains_key(session.as_str()) {
                    return;
                }
            }
        };
        let lifetime = self.streams.limits().max_lifetime;
        stream.attach(response, lifetime, Some(Box::pin(gone)))
    }

    /// A request naming `session`: served only for the principal that opened it and only while
    /// rmcp still holds it; anything else is `404` with a JSON-RPC body, so the client
    /// initializes again (after a restart, on another node, after the idle timeout, or for
    /// a session id that was never this caller's).
    pub async fn admit(&self, session: &str, principal: &str, id: Value) -> Admission {
        let owned = self
            .owners
            .lock()
            .expect("owners lock")
            .get(session)
            .is_some_and(|owner| owner == principal);
        let live = self.manager.sessions.read().await.contains_key(session);
        if owned && live {
            Admission::Pass
        } else {
            Admission::Refuse(not_found(id))
        }
    }
}

/// `404` for an unknown, expired or foreign session, with a JSON-RPC error body.
pub fn not_found(id: Value) -> Response {
    rpc_error(
        StatusCode::NOT_FOUND,
        id,
        SESSION_NOT_FOUND,
        "Session not found: it ended, expired, or belongs to another server; send initialize again.",
        json!({ "reinitialize": true }),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::streams::StreamLimits;

    fn sessions() -> LegacySessions {
        let limits = Limits {
            idle_timeout: Duration::from_secs(60),
            max_sessions: 2,
            max_per_principal: 1,
        };
        let streams = StreamLimits::for_connections(64, Duration::from_secs(60));
        LegacySessions::new(limits, Streams::new(streams))
    }

    #[test]
    fn classification_is_by_body_claim_or_modern_header() {
        let none = HeaderMap::new();
        let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}});
        assert!(is_legacy(&init, &none));
        let modern = json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{
            "io.modelcontextprotocol/protocolVersion":"2026-07-28",
            "io.modelcontextprotocol/clientCapabilities":{}}}});
        assert!(!is_legacy(&modern, &none));
        let mut headers = HeaderMap::new();
        headers.insert("mcp-protocol-version", "2026-07-28".parse().unwrap());
        let bare = json!({"jsonrpc":"2.0","id":1,"method":"tools/list"});
        assert!(!is_legacy(&bare, &headers));
        headers.insert("mcp-protocol-version", "2025-06-18".parse().unwrap());
        assert!(is_legacy(&bare, &headers));
        assert!(is_legacy(&Value::Null, &none), "a bare GET or DELETE");
        // An `initialize` claiming the modern revision is a modern request (for a removed
        // method), whatever the header says; one claiming a legacy revision stays legacy.
        for claim in ["2026-07-28", "2027-01-01"] {
            let modern_init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"_meta":{
                "io.modelcontextprotocol/protocolVersion": claim}}});
            assert!(!is_legacy(&modern_init, &none), "{claim}");
            assert!(!is_legacy(&modern_init, &headers), "{claim}");
        }
        let old_claim = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
            "protocolVersion":"2025-11-25",
            "_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}});
        assert!(is_legacy(&old_claim, &none));
    }

    #[tokio::test]
    async fn unsupported_initialize_names_the_supported_revisions() {
        let sessions = sessions();
        for version in [
            json!("1.0.0"),
            json!("2026-07-28"),
            json!(null),
            json!(20251125),
        ] {
            let init = json!({"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":version}});
            let Admission::Refuse(response) = sessions.admit_initialize(&init, "a").await else {
                panic!("{version} was admitted");
            };
            assert_eq!(response.status(), StatusCode::BAD_REQUEST);
            let body = axum::body::to_bytes(response.into_body(), 1 << 16)
                .await
                .unwrap();
            let body: Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(body["id"], 7);
            assert_eq!(body["error"]["code"], -32602);
            assert_eq!(body["error"]["data"]["supported"], json!(LEGACY_REVISIONS));
            assert_eq!(body["error"]["data"]["requested"], version);
        }
        // A huge or structured one is not echoed back.
        for version in [json!("9".repeat(10_000)), json!({"a": [1, 2]})] {
            let init = json!({"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":version}});
            let Admission::Refuse(response) = sessions.admit_initialize(&init, "a").await else {
                panic!("admitted");
            };
            let body = axum::body::to_bytes(response.into_body(), 1 << 16)
                .await
                .unwrap();
            let body: Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(body["error"]["data"]["requested"], Value::Null);
            assert!(body.to_string().len() < 1024, "{body}");
        }
        for version in LEGACY_REVISIONS {
            let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":version}});
            assert!(matches!(
                sessions.admit_initialize(&init, "a").await,
                Admission::Pass
            ));
        }
    }

    #[tokio::test]
    async fn a_session_is_only_its_owners_and_only_while_rmcp_holds_it() {
        let sessions = sessions();
        // Recorded but not live in rmcp (closed, or another node's): 404 for everyone.
        sessions.opened("s1", "alice");
        for who in ["alice", "mallory"] {
            let Admission::Refuse(response) = sessions.admit("s1", who, json!(3)).await else {
                panic!("{who} admitted to a session rmcp does not hold");
            };
            assert_eq!(response.status(), StatusCode::NOT_FOUND);
        }
        // The per-principal bound counts recorded owners (swept against rmcp's live set,
        // which is empty here, so the stale entry does not count).
        let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}});
        assert!(matches!(
            sessions.admit_initialize(&init, "alice").await,
            Admission::Pass
        ));
        sessions.ended("s1");
        assert!(matches!(
            sessions.admit("s1", "alice", Value::Null).await,
            Admission::Refuse(_)
        ));
    }
}
