//! Signing in through the OAuth authorization server (the authorization-code flow with PKCE,
//! [`crate::oauth::browser`]), when `oauth_browser_client_id` is set.
//!
//! - `GET /oauth/login?next=PATH`: a fresh `state` and PKCE verifier go into the **flow
//!   cookie** [`FLOW_COOKIE`] (`<issued_ms>.<state>.<verifier>.<next hex>.<mac hex>`, the MAC
//!   under the server's session secret, so any node of a cluster can finish the flow;
//!   `HttpOnly; SameSite=Lax; Path=/oauth`, 10 minutes, `Secure` on https), and the browser is
//!   sent to the first issuer's `authorization_endpoint`. Only what the spec puts in the URL
//!   is there: the challenge, never the verifier.
//! - `GET /oauth/callback?code&state`: the flow cookie must verify, be under 10 minutes old and
//!   hold this `state`; the code is exchanged (client secret by HTTP Basic, `code_verifier`,
//!   `redirect_uri`, `resource`), the access token validated like any bearer token
//!   ([`crate::oauth::OAuth::validate`]: issuer, audience, lifetime, scopes) and dropped, and
//!   the browser signed in as `ISSUER#SUB` with the token's scopes ([`crate::session`]). The
//!   flow cookie is cleared by every answer. Failures are pages: `400` (no or wrong state, no
//!   code), `401` (the authorization server refused, the token does not validate), `502` (the
//!   authorization server unreachable), `503` (the store down); nobody is signed in.

use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use subtle::ConstantTimeEq;

use crate::oauth::browser::{self, BrowserError};
use crate::oauth::{OAuth, Verified};
use crate::scope::Need;
use crate::session::{SessionError, cookie};

use super::pages::{self, Chrome};
use super::sign_in::{safe_next, signed_in};
use super::state::{Web, html};

/// The flow cookie's name.
pub const FLOW_COOKIE: &str = "vidforge_oauth_flow";
/// How long a sign-in at the authorization server may take.
const FLOW_MAX_AGE_MS: u64 = 10 * 60 * 1000;
/// MAC purpose of the flow cookie.
const FLOW_PURPOSE: &str = "oauth-flow";

#[derive(Debug, Deserialize)]
pub(super) struct LoginQuery {
    next: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
}

/// The flow cookie's fields.
struct Flow {
    issued: u64,
    state: String,
    verifier: String,
    next: String,
}

fn flow_mac(
    web: &Web,
    issued: u64,
    state: &str,
    verifier: &str,
    next: &str,
) -> Result<Vec<u8>, SessionError> {
    let issued = issued.to_string();
    web.sessions.server_mac(
        FLOW_PURPOSE,
        &[
            issued.as_bytes(),
            b"\0",
            state.as_bytes(),
            b"\0",
            verifier.as_bytes(),
            b"\0",
            next.as_bytes(),
        ],
    )
}

fn flow_cookie_header(web: &Web, value: &str, max_age_s: u64) -> String {
    let secure = if web.sessions.secure() {
        "; Secure"
    } else {
        ""
    };
    format!(
        "{FLOW_COOKIE}={value}; Path=/oauth; Max-Age={max_age_s}; HttpOnly; SameSite=Lax{secure}"
    )
}

/// The request's flow cookie, when it verifies and is not expired.
fn read_flow(web: &Web, headers: &HeaderMap) -> Result<Option<Flow>, SessionError> {
    let Some(value) = cookie(headers, FLOW_COOKIE) else {
        return Ok(None);
    };
    let parts: Vec<&str> = value.split('.').collect();
    let [issued, state, verifier, next, tag] = parts[..] else {
        return Ok(None);
    };
    let (Ok(issued), Ok(next), Ok(tag)) = (
        issued.parse::<u64>(),
        hex::decode(next).map(String::from_utf8),
        hex::decode(tag),
    ) else {
        return Ok(None);
    };
    let Ok(next) = next else { return Ok(None) };
    let expected = flow_mac(web, issued, state, verifier, &next)?;
    let now = web.service.clock().now_ms();
    if !bool::from(expected.ct_eq(&tag)) || now.saturating_sub(issued) >= FLOW_MAX_AGE_MS {
        return Ok(None);
    }
    Ok(Some(Flow {
        issued,
        state: state.to_string(),
        verifier: verifier.to_string(),
        next,
    }))
}

