//! The vidforge service: CLI, configuration, durable task store, MCP front, HTTP endpoints.
//! Only this crate knows MCP, JSON and wire types.
//!
//! Layers, bottom up: [`store`] (sled, the truth) → [`shared`] (the state every actor shares)
//! → [`worker`] pool and [`maintenance`] (boot recovery, approval deadlines, sweeper) →
//! [`service::RenderService`] (creation, idempotency, quota, approvals, cancel; starts the two
//! before it) → [`http`] (uploads, downloads) and the MCP layer, both behind [`policy`]
//! (Host/Origin) → [`app`] (the router) on [`connections`] (accept loop and limits) → [`cli`].

pub mod app;
pub mod args;
pub mod assets;
pub mod auth;
pub mod auth_limit;
pub mod catalog;
pub mod cli;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod connections;
pub mod disk;
pub mod engine;
pub mod envelope;
pub mod error;
pub mod fair_queue;
pub mod http;
pub mod ids;
pub mod maintenance;
pub mod malloc;
pub mod mcp;
pub mod media_backend;
pub mod peer;
pub mod policy;
pub mod service;
pub mod session;
pub mod shared;
pub mod store;
pub mod telemetry;
pub mod unread_body;
pub mod uri;
pub mod web;
pub mod worker;

pub use auth::Principal;
pub use config::Config;
pub use error::ServiceError;
pub use service::RenderService;
