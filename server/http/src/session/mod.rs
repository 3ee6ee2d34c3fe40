//! Browser sessions and CSRF tokens, derived from the bearer-token table and a per-principal
//! **session epoch** kept in the task store, so every node of a cluster (same tokens, one
//! store) accepts a session, revoking a token ends its sessions, and signing out ends them
//! everywhere, for good.
//!
//! - **Session cookie** [`SESSION_COOKIE`]: `<issued_ms>.<seen_ms>.<principal hex>.<mac hex>`,
//!   where `mac = HMAC-SHA256(key = the bearer token the user signed in with,
//!   "vidforge-session\0v2\0" principal "\0" issued "\0" seen "\0" epoch)` and `epoch` is the
//!   principal's [`Store::session_epoch`], read from the store on every check (it is in no
//!   cookie). It names no token; verifying it tries the tokens of the named principal in
//!   constant time. Sent `HttpOnly; SameSite=Strict; Path=/` (and `Secure` when the public
//!   base URL is `https://`).
//! - **Sign-out** raises the principal's epoch ([`Store::bump_session_epoch`], durable before
//!   the answer): every cookie of that principal issued before stops verifying, on every node
//!   sharing the store, after restarts too (all of the principal's browsers are signed out).
//! - **Lifetime**: a cookie is refused once `session_idle_timeout` has passed since `seen`,
//!   or `session_max_age` since `issued`. A page answer re-issues the cookie with `seen` =
//!   now once a quarter of the idle timeout has passed since the last one ([`Session::renewal`]),
//!   so a person using the pages stays signed in until the absolute cap.
//! - **Store outage**: a check that cannot read the epoch fails closed (no session); signing
//!   in or out then answers `503`.
//! - **OAuth principals** (`ISSUER#SUB`, signed in through the authorization server,
//!   `web/oauth_flow.rs`) have no static token to key the MAC: their cookie is
//!   `<issued_ms>.<seen_ms>.<principal hex>.<scopes>.<mac hex>` with
//!   `mac = HMAC-SHA256(key = the server's session secret, "vidforge-session\0oauth-v1\0"
//!   principal "\0" issued "\0" seen "\0" epoch "\0" scopes)`, where `scopes` is the bit set of
//!   the access token's vidforge scopes ([`Scopes`]: 1 render, 2 read, 4 admin) and the secret
//!   is 32 random bytes made once in the store ([`Store::server_secret`] `"session"`: every
//!   node sharing the store has it, it survives restarts). Same epoch, lifetime and cookie
//!   flags as above; the issuer must still be trusted. The access token is in no cookie.
//! - **CSRF token**: `HMAC-SHA256(key, "vidforge-csrf\0" principal "\0" issued "\0" epoch)`,
//!   put in every form the pages serve and checked on every POST: a forged request from
//!   another site cannot read it; it outlives re-issued cookies of the same sign-in. In the
//!   anonymous mode (no tokens, loopback only) the key is a per-process random secret and it
//!   is bound to the anonymous principal.

mod cookies;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::http::HeaderMap;

pub use cookies::cookie;
use cookies::{Cookie, Signed, mac, scope_bits, scopes_of};

use crate::auth::{Auth, Principal};
use crate::oauth::Verified;
use crate::scope::Scopes;
use hex::encode as hex;
use subtle::ConstantTimeEq;
use vidforge_core::clock::SharedClock;
use vidforge_core::config::{ANONYMOUS_PRINCIPAL, Config};
use vidforge_core::store::{Store, StoreError};

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "vidforge_session";
/// A cookie is re-issued (sliding expiry) once this fraction of the idle timeout has passed
/// since it was issued or last re-issued: at most a few re-issues per idle period.
const RENEW_FRACTION: u64 = 4;

/// How long a browser session lasts ([`Config::session_idle_timeout`],
/// [`Config::session_max_age`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionLimits {
    /// Unused this long: over.
    pub idle_timeout: Duration,
    /// This long after sign-in: over, however much it is used.
    pub max_age: Duration,
}

impl SessionLimits {
    pub fn from_config(config: &Config) -> SessionLimits {
        SessionLimits {
            idle_timeout: config.session_idle_timeout,
            max_age: config.session_max_age,
        }
    }
}

