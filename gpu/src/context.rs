//! Adapter selection, device creation and the compose pipelines, shared by every compositor
//! made from one context.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::GpuError;
use crate::interop::{ExportedMemory, InteropInfo, memory, open};

/// What adapter a context runs on, for logs and for callers deciding between GPU and CPU paths.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdapterSummary {
    pub name: String,
    pub backend: String,
    pub device_type: String,
    /// A CPU rasteriser (lavapipe/llvmpipe, SwiftShader, WARP...): correct but slower than
    /// FFmpeg's own scaler, so callers usually prefer their CPU path.
    pub is_software: bool,
}

/// Which adapters [`GpuContext::new`] may pick.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AdapterPreference {
    /// Only a real GPU; software rasterisers are rejected with [`GpuError::NoAdapter`].
    #[default]
    HardwareOnly,
    /// A real GPU when there is one, else a software adapter.
    AllowSoftware,
}

pub(crate) struct ContextInner {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) summary: AdapterSummary,
    pub(crate) limits: wgpu::Limits,
    pub(crate) layout: wgpu::BindGroupLayout,
    module: wgpu::ShaderModule,
    pipeline_layout: wgpu::PipelineLayout,
    /// Specialised compose pipelines, compiled on first use.
    pipelines: Mutex<HashMap<PipelineKey, wgpu::ComputePipeline>>,
    /// Set by the device-lost callback.
    pub(crate) lost: Arc<Mutex<Option<String>>>,
    /// Whether the device records GPU timestamps (profiling the compose kernel).
    pub(crate) timestamps: bool,
    /// External memory (the device opened with it), or why not.
    pub(crate) interop: Result<InteropInfo, String>,
}

/// The pipeline-overridable constants of compose.wgsl: one pipeline per plane group and
/// configuration, so filter loops have constant bounds and unused features compile away.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PipelineKey {
    pub is_chroma: bool,
    /// 16-bit source samples (P010) instead of bytes.
    pub sample16: bool,
    /// 10-bit output samples in 16 bits (HDR kept) instead of bytes.
    pub out16: bool,
    pub mode: u32,
    pub has_watermark: bool,
    pub kern_x: u32,
    pub kern_y: u32,
    pub taps_x: u32,
    pub taps_y: u32,
    /// 0: generic per-tap loads (rotated sources); else words per source row to load.
    pub row_words: u32,
    /// Bytes between adjacent samples of a fast row (1 planar, 2 NV12 chroma).
    pub row_step: u32,
}

/// Most specialised pipelines a context keeps.
const PIPELINE_CACHE_LIMIT: usize = 64;

/// A wgpu device + queue with a cache of compiled compose pipelines. Cheap to clone (an `Arc`),
/// `Send + Sync`: one context can feed many compositors on many threads.
#[derive(Clone)]
pub struct GpuContext {
    pub(crate) inner: Arc<ContextInner>,
}

impl std::fmt::Debug for GpuContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuContext")
            .field("adapter", &self.inner.summary)
            .finish_non_exhaustive()
    }
}

const SOFTWARE_NAMES: [&str; 5] = [
    "llvmpipe",
    "lavapipe",
    "softpipe",
    "swiftshader",
    "basic render",
];

fn summarize(info: &wgpu::AdapterInfo) -> AdapterSummary {
    let lower = info.name.to_lowercase();
    let is_software = info.device_type == wgpu::DeviceType::Cpu
        || SOFTWARE_NAMES.iter().any(|n| lower.contains(n));
    AdapterSummary {
        name: info.name.clone(),
        backend: info.backend.to_str().to_string(),
        device_type: format!("{:?}", info.device_type),
        is_software,
    }
}

/// Higher is better: real GPUs by kind, then native APIs over GL.
fn rank(info: &wgpu::AdapterInfo, software: bool) -> (u8, u8) {
    let kind = if software {
        0
    } else {
        match info.device_type {
            wgpu::DeviceType::DiscreteGpu => 4,
            wgpu::DeviceType::IntegratedGpu => 3,
            wgpu::DeviceType::VirtualGpu => 2,
            _ => 1,
        }
    };
    let api = match info.backend {
        wgpu::Backend::Vulkan | wgpu::Backend::Metal | wgpu::Backend::Dx12 => 2,
        wgpu::Backend::Gl => 1,
        _ => 0,
    };
    (kind, api)
}

/// `WGPU_BACKEND` when it names at least one backend; all backends otherwise. (An empty or
/// unknown value would otherwise silently yield zero adapters.)
fn backends_from_env() -> wgpu::Backends {
    match wgpu::Backends::from_env() {
        Some(b) if !b.is_empty() => b,
        Some(_) => {
            tracing::warn!(
                value = std::env::var("WGPU_BACKEND").unwrap_or_default(),
                "WGPU_BACKEND names no known backend; trying all backends"
            );
            wgpu::Backends::all()
        }
        None => wgpu::Backends::all(),
    }
}

