//! What every page handler shares: the state ([`Web`]), the HTML answer with its security
//! headers, where a request without a session goes, and the refusal and error pages.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use maud::Markup;
use serde::Deserialize;

use crate::session::{Session, Sessions, cookie};
use vidforge_core::error::ServiceError;
use vidforge_core::service::RenderService;

use super::pages::{self, Chrome};

/// Marks a browser that has signed in before (`SameSite=Lax`, no secret): a link from
/// another site then reloads once to send the `Strict` session cookie.
pub(super) const SIGNED_IN_MARK: &str = "vidforge_signed_in";

#[derive(Clone)]
pub(super) struct Web {
    pub(super) service: RenderService,
    pub(super) sessions: Sessions,
}

impl Web {
    pub(super) fn session(&self, headers: &HeaderMap) -> Option<Session> {
        self.sessions.session(headers)
    }

    pub(super) fn chrome<'a>(&self, session: &'a Session, csrf: &'a str) -> Chrome<'a> {
        Chrome {
            principal: Some(session.principal.as_str()),
            csrf: Some(csrf),
            can_sign_out: self.sessions.sign_in_required(),
        }
    }

    /// Sees everyone's renders: a static token's principal in `admins`, or an OAuth session
    /// whose access token had `vidforge:admin`.
    pub(super) fn is_admin(&self, session: &Session) -> bool {
        if session.by_oauth() {
            return session.scopes.admin;
        }
        self.service.config().is_admin(session.principal.as_str())
    }

    /// Where a request without a session goes: the sign-in page, coming back to `path`
    /// (or one same-site reload first when this browser signed in before).
    pub(super) fn signed_out(&self, headers: &HeaderMap, path: &str, reloaded: bool) -> Response {
        if !reloaded && cookie(headers, SIGNED_IN_MARK).is_some() {
            let sep = if path.contains('?') { '&' } else { '?' };
            return html(
                StatusCode::OK,
                pages::reload(&format!("{path}{sep}reload=1")),
            );
        }
        Redirect::to(&format!(
            "/signin?next={}",
            super::query::encode_component(path)
        ))
        .into_response()
    }
}

/// What every page may load and who may frame it: only this server's own assets (inline
/// `style` attributes for the zoomed corner), no framing (an Approve button in another
/// site's frame could be clicked by deceit), forms only to this server.
pub(super) const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; style-src 'self' 'unsafe-inline'; \
     frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'";

/// With media in a bucket, the preview and the player load from presigned links there: the
/// page's policy admits that one origin for images and media (and nothing else).
pub(super) fn allow_media_origin(mut r: Response, origin: Option<&str>) -> Response {
    if let Some(origin) = origin
        && r.headers().contains_key(header::CONTENT_SECURITY_POLICY)
        && let Ok(v) = HeaderValue::from_str(&format!(
            "{CONTENT_SECURITY_POLICY}; img-src 'self' {origin}; media-src 'self' {origin}"
        ))
    {
        r.headers_mut().insert(header::CONTENT_SECURITY_POLICY, v);
    }
    r
}

pub(super) fn html(status: StatusCode, markup: Markup) -> Response {
    let mut r = (status, markup).into_response();
    let h = r.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    r
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct ReloadQuery {
    pub(super) reload: Option<String>,
    pub(super) next: Option<String>,
}

pub(super) fn csrf_refused(web: &Web, session: &Session, back: &str) -> Response {
    let csrf = web.sessions.csrf_token(session);
    html(
        StatusCode::FORBIDDEN,
        pages::message(
            &web.chrome(session, &csrf),
            "Refused",
            "This form did not come from this page (its CSRF token is missing or stale). \
             Reload the page and try again.",
            back,
        ),
    )
}

pub(super) fn service_error_page(web: &Web, session: &Session, e: &ServiceError) -> Response {
    let csrf = web.sessions.csrf_token(session);
    let (title, text) = match e {
        ServiceError::ApprovalAlreadyRecorded { .. } | ServiceError::ApprovalNotPending { .. } => {
            ("Already decided", e.to_string())
        }
        _ => ("Something went wrong", e.to_string()),
    };
    html(
        crate::routes::status_for(e),
        pages::message(&web.chrome(session, &csrf), title, &text, "/"),
    )
}