fn failure(status: StatusCode, title: &str, text: &str, next: &str) -> Response {
    let chrome = Chrome {
        principal: None,
        csrf: None,
        can_sign_out: false,
    };
    let back = format!("/signin?next={}", super::query::encode_component(next));
    html(status, pages::message(&chrome, title, text, &back))
}

/// `GET /oauth/login`: to the authorization server.
pub(super) async fn oauth_login(State(web): State<Web>, Query(q): Query<LoginQuery>) -> Response {
    let next = safe_next(q.next.as_deref());
    let Some(oauth) = web
        .sessions
        .auth()
        .oauth()
        .filter(|o| o.browser().is_some())
    else {
        return failure(
            StatusCode::NOT_FOUND,
            "Not available",
            "Signing in through an authorization server is not configured on this server.",
            &next,
        );
    };
    let state = browser::random_b64(32);
    let verifier = browser::new_verifier();
    let url = match oauth.authorization_url(&state, &verifier).await {
        Ok(Some(url)) => url,
        Ok(None) => {
            return failure(
                StatusCode::NOT_FOUND,
                "Not available",
                "No sign-in client.",
                &next,
            );
        }
        Err(e) => {
            tracing::warn!(error = %e, "OAuth sign-in cannot start");
            return failure(
                StatusCode::BAD_GATEWAY,
                "Sign-in unavailable",
                "The authorization server cannot be reached just now; try again shortly.",
                &next,
            );
        }
    };
    let issued = web.service.clock().now_ms();
    let sessions = web.clone();
    let (s, v, n) = (state.clone(), verifier.clone(), next.clone());
    let tag = tokio::task::spawn_blocking(move || flow_mac(&sessions, issued, &s, &v, &n)).await;
    let tag = match tag {
        Ok(Ok(tag)) => tag,
        Ok(Err(e)) => return store_down(&e, &next),
        Err(e) => return store_down(&format!("the task failed: {e}"), &next),
    };
    let value = format!(
        "{issued}.{state}.{verifier}.{}.{}",
        hex::encode(next.as_bytes()),
        hex::encode(tag)
    );
    let mut r = Redirect::to(url.as_str()).into_response();
    if let Ok(v) = HeaderValue::from_str(&flow_cookie_header(&web, &value, FLOW_MAX_AGE_MS / 1000))
    {
        r.headers_mut().append(header::SET_COOKIE, v);
    }
    r
}

fn store_down(e: &dyn std::fmt::Display, next: &str) -> Response {
    tracing::warn!(error = %e, "OAuth sign-in failed: the session store is unavailable");
    let mut r = failure(
        StatusCode::SERVICE_UNAVAILABLE,
        "Sign-in unavailable",
        "Signing in is unavailable for a moment; try again shortly.",
        next,
    );
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
    r
}

/// `GET /oauth/callback`: back from the authorization server.
pub(super) async fn oauth_callback(
    State(web): State<Web>,
    headers: HeaderMap,
    Query(q): Query<CallbackQuery>,
) -> Response {
    let mut r = callback(&web, &headers, q).await;
    // One flow, one callback: the flow cookie is cleared whatever happened.
    if let Ok(v) = HeaderValue::from_str(&flow_cookie_header(&web, "", 0)) {
        r.headers_mut().append(header::SET_COOKIE, v);
    }
    r
}

