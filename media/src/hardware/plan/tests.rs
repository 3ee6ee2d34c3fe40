//! The decision table for every host shape, with a fake host that records what was asked.

use super::*;

/// A host of a given shape that records what was asked.
#[derive(Default)]
struct Host {
    nvidia: bool,
    nvenc: bool,
    cuda: bool,
    zero_copy: bool,
    asked: Vec<&'static str>,
}

fn answer(ok: bool, what: &str) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(format!("no {what}"))
    }
}

impl HostProbe for Host {
    fn nvidia_driver(&mut self) -> bool {
        self.nvidia
    }
    fn nvenc(&mut self) -> Result<(), String> {
        self.asked.push("nvenc");
        answer(self.nvenc, "NVENC")
    }
    fn cuda(&mut self) -> Result<(), String> {
        self.asked.push("cuda");
        answer(self.cuda, "CUDA")
    }
    fn zero_copy(&mut self) -> Result<(), String> {
        self.asked.push("zero_copy");
        answer(self.zero_copy, "interop")
    }
}

/// No GPU at all (this CI machine, lavapipe aside).
fn no_gpu() -> Host {
    Host::default()
}
/// The H200 today: NVDEC, no NVENC, and frames that can stay on the GPU or not.
fn hopper(zero_copy: bool) -> Host {
    Host {
        nvidia: true,
        cuda: true,
        zero_copy,
        ..Host::default()
    }
}
/// A card with NVENC (an L4, an RTX): everything.
fn with_nvenc(zero_copy: bool) -> Host {
    Host {
        nvenc: true,
        ..hopper(zero_copy)
    }
}

const AUTO: HardwareChoice = HardwareChoice {
    decode: HwDecodeChoice::Auto,
    encoder: EncoderChoice::Auto,
};

fn decide(
    backend: BackendChoice,
    hw: HardwareChoice,
    w: Workload,
    host: &mut Host,
) -> HardwarePlan {
    plan(backend, hw, w, host).unwrap_or_else(|e| panic!("{e}"))
}

fn shape(p: &HardwarePlan) -> (CompositorPlan, DecodePlan, H264Encoder) {
    (p.compositor, p.decode, p.h264)
}

const CPU: CompositorPlan = CompositorPlan::Cpu;
const GPU: CompositorPlan = CompositorPlan::Wgpu(AdapterPreference::HardwareOnly);

#[test]
fn a_host_without_a_gpu_probes_nothing_and_keeps_the_cpu_defaults() {
    for w in [Workload::Service, Workload::One { h264: true }] {
        let mut host = no_gpu();
        let p = decide(BackendChoice::Auto, AUTO, w, &mut host);
        assert_eq!(shape(&p), (CPU, DecodePlan::Software, H264Encoder::X264));
        assert!(host.asked.is_empty(), "{:?}", host.asked);
        assert_eq!(p.why.len(), 3, "{:?}", p.why);
    }
}

#[test]
fn a_service_on_a_gpu_without_nvenc_keeps_frames_on_the_gpu_only_when_it_can() {
    let mut host = hopper(true);
    let p = decide(BackendChoice::Auto, AUTO, Workload::Service, &mut host);
    assert_eq!(
        shape(&p),
        (GPU, DecodePlan::NvdecZeroCopy, H264Encoder::X264)
    );
    // Without the interop: what the H200 measured best (software decoding, CPU compositor).
    let mut host = hopper(false);
    let p = decide(BackendChoice::Auto, AUTO, Workload::Service, &mut host);
    assert_eq!(shape(&p), (CPU, DecodePlan::Software, H264Encoder::X264));
    assert!(
        p.why.iter().any(|w| w.contains("no interop")),
        "{:?}",
        p.why
    );
    assert!(
        !host.asked.contains(&"cuda"),
        "no CUDA device opened for nothing"
    );
}

#[test]
fn a_service_on_a_card_with_nvenc_uses_it_and_nvdec() {
    let mut host = with_nvenc(true);
    let p = decide(BackendChoice::Auto, AUTO, Workload::Service, &mut host);
    assert_eq!(
        shape(&p),
        (GPU, DecodePlan::NvdecZeroCopy, H264Encoder::Nvenc)
    );
    let mut host = with_nvenc(false);
    let p = decide(BackendChoice::Auto, AUTO, Workload::Service, &mut host);
    assert_eq!(shape(&p), (CPU, DecodePlan::Nvdec, H264Encoder::Nvenc));
}

