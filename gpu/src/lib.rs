//! vidforge's GPU compositor: one fused wgpu compute pass scales a planar YUV frame to the
//! output size and alpha-composites the watermark. Knows nothing of FFmpeg, files or tasks.
//!
//! - Frames cross the bus as 4:2:0 YUV: in as planar 8-bit, NV12 or P010 (what software and
//!   hardware decoders give, [`SourceFormat`]), out as planar 8-bit (1.5 B/px) or, for HDR
//!   kept as HDR, 10-bit in little-endian 16-bit samples ([`SampleDepth`]), as the
//!   [`OutputLight`] says.
//! - Per output sample, in one pass: resample its own plane (exact-coverage area filter when
//!   shrinking, cubic B=0/C=0.6 when enlarging, centre-aligned per plane, i.e. swscale's
//!   `SWS_AREA` / `SWS_BICUBIC` with default chroma siting), rotate by 90/180/270 (folded into
//!   the addressing), convert colour between [`ColorSpec`]s, and blend the
//!   [`PreparedWatermark`] with the integer rule of [`blend_watermark`] (bit-exact).
//! - [`GpuCompositor`] keeps a ring of `frames_in_flight` upload/readback buffers, so the GPU
//!   works ahead while the caller encodes; outputs come back in submission order.
//! - Or its slots read exported device memory that another API on the same GPU fills
//!   ([`GpuCompositor::with_external_input`], Vulkan external memory: [`GpuContext::interop`]),
//!   so decoded frames never cross the bus; only the composed frame comes back.
//! - The WGSL lives in `shaders/compose.wgsl`; [`filter`] holds the same math on the CPU.
//!
//! ```no_run
//! use vidforge_gpu::{AdapterPreference, ColorSpec, ComposeConfig, GpuCompositor, GpuContext,
//!                    OutputLight, Rotation, Yuv420Frame};
//! let ctx = GpuContext::new(AdapterPreference::AllowSoftware)?;
//! let cfg = ComposeConfig {
//!     src_width: 1920, src_height: 1080, src_color: ColorSpec::OUTPUT, rotation: Rotation::None,
//!     out_width: 1280, out_height: 720, watermark: None, src_format: Default::default(),
//!     light: OutputLight::Sdr,
//! };
//! let mut gpu = GpuCompositor::new(&ctx, cfg, 3)?;
//! let frame = Yuv420Frame::filled(1920, 1080, [81, 90, 240]);
//! let mut out = Vec::new();
//! for _ in 0..10 {
//!     out.extend(gpu.submit(&frame)?);
//! }
//! out.extend(gpu.finish()?);
//! # Ok::<(), vidforge_gpu::GpuError>(())
//! ```

// Unsafe code lives in `interop/` alone (raw Vulkan handles wgpu has no safe API for); the
// rest of the crate needs none: wgpu and bytemuck carry it.
#![deny(unsafe_code)]

mod compositor;
mod context;
mod error;
pub mod filter;
pub mod frame;
#[allow(unsafe_code)]
mod interop;

pub use compositor::{
    ComposeConfig, EXTERNAL_ROW_ALIGN, GpuCompositor, HopTimes, InputLayout, InputPlane,
    KernelTiming, MAX_FRAMES_IN_FLIGHT,
};
pub use context::{AdapterPreference, AdapterSummary, GpuContext};
pub use error::GpuError;
pub use frame::{
    ColorSpec, Matrix, OutputLight, Placement, Position, PreparedWatermark, Range, Rotation,
    SampleDepth, SemiPlanarFrame, SourceFormat, SourceFrame, WatermarkImage, Yuv420Frame,
    blend_watermark, place_watermark, prepare_watermark,
};
pub use interop::{ExportedMemory, InteropInfo};

#[cfg(test)]
mod tests {
    #[test]
    fn handles_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_sync::<crate::GpuContext>();
        send::<crate::GpuCompositor>();
        send_sync::<crate::GpuError>();
    }
}
