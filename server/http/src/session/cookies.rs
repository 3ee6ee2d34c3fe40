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

pub(super) fn session_tag(
    key: &[u8],
    principal: &str,
    issued: u64,
    seen: u64,
    epoch: u64,
) -> Vec<u8> {
    let fields = format!("{issued}\0{seen}\0{epoch}");
    mac(
        key,
        &[
            b"vidforge-session\0v2\0",
            principal.as_bytes(),
            b"\0",
            fields.as_bytes(),
        ],
    )
}

pub(super) fn oauth_session_tag(
    key: &[u8],
    principal: &str,
    scopes: u8,
    issued: u64,
    seen: u64,
    epoch: u64,
) -> Vec<u8> {
    let fields = format!("{issued}\0{seen}\0{epoch}\0{scopes}");
    mac(
        key,
        &[
            b"vidforge-session\0oauth-v1\0",
            principal.as_bytes(),
            b"\0",
            fields.as_bytes(),
        ],
    )
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
