//! Plain HTTP routes beside `/mcp`:
//!
//! | route | what |
//! |---|---|
//! | `POST /assets?name=clip.mp4` (or `X-Filename`) | raw-body upload → `201` asset JSON; `413` over the limit, `422` unreadable |
//! | `GET /videos/{id}/final.{ext}` | result download with `Range` (`206`/`416`); `404` unknown or not yours; `410` expired |
//! | `GET /renders/{id}/watermark-preview.png` | the watermark preview |
//! | `GET /healthz` | liveness (no auth) |
//!
//! Error bodies are the §6 envelope ([`crate::envelope`]).

use std::io::SeekFrom;
use std::path::Path;

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Extension, Path as UrlPath, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use crate::auth::{Auth, Principal, require_auth};
use crate::clock::rfc3339;
use crate::envelope::{Envelope, RepairContext, fingerprint};
use crate::error::ServiceError;
use crate::service::RenderService;
use crate::store::AssetRecord;
use crate::uri::PREVIEW_FILE_NAME;

/// Header naming an upload's file when `?name=` is absent.
pub const FILENAME_HEADER: &str = "x-filename";

/// The HTTP routes, authenticated with the service's tokens (except `/healthz`). Merge with the
/// MCP router: `http_routes(service.clone()).merge(mcp_router)`.
pub fn http_routes(service: RenderService) -> Router {
    let auth = Auth::from_config(service.config());
    let protected = Router::new()
        .route("/assets", post(upload).layer(DefaultBodyLimit::disable()))
        .route("/videos/{id}/{file}", get(download))
        .route("/renders/{id}/{file}", get(preview))
        .layer(axum::middleware::from_fn_with_state(auth, require_auth));
    Router::new()
        .route("/healthz", get(healthz))
        .merge(protected)
        .with_state(service)
}

/// An envelope as an HTTP response.
pub fn error_response(status: StatusCode, env: &Envelope) -> Response {
    (status, axum::Json(env.to_json())).into_response()
}

