//! Opening the device with `VK_KHR_external_memory_fd`, through wgpu-hal's
//! `open_with_callback` (the extensions wgpu picks, plus ours), then
//! `Adapter::create_device_from_hal`. Everything is checked first, so a driver without the
//! extension or without exportable storage buffers never gets here: the caller opens the
//! device the ordinary way and keeps the reason.

use std::ffi::CStr;

use ash::{khr, vk};
use wgpu::hal::api::Vulkan;

use super::InteropInfo;

/// What the compositor's exported buffers are used for (see `memory.rs`).
pub(super) const BUFFER_USAGE: vk::BufferUsageFlags = vk::BufferUsageFlags::from_raw(
    vk::BufferUsageFlags::STORAGE_BUFFER.as_raw()
        | vk::BufferUsageFlags::TRANSFER_SRC.as_raw()
        | vk::BufferUsageFlags::TRANSFER_DST.as_raw(),
);
pub(super) const HANDLE: vk::ExternalMemoryHandleTypeFlags =
    vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD;

/// The device extensions interop adds to wgpu's (`VK_KHR_external_memory` is core in 1.1 and
/// listed only when the driver lists it).
const EXTENSIONS: [&CStr; 2] = [khr::external_memory::NAME, khr::external_memory_fd::NAME];

/// Opens `adapter`'s device with external memory, or says why not (nothing was created then).
pub(crate) fn open_device(
    adapter: &wgpu::Adapter,
    desc: &wgpu::DeviceDescriptor<'_>,
) -> Result<(wgpu::Device, wgpu::Queue, InteropInfo), String> {
    // SAFETY: the guard only reads the adapter's Vulkan handles; nothing is destroyed.
    let Some(hal) = (unsafe { adapter.as_hal::<Vulkan>() }) else {
        return Err(format!(
            "the adapter is not a Vulkan one ({})",
            adapter.get_info().backend.to_str()
        ));
    };
    let info = check_support(&hal)?;
    let extra: Vec<&'static CStr> = EXTENSIONS
        .into_iter()
        .filter(|e| hal.physical_device_capabilities().supports_extension(e))
        .collect();
    let callback = Box::new(
        move |args: wgpu::hal::vulkan::CreateDeviceCallbackArgs<'_, '_, '_>| {
            for e in extra {
                if !args.extensions.contains(&e) {
                    args.extensions.push(e);
                }
            }
        },
    );
    // SAFETY: the callback only adds extensions the physical device lists (checked above);
    // it removes nothing and enables no feature.
    let open = unsafe {
        hal.open_with_callback(
            desc.required_features,
            &desc.required_limits,
            &desc.memory_hints,
            Some(callback),
        )
    }
    .map_err(|e| format!("opening the Vulkan device with external memory: {e}"))?;
    drop(hal);
    // SAFETY: `open` was created from this adapter's hal adapter with exactly
    // `desc.required_features` and `desc.required_limits`.
    let (device, queue) = unsafe { adapter.create_device_from_hal::<Vulkan>(open, desc) }
        .map_err(|e| format!("wrapping the Vulkan device: {e}"))?;
    Ok((device, queue, info))
}

/// Vulkan 1.1 on both sides, the fd extension, exportable and importable storage buffers of
/// the compositor's usage, and a memory type for them; the device's UUID.
fn check_support(hal: &wgpu::hal::vulkan::Adapter) -> Result<InteropInfo, String> {
    let caps = hal.physical_device_capabilities();
    let instance = hal.shared_instance();
    let version = |v: u32| format!("{}.{}", vk::api_version_major(v), vk::api_version_minor(v));
    let device_version = caps.properties().api_version;
    if instance.instance_api_version() < vk::API_VERSION_1_1 || device_version < vk::API_VERSION_1_1
    {
        return Err(format!(
            "Vulkan 1.1 is needed (instance {}, device {})",
            version(instance.instance_api_version()),
            version(device_version)
        ));
    }
    if !caps.supports_extension(khr::external_memory_fd::NAME) {
        return Err("the Vulkan driver lacks VK_KHR_external_memory_fd".into());
    }
    let raw = instance.raw_instance();
    let pdev = hal.raw_physical_device();
    let features = external_buffer_features(raw, pdev);
    let needed =
        vk::ExternalMemoryFeatureFlags::EXPORTABLE | vk::ExternalMemoryFeatureFlags::IMPORTABLE;
    if !features.contains(needed) {
        return Err(format!(
            "the driver cannot export and import storage buffers as opaque fds ({features:?})"
        ));
    }
    let mut id = vk::PhysicalDeviceIDProperties::default();
    let mut props = vk::PhysicalDeviceProperties2::default().push_next(&mut id);
    // SAFETY: a valid physical device of this instance (1.1, checked above).
    unsafe { raw.get_physical_device_properties2(pdev, &mut props) };
    let device_uuid = id.device_uuid;
    // SAFETY: as above.
    let memory = unsafe { raw.get_physical_device_memory_properties(pdev) };
    Ok(InteropInfo {
        device_uuid,
        memory,
    })
}

/// The external-memory features of storage buffers with opaque fd handles.
fn external_buffer_features(
    raw: &ash::Instance,
    pdev: vk::PhysicalDevice,
) -> vk::ExternalMemoryFeatureFlags {
    let info = vk::PhysicalDeviceExternalBufferInfo::default()
        .usage(BUFFER_USAGE)
        .handle_type(HANDLE);
    let mut props = vk::ExternalBufferProperties::default();
    // SAFETY: a valid physical device of a 1.1 instance; plain out-structure.
    unsafe { raw.get_physical_device_external_buffer_properties(pdev, &info, &mut props) };
    props.external_memory_properties.external_memory_features
}
