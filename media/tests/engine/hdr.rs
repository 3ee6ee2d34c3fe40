//! HDR sources (PQ with HDR10 metadata, HLG as phones record it; 10-bit BT.2020) tone-mapped
//! to SDR BT.709 by both compositors, against FFmpeg's own chain on the same frames:
//! `zscale=t=linear:npl=100, zscale=p=bt709, tonemap=hable:desat=0:peak=P,
//! zscale=t=bt709:m=bt709:r=tv`. Colour is compared as CIEDE2000 (the `palette` crate) on
//! a BT.1886 display; the watermark's opacity is measured on a flat HDR frame. HDR kept
//! (`HdrPolicy::Keep`): HEVC Main10 / VP9 profile 2 with the source's tags and metadata,
//! checked with ffprobe and by PSNR against the source.

use std::path::Path;

use crate::common::*;
use palette::color_difference::Ciede2000;
use palette::{FromColor, Lab, LinSrgb};
use vidforge_fixtures::{self as fixtures, HDR10_MASTERING};
use vidforge_media::ffmpeg::format::Pixel;
use vidforge_media::ffmpeg::{color, frame};
use vidforge_media::gpu::frame::tonemap::ToneMap;
use vidforge_media::gpu::frame::{HdrSignal, prepare_watermark_hdr};
use vidforge_media::gpu::{
    Placement, SampleDepth, WatermarkImage, place_watermark, prepare_watermark,
};
use vidforge_media::{
    ColorSpec, ComposeSpec, Compositor, CpuCompositor, DynamicRange, HdrPolicy, OutputFormat,
    OutputLight, Position, Resolution, Rotation, SourceColor, WgpuCompositor, Yuv420Frame,
    decode_frames, decode_raw_frames, probe,
};

const FRAMES: usize = 4;
/// The bound on the mean colour difference from FFmpeg's chain.
const MAX_MEAN_DELTA_E: f64 = 3.0;
/// The wgpu compositor against the CPU one on the same frames.
const MIN_GPU_PSNR: f64 = 45.0;

struct Source {
    frames: Vec<frame::Video>,
    tone_map: ToneMap,
    size: (u32, u32),
    path: std::path::PathBuf,
}

fn source(path: std::path::PathBuf) -> Source {
    let video = probe(&path).expect("probe").video.expect("a video stream");
    let tone_map = video.color.tone_map().expect("an HDR source tone-maps");
    let frames = decode_raw_frames(&path, FRAMES).expect("decode");
    assert_eq!(frames.len(), FRAMES);
    Source {
        frames,
        tone_map,
        size: (video.width, video.height),
        path,
    }
}

/// An opaque white 64x32 logo and its place at the centre of a `size` frame.
fn white_logo((w, h): (u32, u32)) -> (WatermarkImage, Placement) {
    let logo = WatermarkImage {
        width: 64,
        height: 32,
        rgba: [255, 255, 255, 255].repeat(64 * 32),
    };
    let place = place_watermark(w, h, 64, 32, Position::Center).expect("fits");
    (logo, place)
}

fn spec(src: &Source, size: (u32, u32), watermark: Option<f32>) -> ComposeSpec {
    let (w, h) = size;
    let watermark = watermark.map(|opacity| {
        let (logo, place) = white_logo((w, h));
        prepare_watermark(&logo, place, opacity, ColorSpec::OUTPUT)
    });
    ComposeSpec {
        out_width: w,
        out_height: h,
        rotation: Rotation::None,
        watermark,
        light: OutputLight::ToneMapped(src.tone_map),
    }
}

/// HDR kept at `size` (display orientation) after `rotation`, with the white logo at
/// `watermark` opacity placed in the source's light.
fn kept_spec(
    src: &Source,
    size: (u32, u32),
    rotation: Rotation,
    watermark: Option<f32>,
) -> ComposeSpec {
    let signal = HdrSignal::of(&src.tone_map);
    let watermark = watermark.map(|opacity| {
        let (logo, place) = white_logo(size);
        prepare_watermark_hdr(&logo, place, opacity, &signal)
    });
    ComposeSpec {
        out_width: size.0,
        out_height: size.1,
        rotation,
        watermark,
        light: OutputLight::kept(&src.tone_map),
    }
}

