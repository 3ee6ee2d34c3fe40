//! The wgpu compositor (lavapipe in CI) against the CPU compositor: same frames within
//! 40 dB PSNR, flat colours kept end to end. Skips loudly without an adapter unless
//! VIDFORGE_REQUIRE_GPU=1.

use crate::common::*;
use vidforge_fixtures::{self as fixtures, ClipSpec, Pattern};
use vidforge_media::{OutputFormat, Position, Resolution, WatermarkSpec, decode_frames};

#[test]
fn gpu_and_cpu_compositors_agree() {
    let Some(gpu) = gpu_engine() else { return };
    let cpu = cpu();
    let dir = tempdir();
    let png = fixtures::watermark_png(dir.path(), 200, 100, [230, 20, 40, 200]).expect("png");
    let cases = [
        // Downscale + watermark, the common case.
        (ClipSpec::h264(640, 360), Resolution::P720, None),
        // Upscale of a rotated 10-bit source.
        (
            ClipSpec {
                pix_fmt: "yuv420p10le".into(),
                ..ClipSpec::h264(320, 240)
            },
            Resolution::P720,
            Some(90),
        ),
        // HD downscale (BT.709, area filter).
        (ClipSpec::h264(1920, 1080), Resolution::P720, None),
        // Full-range source.
        (
            ClipSpec {
                pix_fmt: "yuvj420p".into(),
                ..ClipSpec::h264(1280, 720)
            },
            Resolution::P720,
            None,
        ),
    ];
    for (spec, res, rotate) in cases {
        let src = clip(
            dir.path(),
            ClipSpec {
                seconds: 0.2,
                audio: false,
                rotate,
                ..spec
            },
        );
        let j = with_watermark(
            job(&src, &dir.path().join("unused.mp4"), res, OutputFormat::Mp4),
            WatermarkSpec {
                image: png.clone(),
                position: Position::BottomRight,
                opacity: 0.6,
            },
        );
        let a = gpu.compose_frames(&j, 3).expect("gpu compose");
        let b = cpu.compose_frames(&j, 3).expect("cpu compose");
        assert_eq!(a.len(), 3);
        assert_eq!(b.len(), 3);
        for (fa, fb) in a.iter().zip(&b) {
            assert_eq!((fa.width, fa.height), (fb.width, fb.height));
            let p = psnr(fa, fb);
            eprintln!("{}: GPU vs CPU PSNR {p:.1} dB", src.display());
            assert!(p >= 40.0, "{}: PSNR {p:.1} dB", src.display());
        }
    }
}

#[test]
fn gpu_render_keeps_flat_colour_end_to_end() {
    let Some(gpu) = gpu_engine() else { return };
    let dir = tempdir();
    // BT.709-tagged flat colour: output code values must match the source's.
    let src = clip(
        dir.path(),
        ClipSpec {
            seconds: 0.3,
            pattern: Pattern::Lavfi(
                "color=c=0x3366cc:s={w}x{h}:r={fps}:d={secs},scale=out_color_matrix=bt709".into(),
            ),
            extra_args: [
                "-colorspace",
                "bt709",
                "-color_primaries",
                "bt709",
                "-color_trc",
                "bt709",
            ]
            .map(String::from)
            .to_vec(),
            ..ClipSpec::h264(640, 360)
        },
    );
    for format in [OutputFormat::Mp4, OutputFormat::Webm] {
        let out = dir.path().join(format!("gpu.{}", format.extension()));
        let report = render(&gpu, &job(&src, &out, Resolution::P720, format));
        assert_eq!(report.backend, gpu.backend_name());
        assert_eq!((report.width, report.height), (1280, 720));
        assert_eq!(report.frames, 9);
        let s = &decode_frames(&src, 1).expect("decode src")[0];
        let o = &decode_frames(&out, 1).expect("decode out")[0];
        let sm = mean_yuv(s, 160, 90, 320, 180);
        let om = mean_yuv(o, 320, 180, 640, 360);
        for c in 0..3 {
            assert!((sm[c] - om[c]).abs() <= 2.0, "{format}: {sm:?} vs {om:?}");
        }
    }
}

/// What NVDEC hands over (NV12; P010 for 10-bit video) goes to the GPU as is, and the GPU's
/// output matches the CPU compositor's from the same frames (swscale reads them there):
/// 8-bit and 10-bit sources, shrink and enlarge, with the watermark.
#[test]
fn nv12_and_p010_frames_compose_like_the_cpu_compositor() {
    use vidforge_media::ffmpeg::format::Pixel;
    use vidforge_media::{ComposeSpec, Compositor, CpuCompositor, WgpuCompositor};
    let Some(gpu) = gpu_engine() else { return };
    let ctx = gpu
        .gpu_context()
        .expect("wgpu engine has a context")
        .clone();
    let dir = tempdir();
    let png = fixtures::watermark_png(dir.path(), 120, 60, [230, 20, 40, 200]).expect("png");
    let logo = vidforge_media::load_watermark_png(&png).expect("watermark");
    for (spec, pix, (ow, oh)) in [
        (ClipSpec::h264(1280, 720), Pixel::NV12, (640, 360)),
        (ClipSpec::h264(640, 360), Pixel::NV12, (1280, 720)),
        (
            ClipSpec {
                pix_fmt: "yuv420p10le".into(),
                ..ClipSpec::h264(960, 540)
            },
            Pixel::P010LE,
            (640, 360),
        ),
    ] {
        let src = clip(
            dir.path(),
            ClipSpec {
                seconds: 0.2,
                audio: false,
                ..spec
            },
        );
        let decoded = vidforge_media::decode_raw_frames(&src, 2).expect("decode");
        let placement = vidforge_media::gpu::place_watermark(
            ow,
            oh,
            logo.width,
            logo.height,
            Position::BottomRight,
        )
        .expect("fits");
        let spec = ComposeSpec {
            out_width: ow,
            out_height: oh,
            rotation: vidforge_media::Rotation::None,
            watermark: Some(vidforge_media::gpu::prepare_watermark(
                &logo,
                placement,
                0.6,
                vidforge_media::ColorSpec::OUTPUT,
            )),
            light: vidforge_media::OutputLight::Sdr,
        };
        let mut on_gpu = WgpuCompositor::new(&ctx, spec.clone(), 2);
        let mut on_cpu = CpuCompositor::new(spec);
        for f in &decoded {
            let mut converted = vidforge_media::ffmpeg::frame::Video::empty();
            f.converter(pix)
                .expect("swscale context")
                .run(f, &mut converted)
                .expect("convert");
            assert_eq!(converted.format(), pix);
            let a = on_gpu.compose_single(&converted).expect("gpu compose");
            let b = on_cpu.compose_single(&converted).expect("cpu compose");
            let p = psnr(&a, &b);
            eprintln!(
                "{} as {pix:?} -> {ow}x{oh}: GPU vs CPU PSNR {p:.1} dB",
                src.display()
            );
            assert!(p >= 45.0, "{} as {pix:?}: PSNR {p:.1} dB", src.display());
        }
    }
}

mod zero_copy;
