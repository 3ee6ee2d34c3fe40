//! `resources/read` of vidforge's own resources: the capabilities summary, watermark previews
//! and finished videos.

use rmcp::ErrorData as McpError;
use rmcp::model::{ErrorCode as RpcCode, ReadResourceResult};
use serde_json::json;

use vidforge_core::catalog::{self, ErrorCode};
use vidforge_core::store::{OutputFormat, RenderRecord};
use vidforge_core::uri;

use vidforge_http::envelope::{Envelope, RepairContext};

use super::request::*;

impl VidforgeMcp {
    /// The principal's newest renders whose result is kept (at most
    /// [`super::MAX_LISTED_RENDERS`]), from that principal's index in the store.
    pub(super) fn recent_renders(&self, principal: &str) -> Result<Vec<RenderRecord>, McpError> {
        self.shared
            .service
            .listed_renders(principal, super::MAX_LISTED_RENDERS)
            .map_err(service_fault)
    }

    pub(super) fn read_capabilities(&self, uri: &str) -> Result<ReadResourceResult, McpError> {
        from_json(json!({
            "resultType": "complete",
            "contents": [{
                "uri": uri,
                "mimeType": "application/json",
                "text": serde_json::to_string_pretty(&self.shared.capabilities_summary).unwrap_or_default(),
            }],
            "ttlMs": catalog::CAPABILITIES_RESOURCE_TTL.as_millis() as u64,
            "cacheScope": "public",
        }))
    }

    pub(super) fn blob_contents(
        uri: &str,
        mime: &str,
        bytes: &[u8],
    ) -> Result<ReadResourceResult, McpError> {
        use base64::Engine as _;
        from_json(json!({
            "resultType": "complete",
            "contents": [{
                "uri": uri,
                "mimeType": mime,
                "blob": base64::engine::general_purpose::STANDARD.encode(bytes),
            }],
            "ttlMs": 0,
            "cacheScope": "private",
        }))
    }

    pub(super) fn resource_not_found(uri: &str) -> McpError {
        McpError::new(
            RpcCode::INVALID_PARAMS,
            "Resource not found.",
            Some(json!({ "uri": uri })),
        )
    }

    pub(super) async fn read_preview(
        &self,
        principal: &str,
        uri: &str,
        id: &str,
    ) -> Result<ReadResourceResult, McpError> {
        let path = match self.shared.service.preview_path(principal, id) {
            Ok((_, p)) => p,
            Err(_) => return Err(Self::resource_not_found(uri)),
        };
        let bytes = self
            .shared
            .service
            .media()
            .read(&path, catalog::MAX_INLINE_RESOURCE_BYTES)
            .await
            .map_err(|_| Self::resource_not_found(uri))?;
        Self::blob_contents(uri, "image/png", &bytes)
    }

    pub(super) async fn read_video(
        &self,
        principal: &str,
        uri: &str,
        id: &str,
        format: OutputFormat,
    ) -> Result<ReadResourceResult, McpError> {
        let rec = match self.shared.service.get(principal, id) {
            Ok(rec) => rec,
            Err(_) => return Err(Self::resource_not_found(uri)),
        };
        if rec.args.output_format != format {
            return Err(Self::resource_not_found(uri));
        }
        // resolve_result has already stat'ed the file: its size decides inline or download.
        let (rec, path, size) = match self.shared.service.resolve_result(principal, id) {
            Ok(found) => (found.record, found.path, found.size_bytes),
            Err(e) if e.code() == ErrorCode::ResultExpired => {
                let args = rec.repair_arguments();
                let env = Envelope::from_service_error(&e, RepairContext::for_record(&rec, &args))
                    .field("uri")
                    .value(uri);
                return Err(McpError::new(
                    RpcCode::INVALID_PARAMS,
                    "Result expired.",
                    Some(env.to_jsonrpc_data()),
                ));
            }
            Err(_) => return Err(Self::resource_not_found(uri)),
        };
        if size > catalog::MAX_INLINE_RESOURCE_BYTES {
            let env = Envelope::new(
                ErrorCode::ResultTooLargeToInline,
                ErrorCode::ResultTooLargeToInline.description(self.shared.presenter.lifetimes()),
            )
            .field("uri")
            .value(uri)
            .detail(
                "download_url",
                json!(self.shared.presenter.download_url(&rec)),
            )
            .detail("size_bytes", json!(size));
            return Err(McpError::new(
                RpcCode::INVALID_PARAMS,
                "Result too large to inline.",
                Some(env.to_jsonrpc_data()),
            ));
        }
        let bytes = self
            .shared
            .service
            .media()
            .read(&path, catalog::MAX_INLINE_RESOURCE_BYTES)
            .await
            .map_err(internal)?;
        Self::blob_contents(uri, rec.args.output_format.mime_type(), &bytes)
    }
}

/// The resources `resources/read` serves.
pub(super) enum ResourceRef<'a> {
    Capabilities,
    Preview(&'a str),
    Video(&'a str, OutputFormat),
}

pub(super) fn parse_resource_uri(u: &str) -> Option<ResourceRef<'_>> {
    if u == super::CAPABILITIES_URI {
        return Some(ResourceRef::Capabilities);
    }
    if let Some(id) = uri::parse_preview_uri(u) {
        return Some(ResourceRef::Preview(id));
    }
    uri::parse_video_uri(u).map(|(id, format)| ResourceRef::Video(id, format))
}
