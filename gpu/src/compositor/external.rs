//! External input: the ring's slots read their source frames from exported device memory that
//! another API writes (CUDA copies NVDEC's surfaces into it, in the media crate). The
//! compositor tells the writer where each plane goes ([`InputLayout`]) and hands out each
//! slot's memory once ([`GpuCompositor::take_exported_inputs`]); per frame,
//! [`GpuCompositor::submit_filled`] picks a free slot, lets the writer fill it, and submits.
//!
//! A slot is free once its previous frame's output has been read back, which means the GPU is
//! done reading its input: the writer never overwrites bytes a pass still reads. The writer's
//! copy must be complete when its fill returns (the GPU reads the input as soon as the frame
//! is submitted).

use super::GpuCompositor;
use crate::error::GpuError;
use crate::frame::{SourceFormat, Yuv420Frame};
use crate::interop::ExportedMemory;

/// Where one memory plane of a source frame sits in an input buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InputPlane {
    /// Byte offset of the plane's first row.
    pub offset: u64,
    /// Bytes of one row's samples.
    pub row_bytes: u64,
    pub rows: u64,
    /// Bytes from one row's start to the next.
    pub pitch: u64,
}

/// Where a compositor reads its source frame from, plane by plane (two planes for NV12 and
/// P010: luma, then interleaved chroma; three for planar).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputLayout {
    pub format: SourceFormat,
    pub width: u32,
    pub height: u32,
    pub planes: Vec<InputPlane>,
    /// Bytes of each slot's input buffer.
    pub size: u64,
}

impl GpuCompositor {
    /// Where the planes of a submitted frame go in a slot's input.
    pub fn input_layout(&self) -> InputLayout {
        let l = &self.shared.in_layout;
        let planes = l.planes[..l.format.plane_count()]
            .iter()
            .map(|p| InputPlane {
                offset: p.offset,
                row_bytes: p.row as u64,
                rows: p.rows as u64,
                pitch: p.pitch as u64,
            })
            .collect();
        InputLayout {
            format: l.format,
            width: l.luma.0,
            height: l.luma.1,
            planes,
            size: l.size,
        }
    }

    /// Each slot's exported input memory, by slot index (the index [`submit_filled`] names):
    /// handed out once, empty afterwards and for compositors that upload.
    ///
    /// [`submit_filled`]: GpuCompositor::submit_filled
    pub fn take_exported_inputs(&mut self) -> Vec<ExportedMemory> {
        std::mem::take(&mut self.exported)
    }

    /// Whether the slots read exported memory ([`GpuCompositor::with_external_input`]).
    pub fn has_external_input(&self) -> bool {
        self.shared.upload_target.is_none()
    }

    /// Queues a frame whose input `fill` writes into the memory of slot `index` (its
    /// [`take_exported_inputs`] entry), laid out as [`input_layout`] says; returns the oldest
    /// finished output once `frames_in_flight` are queued, as
    /// [`submit`](GpuCompositor::submit) does.
    ///
    /// `fill`'s writes must be complete when it returns. When it fails, the slot stays free
    /// and its error is returned (an output drained to free the slot is lost with it).
    ///
    /// [`take_exported_inputs`]: GpuCompositor::take_exported_inputs
    /// [`input_layout`]: GpuCompositor::input_layout
    pub fn submit_filled<E: From<GpuError>>(
        &mut self,
        fill: impl FnOnce(usize) -> Result<(), E>,
    ) -> Result<Option<Yuv420Frame>, E> {
        if !self.has_external_input() {
            return Err(GpuError::Interop("this compositor uploads its input".into()).into());
        }
        self.queue(|shared, slot, index| {
            let t = std::time::Instant::now();
            let filled = fill(index);
            shared.times.input += t.elapsed();
            filled?;
            shared.run_filled(slot).map_err(E::from)
        })
    }
}
