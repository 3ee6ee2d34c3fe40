//! vidforge as an OAuth 2.1 resource server (the MCP 2026-07-28 authorization section): its
//! protected resource metadata (RFC 9728, [`metadata`]) and the validation of JWT access
//! tokens (RFC 9068) from the trusted issuers (`oauth_issuers`).
//!
//! A token is accepted only when all of this holds:
//! - its header names an allowed asymmetric algorithm ([`ALLOWED_ALGORITHMS`]: never `none`,
//!   never HMAC) and `typ` `at+jwt`, and a `kid` the issuer publishes (and whose JWK, when it
//!   pins an `alg`, pins that one);
//! - its `iss` is exactly one of the trusted issuers, and its signature verifies with that
//!   issuer's key ([`keys`]);
//! - its `aud` contains this server's resource URI (RFC 8707: a token for another service is
//!   refused), and `exp` / `nbf` hold with at most [`LEEWAY`] of clock skew;
//! - it has a `sub`. The principal is `ISSUER#SUB`, so two issuers' subjects never collide.
//!
//! The token itself is never stored, logged or sent anywhere.

pub mod browser;
pub mod capped;
pub mod keys;
pub mod metadata;

use std::sync::Arc;
use std::time::Duration;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};
use serde::Deserialize;

use crate::scope::Scopes;
use keys::IssuerKeys;
use vidforge_core::config::Config;

/// The signature algorithms accepted: asymmetric only.
pub const ALLOWED_ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];
/// Clock skew tolerated on `exp` and `nbf`.
pub const LEEWAY: Duration = Duration::from_secs(60);

/// Why a token was refused (the `error_description` of the `401` challenge; the token's
/// contents are never echoed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    #[error("the token is not a well-formed JWT")]
    Malformed,
    #[error("the token's type is not at+jwt")]
    NotAnAccessToken,
    #[error("the token's signature algorithm is not accepted")]
    Algorithm,
    #[error("the token's issuer is not trusted")]
    Issuer,
    #[error("the token's signing key is unknown")]
    UnknownKey,
    #[error("the issuer's keys cannot be fetched now")]
    KeysUnavailable,
    #[error("the token's signature does not verify")]
    Signature,
    #[error("the token was issued for another resource")]
    Audience,
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet")]
    NotYetValid,
    #[error("the token lacks a required claim")]
    MissingClaim,
    #[error("the token is valid for longer than this server accepts")]
    Lifetime,
    #[error(
        "the token's subject is not acceptable (empty, over 255 characters, or with control or direction characters)"
    )]
    Subject,
}

impl Rejection {
    /// Whether the token's signature verified before it was refused (its claims did not pass:
    /// expired, not yet valid, another audience, an unacceptable subject: jsonwebtoken checks
    /// the claims only once the signature verified). Such
    /// a token was issued by a trusted issuer, so it was not guessed.
    pub fn signature_verified(self) -> bool {
        matches!(
            self,
            Rejection::Expired
                | Rejection::NotYetValid
                | Rejection::Audience
                | Rejection::Subject
                | Rejection::Lifetime
        )
    }
}

/// The longest subject accepted (OpenID Connect Core §2 bounds `sub` to 255 ASCII characters).
pub const MAX_SUBJECT_CHARS: usize = 255;

/// Whether a token's `sub` may become (part of) a principal: not empty, at most
/// [`MAX_SUBJECT_CHARS`], and no control characters (a newline would forge a log line, ESC or
/// NUL reach the operator's terminal) nor bidirectional overrides and isolates (which make
/// one principal read as another).
pub fn acceptable_subject(sub: &str) -> bool {
    !sub.is_empty()
        && sub.chars().count() <= MAX_SUBJECT_CHARS
        && !sub.chars().any(vidforge_core::args::is_unsafe_char)
}

/// The claims vidforge reads (the rest are checked by [`Validation`] or ignored).
#[derive(Deserialize)]
struct Claims {
    sub: String,
    /// Seconds since the epoch (required by the validation).
    exp: u64,
    #[serde(default)]
    scope: Option<String>,
    /// Some issuers send scopes as an array.
    #[serde(default)]
    scp: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct Unverified {
    iss: Option<String>,
}

/// What a valid token says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    pub principal: String,
    pub scopes: Scopes,
}

/// The trusted issuers and this server's resource URI.
pub struct OAuth {
    resource: String,
    metadata_url: String,
    issuers: Vec<IssuerKeys>,
    /// Talks to the issuers (metadata, keys, the browser sign-in's token endpoint).
    client: reqwest::Client,
    /// The pages' sign-in client (`oauth_browser_client_id`).
    browser: Option<browser::BrowserClient>,
    /// `oauth_max_token_lifetime`.
    max_token_lifetime: Duration,
}

impl std::fmt::Debug for OAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuth")
            .field("resource", &self.resource)
            .field("issuers", &self.issuers().collect::<Vec<_>>())
            .field("browser", &self.browser)
            .finish()
    }
}

