//! What tone mapping costs per resolution, side by side in one run: vidforge's CPU and wgpu
//! compositors with and without it on the same decoded 10-bit PQ frames, and FFmpeg's
//! reference chain (`zscale` + `tonemap=hable`) on the same clip, its decode-only time taken
//! off. Prints a Markdown table of medians (ms per frame) for `docs/bench/tonemap.md`:
//!
//! `cargo run --release -p vidforge-media --example tonemap_bench -- 720p,1080p,4k 5`

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use vidforge_fixtures as fixtures;
use vidforge_media::ffmpeg::frame;
use vidforge_media::{
    BackendChoice, ComposeSpec, Compositor, CpuCompositor, DynamicRange, Engine, OutputLight,
    Resolution, Rotation, WgpuCompositor, decode_raw_frames, probe,
};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Frames in each generated clip, decoded once and composed `rounds` times.
const CLIP_FRAMES: usize = 10;

fn main() -> Result<(), BoxError> {
    vidforge_media::init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let sizes: Vec<Resolution> = args
        .first()
        .map_or("720p,1080p,4k", String::as_str)
        .split(',')
        .map(|r| Resolution::parse(r).ok_or_else(|| format!("unknown resolution {r}")))
        .collect::<Result<_, _>>()?;
    let rounds: usize = args.get(1).map_or(Ok(5), |s| s.parse())?;
    let gpu = Engine::new(BackendChoice::Wgpu).ok();
    let adapter = gpu
        .as_ref()
        .map_or("none".to_string(), |e| e.backend_name());
    let dir = tempfile::tempdir()?;

    println!(
        "Median ms per frame over {rounds} rounds of {CLIP_FRAMES} frames; wgpu on {adapter}."
    );
    println!();
    println!(
        "| size | cpu sdr path | cpu tone map | cpu cost | wgpu sdr path | wgpu tone map | ffmpeg chain | ffmpeg / cpu tone map |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for res in sizes {
        let (w, h) = res.box_size();
        let lavfi = format!("testsrc2=s={w}x{h}:r=25:d={}", CLIP_FRAMES as f64 / 25.0);
        let clip = fixtures::hdr_clip_of(dir.path(), DynamicRange::Pq, &lavfi)?;
        let tone_map = probe(&clip)?
            .video
            .and_then(|v| v.color.tone_map())
            .ok_or("the clip is not HDR")?;
        let frames = decode_raw_frames(&clip, CLIP_FRAMES)?;
        let spec = |light| ComposeSpec {
            out_width: w,
            out_height: h,
            rotation: Rotation::None,
            watermark: None,
            light,
        };
        let cpu_sdr = median(rounds, || {
            per_frame(&mut CpuCompositor::new(spec(OutputLight::Sdr)), &frames)
        })?;
        let cpu_hdr = median(rounds, || {
            per_frame(
                &mut CpuCompositor::new(spec(OutputLight::ToneMapped(tone_map))),
                &frames,
            )
        })?;
        let (gpu_sdr, gpu_hdr) = match gpu.as_ref().and_then(Engine::gpu_context) {
            Some(ctx) => (
                median(rounds, || {
                    per_frame(
                        &mut WgpuCompositor::new(ctx, spec(OutputLight::Sdr), 3),
                        &frames,
                    )
                })?,
                median(rounds, || {
                    per_frame(
                        &mut WgpuCompositor::new(ctx, spec(OutputLight::ToneMapped(tone_map)), 3),
                        &frames,
                    )
                })?,
            ),
            None => (f64::NAN, f64::NAN),
        };
        let peak = tone_map.peak_nits / 100.0;
        let chain = format!(
            "zscale=t=linear:npl=100,format=gbrpf32le,zscale=p=bt709,\
             tonemap=tonemap=hable:desat=0:peak={peak},zscale=t=bt709:m=bt709:r=tv,format=yuv420p"
        );
        let ffmpeg = median(rounds, || {
            Ok(ffmpeg_ms(&clip, Some(&chain))? - ffmpeg_ms(&clip, None)?)
        })? / frames.len() as f64;
        println!(
            "| {w}x{h} | {cpu_sdr:.1} | {cpu_hdr:.1} | {:.1} | {gpu_sdr:.1} | {gpu_hdr:.1} | {ffmpeg:.1} | {:.2} |",
            cpu_hdr - cpu_sdr,
            ffmpeg / cpu_hdr
        );
    }
    Ok(())
}

/// Composes every frame once; milliseconds per frame.
fn per_frame(c: &mut dyn Compositor, frames: &[frame::Video]) -> Result<f64, BoxError> {
    let start = Instant::now();
    for f in frames {
        if let Some(out) = c.push(f)? {
            c.recycle(out);
        }
    }
    c.finish()?;
    Ok(start.elapsed().as_secs_f64() * 1e3 / frames.len() as f64)
}

fn median(rounds: usize, mut run: impl FnMut() -> Result<f64, BoxError>) -> Result<f64, BoxError> {
    let mut v = (0..rounds.max(1))
        .map(|_| run())
        .collect::<Result<Vec<f64>, _>>()?;
    v.sort_by(f64::total_cmp);
    Ok(v[v.len() / 2])
}

/// Wall milliseconds of the ffmpeg CLI decoding `clip` through `vf` (single-threaded filters,
/// as our compositor is) into the null muxer.
fn ffmpeg_ms(clip: &Path, vf: Option<&str>) -> Result<f64, BoxError> {
    let mut cmd = Command::new("ffmpeg");
    cmd.args(["-v", "error", "-threads", "1", "-i"]).arg(clip);
    cmd.args(["-filter_threads", "1"]);
    if let Some(vf) = vf {
        cmd.args(["-vf", vf]);
    }
    cmd.args(["-f", "null", "-"]);
    let start = Instant::now();
    let out = cmd.output()?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned().into());
    }
    Ok(start.elapsed().as_secs_f64() * 1e3)
}
