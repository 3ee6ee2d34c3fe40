//! The zero-copy path NVDEC -> compositor, as the engine chooses it: used where its start-up
//! self-test passed (a GPU host: `VIDFORGE_REQUIRE_CUDA=1` in the device check makes it
//! required), with every NVDEC frame reaching the compositor on the GPU and the same
//! picture as software decoding; everywhere else unavailable with its reason, and renders
//! unaffected.

use crate::common::*;
use vidforge_fixtures::{self as fixtures, ClipSpec};
use vidforge_media::{
    BackendChoice, EncoderChoice, Engine, HardwareChoice, HwDecodeChoice, OutputFormat, Position,
    Resolution, WatermarkSpec, Workload, decode_frames,
};

fn engine(decode: HwDecodeChoice) -> Option<Engine> {
    gpu_engine()?;
    let hardware = HardwareChoice {
        decode,
        encoder: EncoderChoice::X264,
        ..Default::default()
    };
    let engine = Engine::with_hardware(BackendChoice::Wgpu, hardware, Workload::Service);
    Some(engine.expect("wgpu engine"))
}

#[test]
fn zero_copy_is_used_where_it_works_and_says_why_not_elsewhere() {
    let Some(gpu) = engine(HwDecodeChoice::Auto) else {
        return;
    };
    let required = std::env::var("VIDFORGE_REQUIRE_CUDA").as_deref() == Ok("1");
    let reason = gpu.zero_copy().err().map(str::to_owned);
    eprintln!(
        "NVDEC: {}, zero-copy: {}",
        gpu.hw_decode(),
        reason.as_deref().unwrap_or("yes")
    );
    if required {
        assert!(reason.is_none(), "VIDFORGE_REQUIRE_CUDA=1: {reason:?}");
    }
    if !gpu.hw_decode() {
        let why = reason.as_deref().expect("no CUDA, no zero-copy");
        assert!(why.contains("no CUDA device"), "{why}");
    }
    let cpu_reason = cpu()
        .zero_copy()
        .expect_err("the CPU compositor has no zero-copy")
        .to_owned();
    assert!(cpu_reason.contains("no GPU compositor"), "{cpu_reason}");

    let dir = tempdir();
    let src = clip(
        dir.path(),
        ClipSpec {
            seconds: 0.4,
            audio: false,
            ..ClipSpec::h264(960, 540)
        },
    );
    let png = fixtures::watermark_png(dir.path(), 120, 60, [230, 20, 40, 200]).expect("png");
    let job = |name: &str| {
        with_watermark(
            job(
                &src,
                &dir.path().join(name),
                Resolution::P720,
                OutputFormat::Mp4,
            ),
            WatermarkSpec {
                image: png.clone(),
                position: Position::BottomRight,
                opacity: 0.6,
            },
        )
    };
    let zc = job("zc.mp4");
    let report = render(&gpu, &zc);
    let hops = report.stage_times.hops;
    eprintln!(
        "{} frames, decoder {}, {hops:?}",
        report.frames, report.decoder
    );
    assert!(hops.copy_in > std::time::Duration::ZERO, "{hops:?}");
    if reason.is_some() {
        assert_eq!(hops.zero_copy_frames, 0);
        return;
    }
    // On a GPU host: every frame went zero-copy, and the picture is software decoding's.
    assert_eq!(report.decoder, "nvdec");
    assert_eq!(hops.zero_copy_frames, report.frames, "{hops:?}");
    let sw = engine(HwDecodeChoice::Off).expect("engine");
    let reference = job("sw.mp4");
    render(&sw, &reference);
    let a = decode_frames(&zc.output, 3).expect("decode zero-copy output");
    let b = decode_frames(&reference.output, 3).expect("decode reference");
    for (fa, fb) in a.iter().zip(&b) {
        let p = psnr(fa, fb);
        eprintln!("zero-copy vs software decoding: PSNR {p:.1} dB");
        assert!(p >= 45.0, "PSNR {p:.1} dB");
    }
}
