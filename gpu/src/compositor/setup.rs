//! [`GpuCompositor::new`] and [`GpuCompositor::with_external_input`]: a checked plan turned
//! into device objects, in named steps: the two specialised pipelines (from the context's
//! cache), the uniform, watermark, input and output buffers and their bind group, then the
//! ring's slots (upload buffers, or inputs in exported memory). Device errors are caught by
//! error scopes and come back typed, never as a panic.

use std::collections::VecDeque;

use super::plan::{Params, Plan};
use super::ring::{HopTimes, Shared, Slot, bind_group};
use super::{ComposeConfig, GpuCompositor, checks};
use crate::context::GpuContext;
use crate::error::GpuError;
use crate::interop::ExportedMemory;

/// Row and plane alignment of an external input, in bytes: what copy engines ask of pitched
/// device memory (CUDA's `cuMemAllocPitch` pitches are multiples of it), so a 2D copy
/// into it is never refused for its pitch.
pub const EXTERNAL_ROW_ALIGN: usize = 512;

/// How the ring's slots get their frames.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Input {
    /// Host frames through mapped upload buffers (tightly packed rows).
    Upload,
    /// Each slot's own device input in exported memory (rows at [`EXTERNAL_ROW_ALIGN`]).
    External,
}

impl GpuCompositor {
    /// Builds the buffers and bind group for `cfg`. Keeps up to
    /// `frames_in_flight` (1..=16) frames on the GPU at once.
    pub fn new(
        ctx: &GpuContext,
        cfg: ComposeConfig,
        frames_in_flight: usize,
    ) -> Result<Self, GpuError> {
        Self::build(ctx, cfg, frames_in_flight, Input::Upload)
    }

    /// Like [`GpuCompositor::new`], but each of the `frames_in_flight` slots reads its source
    /// from its own input buffer in exported device memory, which another API writes
    /// ([`GpuCompositor::take_exported_inputs`], [`GpuCompositor::submit_filled`]); host
    /// frames can still be submitted (queue writes into the same inputs). Fails with
    /// [`GpuError::Interop`] when the context has no external memory.
    pub fn with_external_input(
        ctx: &GpuContext,
        cfg: ComposeConfig,
        frames_in_flight: usize,
    ) -> Result<Self, GpuError> {
        ctx.interop()
            .map_err(|e| GpuError::Interop(e.to_string()))?;
        Self::build(ctx, cfg, frames_in_flight, Input::External)
    }

    fn build(
        ctx: &GpuContext,
        cfg: ComposeConfig,
        frames_in_flight: usize,
        input: Input,
    ) -> Result<Self, GpuError> {
        checks::frames_in_flight(frames_in_flight)?;
        let align = match input {
            Input::Upload => 1,
            Input::External => EXTERNAL_ROW_ALIGN,
        };
        let plan = Plan::new(&cfg, &ctx.inner.limits, align)?;
        let dispatches = pipelines(ctx, &plan)?;
        let (shared, slots, exported) =
            create_resources(ctx, &plan, dispatches, frames_in_flight, input)?;
        log_ready(ctx, &cfg, &plan, frames_in_flight);
        Ok(Self {
            shared,
            free: (0..frames_in_flight).rev().collect(),
            slots,
            in_flight: VecDeque::with_capacity(frames_in_flight),
            preview: None,
            exported,
        })
    }
}

/// (pipeline, workgroups x, workgroups y) for luma, then chroma: the plan's pipeline keys
/// compiled, or taken from the context's cache.
fn pipelines(
    ctx: &GpuContext,
    plan: &Plan,
) -> Result<[(wgpu::ComputePipeline, u32, u32); 2], GpuError> {
    let [(luma, lx, ly), (chroma, cx, cy)] = plan.dispatches;
    Ok([
        (ctx.pipeline(luma)?, lx, ly),
        (ctx.pipeline(chroma)?, cx, cy),
    ])
}

