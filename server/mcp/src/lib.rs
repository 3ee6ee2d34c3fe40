//! The MCP front: vidforge's contract over MCP 2026-07-28 streamable HTTP at `/mcp`, and the
//! `initialize`-based revisions (2024-11-05 … 2025-11-25) on the same endpoint ([`legacy`]).
//!
//! rmcp 3.11 (`StreamableHttpService`: stateless for modern requests, its legacy session mode
//! for `initialize`-based clients) does the protocol plumbing: JSON-RPC
//! framing, `MCP-Protocol-Version` / `Mcp-Method` / `Mcp-Name` checks, `_meta` validation,
//! the tasks-extension gate and SSE. Host and Origin are checked before any of it by the one
//! request policy every route shares ([`vidforge_http::policy`], applied in
//! `vidforge::app::router_with`); rmcp's own copy of that check is switched off so `/mcp`
//! cannot decide differently from the other routes. A thin axum layer around rmcp
//! (`wire_layer.rs`; its way out in `rewrite.rs` and `refusal.rs`) supplies what rmcp 3.11
//! lacks (ARCHITECTURE.md lists each gap):
//! - `taskIds` on `subscriptions/listen` (dropped by rmcp's `SubscriptionFilter`): read here,
//!   carried to the handler in request extensions, and echoed in the acknowledgement;
//! - `io.modelcontextprotocol/serverInfo` on every result's `_meta` (rmcp adds it only to
//!   `server/discover`).

use std::sync::Arc;

use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use vidforge_core::config::Config;
use vidforge_core::service::RenderService;

pub mod app;
mod args;
pub mod capabilities;
mod declared;
pub mod discovery;
pub mod extension;
mod handler;
pub mod inline;
pub mod inputs;
pub mod jsonrpc;
pub mod legacy;
mod listen;
mod notify;
pub mod presentation;
mod refusal;
mod request;
mod resources;
mod rewrite;
pub mod streams;
mod tasks;
mod tool_calls;
pub mod tools;
pub mod wire;
mod wire_layer;

pub use extension::{
    ExtensionHost, ExtensionSpec, Extensions, McpExtension, MountError, MountFailure,
};
pub use request::{McpShared, VidforgeMcp, from_json};
pub use vidforge_http::auth::Principal;
pub use wire_layer::{MAX_MCP_BODY_BYTES, RequestedTaskIds};

pub const CAPABILITIES_URI: &str = "vidforge://capabilities";
/// [`INSTRUCTIONS`] for a legacy-era session, where the tasks extension does not exist.
pub const LEGACY_INSTRUCTIONS: &str = "vidforge renders uploaded video assets (vidforge://assets/…) to mp4/webm/mov at 720p, 1080p or 4k, optionally with a watermark that a human approves from a preview. Renders are long: vidforge_render_video answers status 'accepted' with a render_id; poll vidforge_get_render_status, approve the watermark with vidforge_approve_watermark (or on the approval page it names), cancel with vidforge_cancel_render. A finished render's result links to vidforge://videos/{render_id}/final.{ext} (resources/read, or the HTTP link). Read vidforge://capabilities for the full summary.";
/// `resources/list` lists at most this many of the principal's newest renders.
pub const MAX_LISTED_RENDERS: usize = 100;

pub const INSTRUCTIONS: &str = "vidforge renders uploaded video assets (vidforge://assets/…) to mp4/webm/mov at 720p, 1080p or 4k, optionally with a watermark that a human approves from a preview. Renders are long: declare the io.modelcontextprotocol/tasks extension to get a task (poll tasks/get), or poll vidforge_get_render_status. A completed task is delivery, not success: always check result.isError. Read vidforge://capabilities for the full summary.";

/// The `/mcp` router: bearer auth, then vidforge's wire layer, then rmcp's streamable HTTP
/// service. `extensions` are served beside vidforge's own tools (none in production).
///
/// It has no Host/Origin check of its own: serve it only through
/// `vidforge::app::router_with`, which puts every route behind [`vidforge_http::policy`].
pub fn router(
    service: RenderService,
    config: &Config,
    extensions: Extensions,
    auth: vidforge_http::auth::Auth,
) -> axum::Router {
    let lifetimes = config.lifetimes();
    let shared = Arc::new(McpShared {
        capabilities_summary: capabilities::summary(
            &lifetimes,
            &service.hardware(),
            capabilities::authorization(&auth),
        ),
        tools: tools::tool_definitions(&lifetimes),
        presenter: presentation::Presenter::new(lifetimes, config.base_url()),
        extensions,
        app: app::AppSurface::new(&service, config),
        service,
    });
    let discovery = discovery::router(&shared, config, &auth);
    // One budget for every long-lived response: legacy GET streams and listen streams.
    let streams = streams::Streams::new(streams::StreamLimits::for_connections(
        config.max_connections,
        config.stream_max_lifetime,
    ));
    let legacy = legacy::LegacySessions::new(
        legacy::Limits {
            idle_timeout: config.legacy_session_idle_timeout,
            max_sessions: config.max_legacy_sessions,
            max_per_principal: config.max_legacy_sessions_per_principal,
        },
        streams.clone(),
    );
    // Host and Origin: decided by vidforge_http::policy for every route (this one included), from
    // the one list RequestPolicy::from_config builds; rmcp's duplicate check stays off. Modern
    // requests are served statelessly whatever legacy_session_mode says (rmcp classifies by
    // body); `initialize` opens a legacy session.
    let mcp_config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(true)
        .with_json_response(true)
        .with_stateless_protocol_metadata_required(true)
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_sse_keep_alive(Some(vidforge_http::connections::sse_keep_alive(
            config.idle_timeout,
        )))
        .with_max_request_body_bytes(MAX_MCP_BODY_BYTES);
    let mcp = StreamableHttpService::new(
        move || {
            Ok(VidforgeMcp {
                shared: shared.clone(),
            })
        },
        legacy.manager(),
        mcp_config,
    );
    let wire = Arc::new(wire_layer::Wire {
        sessions: legacy,
        streams,
        inline: Default::default(),
        auth: auth.clone(),
    });
    axum::Router::new()
        .route_service("/mcp", mcp)
        .layer(axum::middleware::from_fn_with_state(
            wire,
            wire_layer::wire_layer,
        ))
        .layer(axum::middleware::from_fn_with_state(
            auth,
            vidforge_http::auth::require_auth,
        ))
        .merge(discovery)
}
