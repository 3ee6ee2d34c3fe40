//! Signing in and out: the sign-in form, the bearer token exchanged for a session cookie
//! (`session/`), the sign-out, and the `next` path followed after sign-in (no open redirect).

use axum::Extension;
use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use crate::auth::AuthError;
use crate::auth_limit::Verdict;
use crate::peer::ClientIp;
use vidforge_core::catalog::human_duration;

use super::pages::{self};
use super::state::{ReloadQuery, SIGNED_IN_MARK, Web, csrf_refused, html};

/// The longest `next` followed after sign-in (our own paths are far shorter).
pub(super) const MAX_NEXT_LEN: usize = 2048;

/// Only our own paths are followed after sign-in (no open redirect); anything else is `/`.
///
/// A browser strips tabs and newlines from a `Location` and reads `\` as `/`, so
/// `/<TAB>/evil.example/` would leave this site: only printable ASCII passes, with no
/// backslash, no `//` anywhere in the path and no dot segment (`/.//evil` normalises to
/// `//evil`), and it must parse as an origin-form path and query. Since the answer is
/// built only from what passes, no `next` can make the `Location` header invalid (a `500`).
pub(super) fn safe_next(next: Option<&str>) -> String {
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

pub(super) async fn sign_in_form(State(web): State<Web>, Query(q): Query<ReloadQuery>) -> Response {
    let next = safe_next(q.next.as_deref());
    if !web.sessions.sign_in_required() {
        return Redirect::to(&next).into_response();
    }
    html(StatusCode::OK, sign_in_page(&web, &next, None))
}

/// The sign-in page: "Sign in with ISSUER" when the pages' OAuth sign-in is configured, the
/// token form while static tokens exist.
pub(super) fn sign_in_page(web: &Web, next: &str, error: Option<&str>) -> maud::Markup {
    let auth = web.sessions.auth();
    let issuer = auth
        .oauth()
        .filter(|o| o.browser().is_some())
        .map(|o| o.sign_in_issuer());
    pages::sign_in(
        next,
        error,
        pages::SignInOptions {
            issuer,
            token: auth.has_static_tokens(),
        },
    )
}

#[derive(Debug, Deserialize)]
pub(super) struct SignInForm {
    token: String,
    next: Option<String>,
}

/// The answer that signs a browser in: `303` to `next` with the session cookie, and the
/// signed-in mark. The session cookie is `SameSite=Strict`, so after a cross-site step (the
/// authorization server's redirect) the browser does not send it yet; the mark makes the page
/// reload once, same-site (`state::Web::signed_out`).
pub(super) fn signed_in(web: &Web, next: &str, set_cookie: &str) -> Response {
    let mut r = Redirect::to(next).into_response();
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(set_cookie) {
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

pub(super) async fn sign_in(
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
    // Static tokens only: an OAuth user signs in through the authorization server.
    let outcome = auth
        .principal_for_token(form.token.trim().as_bytes())
        .map(|principal| crate::auth::Grant {
            principal,
            scopes: crate::scope::Scopes::static_token(false),
            signed: false,
        })
        .ok_or(AuthError::Invalid);
    if let Verdict::Limited(wait) = auth.judge(peer.map(|p| p.0.0), &outcome) {
        let secs = wait.as_secs().max(1);
        let mut r = html(
            StatusCode::TOO_MANY_REQUESTS,
            sign_in_page(
                &web,
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
            signed_in(&web, &next, &set_cookie)
        }
        Ok(None) => html(
            StatusCode::UNAUTHORIZED,
            sign_in_page(&web, &next, Some("That token is not valid here.")),
        ),
        Err(e) => {
            tracing::warn!(error = %e, "sign-in failed: the session store is unavailable");
            html(
                StatusCode::SERVICE_UNAVAILABLE,
                sign_in_page(
                    &web,
                    &next,
                    Some("Signing in is unavailable for a moment; try again shortly."),
                ),
            )
        }
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct CsrfForm {
    csrf: Option<String>,
}

pub(super) async fn sign_out(
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
pub(super) fn sign_out_failed(e: &dyn std::fmt::Display) -> Response {
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

#[cfg(test)]
mod tests {
    use super::super::query::encode_component;
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
