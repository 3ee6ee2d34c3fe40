//! Plain HTTP routes beside `/mcp`:
//!
//! | route | what |
//! |---|---|
//! | `POST /assets?name=clip.mp4` (or `X-Filename`) | raw-body upload (`Content-Type: application/octet-stream`, the file's own type, or none) → `201` asset JSON; `413` over the limit, `415` a form or text content type, `408` when the body stalls for `body_idle_timeout` or averages under `upload_min_rate` after `upload_rate_grace`, `503` / `429` `uploads_busy` (unread, with `Retry-After`) while `max_concurrent_uploads` uploads run on the server / `max_uploads_per_peer` from the peer's address, `422` unreadable |
//! | `GET /assets/{id}` | the asset JSON (with `expires_at`); `404` unknown or not yours |
//! | `DELETE /assets/{id}` | deletes the asset → `204`; `404` unknown or not yours; `409` while an unfinished render uses it |
//! | `GET /videos/{id}/final.{ext}` | result download ([`serve_file`]: `Range` → `206`/`416`, `If-Range`, `If-Modified-Since` → `304`, `HEAD`); `404` unknown or not yours; `410` expired |
//! | `GET /renders/{id}/watermark-preview.png` | the watermark preview (same) |
//! | `GET /healthz` | liveness, `{"status":"ok"}` (no auth, no Host/Origin check); with a valid bearer token also the build, node, store, compositor, decoder and encoder |
//!
//! Every route but `/healthz` answers to the Host/Origin policy ([`crate::policy`], applied by
//! `vidforge::app::router_with`). Uploads also refuse the content types a browser may send
//! cross-site without a preflight (`text/plain`, `application/x-www-form-urlencoded`,
//! `multipart/form-data`): `415`. A request without `Content-Type` is accepted (plain HTTP
//! clients send raw bytes without one; browsers always send `Origin` cross-site, which the
//! policy checks). Error bodies are the §6 envelope ([`crate::envelope`]).

mod answers;
mod assets;
mod download;
mod upload;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Extension, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;

use crate::auth::Auth;
use crate::auth_limit::Verdict;
use crate::auth_or_session::require_auth_or_session;
use crate::connections::UploadGate;
use crate::envelope::fingerprint;
use crate::session::Sessions;
use vidforge_core::service::RenderService;

pub(crate) use answers::service_error;
pub use answers::status_for;
pub use assets::asset_json;
pub use download::serve_file;
pub(crate) use download::{Served, serve_media};
pub use upload::{FILENAME_HEADER, REFUSED_UPLOAD_TYPES, UPLOADS_BUSY_RETRY_AFTER};

use assets::{delete_asset, get_asset};
use download::{download, preview};
use upload::upload;

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
pub fn health_routes(service: RenderService, auth: Auth) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .with_state((service, auth))
}

/// `GET /healthz`: the node's liveness, `{"status":"ok"}`, to anyone. What it runs on (the
/// build, the node, the store, the compositor, decoder and encoder) only to a caller whose
/// bearer token is valid: a stranger learns nothing to aim at. A wrong token counts against
/// the peer's failure budget like anywhere else, and still gets the liveness answer.
async fn healthz(
    State((service, auth)): State<(RenderService, Auth)>,
    request: axum::extract::Request,
) -> Response {
    let outcome = auth.authenticate(request.headers()).await;
    let verdict = auth.judge(crate::peer::client_ip(request.extensions()), &outcome);
    let trusted = outcome.is_ok() && verdict == Verdict::Proceed;
    if !trusted {
        return axum::Json(json!({ "status": "ok" })).into_response();
    }
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
