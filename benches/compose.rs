//! Micro-benchmarks of the compose stage (criterion): one decoded frame in, one output-size
//! yuv420p frame with the watermark out, for each output resolution from a 1080p and a 4k
//! source, CPU backend; plus the wgpu backend at 720p when an adapter exists, and the
//! watermark blend alone. Fixtures are generated here with the ffmpeg CLI.
//!
//! `cargo bench -p vidforge-suite --bench compose`

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use vidforge_gpu::{
    AdapterPreference, ColorSpec, GpuContext, Position, Rotation, WatermarkImage, blend_watermark,
    place_watermark, prepare_watermark,
};
use vidforge_media::fixtures::{self, ClipSpec};
use vidforge_media::{
    ComposeSpec, Compositor, CpuCompositor, Resolution, WgpuCompositor, decode_raw_frames,
    output_size,
};

fn spec_for(src_w: u32, src_h: u32, res: Resolution) -> ComposeSpec {
    let (w, h) = output_size(src_w, src_h, res);
    let logo = WatermarkImage {
        width: 400,
        height: 200,
        rgba: [255u8, 255, 255, 200].repeat(400 * 200),
    };
    let watermark = place_watermark(w, h, logo.width, logo.height, Position::BottomRight)
        .map(|p| prepare_watermark(&logo, p, 0.6, ColorSpec::OUTPUT));
    ComposeSpec {
        out_width: w,
        out_height: h,
        rotation: Rotation::None,
        watermark,
    }
}

fn source(dir: &Path, w: u32, h: u32) -> Vec<vidforge_media::ffmpeg::frame::Video> {
    let clip = fixtures::clip(
        dir,
        &ClipSpec {
            seconds: 0.2,
            audio: false,
            ..ClipSpec::h264(w, h)
        },
    )
    .expect("generating a fixture needs the ffmpeg CLI");
    decode_raw_frames(&clip, 4).expect("decoding the fixture")
}

fn compose(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, w, h) in [("1080p", 1920, 1080), ("4k", 3840, 2160)] {
        let frames = source(dir.path(), w, h);
        let mut group = c.benchmark_group(format!("compose_cpu/from_{name}"));
        for res in Resolution::ALL {
            let mut comp = CpuCompositor::new(spec_for(w, h, res));
            let mut i = 0;
            group.bench_function(res.as_str(), |b| {
                b.iter(|| {
                    i = (i + 1) % frames.len();
                    let out = comp.push(black_box(&frames[i])).expect("compose");
                    if let Some(o) = out {
                        comp.recycle(o);
                    }
                })
            });
        }
        group.finish();
    }

    // The wgpu backend (lavapipe here) at 720p from 1080p, upload and readback included.
    match GpuContext::new(AdapterPreference::AllowSoftware) {
        Ok(ctx) => {
            let frames = source(dir.path(), 1920, 1080);
            let adapter = ctx.adapter().name.clone();
            let mut comp = WgpuCompositor::new(&ctx, spec_for(1920, 1080, Resolution::P720), 3);
            let mut group = c.benchmark_group(format!("compose_wgpu[{adapter}]/from_1080p"));
            group.sample_size(10);
            let mut i = 0;
            group.bench_function("720p", |b| {
                b.iter(|| {
                    i = (i + 1) % frames.len();
                    if let Some(o) = comp.push(black_box(&frames[i])).expect("compose") {
                        comp.recycle(o);
                    }
                })
            });
            group.finish();
        }
        Err(e) => eprintln!("NOTE: no wgpu adapter ({e}); skipping the wgpu compose benchmark"),
    }

    // The blend alone over a 720p frame.
    let spec = spec_for(1920, 1080, Resolution::P720);
    if let Some(wm) = spec.watermark.as_ref() {
        let mut frame = vidforge_gpu::Yuv420Frame::filled(1280, 720, [60, 120, 140]);
        c.bench_function("blend_watermark/720p", |b| {
            b.iter(|| blend_watermark(black_box(&mut frame), wm))
        });
    }
}

criterion_group!(benches, compose);
criterion_main!(benches);
