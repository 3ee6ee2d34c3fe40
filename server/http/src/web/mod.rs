//! The browser face: the watermark approval page, the dashboard and sign-in, served as
//! plain HTML by the binary (no build step, no external assets; it works offline).
//!
//! | route | what |
//! |---|---|
//! | `GET /` | dashboard: the principal's renders (admins: everyone's), live, and the server's capabilities |
//! | `GET /approvals/{id}` | the approval page: preview at real size, zoomed corner, parameters, Approve / Reject, time left; then live progress and the result |
//! | `POST /approvals/{id}` | the decision (form: `csrf`, `decision` = approve/reject, `note`) → `303` back; `403` without the session's CSRF token; `404` unknown or not yours; `409` already decided / not pending |
//! | `GET /signin`, `POST /signin` | sign in with a bearer token → session cookie ([`crate::session`]) |
//! | `POST /signout` | ends the session |
//! | `GET /ui/fragments/renders`, `GET /ui/fragments/approvals/{id}` | the live parts, polled by the script |
//! | `GET /ui/app.css`, `GET /ui/app.js` | the stylesheet and the script |
//!
//! A decision here is the same durable decision as `tasks/update` or
//! `vidforge_approve_watermark` ([`RenderService::decide_approval`]: same conflict rules,
//! same parameter-hash binding). The pages are behind the Host/Origin policy like every
//! route; the forms also carry the session's CSRF token. Without tokens configured (loopback
//! only) everyone is the anonymous principal and there is nothing to sign in to.

mod pages;
mod view;

use axum::Extension;
use axum::Router;
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use maud::Markup;
use serde::Deserialize;

use crate::auth::AuthError;
use crate::auth_limit::Verdict;
use crate::peer::ClientIp;
use crate::session::{SESSION_COOKIE, Session, Sessions, cookie};
use vidforge_core::catalog::{MAX_NOTE_CHARS, human_duration};
use vidforge_core::error::ServiceError;
use vidforge_core::service::RenderService;

use pages::{ApprovalExtras, Capabilities, Chrome};
use view::RenderView;

/// The stylesheet (`GET /ui/app.css`).
pub const STYLESHEET: &str = include_str!("app.css");
/// The script (`GET /ui/app.js`): live fragments, the countdown.
pub const SCRIPT: &str = include_str!("app.js");

/// Renders the dashboard lists (newest first).
const DASHBOARD_RENDERS: usize = 100;
/// Marks a browser that has signed in before (`SameSite=Lax`, no secret): a link from
/// another site then reloads once to send the `Strict` session cookie.
const SIGNED_IN_MARK: &str = "vidforge_signed_in";

#[derive(Clone)]
struct Web {
    service: RenderService,
    sessions: Sessions,
}

