//! Shared helpers for the media crate's integration tests.
#![allow(dead_code)]

pub mod seams;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use vidforge_fixtures::{self as fixtures, ClipSpec};
use vidforge_gpu::SampleDepth;
use vidforge_gpu::filter::area_downscale_reference;
use vidforge_media::{
    BackendChoice, EncoderSettings, Engine, OutputFormat, RenderJob, RenderReport, Resolution,
    WatermarkSpec, Yuv420Frame,
};

pub fn tempdir() -> tempfile::TempDir {
    assert!(
        fixtures::ffmpeg_available(),
        "these tests need the ffmpeg CLI on PATH"
    );
    tempfile::tempdir().expect("temp dir")
}

pub fn cpu() -> Engine {
    Engine::new(BackendChoice::Cpu).expect("cpu engine")
}

pub fn clip(dir: &Path, spec: ClipSpec) -> PathBuf {
    fixtures::clip(dir, &spec).expect("generate fixture clip")
}

pub fn job(input: &Path, output: &Path, resolution: Resolution, format: OutputFormat) -> RenderJob {
    RenderJob {
        input: input.to_path_buf(),
        output: output.to_path_buf(),
        resolution,
        format,
        watermark: None,
        encoder: EncoderSettings::default(),
        hdr: Default::default(),
    }
}

pub fn with_watermark(mut job: RenderJob, wm: WatermarkSpec) -> RenderJob {
    job.watermark = Some(wm);
    job
}

pub fn render(engine: &Engine, job: &RenderJob) -> RenderReport {
    engine
        .render(job, &mut |_| {}, &AtomicBool::new(false))
        .unwrap_or_else(|e| panic!("render of {} failed: {e}", job.input.display()))
}

/// Files left in `dir` other than `keep`.
pub fn leftovers(dir: &Path, keep: &[&Path]) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| !keep.contains(&p.as_path()))
        .collect()
}

/// Mean of a rectangle of a plane.
pub fn mean(plane: &[u8], stride: usize, x0: usize, y0: usize, w: usize, h: usize) -> f64 {
    let mut sum = 0u64;
    for y in y0..y0 + h {
        for x in x0..x0 + w {
            sum += plane[y * stride + x] as u64;
        }
    }
    sum as f64 / (w * h) as f64
}

/// Mean (Y, U, V) of a luma-coordinate rectangle (even-aligned).
pub fn mean_yuv(f: &Yuv420Frame, x0: usize, y0: usize, w: usize, h: usize) -> [f64; 3] {
    let cw = f.width.div_ceil(2) as usize;
    [
        mean(&f.y, f.width as usize, x0, y0, w, h),
        mean(&f.u, cw, x0 / 2, y0 / 2, w / 2, h / 2),
        mean(&f.v, cw, x0 / 2, y0 / 2, w / 2, h / 2),
    ]
}

/// PSNR over all three planes, against the largest code value of their depth.
pub fn psnr(a: &Yuv420Frame, b: &Yuv420Frame) -> f64 {
    assert_eq!((a.width, a.height), (b.width, b.height));
    assert_eq!(a.depth, b.depth);
    let samples = |plane: &[u8]| -> Vec<f64> {
        match a.depth {
            SampleDepth::Eight => plane.iter().map(|&v| f64::from(v)).collect(),
            SampleDepth::Ten => (0..plane.len() / 2)
                .map(|i| f64::from(Yuv420Frame::sample16(plane, i)))
                .collect(),
        }
    };
    let mut se = 0f64;
    let mut n = 0usize;
    for (pa, pb) in [(&a.y, &b.y), (&a.u, &b.u), (&a.v, &b.v)] {
        let (sa, sb) = (samples(pa), samples(pb));
        for (x, y) in sa.iter().zip(&sb) {
            se += (x - y) * (x - y);
        }
        n += sa.len();
    }
    let mse = se / n as f64;
    if mse == 0.0 {
        return f64::INFINITY;
    }
    let peak = f64::from(a.depth.max_code());
    10.0 * (peak * peak / mse).log10()
}