/// Signs and checks sessions and CSRF tokens for one deployment (cheap to clone).
#[derive(Clone)]
pub struct Sessions {
    auth: Auth,
    /// Where the principals' session epochs live (shared by a cluster's nodes).
    store: Store,
    clock: SharedClock,
    limits: SessionLimits,
    /// Key of the anonymous mode's CSRF tokens.
    anonymous_key: [u8; 32],
    /// The server's session secret (OAuth sessions, the sign-in flow's cookie), read from
    /// the store once it is first needed.
    server_key: Arc<OnceLock<Vec<u8>>>,
    secure: bool,
}

/// The name of the session secret in the store.
const SERVER_KEY: &str = "session";

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("limits", &self.limits)
            .field("secure", &self.secure)
            .finish_non_exhaustive()
    }
}

/// A signed-in browser: who, what its CSRF token is bound to, and a re-issued cookie when
/// one is due.
#[derive(Clone, Debug)]
pub struct Session {
    pub principal: Principal,
    /// What the session may do: a static token's (no admin: the pages ask the `admins`
    /// list), or the scopes of the access token an OAuth sign-in validated.
    pub scopes: Scopes,
    /// Signed in through the authorization server (keyed by the server's secret).
    oauth: bool,
    /// `principal \0 issued \0 epoch` of a signed-in browser; `None` in the anonymous mode.
    binding: Option<String>,
    /// The `Set-Cookie` value that slides the idle timeout, when due.
    renewal: Option<String>,
}

impl Session {
    /// The `Set-Cookie` value to send with the answer (the same sign-in, `seen` = now), when
    /// a re-issue is due.
    pub fn renewal(&self) -> Option<&str> {
        self.renewal.as_deref()
    }

    /// True for a signed-in browser (false in the anonymous mode).
    pub fn signed_in(&self) -> bool {
        self.binding.is_some()
    }

    /// True when it was signed in through the OAuth authorization server.
    pub fn by_oauth(&self) -> bool {
        self.oauth
    }
}

