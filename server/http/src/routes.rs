//! Plain HTTP routes beside `/mcp`:
//!
//! | route | what |
//! |---|---|
//! | `POST /assets?name=clip.mp4` (or `X-Filename`) | raw-body upload (`Content-Type: application/octet-stream`, the file's own type, or none) → `201` asset JSON; `413` over the limit, `415` a form or text content type, `408` when the body stalls for `body_idle_timeout` or averages under `upload_min_rate` after `upload_rate_grace`, `503` / `429` `uploads_busy` (unread, with `Retry-After`) while `max_concurrent_uploads` uploads run on the server / `max_uploads_per_peer` from the peer's address, `422` unreadable |
//! | `GET /assets/{id}` | the asset JSON (with `expires_at`); `404` unknown or not yours |
//! | `DELETE /assets/{id}` | deletes the asset → `204`; `404` unknown or not yours; `409` while an unfinished render uses it |
//! | `GET /videos/{id}/final.{ext}` | result download ([`serve_file`]: `Range` → `206`/`416`, `If-Range`, `If-Modified-Since` → `304`, `HEAD`); `404` unknown or not yours; `410` expired |
//! | `GET /renders/{id}/watermark-preview.png` | the watermark preview (same) |
//! | `GET /healthz` | liveness (no auth, no Host/Origin check) |
//!
//! Every route but `/healthz` answers to the Host/Origin policy ([`crate::policy`], applied by
//! `vidforge::app::router_with`). Uploads also refuse the content types a browser may send
//! cross-site without a preflight (`text/plain`, `application/x-www-form-urlencoded`,
//! `multipart/form-data`): `415`. A request without `Content-Type` is accepted (plain HTTP
//! clients send raw bytes without one; browsers always send `Origin` cross-site, which the
//! policy checks). Error bodies are the §6 envelope ([`crate::envelope`]).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Extension, Path as UrlPath, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::StreamExt;
use httpdate::HttpDate;
use serde::Deserialize;
use serde_json::json;
use tower_http::services::ServeFile;

use crate::auth::Principal;
use crate::auth_or_session::require_auth_or_session;
use crate::connections::{Paced, UploadGate, UploadPace, UploadsBusy};
use crate::envelope::{Envelope, RepairContext, error_response, fingerprint};
use crate::session::Sessions;
use vidforge_core::catalog::ErrorCode;
use vidforge_core::clock::rfc3339;
use vidforge_core::error::ServiceError;
use vidforge_core::service::RenderService;
use vidforge_core::store::AssetRecord;
use vidforge_core::uri::PREVIEW_FILE_NAME;

/// Header naming an upload's file when `?name=` is absent.
pub const FILENAME_HEADER: &str = "x-filename";

/// `retry_after_ms` (and `Retry-After`) of `uploads_busy`: a place frees up when any running
/// upload ends.
pub const UPLOADS_BUSY_RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// Content types a browser sends cross-site without a CORS preflight (the Fetch standard's
/// CORS-safelisted `Content-Type` values): refused on uploads.
pub const REFUSED_UPLOAD_TYPES: [&str; 3] = [
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data",
];

/// The authenticated HTTP routes (uploads, downloads, previews). `vidforge::app::router_with`
/// merges them with the MCP router behind the request policy. Downloads and previews also
/// accept a browser session ([`require_auth_or_session`]) for the pages' images and players.
pub fn http_routes(service: RenderService, sessions: Sessions) -> Router {
    let uploads = UploadGate::from_config(service.config());
    Router::new()
        .route("/assets", post(upload).layer(DefaultBodyLimit::disable()))
        .route("/assets/{id}", get(get_asset).delete(delete_asset))
        .route("/videos/{id}/{file}", get(download))
        .route("/renders/{id}/{file}", get(preview))
        .layer(axum::middleware::from_fn_with_state(
            sessions,
            require_auth_or_session,
        ))
        .layer(Extension(uploads))
        .with_state(service)
}

/// `/healthz`: no auth and no Host/Origin policy (probes and load balancers call it by IP).
pub fn health_routes(service: RenderService) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .with_state(service)
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
        ServiceError::QuotaExceeded { .. } | ServiceError::RenderBudgetExceeded(_) => {
            StatusCode::TOO_MANY_REQUESTS
        }
        ServiceError::RenderTooLarge(_) => StatusCode::UNPROCESSABLE_ENTITY,
        ServiceError::ApprovalNotPending { .. }
        | ServiceError::ApprovalAlreadyRecorded { .. }
        | ServiceError::IdempotencyConflict => StatusCode::CONFLICT,
        ServiceError::AssetNotFound => StatusCode::NOT_FOUND,
        ServiceError::AssetInUse { .. } => StatusCode::CONFLICT,
        ServiceError::StorageFull { .. } => StatusCode::INSUFFICIENT_STORAGE,
        ServiceError::Unavailable { .. } | ServiceError::MediaUnavailable { .. } => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        ServiceError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