/// YUV code values -> non-linear RGB 0..1 for a (matrix, full range) pair.
pub fn yuv_to_rgb(yuv: [f64; 3], bt709: bool, full: bool) -> [f64; 3] {
    let (kr, kb) = if bt709 {
        (0.2126, 0.0722)
    } else {
        (0.299, 0.114)
    };
    let kg = 1.0 - kr - kb;
    let (y, pb, pr) = if full {
        (
            yuv[0] / 255.0,
            (yuv[1] - 128.0) / 255.0,
            (yuv[2] - 128.0) / 255.0,
        )
    } else {
        (
            (yuv[0] - 16.0) / 219.0,
            (yuv[1] - 128.0) / 224.0,
            (yuv[2] - 128.0) / 224.0,
        )
    };
    let r = y + 2.0 * (1.0 - kr) * pr;
    let b = y + 2.0 * (1.0 - kb) * pb;
    let g = (y - kr * r - kb * b) / kg;
    [r, g, b]
}

/// The stream of `kind` ("video"/"audio") in ffprobe's output.
pub fn stream<'a>(
    streams: &'a [fixtures::ProbeStream],
    kind: &str,
) -> Option<&'a fixtures::ProbeStream> {
    streams
        .iter()
        .find(|s| s.get("codec_type").map(String::as_str) == Some(kind))
}

pub fn num(s: &fixtures::ProbeStream, key: &str) -> i64 {
    s.get(key)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("ffprobe field {key} missing or not a number: {s:?}"))
}

/// [`area_downscale_reference`] over the three planes of a frame.
pub fn area_scale(f: &Yuv420Frame, ow: u32, oh: u32) -> Yuv420Frame {
    let (cw, ch) = Yuv420Frame::chroma_size(f.width, f.height);
    let (ocw, och) = Yuv420Frame::chroma_size(ow, oh);
    Yuv420Frame::from_planes(
        ow,
        oh,
        area_downscale_reference(&f.y, f.width, f.height, ow, oh),
        area_downscale_reference(&f.u, cw, ch, ocw, och),
        area_downscale_reference(&f.v, cw, ch, ocw, och),
    )
}

/// The wgpu engine (lavapipe in CI); `None`, said loudly, without an adapter unless
/// VIDFORGE_REQUIRE_GPU=1, which makes that a failure.
pub fn gpu_engine() -> Option<Engine> {
    // CI selects lavapipe with WGPU_BACKEND=vulkan (XDG_RUNTIME_DIR=/tmp quiets libwayland).
    match Engine::new(BackendChoice::Wgpu) {
        Ok(e) => {
            let a = e
                .gpu_context()
                .expect("wgpu engine has a context")
                .adapter()
                .clone();
            eprintln!(
                "GPU test running on adapter '{}' ({}, {}, software: {})",
                a.name, a.backend, a.device_type, a.is_software
            );
            assert!(!a.name.is_empty());
            assert_eq!(e.backend_name(), a.name);
            Some(e)
        }
        Err(err) => {
            if std::env::var("VIDFORGE_REQUIRE_GPU").as_deref() == Ok("1") {
                panic!("VIDFORGE_REQUIRE_GPU=1 but no GPU adapter: {err}");
            }
            eprintln!("!!!!! SKIPPING GPU TEST: no wgpu adapter ({err}) !!!!!");
            None
        }
    }
}

/// The first `frames` frames of `path` through the ffmpeg CLI's filter chain `vf`, read back
/// as `w`x`h` yuv420p.
pub fn ffmpeg_yuv420(path: &Path, vf: &str, w: u32, h: u32, frames: usize) -> Vec<Yuv420Frame> {
    let out = std::process::Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(path)
        .args(["-frames:v", &frames.to_string(), "-vf", vf])
        .args(["-pix_fmt", "yuv420p", "-f", "rawvideo", "-"])
        .output()
        .expect("run ffmpeg");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (cw, ch) = Yuv420Frame::chroma_size(w, h);
    let (ys, cs) = ((w * h) as usize, (cw * ch) as usize);
    out.stdout
        .chunks_exact(ys + 2 * cs)
        .map(|f| {
            Yuv420Frame::from_planes(
                w,
                h,
                f[..ys].to_vec(),
                f[ys..ys + cs].to_vec(),
                f[ys + cs..].to_vec(),
            )
        })
        .collect()
}
