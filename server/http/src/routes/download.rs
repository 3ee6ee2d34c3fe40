//! Downloads of results and previews: a local file served with its ranges and conditionals,
//! or a redirect to a presigned link into the bucket.

use std::path::Path;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Extension, Path as UrlPath, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use httpdate::HttpDate;
use tower_http::services::ServeFile;

use super::answers::service_error;
use crate::auth::Principal;
use crate::envelope::{Envelope, RepairContext, error_response};
use vidforge_core::error::ServiceError;
use vidforge_core::service::RenderService;
use vidforge_core::uri::PREVIEW_FILE_NAME;

/// `GET /videos/{id}/final.{ext}`: a result, to its owner.
pub(super) async fn download(
    State(service): State<RenderService>,
    Extension(principal): Extension<Principal>,
    UrlPath((id, file)): UrlPath<(String, String)>,
    request: Request,
) -> Response {
    match service.resolve_result(principal.as_str(), &id) {
        Ok(r) if r.file_name == file => {
            let file = Served::download(&r.path, &r.mime_type, Some(&r.file_name));
            serve_media(&service, file, request).await
        }
        Ok(_) => service_error(&ServiceError::NotFound),
        Err(e @ ServiceError::ResultExpired { .. }) => expired(&service, &principal, &id, &e),
        Err(e) => service_error(&e),
    }
}

/// `GET /renders/{id}/watermark-preview.png`: the watermark preview, to its owner.
pub(super) async fn preview(
    State(service): State<RenderService>,
    Extension(principal): Extension<Principal>,
    UrlPath((id, file)): UrlPath<(String, String)>,
    request: Request,
) -> Response {
    if file != PREVIEW_FILE_NAME {
        return service_error(&ServiceError::NotFound);
    }
    match service.preview_path(principal.as_str(), &id) {
        Ok((_, path)) => {
            serve_media(
                &service,
                Served::download(&path, "image/png", None),
                request,
            )
            .await
        }
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

/// What [`serve_media`] serves: stored media, its type and download name, and how long the
/// answer may be used (a presigned link's lifetime and `Cache-Control`'s `max-age`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Served<'a> {
    pub stored: &'a Path,
    pub mime: &'a str,
    pub download_name: Option<&'a str>,
    /// `None`: a download's (`presigned_url_ttl`; results do not change while they exist:
    /// [`CACHE_MAX_AGE`]).
    pub lifetime: Option<Duration>,
}

impl<'a> Served<'a> {
    /// A download with its credentials: the default lifetimes.
    pub fn download(stored: &'a Path, mime: &'a str, download_name: Option<&'a str>) -> Self {
        Served {
            stored,
            mime,
            download_name,
            lifetime: None,
        }
    }
}

/// Serves stored media to its owner (already checked): a local file itself
/// ([`serve_file`]); an object in the bucket by a `307` to a short-lived presigned link for
/// the request's method (`GET` or `HEAD`), so `Range`, conditionals and the bytes come from
/// the object store. The redirect itself is never cached (the link expires) and carries no
/// credential of the client's: a client drops its `Authorization` on the way to another
/// origin. Neither the link nor the file's `Cache-Control` outlives `file.lifetime`.
pub(crate) async fn serve_media(
    service: &RenderService,
    file: Served<'_>,
    request: Request,
) -> Response {
    let head = request.method() == axum::http::Method::HEAD;
    match service
        .media()
        .presigned(file.stored, head, file.lifetime)
        .await
    {
        Ok(None) => {
            let max_age = file.lifetime.unwrap_or(CACHE_MAX_AGE);
            serve_file(file.stored, file.mime, file.download_name, max_age, request).await
        }
        Ok(Some((url, _))) => match HeaderValue::from_str(&url) {
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
    max_age: Duration,
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
            let cache = format!("private, max-age={}", max_age.as_secs());
            if let Ok(v) = HeaderValue::from_str(&cache) {
                h.insert(header::CACHE_CONTROL, v);
            }
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
/// Results are private to their principal and do not change while they exist: cached
/// (`private`) this long.
pub const CACHE_MAX_AGE: Duration = Duration::from_secs(3600);