#[test]
fn one_render_sets_up_no_gpu_and_probes_nvenc_only_for_h264() {
    let mut host = hopper(true);
    let p = decide(
        BackendChoice::Auto,
        AUTO,
        Workload::One { h264: false },
        &mut host,
    );
    assert_eq!(shape(&p), (CPU, DecodePlan::Software, H264Encoder::X264));
    assert!(
        host.asked.is_empty(),
        "a webm render probes nothing: {:?}",
        host.asked
    );
    let mut host = hopper(true);
    let p = decide(
        BackendChoice::Auto,
        AUTO,
        Workload::One { h264: true },
        &mut host,
    );
    assert_eq!(shape(&p), (CPU, DecodePlan::Software, H264Encoder::X264));
    assert_eq!(host.asked, ["nvenc"]);
    let mut host = with_nvenc(true);
    let p = decide(
        BackendChoice::Auto,
        AUTO,
        Workload::One { h264: true },
        &mut host,
    );
    assert_eq!(shape(&p), (CPU, DecodePlan::Nvdec, H264Encoder::Nvenc));
    let x264 = HardwareChoice {
        encoder: EncoderChoice::X264,
        ..AUTO
    };
    let mut host = with_nvenc(true);
    decide(
        BackendChoice::Auto,
        x264,
        Workload::One { h264: true },
        &mut host,
    );
    assert!(
        host.asked.is_empty(),
        "--encoder x264 probes nothing: {:?}",
        host.asked
    );
}

#[test]
fn forced_choices_are_kept_or_refused() {
    let cuda = HardwareChoice {
        decode: HwDecodeChoice::Cuda,
        ..AUTO
    };
    let err = plan(BackendChoice::Auto, cuda, Workload::Service, &mut no_gpu()).unwrap_err();
    assert!(err.to_string().contains("--hwdecode cuda"), "{err}");
    let nvenc = HardwareChoice {
        encoder: EncoderChoice::Nvenc,
        ..AUTO
    };
    let err = plan(
        BackendChoice::Auto,
        nvenc,
        Workload::Service,
        &mut hopper(true),
    )
    .unwrap_err();
    assert!(err.to_string().contains("--encoder nvenc"), "{err}");
    // --hwdecode cuda on a GPU host: zero-copy when it works, else NVDEC with downloads.
    let p = decide(
        BackendChoice::Auto,
        cuda,
        Workload::One { h264: true },
        &mut hopper(true),
    );
    assert_eq!(
        shape(&p),
        (GPU, DecodePlan::NvdecZeroCopy, H264Encoder::X264)
    );
    let p = decide(
        BackendChoice::Cpu,
        cuda,
        Workload::Service,
        &mut hopper(true),
    );
    assert_eq!(shape(&p), (CPU, DecodePlan::Nvdec, H264Encoder::X264));
    // --backend wgpu on lavapipe: the GPU compositor, software decoding.
    let mut host = no_gpu();
    let p = decide(BackendChoice::Wgpu, AUTO, Workload::Service, &mut host);
    let lavapipe = CompositorPlan::Wgpu(AdapterPreference::AllowSoftware);
    assert_eq!(
        shape(&p),
        (lavapipe, DecodePlan::Software, H264Encoder::X264)
    );
    assert!(host.asked.is_empty(), "{:?}", host.asked);
    // --backend cpu never asks for the interop.
    let mut host = with_nvenc(true);
    decide(BackendChoice::Cpu, AUTO, Workload::Service, &mut host);
    assert!(!host.asked.contains(&"zero_copy"), "{:?}", host.asked);
    // --hwdecode off never opens CUDA.
    let off = HardwareChoice {
        decode: HwDecodeChoice::Off,
        ..AUTO
    };
    let mut host = with_nvenc(true);
    let p = decide(BackendChoice::Auto, off, Workload::Service, &mut host);
    assert_eq!(shape(&p), (CPU, DecodePlan::Software, H264Encoder::Nvenc));
    assert!(!host.asked.iter().any(|a| *a == "cuda" || *a == "zero_copy"));
}

#[test]
fn nvdec_without_the_codec_is_the_decoders_business_not_the_plans() {
    // The plan says NVDEC; a job whose codec NVDEC lacks (AV1 on Hopper) still decodes in
    // software, decided per job by `decode_on_gpu` (tested in the parent module).
    let p = decide(
        BackendChoice::Auto,
        AUTO,
        Workload::Service,
        &mut hopper(true),
    );
    assert!(p.decode.uses_cuda());
    assert!(!super::super::decode_on_gpu(Some(&()), false));
}

#[test]
fn every_plan_says_why_in_one_line_per_decision() {
    let hosts = [
        no_gpu(),
        hopper(false),
        hopper(true),
        with_nvenc(false),
        with_nvenc(true),
    ];
    for mut host in hosts {
        for w in [
            Workload::Service,
            Workload::One { h264: true },
            Workload::One { h264: false },
        ] {
            let p = decide(BackendChoice::Auto, AUTO, w, &mut host);
            assert_eq!(p.why.len(), 3, "{:?}", p.why);
            assert!(p.why.iter().all(|l| !l.contains('\n') && !l.is_empty()));
        }
    }
}
