//! Exported and imported buffers: a `VkBuffer` created for opaque-fd external memory, bound to
//! a dedicated allocation that is exported (its descriptor taken with `vkGetMemoryFdKHR`) or
//! imported from a descriptor, then handed to wgpu, which frees the buffer and the memory
//! when the `wgpu::Buffer` goes. Until then a guard frees them on every error path.

use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};

use ash::{khr, vk};
use wgpu::hal::api::Vulkan;

use super::open::{BUFFER_USAGE, HANDLE};
use super::{ExportedMemory, InteropInfo};
use crate::error::GpuError;

/// What wgpu sees of the buffer: the usages `BUFFER_USAGE` gives it.
const WGPU_USAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

/// The first device-local memory type `bits` allows, else the first one allowed (never a
/// protected or lazily allocated one), and whether it is device-local.
pub(super) fn pick_memory_type(
    props: &vk::PhysicalDeviceMemoryProperties,
    bits: u32,
) -> Option<(u32, bool)> {
    use vk::MemoryPropertyFlags as F;
    let count = (props.memory_type_count as usize).min(props.memory_types.len());
    let usable = |&(i, t): &(usize, &vk::MemoryType)| {
        bits & (1 << i) != 0
            && !t
                .property_flags
                .intersects(F::PROTECTED | F::LAZILY_ALLOCATED)
    };
    let types = || {
        props.memory_types[..count]
            .iter()
            .enumerate()
            .filter(usable)
    };
    let local = types().find(|(_, t)| t.property_flags.contains(F::DEVICE_LOCAL));
    let (i, t) = local.or_else(|| types().next())?;
    Some((i as u32, t.property_flags.contains(F::DEVICE_LOCAL)))
}

fn vk_error(what: &str, e: vk::Result) -> GpuError {
    match e {
        vk::Result::ERROR_OUT_OF_DEVICE_MEMORY | vk::Result::ERROR_OUT_OF_HOST_MEMORY => {
            GpuError::OutOfMemory(format!("{what}: {e}"))
        }
        _ => GpuError::Interop(format!("{what}: {e}")),
    }
}

/// A buffer and its memory not yet handed to wgpu: destroyed on drop unless taken.
struct Pending<'a> {
    raw: &'a ash::Device,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
}

impl Pending<'_> {
    fn take(mut self) -> (vk::Buffer, vk::DeviceMemory) {
        let taken = (self.buffer, self.memory);
        self.buffer = vk::Buffer::null();
        self.memory = vk::DeviceMemory::null();
        taken
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        // SAFETY: handles this guard created and nothing else uses (the GPU never saw them);
        // null handles are ignored by Vulkan.
        unsafe {
            self.raw.destroy_buffer(self.buffer, None);
            self.raw.free_memory(self.memory, None);
        }
    }
}

/// A buffer of `size` bytes that may live in opaque-fd external memory, and its requirements.
fn external_buffer(
    raw: &ash::Device,
    size: u64,
) -> Result<(Pending<'_>, vk::MemoryRequirements), GpuError> {
    if size == 0 {
        return Err(GpuError::Interop("an exported buffer needs a size".into()));
    }
    let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(HANDLE);
    let info = vk::BufferCreateInfo::default()
        .size(size)
        .usage(BUFFER_USAGE)
        .sharing_mode(vk::SharingMode::EXCLUSIVE)
        .push_next(&mut external);
    // SAFETY: a valid device and create info.
    let buffer = unsafe { raw.create_buffer(&info, None) }
        .map_err(|e| vk_error("creating an external buffer", e))?;
    let pending = Pending {
        raw,
        buffer,
        memory: vk::DeviceMemory::null(),
    };
    // SAFETY: the buffer was just created on this device.
    let reqs = unsafe { raw.get_buffer_memory_requirements(buffer) };
    Ok((pending, reqs))
}

/// Allocates `alloc` (extended by the caller) dedicated to `pending`'s buffer.
fn allocate_dedicated(
    pending: &mut Pending<'_>,
    alloc: vk::MemoryAllocateInfo<'_>,
    what: &str,
) -> Result<(), GpuError> {
    let mut dedicated = vk::MemoryDedicatedAllocateInfo::default().buffer(pending.buffer);
    let alloc = alloc.push_next(&mut dedicated);
    // SAFETY: a valid allocate info whose chain names this device's buffer.
    pending.memory =
        unsafe { pending.raw.allocate_memory(&alloc, None) }.map_err(|e| vk_error(what, e))?;
    Ok(())
}

/// Binds `pending`'s memory to its buffer.
fn bind(pending: &Pending<'_>) -> Result<(), GpuError> {
    // SAFETY: unbound buffer, memory of its requirements' size and type, offset 0.
    unsafe {
        pending
            .raw
            .bind_buffer_memory(pending.buffer, pending.memory, 0)
    }
    .map_err(|e| vk_error("binding external memory", e))
}

