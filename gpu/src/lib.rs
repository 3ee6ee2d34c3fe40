//! vidforge's GPU compositor: one fused wgpu compute pass scales a planar YUV frame to the
//! output size and alpha-composites the watermark. Knows nothing of FFmpeg, files or tasks.

pub mod frame;

pub use frame::{
    ColorSpec, Matrix, Placement, Position, PreparedWatermark, Range, Rotation, WatermarkImage,
    Yuv420Frame, blend_watermark, place_watermark, prepare_watermark,
};
