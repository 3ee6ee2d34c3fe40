//! The server crates' in-process tests (the domain, the HTTP side and the store backends driven
//! as libraries, no server process): one test binary; `cargo test --release -p vidforge --test
//! in_process fuzz::` runs one module. Shared helpers: `common/`.

mod common;

mod fuzz;
mod http_api;
mod quality;
mod real_render;
mod segments;
mod service_core;
mod store_backends;
mod sweep;
