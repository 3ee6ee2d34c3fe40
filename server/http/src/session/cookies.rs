//! The session cookie's format: its fields, their MAC tags (the module docs of
//! [`super`] give both layouts), and reading a cookie off a request.

use axum::http::{HeaderMap, header};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::scope::Scopes;

type HmacSha256 = Hmac<Sha256>;

pub(super) fn mac(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    // HMAC accepts keys of any length.
    let mut m = <HmacSha256 as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().to_vec()
}

/// A session cookie's fields.
pub(super) struct Cookie {
    pub(super) issued: u64,
    pub(super) seen: u64,
    pub(super) principal: String,
    /// The scope bits of an OAuth session's cookie (`None`: a static token's).
    pub(super) scopes: Option<u8>,
    pub(super) tag: Vec<u8>,
}

impl Cookie {
    pub(super) fn parse(value: &str) -> Option<Cookie> {
        let parts: Vec<&str> = value.split('.').collect();
        let (issued, seen, who, scopes, tag) = match parts[..] {
            [issued, seen, who, tag] => (issued, seen, who, None, tag),
            [issued, seen, who, scopes, tag] => {
                (issued, seen, who, Some(scopes.parse().ok()?), tag)
            }
            _ => return None,
        };
        Some(Cookie {
            issued: issued.parse().ok()?,
            seen: seen.parse().ok()?,
            principal: String::from_utf8(hex::decode(who).ok()?).ok()?,
            scopes,
            tag: hex::decode(tag).ok()?,
        })
    }

    /// The fields its tag covers, at the principal's `epoch`.
    pub(super) fn signed(&self, epoch: u64) -> Signed<'_> {
        Signed {
            principal: &self.principal,
            scopes: self.scopes,
            issued: self.issued,
            seen: self.seen,
            epoch,
        }
    }
}

/// The bit set of `scopes` in an OAuth session's cookie.
pub(super) fn scope_bits(s: Scopes) -> u8 {
    u8::from(s.render) | (u8::from(s.read) << 1) | (u8::from(s.admin) << 2)
}

pub(super) fn scopes_of(bits: u8) -> Scopes {
    Scopes {
        render: bits & 1 != 0,
        read: bits & 2 != 0,
        admin: bits & 4 != 0,
    }
}

/// What a session cookie's MAC covers besides its key: whose it is, the scope bits of an
/// OAuth session's cookie (`None`: a static token's), when it was issued and last seen, and
/// the principal's session epoch.
pub(super) struct Signed<'a> {
    pub(super) principal: &'a str,
    pub(super) scopes: Option<u8>,
    pub(super) issued: u64,
    pub(super) seen: u64,
    pub(super) epoch: u64,
}

impl Signed<'_> {
    /// The MAC tag under `key`: a static token's session (`v2`) or an OAuth session's
    /// (`oauth-v1`, over its scopes too).
    pub(super) fn tag(&self, key: &[u8]) -> Vec<u8> {
        let (issued, seen, epoch) = (self.issued, self.seen, self.epoch);
        let (version, fields): (&[u8], String) = match self.scopes {
            None => (
                b"vidforge-session\0v2\0",
                format!("{issued}\0{seen}\0{epoch}"),
            ),
            Some(scopes) => (
                b"vidforge-session\0oauth-v1\0",
                format!("{issued}\0{seen}\0{epoch}\0{scopes}"),
            ),
        };
        mac(
            key,
            &[version, self.principal.as_bytes(), b"\0", fields.as_bytes()],
        )
    }

    /// The cookie's value: its fields and its tag under `key`.
    pub(super) fn value(&self, key: &[u8]) -> String {
        let (issued, seen) = (self.issued, self.seen);
        let (who, tag) = (hex::encode(self.principal), hex::encode(self.tag(key)));
        match self.scopes {
            None => format!("{issued}.{seen}.{who}.{tag}"),
            Some(scopes) => format!("{issued}.{seen}.{who}.{scopes}.{tag}"),
        }
    }
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
