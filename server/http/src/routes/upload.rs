//! `POST /assets`: raw-body uploads, their limits (size, content type, concurrent uploads,
//! pace) and the refusals that name them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::body::Body;
use axum::extract::{Extension, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde::Deserialize;

use super::answers::service_error;
use super::assets::asset_json;
use crate::auth::Principal;
use crate::connections::{Paced, UploadGate, UploadPace, UploadsBusy};
use crate::envelope::{Envelope, error_response};
use vidforge_core::catalog::ErrorCode;
use vidforge_core::error::ServiceError;
use vidforge_core::service::RenderService;

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

/// `?name=`: the upload's file name.
#[derive(Debug, Deserialize)]
pub(super) struct UploadQuery {
    name: Option<String>,
}

/// `POST /assets`: a raw-body upload, paced and bounded; `201` with the asset JSON.
pub(super) async fn upload(
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
