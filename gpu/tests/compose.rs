//! GPU compositor tests. Run on lavapipe with `WGPU_BACKEND=vulkan`; each prints the adapter it
//! ran on and skips loudly without one (fails instead when `VIDFORGE_REQUIRE_GPU=1`).

mod common;
mod interop;

use common::*;
use vidforge_gpu::filter::color_affine;
use vidforge_gpu::frame::tonemap::{Primaries, Transfer};
use vidforge_gpu::frame::{HdrSignal, prepare_watermark_hdr};
use vidforge_gpu::{
    AdapterPreference, ColorSpec, GpuCompositor, GpuContext, GpuError, Matrix, OutputLight,
    Placement, Position, Range, Rotation, SampleDepth, SemiPlanarFrame, SourceFormat, SourceFrame,
    WatermarkImage, Yuv420Frame, blend_watermark, place_watermark, prepare_watermark,
};

const COLOUR: [u8; 3] = [81, 90, 240]; // BT.709 limited red-ish

#[test]
fn flat_colour_survives_scaling_to_every_output_size() {
    let Some(ctx) = context("flat_colour") else {
        return;
    };
    let src = Yuv420Frame::filled(1920, 1080, COLOUR);
    for (ow, oh) in [(1280, 720), (1920, 1080), (3840, 2160), (854, 480)] {
        let mut gpu = GpuCompositor::new(&ctx, config(1920, 1080, ow, oh), 1).unwrap();
        let out = gpu.compose_one(&src).unwrap();
        assert_eq!((out.width, out.height), (ow, oh));
        assert_flat(&out, COLOUR, 2, &format!("1080p -> {ow}x{oh}"));
    }
}

#[test]
fn hardware_only_never_returns_a_software_adapter() {
    match GpuContext::new(AdapterPreference::HardwareOnly) {
        Ok(ctx) => {
            let a = ctx.adapter();
            eprintln!(
                "hardware adapter: {} ({}, {})",
                a.name, a.backend, a.device_type
            );
            assert!(!a.is_software, "{a:?}");
        }
        Err(GpuError::NoAdapter { detail, .. }) => eprintln!("no hardware adapter: {detail}"),
        Err(e) => panic!("unexpected error: {e}"),
    }
}

#[test]
fn identity_size_is_bit_exact() {
    let Some(ctx) = context("identity") else {
        return;
    };
    let src = synthetic_frame(320, 180);
    let mut gpu = GpuCompositor::new(&ctx, config(320, 180, 320, 180), 1).unwrap();
    assert_same(&gpu.compose_one(&src).unwrap(), &src, "same-size compose");
}

#[test]
fn colour_conversion_between_specs() {
    let Some(ctx) = context("colour_conversion") else {
        return;
    };
    let cases = [
        (
            ColorSpec {
                matrix: Matrix::Bt601,
                range: Range::Limited,
            },
            [120u8, 70u8, 190u8],
        ),
        (
            ColorSpec {
                matrix: Matrix::Bt709,
                range: Range::Full,
            },
            [255, 128, 128],
        ),
        (
            ColorSpec {
                matrix: Matrix::Bt601,
                range: Range::Full,
            },
            [30, 200, 100],
        ),
    ];
    for (src_color, yuv) in cases {
        let mut cfg = config(640, 360, 320, 180);
        cfg.src_color = src_color;
        let mut gpu = GpuCompositor::new(&ctx, cfg, 1).unwrap();
        let out = gpu
            .compose_one(&Yuv420Frame::filled(640, 360, yuv))
            .unwrap();
        let want = color_affine(src_color, ColorSpec::OUTPUT)
            .apply(yuv.map(f64::from))
            .map(|v| v.round().clamp(0.0, 255.0) as u8);
        assert_flat(&out, want, 1, &format!("{src_color:?} {yuv:?}"));
    }
    // Rotated sources take the generic addressing path; the conversion must not care.
    let src_color = cases[0].0;
    let mut cfg = config(360, 640, 320, 180);
    cfg.src_color = src_color;
    cfg.rotation = Rotation::Cw270;
    let mut gpu = GpuCompositor::new(&ctx, cfg, 1).unwrap();
    let out = gpu
        .compose_one(&Yuv420Frame::filled(360, 640, cases[0].1))
        .unwrap();
    let want = color_affine(src_color, ColorSpec::OUTPUT)
        .apply(cases[0].1.map(f64::from))
        .map(|v| v.round().clamp(0.0, 255.0) as u8);
    assert_flat(&out, want, 1, "rotated BT.601 -> BT.709");

    // Full-range white becomes limited-range white exactly.
    let mut cfg = config(64, 64, 64, 64);
    cfg.src_color.range = Range::Full;
    let mut gpu = GpuCompositor::new(&ctx, cfg, 1).unwrap();
    let out = gpu
        .compose_one(&Yuv420Frame::filled(64, 64, [255, 128, 128]))
        .unwrap();
    assert_flat(&out, [235, 128, 128], 0, "full-range white");
}

