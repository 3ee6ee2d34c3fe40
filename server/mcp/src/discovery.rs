//! Discovery before connecting: the MCP Server Card (SEP-2127) at [`SERVER_CARD_PATH`] and
//! the AI Catalog at [`AI_CATALOG_PATH`] pointing at it, both unauthenticated (behind the
//! request policy like every route).
//!
//! The card is built from the same sources as everything else, so it cannot drift: the
//! repository's `server.json` (the registry listing: name, title, description, version,
//! repository, website, the remote's headers), the deployment's public base URL and
//! authorization, the capabilities `server/discover` answers, and the live tool list (the
//! tools a model sees; the MCP App's app-only tools are not in it).

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rmcp::ServerHandler;
use serde_json::{Value, json};

use super::capabilities::{LEGACY_REVISIONS, PROTOCOL_REVISION};
use super::request::VidforgeMcp;

/// The Server Card's path.
pub const SERVER_CARD_PATH: &str = "/.well-known/mcp/server-card.json";
/// The AI Catalog's path.
pub const AI_CATALOG_PATH: &str = "/.well-known/ai-catalog.json";
/// The Server Card schema the card names.
pub const SERVER_CARD_SCHEMA: &str =
    "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json";

/// The registry listing, `server.json` at the repository's root.
const SERVER_JSON: &str = include_str!("../../../server.json");

/// The two documents, built once at start.
#[derive(Debug, Clone)]
pub struct Discovery {
    card: Arc<String>,
    catalog: Arc<String>,
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
                "cardUrl": format!("{base_url}{SERVER_CARD_PATH}"),
                "updatedAt": vidforge_core::clock::rfc3339(mcp.shared.service.clock().now_ms()),
            }]
        });
        Discovery {
            card: Arc::new(serde_json::to_string_pretty(&card).unwrap_or_default()),
            catalog: Arc::new(serde_json::to_string_pretty(&catalog).unwrap_or_default()),
        }
    }

    /// `GET` [`SERVER_CARD_PATH`] and [`AI_CATALOG_PATH`].
    pub fn routes(self) -> Router {
        let card = self.card.clone();
        let catalog = self.catalog.clone();
        Router::new()
            .route(SERVER_CARD_PATH, get(move || serve(card.clone())))
            .route(AI_CATALOG_PATH, get(move || serve(catalog.clone())))
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

async fn serve(body: Arc<String>) -> Response {
    let mut r = body.as_str().to_owned().into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=3600"),
    );
    r
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
