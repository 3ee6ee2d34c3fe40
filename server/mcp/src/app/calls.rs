//! The app-only tools' calls: the caller's own renders only (the service's owner check, as
//! for every tool), answers in the usual tool result shapes.

use rmcp::ErrorData as McpError;
use rmcp::model::CallToolResponse;
use serde_json::{Value, json};

use vidforge_core::catalog::{self, ErrorCode};
use vidforge_core::clock::rfc3339;
use vidforge_core::error::ServiceError;
use vidforge_core::store::RenderState;
use vidforge_http::envelope::Envelope;
use vidforge_http::playback::LINK_TTL;

use crate::args::fallback_input;
use crate::inputs::RenderIdInput;
use crate::request::{VidforgeMcp, internal, service_envelope, tool_error, tool_ok};

impl VidforgeMcp {
    /// Runs app-only tool `name` (one of [`super::is_app_tool`]).
    pub(crate) async fn call_app_tool(
        &self,
        name: &str,
        principal: &str,
        arguments: &Value,
    ) -> Result<CallToolResponse, McpError> {
        let id = match fallback_input::<RenderIdInput>(arguments) {
            Ok(input) => input.render_id.0,
            Err(env) => return tool_error(*env),
        };
        if name == super::APP_PREVIEW {
            self.app_preview(principal, &id).await
        } else {
            self.app_playback(principal, &id).await
        }
    }

    async fn app_preview(&self, principal: &str, id: &str) -> Result<CallToolResponse, McpError> {
        let service = &self.shared.service;
        let rec = match service.get(principal, id) {
            Ok(rec) => rec,
            Err(e) => return tool_error(service_envelope(&e, Some(id))),
        };
        if rec.state != RenderState::AwaitingApproval {
            let env = Envelope::new(
                ErrorCode::ApprovalNotPending,
                format!(
                    "Render {id} is {}, not awaiting approval: read vidforge_get_render_status.",
                    rec.state.public_name()
                ),
            )
            .field("render_id")
            .value(id);
            return tool_error(env);
        }
        let bytes = match self.view_preview(principal, id).await {
            Ok(bytes) => bytes,
            Err(env) => return tool_error(*env),
        };
        use base64::Engine as _;
        let image = format!(
            "data:image/png;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(&bytes)
        );
        let source_name = service
            .resolve_asset(principal, &rec.args.source_asset)
            .map(|a| a.file_name)
            .unwrap_or_default();
        let watermark = rec.args.watermark.as_ref().map(|w| {
            let name = service
                .resolve_asset(principal, &w.image_asset)
                .map(|a| a.file_name)
                .unwrap_or_default();
            json!({ "image_name": name, "position": w.position.as_str(), "opacity": w.opacity })
        });
        tool_ok(
            format!("Watermark preview of {id} for the view."),
            json!({
                "render_id": id,
                "image": image,
                "source_name": source_name,
                "output_format": rec.args.output_format.as_str(),
                "resolution": rec.args.resolution.as_str(),
                "watermark": watermark,
            }),
        )
    }

    /// The preview's copy sized for a chat view (at most [`catalog::MAX_VIEW_PREVIEW_BYTES`]:
    /// what the wire layer reserved of the inline budget for this call); a preview made
    /// before such copies were is read whole when it is as small, else it is not inlined
    /// (`result_too_large_to_inline`, with its download link).
    async fn view_preview(&self, principal: &str, id: &str) -> Result<Vec<u8>, Box<Envelope>> {
        let service = &self.shared.service;
        let envelope = |e: ServiceError| Box::new(service_envelope(&e, Some(id)));
        let max = catalog::MAX_VIEW_PREVIEW_BYTES;
        let (_, full) = service.preview_path(principal, id).map_err(envelope)?;
        let view = full.with_file_name(vidforge_core::uri::VIEW_PREVIEW_FILE_NAME);
        if let Ok(bytes) = service.media().read(&view, max).await {
            return Ok(bytes);
        }
        service.media().read(&full, max).await.map_err(|_| {
            let link = self.shared.presenter.preview_url(id);
            Box::new(
                Envelope::new(
                    ErrorCode::ResultTooLargeToInline,
                    "This preview is too large to inline; download it over HTTP (details.download_url).",
                )
                .field("render_id")
                .value(id)
                .detail("download_url", json!(link)),
            )
        })
    }

    async fn app_playback(&self, principal: &str, id: &str) -> Result<CallToolResponse, McpError> {
        let service = &self.shared.service;
        let found = match service.resolve_result(principal, id) {
            Ok(found) => found,
            Err(e) => return tool_error(service_envelope(&e, Some(id))),
        };
        let now_ms = service.clock().now_ms();
        // One lifetime for the link, `expires_at` and what the tool says: the bucket's link is
        // signed for no longer than a playback link lives.
        let (url, expires_ms) = match service
            .media()
            .presigned(&found.path, false, Some(LINK_TTL))
            .await
        {
            Ok(Some((presigned, ttl))) => (presigned, now_ms + ttl.as_millis() as u64),
            Ok(None) => {
                // Whole seconds: the link states its expiry in them.
                let expires_ms = (now_ms + LINK_TTL.as_millis() as u64) / 1000 * 1000;
                let link = self
                    .shared
                    .app
                    .links
                    .link(id, &found.file_name, principal, expires_ms / 1000)
                    .map_err(internal)?;
                (link, expires_ms)
            }
            Err(e) => return tool_error(service_envelope(&e, Some(id))),
        };
        tool_ok(
            format!("Playback link of {id} for the view."),
            json!({
                "render_id": id,
                "url": url,
                "expires_at": rfc3339(expires_ms),
                "file_name": found.file_name,
                "mime_type": found.mime_type,
                "size_bytes": found.size_bytes,
            }),
        )
    }
}