async fn callback(web: &Web, headers: &HeaderMap, q: CallbackQuery) -> Response {
    let Some(oauth) = web
        .sessions
        .auth()
        .oauth()
        .filter(|o| o.browser().is_some())
        .cloned()
    else {
        return failure(
            StatusCode::NOT_FOUND,
            "Not available",
            "Signing in through an authorization server is not configured on this server.",
            "/",
        );
    };
    let flow = match this_browsers_flow(web, headers, q.state.as_deref()).await {
        Ok(flow) => flow,
        Err(refusal) => return *refusal,
    };
    tracing::debug!(
        age_ms = web.service.clock().now_ms().saturating_sub(flow.issued),
        "OAuth callback"
    );
    let verified = match verified_code(&oauth, q, &flow).await {
        Ok(verified) => verified,
        Err(refusal) => return *refusal,
    };
    let signed = {
        let sessions = web.sessions.clone();
        let v = verified.clone();
        tokio::task::spawn_blocking(move || sessions.sign_in_oauth(&v)).await
    };
    let set_cookie = match signed {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return store_down(&e, &flow.next),
        Err(e) => return store_down(&format!("the task failed: {e}"), &flow.next),
    };
    tracing::info!(principal = %verified.principal, "browser signed in through the authorization server");
    signed_in(web, &flow.next, &set_cookie)
}

/// The sign-in this browser started (its flow cookie), when the callback's `state` is its;
/// else the page saying so (or that the store is down).
async fn this_browsers_flow(
    web: &Web,
    headers: &HeaderMap,
    state: Option<&str>,
) -> Result<Flow, Box<Response>> {
    let flow = {
        let (web, headers) = (web.clone(), headers.clone());
        tokio::task::spawn_blocking(move || read_flow(&web, &headers)).await
    };
    let flow = match flow {
        Ok(Ok(flow)) => flow,
        Ok(Err(e)) => return Err(Box::new(store_down(&e, "/"))),
        Err(e) => return Err(Box::new(store_down(&format!("the task failed: {e}"), "/"))),
    };
    let state_ok = match (&flow, state) {
        (Some(f), Some(s)) => bool::from(f.state.as_bytes().ct_eq(s.as_bytes())),
        _ => false,
    };
    flow.filter(|_| state_ok).ok_or_else(|| {
        tracing::info!(
            "OAuth callback refused: no sign-in in progress in this browser, or another one's state"
        );
        Box::new(failure(
            StatusCode::BAD_REQUEST,
            "Sign-in not recognised",
            "This sign-in was not started in this browser, or it took longer than 10 minutes. \
             Start again.",
            "/",
        ))
    })
}

/// The callback's code exchanged at the token endpoint, and the token it brings verified
/// (with a vidforge scope); else the page saying why not.
async fn verified_code(
    oauth: &OAuth,
    q: CallbackQuery,
    flow: &Flow,
) -> Result<Verified, Box<Response>> {
    let refused =
        |status, title: &str, text: &str| Box::new(failure(status, title, text, &flow.next));
    if let Some(error) = q.error {
        let error: String = error
            .chars()
            .filter(|c| c.is_ascii_graphic())
            .take(64)
            .collect();
        tracing::info!(%error, "the authorization server did not sign the browser in");
        return Err(refused(
            StatusCode::UNAUTHORIZED,
            "Not signed in",
            &format!("The authorization server did not sign you in ({error})."),
        ));
    }
    let Some(code) = q.code.filter(|c| !c.is_empty()) else {
        return Err(refused(
            StatusCode::BAD_REQUEST,
            "Sign-in not recognised",
            "The authorization server sent no code. Start again.",
        ));
    };
    let verified = match oauth.exchange_code(&code, &flow.verifier).await {
        Ok(v) => v,
        Err(e @ BrowserError::Unavailable(_)) => {
            tracing::warn!(error = %e, "OAuth sign-in: the token endpoint is unavailable");
            return Err(refused(
                StatusCode::BAD_GATEWAY,
                "Sign-in unavailable",
                "The authorization server cannot be reached just now; try again shortly.",
            ));
        }
        Err(e) => {
            tracing::info!(error = %e, "OAuth sign-in refused");
            return Err(refused(
                StatusCode::UNAUTHORIZED,
                "Not signed in",
                &format!("{e}."),
            ));
        }
    };
    if !verified.scopes.allow(Need::Read) {
        tracing::info!(principal = %verified.principal, "OAuth sign-in refused: no vidforge scope");
        return Err(refused(
            StatusCode::UNAUTHORIZED,
            "Not signed in",
            "The authorization server granted no access to vidforge.",
        ));
    }
    Ok(verified)
}
