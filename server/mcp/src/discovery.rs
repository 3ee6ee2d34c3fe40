//! Discovery before connecting: the MCP Server Card (SEP-2127) at `<mcp-url>/server-card`
//! ([`MCP_SERVER_CARD_PATH`], where the discovery draft reserves it) and at the well-known
//! [`SERVER_CARD_PATH`], and the AI Catalog at [`AI_CATALOG_PATH`] pointing at it, all
//! unauthenticated (behind the request policy like every route), each with a strong `ETag`
//! so clients revalidate (`If-None-Match` → `304`, [`vidforge_http::document`]).
//!
//! The card is built from the same sources as everything else, so it cannot drift: the
//! repository's `server.json` (the registry listing: name, title, description, version,
//! repository, website, the remote's headers), the deployment's public base URL and
//! authorization, the capabilities `server/discover` answers, and the live tool list (the
//! tools a model sees; the MCP App's app-only tools are not in it).

use std::sync::Arc;

use axum::Router;
use axum::http::HeaderMap;
use axum::routing::get;
use rmcp::ServerHandler;
use serde_json::{Value, json};
use vidforge_http::document::Document;

use super::capabilities::{LEGACY_REVISIONS, PROTOCOL_REVISION};
use super::request::VidforgeMcp;

/// The Server Card's well-known path.
pub const SERVER_CARD_PATH: &str = "/.well-known/mcp/server-card.json";
/// The Server Card beside the MCP endpoint (`<mcp-url>/server-card`).
pub const MCP_SERVER_CARD_PATH: &str = "/mcp/server-card";
/// The AI Catalog's path.
pub const AI_CATALOG_PATH: &str = "/.well-known/ai-catalog.json";
/// The Server Card schema the card names.
pub const SERVER_CARD_SCHEMA: &str =
    "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json";

/// The registry listing, `server.json` at the repository's root.
const SERVER_JSON: &str = include_str!("../../../server.json");

/// How long clients may use a document before revalidating it.
const CACHE_CONTROL: &str = "public, max-age=3600";

/// The two documents, built once at start.
#[derive(Debug, Clone)]
pub struct Discovery {
    card: Document,
    catalog: Document,
}

impl Discovery {
    /// Builds the card for `mcp`'s surface on `base_url`, with authorization `authorization`
    /// (the capability summary's block: `bearer_tokens`, `oauth`).
    pub fn new(mcp: &VidforgeMcp, base_url: &str, authorization: &Value) -> Discovery {
        let card = server_card(mcp, base_url, authorization);
        let catalog = json!({
            "specVersion": "1.0.0",
            "host": { "name": card["title"], "documentationUrl": card["websiteUrl"] },
            "agents": [{
                "id": card["name"],
                "name": card["title"],
                "description": card["description"],
                "tags": ["mcp", "video", "render"],
                "cardUrl": format!("{base_url}{MCP_SERVER_CARD_PATH}"),
                "updatedAt": vidforge_core::clock::rfc3339(mcp.shared.service.clock().now_ms()),
            }]
        });
        let document = |v: &Value| {
            Document::new(
                serde_json::to_string_pretty(v).unwrap_or_default(),
                "application/json",
                CACHE_CONTROL,
            )
        };
        Discovery {
            card: document(&card),
            catalog: document(&catalog),
        }
    }

    /// `GET` (and `HEAD`) [`MCP_SERVER_CARD_PATH`], [`SERVER_CARD_PATH`] and
    /// [`AI_CATALOG_PATH`].
    pub fn routes(self) -> Router {
        let serve =
            |doc: Document| get(move |headers: HeaderMap| async move { doc.respond(&headers) });
        Router::new()
            .route(MCP_SERVER_CARD_PATH, serve(self.card.clone()))
            .route(SERVER_CARD_PATH, serve(self.card))
            .route(AI_CATALOG_PATH, serve(self.catalog))
    }
}

/// The discovery routes for the MCP front sharing `shared`, on `config`'s public URL.
pub fn router(
    shared: &Arc<super::McpShared>,
    config: &vidforge_core::config::Config,
    auth: &vidforge_http::auth::Auth,
) -> Router {
    let mcp = VidforgeMcp {
        shared: shared.clone(),
    };
    let authorization = super::capabilities::authorization(auth);
    Discovery::new(&mcp, &config.base_url(), &authorization).routes()
}

/// The registry listing, parsed.
pub fn server_json() -> Value {
    serde_json::from_str(SERVER_JSON).expect("server.json is valid JSON (make lint checks it)")
}

fn server_card(mcp: &VidforgeMcp, base_url: &str, authorization: &Value) -> Value {
    let listing = server_json();
    let remote = &listing["remotes"][0];
    let mut versions = vec![PROTOCOL_REVISION];
    versions.extend(LEGACY_REVISIONS);
    let mut schemes = vec!["bearer"];
    if !authorization["oauth"].is_null() {
        schemes.push("oauth2");
    }
    let info = serde_json::to_value(mcp.get_info()).unwrap_or_default();
    let mut tools = mcp.shared.tools.clone();
    for extension in mcp.shared.extensions.iter() {
        tools.extend(extension.tools());
    }
    json!({
        "$schema": SERVER_CARD_SCHEMA,
        "name": listing["name"],
        "version": listing["version"],
        "title": listing["title"],
        "description": listing["description"],
        "websiteUrl": listing["websiteUrl"],
        "repository": listing["repository"],
        "remotes": [{
            "type": remote["type"],
            "url": format!("{base_url}/mcp"),
            "supportedProtocolVersions": versions,
            "headers": remote["headers"],
            "authentication": {
                "required": authorization["bearer_tokens"] == true || !authorization["oauth"].is_null(),
                "schemes": schemes
            }
        }],
        "capabilities": info["capabilities"],
        "resources": [{
            "uri": super::CAPABILITIES_URI,
            "name": "capabilities",
            "title": "vidforge capability summary",
            "mimeType": "application/json"
        }, super::app::listing()],
        "tools": tools,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_json_is_at_the_crate_version() {
        let listing = server_json();
        assert_eq!(listing["version"], env!("CARGO_PKG_VERSION"));
        assert!(listing["name"].as_str().unwrap().contains('/'));
    }
}
