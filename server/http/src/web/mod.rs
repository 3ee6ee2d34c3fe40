//! The browser face: the watermark approval page, the dashboard and sign-in, served as
//! plain HTML by the binary (no build step, no external assets; it works offline).
//!
//! | route | what |
//! |---|---|
//! | `GET /` | dashboard: the principal's renders (admins: everyone's), live, and the server's capabilities |
//! | `GET /approvals/{id}` | the approval page: preview at real size, zoomed corner, parameters, Approve / Reject, time left; then live progress and the result |
//! | `POST /approvals/{id}` | the decision (form: `csrf`, `decision` = approve/reject, `note`) → `303` back; `403` without the session's CSRF token; `404` unknown or not yours; `409` already decided / not pending |
//! | `GET /signin`, `POST /signin` | sign in with a bearer token → session cookie ([`crate::session`]) |
//! | `GET /oauth/login`, `GET /oauth/callback` | sign in through the OAuth authorization server (authorization code + PKCE, `oauth_flow.rs`), when `oauth_browser_client_id` is set |
//! | `POST /signout` | ends the session |
//! | `GET /ui/fragments/renders`, `GET /ui/fragments/approvals/{id}` | the live parts, polled by the script |
//! | `GET /ui/app.css`, `GET /ui/app.js` | the stylesheet and the script |
//!
//! A decision here is the same durable decision as `tasks/update` or
//! `vidforge_approve_watermark` ([`RenderService::decide_approval`]: same conflict rules,
//! same parameter-hash binding). The pages are behind the Host/Origin policy like every
//! route; the forms also carry the session's CSRF token. Without tokens configured (loopback
//! only) everyone is the anonymous principal and there is nothing to sign in to.

mod approval;
mod dashboard;
mod oauth_flow;
mod pages;
mod query;
mod sign_in;
mod state;
mod view;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::session::{SESSION_COOKIE, Sessions};
use vidforge_core::service::RenderService;

use approval::{approval_page, decide, status_fragment};
use dashboard::{dashboard, rows_fragment};
use oauth_flow::{oauth_callback, oauth_login};
use sign_in::{sign_in, sign_in_form, sign_out};
use state::Web;

/// The stylesheet (`GET /ui/app.css`).
pub const STYLESHEET: &str = include_str!("app.css");
/// The script (`GET /ui/app.js`): live fragments, the countdown.
pub const SCRIPT: &str = include_str!("app.js");

/// The pages' routes. `vidforge::app::router_with` puts them behind the request policy.
pub fn web_routes(service: RenderService, sessions: Sessions) -> Router {
    let media_origin = service.media().link_origin();
    Router::new()
        .route("/", get(dashboard))
        .route("/signin", get(sign_in_form).post(sign_in))
        .route("/signout", axum::routing::post(sign_out))
        .route("/approvals/{id}", get(approval_page).post(decide))
        // Only the routes above (the pages a person opens and the forms they send) slide
        // the session's idle timeout; the fragments the script polls do not.
        .layer(axum::middleware::from_fn_with_state(
            sessions.clone(),
            renew_session,
        ))
        .route("/oauth/login", get(oauth_login))
        .route("/oauth/callback", get(oauth_callback))
        .route("/ui/fragments/renders", get(rows_fragment))
        .route("/ui/fragments/approvals/{id}", get(status_fragment))
        .route("/ui/app.css", get(stylesheet))
        .route("/ui/app.js", get(script))
        .with_state(Web { service, sessions })
        .layer(axum::middleware::map_response(
            move |r: axum::response::Response| {
                let origin = media_origin.clone();
                async move { state::allow_media_origin(r, origin.as_deref()) }
            },
        ))
}

/// Middleware: when the request's session cookie is due for re-issue
/// ([`crate::session::Session::renewal`]), the answer carries the re-issued cookie (same
/// sign-in, last seen now), unless the handler set the session cookie itself (sign-in,
/// sign-out). The full check (with its store read) runs only when a re-issue is due.
async fn renew_session(
    State(sessions): State<Sessions>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let due = sessions
        .renewal_due(req.headers())
        .then(|| req.headers().clone());
    let mut resp = next.run(req).await;
    let handler_set_it = resp
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .any(|v| v.as_bytes().starts_with(SESSION_COOKIE.as_bytes()));
    if let Some(headers) = due
        && !handler_set_it
    {
        let renewal = tokio::task::spawn_blocking(move || {
            sessions
                .session(&headers)
                .and_then(|s| s.renewal().map(str::to_string))
        })
        .await
        .ok()
        .flatten();
        if let Some(v) = renewal.and_then(|v| HeaderValue::from_str(&v).ok()) {
            resp.headers_mut().append(header::SET_COOKIE, v);
        }
    }
    resp
}

async fn stylesheet() -> Response {
    static_asset("text/css; charset=utf-8", STYLESHEET)
}

async fn script() -> Response {
    static_asset("text/javascript; charset=utf-8", SCRIPT)
}

fn static_asset(content_type: &'static str, body: &'static str) -> Response {
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    r
}
