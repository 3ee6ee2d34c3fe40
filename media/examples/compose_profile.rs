//! Runs the CPU compositor over decoded frames of a generated clip, for profiling the compose
//! stage alone (callgrind counts are repeatable where wall time on a shared machine is not):
//!
//! `cargo run --release -p vidforge-media --example compose_profile -- 1920x1080 720p 200`
//!
//! Under callgrind, count only the compose calls:
//! `valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*CpuCompositor*push*' ...`

use std::time::Instant;

use vidforge_fixtures as fixtures;
use vidforge_media::{Compositor, CpuCompositor, Resolution};

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let size = args.first().map_or("1920x1080", String::as_str);
    let (w, h) = size
        .split_once('x')
        .and_then(|(w, h)| Some((w.parse::<u32>().ok()?, h.parse::<u32>().ok()?)))
        .ok_or("source size must be WxH")?;
    let res = Resolution::parse(args.get(1).map_or("720p", String::as_str))
        .ok_or("unknown resolution")?;
    let iterations: usize = args.get(2).map_or(Ok(200), |s| s.parse())?;

    let dir = std::env::temp_dir().join("vidforge-compose-profile");
    std::fs::create_dir_all(&dir)?;
    let frames = fixtures::compose_bench_frames(&dir, w, h)?;
    let spec = fixtures::compose_bench_spec(w, h, res);
    let (ow, oh) = (spec.out_width, spec.out_height);
    let mut comp = CpuCompositor::new(spec);
    let (start, cpu_start) = (Instant::now(), cpu_ns());
    for i in 0..iterations {
        if let Some(out) = comp.push(&frames[i % frames.len()])? {
            comp.recycle(out);
        }
    }
    let ms = start.elapsed().as_secs_f64() * 1e3 / iterations as f64;
    let cpu = match (cpu_start, cpu_ns()) {
        (Some(a), Some(b)) => format!(", {:.3} ms CPU", (b - a) as f64 / 1e6 / iterations as f64),
        _ => String::new(),
    };
    println!("{w}x{h} -> {ow}x{oh}: {ms:.3} ms/frame wall{cpu} over {iterations} frames");
    Ok(())
}

/// Time this thread has spent on a CPU (Linux schedstat), which a busy shared machine does
/// not inflate the way it inflates wall time.
fn cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}