pub(crate) fn service_error(e: &ServiceError) -> Response {
    error_response(
        status_for(e),
        &Envelope::from_service_error(e, RepairContext::default()),
    )
}

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

async fn healthz(State(service): State<RenderService>) -> Response {
    let hw = service.hardware();
    axum::Json(json!({
        "status": "ok",
        "fingerprint": fingerprint(),
        "backend": hw.compositor,
        "decoder": hw.decoder,
        "h264_encoder": hw.h264_encoder,
        "store": if service.store().is_shared() { "postgres" } else { "sled" },
        "node": service.node(),
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
    Extension(uploads): Extension<UploadGate>,
    peer: Option<Extension<crate::peer::ClientIp>>,
    Query(q): Query<UploadQuery>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if let Some(refused) = refused_content_type(&headers) {
        return unsupported_media_type(&refused);
    }
    let config = service.config();
    let limit = config.max_upload_bytes;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit) {
        // Refuse before reading a byte.
        vidforge_core::telemetry::upload(false, 0);
        return service_error(&ServiceError::AssetTooLarge { limit_bytes: limit });
    }
    // A place among the running uploads, or an answer at once with the body unread (the
    // connection then closes: `crate::unread_body`).
    let peer_ip = peer.map(|Extension(crate::peer::ClientIp(ip))| ip);
    let _slot = match uploads.try_enter(peer_ip) {
        Ok(slot) => slot,
        Err(busy) => {
            vidforge_core::telemetry::upload(false, 0);
            tracing::debug!(peer = ?peer_ip, reason = %busy, "upload refused");
            return uploads_busy(busy);
        }
    };
    let name = q
        .name
        .or_else(|| {
            headers
                .get(FILENAME_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        })
        .unwrap_or_default();
    // The router's body timeout ends a stalled upload with an error; remember that it was
    // the timeout, so the answer is 408 rather than "interrupted".
    // So does the minimum pace (`upload_min_rate` after `upload_rate_grace`).
    let stalled = Arc::new(AtomicBool::new(false));
    let slow = Arc::new(AtomicBool::new(false));
    let (seen_stalled, seen_slow) = (stalled.clone(), slow.clone());
    let data = body.into_data_stream();
    let data = match UploadPace::from_config(config, declared) {
        Some(pace) => futures_util::future::Either::Left(Paced::new(data, pace)),
        None => futures_util::future::Either::Right(data),
    };
    let stream = data.inspect(move |chunk| {
        if let Err(e) = chunk {
            if crate::connections::is_body_timeout(e) {
                seen_stalled.store(true, Ordering::SeqCst);
            } else if crate::connections::is_upload_too_slow(e) {
                seen_slow.store(true, Ordering::SeqCst);
            }
        }
    });
    let added = service
        .add_asset_stream(principal.as_str(), &name, stream)
        .await;
    vidforge_core::telemetry::upload(
        added.is_ok(),
        added.as_ref().map_or(0, |rec| rec.size_bytes),
    );
    match added {
        Ok(rec) => {
            let json = asset_json(&rec, service.asset_expires_at(&rec));
            (StatusCode::CREATED, axum::Json(json)).into_response()
        }
        Err(_) if stalled.load(Ordering::SeqCst) => upload_timeout(config.body_idle_timeout),
        Err(_) if slow.load(Ordering::SeqCst) => {
            upload_too_slow(config.upload_min_rate, config.upload_rate_grace)
        }
        Err(e) => service_error(&e),
    }
}

async fn get_asset(
    State(service): State<RenderService>,
    Extension(principal): Extension<Principal>,
    UrlPath(id): UrlPath<String>,
) -> Response {
    match service.resolve_asset(principal.as_str(), &id) {
        Ok(rec) => axum::Json(asset_json(&rec, service.asset_expires_at(&rec))).into_response(),
        Err(_) => service_error(&ServiceError::AssetNotFound),
    }
}

async fn delete_asset(
    State(service): State<RenderService>,
    Extension(principal): Extension<Principal>,
    UrlPath(id): UrlPath<String>,
) -> Response {
    match service.delete_asset(principal.as_str(), &id).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => service_error(&e),
    }
}

/// The refused content type of an upload (lowercased, without parameters), if it is one.
/// A missing `Content-Type` is accepted; one that is not text is refused.
fn refused_content_type(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::CONTENT_TYPE)?;
    let Ok(text) = value.to_str() else {
        return Some("(not text)".into());
    };
    let essence = text
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    REFUSED_UPLOAD_TYPES
        .contains(&essence.as_str())
        .then_some(essence)
}

/// `415`: the upload's content type is one a browser form may send.
fn unsupported_media_type(refused: &str) -> Response {
    let env = Envelope::new(
        ErrorCode::UnsupportedMediaType,
        format!(
            "Uploads must be sent with Content-Type: application/octet-stream (or the file's own \
             type, e.g. video/mp4 or image/png), not {refused}. With curl: -H 'Content-Type: \
             application/octet-stream' --data-binary @FILE."
        ),
    )
    .field("Content-Type")
    .reason(
        "form and text content types can be sent cross-site by any web page without asking, so \
         uploads refuse them",
    );
    error_response(StatusCode::UNSUPPORTED_MEDIA_TYPE, &env)
}

/// `408`: the upload sent nothing for `idle`; it was aborted and nothing was kept. The
/// connection closes: the rest of the body is never read ([`crate::unread_body`]).
fn upload_timeout(idle: std::time::Duration) -> Response {
    let env = Envelope::new(
        ErrorCode::UploadTimeout,
        format!(
            "The upload sent no data for {} and was aborted; nothing was kept. Re-send it.",
            vidforge_core::catalog::human_duration(idle)
        ),
    )
    .reason(format!("body_idle_timeout is {} ms", idle.as_millis()));
    error_response(StatusCode::REQUEST_TIMEOUT, &env)
}

/// `408`: the upload averaged under `min_rate` after `grace`; it was aborted and nothing was
/// kept. The connection closes, as for [`upload_timeout`].
fn upload_too_slow(min_rate: u64, grace: std::time::Duration) -> Response {
    let env = Envelope::new(
        ErrorCode::UploadTimeout,
        format!(
            "The upload arrived slower than the server's minimum of {min_rate} bytes/s (after \
             the first {}) and was aborted; nothing was kept. Re-send it over a faster link.",
            vidforge_core::catalog::human_duration(grace)
        ),
    )
    .reason(format!(
        "upload_min_rate is {min_rate} bytes/s, upload_rate_grace {} ms",
        grace.as_millis()
    ));
    error_response(StatusCode::REQUEST_TIMEOUT, &env)
}

/// `503` (the server's upload cap) or `429` (the peer's), `uploads_busy`, with
/// `retry_after_ms` and `Retry-After`. The body is not read; the connection closes.
fn uploads_busy(busy: UploadsBusy) -> Response {
    let (status, field, setting, max) = match busy {
        UploadsBusy::Server { max } => (
            StatusCode::SERVICE_UNAVAILABLE,
            "max_concurrent_uploads",
            "server",
            max,
        ),
        UploadsBusy::Peer { max } => (
            StatusCode::TOO_MANY_REQUESTS,
            "max_uploads_per_peer",
            "address",
            max,
        ),
    };
    let retry = UPLOADS_BUSY_RETRY_AFTER;
    let env = Envelope::new(
        ErrorCode::UploadsBusy,
        format!(
            "{max} uploads are already in progress on this {setting}; nothing was read. Re-send \
             the upload in {}.",
            vidforge_core::catalog::human_duration(retry)
        ),
    )
    .field(field)
    .reason(busy.to_string())
    .retry_after(Some(u64::try_from(retry.as_millis()).unwrap_or(u64::MAX)));
    // `error_response` adds `Retry-After` from `retry_after_ms`.
    error_response(status, &env)
}

async fn download(
    State(service): State<RenderService>,
    Extension(principal): Extension<Principal>,
    UrlPath((id, file)): UrlPath<(String, String)>,
    request: Request,
) -> Response {
    match service.resolve_result(principal.as_str(), &id) {
        Ok(r) if r.file_name == file => {
            serve_media(&service, &r.path, &r.mime_type, Some(&r.file_name), request).await
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
    request: Request,
) -> Response {
    if file != PREVIEW_FILE_NAME {
        return service_error(&ServiceError::NotFound);
    }
    match service.preview_path(principal.as_str(), &id) {
        Ok((_, path)) => serve_media(&service, &path, "image/png", None, request).await,
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

/// Serves stored media to its owner (already checked): a local file itself
/// ([`serve_file`]); an object in the bucket by a `307` to a short-lived presigned link for
/// the request's method (`GET` or `HEAD`), so `Range`, conditionals and the bytes come from
/// the object store. The redirect itself is never cached (the link expires) and carries no
/// credential of the client's: a client drops its `Authorization` on the way to another
/// origin.
pub(crate) async fn serve_media(
    service: &RenderService,
    stored: &Path,
    mime: &str,
    download_name: Option<&str>,
    request: Request,
) -> Response {
    let head = request.method() == axum::http::Method::HEAD;
    match service.media().presigned(stored, head).await {
        Ok(None) => serve_file(stored, mime, download_name, request).await,
        Ok(Some(url)) => match HeaderValue::from_str(&url) {
            Ok(location) => {
                let mut r = StatusCode::TEMPORARY_REDIRECT.into_response();
                let h = r.headers_mut();
                h.insert(header::LOCATION, location);
                h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
                h.insert(
                    header::REFERRER_POLICY,
                    HeaderValue::from_static("no-referrer"),
                );
                r
            }
            Err(e) => service_error(&ServiceError::Internal(format!("presigned link: {e}"))),
        },
        Err(e) => service_error(&e),
    }
}

/// Serves a file with tower-http's [`ServeFile`]: `Range` (`206`/`416`), `Last-Modified`,
/// `If-Modified-Since` (`304`), `If-Unmodified-Since` (`412`) and `HEAD` come from the
/// library. Around it vidforge keeps its content type, `Cache-Control`, the download file name
/// and its error envelopes, and handles the two things `ServeFile` does not:
///
/// - `If-Range` (RFC 9110 §13.1.5): the `Range` applies only while the validator matches. We
///   send no entity tags, so only the file's exact `Last-Modified` date matches; otherwise the
///   whole file is sent.
/// - A `Range` in another unit MUST be ignored (RFC 9110 §14.2), and multi-range requests are
///   answered with the whole file (`ServeFile` would answer `416` to both).
pub async fn serve_file(
    path: &Path,
    mime: &str,
    download_name: Option<&str>,
    mut request: Request,
) -> Response {
    let headers = request.headers_mut();
    let single_bytes_range = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("bytes=") && !v.contains(','));
    if !single_bytes_range {
        headers.remove(header::RANGE);
    }
    if let Some(if_range) = headers.remove(header::IF_RANGE)
        && headers.contains_key(header::RANGE)
    {
        let validator = if_range
            .to_str()
            .ok()
            .and_then(|v| v.parse::<HttpDate>().ok());
        let modified = tokio::fs::metadata(path)
            .await
            .and_then(|m| m.modified())
            .ok()
            .map(HttpDate::from);
        if validator.is_none() || validator != modified {
            headers.remove(header::RANGE);
        }
    }
    let response = match ServeFile::new(path)
        .with_buf_chunk_size(CHUNK_BYTES)
        .try_call(request)
        .await
    {
        Ok(r) => r,
        Err(e) => return service_error(&ServiceError::from(e)),
    };
    let (mut parts, body) = response.into_parts();
    match parts.status {
        StatusCode::NOT_FOUND => return service_error(&ServiceError::NotFound),
        StatusCode::OK | StatusCode::PARTIAL_CONTENT | StatusCode::NOT_MODIFIED => {
            let h = &mut parts.headers;
            h.insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static(CACHE_CONTROL),
            );
            if h.contains_key(header::CONTENT_TYPE) {
                let content_type = HeaderValue::from_str(mime)
                    .unwrap_or_else(|_| HeaderValue::from_static("application/octet-stream"));
                h.insert(header::CONTENT_TYPE, content_type);
            }
            if parts.status != StatusCode::NOT_MODIFIED
                && let Some(name) = download_name
                && let Ok(v) = HeaderValue::from_str(&format!("inline; filename=\"{name}\""))
            {
                h.insert(header::CONTENT_DISPOSITION, v);
            }
        }
        _ => {}
    }
    Response::from_parts(parts, Body::new(body))
}

/// Read size per body chunk.
const CHUNK_BYTES: usize = 256 * 1024;
/// Results are private to their principal and do not change while they exist.
const CACHE_CONTROL: &str = "private, max-age=3600";