/// The device objects shared by the slots, then `frames_in_flight` slots (with their exported
/// memory for external input), all inside one out-of-memory and one validation error scope.
fn create_resources(
    ctx: &GpuContext,
    plan: &Plan,
    dispatches: [(wgpu::ComputePipeline, u32, u32); 2],
    frames_in_flight: usize,
    input: Input,
) -> Result<(Shared, Vec<Slot>, Vec<ExportedMemory>), GpuError> {
    let device = &ctx.inner.device;
    let oom_scope = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let val_scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let shared = create_shared(ctx, plan, dispatches, input);
    let mut slots = Vec::with_capacity(frames_in_flight);
    let mut exported = Vec::new();
    for _ in 0..frames_in_flight {
        match input {
            Input::Upload => slots.push(shared.new_slot()),
            Input::External => {
                let (buffer, memory) =
                    ctx.export_buffer(plan.in_layout.size, "compose external input")?;
                slots.push(shared.slot_with(shared.device_input(buffer)));
                exported.push(memory);
            }
        }
    }
    if let Some(e) = pollster::block_on(val_scope.pop()) {
        return Err(GpuError::Device(format!(
            "creating compositor resources: {e}"
        )));
    }
    if let Some(e) = pollster::block_on(oom_scope.pop()) {
        return Err(GpuError::OutOfMemory(format!(
            "{frames_in_flight} frame slots of {} + {} bytes: {e}",
            plan.in_layout.size, plan.out_layout.size
        )));
    }
    Ok((shared, slots, exported))
}

/// The uniforms and the watermark (uploaded), the output buffer and, for uploads, the
/// device input and the bind group over all four.
fn create_shared(
    ctx: &GpuContext,
    plan: &Plan,
    dispatches: [(wgpu::ComputePipeline, u32, u32); 2],
    input: Input,
) -> Shared {
    use wgpu::BufferUsages as U;
    let device = &ctx.inner.device;
    let queue = &ctx.inner.queue;
    let uniform = U::UNIFORM | U::COPY_DST;
    let (shader_in, shader_out) = (U::STORAGE | U::COPY_DST, U::STORAGE | U::COPY_SRC);
    let params_size = std::mem::size_of::<Params>() as u64;
    let params = buffer(device, "compose params", params_size, uniform);
    queue.write_buffer(&params, 0, bytemuck::bytes_of(&plan.params));
    let wm_size = plan.wm_bytes.len() as u64;
    let wm = buffer(device, "compose watermark", wm_size, shader_in);
    queue.write_buffer(&wm, 0, &plan.wm_bytes);
    let output = buffer(device, "compose output", plan.out_layout.size, shader_out);
    let upload_target = (input == Input::Upload).then(|| {
        let input = buffer(device, "compose input", plan.in_layout.size, shader_in);
        let bind_group = bind_group(ctx, [&params, &input, &wm, &output]);
        (input, bind_group)
    });
    Shared {
        ctx: ctx.clone(),
        upload_target,
        output,
        in_layout: plan.in_layout,
        out_layout: plan.out_layout,
        dispatches,
        out_size: plan.sizes.out,
        params,
        wm,
        times: HopTimes::default(),
    }
}

fn buffer(
    device: &wgpu::Device,
    label: &str,
    size: u64,
    usage: wgpu::BufferUsages,
) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size,
        usage,
        mapped_at_creation: false,
    })
}

fn log_ready(ctx: &GpuContext, cfg: &ComposeConfig, plan: &Plan, frames_in_flight: usize) {
    let (sw, sh) = (cfg.src_width, cfg.src_height);
    let (ow, oh) = plan.sizes.out;
    let luma = plan.dispatches[0].0;
    tracing::debug!(
        src = format!("{sw}x{sh}"),
        rotation = cfg.rotation.degrees(),
        out = format!("{ow}x{oh}"),
        kernels = ?(luma.kern_x, luma.kern_y),
        taps = ?plan.taps,
        colour = ?plan.mode,
        watermark = cfg.watermark.is_some(),
        frames_in_flight,
        adapter = %ctx.adapter().name,
        "GPU compositor ready"
    );
}
