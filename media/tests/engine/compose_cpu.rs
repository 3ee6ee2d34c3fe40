//! The CPU compositor's own area downscale (yuv420p sources shrunk on both axes) against
//! swscale's `SWS_AREA` as the ffmpeg CLI runs it and against an f64 exact-area reference.
//!
//! Not bit-identical to swscale by design: swscale filters horizontally first with 14-bit
//! weights, truncates its 15-bit intermediate and uses 12-bit vertical weights (and a
//! different SIMD rounding on x86); ours filters vertically first and rounds each step. Both
//! compute the same exact-coverage box filter, so they differ by at most a code or so.

use std::path::Path;

use crate::common::*;
use vidforge_fixtures::ClipSpec;
use vidforge_media::{OutputFormat, Resolution, Yuv420Frame, decode_frames, output_size};

/// `frames` frames of `path` scaled by the ffmpeg CLI with `flags=area`, as yuv420p.
fn ffmpeg_area(path: &Path, w: u32, h: u32, frames: usize) -> Vec<Yuv420Frame> {
    ffmpeg_yuv420(path, &format!("scale={w}:{h}:flags=area"), w, h, frames)
}

fn max_diff(a: &Yuv420Frame, b: &Yuv420Frame) -> i32 {
    [(&a.y, &b.y), (&a.u, &b.u), (&a.v, &b.v)]
        .into_iter()
        .flat_map(|(p, q)| p.iter().zip(q.iter()))
        .map(|(&x, &y)| (x as i32 - y as i32).abs())
        .max()
        .unwrap_or(0)
}

#[test]
fn cpu_downscale_matches_swscale_area_and_the_f64_reference() {
    let engine = cpu();
    let dir = tempdir();
    for (w, h, res) in [
        (1920, 1080, Resolution::P720),
        (3840, 2160, Resolution::P720),
        (3840, 2160, Resolution::P1080),
        (1282, 722, Resolution::P720),
    ] {
        let src = clip(
            dir.path(),
            ClipSpec {
                seconds: 0.1,
                audio: false,
                ..ClipSpec::h264(w, h)
            },
        );
        let (ow, oh) = output_size(w, h, res);
        let j = job(&src, &dir.path().join("unused.mp4"), res, OutputFormat::Mp4);
        let ours = engine.compose_frames(&j, 2).expect("cpu compose");
        let sws = ffmpeg_area(&src, ow, oh, 2);
        let decoded = decode_frames(&src, 2).expect("decode");
        assert_eq!((ours.len(), sws.len(), decoded.len()), (2, 2, 2));
        for ((a, s), d) in ours.iter().zip(&sws).zip(&decoded) {
            let exact = area_scale(d, ow, oh);
            let (p_sws, p_exact) = (psnr(a, s), psnr(a, &exact));
            eprintln!(
                "{w}x{h} -> {ow}x{oh}: vs swscale area {p_sws:.1} dB (max diff {}), \
                 vs f64 area {p_exact:.1} dB (max diff {})",
                max_diff(a, s),
                max_diff(a, &exact)
            );
            assert!(
                p_sws >= 45.0,
                "{w}x{h} -> {ow}x{oh} vs swscale: {p_sws:.1} dB"
            );
            assert!(
                p_exact >= 45.0,
                "{w}x{h} -> {ow}x{oh} vs f64: {p_exact:.1} dB"
            );
            assert!(max_diff(a, &exact) <= 1, "{w}x{h} -> {ow}x{oh} vs f64");
        }
    }
}
