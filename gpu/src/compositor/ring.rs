//! One ring slot's round trip: the frame's planes written into the slot's input (its mapped
//! upload buffer, or, for a slot with its own device input, a queue write or whoever fills
//! that memory), one command buffer (copy in, the compose pass, copy out), and the
//! asynchronous readback, waited for with a bounded poll. [`HopTimes`] adds up where the
//! time went.

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

/// Where the time of a compositor's frames went, summed over its life (CPU wall time on the
/// calling thread: the GPU's own time shows as `wait`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HopTimes {
    /// Writing the source planes: host bytes into the upload buffer (or a queue write), or
    /// the caller's fill of an external input (e.g. a CUDA device-to-device copy and its
    /// stream synchronisation).
    pub input: Duration,
    /// Recording and submitting the copy-in, compose and copy-out commands.
    pub submit: Duration,
    /// Blocked on the GPU: a slot's upload buffer or readback not yet mapped, i.e. the
    /// compose pass and the output's copy to host-visible memory still running.
    pub wait: Duration,
    /// Copying the composed planes out of the mapped readback buffer.
    pub readback: Duration,
    /// Frames composed.
    pub frames: u64,
}

/// Where a slot's source frame goes before the pass reads it.
pub(super) enum SlotInput {
    /// A mapped upload buffer, copied into the shared device input on submit.
    Upload {
        buffer: wgpu::Buffer,
        state: Arc<AtomicU8>,
    },
    /// The slot's own device input, bound by its own bind group: written by queue writes
    /// (host frames) or by whoever imported its memory (external input).
    Device {
        buffer: wgpu::Buffer,
        bind_group: wgpu::BindGroup,
    },
}

/// One ring entry: its input and its CPU-visible readback (the device output buffer is
/// shared; queue order serialises its use, as it does the shared input's).
pub(super) struct Slot {
    input: SlotInput,
    readback: wgpu::Buffer,
    readback_state: Arc<AtomicU8>,
    submission: Option<wgpu::SubmissionIndex>,
}

/// Device objects shared by every slot.
pub(super) struct Shared {
    pub(super) ctx: GpuContext,
    /// The device input and its bind group, for slots that upload (none with external input).
    pub(super) upload_target: Option<(wgpu::Buffer, wgpu::BindGroup)>,
    pub(super) output: wgpu::Buffer,
    pub(super) in_layout: InLayout,
    pub(super) out_layout: OutLayout,
    /// (pipeline, workgroups x, workgroups y) for luma, then chroma.
    pub(super) dispatches: [(wgpu::ComputePipeline, u32, u32); 2],
    pub(super) out_size: (u32, u32),
    pub(super) params: wgpu::Buffer,
    pub(super) wm: wgpu::Buffer,
    pub(super) times: HopTimes,
}

