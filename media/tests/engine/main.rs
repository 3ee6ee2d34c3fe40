//! The media engine's tests against real FFmpeg and real media (fixtures made by the tests), the
//! GPU ones on lavapipe: one test binary; `cargo test --release -p vidforge-media --test engine
//! hdr::` runs one module. Shared helpers: `common/`.

mod common;

mod compose_cpu;
mod errors;
mod formats;
mod gpu;
mod hdr;
mod quality;
mod segments;
mod sources;
mod watermark;
