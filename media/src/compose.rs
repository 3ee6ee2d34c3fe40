//! The compositor stage: decoded frame in, output-size yuv420p (BT.709 limited) with the
//! watermark applied out. Two backends behind one trait: FFmpeg's swscale on the CPU, and the
//! wgpu compositor of the gpu crate.
//!
//! Files: `spec.rs` what both backends share (the spec, the trait, reading a decoded frame);
//! `cpu.rs` the CPU compositor; `gpu.rs` the wgpu one; `convert.rs` the swscale conversion of
//! decoded frames to a fixed size and colour (the GPU path's fallback, `decode_frames`).

mod convert;
mod cpu;
mod gpu;
mod spec;

pub(crate) use convert::SourceConverter;
pub use cpu::CpuCompositor;
pub use gpu::WgpuCompositor;
pub use spec::{ComposeSpec, Compositor};