fn compose(c: &mut dyn Compositor, frames: &[frame::Video]) -> Vec<Yuv420Frame> {
    let mut out = Vec::new();
    for f in frames {
        out.extend(c.push(f).expect("compose"));
    }
    out.extend(c.finish().expect("finish"));
    assert_eq!(out.len(), frames.len());
    out
}

/// FFmpeg's chain, with `peak` in units of 100 nits.
fn chain(peak: f32) -> String {
    format!(
        "zscale=t=linear:npl=100,format=gbrpf32le,zscale=p=bt709,\
         tonemap=tonemap=hable:desat=0:peak={peak},zscale=t=bt709:m=bt709:r=tv,format=yuv420p"
    )
}

/// FFmpeg's chain on the same frames, with the peak our probe found.
fn reference(src: &Source) -> Vec<Yuv420Frame> {
    let (w, h) = src.size;
    ffmpeg_yuv420(
        &src.path,
        &chain(src.tone_map.peak_nits / 100.0),
        w,
        h,
        FRAMES,
    )
}

/// Non-linear BT.709 R'G'B' of pixel (x, y), chroma taken from its own 2x2 block.
fn rgb(f: &Yuv420Frame, x: usize, y: usize) -> [f64; 3] {
    let cw = f.width.div_ceil(2) as usize;
    let c = (y / 2) * cw + x / 2;
    let yuv = [
        f.y[y * f.width as usize + x] as f64,
        f.u[c] as f64,
        f.v[c] as f64,
    ];
    yuv_to_rgb(yuv, true, false)
}

fn lab(rgb: [f64; 3]) -> Lab {
    // BT.1886: the display the SDR output is graded for (gamma 2.4).
    let [r, g, b] = rgb.map(|v| v.clamp(0.0, 1.0).powf(2.4) as f32);
    Lab::from_color(LinSrgb::new(r, g, b))
}

/// Blocks the clipping check looks at, in pixels a side.
const BLOCK: usize = 8;

struct Comparison {
    mean_delta_e: f64,
    /// `BLOCK`-sized blocks where a channel is clipped (at 0 or full scale; over 3/4 of the
    /// block) in ours and not in the reference (under 1/4): clipping FFmpeg's chain has none
    /// of, as areas (single pixels at colour edges differ with the chroma resampling).
    clipped_extra: usize,
}

/// The largest share of a block's samples clipped in one channel.
fn clipped(rgb: &[[f64; 3]]) -> f64 {
    (0..3)
        .map(|c| rgb.iter().filter(|p| p[c] <= 0.0 || p[c] >= 1.0).count())
        .max()
        .unwrap_or(0) as f64
        / rgb.len() as f64
}

fn compare(ours: &Yuv420Frame, reference: &Yuv420Frame) -> Comparison {
    let (w, h) = (ours.width as usize, ours.height as usize);
    let mut sum = 0.0;
    let mut clipped_extra = 0;
    for by in (0..h - BLOCK + 1).step_by(BLOCK) {
        for bx in (0..w - BLOCK + 1).step_by(BLOCK) {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for y in by..by + BLOCK {
                for x in bx..bx + BLOCK {
                    a.push(rgb(ours, x, y));
                    b.push(rgb(reference, x, y));
                }
            }
            // Clipped in ours, not in the reference (a margin for blocks that straddle a
            // clipped area's edge).
            clipped_extra += usize::from(clipped(&a) > 0.75 && clipped(&b) < 0.25);
        }
    }
    for y in 0..h {
        for x in 0..w {
            sum += f64::from(lab(rgb(ours, x, y)).difference(lab(rgb(reference, x, y))));
        }
    }
    Comparison {
        mean_delta_e: sum / (w * h) as f64,
        clipped_extra,
    }
}

