//! Times the watermark preview (`Engine::render_preview`: open, seek, decode, compose, PNG)
//! on a generated clip, the step between a render's creation and the person seeing its
//! preview. Per-phase times are logged at debug level (`RUST_LOG=vidforge_media=debug`).
//!
//! `cargo run --release -p vidforge-media --example preview_profile -- 1920x1080 10 1080p cpu 20`

use std::time::Instant;

use vidforge_fixtures::{self as fixtures, ClipSpec};
use vidforge_media::{
    BackendChoice, EncoderSettings, Engine, OutputFormat, Position, RenderJob, Resolution,
    WatermarkSpec,
};

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let size = args.first().map_or("1920x1080", String::as_str);
    let (w, h) = size
        .split_once('x')
        .and_then(|(w, h)| Some((w.parse::<u32>().ok()?, h.parse::<u32>().ok()?)))
        .ok_or("source size must be WxH")?;
    let seconds: f64 = args.get(1).map_or(Ok(10.0), |s| s.parse())?;
    let res = Resolution::parse(args.get(2).map_or("1080p", String::as_str))
        .ok_or("unknown resolution")?;
    let backend = match args.get(3).map_or("cpu", String::as_str) {
        "wgpu" => BackendChoice::Wgpu,
        "auto" => BackendChoice::Auto,
        _ => BackendChoice::Cpu,
    };
    let iterations: usize = args.get(4).map_or(Ok(20), |s| s.parse())?;

    let dir = tempfile::tempdir()?;
    let input = fixtures::clip(
        dir.path(),
        &ClipSpec {
            fps: 25,
            seconds,
            ..ClipSpec::h264(w, h)
        },
    )?;
    let logo = fixtures::watermark_png(dir.path(), 400, 200, [255, 255, 255, 200])?;
    let engine = Engine::new(backend)?;
    let job = RenderJob {
        input,
        output: dir.path().join("unused.mp4"),
        resolution: res,
        format: OutputFormat::Mp4,
        watermark: Some(WatermarkSpec {
            image: logo,
            position: Position::BottomRight,
            opacity: 0.6,
        }),
        encoder: EncoderSettings::default(),
        hdr: Default::default(),
    };
    let mut ms = Vec::with_capacity(iterations);
    for i in 0..iterations {
        let png = dir.path().join(format!("preview-{i}.png"));
        let start = Instant::now();
        engine.render_preview(&job, &png, None)?;
        ms.push(start.elapsed().as_secs_f64() * 1e3);
    }
    let first = ms[0];
    ms.sort_by(f64::total_cmp);
    println!(
        "{size} {seconds} s -> {} preview ({}): first {first:.1} ms, median {:.1} ms, min {:.1} ms, max {:.1} ms over {iterations}",
        res.as_str(),
        engine.backend_name(),
        ms[ms.len() / 2],
        ms[0],
        ms[ms.len() - 1]
    );
    Ok(())
}
