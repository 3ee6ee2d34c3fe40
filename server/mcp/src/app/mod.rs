//! The MCP App (extension `io.modelcontextprotocol/ui`, SEP-1865, stable 2026-01-26): a view a
//! host shows inline for `vidforge_render_video`, where the person sees the watermark preview,
//! approves or rejects it, and plays the finished video.
//!
//! Negotiated as the extension says: the server advertises it (`server/discover` always; a
//! legacy `initialize` answer when the client declared it), and only a request whose client
//! capabilities declare it ([`declares_ui`]) sees `_meta.ui` on the render tool and the
//! app-only tools in `tools/list`. Every other client sees exactly the surface it saw before.
//! - The view: [`VIEW_URI`], one self-contained HTML document (`view.html`, no external
//!   script, style or font) served as [`MIME_TYPE`] with `_meta.ui.csp.resourceDomains` = the
//!   public origin (and the bucket's, where presigned links point): the only origin the
//!   player may load from.
//! - App-only tools (`_meta.ui.visibility: ["app"]`, hidden from the model by the host):
//!   [`APP_PREVIEW`] (the preview's copy sized for a chat view, a PNG of at most 640 px a side,
//!   as a data URI, and the settings) and [`APP_PLAYBACK`] (a signed ten-minute link,
//!   [`vidforge_http::playback`], or the bucket's presigned link signed for as long). Both
//!   answer for the caller's own renders only, like every other tool. The decision itself goes
//!   through `vidforge_approve_watermark`, under the same authorization and replay rules.

mod calls;

use serde_json::{Value, json};

use vidforge_core::catalog::{self, ErrorCode, Lifetimes};
use vidforge_core::config::Config;
use vidforge_core::service::RenderService;
use vidforge_http::playback::PlaybackLinks;

use super::tools;

/// The extension's identifier.
pub const EXTENSION: &str = "io.modelcontextprotocol/ui";
/// The view's MIME type.
pub const MIME_TYPE: &str = "text/html;profile=mcp-app";
/// The view's resource URI.
pub const VIEW_URI: &str = "ui://vidforge/render";
/// App-only: a render's watermark preview (data URI) and its settings.
pub const APP_PREVIEW: &str = "vidforge_app_preview";
/// App-only: a short-lived playback link to a finished render.
pub const APP_PLAYBACK: &str = "vidforge_app_playback";

const VIEW_HTML: &str = include_str!("view.html");

/// What the app needs beside the rest of the MCP front: playback links and the CSP's origins.
#[derive(Debug, Clone)]
pub struct AppSurface {
    links: PlaybackLinks,
    resource_domains: Vec<String>,
}

impl AppSurface {
    /// Links on the configured public origin, keyed by the store's playback secret.
    pub fn new(service: &RenderService, config: &Config) -> AppSurface {
        let base = config.base_url();
        let mut resource_domains = vec![origin_of(&base)];
        if let Some(bucket) = service.media().link_origin()
            && !resource_domains.contains(&bucket)
        {
            resource_domains.push(bucket);
        }
        AppSurface {
            links: PlaybackLinks::new(service.store().clone(), base),
            resource_domains,
        }
    }

    /// The `resources/read` result of [`VIEW_URI`].
    pub fn read_view(&self) -> Value {
        json!({
            "resultType": "complete",
            "contents": [{
                "uri": VIEW_URI,
                "mimeType": MIME_TYPE,
                "text": VIEW_HTML,
                "_meta": { "ui": {
                    "csp": { "resourceDomains": self.resource_domains },
                    "prefersBorder": true
                } }
            }],
            "ttlMs": catalog::DISCOVER_TTL.as_millis() as u64,
            "cacheScope": "public",
        })
    }
}

/// `scheme://host[:port]` of a URL (the whole string when it has no path).
fn origin_of(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let host = rest.split(['/', '?', '#']).next().unwrap_or(rest);
            format!("{scheme}://{host}")
        }
        None => url.to_string(),
    }
}

/// Whether the request's client capabilities declare the extension with the HTML view type
/// (a declaration without `mimeTypes` is taken as HTML, the only type defined).
pub fn declares_ui(caps: &Value) -> bool {
    match caps.get("extensions").and_then(|e| e.get(EXTENSION)) {
        Some(Value::Object(settings)) => match settings.get("mimeTypes") {
            Some(Value::Array(types)) => types.iter().any(|t| t == MIME_TYPE),
            _ => true,
        },
        _ => false,
    }
}

/// The extension's server capability entry.
pub fn capability() -> Value {
    json!({ "mimeTypes": [MIME_TYPE] })
}

