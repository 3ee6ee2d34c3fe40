//! The pipelined compositor: 4:2:0 YUV in (planar, NV12 or P010), planar YUV out (8-bit, or
//! 10-bit little-endian 16-bit samples for HDR kept), one fused compute pass per frame.
//!
//! Per frame: the planes are written into a mapped upload buffer of a ring slot, then one
//! command buffer copies them to the device input buffer, runs the compose pass (two
//! dispatches of specialised pipelines: luma, then chroma; each output sample is scaled,
//! colour-converted and watermarked in one go) and copies the output into that slot's
//! readback buffer, which is mapped asynchronously. With `frames_in_flight` slots the GPU
//! works on later frames while the caller consumes earlier ones; outputs come back strictly in
//! submission order.
//!
//! Files, in the order a compositor's life runs through them:
//! - `checks.rs`: a [`ComposeConfig`] against the device limits (typed `InvalidConfig` errors);
//! - `layout.rs`: where the planes sit in the device input and output buffers;
//! - `plan.rs`: everything the pass needs, derived on the CPU (uniforms, packed watermark,
//!   pipeline keys, workgroup counts);
//! - `setup.rs`: [`GpuCompositor::new`], the plan turned into device objects;
//! - `ring.rs`: one slot's round trip (upload, dispatch, readback, waiting on buffer maps);
//! - `external.rs`: input slots in exported memory that another API fills
//!   ([`GpuCompositor::with_external_input`], [`GpuCompositor::submit_filled`]);
//! - `timing.rs`: [`GpuCompositor::kernel_timing`], the pass alone by timestamp queries;
//! - here: the public types and the ring's bookkeeping (submit, finish, preview).

mod checks;
mod external;
mod layout;
mod plan;
mod ring;
mod setup;
mod timing;

use std::collections::VecDeque;
use std::time::Duration;

use crate::context::AdapterSummary;
use crate::error::GpuError;
use crate::frame::{
    ColorSpec, OutputLight, PreparedWatermark, Rotation, SourceFormat, SourceFrame, Yuv420Frame,
};
use crate::interop::ExportedMemory;
pub use external::{InputLayout, InputPlane};
pub use ring::HopTimes;
use ring::{Shared, Slot};
pub use setup::EXTERNAL_ROW_ALIGN;

/// What [`GpuCompositor::kernel_timing`] measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KernelTiming {
    /// GPU time of one compose pass (both dispatches).
    pub per_frame: Duration,
    /// Bytes one pass must move at least: the source read once, the output written once.
    pub bytes_per_frame: u64,
    /// Source size.
    pub source: (u32, u32),
}

impl KernelTiming {
    /// Effective memory bandwidth of the pass, in bytes per second.
    pub fn bandwidth(&self) -> f64 {
        self.bytes_per_frame as f64 / self.per_frame.as_secs_f64().max(1e-12)
    }
}

/// Everything that stays fixed for a run of frames.
#[derive(Clone, Debug, PartialEq)]
pub struct ComposeConfig {
    /// Coded size of the decoded frames (before rotation).
    pub src_width: u32,
    pub src_height: u32,
    pub src_color: ColorSpec,
    /// Clockwise rotation applied before scaling (output is in display orientation).
    pub rotation: Rotation,
    pub out_width: u32,
    pub out_height: u32,
    /// Already resampled and converted to the light's colour and depth by
    /// [`prepare_watermark`](crate::frame::prepare_watermark) (SDR) or
    /// [`prepare_watermark_hdr`](crate::frame::prepare_watermark_hdr) (HDR kept).
    pub watermark: Option<PreparedWatermark>,
    /// Memory layout of the submitted frames.
    pub src_format: SourceFormat,
    /// The output's light: converted from `src_color` to SDR, tone-mapped to SDR, or kept HDR
    /// at 10 bits; the output's colour and depth follow from it.
    pub light: OutputLight,
}

/// Most frames a compositor keeps in flight.
pub const MAX_FRAMES_IN_FLIGHT: usize = 16;