/// The HTTP status for a service error.
pub fn status_for(e: &ServiceError) -> StatusCode {
    match e {
        ServiceError::NotFound | ServiceError::NotReady { .. } => StatusCode::NOT_FOUND,
        ServiceError::SourceNotFound { .. } => StatusCode::NOT_FOUND,
        ServiceError::ResultExpired { .. } => StatusCode::GONE,
        ServiceError::AssetTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        ServiceError::AssetInvalid { .. } | ServiceError::UnsupportedCodec { .. } => {
            StatusCode::UNPROCESSABLE_ENTITY
        }
        ServiceError::InvalidArguments { .. } => StatusCode::BAD_REQUEST,
        ServiceError::QuotaExceeded { .. } => StatusCode::TOO_MANY_REQUESTS,
        ServiceError::ApprovalNotPending { .. }
        | ServiceError::ApprovalAlreadyRecorded { .. }
        | ServiceError::IdempotencyConflict => StatusCode::CONFLICT,
        ServiceError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

fn service_error(e: &ServiceError) -> Response {
    error_response(
        status_for(e),
        &Envelope::from_service_error(e, RepairContext::default()),
    )
}

/// The asset JSON returned by uploads (and printed by `vidforge assets add`).
pub fn asset_json(a: &AssetRecord) -> serde_json::Value {
    json!({
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
    })
}

async fn healthz(State(service): State<RenderService>) -> Response {
    axum::Json(json!({
        "status": "ok",
        "fingerprint": fingerprint(),
        "backend": service.backend_name(),
    }))
    .into_response()
}

#[derive(Debug, Deserialize)]
struct UploadQuery {
    name: Option<String>,
}

async fn upload(
    State(service): State<RenderService>,
    Extension(principal): Extension<Principal>,
    Query(q): Query<UploadQuery>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let limit = service.config().max_upload_bytes;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit) {
        // Refuse before reading a byte.
        return service_error(&ServiceError::AssetTooLarge { limit_bytes: limit });
    }
    let name = q
        .name
        .or_else(|| {
            headers
                .get(FILENAME_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        })
        .unwrap_or_default();
    match service
        .add_asset_stream(principal.as_str(), &name, body.into_data_stream())
        .await
    {
        Ok(rec) => (StatusCode::CREATED, axum::Json(asset_json(&rec))).into_response(),
        Err(e) => service_error(&e),
    }
}

async fn download(
    State(service): State<RenderService>,
    Extension(principal): Extension<Principal>,
    UrlPath((id, file)): UrlPath<(String, String)>,
    headers: HeaderMap,
) -> Response {
    match service.resolve_result(principal.as_str(), &id) {
        Ok(r) if r.file_name == file => {
            serve_file(&r.path, &r.mime_type, &headers, Some(&r.file_name)).await
        }
        Ok(_) => service_error(&ServiceError::NotFound),
        Err(e @ ServiceError::ResultExpired { .. }) => expired(&service, &principal, &id, &e),
        Err(e) => service_error(&e),
    }
}

async fn preview(
    State(service): State<RenderService>,
    Extension(principal): Extension<Principal>,
    UrlPath((id, file)): UrlPath<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if file != PREVIEW_FILE_NAME {
        return service_error(&ServiceError::NotFound);
    }
    match service.preview_path(principal.as_str(), &id) {
        Ok((_, path)) => serve_file(&path, "image/png", &headers, None).await,
        Err(e @ ServiceError::ResultExpired { .. }) => expired(&service, &principal, &id, &e),
        Err(e) => service_error(&e),
    }
}

/// `410` with a repair that re-renders from the original arguments.
fn expired(service: &RenderService, principal: &Principal, id: &str, e: &ServiceError) -> Response {
    let env = match service.get(principal.as_str(), id) {
        Ok(rec) => {
            let args = rec.repair_arguments();
            Envelope::from_service_error(e, RepairContext::for_record(&rec, &args)).value(id)
        }
        Err(_) => Envelope::from_service_error(e, RepairContext::default()),
    };
    error_response(StatusCode::GONE, &env)
}

/// A parsed `Range` header against a file length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByteRange {
    /// No (usable) range: send everything.
    Full,
    /// Inclusive byte range.
    Partial { start: u64, end: u64 },
    /// Range outside the file: `416`.
    Unsatisfiable,
}

/// Parses a single `bytes=` range (RFC 9110). Multi-range and malformed headers are ignored
/// (full response), as the RFC allows.
pub fn parse_range(header: Option<&str>, len: u64) -> ByteRange {
    let Some(spec) = header.and_then(|h| h.trim().strip_prefix("bytes=")) else {
        return ByteRange::Full;
    };
    if spec.contains(',') {
        return ByteRange::Full;
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return ByteRange::Full;
    };
    let (a, b) = (a.trim(), b.trim());
    if a.is_empty() {
        // Suffix range: the last n bytes.
        return match b.parse::<u64>() {
            Ok(0) => ByteRange::Unsatisfiable,
            Ok(_) if len == 0 => ByteRange::Unsatisfiable,
            Ok(n) => ByteRange::Partial {
                start: len - n.min(len),
                end: len - 1,
            },
            Err(_) => ByteRange::Full,
        };
    }
    let Ok(start) = a.parse::<u64>() else {
        return ByteRange::Full;
    };
    let end = if b.is_empty() {
        None
    } else {
        match b.parse::<u64>() {
            Ok(e) if e >= start => Some(e),
            _ => return ByteRange::Full,
        }
    };
    if start >= len {
        return ByteRange::Unsatisfiable;
    }
    ByteRange::Partial {
        start,
        end: end.map_or(len - 1, |e| e.min(len - 1)),
    }
}

/// Streams a file with `Accept-Ranges`, single-range support and a download file name.
pub async fn serve_file(
    path: &Path,
    mime: &str,
    headers: &HeaderMap,
    download_name: Option<&str>,
) -> Response {
    let internal = |e: std::io::Error| service_error(&ServiceError::from(e));
    let mut file = match tokio::fs::File::open(path).await {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return service_error(&ServiceError::NotFound);
        }
        Err(e) => return internal(e),
    };
    let len = match file.metadata().await {
        Ok(m) => m.len(),
        Err(e) => return internal(e),
    };
    let range = parse_range(
        headers.get(header::RANGE).and_then(|v| v.to_str().ok()),
        len,
    );
    let mut builder = Response::builder()
        .header(header::ACCEPT_RANGES, "bytes")
        .header(header::CACHE_CONTROL, "private, max-age=3600");
    let content_type = HeaderValue::from_str(mime)
        .unwrap_or_else(|_| HeaderValue::from_static("application/octet-stream"));
    builder = builder.header(header::CONTENT_TYPE, content_type);
    if let Some(name) = download_name
        && let Ok(v) = HeaderValue::from_str(&format!("inline; filename=\"{name}\""))
    {
        builder = builder.header(header::CONTENT_DISPOSITION, v);
    }
    let (status, start, count) = match range {
        ByteRange::Full => (StatusCode::OK, 0, len),
        ByteRange::Partial { start, end } => {
            builder = builder.header(header::CONTENT_RANGE, format!("bytes {start}-{end}/{len}"));
            (StatusCode::PARTIAL_CONTENT, start, end - start + 1)
        }
        ByteRange::Unsatisfiable => {
            return Response::builder()
                .status(StatusCode::RANGE_NOT_SATISFIABLE)
                .header(header::CONTENT_RANGE, format!("bytes */{len}"))
                .header(header::ACCEPT_RANGES, "bytes")
                .body(Body::empty())
                .unwrap_or_else(|_| StatusCode::RANGE_NOT_SATISFIABLE.into_response());
        }
    };
    if start > 0
        && let Err(e) = file.seek(SeekFrom::Start(start)).await
    {
        return internal(e);
    }
    let stream = tokio_util::io::ReaderStream::with_capacity(file.take(count), 256 * 1024);
    builder
        .status(status)
        .header(header::CONTENT_LENGTH, count)
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        use ByteRange::*;
        assert_eq!(parse_range(None, 100), Full);
        assert_eq!(
            parse_range(Some("bytes=0-9"), 100),
            Partial { start: 0, end: 9 }
        );
        assert_eq!(
            parse_range(Some("bytes=90-"), 100),
            Partial { start: 90, end: 99 }
        );
        assert_eq!(
            parse_range(Some("bytes=90-500"), 100),
            Partial { start: 90, end: 99 }
        );
        assert_eq!(
            parse_range(Some("bytes=-10"), 100),
            Partial { start: 90, end: 99 }
        );
        assert_eq!(
            parse_range(Some("bytes=-1000"), 100),
            Partial { start: 0, end: 99 }
        );
        assert_eq!(parse_range(Some("bytes=100-"), 100), Unsatisfiable);
        assert_eq!(parse_range(Some("bytes=-0"), 100), Unsatisfiable);
        assert_eq!(parse_range(Some("bytes=5-1"), 100), Full);
        assert_eq!(parse_range(Some("bytes=0-1,5-6"), 100), Full);
        assert_eq!(parse_range(Some("items=0-1"), 100), Full);
        assert_eq!(parse_range(Some("bytes=x-1"), 100), Full);
    }
}
