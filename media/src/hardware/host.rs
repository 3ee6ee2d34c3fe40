//! The real host behind [`super::plan::HostProbe`]: each fact probed at most once, and what was
//! opened to learn it (the CUDA device, the hardware GPU context) kept for the engine, so a
//! process opens each once.

use vidforge_gpu::{AdapterPreference, GpuContext};

use super::cache;
use super::plan::HostProbe;
use crate::hwdecode::CudaDevice;

/// The host as probed so far.
pub(crate) struct LiveHost {
    /// Probe NVENC afresh (the service at boot) instead of trusting the per-driver cache.
    fresh: bool,
    nvidia: Option<bool>,
    nvenc: Option<Result<(), String>>,
    cuda: Option<Result<CudaDevice, String>>,
    gpu: Option<Result<GpuContext, String>>,
    zero_copy: Option<Result<(), String>>,
}

impl LiveHost {
    /// `fresh`: probe NVENC now rather than read the cache (and refresh it).
    pub(crate) fn new(fresh: bool) -> LiveHost {
        LiveHost {
            fresh,
            nvidia: None,
            nvenc: None,
            cuda: None,
            gpu: None,
            zero_copy: None,
        }
    }

    /// The CUDA device, opened now if it was not yet.
    pub(crate) fn cuda_device(&mut self) -> Result<CudaDevice, String> {
        self.cuda.get_or_insert_with(CudaDevice::open).clone()
    }

    /// A GPU context of `pref`: the hardware one opened while probing when there is one.
    pub(crate) fn gpu_context(&mut self, pref: AdapterPreference) -> Result<GpuContext, String> {
        if let Some(Ok(ctx)) = &self.gpu {
            return Ok(ctx.clone());
        }
        let opened = GpuContext::new(pref).map_err(|e| e.to_string());
        if pref == AdapterPreference::HardwareOnly {
            self.gpu = Some(opened.clone());
        }
        opened
    }
}

impl HostProbe for LiveHost {
    fn nvidia_driver(&mut self) -> bool {
        *self.nvidia.get_or_insert_with(|| {
            ["/dev/nvidiactl", "/proc/driver/nvidia/version"]
                .iter()
                .any(|p| std::path::Path::new(p).exists())
        })
    }

    fn nvenc(&mut self) -> Result<(), String> {
        if let Some(answer) = &self.nvenc {
            return answer.clone();
        }
        let place = cache::location().zip(cache::driver_key());
        let cached = match &place {
            Some((path, key)) if !self.fresh => cache::read(path, key),
            _ => None,
        };
        let answer = match cached {
            Some(answer) => {
                tracing::debug!("NVENC: the cached answer for this driver");
                answer
            }
            None => {
                let answer = super::probe_nvenc();
                if let Some((path, key)) = &place {
                    cache::write(path, key, &answer);
                }
                answer
            }
        };
        self.nvenc = Some(answer.clone());
        answer
    }

    fn cuda(&mut self) -> Result<(), String> {
        self.cuda_device().map(drop)
    }

    fn zero_copy(&mut self) -> Result<(), String> {
        if let Some(answer) = &self.zero_copy {
            return answer.clone();
        }
        let answer = Err("this build has no NVDEC → wgpu interop".to_string());
        self.zero_copy = Some(answer.clone());
        answer
    }
}
