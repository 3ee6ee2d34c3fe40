//! Throughput of the GPU compositor: `cargo run -p vidforge-gpu --release --example fps
//! [OUT_WxOUT_H] [SECONDS]`. Defaults: 1080p -> 1280x720 with a watermark, 3 frames in flight,
//! about 5 s (capped at 10). Upload, compose and readback are all included.

use std::time::{Duration, Instant};

use vidforge_gpu::{
    AdapterPreference, ColorSpec, ComposeConfig, GpuCompositor, GpuContext, Position, Rotation,
    WatermarkImage, Yuv420Frame, place_watermark, prepare_watermark,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let mut args = std::env::args().skip(1);
    let (ow, oh) = match args.next() {
        Some(s) => {
            let (w, h) = s.split_once('x').ok_or("size must be WxH")?;
            (w.parse()?, h.parse()?)
        }
        None => (1280u32, 720u32),
    };
    let seconds: f64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(5.0);
    let budget = Duration::from_secs_f64(seconds.clamp(0.5, 10.0));
    let (sw, sh) = (1920u32, 1080u32);

    let ctx = GpuContext::new(AdapterPreference::AllowSoftware)?;
    let a = ctx.adapter();
    println!("adapter: {} ({}, {})", a.name, a.backend, a.device_type);

    let logo = WatermarkImage {
        width: 300,
        height: 120,
        rgba: (0..300 * 120)
            .flat_map(|i| [255, (i % 256) as u8, 60, 200])
            .collect(),
    };
    let placement = place_watermark(ow, oh, logo.width, logo.height, Position::BottomRight)
        .ok_or("watermark does not fit")?;
    let cfg = ComposeConfig {
        src_width: sw,
        src_height: sh,
        src_color: ColorSpec::OUTPUT,
        rotation: Rotation::None,
        out_width: ow,
        out_height: oh,
        out_color: ColorSpec::OUTPUT,
        watermark: Some(prepare_watermark(&logo, placement, 0.6, ColorSpec::OUTPUT)),
        src_format: Default::default(),
    };
    let mut gpu = GpuCompositor::new(&ctx, cfg, 3)?;
    // Two distinct frames so nothing can be cached between submissions.
    let frames: Vec<Yuv420Frame> = (0..2u8)
        .map(|i| {
            let mut f = Yuv420Frame::filled(sw, sh, [60 + i * 40, 110, 150]);
            for (j, v) in f.y.iter_mut().enumerate() {
                *v = v.wrapping_add((j % 97) as u8);
            }
            f
        })
        .collect();

    // Warm-up: first dispatch compiles/allocates lazily on some drivers.
    gpu.compose_one(&frames[0])?;
    let cpu_start = cpu_seconds();
    let start = Instant::now();
    let mut done = 0u64;
    let mut submitted = 0u64;
    while start.elapsed() < budget {
        if gpu.submit(&frames[(submitted % 2) as usize])?.is_some() {
            done += 1;
        }
        submitted += 1;
    }
    done += gpu.finish()?.len() as u64;
    let secs = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds().zip(cpu_start).map(|(end, begin)| end - begin);
    println!(
        "{sw}x{sh} -> {ow}x{oh} (+watermark): {done} frames in {secs:.2} s = {:.1} fps ({:.2} ms/frame){}",
        done as f64 / secs,
        secs * 1000.0 / done.max(1) as f64,
        // On a software adapter the "GPU" is this process's threads: CPU time per frame is the
        // cost that stays meaningful on a busy machine.
        cpu.map(|c| format!(
            ", process CPU {:.2} ms/frame",
            c * 1000.0 / done.max(1) as f64
        ))
        .unwrap_or_default()
    );
    Ok(())
}

/// User + system CPU time of this process (Linux), in seconds.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}