impl GpuContext {
    /// Picks an adapter per `pref` (respecting `WGPU_BACKEND`), creates the device and compiles
    /// the compose pipeline. Logs the adapter in use.
    pub fn new(pref: AdapterPreference) -> Result<Self, GpuError> {
        let backends = backends_from_env();
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = backends;
        desc.flags = wgpu::InstanceFlags::from_build_config().with_env();
        let instance = wgpu::Instance::new(desc);
        let (adapter, summary) = pick_adapter(&instance, backends, pref)?;
        let limits = adapter.limits();
        let (device, queue, timestamps, interop) = request_device(&adapter, &summary, &limits)?;
        let lost = watch_device(&device);

        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let (module, layout, pipeline_layout) = build_layouts(&device);
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(GpuError::Device(format!("compiling compose.wgsl: {e}")));
        }

        tracing::info!(
            adapter = %summary.name,
            backend = %summary.backend,
            device_type = %summary.device_type,
            software = summary.is_software,
            interop = interop.as_ref().map_or_else(|e| e.as_str(), |_| "external memory"),
            "GPU compositor adapter"
        );
        Ok(Self {
            inner: Arc::new(ContextInner {
                device,
                queue,
                summary,
                limits,
                layout,
                module,
                pipeline_layout,
                pipelines: Mutex::new(HashMap::new()),
                lost,
                timestamps,
                interop,
            }),
        })
    }

    /// The adapter this context runs on.
    pub fn adapter(&self) -> &AdapterSummary {
        &self.inner.summary
    }

    /// The wgpu device, for callers working with buffers of this context (e.g. one
    /// [`GpuContext::import_buffer`] made).
    pub fn device(&self) -> &wgpu::Device {
        &self.inner.device
    }

    /// The device's queue.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.inner.queue
    }

    /// The compose pipeline for `key`, compiled on first use and cached.
    pub(crate) fn pipeline(&self, key: PipelineKey) -> Result<wgpu::ComputePipeline, GpuError> {
        let inner = &self.inner;
        let mut cache = inner
            .pipelines
            .lock()
            .map_err(|_| GpuError::Device("pipeline cache poisoned by a panic".into()))?;
        if let Some(p) = cache.get(&key) {
            return Ok(p.clone());
        }
        let b = |v: bool| if v { 1.0 } else { 0.0 };
        let constants = [
            ("IS_CHROMA", b(key.is_chroma)),
            ("SAMPLE16", b(key.sample16)),
            ("OUT16", b(key.out16)),
            ("MODE", key.mode as f64),
            ("HAS_WATERMARK", b(key.has_watermark)),
            ("KERN_X", key.kern_x as f64),
            ("KERN_Y", key.kern_y as f64),
            ("TAPS_X", key.taps_x as f64),
            ("TAPS_Y", key.taps_y as f64),
            ("FAST_ROWS", b(key.row_words > 0)),
            ("ROW_WORDS", key.row_words.max(1) as f64),
            ("ROW_STEP", key.row_step.max(1) as f64),
        ];
        let scope = inner.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let pipeline = inner
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some("compose"),
                layout: Some(&inner.pipeline_layout),
                module: &inner.module,
                entry_point: Some("main"),
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants: &constants,
                    zero_initialize_workgroup_memory: false,
                },
                cache: None,
            });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(GpuError::Device(format!(
                "compiling the compose pipeline {key:?}: {e}"
            )));
        }
        tracing::debug!(?key, "compiled compose pipeline");
        // Bounded: a long-lived server meets many output sizes; recompiling is cheap.
        if cache.len() >= PIPELINE_CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(key, pipeline.clone());
        Ok(pipeline)
    }

    /// The device-lost message, when the device has been lost.
    pub(crate) fn lost(&self) -> Option<String> {
        self.inner.lost.lock().ok().and_then(|s| s.clone())
    }
}

/// The best adapter of `instance` that `pref` allows and that runs compute shaders (see
/// [`rank`]); the error lists every adapter seen.
fn pick_adapter(
    instance: &wgpu::Instance,
    backends: wgpu::Backends,
    pref: AdapterPreference,
) -> Result<(wgpu::Adapter, AdapterSummary), GpuError> {
    let adapters = pollster::block_on(instance.enumerate_adapters(backends));
    let mut seen = Vec::new();
    let mut best: Option<(wgpu::Adapter, AdapterSummary, (u8, u8))> = None;
    for adapter in adapters {
        let info = adapter.get_info();
        let summary = summarize(&info);
        seen.push(format!(
            "{} ({}, {})",
            summary.name, summary.backend, summary.device_type
        ));
        let caps = adapter.get_downlevel_capabilities();
        if !caps.flags.contains(wgpu::DownlevelFlags::COMPUTE_SHADERS) {
            tracing::debug!(adapter = %summary.name, "skipping adapter without compute shaders");
            continue;
        }
        if summary.is_software && pref == AdapterPreference::HardwareOnly {
            continue;
        }
        let r = rank(&info, summary.is_software);
        if best.as_ref().is_none_or(|(_, _, br)| r > *br) {
            best = Some((adapter, summary, r));
        }
    }
    let Some((adapter, summary, _)) = best else {
        return Err(GpuError::NoAdapter {
            backends: format!("{backends:?}"),
            preference: format!("{pref:?}"),
            detail: if seen.is_empty() {
                "no adapters found".to_string()
            } else {
                format!("none usable among: {}", seen.join("; "))
            },
        });
    };
    Ok((adapter, summary))
}