/// Scales, rotates, colour-converts and watermarks frames on the GPU. `Send`; one per
/// render stream (share the [`GpuContext`](crate::context::GpuContext) between them).
pub struct GpuCompositor {
    shared: Shared,
    slots: Vec<Slot>,
    free: Vec<usize>,
    in_flight: VecDeque<usize>,
    /// Dedicated slot for [`GpuCompositor::compose_one`], so previews never disturb the ring.
    preview: Option<Slot>,
    /// External input: each slot's exported memory, by slot index, until taken.
    exported: Vec<ExportedMemory>,
}

impl GpuCompositor {
    /// Queue a frame; once `frames_in_flight` are queued, returns the oldest finished output (FIFO).
    ///
    /// Precisely: when every slot is busy, the oldest frame is waited for and returned, and the
    /// new frame takes its slot, so `frames_in_flight` frames stay queued on the GPU.
    pub fn submit<'a>(
        &mut self,
        frame: impl Into<SourceFrame<'a>>,
    ) -> Result<Option<Yuv420Frame>, GpuError> {
        let frame = frame.into();
        self.shared.check_frame(&frame)?;
        self.queue(|shared, slot, _| shared.run(slot, &frame))
    }

    /// The ring's one step: a free slot (the oldest output waited for and returned when none
    /// is), given to `run` with its index, then queued; on `run`'s error the slot stays free.
    fn queue<E: From<GpuError>>(
        &mut self,
        run: impl FnOnce(&mut ring::Shared, &mut ring::Slot, usize) -> Result<(), E>,
    ) -> Result<Option<Yuv420Frame>, E> {
        let done = if self.free.is_empty() {
            Some(self.retrieve_oldest()?)
        } else {
            None
        };
        let Some(index) = self.free.pop() else {
            return Err(
                GpuError::Device("no free frame slot after draining the oldest".into()).into(),
            );
        };
        match run(&mut self.shared, &mut self.slots[index], index) {
            Ok(()) => self.in_flight.push_back(index),
            Err(e) => {
                self.free.push(index);
                return Err(e);
            }
        }
        Ok(done)
    }

    /// Drain every frame still in flight, in order.
    pub fn finish(&mut self) -> Result<Vec<Yuv420Frame>, GpuError> {
        let mut out = Vec::with_capacity(self.in_flight.len());
        while !self.in_flight.is_empty() {
            out.push(self.retrieve_oldest()?);
        }
        Ok(out)
    }

    /// Convenience: compose one frame synchronously (preview). Uses its own buffers, so frames
    /// already in flight are unaffected and still come out of `submit`/`finish` in order.
    pub fn compose_one<'a>(
        &mut self,
        frame: impl Into<SourceFrame<'a>>,
    ) -> Result<Yuv420Frame, GpuError> {
        let frame = frame.into();
        self.shared.check_frame(&frame)?;
        let slot = match &mut self.preview {
            Some(slot) => slot,
            None => self.preview.insert(self.shared.new_slot()),
        };
        self.shared.run(slot, &frame)?;
        self.shared.retrieve(slot)
    }

    /// Bytes of GPU-visible memory this compositor holds: its ring of input (upload or
    /// external) and readback buffers, the device input (uploads only) and output buffers,
    /// the watermark and the parameters (a preview slot, once used, counts too). What one
    /// render costs on the card.
    pub fn gpu_bytes(&self) -> u64 {
        let shared = &self.shared;
        let slot = shared.in_layout.size + shared.out_layout.size;
        let slots = (self.slots.len() + self.preview.is_some() as usize) as u64;
        let upload_target = shared.upload_target.as_ref().map_or(0, |(b, _)| b.size());
        slots * slot
            + upload_target
            + shared.out_layout.size
            + shared.wm.size()
            + shared.params.size()
    }

    /// Where the time of the frames composed so far went (CPU side).
    pub fn hop_times(&self) -> HopTimes {
        self.shared.times
    }

    /// Frames submitted and not yet returned.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// The adapter this compositor runs on.
    pub fn adapter(&self) -> &AdapterSummary {
        self.shared.ctx.adapter()
    }

    fn retrieve_oldest(&mut self) -> Result<Yuv420Frame, GpuError> {
        let Some(index) = self.in_flight.pop_front() else {
            return Err(GpuError::Device("no frame in flight".into()));
        };
        // The slot is reusable whatever happens: a failed readback is reported, not retried.
        self.free.push(index);
        self.shared.retrieve(&mut self.slots[index])
    }
}
