//! The CUDA driver calls of the zero-copy path, through `cudarc`'s raw bindings with libcuda
//! loaded at run time (checked present before the first call, so a host without it gets a
//! reason, never a panic). Everything runs on FFmpeg's own CUDA context (pushed current for
//! the call, popped after) and on the stream its decoders copy surfaces on, so a copy out of
//! a decoded frame is ordered after the decoder's copy into it.

use std::os::fd::IntoRawFd;

use cudarc::driver::sys;
use vidforge_gpu::ExportedMemory;

use super::layout::PlaneCopy;
use crate::hwdecode::CudaDevice;

/// A CUDA call's failure in the driver's words.
fn check(r: sys::CUresult, what: &str) -> Result<(), String> {
    r.result().map_err(|e| format!("{what}: {e}"))
}

/// Whether libcuda can be loaded (the NVIDIA driver's CUDA library).
pub(super) fn driver_present() -> Result<(), String> {
    // SAFETY: only tries to dlopen the library's candidate names.
    if unsafe { sys::is_culib_present() } {
        Ok(())
    } else {
        Err("libcuda (the NVIDIA driver's CUDA library) cannot be loaded".into())
    }
}

/// FFmpeg's CUDA context and decode stream, kept alive by the device reference.
#[derive(Clone, Debug)]
pub(crate) struct Cuda {
    /// Keeps FFmpeg's device context, and with it `ctx` and `stream`, alive.
    _device: CudaDevice,
    ctx: sys::CUcontext,
    stream: sys::CUstream,
}

// SAFETY: CUDA contexts and streams may be used from any thread (the context is pushed on the
// calling thread for each use); the handles stay valid while `device` holds FFmpeg's context.
unsafe impl Send for Cuda {}
// SAFETY: as above; nothing here mutates through `&Cuda` but the driver's own state.
unsafe impl Sync for Cuda {}

/// The context current on this thread until dropped.
struct Current;

impl Drop for Current {
    fn drop(&mut self) {
        let mut popped = std::ptr::null_mut();
        // SAFETY: pops the context `Cuda::enter` pushed on this thread.
        let _ = unsafe { sys::cuCtxPopCurrent_v2(&mut popped) };
    }
}

impl Cuda {
    /// FFmpeg's context of `device` (libcuda must be present: [`driver_present`]).
    pub(super) fn new(device: &CudaDevice) -> Result<Self, String> {
        driver_present()?;
        let (ctx, stream) = device.raw_handles();
        if ctx.is_null() {
            return Err("FFmpeg's CUDA device has no context".into());
        }
        Ok(Cuda {
            _device: device.clone(),
            ctx: ctx.cast(),
            stream: stream.cast(),
        })
    }

    fn enter(&self) -> Result<Current, String> {
        // SAFETY: a live context (held by `self._device`).
        check(
            unsafe { sys::cuCtxPushCurrent_v2(self.ctx) },
            "cuCtxPushCurrent",
        )?;
        Ok(Current)
    }

    /// The GPU's UUID, to match it with the Vulkan device's.
    pub(super) fn device_uuid(&self) -> Result<[u8; 16], String> {
        let _current = self.enter()?;
        let mut dev: sys::CUdevice = 0;
        // SAFETY: out-pointers; the context is current.
        check(unsafe { sys::cuCtxGetDevice(&mut dev) }, "cuCtxGetDevice")?;
        let mut uuid = sys::CUuuid_st { bytes: [0; 16] };
        // SAFETY: as above.
        check(
            unsafe { sys::cuDeviceGetUuid(&mut uuid, dev) },
            "cuDeviceGetUuid",
        )?;
        Ok(uuid.bytes.map(|b| b as u8))
    }

    /// Imports `memory` (a dedicated opaque-fd allocation) and maps its buffer.
    pub(super) fn import(&self, memory: ExportedMemory) -> Result<Imported, String> {
        let _current = self.enter()?;
        let desc = sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC {
            type_: sys::CUexternalMemoryHandleType::CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
            handle: sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC_st__bindgen_ty_1 {
                fd: std::os::fd::AsRawFd::as_raw_fd(&memory.fd),
            },
            size: memory.allocation_size,
            flags: sys::CUDA_EXTERNAL_MEMORY_DEDICATED,
            reserved: [0; 16],
        };
        let mut ext = std::ptr::null_mut();
        // SAFETY: a valid descriptor of an allocation of `allocation_size` bytes.
        check(
            unsafe { sys::cuImportExternalMemory(&mut ext, &desc) },
            "cuImportExternalMemory",
        )?;
        // The import owns the descriptor now (a failed one left it to us: closed by the drop).
        let _ = memory.fd.into_raw_fd();
        let mut imported = Imported {
            cuda: self.clone(),
            ext,
            ptr: 0,
            size: memory.buffer_size,
        };
        let buffer = sys::CUDA_EXTERNAL_MEMORY_BUFFER_DESC {
            offset: 0,
            size: memory.buffer_size,
            flags: 0,
            reserved: [0; 16],
        };
        // SAFETY: the buffer lies inside the imported allocation.
        check(
            unsafe { sys::cuExternalMemoryGetMappedBuffer(&mut imported.ptr, ext, &buffer) },
            "cuExternalMemoryGetMappedBuffer",
        )?;
        Ok(imported)
    }

