//! Browser sessions and CSRF tokens, both derived from the bearer-token table so every node of
//! a cluster (same tokens, no shared session store) accepts them, and revoking a token ends
//! its sessions.
//!
//! - **Session cookie** [`SESSION_COOKIE`]: `<expires_ms>.<principal hex>.<mac hex>`, where
//!   `mac = HMAC-SHA256(key = the bearer token the user signed in with,
//!   "vidforge-session\0" principal "\0" expires_ms)`. It names no token; verifying it tries
//!   the tokens of the named principal in constant time. Sent `HttpOnly; SameSite=Strict;
//!   Path=/` (and `Secure` when the public base URL is `https://`).
//! - **CSRF token**: `HMAC-SHA256(key, "vidforge-csrf\0" session)`, put in every form the pages
//!   serve and checked on every POST: a forged request from another site cannot read it. In
//!   the anonymous mode (no tokens, loopback only) the key is a per-process random secret and
//!   the "session" is the anonymous principal.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::{HeaderMap, header};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::args::hex;
use crate::auth::{Auth, Principal};
use crate::config::ANONYMOUS_PRINCIPAL;

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "vidforge_session";
/// How long a sign-in lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);

type HmacSha256 = Hmac<Sha256>;

/// Signs and checks sessions and CSRF tokens for one deployment (cheap to clone).
#[derive(Clone)]
pub struct Sessions {
    auth: Auth,
    /// Key of the anonymous mode's CSRF tokens.
    anonymous_key: [u8; 32],
    secure: bool,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("secure", &self.secure)
            .finish()
    }
}

/// A signed-in browser: who, and the cookie value the CSRF token is bound to.
#[derive(Clone, Debug)]
pub struct Session {
    pub principal: Principal,
    /// The cookie value (`None` in the anonymous mode).
    pub cookie: Option<String>,
}

