//! Zero-copy decode → compose: NVDEC's frames stay in GPU memory on their way to the wgpu
//! compositor. The compositor keeps its input slots in Vulkan memory it exports
//! ([`GpuCompositor::with_external_input`]); FFmpeg's CUDA context imports that memory
//! (`cuImportExternalMemory`, `cuExternalMemoryGetMappedBuffer`) and each decoded surface is
//! copied device to device into a free slot (`cuMemcpy2DAsync` on the decoders' stream, then
//! `cuStreamSynchronize`, before the compose pass is submitted). Only the output-sized
//! composed frame comes back to system memory, for libx264 / libvpx.
//!
//! [`zero_copy_probe`] decides once per process (where the hardware plan asks, `hardware/plan.rs`)
//! whether the path works: external memory on
//! the compositor's device, libcuda loadable, CUDA's device the same GPU as Vulkan's, and a
//! self-test (`selftest.rs`) that pushes a known frame through exactly the render's copy and
//! compares the composed result with the upload path's. Any failure is a reason string, and
//! renders keep downloading frames (`hwdecode::download`) as before.
//!
//! Files: `layout.rs` the copies' arithmetic (pure, unit-tested); `cuda.rs` the driver calls
//! (cudarc, libcuda loaded at run time); `selftest.rs` the start-up check; here the probe and
//! one stream's input ([`ZeroCopyInput`]).

mod cuda;
pub(crate) mod layout;
mod selftest;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use ffmpeg::frame;
use ffmpeg_next as ffmpeg;
use vidforge_gpu::{GpuCompositor, GpuContext, InputLayout, Yuv420Frame};

use crate::error::MediaError;
use crate::hwdecode::{self, CudaDevice};
use cuda::{Cuda, Imported};
use layout::{DeviceFrame, PlaneCopy, plane_copies};

/// `--zero-copy`: whether NVDEC's frames may reach the wgpu compositor without leaving the
/// GPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ZeroCopyChoice {
    /// When the start-up self-test passes (a wgpu compositor and a CUDA device on the same
    /// GPU); else NVDEC's frames are downloaded, as ever.
    #[default]
    Auto,
    /// Required: starting fails, with the reason, when the path does not work.
    On,
    /// Never: NVDEC's frames are downloaded (and the self-test does not run).
    Off,
}

vidforge_names::enum_names!(ZeroCopyChoice {
    Auto => "auto",
    On => "on",
    Off => "off",
});

/// The process's zero-copy path as the hardware plan decided it: the path that passed its
/// self-test, or why renders download NVDEC's frames instead. Shared by every clone of the
/// engine.
#[derive(Debug)]
pub(crate) struct ZeroCopy {
    path: Result<ZeroCopyPath, String>,
}

impl ZeroCopy {
    /// The plan's decision: `path` when frames stay on the GPU, else why not.
    pub(crate) fn decided(path: Result<ZeroCopyPath, String>) -> Self {
        match &path {
            Ok(_) => tracing::info!("NVDEC frames go to the GPU compositor zero-copy"),
            Err(e) => tracing::debug!("NVDEC frames are downloaded: {e}"),
        }
        ZeroCopy { path }
    }

    /// The working path, or why there is none.
    pub(crate) fn path(&self) -> Result<&ZeroCopyPath, &str> {
        self.path.as_ref().map_err(String::as_str)
    }
}

/// A zero-copy path that passed its self-test: FFmpeg's CUDA context and the wgpu context it
/// feeds, on the same GPU. Cheap to clone; shared by every render of the process.
#[derive(Clone, Debug)]
pub(crate) struct ZeroCopyPath {
    cuda: Cuda,
    gpu: GpuContext,
}