/// The finished pair as a wgpu buffer of `size` bytes, which then owns both.
fn into_wgpu(device: &wgpu::Device, pending: Pending<'_>, size: u64, label: &str) -> wgpu::Buffer {
    let (buffer, memory) = pending.take();
    // SAFETY: a bound buffer of `size` bytes at offset 0 of `memory`, used by wgpu alone from
    // here on (it destroys both when the wgpu buffer is dropped).
    let hal_buffer =
        unsafe { wgpu::hal::vulkan::Buffer::from_raw_managed(buffer, memory, 0, size) };
    let desc = wgpu::BufferDescriptor {
        label: Some(label),
        size,
        usage: WGPU_USAGE,
        mapped_at_creation: false,
    };
    // SAFETY: created on this device with the usages `desc` declares, bound, non-empty.
    unsafe { device.create_buffer_from_hal::<Vulkan>(hal_buffer, &desc) }
}

/// See [`GpuContext::export_buffer`](crate::GpuContext::export_buffer).
pub(crate) fn export_buffer(
    device: &wgpu::Device,
    info: &InteropInfo,
    size: u64,
    label: &str,
) -> Result<(wgpu::Buffer, ExportedMemory), GpuError> {
    // SAFETY: the guard only lends the device's handles; nothing is destroyed through it.
    let hal = unsafe { device.as_hal::<Vulkan>() }
        .ok_or_else(|| GpuError::Interop("the device is not a Vulkan one".into()))?;
    let raw = hal.raw_device();
    let (mut pending, reqs) = external_buffer(raw, size)?;
    let (memory_type, device_local) = pick_memory_type(&info.memory, reqs.memory_type_bits)
        .ok_or_else(|| GpuError::Interop("no memory type for an exported buffer".into()))?;
    let mut export = vk::ExportMemoryAllocateInfo::default().handle_types(HANDLE);
    let alloc = vk::MemoryAllocateInfo::default()
        .allocation_size(reqs.size)
        .memory_type_index(memory_type)
        .push_next(&mut export);
    allocate_dedicated(&mut pending, alloc, "allocating exported memory")?;
    bind(&pending)?;
    let fd_api = khr::external_memory_fd::Device::new(hal.shared_instance().raw_instance(), raw);
    let get = vk::MemoryGetFdInfoKHR::default()
        .memory(pending.memory)
        .handle_type(HANDLE);
    // SAFETY: exportable memory of this device; the new descriptor is ours to own.
    let fd = unsafe { fd_api.get_memory_fd(&get) }
        .map_err(|e| vk_error("exporting memory as an fd", e))?;
    // SAFETY: a fresh descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let exported = ExportedMemory {
        fd,
        allocation_size: reqs.size,
        buffer_size: size,
        memory_type,
        device_local,
    };
    Ok((into_wgpu(device, pending, size, label), exported))
}

/// See [`GpuContext::import_buffer`](crate::GpuContext::import_buffer).
pub(crate) fn import_buffer(
    device: &wgpu::Device,
    exported: ExportedMemory,
    label: &str,
) -> Result<wgpu::Buffer, GpuError> {
    // SAFETY: as in `export_buffer`.
    let hal = unsafe { device.as_hal::<Vulkan>() }
        .ok_or_else(|| GpuError::Interop("the device is not a Vulkan one".into()))?;
    let raw = hal.raw_device();
    let ExportedMemory {
        fd,
        allocation_size,
        buffer_size,
        memory_type,
        ..
    } = exported;
    let (mut pending, reqs) = external_buffer(raw, buffer_size)?;
    if reqs.memory_type_bits & (1 << memory_type) == 0 || reqs.size > allocation_size {
        return Err(GpuError::Interop(format!(
            "the exported memory (type {memory_type}, {allocation_size} bytes) cannot hold \
             this buffer (types {:#x}, {} bytes)",
            reqs.memory_type_bits, reqs.size
        )));
    }
    let mut import = vk::ImportMemoryFdInfoKHR::default()
        .handle_type(HANDLE)
        .fd(fd.as_raw_fd());
    let alloc = vk::MemoryAllocateInfo::default()
        .allocation_size(allocation_size)
        .memory_type_index(memory_type)
        .push_next(&mut import);
    allocate_dedicated(&mut pending, alloc, "importing memory from an fd")?;
    // A successful import owns the descriptor (a failed one left it to us: closed on return).
    let _ = fd.into_raw_fd();
    bind(&pending)?;
    Ok(into_wgpu(device, pending, buffer_size, label))
}
