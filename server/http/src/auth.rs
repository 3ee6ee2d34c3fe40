//! Bearer-token authentication as an axum middleware.
//!
//! A bearer token is a static one (the `tokens` table) or, with `oauth_issuers` configured,
//! an OAuth access token ([`crate::oauth`]). With either configured, every request needs
//! `Authorization: Bearer <token>`; a missing or refused token gets `401` with a
//! `WWW-Authenticate: Bearer` challenge (naming the protected resource metadata and the scope
//! under OAuth), and a token without the scope the request needs ([`crate::scope`]) gets `403`
//! `insufficient_scope`. Without either every request is the anonymous principal
//! ([`vidforge_core::config::ANONYMOUS_PRINCIPAL`]; the server then only binds loopback). The
//! principal is put in the request extensions as [`Principal`] and what its credential may do
//! as [`Scopes`], so handlers read them with `Extension<…>` and the MCP layer from
//! `http::request::Parts`.
//!
//! Put it on any router:
//! `router.layer(axum::middleware::from_fn_with_state(auth, vidforge_http::auth::require_auth))`
//! (`auth_or_session::require_auth_or_session` also takes a browser session on `GET`/`HEAD`).

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::auth_limit::{AuthFailureLimiter, Verdict};
use crate::envelope::Envelope;
use crate::oauth::{OAuth, Rejection, metadata};
use crate::scope::{self, Need, Scopes};
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

/// An authenticated caller and what its credential may do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    pub principal: Principal,
    pub scopes: Scopes,
    /// An OAuth access token whose signature verified: it cannot have been guessed, so it is
    /// never judged against the peer's failure budget (static tokens and sessions: `false`).
    pub signed: bool,
}

/// Why authentication failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("missing bearer token")]
    Missing,
    #[error("invalid bearer token")]
    Invalid,
    /// An OAuth access token that did not validate.
    #[error("invalid access token: {0}")]
    Refused(Rejection),
}

/// Token → principal table, the trusted OAuth issuers and the per-peer failure budget (cheap
/// to clone).
#[derive(Clone)]
pub struct Auth {
    tokens: Arc<Vec<(Vec<u8>, String)>>,
    admins: Arc<Vec<String>>,
    oauth: Option<Arc<OAuth>>,
    failures: Arc<AuthFailureLimiter>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print tokens.
        f.debug_struct("Auth")
            .field("tokens", &self.tokens.len())
            .field("oauth", &self.oauth)
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
            admins: Arc::new(config.admins.clone()),
            oauth: OAuth::from_config(config),
            failures: Arc::new(AuthFailureLimiter::new(
                config.auth_failure_burst,
                config.auth_failure_interval,
            )),
        }
    }

    /// Judges a token's outcome from `peer` against the peer's failure budget
    /// ([`crate::auth_limit`]): a request without a credential is not judged, and neither is an
    /// OAuth access token whose signature verified, valid or not (expired, for another
    /// resource, ...): nobody guesses a signature, so it is no guess, and a user behind the same
    /// address as a guesser is never slowed by one.
    pub fn judge(&self, peer: Option<IpAddr>, outcome: &Result<Grant, AuthError>) -> Verdict {
        match outcome {
            Ok(g) if g.signed => Verdict::Proceed,
            Err(AuthError::Refused(why)) if why.signature_verified() => Verdict::Proceed,
            Ok(g) if self.required() => self.failures.judge(peer, Some(g.principal.as_str())),
            Err(AuthError::Invalid | AuthError::Refused(_)) => self.failures.judge(peer, None),
            _ => Verdict::Proceed,
        }
    }

    /// True when requests must carry a bearer token.
    pub fn required(&self) -> bool {
        !self.tokens.is_empty() || self.oauth.is_some()
    }

    /// True when static bearer tokens are configured.
    pub fn has_static_tokens(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// The trusted OAuth issuers and this server's resource, when configured.
    pub fn oauth(&self) -> Option<&Arc<OAuth>> {
        self.oauth.as_ref()
    }

    /// What a static token's (or the anonymous) principal may do.
    fn static_grant(&self, principal: String) -> Grant {
        let admin = self.admins.contains(&principal);
        Grant {
            principal: Principal(principal),
            scopes: Scopes::static_token(admin),
            signed: false,
        }
    }

    /// The caller of these request headers: a static token first, then an OAuth access
    /// token from a trusted issuer.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Grant, AuthError> {
        if !self.required() {
            return Ok(self.static_grant(ANONYMOUS_PRINCIPAL.to_string()));
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
        let token = token.trim();
        if let Some(p) = self.principal_for_token(token.as_bytes()) {
            return Ok(self.static_grant(p.0));
        }
        let Some(oauth) = &self.oauth else {
            return Err(AuthError::Invalid);
        };
        match oauth.validate(token).await {
            Ok(v) => Ok(Grant {
                principal: Principal(v.principal),
                scopes: v.scopes,
                signed: true,
            }),
            Err(why) => {
                match why {
                    Rejection::KeysUnavailable => {
                        tracing::warn!(error = %why, "OAuth token refused: the issuer's keys cannot be fetched")
                    }
                    Rejection::UnknownKey => {
                        tracing::info!(error = %why, "OAuth token refused: its kid is not among the issuer's keys")
                    }
                    _ => tracing::debug!(error = %why, "OAuth token refused"),
                }
                Err(AuthError::Refused(why))
            }
        }
    }

    /// The `401` answer for `err`: a challenge naming the protected resource metadata and the
    /// scope under OAuth (RFC 9728 §5.1, RFC 6750 §3).
    pub fn unauthorized(&self, err: AuthError) -> Response {
        let description = err.to_string();
        let error = match err {
            AuthError::Missing => None,
            AuthError::Invalid | AuthError::Refused(_) => {
                Some(("invalid_token", description.as_str()))
            }
        };
        let body = serde_json::json!({
            "error": "unauthorized",
            "message": format!("{err}: send Authorization: Bearer <token>"),
        });
        let mut resp = (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
        resp.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            metadata::challenge(self.oauth.as_deref(), error, scope::RENDER),
        );
        resp
    }

    /// `403` `insufficient_scope`: the credential is valid but may not do this; the challenge
    /// names the scope that would allow it, so a client can ask for it (step-up).
    pub fn insufficient_scope(&self, need: Need) -> Response {
        let message = format!(
            "This credential lacks the scope this request needs ({}).",
            need.scopes()
        );
        let env = Envelope::new(ErrorCode::InsufficientScope, &message)
            .detail("required_scope", need.scopes().into());
        let mut resp = crate::envelope::error_response(StatusCode::FORBIDDEN, &env);
        resp.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            metadata::challenge(
                self.oauth.as_deref(),
                Some(("insufficient_scope", &message)),
                need.scopes(),
            ),
        );
        resp
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

    /// The tokens of `principal` (the keys of its browser sessions, `session/`).
    pub fn tokens_of<'a>(&'a self, principal: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.tokens
            .iter()
            .filter(move |(_, p)| p == principal)
            .map(|(t, _)| t.as_slice())
    }
}

