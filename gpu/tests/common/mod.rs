//! Shared helpers for the GPU tests: adapter acquisition, fixtures, a reference scaler, PSNR.
#![allow(dead_code)]

use std::process::Command;

use vidforge_gpu::filter::area_downscale_reference;
use vidforge_gpu::{
    AdapterPreference, ColorSpec, ComposeConfig, GpuContext, GpuError, OutputLight, Rotation,
    Yuv420Frame,
};

/// A context on any adapter (lavapipe in CI). `None` (with a loud note) when there is none,
/// unless `VIDFORGE_REQUIRE_GPU=1`, where a missing adapter fails the test.
pub fn context(test: &str) -> Option<GpuContext> {
    match GpuContext::new(AdapterPreference::AllowSoftware) {
        Ok(ctx) => {
            let a = ctx.adapter();
            eprintln!(
                "[{test}] adapter: {} ({}, {}, software: {})",
                a.name, a.backend, a.device_type, a.is_software
            );
            assert!(!a.name.is_empty(), "adapter must report a name");
            Some(ctx)
        }
        Err(e @ GpuError::NoAdapter { .. }) => {
            if std::env::var("VIDFORGE_REQUIRE_GPU").as_deref() == Ok("1") {
                panic!("[{test}] VIDFORGE_REQUIRE_GPU=1 but no adapter: {e}");
            }
            eprintln!(
                "\n!!!! [{test}] SKIPPED: no GPU adapter ({e}). Set WGPU_BACKEND=vulkan with \
                 mesa-vulkan-drivers installed, or VIDFORGE_REQUIRE_GPU=1 to fail. !!!!\n"
            );
            None
        }
        Err(e) => panic!("[{test}] creating the GPU context failed: {e}"),
    }
}

pub fn config(sw: u32, sh: u32, ow: u32, oh: u32) -> ComposeConfig {
    ComposeConfig {
        src_width: sw,
        src_height: sh,
        src_color: ColorSpec::OUTPUT,
        rotation: Rotation::None,
        out_width: ow,
        out_height: oh,
        watermark: None,
        src_format: Default::default(),
        light: OutputLight::Sdr,
    }
}

/// Asserts every sample of every plane is within `tol` of `yuv`.
pub fn assert_flat(frame: &Yuv420Frame, yuv: [u8; 3], tol: i32, what: &str) {
    for (i, plane) in [&frame.y, &frame.u, &frame.v].into_iter().enumerate() {
        let (mut lo, mut hi) = (255u8, 0u8);
        for &v in plane.iter() {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        let want = yuv[i] as i32;
        assert!(
            (lo as i32 - want).abs() <= tol && (hi as i32 - want).abs() <= tol,
            "{what}: plane {i} spans {lo}..={hi}, expected {want} +-{tol}"
        );
    }
}

/// One planar yuv420p frame from an FFmpeg lavfi source (`testsrc2`, `smptebars`...), or `None`
/// when the ffmpeg CLI is unavailable.
pub fn lavfi_frame(source: &str, w: u32, h: u32) -> Option<Yuv420Frame> {
    let out = Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i"])
        .arg(format!("{source}=size={w}x{h}:rate=25"))
        .args([
            "-frames:v",
            "1",
            "-pix_fmt",
            "yuv420p",
            "-f",
            "rawvideo",
            "-",
        ])
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!("ffmpeg failed: {}", String::from_utf8_lossy(&out.stderr));
        return None;
    }
    split_planes(&out.stdout, w, h)
}

