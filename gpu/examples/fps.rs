//! Throughput of the GPU compositor: `cargo run -p vidforge-gpu --release --example fps
//! [OUTPUT] [SECONDS] [INPUT_FORMAT]`. OUTPUT is `WxH` or 720p / 1080p / 4k (default 720p),
//! INPUT_FORMAT yuv420p (default), nv12 or p010 (what NVDEC hands over), or nv12-device /
//! p010-device: the frames already on the GPU, copied device to device into the compositor's
//! exported inputs (a Vulkan copy through an import of them, standing in for the CUDA copy of
//! the zero-copy path), so no upload. The source is a 1080p frame, with a watermark, 3 frames
//! in flight, for about SECONDS (default 5, capped at 10).
//! Upload (or the device copy), compose and readback are all included in the fps; where the adapter records
//! timestamps the compose pass alone is timed too (GPU time per frame, and the bandwidth it
//! reaches moving the source once and the output once). The last line is JSON.

use std::time::{Duration, Instant};

use vidforge_gpu::{
    AdapterPreference, ColorSpec, ComposeConfig, GpuCompositor, GpuContext, OutputLight, Position,
    Rotation, SemiPlanarFrame, SourceFormat, WatermarkImage, Yuv420Frame, place_watermark,
    prepare_watermark,
};

/// Compose passes timed by timestamp queries.
const KERNEL_ITERATIONS: u32 = 50;

fn output_size(s: &str) -> Result<(u32, u32), Box<dyn std::error::Error>> {
    Ok(match s {
        "720p" => (1280, 720),
        "1080p" => (1920, 1080),
        "4k" => (3840, 2160),
        _ => {
            let (w, h) = s
                .split_once('x')
                .ok_or("size must be WxH, 720p, 1080p or 4k")?;
            (w.parse()?, h.parse()?)
        }
    })
}

/// The compositor under test: a `src` source in `format` to `out`, with a 300×120 watermark
/// at the bottom right; its inputs exported (filled on the device) when `on_device`.
fn compositor(
    ctx: &GpuContext,
    (sw, sh): (u32, u32),
    (ow, oh): (u32, u32),
    format: SourceFormat,
    on_device: bool,
) -> Result<GpuCompositor, Box<dyn std::error::Error>> {
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
        watermark: Some(prepare_watermark(&logo, placement, 0.6, ColorSpec::OUTPUT)),
        src_format: format,
        light: OutputLight::Sdr,
    };
    let gpu = if on_device {
        GpuCompositor::with_external_input(ctx, cfg, 3)?
    } else {
        GpuCompositor::new(ctx, cfg, 3)?
    };
    Ok(gpu)
}