/// Mean ΔE2000 within the bound, and at most `max_clipped` blocks (of `BLOCK`x`BLOCK`)
/// clipped where FFmpeg's are not.
fn check_against_reference(
    name: &str,
    outs: &[Yuv420Frame],
    refs: &[Yuv420Frame],
    max_clipped: usize,
) {
    for (i, (ours, reference)) in outs.iter().zip(refs).enumerate() {
        let c = compare(ours, reference);
        eprintln!(
            "{name} frame {i}: mean ΔE2000 {:.3}, blocks clipped where FFmpeg's are not: {}",
            c.mean_delta_e, c.clipped_extra
        );
        assert!(
            c.mean_delta_e <= MAX_MEAN_DELTA_E,
            "{name} frame {i}: mean ΔE2000 {:.3} > {MAX_MEAN_DELTA_E}",
            c.mean_delta_e
        );
        assert!(
            c.clipped_extra <= max_clipped,
            "{name} frame {i}: {} blocks clipped where FFmpeg's are not",
            c.clipped_extra
        );
    }
}

fn clips(dir: &Path) -> Vec<(&'static str, Source)> {
    [("PQ", DynamicRange::Pq), ("HLG", DynamicRange::Hlg)]
        .into_iter()
        .map(|(name, dr)| (name, source(fixtures::hdr_clip(dir, dr).expect("clip"))))
        .collect()
}

#[test]
fn hdr_sources_tone_map_like_ffmpegs_reference_chain() {
    let dir = tempdir();
    for (name, src) in clips(dir.path()) {
        // The peak both chains use: HDR10's MaxCLL for PQ, HLG's nominal 1000-nit display.
        let expected_peak = match name {
            "PQ" => HDR10_MASTERING.2 as f32,
            _ => 1000.0,
        };
        assert_eq!(src.tone_map.peak_nits, expected_peak, "{name}");
        let refs = reference(&src);
        let outs = compose(
            &mut CpuCompositor::new(spec(&src, src.size, None)),
            &src.frames,
        );
        check_against_reference(&format!("{name} (cpu)"), &outs, &refs, 0);
        if let Some(engine) = gpu_engine() {
            let ctx = engine.gpu_context().expect("gpu context");
            let mut gpu = WgpuCompositor::new(ctx, spec(&src, src.size, None), 2);
            let on_gpu = compose(&mut gpu, &src.frames);
            check_against_reference(&format!("{name} (wgpu)"), &on_gpu, &refs, 0);
            for (g, c) in on_gpu.iter().zip(&outs) {
                let p = psnr(g, c);
                assert!(p >= MIN_GPU_PSNR, "{name}: wgpu vs cpu {p:.1} dB");
            }
        }
    }
}

/// Scaled, the backends resample before mapping in slightly different ways (the CPU maps
/// area-filtered planes at output size; the GPU maps its filtered samples with bilinear
/// source chroma for luma and bilinear source luma for chroma), and mapping is far from
/// linear where colours leave BT.709: they agree in colour, not in PSNR at colour edges.
#[test]
fn gpu_and_cpu_tone_map_alike_when_scaling() {
    let Some(engine) = gpu_engine() else { return };
    let ctx = engine.gpu_context().expect("gpu context");
    let dir = tempdir();
    for (name, src) in clips(dir.path()) {
        for size in [(160, 90), (640, 360)] {
            let cpu = compose(
                &mut CpuCompositor::new(spec(&src, size, Some(0.6))),
                &src.frames,
            );
            let mut gpu = WgpuCompositor::new(ctx, spec(&src, size, Some(0.6)), 2);
            let gpu = compose(&mut gpu, &src.frames);
            for (g, c) in gpu.iter().zip(&cpu) {
                let d = compare(g, c);
                eprintln!(
                    "{name} at {size:?}: wgpu vs cpu mean ΔE2000 {:.3}, {:.1} dB",
                    d.mean_delta_e,
                    psnr(g, c)
                );
                assert!(d.mean_delta_e <= MAX_MEAN_DELTA_E, "{name} at {size:?}");
                assert_eq!(d.clipped_extra, 0, "{name} at {size:?}");
            }
        }
    }
}

