//! Signed playback links: a short-lived link to one finished video that needs no bearer token,
//! for players that cannot send one (the MCP App's `<video>` in a host's sandboxed iframe).
//!
//! A link is `{base}/play/{render_id}/{file}?u={principal hex}&x={expiry, unix s}&s={mac hex}`
//! with `mac = HMAC-SHA256(key, "vidforge-playback\0v1\0" render_id "\0" file "\0" principal
//! "\0" expiry)`. The key is 32 random bytes made once in the store
//! ([`Store::server_secret`] [`SECRET_NAME`]): every node sharing the store verifies the links
//! of every other, across restarts. `GET /play/…` (and `HEAD`) checks the tag in constant time
//! and the expiry, then serves the file exactly as the authenticated download does (`Range`,
//! conditionals; a `307` to the bucket's presigned link with `--media-store s3://…`), except
//! that neither `Cache-Control`'s `max-age` nor the bucket's link outlives the link's own
//! expiry. A link with an altered part or past its expiry is `403` (`request_forbidden`, no
//! build fingerprint); a render that is gone, not the principal's or not finished is `404`.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path as UrlPath, Query, Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::envelope::{Envelope, error_response};
use vidforge_core::catalog::ErrorCode;
use vidforge_core::error::ServiceError;
use vidforge_core::service::RenderService;
use vidforge_core::store::{Store, StoreError};

/// The name of the signing secret in the store.
pub const SECRET_NAME: &str = "playback";
/// How long a playback link stays valid.
pub const LINK_TTL: Duration = Duration::from_secs(600);
/// The route's path prefix.
pub const PREFIX: &str = "/play";

/// Makes and checks playback links (cheap to clone; the key is read from the store once).
#[derive(Clone)]
pub struct PlaybackLinks {
    store: Store,
    base_url: String,
    key: Arc<OnceLock<Vec<u8>>>,
}

impl std::fmt::Debug for PlaybackLinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlaybackLinks")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

/// A link's query: who, until when, and its tag.
#[derive(Debug, Deserialize)]
pub struct LinkQuery {
    u: Option<String>,
    x: Option<u64>,
    s: Option<String>,
}

impl PlaybackLinks {
    /// Links on `base_url` (the public origin, no trailing `/`), keyed by `store`'s secret.
    pub fn new(store: Store, base_url: impl Into<String>) -> PlaybackLinks {
        PlaybackLinks {
            store,
            base_url: base_url.into(),
            key: Arc::new(OnceLock::new()),
        }
    }

    fn key(&self) -> Result<&[u8], StoreError> {
        if let Some(k) = self.key.get() {
            return Ok(k);
        }
        let mut fresh = [0u8; 32];
        vidforge_core::ids::fill_random(&mut fresh);
        let key = self.store.server_secret(SECRET_NAME, &fresh)?;
        Ok(self.key.get_or_init(|| key))
    }

    fn tag(
        &self,
        id: &str,
        file: &str,
        principal: &str,
        expiry: u64,
    ) -> Result<Vec<u8>, StoreError> {
        let mut m =
            <Hmac<Sha256> as Mac>::new_from_slice(self.key()?).expect("HMAC takes any key length");
        let expiry = expiry.to_string();
        for part in [
            "vidforge-playback\0v1".as_bytes(),
            id.as_bytes(),
            file.as_bytes(),
            principal.as_bytes(),
            expiry.as_bytes(),
        ] {
            m.update(part);
            m.update(b"\0");
        }
        Ok(m.finalize().into_bytes().to_vec())
    }

    /// A link to `file` of render `id` for `principal`, valid until `expiry` (unix seconds).
    pub fn link(
        &self,
        id: &str,
        file: &str,
        principal: &str,
        expiry: u64,
    ) -> Result<String, StoreError> {
        let tag = self.tag(id, file, principal, expiry)?;
        Ok(format!(
            "{}{PREFIX}/{id}/{file}?u={}&x={expiry}&s={}",
            self.base_url,
            hex::encode(principal.as_bytes()),
            hex::encode(tag)
        ))
    }

    /// The principal a link was made for, when its tag matches and `now` (unix seconds) is
    /// before its expiry.
    pub fn verify(&self, id: &str, file: &str, query: &LinkQuery, now: u64) -> Option<String> {
        let principal = String::from_utf8(hex::decode(query.u.as_deref()?).ok()?).ok()?;
        let expiry = query.x?;
        let given = hex::decode(query.s.as_deref()?).ok()?;
        let want = self.tag(id, file, &principal, expiry).ok()?;
        if !bool::from(want.ct_eq(&given)) || now >= expiry {
            return None;
        }
        Some(principal)
    }
}