/// Why signing in or out could not be done.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The session epochs cannot be read or written (the store is down): temporary.
    #[error("sessions are unavailable: {0}")]
    Store(#[from] StoreError),
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Sessions {
    /// `store` keeps the session epochs; `clock` times the cookies; `secure`: mark cookies
    /// `Secure` (the pages are served over TLS).
    pub fn new(
        auth: Auth,
        store: Store,
        clock: SharedClock,
        limits: SessionLimits,
        secure: bool,
    ) -> Sessions {
        let mut anonymous_key = [0u8; 32];
        // The anonymous mode's CSRF key must be unguessable: a fixed one would let any page
        // forge forms. The same source as ids (the OS, with a fallback that never fails).
        vidforge_core::ids::fill_random(&mut anonymous_key);
        Sessions {
            auth,
            store,
            clock,
            limits,
            anonymous_key,
            server_key: Arc::new(OnceLock::new()),
            secure,
        }
    }

    /// True when cookies are marked `Secure`.
    pub fn secure(&self) -> bool {
        self.secure
    }

    /// The server's session secret: read (or made, once, durably) from the store the first
    /// time, then kept.
    fn server_key(&self) -> Result<&[u8], StoreError> {
        if let Some(k) = self.server_key.get() {
            return Ok(k);
        }
        let mut fresh = [0u8; 32];
        vidforge_core::ids::fill_random(&mut fresh);
        let key = self.store.server_secret(SERVER_KEY, &fresh)?;
        Ok(self.server_key.get_or_init(|| key))
    }

    /// A MAC of `parts` under the server's session secret, for `purpose` (the sign-in flow's
    /// cookie): the same on every node sharing the store.
    pub fn server_mac(&self, purpose: &str, parts: &[&[u8]]) -> Result<Vec<u8>, SessionError> {
        let key = self.server_key()?;
        let mut all: Vec<&[u8]> = vec![b"vidforge-", purpose.as_bytes(), b"\0"];
        all.extend_from_slice(parts);
        Ok(mac(key, &all))
    }

    /// Signs a session for the principal of an access token the OAuth sign-in validated,
    /// with its scopes. Returns the `Set-Cookie` value. Fails when the store cannot say the
    /// principal's session epoch or the server's secret.
    pub fn sign_in_oauth(&self, verified: &Verified) -> Result<String, SessionError> {
        let epoch = self.store.session_epoch(&verified.principal)?;
        let key = self.server_key()?.to_vec();
        let now = self.clock.now_ms();
        Ok(self.cookie_for(
            &key,
            &Signed {
                principal: &verified.principal,
                scopes: Some(scope_bits(verified.scopes)),
                issued: now,
                seen: now,
                epoch,
            },
        ))
    }

    /// The bearer-token table.
    pub fn auth(&self) -> &Auth {
        &self.auth
    }

    /// How long sessions last.
    pub fn limits(&self) -> SessionLimits {
        self.limits
    }

    /// True when users sign in with a token (tokens are configured).
    pub fn sign_in_required(&self) -> bool {
        self.auth.required()
    }

    /// Signs a session for the user of `token`: `Ok(None)` for an unknown token. Returns the
    /// principal and the `Set-Cookie` value. Fails when the store cannot say the principal's
    /// session epoch.
    pub fn sign_in(&self, token: &str) -> Result<Option<(Principal, String)>, SessionError> {
        let token = token.trim().as_bytes();
        let Some(principal) = self.auth.principal_for_token(token) else {
            return Ok(None);
        };
        let epoch = self.store.session_epoch(principal.as_str())?;
        let now = self.clock.now_ms();
        let set_cookie = self.cookie_for(
            token,
            &Signed {
                principal: principal.as_str(),
                scopes: None,
                issued: now,
                seen: now,
                epoch,
            },
        );
        Ok(Some((principal, set_cookie)))
    }

    /// Ends every session of `session`'s principal, on every node, durably (the epoch is
    /// raised and flushed before this returns). Nothing to do in the anonymous mode.
    pub fn sign_out(&self, session: &Session) -> Result<(), SessionError> {
        if session.signed_in() {
            let epoch = self.store.bump_session_epoch(session.principal.as_str())?;
            tracing::info!(principal = %session.principal.as_str(), epoch, "browser signed out");
        }
        Ok(())
    }

    /// The `Set-Cookie` value that ends the session in this browser.
    pub fn sign_out_cookie(&self) -> String {
        self.cookie_header("", 0)
    }

    fn cookie_header(&self, value: &str, max_age_s: u64) -> String {
        let secure = if self.secure { "; Secure" } else { "" };
        format!(
            "{SESSION_COOKIE}={value}; Path=/; Max-Age={max_age_s}; HttpOnly; SameSite=Strict{secure}"
        )
    }

    /// The `Set-Cookie` value of the cookie `signed` describes, tagged under `key`; its
    /// `Max-Age` is what is left of it (the browser drops it when the server would refuse it).
    fn cookie_for(&self, key: &[u8], signed: &Signed) -> String {
        self.cookie_header(&signed.value(key), self.left_s(signed.issued, signed.seen))
    }

    /// What is left of a cookie issued at `issued`, last seen at `seen`, in seconds.
    fn left_s(&self, issued: u64, seen: u64) -> u64 {
        let ends = (seen.saturating_add(ms(self.limits.idle_timeout)))
            .min(issued.saturating_add(ms(self.limits.max_age)));
        ends.saturating_sub(seen).div_ceil(1000).max(1)
    }

    /// The session of a request: the anonymous principal when no tokens are configured,
    /// otherwise a valid, unexpired, not signed-out session cookie. Fails closed: when the
    /// store cannot say the principal's epoch, there is no session.
    pub fn session(&self, headers: &HeaderMap) -> Option<Session> {
        if !self.auth.required() {
            return Some(Session {
                principal: Principal(ANONYMOUS_PRINCIPAL.to_string()),
                scopes: Scopes::static_token(false),
                oauth: false,
                binding: None,
                renewal: None,
            });
        }
        match self.check(headers) {
            Ok(session) => session,
            Err(e) => {
                tracing::warn!(error = %e, "session check failed closed");
                None
            }
        }
    }

    /// [`Sessions::session`], telling a store outage (`Err`) apart from no session.
    pub fn check(&self, headers: &HeaderMap) -> Result<Option<Session>, SessionError> {
        if !self.auth.required() {
            return Ok(self.session(headers));
        }
        let Some(value) = cookie(headers, SESSION_COOKIE) else {
            return Ok(None);
        };
        Ok(self.verify(&value)?)
    }

    /// Whether the request's cookie is (by its own fields alone, before any check) due for
    /// re-issue: lets a caller skip the full check on most requests.
    pub fn renewal_due(&self, headers: &HeaderMap) -> bool {
        self.auth.required()
            && cookie(headers, SESSION_COOKIE)
                .as_deref()
                .and_then(Cookie::parse)
                .is_some_and(|c| self.due(c.seen, self.clock.now_ms()))
    }

    fn due(&self, seen: u64, now: u64) -> bool {
        now.saturating_sub(seen) >= ms(self.limits.idle_timeout) / RENEW_FRACTION
    }

    fn verify(&self, value: &str) -> Result<Option<Session>, StoreError> {
        let Some(c) = Cookie::parse(value) else {
            return Ok(None);
        };
        let now = self.clock.now_ms();
        let idle_over = now >= c.seen.saturating_add(ms(self.limits.idle_timeout));
        let cap_over = now >= c.issued.saturating_add(ms(self.limits.max_age));
        if c.seen < c.issued || idle_over || cap_over {
            return Ok(None);
        }
        if let Some(bits) = c.scopes {
            return self.verify_oauth(c, bits, now);
        }
        let keys: Vec<&[u8]> = self.auth.tokens_of(&c.principal).collect();
        if keys.is_empty() {
            // No such principal (or its tokens were revoked): no store read for it.
            return Ok(None);
        }
        let epoch = self.store.session_epoch(&c.principal)?;
        let mut matched: Option<&[u8]> = None;
        for key in keys {
            let expected = c.signed(epoch).tag(key);
            if bool::from(expected.ct_eq(&c.tag)) {
                matched = Some(key);
            }
        }
        let Some(key) = matched else {
            return Ok(None);
        };
        let renewal = self.due(c.seen, now).then(|| {
            let renewed = Signed {
                seen: now.max(c.seen),
                ..c.signed(epoch)
            };
            self.cookie_for(key, &renewed)
        });
        Ok(Some(Session {
            binding: Some(format!("{}\0{}\0{epoch}", c.principal, c.issued)),
            principal: Principal(c.principal),
            scopes: Scopes::static_token(false),
            oauth: false,
            renewal,
        }))
    }

    /// An OAuth session's cookie: its issuer still trusted, its MAC under the server's
    /// secret (over its scopes too) at the principal's current epoch.
    fn verify_oauth(&self, c: Cookie, bits: u8, now: u64) -> Result<Option<Session>, StoreError> {
        let trusted = self.auth.oauth().is_some_and(|o| {
            o.issuers().any(|i| {
                c.principal
                    .strip_prefix(i)
                    .is_some_and(|rest| rest.len() > 1 && rest.starts_with('#'))
            })
        });
        if !trusted {
            return Ok(None);
        }
        let epoch = self.store.session_epoch(&c.principal)?;
        let key = self.server_key()?;
        let expected = c.signed(epoch).tag(key);
        if !bool::from(expected.ct_eq(&c.tag)) {
            return Ok(None);
        }
        let renewal = self.due(c.seen, now).then(|| {
            let renewed = Signed {
                seen: now.max(c.seen),
                ..c.signed(epoch)
            };
            self.cookie_for(key, &renewed)
        });
        Ok(Some(Session {
            binding: Some(format!("{}\0{}\0{epoch}", c.principal, c.issued)),
            principal: Principal(c.principal),
            scopes: scopes_of(bits),
            oauth: true,
            renewal,
        }))
    }

    /// The CSRF token of a session, for the pages' forms.
    pub fn csrf_token(&self, session: &Session) -> String {
        hex(self.csrf_mac(session, &self.keys(session)[0]))
    }

    /// True when `token` is the CSRF token of `session`.
    pub fn csrf_ok(&self, session: &Session, token: Option<&str>) -> bool {
        let Some(given) = token.and_then(|t| hex::decode(t).ok()) else {
            return false;
        };
        let mut ok = false;
        for key in self.keys(session) {
            ok |= bool::from(self.csrf_mac(session, &key).ct_eq(&given));
        }
        ok
    }

    fn keys(&self, session: &Session) -> Vec<Vec<u8>> {
        match &session.binding {
            None => vec![self.anonymous_key.to_vec()],
            // Verified with the server's secret, so it is loaded.
            Some(_) if session.oauth => vec![
                self.server_key
                    .get()
                    .map_or_else(|| self.anonymous_key.to_vec(), Clone::clone),
            ],
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
            .binding
            .as_deref()
            .unwrap_or(session.principal.as_str());
        mac(key, &[b"vidforge-csrf\0", bound.as_bytes()])
    }
}

#[cfg(test)]
mod tests;