#[test]
fn matrix_change_on_real_content_matches_the_cpu_math() {
    let Some(ctx) = context("matrix_content") else {
        return;
    };
    let src_color = ColorSpec {
        matrix: Matrix::Bt601,
        range: Range::Limited,
    };
    let src = lavfi_frame("testsrc2", 320, 180).unwrap_or_else(|| synthetic_frame(320, 180));
    let mut cfg = config(320, 180, 320, 180);
    cfg.src_color = src_color;
    let mut gpu = GpuCompositor::new(&ctx, cfg, 1).unwrap();
    let out = gpu.compose_one(&src).unwrap();
    let affine = color_affine(src_color, ColorSpec::OUTPUT);
    let (w, h, cw, ch) = (320usize, 180usize, 160usize, 90usize);
    // Chroma planes: U' and V' from the co-sited U and V.
    for i in 0..cw * ch {
        let want = affine.apply([0.0, src.u[i] as f64, src.v[i] as f64]);
        for (c, got) in [(1, out.u[i]), (2, out.v[i])] {
            assert!(
                (got as f64 - want[c]).abs() <= 1.0,
                "chroma {i}: {got} vs {}",
                want[c]
            );
        }
    }
    // Luma: Y' takes chroma interpolated (bilinearly) at the centre-sited luma position.
    let bilinear = |p: &[u8], fx: f64, fy: f64| {
        let (fx, fy) = (
            fx.clamp(0.0, (cw - 1) as f64),
            fy.clamp(0.0, (ch - 1) as f64),
        );
        let (x0, y0) = (fx as usize, fy as usize);
        let (x1, y1) = ((x0 + 1).min(cw - 1), (y0 + 1).min(ch - 1));
        let (tx, ty) = (fx - x0 as f64, fy - y0 as f64);
        let at = |x: usize, y: usize| p[y * cw + x] as f64;
        let top = at(x0, y0) + (at(x1, y0) - at(x0, y0)) * tx;
        let bottom = at(x0, y1) + (at(x1, y1) - at(x0, y1)) * tx;
        top + (bottom - top) * ty
    };
    let mut worst = 0.0f64;
    for y in 0..h {
        for x in 0..w {
            let (fx, fy) = ((x as f64 - 0.5) / 2.0, (y as f64 - 0.5) / 2.0);
            let yuv = [
                src.y[y * w + x] as f64,
                bilinear(&src.u, fx, fy),
                bilinear(&src.v, fx, fy),
            ];
            let want = affine.apply(yuv)[0].clamp(0.0, 255.0);
            worst = worst.max((out.y[y * w + x] as f64 - want).abs());
        }
    }
    assert!(worst <= 1.0, "luma differs from the CPU math by {worst}");
}

/// A 64x32 grey frame with a bright 8x8 luma (4x4 chroma) marker at the coded top-left.
fn marker_frame() -> Yuv420Frame {
    let mut f = Yuv420Frame::filled(64, 32, [60, 128, 128]);
    for y in 0..8 {
        for x in 0..8 {
            f.y[y * 64 + x] = 230;
        }
    }
    for y in 0..4 {
        for x in 0..4 {
            f.u[y * 32 + x] = 40;
            f.v[y * 32 + x] = 210;
        }
    }
    f
}