/// `429` `rate_limited`: too many wrong tokens from this peer; `Retry-After` says when.
pub fn rate_limited(wait: std::time::Duration) -> Response {
    let env = Envelope::new(
        ErrorCode::RateLimited,
        "Too many failed authentication attempts from this address; wait and try again.",
    )
    .retry_after(Some(wait.as_millis().max(1) as u64))
    .for_stranger();
    crate::envelope::error_response(StatusCode::TOO_MANY_REQUESTS, &env)
}

/// Middleware: authenticates the bearer token, checks the scope the route needs
/// ([`scope::for_route`]), inserts [`Principal`] and [`Scopes`], or answers 401 / 403 (429
/// past the peer's failure budget).
pub async fn require_auth(State(auth): State<Auth>, req: Request, next: Next) -> Response {
    let outcome = auth.authenticate(req.headers()).await;
    admit(&auth, outcome, req, next).await
}

pub(crate) async fn admit_grant(
    auth: &Auth,
    grant: Grant,
    mut req: Request,
    next: Next,
) -> Response {
    let need = scope::for_route(req.method(), req.uri().path());
    if !grant.scopes.allow(need) {
        return auth.insufficient_scope(need);
    }
    req.extensions_mut().insert(grant.principal);
    req.extensions_mut().insert(grant.scopes);
    next.run(req).await
}

pub(crate) async fn admit(
    auth: &Auth,
    outcome: Result<Grant, AuthError>,
    req: Request,
    next: Next,
) -> Response {
    let peer = crate::peer::client_ip(req.extensions());
    if let Verdict::Limited(wait) = auth.judge(peer, &outcome) {
        tracing::warn!(?peer, "authentication failures over the peer's budget");
        return rate_limited(wait);
    }
    match outcome {
        Ok(grant) => admit_grant(auth, grant, req, next).await,
        Err(e) => {
            tracing::debug!(error = %e, path = %req.uri().path(), "rejected unauthenticated request");
            auth.unauthorized(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            header::HeaderValue::from_str(v).unwrap(),
        );
        h
    }

    #[tokio::test]
    async fn tokens_map_to_principals() {
        let mut c = Config::default();
        c.tokens.insert("alice-token-1".into(), "alice".into());
        c.tokens.insert("bob-token-22".into(), "bob".into());
        c.admins = vec!["bob".into()];
        let a = Auth::from_config(&c);
        let alice = a
            .authenticate(&headers("Bearer alice-token-1"))
            .await
            .unwrap();
        assert_eq!(alice.principal.0, "alice");
        assert_eq!(alice.scopes, Scopes::static_token(false));
        let bob = a
            .authenticate(&headers("bearer bob-token-22"))
            .await
            .unwrap();
        assert_eq!(bob.principal.0, "bob");
        assert!(bob.scopes.admin);
        assert_eq!(
            a.authenticate(&headers("Bearer nope")).await,
            Err(AuthError::Invalid)
        );
        assert_eq!(
            a.authenticate(&headers("Basic xyz")).await,
            Err(AuthError::Invalid)
        );
        assert_eq!(
            a.authenticate(&HeaderMap::new()).await,
            Err(AuthError::Missing)
        );
        let anon = Auth::from_config(&Config::default());
        assert_eq!(
            anon.authenticate(&HeaderMap::new())
                .await
                .unwrap()
                .principal
                .0,
            "local"
        );
        assert!(!format!("{a:?}").contains("alice-token"));
    }
}