impl OAuth {
    /// `None` when no issuer is configured (static tokens only, or none).
    pub fn from_config(config: &Config) -> Option<Arc<OAuth>> {
        if config.oauth_issuers.is_empty() {
            return None;
        }
        let client = reqwest::Client::builder()
            .connect_timeout(keys::FETCH_TIMEOUT)
            .timeout(keys::FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("vidforge/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("the OAuth HTTP client builds");
        let base = config.base_url();
        Some(Arc::new(OAuth {
            resource: resource_uri(&base),
            metadata_url: metadata::document_url(&base),
            issuers: config
                .oauth_issuers
                .iter()
                .map(|i| IssuerKeys::new(i.clone(), client.clone()))
                .collect(),
            client,
            max_token_lifetime: config.oauth_max_token_lifetime,
            browser: config
                .oauth_browser_client_id
                .as_ref()
                .map(|id| browser::BrowserClient {
                    id: id.clone(),
                    secret: config.oauth_browser_client_secret.clone(),
                    redirect_uri: format!(
                        "{}{}",
                        base.trim_end_matches('/'),
                        browser::CALLBACK_PATH
                    ),
                }),
        }))
    }

    /// The canonical URI of the MCP endpoint: the `aud` tokens must carry.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// Where this server's protected resource metadata is served.
    pub fn metadata_url(&self) -> &str {
        &self.metadata_url
    }

    /// The trusted issuers, as configured.
    pub fn issuers(&self) -> impl Iterator<Item = &str> {
        self.issuers.iter().map(IssuerKeys::issuer)
    }

    /// Fetches every issuer's keys once, in the background (start-up): the first request then
    /// finds them cached. Failures are logged; requests fetch again when they need to.
    pub fn prefetch(self: &Arc<Self>) {
        let this = self.clone();
        tokio::spawn(async move {
            for issuer in &this.issuers {
                let _ = issuer.refresh().await;
            }
        });
    }

    /// Validates a bearer token (see the module docs).
    pub async fn validate(&self, token: &str) -> Result<Verified, Rejection> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| Rejection::Malformed)?;
        if !ALLOWED_ALGORITHMS.contains(&header.alg) {
            return Err(Rejection::Algorithm);
        }
        let typ = header.typ.as_deref().unwrap_or_default();
        if !typ.eq_ignore_ascii_case("at+jwt") && !typ.eq_ignore_ascii_case("application/at+jwt") {
            return Err(Rejection::NotAnAccessToken);
        }
        let kid = header.kid.as_deref().ok_or(Rejection::UnknownKey)?;
        // The issuer picks the key set; the signature and `iss` are verified against it below.
        let iss = unverified_issuer(token)?;
        let issuer = self
            .issuers
            .iter()
            .find(|i| i.issuer() == iss)
            .ok_or(Rejection::Issuer)?;
        let key = match issuer.key(kid).await {
            Ok(Some(key)) => key,
            Ok(None) => return Err(Rejection::UnknownKey),
            Err(_) => return Err(Rejection::KeysUnavailable),
        };
        if key.alg.is_some_and(|pinned| pinned != header.alg) {
            return Err(Rejection::Algorithm);
        }
        let mut validation = Validation::new(header.alg);
        validation.algorithms = vec![header.alg];
        validation.set_issuer(&[issuer.issuer()]);
        validation.set_audience(&[&self.resource]);
        validation.leeway = LEEWAY.as_secs();
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let data = jsonwebtoken::decode::<Claims>(token, &key.decoding, &validation)
            .map_err(|e| rejection(e.kind()))?;
        let claims = data.claims;
        if !acceptable_subject(&claims.sub) {
            return Err(Rejection::Subject);
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        if claims.exp.saturating_sub(now.as_secs()) > (self.max_token_lifetime + LEEWAY).as_secs() {
            return Err(Rejection::Lifetime);
        }
        let scopes = match (&claims.scope, &claims.scp) {
            (Some(s), _) => Scopes::parse(s.split(' ')),
            (None, Some(list)) => Scopes::parse(list.iter().map(String::as_str)),
            (None, None) => Scopes::default(),
        };
        Ok(Verified {
            principal: format!("{}#{}", issuer.issuer(), claims.sub),
            scopes,
        })
    }
}

/// The resource URI of a server whose public base URL is `base`: its MCP endpoint.
pub fn resource_uri(base: &str) -> String {
    format!("{}/mcp", base.trim_end_matches('/'))
}

/// The `iss` of a token before its signature is checked: only to choose whose keys check it.
fn unverified_issuer(token: &str) -> Result<String, Rejection> {
    let claims: Unverified =
        jsonwebtoken::dangerous::insecure_decode_claims(token).map_err(|_| Rejection::Malformed)?;
    claims.iss.ok_or(Rejection::MissingClaim)
}

fn rejection(kind: &ErrorKind) -> Rejection {
    match kind {
        ErrorKind::ExpiredSignature => Rejection::Expired,
        ErrorKind::ImmatureSignature => Rejection::NotYetValid,
        ErrorKind::InvalidAudience => Rejection::Audience,
        ErrorKind::InvalidIssuer => Rejection::Issuer,
        ErrorKind::InvalidSignature => Rejection::Signature,
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => Rejection::Algorithm,
        ErrorKind::MissingRequiredClaim(_) => Rejection::MissingClaim,
        _ => Rejection::Malformed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_that_could_forge_logs_or_principals_are_not_acceptable() {
        for ok in ["alice", "248289761001", "ü-sub|auth0", &"a".repeat(255)] {
            assert!(acceptable_subject(ok), "{ok:?}");
        }
        for bad in [
            "",
            "a\nb",
            "a\rb",
            "a\u{1b}[31m",
            "a\u{0}",
            "a\u{7f}",
            "a\u{85}",
            "a\u{202e}b",
            "a\u{2066}b",
            "a\u{200f}",
            &"a".repeat(256),
        ] {
            assert!(!acceptable_subject(bad), "{bad:?}");
        }
    }
}
