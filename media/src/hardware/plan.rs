//! `auto`'s decisions, in one place: the compositor, the decode path and the H.264 encoder a
//! process uses, from the configured choices, what kind of work the process does and what the
//! host has. A pure function over [`HostProbe`], which it asks only what a decision needs
//! (each fact at most once), so the table is unit-tested for every host shape without one.
//!
//! What the rules stand on (measured on the H200 host, 16 cores, NVDEC, no NVENC;
//! docs/bench/gpu/):
//! - Frames that start in CPU memory compose faster on the CPU than uploaded to a GPU and read
//!   back (every row of the H200 benchmark; one render 1.54 s on the CPU against 1.95 s on the
//!   GPU), so the wgpu compositor pays only when frames are already on the GPU.
//! - Where libx264/libvpx encode on the CPU, NVDEC plus the download of every decoded frame
//!   costs more than decoding in software (software: 1.51× the renders/hour, 16 at once). NVDEC
//!   pays when the frames stay on the GPU for the compositor (zero-copy), or when NVENC
//!   encodes and the CPU has nothing better to do.
//! - A one-shot render is measured by its wall time, start-up included: setting a GPU up
//!   costs about a second, which a render decoding on every core of the host never pays back.

use vidforge_gpu::AdapterPreference;

use super::{EncoderChoice, H264Encoder, HardwareChoice, HwDecodeChoice};
use crate::error::MediaError;
use crate::types::BackendChoice;

/// What a process does with its engine; it decides which start-up costs pay back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// A long-running service (`vidforge serve`): many renders, often at once, for hours. What
    /// it serves per hour is bound by the CPU wherever libx264/libvpx encode, so every frame
    /// decoded and composed off the CPU counts; the GPU's set-up is paid once, at boot.
    Service,
    /// One render (`vidforge render`): its wall time, start-up included. `h264`: whether it
    /// encodes H.264 (mp4/mov); only then is NVENC probed.
    One { h264: bool },
}

/// The host's facts, asked only when a decision needs them. Implementations probe each at
/// most once and keep what they opened (the CUDA device, the GPU context) for the engine.
pub trait HostProbe {
    /// Whether an NVIDIA driver is present (its device node: no library is loaded).
    fn nvidia_driver(&mut self) -> bool;
    /// Whether an NVENC H.264 session opens, or why not.
    fn nvenc(&mut self) -> Result<(), String>;
    /// Whether a CUDA device opens (for NVDEC), or why not.
    fn cuda(&mut self) -> Result<(), String>;
    /// Whether NVDEC's frames reach the wgpu compositor without leaving the GPU on this host
    /// (a hardware adapter, a CUDA device and the interop's start-up self-test), or why not.
    fn zero_copy(&mut self) -> Result<(), String>;
}

/// Where frames are composed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompositorPlan {
    /// swscale + the CPU blend.
    Cpu,
    /// The wgpu compositor on an adapter of this preference.
    Wgpu(AdapterPreference),
}

/// How video is decoded (per job, a codec NVDEC lacks still decodes in software).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodePlan {
    Software,
    /// NVDEC, each frame downloaded to CPU memory.
    Nvdec,
    /// NVDEC, frames copied on the GPU into the wgpu compositor's input.
    NvdecZeroCopy,
}

impl DecodePlan {
    /// Whether a CUDA device is needed.
    pub fn uses_cuda(self) -> bool {
        self != DecodePlan::Software
    }

    /// The name logs and reports use.
    pub fn as_str(self) -> &'static str {
        match self {
            DecodePlan::Software => "software",
            DecodePlan::Nvdec => "nvdec",
            DecodePlan::NvdecZeroCopy => "nvdec-zero-copy",
        }
    }
}

/// What a process uses, and why: one sentence per decision, for the banner, `vidforge probe
/// --hardware` and the logs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HardwarePlan {
    pub compositor: CompositorPlan,
    pub decode: DecodePlan,
    pub h264: H264Encoder,
    pub why: Vec<String>,
}

/// Decides the process's hardware use. Forced choices that cannot be had are errors; `auto`
/// never picks what did not work when probed.
pub fn plan(
    backend: BackendChoice,
    hardware: HardwareChoice,
    workload: Workload,
    host: &mut dyn HostProbe,
) -> Result<HardwarePlan, MediaError> {
    let mut why = Vec::new();
    let h264 = plan_h264(hardware.encoder, workload, host, &mut why)?;
    let (compositor, decode) =
        plan_frames(backend, hardware.decode, workload, h264, host, &mut why)?;
    Ok(HardwarePlan {
        compositor,
        decode,
        h264,
        why,
    })
}

fn unavailable(reason: String) -> MediaError {
    MediaError::HardwareUnavailable { reason }
}

fn plan_h264(
    choice: EncoderChoice,
    workload: Workload,
    host: &mut dyn HostProbe,
    why: &mut Vec<String>,
) -> Result<H264Encoder, MediaError> {
    let chosen = match choice {
        EncoderChoice::X264 => {
            why.push("H.264 encoder libx264: --encoder x264".into());
            H264Encoder::X264
        }
        EncoderChoice::Nvenc => {
            host.nvenc().map_err(|e| {
                unavailable(format!(
                    "--encoder nvenc: no NVENC encoder session opens ({e}); use --encoder auto \
                     or x264 on cards without NVENC"
                ))
            })?;
            why.push("H.264 encoder NVENC: --encoder nvenc".into());
            H264Encoder::Nvenc
        }
        EncoderChoice::Auto if workload == (Workload::One { h264: false }) => {
            why.push(
                "H.264 encoder libx264: this render encodes no H.264 (NVENC not probed)".into(),
            );
            H264Encoder::X264
        }
        EncoderChoice::Auto if !host.nvidia_driver() => {
            why.push("H.264 encoder libx264: no NVIDIA driver".into());
            H264Encoder::X264
        }
        EncoderChoice::Auto => match host.nvenc() {
            Ok(()) => {
                why.push("H.264 encoder NVENC: an encoder session opens".into());
                H264Encoder::Nvenc
            }
            Err(e) => {
                why.push(format!("H.264 encoder libx264: no NVENC ({e})"));
                H264Encoder::X264
            }
        },
    };
    Ok(chosen)
}

