//! Typed errors of the GPU compositor.

/// Everything the GPU compositor can fail with. Never a panic: bad input is reported here.
#[derive(thiserror::Error, Debug)]
pub enum GpuError {
    /// No adapter matched the preference on the enabled backends.
    #[error("no suitable GPU adapter (backends: {backends}; preference: {preference}): {detail}")]
    NoAdapter {
        backends: String,
        preference: String,
        detail: String,
    },
    /// The adapter refused to create a device.
    #[error("requesting a device failed: {0}")]
    RequestDevice(String),
    /// The compositor configuration is unusable (zero or oversized dimensions, a watermark that
    /// does not fit, buffers beyond the device's limits...).
    #[error("invalid compositor configuration: {reason}")]
    InvalidConfig { reason: String },
    /// A submitted frame does not have the configured source size or its planes are not
    /// tightly packed.
    #[error(
        "frame is {width}x{height} but the compositor expects {expected_width}x{expected_height}: {detail}"
    )]
    FrameSizeMismatch {
        expected_width: u32,
        expected_height: u32,
        width: u32,
        height: u32,
        detail: String,
    },
    /// GPU memory could not be allocated.
    #[error("GPU allocation failed: {0}")]
    OutOfMemory(String),
    /// wgpu reported a validation or internal error (a bug in this crate or the driver).
    #[error("GPU error: {0}")]
    Device(String),
    /// The device was lost (driver reset, GPU removed).
    #[error("GPU device lost: {0}")]
    DeviceLost(String),
    /// Mapping a buffer for upload or readback failed.
    #[error("mapping a GPU buffer failed: {0}")]
    Map(String),
    /// Waiting for the GPU failed (timeout or bad submission index).
    #[error("waiting for the GPU failed: {0}")]
    Poll(String),
    /// External memory is unavailable or one of its Vulkan calls failed.
    #[error("GPU external memory: {0}")]
    Interop(String),
}
