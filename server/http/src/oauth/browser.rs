//! The pages' sign-in through the first trusted issuer: the authorization-code flow with PKCE
//! (S256) for the client `oauth_browser_client_id`, its redirect URI
//! `{public base url}/oauth/callback`, asking for `vidforge:render vidforge:read` for this
//! server's resource (RFC 8707). The handlers are in `web/oauth_flow.rs`; this is the OAuth
//! side: the authorization URL, and the code exchanged for an access token that is then
//! validated exactly like a bearer token on the API ([`OAuth::validate`]) and dropped.

use base64::Engine;
use reqwest::Url;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::keys::FETCH_TIMEOUT;
use super::{OAuth, Rejection, Verified};
use crate::scope;

/// The path of the redirect URI.
pub const CALLBACK_PATH: &str = "/oauth/callback";
/// Largest token-endpoint answer read.
const MAX_TOKEN_RESPONSE_BYTES: usize = 64 * 1024;

/// The scopes the pages ask for: the approval form needs `render`, the pages read.
pub fn requested_scope() -> String {
    format!("openid {} {}", scope::RENDER, scope::READ)
}

/// The browser sign-in client (`oauth_browser_client_id` / `_secret`).
pub struct BrowserClient {
    pub(super) id: String,
    pub(super) secret: Option<String>,
    pub(super) redirect_uri: String,
}

impl std::fmt::Debug for BrowserClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secret.
        f.debug_struct("BrowserClient")
            .field("id", &self.id)
            .field("redirect_uri", &self.redirect_uri)
            .finish_non_exhaustive()
    }
}

/// Why the browser sign-in failed.
#[derive(Debug, thiserror::Error)]
pub enum BrowserError {
    /// The authorization server cannot be reached or answers badly (a `502`).
    #[error("the authorization server is unavailable: {0}")]
    Unavailable(String),
    /// The token endpoint refused the code (a `401`).
    #[error("the authorization server refused the sign-in: {0}")]
    Refused(String),
    /// The access token it issued does not validate here (a `401`).
    #[error("the access token does not validate: {0}")]
    Token(Rejection),
}

/// A fresh PKCE code verifier (RFC 7636 §4.1: 32 random bytes, base64url: 43 characters).
pub fn new_verifier() -> String {
    random_b64(32)
}

/// `n` random bytes, base64url without padding (also the flow's `state`).
pub fn random_b64(n: usize) -> String {
    let mut buf = vec![0u8; n];
    vidforge_core::ids::fill_random(&mut buf);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(buf)
}

/// The S256 code challenge of `verifier`.
pub fn challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: Option<String>,
    token_type: Option<String>,
    error: Option<String>,
}

impl OAuth {
    /// The browser sign-in client, when configured.
    pub fn browser(&self) -> Option<&BrowserClient> {
        self.browser.as_ref()
    }

    /// The issuer the pages sign in at: the first trusted one.
    pub fn sign_in_issuer(&self) -> &str {
        self.issuers[0].issuer()
    }

    /// The authorization request's URL (`response_type=code`, PKCE S256, `state`,
    /// `resource`); `None` without a browser client.
    pub async fn authorization_url(
        &self,
        state: &str,
        verifier: &str,
    ) -> Result<Option<Url>, BrowserError> {
        let Some(client) = &self.browser else {
            return Ok(None);
        };
        let endpoints = self.issuers[0]
            .endpoints()
            .await
            .map_err(|e| BrowserError::Unavailable(e.to_string()))?;
        let mut url = endpoints.authorization_endpoint.ok_or_else(|| {
            BrowserError::Unavailable("its metadata names no authorization_endpoint".into())
        })?;
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &client.id)
            .append_pair("redirect_uri", &client.redirect_uri)
            .append_pair("scope", &requested_scope())
            .append_pair("resource", &self.resource)
            .append_pair("code_challenge", &challenge(verifier))
            .append_pair("code_challenge_method", "S256")
            .append_pair("state", state);
        Ok(Some(url))
    }

    /// Exchanges an authorization code (with its PKCE verifier) at the token endpoint, within
    /// [`FETCH_TIMEOUT`], and validates the access token like any bearer token. The token is
    /// dropped here: only who it names and its scopes leave.
    pub async fn exchange_code(
        &self,
        code: &str,
        verifier: &str,
    ) -> Result<Verified, BrowserError> {
        let Some(client) = &self.browser else {
            return Err(BrowserError::Refused(
                "no browser client is configured".into(),
            ));
        };
        let endpoints = self.issuers[0]
            .endpoints()
            .await
            .map_err(|e| BrowserError::Unavailable(e.to_string()))?;
        let url = endpoints.token_endpoint.ok_or_else(|| {
            BrowserError::Unavailable("its metadata names no token_endpoint".into())
        })?;
        let mut form = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", client.redirect_uri.as_str()),
            ("code_verifier", verifier),
            ("resource", self.resource.as_str()),
        ];
        let mut request = self.client.post(url.clone());
        match &client.secret {
            // RFC 6749 §2.3.1: client_secret_basic, both parts form-urlencoded first.
            Some(secret) => {
                request = request.basic_auth(form_encode(&client.id), Some(form_encode(secret)));
            }
            None => form.push(("client_id", client.id.as_str())),
        }
        let exchange = async {
            let response = request
                .header(reqwest::header::ACCEPT, "application/json")
                .form(&form)
                .send()
                .await
                .map_err(|e| BrowserError::Unavailable(format!("{url}: {e}")))?;
            let status = response.status();
            let bytes = super::capped::body(response, MAX_TOKEN_RESPONSE_BYTES)
                .await
                .map_err(|e| BrowserError::Unavailable(format!("{url}: {e}")))?;
            let body: Option<TokenResponse> = serde_json::from_slice(&bytes).ok();
            if status.is_server_error() {
                return Err(BrowserError::Unavailable(format!("{url}: {status}")));
            }
            let body = body.ok_or_else(|| {
                BrowserError::Unavailable(format!("{url}: {status}, not a token response"))
            })?;
            if !status.is_success() || body.error.is_some() {
                return Err(BrowserError::Refused(
                    body.error.unwrap_or_else(|| status.to_string()),
                ));
            }
            if !body
                .token_type
                .as_deref()
                .is_some_and(|t| t.eq_ignore_ascii_case("bearer"))
            {
                return Err(BrowserError::Refused("not a bearer token".into()));
            }
            body.access_token
                .ok_or_else(|| BrowserError::Refused("no access_token".into()))
        };
        let token = tokio::time::timeout(FETCH_TIMEOUT, exchange)
            .await
            .map_err(|_| {
                BrowserError::Unavailable(format!("{url}: no answer within {FETCH_TIMEOUT:?}"))
            })??;
        self.validate(&token).await.map_err(BrowserError::Token)
    }
}

/// `application/x-www-form-urlencoded` encoding of one value (RFC 6749 Appendix B).
fn form_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                (b as char).to_string()
            }
            b' ' => "+".to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_s256_challenges_are_base64url_sha256() {
        // Python: base64.urlsafe_b64encode(hashlib.sha256(v.encode()).digest()).rstrip(b"=")
        assert_eq!(
            challenge("dBjftJeZ4CVP-mjXTr-sBQvvQfTtB5xVhjEZvnhbQ6Pb"),
            "27Y_48I1NsuoJaY_Q6gpkaXlLLkmIzoYxAYeeLP4CJA"
        );
        let v = new_verifier();
        assert_eq!(v.len(), 43);
        assert_ne!(v, new_verifier());
        assert_eq!(form_encode("a b/c:d"), "a+b%2Fc%3Ad");
    }
}
