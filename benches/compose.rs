//! Micro-benchmarks of the compose stage (criterion): one decoded frame in, one output-size
//! yuv420p frame with the watermark out, for each output resolution from a 1080p and a 4k
//! source, CPU backend; plus the wgpu backend at 720p when an adapter exists, and the
//! watermark blend alone. Fixtures are generated here with the ffmpeg CLI.
//!
//! `cargo bench -p vidforge-suite --bench compose`

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use vidforge_fixtures as fixtures;
use vidforge_gpu::{AdapterPreference, GpuContext, blend_watermark};
use vidforge_media::{Compositor, CpuCompositor, Resolution, WgpuCompositor};

fn source(dir: &Path, w: u32, h: u32) -> Vec<vidforge_media::ffmpeg::frame::Video> {
    fixtures::compose_bench_frames(dir, w, h)
        .expect("generating and decoding a fixture needs the ffmpeg CLI")
}

fn compose(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, w, h) in [("1080p", 1920, 1080), ("4k", 3840, 2160)] {
        let frames = source(dir.path(), w, h);
        let mut group = c.benchmark_group(format!("compose_cpu/from_{name}"));
        for res in Resolution::ALL {
            let mut comp = CpuCompositor::new(fixtures::compose_bench_spec(w, h, res));
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
            let mut comp = WgpuCompositor::new(
                &ctx,
                fixtures::compose_bench_spec(1920, 1080, Resolution::P720),
                3,
            );
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
    let spec = fixtures::compose_bench_spec(1920, 1080, Resolution::P720);
    if let Some(wm) = spec.watermark.as_ref() {
        let mut frame = vidforge_gpu::Yuv420Frame::filled(1280, 720, [60, 120, 140]);
        c.bench_function("blend_watermark/720p", |b| {
            b.iter(|| blend_watermark(black_box(&mut frame), wm))
        });
    }
}

criterion_group!(benches, compose);
criterion_main!(benches);