fn hex(bytes: [u8; 16]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// Whether NVDEC's frames can go to `gpu`'s compositor without leaving the GPU: the
/// compositor's device has external memory, libcuda loads, `cuda` is the same GPU, and the
/// self-test's frame, copied through CUDA into exported memory, composes exactly like the
/// same frame uploaded. The error says which step failed; it never panics.
pub(crate) fn zero_copy_probe(gpu: &GpuContext, cuda: &CudaDevice) -> Result<ZeroCopyPath, String> {
    let started = Instant::now();
    let probed = catch_unwind(AssertUnwindSafe(|| probe(gpu, cuda)))
        .unwrap_or_else(|p| Err(format!("the CUDA driver API failed: {}", panic_text(p))));
    let path = probed.map_err(|e| format!("zero-copy NVDEC -> compositor unavailable: {e}"))?;
    tracing::info!(
        self_test_ms = started.elapsed().as_millis() as u64,
        "zero-copy NVDEC -> compositor: self-test passed"
    );
    Ok(path)
}

fn probe(gpu: &GpuContext, cuda: &CudaDevice) -> Result<ZeroCopyPath, String> {
    let info = gpu
        .interop()
        .map_err(|e| format!("the compositor's GPU has no external memory ({e})"))?;
    let cuda = Cuda::new(cuda)?;
    let uuid = cuda.device_uuid()?;
    if uuid != info.device_uuid {
        return Err(format!(
            "CUDA's GPU {} is not the compositor's {}",
            hex(uuid),
            hex(info.device_uuid)
        ));
    }
    let path = ZeroCopyPath {
        cuda,
        gpu: gpu.clone(),
    };
    selftest::run(&path)?;
    Ok(path)
}

impl ZeroCopyPath {
    /// The wgpu context this path feeds.
    pub(crate) fn gpu(&self) -> &GpuContext {
        &self.gpu
    }
}

/// The planes of a decoded CUDA frame in device memory, when its surfaces are in a layout the
/// compositor reads (NV12, P010); `None` for other frames.
pub(crate) fn device_frame(f: &frame::Video) -> Option<DeviceFrame> {
    let format = layout::source_format(hwdecode::cuda_sw_format(f)?)?;
    let plane = |i: usize| {
        // SAFETY: a CUDA frame's data pointers are device addresses; read, not dereferenced.
        let (ptr, pitch) = unsafe { ((*f.as_ptr()).data[i], (*f.as_ptr()).linesize[i]) };
        (ptr as u64, usize::try_from(pitch).unwrap_or(0))
    };
    Some(DeviceFrame {
        format,
        width: f.width(),
        height: f.height(),
        planes: [plane(0), plane(1)],
    })
}

/// One stream's compositor inputs, mapped into FFmpeg's CUDA context. Dropped before its
/// compositor (the imports go first).
pub(crate) struct ZeroCopyInput {
    imported: Vec<Imported>,
    layout: InputLayout,
    cuda: Cuda,
}

impl ZeroCopyInput {
    /// Imports the exported inputs of `gpu` (made with external input on `path`'s context).
    pub(crate) fn new(path: &ZeroCopyPath, gpu: &mut GpuCompositor) -> Result<Self, MediaError> {
        let exported = gpu.take_exported_inputs();
        if exported.is_empty() {
            return Err(MediaError::failed(
                "the compositor has no exported inputs to copy frames into",
            ));
        }
        let imported = exported
            .into_iter()
            .map(|m| path.cuda.import(m))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| MediaError::failed(format!("mapping the compositor into CUDA: {e}")))?;
        Ok(ZeroCopyInput {
            imported,
            layout: gpu.input_layout(),
            cuda: path.cuda.clone(),
        })
    }

    /// The copies that move `frame` as it is into this stream's inputs, or why it cannot go.
    pub(crate) fn copies(&self, frame: &DeviceFrame) -> Result<[PlaneCopy; 2], String> {
        plane_copies(frame, &self.layout)
    }

    /// Makes `copies` (of one frame, from [`Self::copies`]) into a free slot of `gpu` (device
    /// to device, waited for) and submits it; returns the oldest finished output once the ring
    /// is full. The frame's surfaces may be released when this returns.
    pub(crate) fn submit(
        &self,
        gpu: &mut GpuCompositor,
        copies: &[PlaneCopy; 2],
    ) -> Result<Option<Yuv420Frame>, MediaError> {
        gpu.submit_filled(|slot| {
            let dst = self.imported.get(slot).ok_or_else(|| {
                MediaError::failed(format!("compositor slot {slot} was never imported"))
            })?;
            self.cuda.copy_into(dst, copies).map_err(|e| {
                MediaError::failed(format!("copying a decoded frame into the compositor: {e}"))
            })
        })
    }
}