/// `GET /play/{id}/{file}`: no bearer token, the link's tag instead. Serve it behind the
/// request policy like every other route.
pub fn routes(service: RenderService, links: PlaybackLinks) -> Router {
    Router::new()
        .route(&format!("{PREFIX}/{{id}}/{{file}}"), get(play))
        .with_state((service, links))
}

/// Middleware in front of the request policy on [`routes`]: drops `Origin`, so that only
/// `Host` is checked. A media element in a sandboxed view sends `Origin: null`; a playback
/// link carries its own credential and the route uses nothing ambient (no cookie, no bearer
/// token), so there is no cross-site request to refuse.
pub async fn without_origin(mut request: Request, next: axum::middleware::Next) -> Response {
    request.headers_mut().remove(axum::http::header::ORIGIN);
    next.run(request).await
}

async fn play(
    State((service, links)): State<(RenderService, PlaybackLinks)>,
    UrlPath((id, file)): UrlPath<(String, String)>,
    Query(query): Query<LinkQuery>,
    request: Request,
) -> Response {
    let now = service.clock().now_ms() / 1000;
    let Some(principal) = links.verify(&id, &file, &query, now) else {
        let env = Envelope::new(
            ErrorCode::RequestForbidden,
            "This playback link is altered or expired. Ask the view for a new one (vidforge_app_playback) or download the video with your credentials.",
        )
        .field("s")
        .for_stranger();
        return error_response(StatusCode::FORBIDDEN, &env);
    };
    match service.resolve_result(&principal, &id) {
        Ok(r) if r.file_name == file => {
            // Neither a cached copy nor the bucket's link outlives the link itself.
            let left = query.x.unwrap_or(now).saturating_sub(now);
            let served = crate::routes::Served {
                lifetime: Some(Duration::from_secs(left)),
                ..crate::routes::Served::download(&r.path, &r.mime_type, Some(&r.file_name))
            };
            crate::routes::serve_media(&service, served, request).await
        }
        Ok(_) => crate::routes::service_error(&ServiceError::NotFound),
        Err(_) => crate::routes::service_error(&ServiceError::NotFound),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn links() -> (tempfile::TempDir, PlaybackLinks) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).unwrap();
        (dir, PlaybackLinks::new(store, "https://v.example"))
    }

    fn query_of(link: &str) -> LinkQuery {
        let q = link.split_once('?').unwrap().1;
        let mut out = LinkQuery {
            u: None,
            x: None,
            s: None,
        };
        for kv in q.split('&') {
            let (k, v) = kv.split_once('=').unwrap();
            match k {
                "u" => out.u = Some(v.into()),
                "x" => out.x = v.parse().ok(),
                "s" => out.s = Some(v.into()),
                _ => {}
            }
        }
        out
    }

    #[test]
    fn a_link_verifies_for_its_principal_until_it_expires() {
        let (_dir, links) = links();
        let link = links.link("r_1", "final.mp4", "alice", 1_000).unwrap();
        assert!(
            link.starts_with("https://v.example/play/r_1/final.mp4?u="),
            "{link}"
        );
        let q = query_of(&link);
        assert_eq!(
            links.verify("r_1", "final.mp4", &q, 999).as_deref(),
            Some("alice")
        );
        assert_eq!(links.verify("r_1", "final.mp4", &q, 1_000), None, "expired");
        assert_eq!(
            links.verify("r_2", "final.mp4", &q, 10),
            None,
            "other render"
        );
        assert_eq!(
            links.verify("r_1", "final.webm", &q, 10),
            None,
            "other file"
        );
    }

    #[test]
    fn altered_links_are_refused() {
        let (_dir, links) = links();
        let link = links.link("r_1", "final.mp4", "alice", 1_000).unwrap();
        let q = query_of(&link);
        let longer = LinkQuery {
            u: q.u.clone(),
            x: Some(5_000),
            s: q.s.clone(),
        };
        assert_eq!(links.verify("r_1", "final.mp4", &longer, 10), None);
        let bob = LinkQuery {
            u: Some(hex::encode("bob")),
            x: q.x,
            s: q.s.clone(),
        };
        assert_eq!(links.verify("r_1", "final.mp4", &bob, 10), None);
        let mut tag = q.s.clone().unwrap();
        tag.replace_range(0..1, if tag.starts_with('0') { "1" } else { "0" });
        let forged = LinkQuery {
            u: q.u.clone(),
            x: q.x,
            s: Some(tag),
        };
        assert_eq!(links.verify("r_1", "final.mp4", &forged, 10), None);
        let missing = LinkQuery {
            u: q.u,
            x: q.x,
            s: None,
        };
        assert_eq!(links.verify("r_1", "final.mp4", &missing, 10), None);
    }
}