/// The pages' routes. `vidforge::app::router_with` puts them behind the request policy.
pub fn web_routes(service: RenderService, sessions: Sessions) -> Router {
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
        .route("/ui/fragments/renders", get(rows_fragment))
        .route("/ui/fragments/approvals/{id}", get(status_fragment))
        .route("/ui/app.css", get(stylesheet))
        .route("/ui/app.js", get(script))
        .with_state(Web { service, sessions })
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

impl Web {
    fn session(&self, headers: &HeaderMap) -> Option<Session> {
        self.sessions.session(headers)
    }

    fn chrome<'a>(&self, session: &'a Session, csrf: &'a str) -> Chrome<'a> {
        Chrome {
            principal: Some(session.principal.as_str()),
            csrf: Some(csrf),
            can_sign_out: self.sessions.sign_in_required(),
        }
    }

    fn is_admin(&self, session: &Session) -> bool {
        self.service.config().is_admin(session.principal.as_str())
    }

    /// Where a request without a session goes: the sign-in page, coming back to `path`
    /// (or one same-site reload first when this browser signed in before).
    fn signed_out(&self, headers: &HeaderMap, path: &str, reloaded: bool) -> Response {
        if !reloaded && cookie(headers, SIGNED_IN_MARK).is_some() {
            let sep = if path.contains('?') { '&' } else { '?' };
            return html(
                StatusCode::OK,
                pages::reload(&format!("{path}{sep}reload=1")),
            );
        }
        Redirect::to(&format!("/signin?next={}", encode_component(path))).into_response()
    }
}

/// What every page may load and who may frame it: only this server's own assets (inline
/// `style` attributes for the zoomed corner), no framing (an Approve button in another
/// site's frame could be clicked by deceit), forms only to this server.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; style-src 'self' 'unsafe-inline'; \
     frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'";

fn html(status: StatusCode, markup: Markup) -> Response {
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

/// Percent-encodes a query component.
fn encode_component(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The longest `next` followed after sign-in (our own paths are far shorter).
const MAX_NEXT_LEN: usize = 2048;

/// Only our own paths are followed after sign-in (no open redirect); anything else is `/`.
///
/// A browser strips tabs and newlines from a `Location` and reads `\` as `/`, so
/// `/<TAB>/evil.example/` would leave this site: only printable ASCII passes, with no
/// backslash, no `//` anywhere in the path and no dot segment (`/.//evil` normalises to
/// `//evil`), and it must parse as an origin-form path and query. Since the answer is
/// built only from what passes, no `next` can make the `Location` header invalid (a `500`).
fn safe_next(next: Option<&str>) -> String {
    let Some(n) = next else { return "/".into() };
    let path = n.split(['?', '#']).next().unwrap_or_default();
    let dot_segment = path.split('/').any(|seg| {
        let seg = seg.to_ascii_lowercase().replace("%2e", ".");
        seg == "." || seg == ".."
    });
    let ok = n.len() <= MAX_NEXT_LEN
        && n.starts_with('/')
        && n.bytes().all(|b| b.is_ascii_graphic() && b != b'\\')
        && !path.contains("//")
        && !path.to_ascii_lowercase().contains("%2f")
        && !path.to_ascii_lowercase().contains("%5c")
        && !dot_segment
        && n.parse::<axum::http::uri::PathAndQuery>().is_ok();
    if ok { n.into() } else { "/".into() }
}

#[derive(Debug, Default, Deserialize)]
struct ReloadQuery {
    reload: Option<String>,
    next: Option<String>,
}

async fn dashboard(
    State(web): State<Web>,
    Query(q): Query<ReloadQuery>,
    headers: HeaderMap,
) -> Response {
    let Some(session) = web.session(&headers) else {
        return web.signed_out(&headers, "/", q.reload.is_some());
    };
    let all = web.is_admin(&session);
    let renders = match load_rows(&web, &session, all).await {
        Ok(r) => r,
        Err(e) => return service_error_page(&web, &session, &e),
    };
    let csrf = web.sessions.csrf_token(&session);
    let caps = capabilities(&web.service);
    let now = web.service.now_ms();
    html(
        StatusCode::OK,
        pages::dashboard(&web.chrome(&session, &csrf), &renders, all, &caps, now),
    )
}

async fn load_rows(
    web: &Web,
    session: &Session,
    all: bool,
) -> Result<Vec<RenderView>, ServiceError> {
    let service = web.service.clone();
    let principal = (!all).then(|| session.principal.as_str().to_string());
    tokio::task::spawn_blocking(move || {
        service
            .recent_renders(principal.as_deref(), DASHBOARD_RENDERS)
            .map(|recs| recs.iter().map(RenderView::of).collect())
    })
    .await
    .map_err(|e| ServiceError::Internal(format!("listing renders: {e}")))?
}

async fn rows_fragment(State(web): State<Web>, headers: HeaderMap) -> Response {
    let Some(session) = web.session(&headers) else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    let all = web.is_admin(&session);
    match load_rows(&web, &session, all).await {
        Ok(renders) => html(
            StatusCode::OK,
            pages::rows(&renders, all, web.service.now_ms()),
        ),
        Err(e) => (crate::routes::status_for(&e), e.to_string()).into_response(),
    }
}

fn capabilities(service: &RenderService) -> Capabilities {
    let c = service.config();
    let hw = service.hardware();
    let store = if service.store().is_shared() {
        "PostgreSQL (shared by the cluster)"
    } else {
        "sled (embedded)"
    };
    Capabilities {
        rows: vec![
            ("Node", service.node().to_string()),
            ("Compositor", hw.compositor),
            ("Decoder", hw.decoder),
            (
                "Encoders",
                format!("mp4 and mov: {}; webm: libvpx-vp9", hw.h264_encoder),
            ),
            ("Resolutions", "720p, 1080p, 4k".into()),
            ("Render slots", c.render_slots.to_string()),
            (
                "Unfinished renders per principal",
                c.per_principal_concurrent.to_string(),
            ),
            (
                "Largest upload",
                view::human_bytes(c.max_upload_bytes).to_string(),
            ),
            (
                "Longest source",
                human_duration(std::time::Duration::from_secs(c.max_source_seconds)),
            ),
            ("Approval timeout", human_duration(c.approval_timeout)),
            ("Results kept", human_duration(c.result_ttl)),
            ("Task store", store.into()),
        ],
    }
}

async fn sign_in_form(State(web): State<Web>, Query(q): Query<ReloadQuery>) -> Response {
    let next = safe_next(q.next.as_deref());
    if !web.sessions.sign_in_required() {
        return Redirect::to(&next).into_response();
    }
    html(StatusCode::OK, pages::sign_in(&next, None))
}

#[derive(Debug, Deserialize)]
struct SignInForm {
    token: String,
    next: Option<String>,
}

async fn sign_in(
    State(web): State<Web>,
    peer: Option<Extension<ClientIp>>,
    Form(form): Form<SignInForm>,
) -> Response {
    let next = safe_next(form.next.as_deref());
    if !web.sessions.sign_in_required() {
        return Redirect::to(&next).into_response();
    }
    // The form is a bearer-token check like any other: wrong tokens spend the peer's budget.
    let auth = web.sessions.auth();
    let outcome = auth
        .principal_for_token(form.token.trim().as_bytes())
        .ok_or(AuthError::Invalid);
    if let Verdict::Limited(wait) = auth.judge(peer.map(|p| p.0.0), &outcome) {
        let secs = wait.as_secs().max(1);
        let mut r = html(
            StatusCode::TOO_MANY_REQUESTS,
            pages::sign_in(
                &next,
                Some(&format!(
                    "Too many failed sign-in attempts from this address; try again in {}.",
                    human_duration(std::time::Duration::from_secs(secs))
                )),
            ),
        );
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        return r;
    }
    match web.sessions.sign_in(&form.token) {
        Ok(Some((principal, set_cookie))) => {
            tracing::info!(principal = %principal.as_str(), "browser signed in");
            let mut r = Redirect::to(&next).into_response();
            let h = r.headers_mut();
            if let Ok(v) = HeaderValue::from_str(&set_cookie) {
                h.append(header::SET_COOKIE, v);
            }
            let mark = format!(
                "{SIGNED_IN_MARK}=1; Path=/; Max-Age={}; SameSite=Lax",
                web.sessions.limits().max_age.as_secs()
            );
            if let Ok(v) = HeaderValue::from_str(&mark) {
                h.append(header::SET_COOKIE, v);
            }
            r
        }
        Ok(None) => html(
            StatusCode::UNAUTHORIZED,
            pages::sign_in(&next, Some("That token is not valid here.")),
        ),
        Err(e) => {
            tracing::warn!(error = %e, "sign-in failed: the session store is unavailable");
            html(
                StatusCode::SERVICE_UNAVAILABLE,
                pages::sign_in(
                    &next,
                    Some("Signing in is unavailable for a moment; try again shortly."),
                ),
            )
        }
    }
}

#[derive(Debug, Deserialize)]
struct CsrfForm {
    csrf: Option<String>,
}

async fn sign_out(
    State(web): State<Web>,
    headers: HeaderMap,
    Form(form): Form<CsrfForm>,
) -> Response {
    // A store outage is not "no session": the cookie is then kept, so the sign-out can be
    // retried, rather than dropped here while it still works elsewhere.
    let session = match web.sessions.check(&headers) {
        Ok(session) => session,
        Err(e) => return sign_out_failed(&e),
    };
    if let Some(session) = session {
        if !web.sessions.csrf_ok(&session, form.csrf.as_deref()) {
            return csrf_refused(&web, &session, "/");
        }
        // Durable before the answer: the cookie is dead on every node, after restarts too.
        let sessions = web.sessions.clone();
        let ended = tokio::task::spawn_blocking(move || sessions.sign_out(&session)).await;
        match ended {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return sign_out_failed(&e),
            Err(e) => {
                return sign_out_failed(&format!("the sign-out task failed: {e}"));
            }
        }
    }
    let mut r = Redirect::to("/signin").into_response();
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&web.sessions.sign_out_cookie()) {
        h.append(header::SET_COOKIE, v);
    }
    h.append(
        header::SET_COOKIE,
        HeaderValue::from_static("vidforge_signed_in=; Path=/; Max-Age=0; SameSite=Lax"),
    );
    r
}

/// `503`: the sign-out could not be recorded (the store is down); the cookie is kept so the
/// person can try again.
fn sign_out_failed(e: &dyn std::fmt::Display) -> Response {
    tracing::warn!(error = %e, "sign-out failed: the session store is unavailable");
    let chrome = pages::Chrome {
        principal: None,
        csrf: None,
        can_sign_out: false,
    };
    let mut r = html(
        StatusCode::SERVICE_UNAVAILABLE,
        pages::message(
            &chrome,
            "Not signed out yet",
            "The server could not record the sign-out just now, so this session still works. \
             Try again in a moment.",
            "/",
        ),
    );
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
    r
}

async fn approval_page(
    State(web): State<Web>,
    Path(id): Path<String>,
    Query(q): Query<ReloadQuery>,
    headers: HeaderMap,
) -> Response {
    let path = vidforge_core::uri::approval_path(&id);
    let Some(session) = web.session(&headers) else {
        return web.signed_out(&headers, &path, q.reload.is_some());
    };
    let csrf = web.sessions.csrf_token(&session);
    let chrome = web.chrome(&session, &csrf);
    let rec = match web.service.get(session.principal.as_str(), &id) {
        Ok(rec) if rec.args.watermark.is_some() && !web.service.task_expired(&rec) => rec,
        Ok(_) | Err(ServiceError::NotFound) => {
            return html(StatusCode::NOT_FOUND, pages::not_found(&chrome, &id));
        }
        Err(e) => return service_error_page(&web, &session, &e),
    };
    let principal = session.principal.as_str();
    let asset = |asset_id: &str| web.service.resolve_asset(principal, asset_id).ok();
    let watermark_size = rec
        .args
        .watermark
        .as_ref()
        .and_then(|w| asset(&w.image_asset))
        .and_then(|a| Some((a.probe.width?, a.probe.height?)));
    let source = asset(&rec.args.source_asset).map(|a| {
        let p = &a.probe;
        let mut parts = Vec::new();
        if let (Some(w), Some(h)) = (p.width, p.height) {
            parts.push(format!("{w}×{h}"));
        }
        if let Some(d) = p.duration_seconds {
            parts.push(format!("{d:.1} s"));
        }
        parts.push(a.file_name.clone());
        parts.join(", ")
    });
    let extras = ApprovalExtras {
        now_ms: web.service.now_ms(),
        csrf: csrf.clone(),
        watermark_size,
        source,
        approval_timeout: human_duration(web.service.config().approval_timeout),
    };
    html(
        StatusCode::OK,
        pages::approval(
            &chrome,
            &RenderView::of(&rec).with_preview_size(&rec),
            &extras,
        ),
    )
}

async fn status_fragment(
    State(web): State<Web>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let Some(session) = web.session(&headers) else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    match web.service.get(session.principal.as_str(), &id) {
        Ok(rec) => html(
            StatusCode::OK,
            pages::status(&RenderView::of(&rec), web.service.now_ms()),
        ),
        Err(e) => (crate::routes::status_for(&e), e.to_string()).into_response(),
    }
}

#[derive(Debug, Deserialize)]
struct DecideForm {
    csrf: Option<String>,
    decision: Option<String>,
    note: Option<String>,
}

async fn decide(
    State(web): State<Web>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Form(form): Form<DecideForm>,
) -> Response {
    let path = vidforge_core::uri::approval_path(&id);
    let Some(session) = web.session(&headers) else {
        return web.signed_out(&headers, &path, true);
    };
    if !web.sessions.csrf_ok(&session, form.csrf.as_deref()) {
        return csrf_refused(&web, &session, &path);
    }
    let csrf = web.sessions.csrf_token(&session);
    let chrome = web.chrome(&session, &csrf);
    let principal = session.principal.as_str();
    // Another principal's render is as unknown as a missing one, before anything else.
    match web.service.get(principal, &id) {
        Ok(r) if r.args.watermark.is_some() => {}
        Ok(_) | Err(ServiceError::NotFound) => {
            return html(StatusCode::NOT_FOUND, pages::not_found(&chrome, &id));
        }
        Err(e) => return service_error_page(&web, &session, &e),
    }
    let approved = match form.decision.as_deref() {
        Some("approve") => true,
        Some("reject") => false,
        _ => {
            return html(
                StatusCode::BAD_REQUEST,
                pages::message(
                    &chrome,
                    "Choose Approve or Reject",
                    "The form did not say which button was pressed.",
                    &path,
                ),
            );
        }
    };
    let note = form
        .note
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty());
    if note
        .as_ref()
        .is_some_and(|n| n.chars().count() > MAX_NOTE_CHARS)
    {
        return html(
            StatusCode::BAD_REQUEST,
            pages::message(
                &chrome,
                "The note is too long",
                &format!("Notes are at most {MAX_NOTE_CHARS} characters."),
                &path,
            ),
        );
    }
    match web
        .service
        .decide_approval(principal, &id, approved, note)
        .await
    {
        Ok(_) => {
            tracing::info!(render_id = %id, principal, approved, "decision from the approval page");
            Redirect::to(&path).into_response()
        }
        Err(e) => service_error_page(&web, &session, &e),
    }
}

fn csrf_refused(web: &Web, session: &Session, back: &str) -> Response {
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

fn service_error_page(web: &Web, session: &Session, e: &ServiceError) -> Response {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_stays_on_this_site() {
        assert_eq!(safe_next(Some("/approvals/task_1")), "/approvals/task_1");
        assert_eq!(safe_next(Some("//evil.example")), "/");
        assert_eq!(safe_next(Some("https://evil.example")), "/");
        assert_eq!(safe_next(Some("/\\evil")), "/");
        assert_eq!(safe_next(None), "/");
        // What browsers normalise into another origin: tabs and newlines are stripped, `\`
        // is `/`, dot segments collapse.
        for evil in [
            "/\t/evil.example/",
            "/\n/evil.example",
            "\t//evil.example",
            "/.//evil.example",
            "/%2e//evil.example",
            "/%2F/evil.example",
            "/%5cevil.example",
            "/a/../\\evil",
            "/\r\nSet-Cookie: x=1",
            "/\0",
            "/caf\u{e9}",
            " /x",
        ] {
            assert_eq!(safe_next(Some(evil)), "/", "{evil:?}");
        }
        assert_eq!(
            safe_next(Some(&format!("/{}", "a".repeat(MAX_NEXT_LEN)))),
            "/"
        );
        assert_eq!(
            safe_next(Some("/approvals/task_1?reload=1")),
            "/approvals/task_1?reload=1"
        );
        assert_eq!(encode_component("/a b?c"), "/a%20b%3Fc");
    }
}
