//! Plain frame and geometry types shared by every compositor backend.
//!
//! Everything here is pure CPU code with no GPU or FFmpeg dependency, so the wgpu compositor
//! (this crate) and the CPU compositor (the media crate) agree on placement and on the prepared
//! watermark bit for bit: the only difference between backends is the scaler.

// One file per concept, each re-exported here (the public paths are `vidforge_gpu::frame::*`):
// `planes.rs` the frame types and source layouts, `color.rs` colour specs, `rotation.rs`,
// `tonemap.rs` HDR to SDR, `hdr_signal.rs` SDR graphics into HDR, `light.rs` the output's light,
// `watermark.rs` placement, preparation and the reference blend.

mod color;
mod hdr_signal;
mod light;
mod planes;
mod rotation;
pub mod tonemap;
mod watermark;

pub use color::{ColorSpec, Matrix, Range};
pub use hdr_signal::HdrSignal;
pub use light::OutputLight;
pub use planes::{SampleDepth, SemiPlanarFrame, SourceFormat, SourceFrame, Yuv420Frame};
pub use rotation::Rotation;
pub use watermark::{
    Placement, Position, PreparedWatermark, WATERMARK_MARGIN_FRACTION, WATERMARK_MAX_FRACTION,
    WATERMARK_REFERENCE_SHORT_SIDE, WatermarkImage, blend_watermark, place_watermark,
    prepare_watermark, prepare_watermark_hdr,
};
