//! Adapter selection, device creation and the compiled compose pipeline, shared by every
//! compositor made from one context.

use std::sync::{Arc, Mutex};

use crate::error::GpuError;

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
    pub(crate) pipeline: wgpu::ComputePipeline,
    pub(crate) layout: wgpu::BindGroupLayout,
    /// Set by the device-lost callback.
    pub(crate) lost: Arc<Mutex<Option<String>>>,
}

/// A wgpu device + queue with the compose pipeline compiled once. Cheap to clone (an `Arc`),
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

const SOFTWARE_NAMES: [&str; 5] = ["llvmpipe", "lavapipe", "softpipe", "swiftshader", "basic render"];

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

        let limits = adapter.limits();
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("vidforge-gpu"),
            required_limits: limits.clone(),
            ..Default::default()
        }))
        .map_err(|e| GpuError::RequestDevice(format!("adapter {}: {e}", summary.name)))?;

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

        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let (pipeline, layout) = build_pipeline(&device);
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(GpuError::Device(format!("compiling the compose pipeline: {e}")));
        }

        tracing::info!(
            adapter = %summary.name,
            backend = %summary.backend,
            device_type = %summary.device_type,
            software = summary.is_software,
            "GPU compositor adapter"
        );
        Ok(Self {
            inner: Arc::new(ContextInner {
                device,
                queue,
                summary,
                limits,
                pipeline,
                layout,
                lost,
            }),
        })
    }

    /// The adapter this context runs on.
    pub fn adapter(&self) -> &AdapterSummary {
        &self.inner.summary
    }

    /// The device-lost message, when the device has been lost.
    pub(crate) fn lost(&self) -> Option<String> {
        self.inner.lost.lock().ok().and_then(|s| s.clone())
    }
}

fn build_pipeline(device: &wgpu::Device) -> (wgpu::ComputePipeline, wgpu::BindGroupLayout) {
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
            storage(3, true),
            storage(4, false),
        ],
    });
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some("compose"),
        bind_group_layouts: &[Some(&layout)],
        immediate_size: 0,
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("compose"),
        layout: Some(&pipeline_layout),
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    (pipeline, layout)
}