/// Two distinct source frames, so nothing can be cached between submissions: planar, and
/// as `format`'s semi-planar layout.
fn source_frames(
    (sw, sh): (u32, u32),
    format: SourceFormat,
) -> (Vec<Yuv420Frame>, Vec<SemiPlanarFrame>) {
    let planar: Vec<Yuv420Frame> = (0..2u8)
        .map(|i| {
            let mut f = Yuv420Frame::filled(sw, sh, [60 + i * 40, 110, 150]);
            for (j, v) in f.y.iter_mut().enumerate() {
                *v = v.wrapping_add((j % 97) as u8);
            }
            f
        })
        .collect();
    let semi: Vec<SemiPlanarFrame> = planar
        .iter()
        .map(|f| SemiPlanarFrame::from_yuv420(f, format, 1))
        .collect();
    (planar, semi)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let mut args = std::env::args().skip(1);
    let (ow, oh) = output_size(args.next().as_deref().unwrap_or("720p"))?;
    let seconds: f64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(5.0);
    let (format, on_device) = match args.next().as_deref() {
        None | Some("yuv420p") => (SourceFormat::Yuv420p, false),
        Some("nv12") => (SourceFormat::Nv12, false),
        Some("p010") => (SourceFormat::P010, false),
        Some("nv12-device") => (SourceFormat::Nv12, true),
        Some("p010-device") => (SourceFormat::P010, true),
        Some(other) => return Err(format!("unknown input format {other}").into()),
    };
    let budget = Duration::from_secs_f64(seconds.clamp(0.5, 10.0));
    let (sw, sh) = (1920u32, 1080u32);

    let ctx = GpuContext::new(AdapterPreference::AllowSoftware)?;
    let a = ctx.adapter();
    println!("adapter: {} ({}, {})", a.name, a.backend, a.device_type);

    let mut gpu = compositor(&ctx, (sw, sh), (ow, oh), format, on_device)?;
    let (planar, semi) = source_frames((sw, sh), format);
    let frame = |i: usize| match format {
        SourceFormat::Yuv420p => (&planar[i]).into(),
        _ => semi[i].as_source(),
    };

    // Warm-up: first dispatch compiles/allocates lazily on some drivers.
    gpu.compose_one(frame(0))?;
    let device = on_device
        .then(|| DeviceFrames::new(&ctx, &mut gpu, [frame(0), frame(1)]))
        .transpose()?;
    let cpu_start = cpu_seconds();
    let start = Instant::now();
    let mut done = 0u64;
    let mut submitted = 0usize;
    while start.elapsed() < budget {
        let out = match &device {
            Some(d) => gpu.submit_filled(|slot| d.copy(&ctx, submitted % 2, slot))?,
            None => gpu.submit(frame(submitted % 2))?,
        };
        done += out.is_some() as u64;
        submitted += 1;
    }
    done += gpu.finish()?.len() as u64;
    let secs = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds().zip(cpu_start).map(|(end, begin)| end - begin);
    let fps = done as f64 / secs;
    let input = format!(
        "{}{}",
        format.as_str(),
        if on_device { "-device" } else { "" }
    );
    println!(
        "{sw}x{sh} {input} -> {ow}x{oh} (+watermark): {done} frames in {secs:.2} s = {fps:.1} fps ({:.2} ms/frame){}",
        secs * 1000.0 / done.max(1) as f64,
        // On a software adapter the "GPU" is this process's threads: CPU time per frame is the
        // cost that stays meaningful on a busy machine.
        cpu.map(|c| format!(
            ", process CPU {:.2} ms/frame",
            c * 1000.0 / done.max(1) as f64
        ))
        .unwrap_or_default()
    );
    let kernel = gpu.kernel_timing(frame(0), KERNEL_ITERATIONS)?;
    match &kernel {
        Some(k) => println!(
            "compose kernel alone (timestamp queries, {KERNEL_ITERATIONS} passes): {:.3} ms/frame, {:.1} GB/s effective ({} bytes moved per frame); the rest of each frame's {:.3} ms is upload, readback and host copies (overlapped with the kernel across frames in flight)",
            k.per_frame.as_secs_f64() * 1000.0,
            k.bandwidth() / 1e9,
            k.bytes_per_frame,
            secs * 1000.0 / done.max(1) as f64
        ),
        None => println!("compose kernel alone: the adapter records no timestamps"),
    }
    let gpu_mb = gpu.gpu_bytes() as f64 / (1 << 20) as f64;
    println!("GPU memory held by this compositor (3 frames in flight): {gpu_mb:.1} MiB");
    let kernel_json = kernel.map_or("null".to_string(), |k| {
        format!(
            "{{\"ms_per_frame\": {:.4}, \"bandwidth_gb_s\": {:.2}, \"bytes_per_frame\": {}}}",
            k.per_frame.as_secs_f64() * 1000.0,
            k.bandwidth() / 1e9,
            k.bytes_per_frame
        )
    });
    println!(
        "{{\"adapter\": \"{}\", \"source\": \"{sw}x{sh}\", \"input_format\": \"{}\", \"output\": \"{ow}x{oh}\", \"frames\": {done}, \"seconds\": {secs:.3}, \"fps\": {fps:.1}, \"gpu_mib\": {gpu_mb:.1}, \"kernel\": {kernel_json}}}",
        a.name.replace('"', "'"),
        input
    );
    Ok(())
}

/// Source frames already in device memory, laid out as the compositor's input, and its
/// exported inputs imported again, so each frame arrives by a device-to-device copy.
struct DeviceFrames {
    sources: Vec<wgpu::Buffer>,
    inputs: Vec<wgpu::Buffer>,
    size: u64,
}

impl DeviceFrames {
    fn new(
        ctx: &GpuContext,
        gpu: &mut GpuCompositor,
        frames: [vidforge_gpu::SourceFrame; 2],
    ) -> Result<Self, vidforge_gpu::GpuError> {
        let layout = gpu.input_layout();
        let inputs = gpu
            .take_exported_inputs()
            .into_iter()
            .map(|m| ctx.import_buffer(m, "fps input alias"))
            .collect::<Result<Vec<_>, _>>()?;
        let sources = frames
            .iter()
            .map(|f| {
                let mut bytes = vec![0u8; layout.size as usize];
                for (p, &(data, stride)) in layout.planes.iter().zip(&f.planes) {
                    for r in 0..p.rows as usize {
                        let at = (p.offset + r as u64 * p.pitch) as usize;
                        let row = p.row_bytes as usize;
                        bytes[at..at + row].copy_from_slice(&data[r * stride..][..row]);
                    }
                }
                let buffer = ctx.device().create_buffer(&wgpu::BufferDescriptor {
                    label: Some("fps device source"),
                    size: layout.size,
                    usage: wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                ctx.queue().write_buffer(&buffer, 0, &bytes);
                Ok(buffer)
            })
            .collect::<Result<Vec<_>, vidforge_gpu::GpuError>>()?;
        Ok(DeviceFrames {
            sources,
            inputs,
            size: layout.size,
        })
    }

    /// Copies source `i` into input `slot` on the queue (ahead of the compose submission).
    fn copy(&self, ctx: &GpuContext, i: usize, slot: usize) -> Result<(), vidforge_gpu::GpuError> {
        let mut encoder = ctx.device().create_command_encoder(&Default::default());
        encoder.copy_buffer_to_buffer(&self.sources[i], 0, &self.inputs[slot], 0, self.size);
        ctx.queue().submit([encoder.finish()]);
        Ok(())
    }
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
