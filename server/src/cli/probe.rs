//! `vidforge probe`: what the engine sees in a media file, or (`--hardware`) what this machine
//! has and what `auto` picks on it, and why.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;
use vidforge_media::{BackendChoice, HardwareChoice, Workload};

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// Media file to describe.
    #[arg(required_unless_present = "hardware")]
    pub input: Option<PathBuf>,
    /// Report this machine's hardware instead: GPU adapters, CUDA/NVDEC, NVENC.
    #[arg(long)]
    pub hardware: bool,
}

pub fn run_probe(args: ProbeArgs) -> anyhow::Result<()> {
    if args.hardware {
        print_hardware();
        return Ok(());
    }
    let Some(input) = args.input else {
        bail!("give a media file to probe, or --hardware");
    };
    let info =
        vidforge_media::probe(&input).with_context(|| format!("probing {}", input.display()))?;
    println!("{}", input.display());
    println!("  container: {}", info.format);
    println!(
        "  duration:  {}",
        if info.duration_seconds > 0.0 {
            format!("{:.3} s", info.duration_seconds)
        } else {
            "unknown".into()
        }
    );
    println!("  size:      {} bytes", info.size_bytes);
    match &info.video {
        Some(v) => {
            println!(
                "  video:     {} {}x{} ({}), {:.3} fps, {} frames",
                v.codec,
                v.width,
                v.height,
                v.pix_fmt.as_deref().unwrap_or("unknown pixel format"),
                v.fps,
                v.frames.map_or("unknown".to_string(), |n| n.to_string())
            );
            println!(
                "             display {}x{}, rotation {}°, sample aspect {}:{}, {}-bit",
                v.display_width,
                v.display_height,
                v.rotation_degrees,
                v.sample_aspect_ratio.0,
                v.sample_aspect_ratio.1,
                v.bit_depth.map_or("?".to_string(), |b| b.to_string()),
            );
            println!("  colour:    {}", color_line(&v.color));
        }
        None => println!("  video:     none"),
    }
    match &info.audio {
        Some(a) => println!(
            "  audio:     {} {} Hz, {} channel{}",
            a.codec,
            a.sample_rate,
            a.channels,
            if a.channels == 1 { "" } else { "s" }
        ),
        None => println!("  audio:     none"),
    }
    Ok(())
}

/// `vidforge probe --hardware`: what `auto` would pick on this machine, and why.
fn print_hardware() {
    use vidforge_media::gpu::{AdapterPreference, GpuContext};
    println!("GPU compositor (wgpu)");
    match GpuContext::new(AdapterPreference::HardwareOnly) {
        Ok(ctx) => {
            let a = ctx.adapter();
            println!(
                "  hardware adapter: {} ({}, {})",
                a.name, a.backend, a.device_type
            );
        }
        Err(e) => {
            println!("  hardware adapter: none ({e})");
            match GpuContext::new(AdapterPreference::AllowSoftware) {
                Ok(ctx) => println!(
                    "  software adapter: {} - only --backend wgpu uses it",
                    ctx.adapter().name
                ),
                Err(_) => println!("  software adapter: none"),
            }
        }
    }
    let hw = vidforge_media::probe_hardware();
    println!("Decoding (NVDEC)");
    match &hw.cuda {
        Ok(device) => println!("  CUDA device: opened ({device})"),
        Err(e) => println!("  CUDA device: none ({e})"),
    }
    println!(
        "  cuda hwaccel codecs: {}",
        list_or_none(&hw.cuda_hwaccel_codecs)
    );
    println!(
        "  cuvid decoders in FFmpeg: {}",
        list_or_none(&hw.nvdec_decoders)
    );
    println!("Encoding (NVENC)");
    match &hw.nvenc {
        Ok(()) => println!("  h264_nvenc: session opened"),
        Err(e) => println!("  h264_nvenc: unavailable ({e})"),
    }
    println!("What auto chooses, and why");
    for (who, workload) in [
        ("vidforge serve", Workload::Service),
        ("vidforge render to mp4/mov", Workload::One { h264: true }),
        ("vidforge render to webm", Workload::One { h264: false }),
    ] {
        println!("  {who}:");
        match vidforge_media::plan_hardware(
            BackendChoice::Auto,
            HardwareChoice::default(),
            workload,
        ) {
            Ok(plan) => plan.why.iter().for_each(|line| println!("    {line}")),
            Err(e) => println!("    cannot start: {e}"),
        }
    }
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

/// A video's declared colour in one line: `bt2020 primaries, smpte2084 transfer, bt2020nc
/// matrix, tv range: HDR (PQ), mastered at 1000 nits (0.005 black), MaxCLL 1000, MaxFALL 400`.
fn color_line(c: &vidforge_media::SourceColor) -> String {
    let mut line = format!(
        "{} primaries, {} transfer, {} matrix, {} range: ",
        c.primaries, c.transfer, c.matrix, c.range
    );
    line.push_str(match c.dynamic_range {
        vidforge_media::DynamicRange::Sdr => "SDR",
        vidforge_media::DynamicRange::Hlg => "HDR (HLG)",
        vidforge_media::DynamicRange::Pq => "HDR (PQ)",
    });
    if let Some(m) = c.mastering {
        line.push_str(&format!(
            ", mastered at {} nits ({} black)",
            m.max_nits, m.min_nits
        ));
    }
    if let Some(l) = c.content_light {
        line.push_str(&format!(", MaxCLL {}, MaxFALL {}", l.max_cll, l.max_fall));
    }
    if let Some(d) = c.dolby_vision {
        line.push_str(&format!(
            ", Dolby Vision profile {} (base layer {})",
            d.profile,
            if d.base_layer_usable() {
                "usable"
            } else {
                "not usable alone"
            }
        ));
    }
    line
}
