//! Vulkan external memory: device buffers whose memory another API on the same GPU can write,
//! so decoded frames reach the compositor without a trip through system memory.
//!
//! The context opens its device with `VK_KHR_external_memory_fd` when the adapter is a Vulkan
//! one that has it ([`open`]); everything else keeps the device exactly as before, and
//! [`GpuContext::interop`](crate::GpuContext::interop) says why there is no interop. With it, a compositor made by
//! [`GpuCompositor::with_external_input`](crate::GpuCompositor::with_external_input) keeps one
//! input buffer per ring slot in exported memory ([`memory`]): each comes with an opaque file
//! descriptor ([`ExportedMemory`]) that the importer (CUDA's `cuImportExternalMemory`, or
//! Vulkan itself, [`GpuContext::import_buffer`](crate::GpuContext::import_buffer)) maps into its own address space.
//!
//! The crate knows nothing of who imports: it hands out descriptors and reads what was written.
//! Ordering is the caller's: writes through an import must be complete (e.g. the CUDA stream
//! synchronised) before the frame is submitted.
//!
//! The only unsafe code of the crate lives here: raw Vulkan handles that wgpu has no safe API
//! for, each call with its contract written beside it.

pub(crate) mod memory;
pub(crate) mod open;

use std::os::fd::OwnedFd;

/// What the device's external memory offers, once the device opened with it.
#[derive(Clone, Copy, Debug)]
pub struct InteropInfo {
    /// `VkPhysicalDeviceIDProperties::deviceUUID`: the same bytes CUDA's `cuDeviceGetUuid`
    /// reports for the same GPU, so an importer can check it is on this device.
    pub device_uuid: [u8; 16],
    /// The device's memory types (exported buffers take a device-local one when they can).
    pub(crate) memory: ash::vk::PhysicalDeviceMemoryProperties,
}

/// Device memory exported as an opaque POSIX file descriptor (`VK_EXTERNAL_MEMORY_HANDLE_TYPE_
/// OPAQUE_FD_BIT`), for one importer. The allocation is dedicated to one buffer, so importers
/// must say so (CUDA: `CUDA_EXTERNAL_MEMORY_DEDICATED`).
#[derive(Debug)]
pub struct ExportedMemory {
    /// The descriptor; an importer takes ownership of it on success (CUDA and Vulkan both do).
    pub fd: OwnedFd,
    /// Bytes of the allocation (what an importer declares; at least `buffer_size`).
    pub allocation_size: u64,
    /// Bytes of the buffer in it, from offset 0.
    pub buffer_size: u64,
    /// The memory type it was allocated from (an importer on Vulkan must use the same).
    pub(crate) memory_type: u32,
    /// Whether that memory type is device-local (VRAM on a discrete GPU).
    pub device_local: bool,
}
