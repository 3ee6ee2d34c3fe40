//! One ring slot's round trip: the frame's planes written into the slot's mapped upload
//! buffer, one command buffer (copy in, the compose pass, copy out), and the asynchronous
//! readback, waited for with a bounded poll.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use super::layout::{InLayout, OutLayout};
use crate::context::GpuContext;
use crate::error::GpuError;
use crate::frame::{SourceFrame, Yuv420Frame};

/// Longest wait for one frame before reporting the GPU as stuck.
const FRAME_TIMEOUT: Duration = Duration::from_secs(60);
/// Pause between checks while another thread's poll runs our buffer's map callback.
const CALLBACK_WAIT: Duration = Duration::from_micros(50);

/// A buffer map state: requested, not yet done.
pub(super) const PENDING: u8 = 0;
/// A buffer map state: mapped.
pub(super) const READY: u8 = 1;
/// A buffer map state: the map failed.
pub(super) const FAILED: u8 = 2;

/// Maps `buffer` for `mode`; its callback records the outcome in `state` (READY or FAILED).
pub(super) fn map_into(buffer: &wgpu::Buffer, mode: wgpu::MapMode, state: Arc<AtomicU8>) {
    buffer.map_async(mode, .., move |r| {
        state.store(if r.is_ok() { READY } else { FAILED }, Ordering::Release);
    });
}

/// One ring entry: CPU-visible buffers only (the device-side input and output buffers are
/// shared; queue order serialises their use).
pub(super) struct Slot {
    upload: wgpu::Buffer,
    readback: wgpu::Buffer,
    upload_state: Arc<AtomicU8>,
    readback_state: Arc<AtomicU8>,
    submission: Option<wgpu::SubmissionIndex>,
}

/// Device objects shared by every slot.
pub(super) struct Shared {
    pub(super) ctx: GpuContext,
    pub(super) bind_group: wgpu::BindGroup,
    pub(super) input: wgpu::Buffer,
    pub(super) output: wgpu::Buffer,
    pub(super) in_layout: InLayout,
    pub(super) out_layout: OutLayout,
    /// (pipeline, workgroups x, workgroups y) for luma, then chroma.
    pub(super) dispatches: [(wgpu::ComputePipeline, u32, u32); 2],
    pub(super) out_size: (u32, u32),
    // Kept alive for the bind group.
    pub(super) _params: wgpu::Buffer,
    pub(super) _wm: wgpu::Buffer,
}

