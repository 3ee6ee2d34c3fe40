//! The middleware of the routes a browser may read with its session cookie (downloads,
//! previews, the pages): a bearer token as [`crate::auth`] checks it, or on `GET`/`HEAD` a
//! session cookie ([`crate::session`]).

use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::Response;

use crate::auth::{Grant, admit, admit_grant};
use crate::session::Sessions;

/// [`crate::auth::require_auth`], except that a `GET` or `HEAD` without a bearer token may instead carry
/// a browser session cookie ([`crate::session`]), so the pages can show previews and
/// results. Anything that changes state needs the token (or, on the pages' own forms, the
/// session and its CSRF token).
pub async fn require_auth_or_session(
    State(sessions): State<Sessions>,
    req: Request,
    next: Next,
) -> Response {
    let safe = matches!(*req.method(), Method::GET | Method::HEAD);
    let by_cookie = (safe && !req.headers().contains_key(header::AUTHORIZATION))
        .then(|| sessions.session(req.headers()))
        .flatten();
    match by_cookie {
        // A session is no guess at a token (its MAC is checked): it is not judged. It reads
        // only (GET/HEAD), with what its principal's static token may do, or the scopes of
        // the access token its OAuth sign-in validated.
        Some(s) => {
            let grant = Grant {
                scopes: s.scopes,
                principal: s.principal,
                signed: false,
            };
            admit_grant(sessions.auth(), grant, req, next).await
        }
        None => {
            let outcome = sessions.auth().authenticate(req.headers()).await;
            admit(sessions.auth(), outcome, req, next).await
        }
    }
}
