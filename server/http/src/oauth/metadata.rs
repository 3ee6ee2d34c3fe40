//! OAuth 2.0 Protected Resource Metadata (RFC 9728) at `/.well-known/oauth-protected-resource`
//! and its path-suffixed form for the MCP endpoint, `/.well-known/oauth-protected-resource/mcp`,
//! served without authentication (behind the same Host/Origin policy as every route), and the
//! `WWW-Authenticate` challenges that point to it.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

use super::OAuth;
use crate::scope;

/// The well-known path of the metadata (RFC 9728 §3).
pub const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// The URL of the metadata document for the MCP endpoint of a server at `base` (the
/// path-suffixed form: the resource is `{base}/mcp`).
pub fn document_url(base: &str) -> String {
    format!("{}{WELL_KNOWN}/mcp", base.trim_end_matches('/'))
}

/// The metadata routes (only when OAuth is configured: the document must name at least one
/// authorization server).
pub fn routes(oauth: Arc<OAuth>) -> Router {
    Router::new()
        .route(WELL_KNOWN, get(document))
        .route(&format!("{WELL_KNOWN}/mcp"), get(document))
        .with_state(oauth)
}

async fn document(State(oauth): State<Arc<OAuth>>) -> Response {
    let body = json!({
        "resource": oauth.resource(),
        "authorization_servers": oauth.issuers().collect::<Vec<_>>(),
        "scopes_supported": scope::ALL,
        "bearer_methods_supported": ["header"],
        "resource_name": "vidforge",
    });
    let mut response = axum::Json(body).into_response();
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    response
}

/// A `WWW-Authenticate: Bearer` challenge: `error` / `error_description` when a token was
/// refused, `scope` (what the operation needs), and `resource_metadata` when OAuth is
/// configured (so a client can discover the authorization server from it).
pub fn challenge(oauth: Option<&OAuth>, error: Option<(&str, &str)>, scope: &str) -> HeaderValue {
    let mut parts = vec!["Bearer realm=\"vidforge\"".to_string()];
    if let Some((code, description)) = error {
        parts.push(format!("error=\"{code}\""));
        parts.push(format!(
            "error_description=\"{}\"",
            description.replace(['"', '\\'], "'")
        ));
    }
    if oauth.is_some() {
        parts.push(format!("scope=\"{scope}\""));
    }
    if let Some(oauth) = oauth {
        parts.push(format!("resource_metadata=\"{}\"", oauth.metadata_url()));
    }
    HeaderValue::from_str(&parts.join(", "))
        .unwrap_or_else(|_| HeaderValue::from_static("Bearer realm=\"vidforge\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_name_the_metadata_and_scope() {
        let plain = challenge(None, None, scope::READ);
        assert_eq!(plain, "Bearer realm=\"vidforge\"");
        let config = vidforge_core::config::Config {
            oauth_issuers: vec!["https://as.example.com".into()],
            public_base_url: Some("https://vf.example.com".into()),
            ..Default::default()
        };
        let oauth = OAuth::from_config(&config).unwrap();
        assert_eq!(oauth.resource(), "https://vf.example.com/mcp");
        let c = challenge(
            Some(&oauth),
            Some(("insufficient_scope", "needs \"render\"")),
            scope::RENDER,
        );
        assert_eq!(
            c,
            "Bearer realm=\"vidforge\", error=\"insufficient_scope\", error_description=\"needs 'render'\", scope=\"vidforge:render\", resource_metadata=\"https://vf.example.com/.well-known/oauth-protected-resource/mcp\""
        );
    }
}
