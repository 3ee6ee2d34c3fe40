//! vidforge's HTTP side, on the domain ([`vidforge_core`]): uploads, downloads and previews
//! ([`routes`]), the browser pages ([`web`]), the Host/Origin [`policy`], bearer tokens and
//! their failure budget ([`auth`], [`auth_limit`]; [`auth_or_session`] where a browser
//! session may read), browser [`session`]s, the client address
//! ([`peer`]), the accept loop and its limits ([`connections`]), `GET /metrics` ([`metrics`])
//! and the §6 error [`envelope`] every front answers with; OAuth access tokens and the
//! protected resource metadata ([`oauth`]) and what each credential may do ([`scope`]);
//! fixed public documents with entity tags ([`document`]).

pub mod auth;
pub mod auth_limit;
pub mod auth_or_session;
pub mod connections;
pub mod document;
pub mod envelope;
pub mod metrics;
pub mod oauth;
pub mod peer;
pub mod playback;
pub mod policy;
pub mod routes;
pub mod scope;
pub mod session;
pub mod unread_body;
pub mod web;

pub use auth::Principal;
