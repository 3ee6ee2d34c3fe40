//! Bearer-token authentication as an axum middleware.
//!
//! With tokens configured, every request needs `Authorization: Bearer <token>`; a missing or
//! unknown token gets `401` with `WWW-Authenticate: Bearer`. Without tokens every request is
//! the anonymous principal ([`crate::config::ANONYMOUS_PRINCIPAL`]; the server then only binds
//! loopback). The principal is put in the request extensions as [`Principal`], so handlers
//! read it with `Extension<Principal>` and the MCP layer from `http::request::Parts`
//! (`parts.extensions.get::<Principal>()`).
//!
//! Put it on any router:
//! `router.layer(axum::middleware::from_fn_with_state(auth, vidforge::auth::require_auth))`.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::config::{ANONYMOUS_PRINCIPAL, Config};

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

/// Token → principal table (cheap to clone).
#[derive(Clone)]
pub struct Auth {
    tokens: Arc<Vec<(Vec<u8>, String)>>,
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
        let token = token.trim().as_bytes();
        // Compare against every token without early exit so timing does not reveal matches.
        let mut found: Option<&str> = None;
        for (t, p) in self.tokens.iter() {
            if constant_time_eq(t, token) {
                found = Some(p);
            }
        }
        found
            .map(|p| Principal(p.to_string()))
            .ok_or(AuthError::Invalid)
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
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

/// Middleware: authenticates, inserts [`Principal`], or answers 401.
pub async fn require_auth(State(auth): State<Auth>, mut req: Request, next: Next) -> Response {
    match auth.authenticate(req.headers()) {
        Ok(p) => {
            req.extensions_mut().insert(p);
            next.run(req).await
        }
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