impl Shared {
    pub(super) fn new_slot(&self) -> Slot {
        let device = &self.ctx.inner.device;
        let upload = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("compose upload"),
            size: self.in_layout.size,
            usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: true,
        });
        let readback = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("compose readback"),
            size: self.out_layout.size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Slot {
            upload,
            readback,
            upload_state: Arc::new(AtomicU8::new(READY)),
            readback_state: Arc::new(AtomicU8::new(PENDING)),
            submission: None,
        }
    }

    pub(super) fn check_frame(&self, frame: &SourceFrame) -> Result<(), GpuError> {
        let (w, h) = self.in_layout.luma;
        let mismatch = |detail: String| GpuError::FrameSizeMismatch {
            expected_width: w,
            expected_height: h,
            width: frame.width,
            height: frame.height,
            detail,
        };
        if (frame.width, frame.height) != (w, h) {
            return Err(mismatch("dimensions differ".into()));
        }
        let format = self.in_layout.format;
        if frame.format != format {
            return Err(mismatch(format!(
                "the frame is {} but the compositor was built for {}",
                frame.format.as_str(),
                format.as_str()
            )));
        }
        for (i, &(data, stride)) in frame.planes.iter().enumerate().take(format.plane_count()) {
            let (_, row, rows) = self.in_layout.planes[i];
            let need = stride
                .saturating_mul(rows.saturating_sub(1))
                .saturating_add(row);
            if stride < row || data.len() < need {
                return Err(mismatch(format!(
                    "plane {i} has {} bytes with a {stride}-byte stride; {rows} rows of {row} \
                     bytes need a stride of at least {row} and {need} bytes",
                    data.len()
                )));
            }
        }
        Ok(())
    }

    fn check_lost(&self) -> Result<(), GpuError> {
        match self.ctx.lost() {
            Some(reason) => Err(GpuError::DeviceLost(reason)),
            None => Ok(()),
        }
    }

    /// Blocks until `state` leaves PENDING, driving the device up to `submission`.
    pub(super) fn wait_for(
        &self,
        state: &AtomicU8,
        submission: Option<&wgpu::SubmissionIndex>,
    ) -> Result<(), GpuError> {
        let device = &self.ctx.inner.device;
        let deadline = Instant::now() + FRAME_TIMEOUT;
        // A Wait returns once our submission is done and the callbacks its poll collected
        // have run. With many compositors on one device another thread's poll may have
        // collected our map callback and not have run it yet: then wait for it (bounded).
        while state.load(Ordering::Acquire) == PENDING {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            device
                .poll(wgpu::PollType::Wait {
                    submission_index: submission.cloned(),
                    timeout: Some(left),
                })
                .map_err(|e| GpuError::Poll(e.to_string()))?;
            if state.load(Ordering::Acquire) == PENDING {
                if self.ctx.lost().is_some() {
                    break;
                }
                std::thread::sleep(CALLBACK_WAIT);
            }
        }
        match state.load(Ordering::Acquire) {
            READY => Ok(()),
            FAILED => {
                self.check_lost()?;
                Err(GpuError::Map("the buffer could not be mapped".into()))
            }
            _ => {
                self.check_lost()?;
                Err(GpuError::Poll(format!(
                    "the buffer mapping did not complete within {} s",
                    FRAME_TIMEOUT.as_secs()
                )))
            }
        }
    }

    /// Records the compose pass `iterations` times: the bind group, then per iteration the
    /// luma and the chroma dispatch.
    pub(super) fn record_pass(&self, pass: &mut wgpu::ComputePass<'_>, iterations: u32) {
        pass.set_bind_group(0, &self.bind_group, &[]);
        for _ in 0..iterations {
            for (pipeline, x, y) in &self.dispatches {
                pass.set_pipeline(pipeline);
                pass.dispatch_workgroups(*x, *y, 1);
            }
        }
    }

    /// Uploads `frame` into `slot` and submits the compose work for it.
    pub(super) fn run(&self, slot: &mut Slot, frame: &SourceFrame) -> Result<(), GpuError> {
        self.check_lost()?;
        self.wait_for(&slot.upload_state, slot.submission.as_ref())?;
        self.write_planes(slot, frame)?;
        slot.upload.unmap();
        slot.upload_state.store(PENDING, Ordering::Release);
        // A readback left mapped by an earlier failure would make this submission invalid.
        if slot.readback_state.swap(PENDING, Ordering::AcqRel) == READY {
            slot.readback.unmap();
        }
        self.submit(slot)
    }

    /// Copies `frame`'s planes into `slot`'s mapped upload buffer, tightly packed.
    fn write_planes(&self, slot: &Slot, frame: &SourceFrame) -> Result<(), GpuError> {
        let mut view = slot
            .upload
            .get_mapped_range_mut(..)
            .map_err(|e| GpuError::Map(format!("upload buffer: {e}")))?;
        let format = self.in_layout.format;
        for (i, &(data, stride)) in frame.planes.iter().enumerate().take(format.plane_count()) {
            let (start, row, rows) = self.in_layout.planes[i];
            let start = start as usize;
            if stride == row {
                view.slice(start..start + row * rows)
                    .copy_from_slice(&data[..row * rows]);
            } else {
                // Decoders pad their rows: drop the padding.
                for r in 0..rows {
                    view.slice(start + r * row..start + (r + 1) * row)
                        .copy_from_slice(&data[r * stride..r * stride + row]);
                }
            }
        }
        Ok(())
    }

    /// Submits copy in, compose pass, copy out for `slot` and requests both of its maps
    /// (upload for the next frame, readback for this one).
    fn submit(&self, slot: &mut Slot) -> Result<(), GpuError> {
        let inner = &self.ctx.inner;
        let scope = inner.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let mut encoder = inner
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("compose"),
            });
        encoder.copy_buffer_to_buffer(&slot.upload, 0, &self.input, 0, self.in_layout.size);
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("compose"),
                timestamp_writes: None,
            });
            self.record_pass(&mut pass, 1);
        }
        encoder.copy_buffer_to_buffer(&self.output, 0, &slot.readback, 0, self.out_layout.size);
        let submission = inner.queue.submit([encoder.finish()]);
        let (upload, readback) = (slot.upload_state.clone(), slot.readback_state.clone());
        map_into(&slot.upload, wgpu::MapMode::Write, upload);
        map_into(&slot.readback, wgpu::MapMode::Read, readback);
        slot.submission = Some(submission);
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(GpuError::Device(format!("submitting a frame: {e}")));
        }
        Ok(())
    }

    /// Waits for `slot`'s frame and copies its planes out.
    pub(super) fn retrieve(&self, slot: &mut Slot) -> Result<Yuv420Frame, GpuError> {
        self.wait_for(&slot.readback_state, slot.submission.as_ref())?;
        let frame = slot
            .readback
            .get_mapped_range(..)
            .map_err(|e| GpuError::Map(format!("readback buffer: {e}")))
            .map(|view| Yuv420Frame {
                width: self.out_size.0,
                height: self.out_size.1,
                y: self.out_layout.extract(&view, 0),
                u: self.out_layout.extract(&view, 1),
                v: self.out_layout.extract(&view, 2),
                depth: self.out_layout.depth,
            });
        // Unmap even on failure, so the slot can be submitted again.
        slot.readback.unmap();
        slot.readback_state.store(PENDING, Ordering::Release);
        frame
    }
}