fn mac(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    // HMAC accepts keys of any length.
    let mut m = <HmacSha256 as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().to_vec()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Constant-time equality of two byte strings.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Sessions {
    /// `secure`: mark cookies `Secure` (the pages are served over TLS).
    pub fn new(auth: Auth, secure: bool) -> Sessions {
        let mut anonymous_key = [0u8; 32];
        // The anonymous mode's CSRF key must be unguessable: a fixed one would let any page
        // forge forms. The same source as ids (the OS, with a fallback that never fails).
        crate::ids::fill_random(&mut anonymous_key);
        Sessions {
            auth,
            anonymous_key,
            secure,
        }
    }

    /// The bearer-token table.
    pub fn auth(&self) -> &Auth {
        &self.auth
    }

    /// True when users sign in with a token (tokens are configured).
    pub fn sign_in_required(&self) -> bool {
        self.auth.required()
    }

    /// Signs a session for the user of `token`; `None` for an unknown token. Returns the
    /// principal and the `Set-Cookie` value.
    pub fn sign_in(&self, token: &str) -> Option<(Principal, String)> {
        let principal = self.auth.principal_for_token(token.trim().as_bytes())?;
        let expires = now_ms() + SESSION_TTL.as_millis() as u64;
        let value = session_value(token.trim().as_bytes(), principal.as_str(), expires);
        Some((principal, self.cookie_header(&value, SESSION_TTL.as_secs())))
    }

    /// The `Set-Cookie` value that ends the session.
    pub fn sign_out_cookie(&self) -> String {
        self.cookie_header("", 0)
    }

    fn cookie_header(&self, value: &str, max_age_s: u64) -> String {
        let secure = if self.secure { "; Secure" } else { "" };
        format!(
            "{SESSION_COOKIE}={value}; Path=/; Max-Age={max_age_s}; HttpOnly; SameSite=Strict{secure}"
        )
    }

    /// The session of a request: the anonymous principal when no tokens are configured,
    /// otherwise a valid, unexpired session cookie.
    pub fn session(&self, headers: &HeaderMap) -> Option<Session> {
        if !self.auth.required() {
            return Some(Session {
                principal: Principal(ANONYMOUS_PRINCIPAL.to_string()),
                cookie: None,
            });
        }
        let value = cookie(headers, SESSION_COOKIE)?;
        let principal = self.verify(&value)?;
        Some(Session {
            principal,
            cookie: Some(value),
        })
    }

    fn verify(&self, value: &str) -> Option<Principal> {
        let mut parts = value.split('.');
        let (expires, who, tag) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let expires: u64 = expires.parse().ok()?;
        if expires <= now_ms() {
            return None;
        }
        let principal = String::from_utf8(unhex(who)?).ok()?;
        let tag = unhex(tag)?;
        let mut ok = false;
        for key in self.auth.tokens_of(&principal) {
            let expected = session_tag(key, &principal, expires);
            ok |= constant_time_eq(&expected, &tag);
        }
        ok.then_some(Principal(principal))
    }

    /// The CSRF token of a session, for the pages' forms.
    pub fn csrf_token(&self, session: &Session) -> String {
        hex(&self.csrf_mac(session, &self.keys(session)[0]))
    }

    /// True when `token` is the CSRF token of `session`.
    pub fn csrf_ok(&self, session: &Session, token: Option<&str>) -> bool {
        let Some(given) = token.and_then(unhex) else {
            return false;
        };
        let mut ok = false;
        for key in self.keys(session) {
            ok |= constant_time_eq(&self.csrf_mac(session, &key), &given);
        }
        ok
    }

    fn keys(&self, session: &Session) -> Vec<Vec<u8>> {
        match &session.cookie {
            None => vec![self.anonymous_key.to_vec()],
            Some(_) => {
                let keys: Vec<Vec<u8>> = self
                    .auth
                    .tokens_of(session.principal.as_str())
                    .map(<[u8]>::to_vec)
                    .collect();
                if keys.is_empty() {
                    vec![self.anonymous_key.to_vec()]
                } else {
                    keys
                }
            }
        }
    }

    fn csrf_mac(&self, session: &Session, key: &[u8]) -> Vec<u8> {
        let bound = session
            .cookie
            .as_deref()
            .unwrap_or(session.principal.as_str());
        mac(key, &[b"vidforge-csrf\0", bound.as_bytes()])
    }
}

fn session_tag(key: &[u8], principal: &str, expires: u64) -> Vec<u8> {
    let expires = expires.to_string();
    mac(
        key,
        &[
            b"vidforge-session\0",
            principal.as_bytes(),
            b"\0",
            expires.as_bytes(),
        ],
    )
}

fn session_value(token: &[u8], principal: &str, expires: u64) -> String {
    let tag = session_tag(token, principal, expires);
    format!("{expires}.{}.{}", hex(principal.as_bytes()), hex(&tag))
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use axum::http::HeaderValue;

    fn sessions() -> Sessions {
        let mut c = Config::default();
        c.tokens.insert("alice-token-1".into(), "alice".into());
        c.tokens.insert("bob-token-22".into(), "bob".into());
        Sessions::new(Auth::from_config(&c), false)
    }

    fn with_cookie(set_cookie: &str) -> HeaderMap {
        let pair = set_cookie.split(';').next().unwrap();
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, HeaderValue::from_str(pair).unwrap());
        h
    }

    #[test]
    fn sign_in_verify_and_csrf() {
        let s = sessions();
        assert!(s.sign_in("nope").is_none());
        let (p, set) = s.sign_in("alice-token-1").unwrap();
        assert_eq!(p.as_str(), "alice");
        assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict"));
        assert!(!set.contains("alice-token-1"));
        let session = s.session(&with_cookie(&set)).unwrap();
        assert_eq!(session.principal.as_str(), "alice");
        let csrf = s.csrf_token(&session);
        assert!(s.csrf_ok(&session, Some(&csrf)));
        assert!(!s.csrf_ok(&session, None));
        assert!(!s.csrf_ok(&session, Some("00")));
        // Bob's token does not validate for Alice's session.
        let (_, bob) = s.sign_in("bob-token-22").unwrap();
        let bob_session = s.session(&with_cookie(&bob)).unwrap();
        assert!(!s.csrf_ok(&bob_session, Some(&csrf)));
        // A tampered principal fails.
        let value = set.split(';').next().unwrap();
        let forged = value.replace(&hex(b"alice"), &hex(b"bob"));
        assert!(s.session(&with_cookie(&forged)).is_none());
        assert!(s.session(&HeaderMap::new()).is_none());
    }

    #[test]
    fn anonymous_mode_needs_no_sign_in() {
        let s = Sessions::new(Auth::from_config(&Config::default()), true);
        let session = s.session(&HeaderMap::new()).unwrap();
        assert_eq!(session.principal.as_str(), ANONYMOUS_PRINCIPAL);
        let csrf = s.csrf_token(&session);
        assert!(s.csrf_ok(&session, Some(&csrf)));
        assert!(s.sign_out_cookie().contains("Secure"));
    }
}