/// Luma/U/V at the centre of each display corner (inset by a few samples).
fn corners(f: &Yuv420Frame) -> [(&'static str, [u8; 3]); 4] {
    let (w, h) = (f.width as usize, f.height as usize);
    let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
    let at = |x: usize, y: usize, cx: usize, cy: usize| {
        [f.y[y * w + x], f.u[cy * cw + cx], f.v[cy * cw + cx]]
    };
    let (i, ci) = (3usize, 1usize);
    [
        ("top_left", at(i, i, ci, ci)),
        ("top_right", at(w - 1 - i, i, cw - 1 - ci, ci)),
        ("bottom_left", at(i, h - 1 - i, ci, ch - 1 - ci)),
        (
            "bottom_right",
            at(w - 1 - i, h - 1 - i, cw - 1 - ci, ch - 1 - ci),
        ),
    ]
}

#[test]
fn rotation_moves_the_marker_to_the_right_corner() {
    let Some(ctx) = context("rotation") else {
        return;
    };
    let src = marker_frame();
    let cases = [
        (Rotation::None, "top_left"),
        (Rotation::Cw90, "top_right"),
        (Rotation::Cw180, "bottom_right"),
        (Rotation::Cw270, "bottom_left"),
    ];
    for (rot, expected) in cases {
        // Same size, and 2x up (bicubic): the marker is 8 samples wide so its centre is clean.
        for scale in [1, 2] {
            let (dw, dh) = rot.display_size(64, 32);
            let mut cfg = config(64, 32, dw * scale, dh * scale);
            cfg.rotation = rot;
            let mut gpu = GpuCompositor::new(&ctx, cfg, 1).unwrap();
            let out = gpu.compose_one(&src).unwrap();
            assert_eq!((out.width, out.height), (dw * scale, dh * scale));
            for (name, yuv) in corners(&out) {
                let want: [u8; 3] = if name == expected {
                    [230, 40, 210]
                } else {
                    [60, 128, 128]
                };
                for c in 0..3 {
                    assert!(
                        (yuv[c] as i32 - want[c] as i32).abs() <= 2,
                        "{rot:?} x{scale}: {name} is {yuv:?}, expected {want:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn rotation_plus_downscale_matches_the_reference() {
    let Some(ctx) = context("rotation_downscale") else {
        return;
    };
    let src = lavfi_frame("testsrc2", 640, 360).unwrap_or_else(|| synthetic_frame(640, 360));
    for rot in [Rotation::Cw90, Rotation::Cw180, Rotation::Cw270] {
        let (ow, oh) = rot.display_size(426, 240);
        let mut cfg = config(640, 360, ow, oh);
        cfg.rotation = rot;
        let mut gpu = GpuCompositor::new(&ctx, cfg, 1).unwrap();
        let out = gpu.compose_one(&src).unwrap();
        let want = reference_area(&src, rot, ow, oh);
        let p = psnr_planes(&out, &want);
        eprintln!(
            "{rot:?} 640x360 -> {ow}x{oh}: PSNR Y {:.1} U {:.1} V {:.1}",
            p[0], p[1], p[2]
        );
        assert!(p.iter().all(|&v| v >= 45.0), "{rot:?}: {p:?}");
    }
}

fn gradient_watermark(w: u32, h: u32) -> WatermarkImage {
    let mut rgba = Vec::with_capacity((w * h * 4) as usize);
    for y in 0..h {
        for x in 0..w {
            let a = if x < 2 {
                0
            } else {
                (55 + 200 * x / w.max(1)) as u8
            };
            rgba.extend_from_slice(&[255, (255 * y / h) as u8, 40, a]);
        }
    }
    WatermarkImage {
        width: w,
        height: h,
        rgba,
    }
}

#[test]
fn watermark_blends_at_its_placement_and_nowhere_else() {
    let Some(ctx) = context("watermark") else {
        return;
    };
    let bg = [100u8, 120u8, 140u8];
    // Same-size (bit-exact path) and 1080p -> 720p (flat source scales exactly).
    for (sw, sh, ow, oh, pos) in [
        (640, 360, 640, 360, Position::BottomRight),
        (1920, 1080, 1280, 720, Position::TopLeft),
        (1920, 1080, 1280, 720, Position::Center),
    ] {
        let placement = place_watermark(ow, oh, 160, 90, pos).unwrap();
        let wm = prepare_watermark(
            &gradient_watermark(160, 90),
            placement,
            0.8,
            ColorSpec::OUTPUT,
        );
        let mut cfg = config(sw, sh, ow, oh);
        cfg.watermark = Some(wm.clone());
        let mut gpu = GpuCompositor::new(&ctx, cfg, 2).unwrap();
        let out = gpu.compose_one(&Yuv420Frame::filled(sw, sh, bg)).unwrap();

        let mut want = Yuv420Frame::filled(ow, oh, bg);
        blend_watermark(&mut want, &wm);
        assert_same(
            &out,
            &want,
            &format!("{sw}x{sh} -> {ow}x{oh} {pos:?}: GPU blend vs the CPU rule"),
        );

        // And it is really there: inside differs from the background, outside does not.
        let inside = |x: u32, y: u32| {
            x >= placement.x
                && x < placement.x + placement.width
                && y >= placement.y
                && y < placement.y + placement.height
        };
        let mut changed = 0;
        for y in 0..oh {
            for x in 0..ow {
                let v = out.y[(y * ow + x) as usize];
                if inside(x, y) {
                    changed += (v != bg[0]) as u32;
                } else {
                    assert_eq!(v, bg[0], "luma changed outside the watermark at ({x}, {y})");
                }
            }
        }
        assert!(
            changed > placement.width * placement.height / 2,
            "watermark barely visible"
        );
        // A fully opaque sample carries the watermark colour; alpha follows the gradient.
        let p = placement;
        let right = ((p.y + p.height / 2) * ow + p.x + p.width - 1) as usize;
        let a = wm.alpha_y[((p.height / 2) * p.width + p.width - 1) as usize] as u32;
        let expected = (bg[0] as u32 * (255 - a)
            + wm.y[((p.height / 2) * p.width + p.width - 1) as usize] as u32 * a
            + 127)
            / 255;
        assert_eq!(out.y[right] as u32, expected);
    }
}

#[test]
fn watermark_edges_are_exact_at_any_alignment() {
    let Some(ctx) = context("watermark_edges") else {
        return;
    };
    let bg = [90u8, 100u8, 160u8];
    // Luma x = 6 (mid-word), odd chroma x and widths: every partial-word case at both edges.
    for (x, y, width, height) in [
        (6, 4, 10, 6),
        (2, 0, 14, 32),
        (0, 2, 64, 4),
        (50, 26, 14, 6),
    ] {
        let placement = Placement {
            x,
            y,
            width,
            height,
        };
        let wm = prepare_watermark(
            &gradient_watermark(23, 9),
            placement,
            1.0,
            ColorSpec::OUTPUT,
        );
        let mut cfg = config(64, 32, 64, 32);
        cfg.watermark = Some(wm.clone());
        let mut gpu = GpuCompositor::new(&ctx, cfg, 1).unwrap();
        let out = gpu.compose_one(&Yuv420Frame::filled(64, 32, bg)).unwrap();
        let mut want = Yuv420Frame::filled(64, 32, bg);
        blend_watermark(&mut want, &wm);
        assert_same(&out, &want, &format!("watermark at {placement:?}"));
    }
}

#[test]
fn checkerboard_downscale_does_not_alias() {
    let Some(ctx) = context("checkerboard") else {
        return;
    };
    let (w, h) = (3840u32, 2160u32);
    let mut src = Yuv420Frame::filled(w, h, [0, 128, 128]);
    for y in 0..h {
        for x in 0..w {
            src.y[(y * w + x) as usize] = if (x + y) % 2 == 0 { 16 } else { 235 };
        }
    }
    let mid = (16.0 + 235.0) / 2.0;
    // Even ratios average whole periods: mid-grey everywhere. The odd 3x ratio (4k -> 720p)
    // leaves the exact 3x3-box residue of +-109.5/9 = +-12.2, which swscale's area filter (the
    // CPU reference) gives as well; naive bilinear would return the raw 16/235 pattern.
    for (ow, oh, tol) in [
        (1920u32, 1080u32, 1.0f64),
        (960, 540, 1.0),
        (1280, 720, 12.8),
    ] {
        let mut gpu = GpuCompositor::new(&ctx, config(w, h, ow, oh), 1).unwrap();
        let out = gpu.compose_one(&src).unwrap();
        let mean = out.y.iter().map(|&v| v as f64).sum::<f64>() / out.y.len() as f64;
        let worst = out
            .y
            .iter()
            .map(|&v| (v as f64 - mid).abs())
            .fold(0.0, f64::max);
        eprintln!("4k checkerboard -> {ow}x{oh}: mean {mean:.2}, worst deviation {worst:.1}");
        assert!((mean - mid).abs() < 0.6, "{ow}x{oh}: mean {mean}");
        assert!(
            worst <= tol,
            "{ow}x{oh}: a sample is {worst} from mid-grey (aliasing)"
        );
        assert!(
            out.u.iter().chain(&out.v).all(|&c| c == 128),
            "chroma must stay neutral"
        );
    }
}

#[test]
fn downscale_matches_f64_area_reference() {
    let Some(ctx) = context("area_reference") else {
        return;
    };
    let mut sources = vec![("synthetic", synthetic_frame(1920, 1080))];
    for name in ["testsrc2", "smptebars"] {
        match lavfi_frame(name, 1920, 1080) {
            Some(f) => sources.push((name, f)),
            None => eprintln!("ffmpeg CLI unavailable: {name} fixture skipped"),
        }
    }
    for (name, src) in &sources {
        // 96x54 is a 20x shrink: too wide for the word-loading fast path.
        for (ow, oh) in [(1280, 720), (854, 480), (640, 360), (96, 54)] {
            let mut gpu = GpuCompositor::new(&ctx, config(1920, 1080, ow, oh), 1).unwrap();
            let out = gpu.compose_one(src).unwrap();
            let p = psnr_planes(&out, &reference_area(src, Rotation::None, ow, oh));
            eprintln!(
                "{name} 1080p -> {ow}x{oh} vs f64 area: Y {:.1} U {:.1} V {:.1} dB",
                p[0], p[1], p[2]
            );
            assert!(p.iter().all(|&v| v >= 40.0), "{name} -> {ow}x{oh}: {p:?}");
        }
    }
}

#[test]
fn matches_ffmpeg_swscale() {
    let Some(ctx) = context("swscale") else {
        return;
    };
    let Some(src) = lavfi_frame("testsrc2", 1920, 1080) else {
        eprintln!("!!!! ffmpeg CLI unavailable: swscale comparison skipped !!!!");
        return;
    };
    let small = lavfi_frame("testsrc2", 640, 360).unwrap_or_else(|| synthetic_frame(640, 360));
    // Downscale against SWS_AREA, upscale against SWS_BICUBIC: the CPU compositor's choices.
    for (input, ow, oh, flags) in [
        (&src, 1280u32, 720u32, "area"),
        (&src, 640, 360, "area"),
        (&small, 1280, 720, "bicubic"),
    ] {
        let Some(want) = ffmpeg_scale(input, ow, oh, flags) else {
            eprintln!("ffmpeg scale failed: comparison skipped");
            return;
        };
        let mut gpu =
            GpuCompositor::new(&ctx, config(input.width, input.height, ow, oh), 1).unwrap();
        let out = gpu.compose_one(input).unwrap();
        let p = psnr_planes(&out, &want);
        eprintln!(
            "testsrc2 {}x{} -> {ow}x{oh} vs swscale {flags}: Y {:.1} U {:.1} V {:.1} dB",
            input.width, input.height, p[0], p[1], p[2]
        );
        assert!(p.iter().all(|&v| v >= 40.0), "{flags} -> {ow}x{oh}: {p:?}");
    }
}

#[test]
fn pipelined_frames_come_back_in_order() {
    let Some(ctx) = context("pipeline") else {
        return;
    };
    let colours: Vec<[u8; 3]> = (0..9u8)
        .map(|i| [20 + 25 * i, 100 + i, 150 - 3 * i])
        .collect();
    let in_flight = 3;
    let mut gpu = GpuCompositor::new(&ctx, config(1920, 1080, 1280, 720), in_flight).unwrap();
    let mut outputs = Vec::new();
    for (i, c) in colours.iter().enumerate() {
        let returned = gpu.submit(&Yuv420Frame::filled(1920, 1080, *c)).unwrap();
        assert_eq!(returned.is_some(), i >= in_flight, "submit {i}");
        outputs.extend(returned);
        if i == 4 {
            // A preview in the middle must not disturb the stream.
            let preview = gpu
                .compose_one(&Yuv420Frame::filled(1920, 1080, [200, 60, 60]))
                .unwrap();
            assert_flat(&preview, [200, 60, 60], 0, "preview");
        }
    }
    assert_eq!(gpu.in_flight(), in_flight);
    outputs.extend(gpu.finish().unwrap());
    assert_eq!(gpu.in_flight(), 0);
    assert_eq!(outputs.len(), colours.len());
    for (i, (out, c)) in outputs.iter().zip(&colours).enumerate() {
        assert_flat(out, *c, 0, &format!("frame {i}"));
    }
    // The compositor is reusable after finish.
    assert!(
        gpu.submit(&Yuv420Frame::filled(1920, 1080, colours[0]))
            .unwrap()
            .is_none()
    );
    assert_flat(&gpu.finish().unwrap()[0], colours[0], 0, "after finish");
}

#[test]
fn odd_and_tiny_sizes_work() {
    let Some(ctx) = context("odd_sizes") else {
        return;
    };
    for (sw, sh, ow, oh, rot) in [
        (641, 361, 321, 181, Rotation::None),
        (641, 361, 181, 321, Rotation::Cw90),
        (1, 1, 2, 2, Rotation::None),
        (3, 5, 1, 1, Rotation::Cw270),
        (2, 2, 7, 3, Rotation::Cw180),
    ] {
        let mut cfg = config(sw, sh, ow, oh);
        cfg.rotation = rot;
        let mut gpu = GpuCompositor::new(&ctx, cfg, 2).unwrap();
        let out = gpu
            .compose_one(&Yuv420Frame::filled(sw, sh, COLOUR))
            .unwrap();
        assert_flat(&out, COLOUR, 1, &format!("{sw}x{sh} -> {ow}x{oh} {rot:?}"));
    }
    let src = synthetic_frame(641, 361);
    let mut gpu = GpuCompositor::new(&ctx, config(641, 361, 321, 181), 1).unwrap();
    let p = psnr_planes(
        &gpu.compose_one(&src).unwrap(),
        &reference_area(&src, Rotation::None, 321, 181),
    );
    assert!(p.iter().all(|&v| v >= 40.0), "odd downscale: {p:?}");
}

#[test]
fn bad_configs_and_frames_are_typed_errors() {
    let Some(ctx) = context("errors") else { return };
    let invalid = |cfg, n| {
        matches!(
            GpuCompositor::new(&ctx, cfg, n),
            Err(GpuError::InvalidConfig { .. })
        )
    };
    assert!(invalid(config(0, 1080, 1280, 720), 1));
    assert!(invalid(config(1920, 1080, 1280, 0), 1));
    assert!(invalid(config(1920, 1080, 100_000, 720), 1));
    assert!(invalid(config(1920, 1080, 1280, 720), 0));
    assert!(invalid(config(1920, 1080, 1280, 720), 1000));
    assert!(
        invalid(config(8000, 8000, 2, 2), 1),
        "extreme shrink must be refused"
    );
    let mut cfg = config(1920, 1080, 1280, 720);
    let wm = prepare_watermark(
        &gradient_watermark(8, 8),
        Placement {
            x: 1276,
            y: 0,
            width: 8,
            height: 8,
        },
        1.0,
        ColorSpec::OUTPUT,
    );
    cfg.watermark = Some(wm.clone());
    assert!(invalid(cfg.clone(), 1), "watermark outside the frame");
    let mut short = wm;
    short.placement.x = 0;
    short.alpha_c.pop();
    cfg.watermark = Some(short);
    assert!(invalid(cfg, 1), "truncated watermark plane");

    let mut gpu = GpuCompositor::new(&ctx, config(64, 64, 32, 32), 2).unwrap();
    let e = gpu
        .submit(&Yuv420Frame::filled(32, 64, COLOUR))
        .unwrap_err();
    assert!(matches!(e, GpuError::FrameSizeMismatch { .. }), "{e}");
    let mut bad = Yuv420Frame::filled(64, 64, COLOUR);
    bad.u.truncate(10);
    assert!(matches!(
        gpu.compose_one(&bad),
        Err(GpuError::FrameSizeMismatch { .. })
    ));
    // Still usable afterwards.
    assert_flat(
        &gpu.compose_one(&Yuv420Frame::filled(64, 64, COLOUR))
            .unwrap(),
        COLOUR,
        0,
        "after errors",
    );
}

/// The semi-planar inputs hardware decoders give (NV12; P010 for 10-bit) go through the same
/// pass as planar 8-bit, and agree with it to rounding on every path (rotation, shrink,
/// enlarge, matrix change, watermark), with padded rows too: unrotated NV12 bit for bit (its
/// rows load like planar ones), rotated NV12 and P010 within one code (per-tap loads sum in
/// another order). The planar path itself is held to the CPU references by the tests above.
#[test]
fn nv12_and_p010_inputs_match_the_planar_path() {
    let Some(ctx) = context("semi_planar") else {
        return;
    };
    let (sw, sh) = (640, 360);
    let src = lavfi_frame("testsrc2", sw, sh).unwrap_or_else(|| synthetic_frame(sw, sh));
    let logo = gradient_watermark(96, 40);
    let bt601_full = ColorSpec {
        matrix: Matrix::Bt601,
        range: Range::Full,
    };
    for (rot, (ow, oh), color) in [
        (Rotation::None, (426, 240), ColorSpec::OUTPUT),
        (Rotation::None, (1280, 720), bt601_full),
        (Rotation::Cw90, (240, 426), ColorSpec::OUTPUT),
        (Rotation::Cw180, (640, 360), bt601_full),
        (Rotation::Cw270, (180, 320), ColorSpec::OUTPUT),
    ] {
        let mut cfg = config(sw, sh, ow, oh);
        cfg.rotation = rot;
        cfg.src_color = color;
        let placement = place_watermark(ow, oh, logo.width, logo.height, Position::BottomRight)
            .expect("watermark fits");
        cfg.watermark = Some(prepare_watermark(&logo, placement, 0.7, ColorSpec::OUTPUT));
        let planar = GpuCompositor::new(&ctx, cfg.clone(), 1)
            .unwrap()
            .compose_one(&src)
            .unwrap();
        for (format, low_bits) in [
            (SourceFormat::Nv12, 0),
            (SourceFormat::P010, 0),
            (SourceFormat::P010, 3),
        ] {
            let semi = SemiPlanarFrame::from_yuv420(&src, format, low_bits);
            let mut cfg = cfg.clone();
            cfg.src_format = format;
            let mut gpu = GpuCompositor::new(&ctx, cfg, 2).unwrap();
            let out = gpu.compose_one(&semi).unwrap();
            let what = format!("{rot:?} -> {ow}x{oh} {color:?} {format:?} +{low_bits}");
            let p = psnr_planes(&out, &planar);
            let worst = max_difference(&out, &planar);
            eprintln!(
                "{what}: PSNR Y {:.1} U {:.1} V {:.1}, largest difference {worst}",
                p[0], p[1], p[2]
            );
            assert!(p.iter().all(|&v| v >= 45.0), "{what}: {p:?}");
            assert!(worst <= 1 + (low_bits > 0) as u8, "{what}: off by {worst}");
            // NV12 reads its rows like planar input (the same sums in the same order).
            if format == SourceFormat::Nv12 && rot == Rotation::None {
                assert!(
                    out == planar,
                    "{what}: NV12 rows are not bit-exact with planar"
                );
            }
            // Rows padded the way decoders pad them (64-byte aligned strides).
            let padded = |data: &[u8], row: usize| -> (Vec<u8>, usize) {
                let stride = row.next_multiple_of(64) + 64;
                let mut out = vec![0xAB; stride * (data.len() / row)];
                for (r, chunk) in data.chunks(row).enumerate() {
                    out[r * stride..r * stride + row].copy_from_slice(chunk);
                }
                (out, stride)
            };
            let y_row = format.plane_shape(0, sw, sh).0;
            let uv_row = format.plane_shape(1, sw, sh).0;
            let (y, ys) = padded(&semi.y, y_row);
            let (uv, uvs) = padded(&semi.uv, uv_row);
            let strided = SourceFrame {
                width: sw,
                height: sh,
                format,
                planes: [(&y, ys), (&uv, uvs), (&[], 0)],
            };
            assert!(
                gpu.compose_one(strided).unwrap() == out,
                "{what}: padded rows change the output"
            );
        }
    }
}

#[test]
fn a_frame_of_another_format_or_short_planes_is_a_typed_error() {
    let Some(ctx) = context("semi_planar_errors") else {
        return;
    };
    let mut cfg = config(64, 32, 32, 16);
    cfg.src_format = SourceFormat::Nv12;
    let mut gpu = GpuCompositor::new(&ctx, cfg, 1).unwrap();
    let planar = Yuv420Frame::filled(64, 32, [100, 110, 120]);
    let err = gpu.submit(&planar).unwrap_err();
    assert!(
        matches!(err, GpuError::FrameSizeMismatch { ref detail, .. } if detail.contains("yuv420p")),
        "{err}"
    );
    let mut semi = SemiPlanarFrame::from_yuv420(&planar, SourceFormat::Nv12, 0);
    semi.uv.truncate(semi.uv.len() - 1);
    let err = gpu.submit(&semi).unwrap_err();
    assert!(
        matches!(err, GpuError::FrameSizeMismatch { ref detail, .. } if detail.contains("plane 1")),
        "{err}"
    );
    // A stride shorter than a row.
    let semi = SemiPlanarFrame::from_yuv420(&planar, SourceFormat::Nv12, 0);
    let bad = SourceFrame {
        planes: [(&semi.y, 32), (&semi.uv, 64), (&[], 0)],
        ..semi.as_source()
    };
    assert!(matches!(
        gpu.submit(bad),
        Err(GpuError::FrameSizeMismatch { .. })
    ));
    assert_eq!(gpu.in_flight(), 0);
}

/// The largest sample difference between two frames of one size.
fn max_difference(a: &Yuv420Frame, b: &Yuv420Frame) -> u8 {
    [(&a.y, &b.y), (&a.u, &b.u), (&a.v, &b.v)]
        .into_iter()
        .flat_map(|(p, q)| p.iter().zip(q.iter()).map(|(x, y)| x.abs_diff(*y)))
        .max()
        .unwrap_or(0)
}

/// The compose pass alone, timed by timestamp queries where the adapter has them (lavapipe
/// does): a positive time, the bytes of one source and one output, and frames in flight keep
/// their order.
#[test]
fn kernel_timing_measures_the_pass_without_disturbing_frames_in_flight() {
    let Some(ctx) = context("kernel_timing") else {
        return;
    };
    let mut cfg = config(640, 360, 320, 180);
    cfg.src_format = SourceFormat::Nv12;
    let mut gpu = GpuCompositor::new(&ctx, cfg, 3).unwrap();
    let frames: Vec<SemiPlanarFrame> = (0..3u8)
        .map(|i| {
            let f = Yuv420Frame::filled(640, 360, [40 + 60 * i, 128, 128]);
            SemiPlanarFrame::from_yuv420(&f, SourceFormat::Nv12, 0)
        })
        .collect();
    assert!(gpu.submit(&frames[0]).unwrap().is_none());
    assert!(gpu.submit(&frames[1]).unwrap().is_none());
    match gpu.kernel_timing(&frames[2], 5).unwrap() {
        Some(t) => {
            eprintln!(
                "kernel {:?} per frame, {:.2} GB/s",
                t.per_frame,
                t.bandwidth() / 1e9
            );
            assert!(t.per_frame > std::time::Duration::ZERO);
            let out = 320 * 180 + 2 * 160 * 90;
            assert!(t.bytes_per_frame >= (640 * 360 * 3 / 2 + out) as u64);
            assert_eq!(t.source, (640, 360));
        }
        None => eprintln!("this adapter records no timestamps"),
    }
    let mut out = gpu.finish().unwrap();
    assert_eq!(out.len(), 2);
    let second = out.pop().unwrap();
    let first = out.pop().unwrap();
    assert_eq!((first.y[0], second.y[0]), (40, 100));
}

/// One device and queue, many renders: compositors on several threads share one context and
/// submit at the same time; each gets its own frames back, in order and correct.
#[test]
fn concurrent_compositors_share_one_context() {
    let Some(ctx) = context("shared_context") else {
        return;
    };
    let threads: Vec<_> = (0..6u8)
        .map(|t| {
            let ctx = ctx.clone();
            std::thread::spawn(move || {
                let mut cfg = config(640, 360, 320, 180);
                cfg.src_format = if t % 2 == 0 {
                    SourceFormat::Yuv420p
                } else {
                    SourceFormat::Nv12
                };
                let mut gpu = GpuCompositor::new(&ctx, cfg, 3).unwrap();
                let mut got = Vec::new();
                for i in 0..12u8 {
                    let f = Yuv420Frame::filled(640, 360, [20 + 30 * t + i, 100 + t, 150 - t]);
                    let out = if t % 2 == 0 {
                        gpu.submit(&f).unwrap()
                    } else {
                        let semi = SemiPlanarFrame::from_yuv420(&f, SourceFormat::Nv12, 0);
                        gpu.submit(&semi).unwrap()
                    };
                    got.extend(out);
                }
                got.extend(gpu.finish().unwrap());
                (t, got)
            })
        })
        .collect();
    for handle in threads {
        let (t, frames) = handle.join().expect("compositor thread panicked");
        assert_eq!(frames.len(), 12, "thread {t}");
        for (i, f) in frames.iter().enumerate() {
            assert_flat(
                f,
                [20 + 30 * t + i as u8, 100 + t, 150 - t],
                0,
                &format!("thread {t} frame {i}"),
            );
        }
    }
}

/// The 10-bit frame of an 8-bit one: each code `c` as `4c + low` (what
/// [`SemiPlanarFrame::from_yuv420`] puts in P010).
fn ten_bit(f: &Yuv420Frame, low: u16) -> Yuv420Frame {
    let mut out = Yuv420Frame::blank(f.width, f.height, SampleDepth::Ten);
    for (dst, src) in [(&mut out.y, &f.y), (&mut out.u, &f.u), (&mut out.v, &f.v)] {
        for (i, &c) in src.iter().enumerate() {
            Yuv420Frame::set_sample16(dst, i, u16::from(c) * 4 + low);
        }
    }
    out
}

/// HDR kept (10-bit output): at source size every P010 code comes out as it went in, turned
/// where the source is rotated, across padded rows and idle invocations; the 10-bit watermark
/// blends bit for bit like the CPU's [`blend_watermark`]. Configs that mix depths are refused.
#[test]
fn ten_bit_output_keeps_every_code_and_blends_like_the_cpu() {
    let Some(ctx) = context("ten_bit") else {
        return;
    };
    // 70 is not a multiple of 4 (nor is its chroma's 35): rows end mid-invocation.
    let (w, h) = (70, 46);
    let src = synthetic_frame(w, h);
    let hdr = ColorSpec {
        matrix: Matrix::Bt2020,
        range: Range::Limited,
    };
    let signal = HdrSignal {
        transfer: Transfer::Pq,
        primaries: Primaries::Bt2020,
        output: hdr,
    };
    let logo = gradient_watermark(24, 16);
    for (rot, low) in [
        (Rotation::None, 3),
        (Rotation::Cw90, 1),
        (Rotation::Cw180, 0),
        (Rotation::Cw270, 2),
    ] {
        let (ow, oh) = rot.display_size(w, h);
        let mut cfg = config(w, h, ow, oh);
        cfg.rotation = rot;
        cfg.src_color = hdr;
        cfg.src_format = SourceFormat::P010;
        cfg.light = OutputLight::Kept {
            source: hdr,
            signal,
        };
        let (cw, ch) = Yuv420Frame::chroma_size(w, h);
        let (y, _, _) = rotate_plane(&src.y, w, h, rot);
        let (u, _, _) = rotate_plane(&src.u, cw, ch, rot);
        let (v, _, _) = rotate_plane(&src.v, cw, ch, rot);
        let want = ten_bit(&Yuv420Frame::from_planes(ow, oh, y, u, v), low);
        let semi = SemiPlanarFrame::from_yuv420(&src, SourceFormat::P010, low);
        let what = format!("{rot:?} +{low}");
        let plain = GpuCompositor::new(&ctx, cfg.clone(), 1)
            .unwrap()
            .compose_one(&semi)
            .unwrap();
        assert_eq!(plain.depth, SampleDepth::Ten, "{what}");
        assert!(plain == want, "{what}: the codes changed");

        // Off the word grid in luma (x = 10) and chroma (x = 5).
        let placement = Placement {
            x: 10,
            y: 6,
            width: 24,
            height: 16,
        };
        let wm = prepare_watermark_hdr(&logo, placement, 0.7, &signal);
        cfg.watermark = Some(wm.clone());
        let mut gpu = GpuCompositor::new(&ctx, cfg, 2).unwrap();
        let mut blended = want.clone();
        blend_watermark(&mut blended, &wm);
        assert!(blended != want, "{what}: the watermark shows");
        // Through the ring too: two frames in flight, then drained.
        let mut out: Vec<Yuv420Frame> = (0..3).filter_map(|_| gpu.submit(&semi).unwrap()).collect();
        out.extend(gpu.finish().unwrap());
        assert_eq!(out.len(), 3);
        for f in out {
            assert!(
                f == blended,
                "{what}: the 10-bit blend differs from the CPU's"
            );
        }
    }

    let invalid = |cfg| {
        matches!(
            GpuCompositor::new(&ctx, cfg, 1),
            Err(GpuError::InvalidConfig { .. })
        )
    };
    let placement = Placement {
        x: 0,
        y: 0,
        width: 8,
        height: 8,
    };
    let logo = gradient_watermark(8, 8);
    let mut sdr_out = config(64, 64, 32, 32);
    sdr_out.watermark = Some(prepare_watermark_hdr(&logo, placement, 1.0, &signal));
    assert!(invalid(sdr_out), "a 10-bit watermark over 8-bit output");
    let mut hdr_out = config(64, 64, 32, 32);
    hdr_out.light = OutputLight::Kept {
        source: hdr,
        signal,
    };
    hdr_out.watermark = Some(prepare_watermark(&logo, placement, 1.0, hdr));
    assert!(invalid(hdr_out), "an 8-bit watermark over 10-bit output");
}