/// HDR kept: the wgpu compositor's 10-bit frames are the CPU compositor's (swscale at 10
/// bits, the 10-bit blend), shrunk, enlarged and turned, with the watermark in HDR light.
#[test]
fn gpu_and_cpu_keep_hdr_alike() {
    let Some(engine) = gpu_engine() else { return };
    let ctx = engine.gpu_context().expect("gpu context");
    let dir = tempdir();
    for (name, src) in clips(dir.path()) {
        for (size, rotation) in [
            ((160, 90), Rotation::None),
            ((640, 360), Rotation::None),
            ((360, 640), Rotation::Cw90),
        ] {
            let spec = kept_spec(&src, size, rotation, Some(0.6));
            let cpu = compose(&mut CpuCompositor::new(spec.clone()), &src.frames);
            let gpu = compose(&mut WgpuCompositor::new(ctx, spec, 2), &src.frames);
            for (g, c) in gpu.iter().zip(&cpu) {
                assert_eq!((g.depth, c.depth), (SampleDepth::Ten, SampleDepth::Ten));
                let p = psnr(g, c);
                eprintln!("{name} kept at {size:?} {rotation:?}: wgpu vs cpu {p:.1} dB (10-bit)");
                assert!(
                    p >= MIN_GPU_PSNR,
                    "{name} kept at {size:?} {rotation:?}: {p:.1} dB"
                );
            }
        }
    }
}

/// The whole engine: an HDR upload rendered to 720p mp4 comes out SDR, tagged BT.709, looking
/// like FFmpeg's chain scaled to the same size (x264's loss included).
#[test]
fn an_hdr_render_comes_out_tone_mapped_and_tagged_sdr() {
    let dir = tempdir();
    for (name, src) in clips(dir.path()) {
        let out = dir.path().join(format!("{name}.mp4"));
        let job = job(&src.path, &out, Resolution::P720, OutputFormat::Mp4);
        render(&cpu(), &job);
        let color = probe(&out).expect("probe").video.expect("video").color;
        assert_eq!(
            (
                color.primaries.as_str(),
                color.transfer.as_str(),
                color.matrix.as_str()
            ),
            ("bt709", "bt709", "bt709"),
            "{name}"
        );
        assert_eq!(color.dynamic_range, DynamicRange::Sdr, "{name}");
        let rendered = decode_frames(&out, 1).expect("decode the render");
        let peak = src.tone_map.peak_nits / 100.0;
        let vf = format!("{},scale=1280:720:flags=bicubic", chain(peak));
        let reference = ffmpeg_yuv420(&src.path, &vf, 1280, 720, 1);
        // Scaled before mapping (FFmpeg maps, then scales) and through x264: edges of clipped
        // areas may move by a block, 1 in 1000 of them.
        let blocks = (1280 / BLOCK) * (720 / BLOCK);
        check_against_reference(
            &format!("{name} render"),
            &rendered,
            &reference,
            blocks / 1000,
        );
    }
}

/// A flat HDR field (the watermark tests' background).
fn flat_source(dir: &Path, dr: DynamicRange) -> Source {
    let path =
        fixtures::hdr_clip_of(dir, dr, "color=c=0x3a6f9c:s=320x180:r=25:d=1").expect("flat clip");
    source(path)
}

