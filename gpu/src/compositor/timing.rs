//! [`GpuCompositor::kernel_timing`]: the compose pass alone, timed on the GPU by timestamps
//! written at the start and the end of one pass that repeats the dispatches.

use std::sync::Arc;
use std::sync::atomic::AtomicU8;
use std::time::Duration;

use super::ring::{PENDING, Shared, map_into};
use super::{GpuCompositor, KernelTiming};
use crate::error::GpuError;
use crate::frame::SourceFrame;

impl GpuCompositor {
    /// GPU time of the compose pass alone (no upload, no readback), by timestamp queries:
    /// `frame` is uploaded once, then composed `iterations` times in one pass. `None` when the
    /// adapter records no timestamps. Frames in flight are unaffected.
    pub fn kernel_timing<'a>(
        &mut self,
        frame: impl Into<SourceFrame<'a>>,
        iterations: u32,
    ) -> Result<Option<KernelTiming>, GpuError> {
        let ctx = self.shared.ctx.clone();
        if !ctx.inner.timestamps || iterations == 0 {
            return Ok(None);
        }
        // Leaves `frame` in the device input the preview slot binds.
        self.compose_one(frame)?;
        let bind_group = self
            .preview
            .as_ref()
            .and_then(|slot| self.shared.bind_group(slot))
            .ok_or_else(|| GpuError::Device("no preview input to time".into()))?;
        let ticks = time_passes(&self.shared, bind_group, iterations)?;
        let nanos = ticks as f64 * f64::from(ctx.inner.queue.get_timestamp_period());
        let shared = &self.shared;
        Ok(Some(KernelTiming {
            per_frame: Duration::from_secs_f64(nanos / 1e9 / f64::from(iterations)),
            // Each source byte read once and each output byte written once: the least a
            // pass must move (the filter's overlapping windows hit the caches).
            bytes_per_frame: shared.in_layout.source_bytes() + shared.out_layout.size,
            source: shared.in_layout.luma,
        }))
    }
}

/// The two timestamps of one pass: the query set, the buffer it resolves into and the
/// mappable copy of that buffer.
struct Timestamps {
    queries: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    read: wgpu::Buffer,
}

impl Timestamps {
    fn new(device: &wgpu::Device) -> Self {
        let queries = device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("compose kernel timing"),
            ty: wgpu::QueryType::Timestamp,
            count: 2,
        });
        let resolve = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("compose kernel timing resolve"),
            size: 16,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let read = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("compose kernel timing read"),
            size: 16,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Self {
            queries,
            resolve,
            read,
        }
    }

    /// Ticks between the two timestamps, once `read` is mapped.
    fn ticks(&self) -> Result<u64, GpuError> {
        let ticks = {
            let view = self
                .read
                .get_mapped_range(..)
                .map_err(|e| GpuError::Map(format!("timestamp buffer: {e}")))?;
            let t: [u64; 2] = bytemuck::pod_read_unaligned(&view[..16]);
            t[1].saturating_sub(t[0])
        };
        self.read.unmap();
        Ok(ticks)
    }
}

/// GPU ticks of one pass composing the frame already in the input `bind_group` binds
/// `iterations` times.
fn time_passes(
    shared: &Shared,
    bind_group: &wgpu::BindGroup,
    iterations: u32,
) -> Result<u64, GpuError> {
    let device = &shared.ctx.inner.device;
    let queue = &shared.ctx.inner.queue;
    let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let stamps = Timestamps::new(device);
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
        label: Some("compose kernel timing"),
    });
    {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("compose kernel timing"),
            timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                query_set: &stamps.queries,
                beginning_of_pass_write_index: Some(0),
                end_of_pass_write_index: Some(1),
            }),
        });
        shared.record_pass(&mut pass, bind_group, iterations);
    }
    encoder.resolve_query_set(&stamps.queries, 0..2, &stamps.resolve, 0);
    encoder.copy_buffer_to_buffer(&stamps.resolve, 0, &stamps.read, 0, 16);
    let submission = queue.submit([encoder.finish()]);
    let state = Arc::new(AtomicU8::new(PENDING));
    map_into(&stamps.read, wgpu::MapMode::Read, state.clone());
    if let Some(e) = pollster::block_on(scope.pop()) {
        return Err(GpuError::Device(format!("timing the compose pass: {e}")));
    }
    shared.wait_for(&state, Some(&submission))?;
    stamps.ticks()
}
