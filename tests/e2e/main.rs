//! The end-to-end tests: each module drives a real `vidforge serve` (the binary Cargo built for
//! this run, `CARGO_BIN_EXE_vidforge`) over real HTTP with real media. One test binary, linked
//! once: `cargo test --release --test e2e` runs them all, `cargo test --release --test e2e
//! oauth::` one module. Shared helpers: `tests/support/`.

#[path = "../support/mod.rs"]
mod support;

mod busy_store;
mod chaos;
mod cluster;
mod hardware;
mod http_hardening;
mod load;
mod mcp_app;
mod mcp_protocol;
mod mcp_render;
mod oauth;
mod reliability;
mod rmcp_client;
mod s3_media;
mod segments;
mod self_contained;
mod speculative;
mod streams;
mod web_ui;
mod webhooks;
