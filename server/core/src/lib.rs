//! The vidforge domain: everything a render is, minus the wire. It knows no HTTP and no MCP
//! (its manifest has no axum, hyper, tower or rmcp), so the fronts above it can only reach it
//! through these modules.
//!
//! Layers, bottom up: [`store`] (sled or PostgreSQL, the truth; the crate vidforge-store) →
//! [`shared`] (the state every actor shares) → [`worker`] pool and [`maintenance`] (boot
//! recovery, approval deadlines, the sweeper in `sweep.rs`), [`cluster`] (the shared queue) →
//! [`service::RenderService`] (creation, idempotency, quota, approvals, cancel; starts the two
//! before it). Beside them: [`config`]
//! (every setting), [`catalog`] (error codes and their wording), [`error`], [`engine`] (the
//! render engine as the service sees it) and [`media_backend`] (it, on vidforge-media),
//! [`media_store`] (where media lives: a directory, or a bucket through its seam),
//! [`telemetry`] (metric recording), [`webhook`] (which transitions become webhook events, and
//! their retry schedule; the events are written with the transition, in the store's outbox).

pub mod args;
pub mod assets;
pub use vidforge_store::{catalog, clock};
pub mod cluster;
pub mod config;
pub mod disk;
pub mod engine;
pub mod error;
pub mod fair_queue;
pub use vidforge_store::ids;
pub mod maintenance;
pub mod malloc;
pub mod media_backend;
pub mod media_store;
pub mod priority;
pub mod render_metrics;
pub mod service;
pub mod shared;
pub use vidforge_store::side_runtime;
pub mod store;
mod sweep;
use vidforge_store::sync;
pub mod telemetry;
mod transitions;
pub mod uri;
pub mod webhook;
pub mod worker;

pub use config::Config;
pub use error::ServiceError;
pub use service::RenderService;