    /// Copies `copies` into `dst` on the decode stream and waits for them: when this returns
    /// the bytes are in `dst` (and the source frame may go).
    pub(super) fn copy_into(&self, dst: &Imported, copies: &[PlaneCopy]) -> Result<(), String> {
        let _current = self.enter()?;
        for c in copies {
            let end = c.dst_offset + (c.dst_pitch * c.rows.saturating_sub(1) + c.row_bytes) as u64;
            if end > dst.size {
                return Err(format!(
                    "a copy ending at {end} overruns {} bytes",
                    dst.size
                ));
            }
            let p = sys::CUDA_MEMCPY2D {
                srcXInBytes: 0,
                srcY: 0,
                srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
                srcHost: std::ptr::null(),
                srcDevice: c.src,
                srcArray: std::ptr::null_mut(),
                srcPitch: c.src_pitch,
                dstXInBytes: 0,
                dstY: 0,
                dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
                dstHost: std::ptr::null_mut(),
                dstDevice: dst.ptr + c.dst_offset,
                dstArray: std::ptr::null_mut(),
                dstPitch: c.dst_pitch,
                WidthInBytes: c.row_bytes,
                Height: c.rows,
            };
            // SAFETY: device ranges checked above (destination) and by `plane_copies`
            // (source rows within their pitch); the context is current.
            check(
                unsafe { sys::cuMemcpy2DAsync_v2(&p, self.stream) },
                "cuMemcpy2DAsync",
            )?;
        }
        // SAFETY: the context's stream; waits for the copies above.
        check(
            unsafe { sys::cuStreamSynchronize(self.stream) },
            "cuStreamSynchronize",
        )
    }

    /// Device memory holding `bytes` (the self-test's source frame).
    pub(super) fn upload(&self, bytes: &[u8]) -> Result<DeviceBytes, String> {
        let _current = self.enter()?;
        let mut ptr = 0;
        // SAFETY: out-pointer; the context is current.
        check(
            unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes.len()) },
            "cuMemAlloc",
        )?;
        let owned = DeviceBytes {
            cuda: self.clone(),
            ptr,
        };
        // SAFETY: `ptr` holds `bytes.len()` bytes.
        check(
            unsafe { sys::cuMemcpyHtoD_v2(ptr, bytes.as_ptr().cast(), bytes.len()) },
            "cuMemcpyHtoD",
        )?;
        Ok(owned)
    }
}

/// Exported compositor memory mapped into FFmpeg's CUDA context: unmapped and released on
/// drop (the compositor's Vulkan memory lives on until the compositor goes).
#[derive(Debug)]
pub(crate) struct Imported {
    cuda: Cuda,
    ext: sys::CUexternalMemory,
    ptr: sys::CUdeviceptr,
    size: u64,
}

// SAFETY: plain handles of a context usable from any thread (see `Cuda`).
unsafe impl Send for Imported {}
// SAFETY: as above; `&Imported` only lends its address.
unsafe impl Sync for Imported {}

impl Drop for Imported {
    fn drop(&mut self) {
        let Ok(_current) = self.cuda.enter() else {
            return;
        };
        // SAFETY: the mapping and the import this value made, released once.
        unsafe {
            if self.ptr != 0 {
                let _ = sys::cuMemFree_v2(self.ptr);
            }
            let _ = sys::cuDestroyExternalMemory(self.ext);
        }
    }
}

/// A device allocation, freed on drop.
pub(super) struct DeviceBytes {
    cuda: Cuda,
    pub(super) ptr: sys::CUdeviceptr,
}

impl Drop for DeviceBytes {
    fn drop(&mut self) {
        if let Ok(_current) = self.cuda.enter() {
            // SAFETY: this value's allocation, freed once.
            let _ = unsafe { sys::cuMemFree_v2(self.ptr) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host without the NVIDIA driver gets a reason, not a panic; one with it loads it.
    #[test]
    fn the_driver_check_says_why_without_libcuda() {
        match driver_present() {
            Ok(()) => eprintln!("libcuda present"),
            Err(e) => assert!(e.contains("libcuda"), "{e}"),
        }
    }
}