#[test]
fn the_watermark_reads_at_its_opacity_over_hdr() {
    let dir = tempdir();
    let opacity = 0.6;
    for dr in [DynamicRange::Pq, DynamicRange::Hlg] {
        let src = flat_source(dir.path(), dr);
        let mut compositors: Vec<Box<dyn Compositor>> = vec![Box::new(CpuCompositor::new(spec(
            &src,
            src.size,
            Some(opacity),
        )))];
        if let Some(engine) = gpu_engine() {
            let ctx = engine.gpu_context().expect("gpu context");
            compositors.push(Box::new(WgpuCompositor::new(
                ctx,
                spec(&src, src.size, Some(opacity)),
                2,
            )));
        }
        let logo = spec(&src, src.size, Some(opacity))
            .watermark
            .expect("a logo");
        let p = logo.placement;
        let (x, y, w, h) = (
            p.x as usize,
            p.y as usize,
            p.width as usize,
            p.height as usize,
        );
        for mut c in compositors {
            let out = compose(c.as_mut(), &src.frames[..1]).remove(0);
            // Inner parts of the logo and of the frame's corner, clear of resampled edges.
            let background = mean_yuv(&out, 8, 8, 32, 32)[0];
            let covered = mean_yuv(&out, x + w / 4, y + h / 4, w / 2, h / 2)[0];
            // White is luma 235 in the output's limited range.
            let measured = (covered - background) / (235.0 - background);
            eprintln!(
                "{dr:?} {}: background {background:.1}, under the logo {covered:.1}, opacity {measured:.3}",
                c.backend()
            );
            assert!(
                (measured - f64::from(opacity)).abs() <= 0.03,
                "{dr:?} {}: the logo reads at {measured:.3}, asked {opacity}",
                c.backend()
            );
        }
    }
}

// SDR untouched: the CPU compositor's output on synthetic SDR frames (BT.709, BT.601 full
// range, untagged, 10-bit BT.709, 10-bit BT.2020 SDR), enlarged, shrunk and at size, each
// with a watermark, hashed. The hashes were taken from the commit before HDR support
// (d155004), so SDR output is bit-identical to what it was.