impl Shared {
    /// A slot like the ring's: uploading when the compositor does, else with its own
    /// (not exported) device input.
    pub(super) fn new_slot(&self) -> Slot {
        let device = &self.ctx.inner.device;
        let input = if self.upload_target.is_some() {
            SlotInput::Upload {
                buffer: device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("compose upload"),
                    size: self.in_layout.size,
                    usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
                    mapped_at_creation: true,
                }),
                state: Arc::new(AtomicU8::new(READY)),
            }
        } else {
            use wgpu::BufferUsages as U;
            let buffer = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("compose input"),
                size: self.in_layout.size,
                usage: U::STORAGE | U::COPY_DST | U::COPY_SRC,
                mapped_at_creation: false,
            });
            self.device_input(buffer)
        };
        self.slot_with(input)
    }

    /// A slot input over `buffer` (a device input of the layout's size) and its bind group.
    pub(super) fn device_input(&self, buffer: wgpu::Buffer) -> SlotInput {
        let bind_group = bind_group(&self.ctx, [&self.params, &buffer, &self.wm, &self.output]);
        SlotInput::Device { buffer, bind_group }
    }

    pub(super) fn slot_with(&self, input: SlotInput) -> Slot {
        let readback = self
            .ctx
            .inner
            .device
            .create_buffer(&wgpu::BufferDescriptor {
                label: Some("compose readback"),
                size: self.out_layout.size,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
        Slot {
            input,
            readback,
            readback_state: Arc::new(AtomicU8::new(PENDING)),
            submission: None,
        }
    }

    /// The bind group the pass uses for `slot`'s frame.
    pub(super) fn bind_group<'a>(&'a self, slot: &'a Slot) -> Option<&'a wgpu::BindGroup> {
        match &slot.input {
            SlotInput::Upload { .. } => self.upload_target.as_ref().map(|(_, g)| g),
            SlotInput::Device { bind_group, .. } => Some(bind_group),
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
            let (row, rows) = (self.in_layout.planes[i].row, self.in_layout.planes[i].rows);
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

    /// [`Shared::wait_for`], its time counted as waiting on the GPU.
    fn wait_timed(
        &mut self,
        state: &AtomicU8,
        submission: Option<&wgpu::SubmissionIndex>,
    ) -> Result<(), GpuError> {
        let t = Instant::now();
        let r = self.wait_for(state, submission);
        self.times.wait += t.elapsed();
        r
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

    /// Records the compose pass `iterations` times over `bind_group`: per iteration the luma
    /// and the chroma dispatch.
    pub(super) fn record_pass(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        bind_group: &wgpu::BindGroup,
        iterations: u32,
    ) {
        pass.set_bind_group(0, bind_group, &[]);
        for _ in 0..iterations {
            for (pipeline, x, y) in &self.dispatches {
                pass.set_pipeline(pipeline);
                pass.dispatch_workgroups(*x, *y, 1);
            }
        }
    }

    /// Writes `frame` into `slot`'s input and submits the compose work for it.
    pub(super) fn run(&mut self, slot: &mut Slot, frame: &SourceFrame) -> Result<(), GpuError> {
        self.check_lost()?;
        match &slot.input {
            SlotInput::Upload { buffer, state } => {
                self.wait_timed(state, slot.submission.as_ref())?;
                let t = Instant::now();
                {
                    let mut view = buffer
                        .get_mapped_range_mut(..)
                        .map_err(|e| GpuError::Map(format!("upload buffer: {e}")))?;
                    self.write_planes(frame, |at, bytes| {
                        view.slice(at..at + bytes.len()).copy_from_slice(bytes)
                    });
                }
                buffer.unmap();
                state.store(PENDING, Ordering::Release);
                self.times.input += t.elapsed();
            }
            SlotInput::Device { buffer, .. } => {
                // Queue writes land before the next submission and after earlier ones, so a
                // frame still reading this input keeps its bytes.
                let t = Instant::now();
                let size = std::num::NonZeroU64::new(self.in_layout.size)
                    .ok_or_else(|| GpuError::Device("empty compositor input".into()))?;
                let Some(mut view) = self.ctx.inner.queue.write_buffer_with(buffer, 0, size) else {
                    return Err(GpuError::Device(
                        "staging a frame for the GPU failed".into(),
                    ));
                };
                self.write_planes(frame, |at, bytes| {
                    view.slice(at..at + bytes.len()).copy_from_slice(bytes)
                });
                drop(view);
                self.times.input += t.elapsed();
            }
        }
        self.submit(slot)
    }

    /// Submits `slot`'s frame, whose input someone else has written (external input).
    pub(super) fn run_filled(&mut self, slot: &mut Slot) -> Result<(), GpuError> {
        self.check_lost()?;
        self.submit(slot)
    }

    /// Hands `frame`'s planes to `put` (byte offset in the input buffer, bytes) at the
    /// layout's offsets and pitches.
    fn write_planes(&self, frame: &SourceFrame, mut put: impl FnMut(usize, &[u8])) {
        let format = self.in_layout.format;
        for (i, &(data, stride)) in frame.planes.iter().enumerate().take(format.plane_count()) {
            let p = self.in_layout.planes[i];
            let start = p.offset as usize;
            if stride == p.row && p.pitch == p.row {
                put(start, &data[..p.row * p.rows]);
            } else {
                // Decoders pad their rows: drop the padding (and add the layout's).
                for r in 0..p.rows {
                    put(start + r * p.pitch, &data[r * stride..r * stride + p.row]);
                }
            }
        }
    }

    /// Submits copy in (uploading slots), compose pass, copy out for `slot` and requests its
    /// maps (the upload buffer's for the next frame, the readback's for this one).
    fn submit(&mut self, slot: &mut Slot) -> Result<(), GpuError> {
        // A readback left mapped by an earlier failure would make this submission invalid.
        if slot.readback_state.swap(PENDING, Ordering::AcqRel) == READY {
            slot.readback.unmap();
        }
        let t = Instant::now();
        let inner = &self.ctx.inner;
        let scope = inner.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let mut encoder = inner
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("compose"),
            });
        if let (SlotInput::Upload { buffer, .. }, Some((input, _))) =
            (&slot.input, &self.upload_target)
        {
            encoder.copy_buffer_to_buffer(buffer, 0, input, 0, self.in_layout.size);
        }
        let bind_group = self
            .bind_group(slot)
            .ok_or_else(|| GpuError::Device("an uploading slot without a device input".into()))?;
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("compose"),
                timestamp_writes: None,
            });
            self.record_pass(&mut pass, bind_group, 1);
        }
        encoder.copy_buffer_to_buffer(&self.output, 0, &slot.readback, 0, self.out_layout.size);
        let submission = inner.queue.submit([encoder.finish()]);
        if let SlotInput::Upload { buffer, state } = &slot.input {
            map_into(buffer, wgpu::MapMode::Write, state.clone());
        }
        map_into(
            &slot.readback,
            wgpu::MapMode::Read,
            slot.readback_state.clone(),
        );
        slot.submission = Some(submission);
        let validation = pollster::block_on(scope.pop());
        self.times.submit += t.elapsed();
        if let Some(e) = validation {
            return Err(GpuError::Device(format!("submitting a frame: {e}")));
        }
        Ok(())
    }

    /// Waits for `slot`'s frame and copies its planes out.
    pub(super) fn retrieve(&mut self, slot: &mut Slot) -> Result<Yuv420Frame, GpuError> {
        self.wait_timed(&slot.readback_state, slot.submission.as_ref())?;
        let t = Instant::now();
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
        self.times.readback += t.elapsed();
        self.times.frames += 1;
        frame
    }
}

/// Bindings 0..=3 of compose.wgsl, in order: the uniforms, the input, the watermark, the
/// output.
pub(super) fn bind_group(ctx: &GpuContext, buffers: [&wgpu::Buffer; 4]) -> wgpu::BindGroup {
    let entries: [wgpu::BindGroupEntry; 4] = std::array::from_fn(|i| wgpu::BindGroupEntry {
        binding: i as u32,
        resource: buffers[i].as_entire_binding(),
    });
    ctx.inner
        .device
        .create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("compose"),
            layout: &ctx.inner.layout,
            entries: &entries,
        })
}
