//! An asset as JSON, and the routes that read and delete one.

use axum::extract::{Extension, Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::answers::service_error;
use crate::auth::Principal;
use vidforge_core::clock::rfc3339;
use vidforge_core::error::ServiceError;
use vidforge_core::service::RenderService;
use vidforge_core::store::AssetRecord;

/// The asset JSON returned by uploads (and printed by `vidforge assets add`); `expires_at`
/// is Unix ms (`created_at` + the configured asset TTL).
pub fn asset_json(a: &AssetRecord, expires_at: u64) -> serde_json::Value {
    let mut v = json!({
        "asset_id": a.id,
        "uri": a.uri,
        "kind": a.kind.as_str(),
        "file_name": a.file_name,
        "size_bytes": a.size_bytes,
        "width": a.probe.width,
        "height": a.probe.height,
        "duration_seconds": a.probe.duration_seconds,
        "video_codec": a.probe.video_codec,
        "audio_codec": a.probe.audio_codec,
        "format": a.probe.format,
        "created_at": rfc3339(a.created_at),
        "expires_at": rfc3339(expires_at),
    });
    // A video's colour: its tags, `dynamic_range` (`sdr`, `hlg`, `pq`) and HDR metadata.
    if let Some(color) = &a.probe.color {
        v["color"] = json!(color);
    }
    v
}

/// `GET /assets/{id}`: the asset JSON.
pub(super) async fn get_asset(
    State(service): State<RenderService>,
    Extension(principal): Extension<Principal>,
    UrlPath(id): UrlPath<String>,
) -> Response {
    match service.resolve_asset(principal.as_str(), &id) {
        Ok(rec) => axum::Json(asset_json(&rec, service.asset_expires_at(&rec))).into_response(),
        Err(_) => service_error(&ServiceError::AssetNotFound),
    }
}

/// `DELETE /assets/{id}`: `204`, or why not.
pub(super) async fn delete_asset(
    State(service): State<RenderService>,
    Extension(principal): Extension<Principal>,
    UrlPath(id): UrlPath<String>,
) -> Response {
    match service.delete_asset(principal.as_str(), &id).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => service_error(&e),
    }
}
