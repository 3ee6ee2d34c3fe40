//! What splitting costs: one source rendered in a single pass, then as segments of each given
//! length (plan, every segment in turn, join), with the wall time and the process's CPU time
//! of each, so the CPU a split adds per segment can be read off. Run it pinned to one core
//! (`taskset -c 0`) to stand in for a single-core node, as `scripts/segment-bench.py` does.
//!
//! `taskset -c 0 cargo run --release -p vidforge-media --example segment_cost -- 30 5,10,15`
//! (source seconds, segment lengths). The source is like the benchmark's: 1920x1080
//! `testsrc2` at 25 fps, an IDR every 2 s, a 440 Hz tone (`vidforge_fixtures::clip`);
//! rendered to 1080p mp4 with a watermark.

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use vidforge_fixtures::{self as fixtures, ClipSpec};
use vidforge_media::{
    BackendChoice, EncoderSettings, Engine, OutputFormat, Position, RenderJob, Resolution,
    SegmentFile, SegmentPlanOptions, WatermarkSpec, segment_file_name,
};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// This process's CPU seconds so far (user + system, every thread), from /proc/self/stat.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name's closing parenthesis: utime and stime are the 12th and
    // 13th of those (14th and 15th of the line), in clock ticks (100 a second on Linux).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse().ok())
        .collect();
    f.iter().sum::<f64>() / 100.0
}

/// Runs `f`; returns its result, wall seconds and CPU seconds.
fn measured<T>(f: impl FnOnce() -> Result<T, Error>) -> Result<(T, f64, f64), Error> {
    let (wall, cpu) = (Instant::now(), cpu_seconds());
    let out = f()?;
    Ok((out, wall.elapsed().as_secs_f64(), cpu_seconds() - cpu))
}

fn main() -> Result<(), Error> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let seconds: f64 = args.first().map_or(Ok(30.0), |s| s.parse())?;
    let lengths: Vec<f64> = args
        .get(1)
        .map_or("5,10,15", String::as_str)
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let dir = tempfile::tempdir()?;
    // The benchmark's source: an IDR every 2 s, so segments cut where it does.
    let input = fixtures::clip(
        dir.path(),
        &ClipSpec {
            fps: 25,
            seconds,
            extra_args: ["-g", "50", "-keyint_min", "50", "-sc_threshold", "0"]
                .map(String::from)
                .to_vec(),
            ..ClipSpec::h264(1920, 1080)
        },
    )?;
    let logo = fixtures::watermark_png(dir.path(), 320, 120, [255, 255, 255, 200])?;
    let engine = Engine::new(BackendChoice::Cpu)?;
    let job = RenderJob {
        input,
        output: dir.path().join("single.mp4"),
        resolution: Resolution::parse("1080p").ok_or("1080p")?,
        format: OutputFormat::Mp4,
        watermark: Some(WatermarkSpec {
            image: logo,
            position: Position::BottomRight,
            opacity: 0.8,
        }),
        encoder: EncoderSettings::default(),
        hdr: Default::default(),
    };
    let stop = AtomicBool::new(false);
    // The first render warms the caches and the clocks up; the second is the reference.
    let (_, wall, cpu) = measured(|| Ok(engine.render(&job, &mut |_| {}, &stop)?))?;
    println!("single pass (warm-up): {wall:.2} s wall, {cpu:.2} CPU-s");
    let (_, wall, cpu) = measured(|| Ok(engine.render(&job, &mut |_| {}, &stop)?))?;
    println!("single pass: {wall:.2} s wall, {cpu:.2} CPU-s");
    for target in lengths {
        let opts = SegmentPlanOptions {
            target_seconds: target,
            min_source_seconds: 0.0,
        };
        let (spans, plan_wall, _) = measured(|| Ok(engine.plan_segments(&job.input, &opts)?))?;
        let seg_dir = dir.path().join(format!("segments-{target}"));
        std::fs::create_dir_all(&seg_dir)?;
        let mut files = Vec::new();
        let (mut seg_wall, mut seg_cpu) = (0.0, 0.0);
        for span in &spans {
            let out = seg_dir.join(segment_file_name(span.index));
            let (_, w, c) =
                measured(|| Ok(engine.render_segment(&job, span, &out, &mut |_| {}, &stop)?))?;
            seg_wall += w;
            seg_cpu += c;
            files.push(SegmentFile {
                path: out,
                span: span.clone(),
            });
        }
        let joined = RenderJob {
            output: dir.path().join(format!("joined-{target}.mp4")),
            ..job.clone()
        };
        let (_, join_wall, join_cpu) =
            measured(|| Ok(engine.join_segments(&joined, &files, &mut |_| {}, &stop)?))?;
        let n = spans.len() as f64;
        println!(
            "{target} s segments: {} segments; plan {:.0} ms; segments {seg_wall:.2} s wall, \
             {seg_cpu:.2} CPU-s; join {join_wall:.2} s wall, {join_cpu:.2} CPU-s; in all \
             {:.2} CPU-s, {:+.2} CPU-s a segment against the single pass",
            spans.len(),
            plan_wall * 1e3,
            seg_cpu + join_cpu,
            (seg_cpu + join_cpu - cpu) / n,
        );
    }
    Ok(())
}