fn fnv(bytes: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes.iter().flat_map(|s| s.iter()) {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn synthetic(pix: Pixel, space: color::Space, range: color::Range, w: u32, h: u32) -> frame::Video {
    let mut f = frame::Video::new(pix, w, h);
    f.set_color_space(space);
    f.set_color_range(range);
    let wide = pix == Pixel::YUV420P10LE;
    for plane in 0..3 {
        let (pw, ph) = if plane == 0 {
            (w, h)
        } else {
            (w.div_ceil(2), h.div_ceil(2))
        };
        let stride = f.stride(plane);
        let data = f.data_mut(plane);
        for y in 0..ph as usize {
            for x in 0..pw as usize {
                let v = (16 + (x * 7 + y * 3 + plane * 50) % 220) as u16;
                if wide {
                    let v = (v * 4 + (x as u16 % 4)).to_le_bytes();
                    data[y * stride + 2 * x..][..2].copy_from_slice(&v);
                } else {
                    data[y * stride + x] = v as u8;
                }
            }
        }
    }
    f
}

fn golden_cases() -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let cases = [
        (
            "709",
            Pixel::YUV420P,
            color::Space::BT709,
            color::Range::MPEG,
        ),
        (
            "601full",
            Pixel::YUVJ420P,
            color::Space::BT470BG,
            color::Range::JPEG,
        ),
        (
            "untagged",
            Pixel::YUV420P,
            color::Space::Unspecified,
            color::Range::Unspecified,
        ),
        (
            "709-10bit",
            Pixel::YUV420P10LE,
            color::Space::BT709,
            color::Range::MPEG,
        ),
        (
            "2020-10bit-sdr",
            Pixel::YUV420P10LE,
            color::Space::BT2020NCL,
            color::Range::MPEG,
        ),
    ];
    for (name, pix, space, range) in cases {
        let src = synthetic(pix, space, range, 640, 360);
        for (ow, oh) in [(1280u32, 720u32), (320, 180), (640, 360)] {
            let logo = WatermarkImage {
                width: 40,
                height: 20,
                rgba: [200u8, 30, 90, 180].repeat(800),
            };
            let place = place_watermark(ow, oh, 40, 20, Position::BottomRight).expect("fits");
            let spec = ComposeSpec {
                out_width: ow,
                out_height: oh,
                rotation: Rotation::None,
                watermark: Some(prepare_watermark(&logo, place, 0.6, ColorSpec::OUTPUT)),
                light: OutputLight::Sdr,
            };
            let f = CpuCompositor::new(spec)
                .compose_single(&src)
                .expect("compose");
            out.push((format!("{name} -> {ow}x{oh}"), fnv(&[&f.y, &f.u, &f.v])));
        }
    }
    out
}

const SDR_GOLDEN: &[(&str, u64)] = &[
    ("709 -> 1280x720", 0x1446de5493c61962),
    ("709 -> 320x180", 0x30bdcdacb660716c),
    ("709 -> 640x360", 0xe5d3d609035e92ea),
    ("601full -> 1280x720", 0x3897fa374b6ca290),
    ("601full -> 320x180", 0x736b110bd82f5058),
    ("601full -> 640x360", 0xf89976ca43eca84a),
    ("untagged -> 1280x720", 0xebcf9713644ed270),
    ("untagged -> 320x180", 0x6a68795c549a4c50),
    ("untagged -> 640x360", 0x6e39d9305d7e8b9e),
    ("709-10bit -> 1280x720", 0x366d3b1ac688457b),
    ("709-10bit -> 320x180", 0x41d225c85bafb81f),
    ("709-10bit -> 640x360", 0x01b954c70b072f38),
    ("2020-10bit-sdr -> 1280x720", 0x145eb824761f26be),
    ("2020-10bit-sdr -> 320x180", 0x5dede717ef862909),
    ("2020-10bit-sdr -> 640x360", 0x05c9b1169a43800f),
];

#[test]
fn sdr_sources_compose_exactly_as_before_hdr_support() {
    vidforge_media::init();
    // Shrinking 8-bit 4:2:0 takes the AVX2 area scaler where the CPU has it, swscale where
    // not: the hashes were taken with it (every machine this project builds on has AVX2).
    #[cfg(target_arch = "x86_64")]
    assert!(
        std::arch::is_x86_feature_detected!("avx2"),
        "the golden hashes are those of the AVX2 area scaler"
    );
    let got = golden_cases();
    assert_eq!(got.len(), SDR_GOLDEN.len());
    for ((name, hash), (want_name, want)) in got.iter().zip(SDR_GOLDEN) {
        assert_eq!(name, want_name);
        assert_eq!(hash, want, "{name}: SDR output changed");
    }
    // And SDR sources never reach the tone mapper: an encoded BT.709 clip as probed, and
    // every SDR transfer as declared.
    let dir = tempdir();
    let sdr = clip(dir.path(), vidforge_fixtures::ClipSpec::h264(320, 180));
    let color = probe(&sdr).expect("probe").video.expect("video").color;
    assert_eq!(color.tone_map(), None, "{color:?}");
    for transfer in ["bt709", "iec61966-2-1", "smpte170m", "bt2020-10", "unknown"] {
        let declared = SourceColor {
            transfer: transfer.into(),
            dynamic_range: DynamicRange::Sdr,
            ..color.clone()
        };
        assert_eq!(declared.tone_map(), None, "{transfer}");
    }
}

// HDR kept (`HdrPolicy::Keep`): 10-bit output in the source's own colour.

/// A kept-HDR render's video stream, as ffprobe reads it: stream fields and the first
/// frame's side data.
fn ffprobe_hdr(path: &Path) -> String {
    let out = std::process::Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v:0", "-show_streams"])
        .args(["-show_frames", "-read_intervals", "%+#1", "-of", "flat"])
        .arg(path)
        .output()
        .expect("ffprobe runs");
    assert!(out.status.success(), "ffprobe {}", path.display());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// PSNR (dB, all planes) of a render against its source scaled by FFmpeg the way the CPU
/// compositor scales (bicubic when enlarging), both at 10 bits.
fn psnr_against_source(render: &Path, source: &Path, (w, h): (u32, u32)) -> f64 {
    let graph = format!(
        "[1:v]scale={w}:{h}:flags=bicubic,format=yuv420p10le[ref];\
         [0:v]format=yuv420p10le[out];[out][ref]psnr"
    );
    let out = std::process::Command::new("ffmpeg")
        .args(["-hide_banner", "-i"])
        .arg(render)
        .arg("-i")
        .arg(source)
        .args(["-lavfi", &graph, "-f", "null", "-"])
        .output()
        .expect("ffmpeg runs");
    let log = String::from_utf8_lossy(&out.stderr);
    log.split("average:")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no PSNR in: {log}"))
}

/// The lowest PSNR a kept-HDR render may have against its source at the same size (HEVC or
/// VP9 at the default quality on synthetic content; measured 48-49 dB).
const MIN_KEPT_PSNR: f64 = 38.0;

#[test]
fn hdr_kept_comes_out_10_bit_with_its_tags_and_metadata() {
    let dir = tempdir();
    let (max, min, cll, fall) = HDR10_MASTERING;
    let cases = [
        (
            DynamicRange::Pq,
            OutputFormat::Mp4,
            "hevc",
            "Main 10",
            "smpte2084",
        ),
        (
            DynamicRange::Pq,
            OutputFormat::Webm,
            "vp9",
            "Profile 2",
            "smpte2084",
        ),
        (
            DynamicRange::Hlg,
            OutputFormat::Mov,
            "hevc",
            "Main 10",
            "arib-std-b67",
        ),
    ];
    // The first case on the CPU compositor, the others on the wgpu one.
    let engines = [Some(cpu()), gpu_engine()];
    for (i, (dr, format, codec, profile, trc)) in cases.into_iter().enumerate() {
        let src = fixtures::hdr_clip(dir.path(), dr).expect("clip");
        let out = dir.path().join(format!("{dr:?}-kept.{format}"));
        let mut job = job(&src, &out, Resolution::P720, format);
        job.hdr = HdrPolicy::Keep;
        let Some(engine) = &engines[(i > 0) as usize] else {
            continue;
        };
        let report = render(engine, &job);
        assert_eq!(report.backend, engine.backend_name());
        let name = format!("{dr:?} -> {format}");
        let probe = ffprobe_hdr(&out);
        for field in [
            format!("streams.stream.0.codec_name=\"{codec}\""),
            format!("streams.stream.0.profile=\"{profile}\""),
            "streams.stream.0.pix_fmt=\"yuv420p10le\"".to_string(),
            format!("streams.stream.0.color_transfer=\"{trc}\""),
            "streams.stream.0.color_primaries=\"bt2020\"".to_string(),
            "streams.stream.0.color_space=\"bt2020nc\"".to_string(),
            "streams.stream.0.color_range=\"tv\"".to_string(),
        ] {
            assert!(probe.contains(&field), "{name}: no {field} in\n{probe}");
        }
        assert_eq!(
            report.encoder,
            if codec == "hevc" {
                "libx265"
            } else {
                "libvpx-vp9"
            }
        );
        if dr == DynamicRange::Pq {
            // The source's HDR10 metadata, where each container keeps it: x265's SEI (frame
            // side data) for HEVC, Matroska's MasteringMetadata (stream side data) for WebM.
            let kind = if codec == "hevc" {
                "frames.frame"
            } else {
                "streams.stream"
            };
            let side = format!("{kind}.0.side_data_list.side_data.");
            for kind in ["Mastering display metadata", "Content light level metadata"] {
                let line = format!("side_data_type=\"{kind}\"");
                assert!(
                    probe
                        .lines()
                        .any(|l| l.starts_with(&side) && l.ends_with(&line)),
                    "{name}: no {kind} under {side} in\n{probe}"
                );
            }
            let mut wanted = vec![format!("max_content={cll}"), format!("max_average={fall}")];
            if codec == "hevc" {
                // SEI units (1/10000 nit); Matroska stores floats (checked below instead).
                wanted.push(format!(
                    "max_luminance=\"{}/10000\"",
                    (max * 10_000.0) as u64
                ));
                wanted.push(format!(
                    "min_luminance=\"{}/10000\"",
                    (min * 10_000.0) as u64
                ));
            }
            for want in wanted {
                assert!(probe.contains(&want), "{name}: no {want} in\n{probe}");
            }
            // And vidforge's own probe reads it back as the source's.
            let color = vidforge_media::probe(&out)
                .expect("probe")
                .video
                .expect("video")
                .color;
            assert_eq!(color.dynamic_range, DynamicRange::Pq, "{name}");
            let source_color = vidforge_media::probe(&src)
                .expect("probe")
                .video
                .expect("video")
                .color;
            if codec == "vp9" {
                // Primaries in ST 2086's 1/50000 steps: the source's floats, rounded.
                let (m, sm) = (
                    color.mastering.expect("mastering"),
                    source_color.mastering.expect("source mastering"),
                );
                assert_eq!(
                    (m.max_nits, m.min_nits),
                    (sm.max_nits, sm.min_nits),
                    "{name}"
                );
                let (p, sp) = (
                    m.primaries.expect("primaries"),
                    sm.primaries.expect("source primaries"),
                );
                for (a, b) in p.iter().zip(&sp) {
                    assert!(
                        (a.0 - b.0).abs() < 2e-5 && (a.1 - b.1).abs() < 2e-5,
                        "{name}: {p:?} vs {sp:?}"
                    );
                }
                assert_eq!(color.content_light, source_color.content_light, "{name}");
            }
        }
        let p = psnr_against_source(&out, &src, (1280, 720));
        eprintln!("{name}: {p:.1} dB against the source at 1280x720");
        assert!(p >= MIN_KEPT_PSNR, "{name}: {p:.1} dB against the source");
    }
}

/// The watermark over kept HDR: a white logo lands at graphics white (BT.2408: PQ 58 %, HLG
/// 75 %) and blends at its opacity in the output's own signal, at 10 bits, on both backends.
#[test]
fn the_watermark_reads_at_its_opacity_over_hdr_kept() {
    let dir = tempdir();
    let opacity = 0.6;
    let gpu = gpu_engine();
    for dr in [DynamicRange::Pq, DynamicRange::Hlg] {
        let src = flat_source(dir.path(), dr);
        let signal = HdrSignal::of(&src.tone_map);
        let w = src.size.0;
        let (_, place) = white_logo(src.size);
        let spec = kept_spec(&src, src.size, Rotation::None, Some(opacity));
        let mut compositors: Vec<Box<dyn Compositor>> =
            vec![Box::new(CpuCompositor::new(spec.clone()))];
        if let Some(engine) = &gpu {
            let ctx = engine.gpu_context().expect("gpu context");
            compositors.push(Box::new(WgpuCompositor::new(ctx, spec, 2)));
        }
        for mut c in compositors {
            let out = compose(c.as_mut(), &src.frames[..1]).remove(0);
            let backend = c.backend();
            assert_eq!(out.depth, SampleDepth::Ten, "{backend}");
            let luma = |x0: usize, y0: usize, n: usize| -> f64 {
                let mut sum = 0.0;
                for y in y0..y0 + n {
                    for x in x0..x0 + n {
                        sum += f64::from(Yuv420Frame::sample16(&out.y, y * w as usize + x));
                    }
                }
                sum / (n * n) as f64
            };
            let white = f64::from(signal.graphics_to_yuv([1.0; 3])[0]);
            let background = luma(8, 8, 16);
            // The logo's inner quarter, clear of resampled edges.
            let n = (place.width.min(place.height) / 2) as usize;
            let (cx, cy) = (
                (place.x + place.width / 2) as usize - n / 2,
                (place.y + place.height / 2) as usize - n / 2,
            );
            let covered = luma(cx, cy, n);
            let measured = (covered - background) / (white - background);
            eprintln!(
                "{dr:?} kept, {backend}: background {background:.1}, white {white:.1}, under the logo {covered:.1}, opacity {measured:.3}"
            );
            assert!(
                (measured - f64::from(opacity)).abs() <= 0.03,
                "{dr:?} {backend}: the logo reads at {measured:.3}, asked {opacity}"
            );
            // The source's own samples pass at 10 bits: the background is the decoded value.
            let decoded = &src.frames[0];
            let raw = u16::from_le_bytes([decoded.data(0)[16], decoded.data(0)[17]]);
            assert!(
                (background - f64::from(raw)).abs() <= 1.0,
                "{dr:?} {backend}: {background} vs {raw}"
            );
        }
    }
}