/// How frames decoded on the CPU's side reach the compositor: NVDEC (with each frame
/// downloaded) only when NVENC encodes, the CPU then having little else to do. `note` ends the
/// reason (why frames cannot stay on the GPU, when that was asked).
fn downloaded_frames(
    h264: H264Encoder,
    host: &mut dyn HostProbe,
    note: &str,
) -> (DecodePlan, String) {
    if h264 != H264Encoder::Nvenc {
        return (
            DecodePlan::Software,
            format!(
                "decoding in software: the CPU encodes, and NVDEC plus the download of each \
                 frame costs it more than decoding{note}"
            ),
        );
    }
    match host.cuda() {
        Ok(()) => (
            DecodePlan::Nvdec,
            format!("decoding on NVDEC: NVENC encodes, so the CPU is free{note}"),
        ),
        Err(e) => (
            DecodePlan::Software,
            format!("decoding in software: no CUDA device ({e})"),
        ),
    }
}

const CPU_COMPOSE: &str = "compositor cpu: frames arrive in CPU memory, where composing beats \
                           uploading each frame and reading it back";
const GPU_COMPOSE: &str = "compositor wgpu: NVDEC's frames stay on the GPU (zero-copy)";
const ZERO_COPY: &str = "decoding on NVDEC, frames copied on the GPU into the compositor";

fn plan_frames(
    backend: BackendChoice,
    decode: HwDecodeChoice,
    workload: Workload,
    h264: H264Encoder,
    host: &mut dyn HostProbe,
    why: &mut Vec<String>,
) -> Result<(CompositorPlan, DecodePlan), MediaError> {
    if decode == HwDecodeChoice::Cuda {
        host.cuda().map_err(|e| {
            unavailable(format!(
                "--hwdecode cuda: no CUDA device ({e}); use --hwdecode auto or off on machines \
                 without an NVIDIA GPU"
            ))
        })?;
    }
    // Whether frames can stay on the GPU: asked only where the answer may change the plan.
    let ask_zero_copy = match (backend, decode) {
        (BackendChoice::Cpu, _) | (_, HwDecodeChoice::Off) => false,
        (_, HwDecodeChoice::Cuda) => true,
        (BackendChoice::Wgpu, HwDecodeChoice::Auto) => host.nvidia_driver(),
        (BackendChoice::Auto, HwDecodeChoice::Auto) => {
            workload == Workload::Service && host.nvidia_driver()
        }
    };
    let zero_copy = if ask_zero_copy {
        host.zero_copy()
    } else {
        Err(String::new())
    };
    let note = match &zero_copy {
        Err(e) if ask_zero_copy => format!("; frames cannot stay on the GPU ({e})"),
        _ => String::new(),
    };
    let (compositor, plan) = match (backend, decode) {
        (BackendChoice::Cpu, _) => {
            why.push("compositor cpu: --backend cpu".into());
            (CompositorPlan::Cpu, cpu_side(decode, h264, host, "", why))
        }
        (BackendChoice::Wgpu, _) => {
            why.push("compositor wgpu: --backend wgpu".into());
            let plan = if zero_copy.is_ok() {
                why.push(ZERO_COPY.into());
                DecodePlan::NvdecZeroCopy
            } else {
                cpu_side(decode, h264, host, &note, why)
            };
            (CompositorPlan::Wgpu(AdapterPreference::AllowSoftware), plan)
        }
        (BackendChoice::Auto, _) if zero_copy.is_ok() => {
            why.push(GPU_COMPOSE.into());
            why.push(ZERO_COPY.into());
            (
                CompositorPlan::Wgpu(AdapterPreference::HardwareOnly),
                DecodePlan::NvdecZeroCopy,
            )
        }
        (BackendChoice::Auto, HwDecodeChoice::Auto) if workload != Workload::Service => {
            why.push(format!(
                "{CPU_COMPOSE}; one render: no GPU set-up (about a second) to pay back"
            ));
            (CompositorPlan::Cpu, cpu_side(decode, h264, host, "", why))
        }
        (BackendChoice::Auto, _) => {
            why.push(CPU_COMPOSE.into());
            (
                CompositorPlan::Cpu,
                cpu_side(decode, h264, host, &note, why),
            )
        }
    };
    Ok((compositor, plan))
}

/// The decode path when frames are not kept on the GPU.
fn cpu_side(
    decode: HwDecodeChoice,
    h264: H264Encoder,
    host: &mut dyn HostProbe,
    note: &str,
    why: &mut Vec<String>,
) -> DecodePlan {
    let (plan, reason) = match decode {
        HwDecodeChoice::Off => (
            DecodePlan::Software,
            "decoding in software: --hwdecode off".into(),
        ),
        HwDecodeChoice::Cuda => (
            DecodePlan::Nvdec,
            format!("decoding on NVDEC, each frame downloaded: --hwdecode cuda{note}"),
        ),
        HwDecodeChoice::Auto if !host.nvidia_driver() => (
            DecodePlan::Software,
            "decoding in software: no NVIDIA driver".into(),
        ),
        HwDecodeChoice::Auto => downloaded_frames(h264, host, note),
    };
    why.push(reason);
    plan
}

#[cfg(test)]
mod tests;