/// The view in `resources/list`.
pub fn listing() -> Value {
    json!({
        "uri": VIEW_URI,
        "name": "render-view",
        "title": "vidforge render view",
        "description": "The MCP App view of a render: its progress, the watermark preview with Approve and Reject, and the finished video's player.",
        "mimeType": MIME_TYPE,
    })
}

/// `tools/list` for a client that declared the extension: the render tool points at the view,
/// and the app-only tools follow vidforge's own. (Not the status tool: a host shows a view per
/// call, and a model polls status many times; the view re-reads the status itself.)
pub fn with_ui(tools_list: &mut Vec<Value>, lifetimes: &Lifetimes) {
    for tool in tools_list.iter_mut() {
        if tool["name"] == tools::RENDER_VIDEO
            && let Some(meta) = tool.get_mut("_meta").and_then(Value::as_object_mut)
        {
            meta.insert("ui".into(), json!({ "resourceUri": VIEW_URI }));
        }
    }
    tools_list.extend(app_tools(lifetimes));
}

/// Whether `name` is one of the app-only tools.
pub fn is_app_tool(name: &str) -> bool {
    matches!(name, APP_PREVIEW | APP_PLAYBACK)
}

/// The app-only tool definitions.
pub fn app_tools(lifetimes: &Lifetimes) -> Vec<Value> {
    let input = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object", "required": ["render_id"],
        "properties": { "render_id": { "type": "string", "minLength": 1 } },
        "additionalProperties": false
    });
    let errors = |codes: &[ErrorCode]| -> Value {
        codes
            .iter()
            .map(|c| json!({ "code": c.as_str(), "temporary": c.temporary(), "description": c.description(lifetimes) }))
            .collect()
    };
    let ui = json!({ "resourceUri": VIEW_URI, "visibility": ["app"] });
    vec![
        json!({
            "name": APP_PREVIEW,
            "title": "Watermark preview (view only)",
            "description": "For the vidforge view: the watermark preview of one of your renders, sized for a chat view (at most 640 px a side), as a data: URI, with its settings, while it awaits approval.",
            "inputSchema": input,
            "annotations": { "readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false },
            "_meta": { "ui": ui, "com.vidforge/errors": errors(&[ErrorCode::RenderNotFound, ErrorCode::ApprovalNotPending, ErrorCode::InvalidArguments]) }
        }),
        json!({
            "name": APP_PLAYBACK,
            "title": "Playback link (view only)",
            "description": format!("For the vidforge view: a link to one of your finished videos that plays without credentials for {} (until its expires_at).", catalog::human_duration(vidforge_http::playback::LINK_TTL)),
            "inputSchema": input,
            "annotations": { "readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false },
            "_meta": { "ui": ui, "com.vidforge/errors": errors(&[ErrorCode::RenderNotFound, ErrorCode::ResultExpired, ErrorCode::InvalidArguments]) }
        }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_drop_paths() {
        assert_eq!(
            origin_of("https://v.example:8443/base"),
            "https://v.example:8443"
        );
        assert_eq!(origin_of("http://127.0.0.1:7070"), "http://127.0.0.1:7070");
    }

    #[test]
    fn the_extension_is_declared_with_html() {
        let ui = |v: Value| json!({ "extensions": { EXTENSION: v } });
        assert!(declares_ui(&ui(json!({ "mimeTypes": [MIME_TYPE] }))));
        assert!(declares_ui(&ui(json!({}))));
        assert!(!declares_ui(&ui(json!({ "mimeTypes": ["text/plain"] }))));
        assert!(!declares_ui(&json!({ "extensions": {} })));
        assert!(!declares_ui(&Value::Null));
    }

    #[test]
    fn the_view_is_small_and_self_contained() {
        assert!(VIEW_HTML.len() < 32 * 1024, "{}", VIEW_HTML.len());
        assert!(VIEW_HTML.starts_with("<!DOCTYPE html>"));
        for external in [
            "<script src",
            "<link",
            "@import",
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
        ] {
            assert!(!VIEW_HTML.contains(external), "{external}");
        }
    }

    #[test]
    fn ui_tools_only_for_declaring_clients() {
        let lifetimes = Lifetimes::default();
        let mut list = tools::tool_definitions(&lifetimes);
        let before = list.len();
        with_ui(&mut list, &lifetimes);
        assert_eq!(list.len(), before + 2);
        assert_eq!(list[0]["_meta"]["ui"]["resourceUri"], VIEW_URI);
        assert!(list[1]["_meta"].get("ui").is_none(), "{}", list[1]);
        for app in &list[before..] {
            assert_eq!(app["_meta"]["ui"]["visibility"], json!(["app"]));
            assert!(is_app_tool(app["name"].as_str().unwrap()));
        }
    }
}