/// The device and queue with all of `limits`, whether they record timestamps, and their
/// external memory: a Vulkan device that has it opens with it, any other opens as ever
/// (keeping the reason).
fn request_device(
    adapter: &wgpu::Adapter,
    summary: &AdapterSummary,
    limits: &wgpu::Limits,
) -> Result<DeviceParts, GpuError> {
    // Timestamp queries when the adapter has them: only profiling uses them.
    let timestamps = adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY);
    let required_features = if timestamps {
        wgpu::Features::TIMESTAMP_QUERY
    } else {
        wgpu::Features::empty()
    };
    let desc = wgpu::DeviceDescriptor {
        label: Some("vidforge-gpu"),
        required_limits: limits.clone(),
        required_features,
        ..Default::default()
    };
    let reason = match open::open_device(adapter, &desc) {
        Ok((device, queue, info)) => return Ok((device, queue, timestamps, Ok(info))),
        Err(reason) => reason,
    };
    tracing::debug!(adapter = %summary.name, "no GPU external memory: {reason}");
    let (device, queue) = pollster::block_on(adapter.request_device(&desc))
        .map_err(|e| GpuError::RequestDevice(format!("adapter {}: {e}", summary.name)))?;
    Ok((device, queue, timestamps, Err(reason)))
}

/// A device, its queue, whether it records timestamps, its external memory or why none.
type DeviceParts = (wgpu::Device, wgpu::Queue, bool, Result<InteropInfo, String>);

/// Installs the device-lost and uncaptured-error callbacks; the returned slot holds the
/// device-lost message once there is one.
fn watch_device(device: &wgpu::Device) -> Arc<Mutex<Option<String>>> {
    let lost = Arc::new(Mutex::new(None));
    {
        let lost = lost.clone();
        device.set_device_lost_callback(move |reason, message| {
            tracing::error!(?reason, %message, "GPU device lost");
            if let Ok(mut slot) = lost.lock() {
                *slot = Some(format!("{reason:?}: {message}"));
            }
        });
    }
    // wgpu's default handler panics; compositors catch their errors with error scopes, so
    // anything reaching here is logged, never fatal.
    device.on_uncaptured_error(Arc::new(|e: wgpu::Error| {
        tracing::error!(error = %e, "uncaptured wgpu error");
    }));
    lost
}

fn build_layouts(
    device: &wgpu::Device,
) -> (
    wgpu::ShaderModule,
    wgpu::BindGroupLayout,
    wgpu::PipelineLayout,
) {
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("compose.wgsl"),
        source: wgpu::ShaderSource::Wgsl(include_str!("../../shaders/compose.wgsl").into()),
    });
    let storage = |binding: u32, read_only: bool| wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    };
    let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("compose"),
        entries: &[
            wgpu::BindGroupLayoutEntry {
                binding: 0,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Uniform,
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            },
            storage(1, true),
            storage(2, true),
            storage(3, false),
        ],
    });
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some("compose"),
        bind_group_layouts: &[Some(&layout)],
        immediate_size: 0,
    });
    (module, layout, pipeline_layout)
}

impl GpuContext {
    /// The device's external memory, or why there is none (not Vulkan, the driver lacks the
    /// extension, the buffer usage cannot be exported...).
    pub fn interop(&self) -> Result<&InteropInfo, &str> {
        self.inner.interop.as_ref().map_err(String::as_str)
    }

    /// A storage buffer (copy source and destination too) of `size` bytes in exported memory,
    /// and its descriptor.
    pub fn export_buffer(
        &self,
        size: u64,
        label: &str,
    ) -> Result<(wgpu::Buffer, ExportedMemory), GpuError> {
        let info = *self
            .interop()
            .map_err(|e| GpuError::Interop(e.to_string()))?;
        memory::export_buffer(&self.inner.device, &info, size, label)
    }

    /// The memory of `exported` imported again on this device, as a second buffer over the
    /// same bytes (a storage, copy source and destination buffer of `exported.buffer_size`):
    /// what is written through it is what the exporting buffer reads. The descriptor is
    /// consumed either way.
    pub fn import_buffer(
        &self,
        exported: ExportedMemory,
        label: &str,
    ) -> Result<wgpu::Buffer, GpuError> {
        self.interop()
            .map_err(|e| GpuError::Interop(e.to_string()))?;
        memory::import_buffer(&self.inner.device, exported, label)
    }
}