/// Scales a yuv420p frame with the ffmpeg CLI's swscale (`flags` = area, bicubic...).
pub fn ffmpeg_scale(frame: &Yuv420Frame, ow: u32, oh: u32, flags: &str) -> Option<Yuv420Frame> {
    use std::io::Write;
    let mut child = Command::new("ffmpeg")
        .args([
            "-hide_banner",
            "-loglevel",
            "error",
            "-f",
            "rawvideo",
            "-pix_fmt",
            "yuv420p",
        ])
        .arg("-s")
        .arg(format!("{}x{}", frame.width, frame.height))
        .args(["-i", "-", "-vf"])
        .arg(format!("scale={ow}:{oh}:flags={flags}"))
        .args(["-pix_fmt", "yuv420p", "-f", "rawvideo", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .ok()?;
    let mut stdin = child.stdin.take()?;
    let data = [frame.y.as_slice(), &frame.u, &frame.v].concat();
    let writer = std::thread::spawn(move || stdin.write_all(&data));
    let out = child.wait_with_output().ok()?;
    writer.join().ok()?.ok()?;
    if !out.status.success() {
        eprintln!(
            "ffmpeg scale failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    split_planes(&out.stdout, ow, oh)
}

fn split_planes(bytes: &[u8], w: u32, h: u32) -> Option<Yuv420Frame> {
    let (cw, ch) = Yuv420Frame::chroma_size(w, h);
    let (y, c) = ((w * h) as usize, (cw * ch) as usize);
    if bytes.len() != y + 2 * c {
        return None;
    }
    Some(Yuv420Frame::from_planes(
        w,
        h,
        bytes[..y].to_vec(),
        bytes[y..y + c].to_vec(),
        bytes[y + c..].to_vec(),
    ))
}

/// A deterministic "natural-ish" frame (gradients, rings, edges) for when ffmpeg is missing.
pub fn synthetic_frame(w: u32, h: u32) -> Yuv420Frame {
    let mut f = Yuv420Frame::filled(w, h, [0, 0, 0]);
    let (cw, ch) = Yuv420Frame::chroma_size(w, h);
    for y in 0..h {
        for x in 0..w {
            let (fx, fy) = (x as f64 / w as f64, y as f64 / h as f64);
            let r = ((fx - 0.5).powi(2) + (fy - 0.5).powi(2)).sqrt();
            let ring = (r * 60.0).sin() * 40.0;
            let edge = if (x / 97 + y / 61) % 2 == 0 {
                30.0
            } else {
                -30.0
            };
            f.y[(y * w + x) as usize] = (110.0 + 60.0 * fx + ring + edge).clamp(16.0, 235.0) as u8;
        }
    }
    for y in 0..ch {
        for x in 0..cw {
            let (fx, fy) = (x as f64 / cw as f64, y as f64 / ch as f64);
            f.u[(y * cw + x) as usize] = (128.0 + 80.0 * (fx * 7.0).sin()) as u8;
            f.v[(y * cw + x) as usize] = (128.0 + 80.0 * (fy * 5.0).cos()) as u8;
        }
    }
    f
}

/// Rotates one plane clockwise (test reference, written independently of the shader's
/// addressing).
pub fn rotate_plane(p: &[u8], w: u32, h: u32, rot: Rotation) -> (Vec<u8>, u32, u32) {
    let (w, h) = (w as usize, h as usize);
    let (dw, dh) = if rot.swaps_axes() { (h, w) } else { (w, h) };
    let mut out = vec![0u8; w * h];
    for sy in 0..h {
        for sx in 0..w {
            // Where source (sx, sy) lands after turning the picture clockwise.
            let (dx, dy) = match rot {
                Rotation::None => (sx, sy),
                Rotation::Cw90 => (h - 1 - sy, sx),
                Rotation::Cw180 => (w - 1 - sx, h - 1 - sy),
                Rotation::Cw270 => (sy, w - 1 - sx),
            };
            out[dy * dw + dx] = p[sy * w + sx];
        }
    }
    (out, dw as u32, dh as u32)
}

/// Reference for the compositor's downscale path: rotate, then area-scale each plane.
pub fn reference_area(frame: &Yuv420Frame, rot: Rotation, ow: u32, oh: u32) -> Yuv420Frame {
    let (cw, ch) = Yuv420Frame::chroma_size(frame.width, frame.height);
    let (ocw, och) = Yuv420Frame::chroma_size(ow, oh);
    let (y, dw, dh) = rotate_plane(&frame.y, frame.width, frame.height, rot);
    let (u, dcw, dch) = rotate_plane(&frame.u, cw, ch, rot);
    let (v, _, _) = rotate_plane(&frame.v, cw, ch, rot);
    Yuv420Frame::from_planes(
        ow,
        oh,
        area_downscale_reference(&y, dw, dh, ow, oh),
        area_downscale_reference(&u, dcw, dch, ocw, och),
        area_downscale_reference(&v, dcw, dch, ocw, och),
    )
}

pub fn psnr(a: &[u8], b: &[u8]) -> f64 {
    assert_eq!(a.len(), b.len());
    let se: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| (x as f64 - y as f64).powi(2))
        .sum();
    let mse = se / a.len() as f64;
    if mse == 0.0 {
        return f64::INFINITY;
    }
    10.0 * (255.0 * 255.0 / mse).log10()
}

/// PSNR of Y, U, V.
pub fn psnr_planes(a: &Yuv420Frame, b: &Yuv420Frame) -> [f64; 3] {
    assert_eq!((a.width, a.height), (b.width, b.height));
    [psnr(&a.y, &b.y), psnr(&a.u, &b.u), psnr(&a.v, &b.v)]
}

/// Asserts two frames are identical, reporting the first differing sample (not the planes).
pub fn assert_same(got: &Yuv420Frame, want: &Yuv420Frame, what: &str) {
    assert_eq!(
        (got.width, got.height),
        (want.width, want.height),
        "{what}: size"
    );
    let cw = got.width.div_ceil(2) as usize;
    let planes = [
        (&got.y, &want.y, got.width as usize),
        (&got.u, &want.u, cw),
        (&got.v, &want.v, cw),
    ];
    for (i, (g, w, stride)) in planes.into_iter().enumerate() {
        assert_eq!(g.len(), w.len(), "{what}: plane {i} length");
        if let Some(at) = g.iter().zip(w.iter()).position(|(a, b)| a != b) {
            let bad = g.iter().zip(w.iter()).filter(|(a, b)| a != b).count();
            panic!(
                "{what}: plane {i} differs at ({}, {}): {} vs {} ({bad} samples differ)",
                at % stride,
                at / stride,
                g[at],
                w[at]
            );
        }
    }
}
