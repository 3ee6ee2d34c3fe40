//! Bearer-token authentication as an axum middleware.
//!
//! With tokens configured, every request needs `Authorization: Bearer <token>`; a missing or
//! unknown token gets `401` with `WWW-Authenticate: Bearer`. Without tokens every request is
//! the anonymous principal ([`vidforge_core::config::ANONYMOUS_PRINCIPAL`]; the server then only binds
//! loopback). The principal is put in the request extensions as [`Principal`], so handlers
//! read it with `Extension<Principal>` and the MCP layer from `http::request::Parts`
//! (`parts.extensions.get::<Principal>()`).
//!
//! Put it on any router:
//! `router.layer(axum::middleware::from_fn_with_state(auth, vidforge_http::auth::require_auth))`
//! (`auth_or_session::require_auth_or_session` also takes a browser session on `GET`/`HEAD`).

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::auth_limit::{AuthFailureLimiter, Verdict};
use crate::envelope::Envelope;
use vidforge_core::catalog::ErrorCode;
use vidforge_core::config::{ANONYMOUS_PRINCIPAL, Config};

/// The authenticated caller.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Principal(pub String);

impl Principal {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Why authentication failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("missing bearer token")]
    Missing,
    #[error("invalid bearer token")]
    Invalid,
}

/// Token → principal table and the per-peer failure budget (cheap to clone).
#[derive(Clone)]
pub struct Auth {
    tokens: Arc<Vec<(Vec<u8>, String)>>,
    failures: Arc<AuthFailureLimiter>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print tokens.
        f.debug_struct("Auth")
            .field("tokens", &self.tokens.len())
            .finish()
    }
}

impl Auth {
    pub fn from_config(config: &Config) -> Auth {
        Auth {
            tokens: Arc::new(
                config
                    .tokens
                    .iter()
                    .map(|(t, p)| (t.as_bytes().to_vec(), p.clone()))
                    .collect(),
            ),
            failures: Arc::new(AuthFailureLimiter::new(
                config.auth_failure_burst,
                config.auth_failure_interval,
            )),
        }
    }

    /// Judges a token's outcome from `peer` against the peer's failure budget
    /// ([`crate::auth_limit`]): a request without a credential is not judged.
    pub fn judge(&self, peer: Option<IpAddr>, outcome: &Result<Principal, AuthError>) -> Verdict {
        match outcome {
            Ok(p) if self.required() => self.failures.judge(peer, Some(p.as_str())),
            Err(AuthError::Invalid) => self.failures.judge(peer, None),
            _ => Verdict::Proceed,
        }
    }

    /// True when requests must carry a bearer token.
    pub fn required(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// The principal for these request headers.
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, AuthError> {
        if !self.required() {
            return Ok(Principal(ANONYMOUS_PRINCIPAL.to_string()));
        }
        let value = headers
            .get(header::AUTHORIZATION)
            .ok_or(AuthError::Missing)?
            .to_str()
            .map_err(|_| AuthError::Invalid)?;
        let (scheme, token) = value.trim().split_once(' ').ok_or(AuthError::Invalid)?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(AuthError::Invalid);
        }
        self.principal_for_token(token.trim().as_bytes())
            .ok_or(AuthError::Invalid)
    }

    /// The principal of a bearer token, comparing against every token without early exit so
    /// timing does not reveal matches.
    pub fn principal_for_token(&self, token: &[u8]) -> Option<Principal> {
        let mut found: Option<&str> = None;
        for (t, p) in self.tokens.iter() {
            if bool::from(t.ct_eq(token)) {
                found = Some(p);
            }
        }
        found.map(|p| Principal(p.to_string()))
    }

    /// The tokens of `principal` (the keys of its browser sessions, `session.rs`).
    pub fn tokens_of<'a>(&'a self, principal: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.tokens
            .iter()
            .filter(move |(_, p)| p == principal)
            .map(|(t, _)| t.as_slice())
    }
}

/// The 401 answer: `WWW-Authenticate: Bearer` and a small JSON body.
pub fn unauthorized(err: AuthError) -> Response {
    let challenge = match err {
        AuthError::Missing => "Bearer realm=\"vidforge\"",
        AuthError::Invalid => "Bearer realm=\"vidforge\", error=\"invalid_token\"",
    };
    let body = serde_json::json!({
        "error": "unauthorized",
        "message": format!("{err}: send Authorization: Bearer <token>"),
    });
    let mut resp = (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
    resp.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(challenge),
    );
    resp
}

/// `429` `rate_limited`: too many wrong tokens from this peer; `Retry-After` says when.
pub fn rate_limited(wait: std::time::Duration) -> Response {
    let env = Envelope::new(
        ErrorCode::RateLimited,
        "Too many failed authentication attempts from this address; wait and try again.",
    )
    .retry_after(Some(wait.as_millis().max(1) as u64));
    crate::envelope::error_response(StatusCode::TOO_MANY_REQUESTS, &env)
}

/// Middleware: authenticates the bearer token, inserts [`Principal`], or answers 401 (429
/// past the peer's failure budget).
pub async fn require_auth(State(auth): State<Auth>, req: Request, next: Next) -> Response {
    let outcome = auth.authenticate(req.headers());
    admit(&auth, outcome, req, next).await
}

pub(crate) async fn admit_principal(p: Principal, mut req: Request, next: Next) -> Response {
    req.extensions_mut().insert(p);
    next.run(req).await
}

pub(crate) async fn admit(
    auth: &Auth,
    outcome: Result<Principal, AuthError>,
    req: Request,
    next: Next,
) -> Response {
    let peer = crate::peer::client_ip(req.extensions());
    if let Verdict::Limited(wait) = auth.judge(peer, &outcome) {
        tracing::warn!(?peer, "authentication failures over the peer's budget");
        return rate_limited(wait);
    }
    match outcome {
        Ok(p) => admit_principal(p, req, next).await,
        Err(e) => {
            tracing::debug!(error = %e, path = %req.uri().path(), "rejected unauthenticated request");
            unauthorized(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
        h
    }

    #[test]
    fn tokens_map_to_principals() {
        let mut c = Config::default();
        c.tokens.insert("alice-token-1".into(), "alice".into());
        c.tokens.insert("bob-token-22".into(), "bob".into());
        let a = Auth::from_config(&c);
        assert_eq!(
            a.authenticate(&headers("Bearer alice-token-1")).unwrap().0,
            "alice"
        );
        assert_eq!(
            a.authenticate(&headers("bearer bob-token-22")).unwrap().0,
            "bob"
        );
        assert_eq!(
            a.authenticate(&headers("Bearer nope")),
            Err(AuthError::Invalid)
        );
        assert_eq!(
            a.authenticate(&headers("Basic xyz")),
            Err(AuthError::Invalid)
        );
        assert_eq!(a.authenticate(&HeaderMap::new()), Err(AuthError::Missing));
        let anon = Auth::from_config(&Config::default());
        assert_eq!(anon.authenticate(&HeaderMap::new()).unwrap().0, "local");
        assert!(!format!("{a:?}").contains("alice-token"));
    }
}
