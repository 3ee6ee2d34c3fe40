//! Segment-parallel rendering: plan -> render each segment -> join, against a single pass of
//! the same job (frames, timestamps, stream tags, sound at the seams, quality), in mp4, webm
//! and mov, from an open-GOP source, on the GPU compositor; `hdr.rs` kept HDR, `odd.rs`
//! sources with odd timing (gaps, slides, keyframes out of order), `refusals.rs` the join's
//! refusals.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;

use vidforge_fixtures as fixtures;
use vidforge_media::synthetic::run_tool;
use vidforge_media::{
    EncoderSettings, Engine, OutputFormat, RenderJob, RenderReport, Resolution, SegmentFile,
    SegmentPlanOptions, SegmentSpan, segment_file_name,
};

use crate::common::seams::{leading_pictures, psnr_per_frame, silences, video_packets};
use crate::common::{cpu, gpu_engine, job, leftovers, num, render, stream, tempdir};

mod hdr;
mod odd;
mod refusals;

const FPS: u32 = 25;
const SECONDS: f64 = 6.0;
const FRAMES: u64 = 150;
const FRAME: f64 = 1.0 / FPS as f64;

/// 320x180, 25 fps, 6 s of picture and of a 440 Hz tone (AAC), a keyframe every second,
/// in mp4; `x264` adds x264 options (and B-frames).
fn source(dir: &Path, x264: Option<&str>) -> PathBuf {
    let path = dir.join(format!("source-{}.mp4", x264.map_or(0, str::len)));
    let mut cmd = Command::new("ffmpeg");
    cmd.args(["-v", "error", "-y", "-f", "lavfi", "-i"])
        .arg(format!("testsrc2=s=320x180:r={FPS}:d={SECONDS}"))
        .args(["-f", "lavfi", "-i"])
        .arg(format!(
            "sine=f=440:r=48000:d={SECONDS},aformat=channel_layouts=stereo"
        ))
        .args(["-c:v", "libx264", "-pix_fmt", "yuv420p", "-preset"])
        // x264's `veryfast` (not `ultrafast`) puts B-frames before an open GOP's I-frame.
        .arg(if x264.is_some() {
            "veryfast"
        } else {
            "ultrafast"
        })
        .args(["-g", "25", "-keyint_min", "25", "-sc_threshold", "0"]);
    if let Some(p) = x264 {
        cmd.args(["-x264-params", p]);
    }
    cmd.args(["-c:a", "aac"]).arg(&path);
    run_tool(&mut cmd).expect("make the source");
    path
}

fn plan(engine: &Engine, input: &Path) -> Vec<SegmentSpan> {
    let opts = SegmentPlanOptions {
        target_seconds: 2.0,
        min_source_seconds: 3.0,
    };
    engine.plan_segments(input, &opts).expect("plan")
}

/// Renders every span of `job` into `dir` and returns the segment files.
fn render_segments(
    engine: &Engine,
    job: &RenderJob,
    spans: &[SegmentSpan],
    dir: &Path,
) -> Vec<SegmentFile> {
    spans
        .iter()
        .map(|span| {
            let out = dir.join(segment_file_name(span.index));
            let r = engine
                .render_segment(job, span, &out, &mut |_| {}, &AtomicBool::new(false))
                .unwrap_or_else(|e| panic!("segment {}: {e}", span.index));
            assert_eq!(r.frames, span.frames, "segment {}", span.index);
            assert!(r.size_bytes > 0);
            SegmentFile {
                path: out,
                span: span.clone(),
            }
        })
        .collect()
}

fn join(engine: &Engine, job: &RenderJob, segments: &[SegmentFile]) -> RenderReport {
    engine
        .join_segments(job, segments, &mut |_| {}, &AtomicBool::new(false))
        .unwrap_or_else(|e| panic!("join: {e}"))
}

/// Strictly increasing dts in file order, no repeated pts.
fn assert_monotonic(path: &Path, packets: &[(i64, i64)]) {
    for w in packets.windows(2) {
        assert!(
            w[1].1 > w[0].1,
            "{}: dts {} then {}",
            path.display(),
            w[0].1,
            w[1].1
        );
    }
    let mut pts: Vec<i64> = packets.iter().map(|p| p.0).collect();
    pts.sort_unstable();
    assert!(
        pts.windows(2).all(|w| w[1] > w[0]),
        "{}: repeated pts",
        path.display()
    );
    assert!(
        packets.iter().all(|p| p.1 <= p.0),
        "{}: a dts after its pts",
        path.display()
    );
}

/// (video start, audio start, video end, audio end) in seconds, by ffprobe (Matroska keeps
/// each stream's end in its `DURATION` tag).
fn av_extent(path: &Path) -> [f64; 4] {
    let streams = fixtures::ffprobe_streams(path).expect("ffprobe");
    let extent = |kind: &str| -> (f64, f64) {
        let s = stream(&streams, kind).unwrap_or_else(|| panic!("no {kind} stream"));
        let get = |key: &str| s.get(key).and_then(|v| v.parse::<f64>().ok());
        let start = get("start_time").unwrap_or_else(|| panic!("start_time: {s:?}"));
        let end = match (get("duration"), s.get("TAG:DURATION")) {
            (Some(d), _) => start + d,
            (None, Some(tag)) => tag.split(':').fold(0.0, |acc, part| {
                acc * 60.0 + part.parse::<f64>().expect("DURATION tag")
            }),
            (None, None) => panic!("no duration: {s:?}"),
        };
        (start, end)
    };
    let v = stream(&streams, "video").expect("video");
    assert_eq!(
        num(v, "nb_read_frames") as u64,
        FRAMES,
        "{}",
        path.display()
    );
    let ((vs, ve), (as_, ae)) = (extent("video"), extent("audio"));
    [vs, as_, ve, ae]
}

/// Quality of the fanned-out render `a` against the single pass `b`: PSNR against the source
/// on average, and at every segment's first and last frame.
fn assert_quality(format: OutputFormat, a: &Path, b: &Path, src: &Path, spans: &[SegmentSpan]) {
    let (qa, qb) = (
        psnr_per_frame(a, src, 320, 180),
        psnr_per_frame(b, src, 320, 180),
    );
    assert_eq!((qa.len(), qb.len()), (FRAMES as usize, FRAMES as usize));
    let mean = |q: &[f64]| q.iter().sum::<f64>() / q.len() as f64;
    let (ma, mb) = (mean(&qa), mean(&qb));
    eprintln!("{format}: PSNR fanned out {ma:.2} dB, single pass {mb:.2} dB");
    assert!(
        (ma - mb).abs() <= 0.3,
        "{format}: PSNR {ma:.2} dB against {mb:.2} dB"
    );
    let mut first = 0usize;
    for s in spans {
        let last = first + s.frames as usize - 1;
        for i in [first, last] {
            assert!(
                qa[i] >= qb[i] - 2.0,
                "{format}: seam frame {i}: {} vs {} dB",
                qa[i],
                qb[i]
            );
        }
        first = last + 1;
    }
}

/// The fanned-out render of `src` to `format` against its single pass.
fn fan_out_matches_single_pass(
    engine: &Engine,
    format: OutputFormat,
    x264: Option<&str>,
    encoder: EncoderSettings,
) {
    let dir = tempdir();
    let src = source(dir.path(), x264);
    if x264.is_some_and(|p| p.contains("open-gop=1")) {
        assert!(leading_pictures(&src) > 0, "the source has no open GOP");
    }
    let spans = plan(engine, &src);
    assert_eq!(spans.len(), 3, "{spans:?}");
    assert_eq!(spans.iter().map(|s| s.frames).sum::<u64>(), FRAMES);
    let ext = format.extension();
    let single_job = RenderJob {
        encoder,
        ..job(
            &src,
            &dir.path().join(format!("single.{ext}")),
            Resolution::P720,
            format,
        )
    };
    let single = render(engine, &single_job);
    let fan_job = RenderJob {
        output: dir.path().join(format!("joined.{ext}")),
        ..single_job.clone()
    };
    let seg_dir = dir.path().join("segments");
    std::fs::create_dir(&seg_dir).expect("mkdir");
    let files = render_segments(engine, &fan_job, &spans, &seg_dir);
    let joined = join(engine, &fan_job, &files);
    assert_eq!((joined.frames, single.frames), (FRAMES, FRAMES));
    assert_eq!((joined.width, joined.height), (single.width, single.height));
    let (a, b) = (&fan_job.output, &single_job.output);

    // Timestamps: exactly the single pass's frames, strictly ordered.
    let (pa, pb) = (video_packets(a), video_packets(b));
    assert_monotonic(a, &pa);
    assert_monotonic(b, &pb);
    let sorted = |p: &[(i64, i64)]| {
        let mut v: Vec<i64> = p.iter().map(|p| p.0).collect();
        v.sort_unstable();
        v
    };
    assert_eq!(
        sorted(&pa),
        sorted(&pb),
        "{format}: pts differ from the single pass"
    );

    assert_eq!(video_tags(a), video_tags(b), "{format}: stream tags");

    // Length and A/V alignment.
    let (ea, eb) = (av_extent(a), av_extent(b));
    assert!(
        (joined.duration_seconds - SECONDS).abs() <= FRAME + 1e-3,
        "{joined:?}"
    );
    for i in 0..4 {
        assert!(
            (ea[i] - eb[i]).abs() <= FRAME,
            "{format}: {ea:?} vs single {eb:?}"
        );
    }
    assert!(
        (ea[0] - ea[1]).abs() <= FRAME && (ea[2] - ea[3]).abs() <= FRAME,
        "{ea:?}"
    );

    // Continuous sound: no silence of 5 ms anywhere (the seams included).
    let quiet = silences(a, 0.005);
    assert!(
        quiet.iter().all(|&(s, e)| e < 0.05 || s > SECONDS - 0.05),
        "{format}: {quiet:?}"
    );

    assert_quality(format, a, b, &src, &spans);
    assert!(
        leftovers(
            &seg_dir,
            &files.iter().map(|f| f.path.as_path()).collect::<Vec<_>>()
        )
        .is_empty()
    );
}

#[test]
fn mp4_fanned_out_matches_a_single_pass() {
    fan_out_matches_single_pass(&cpu(), OutputFormat::Mp4, None, EncoderSettings::default());
}

#[test]
fn webm_fanned_out_matches_a_single_pass() {
    fan_out_matches_single_pass(&cpu(), OutputFormat::Webm, None, EncoderSettings::default());
}

#[test]
fn webm_with_alt_ref_frames_fanned_out_matches_a_single_pass() {
    // libvpx's `good` deadline looks ahead and codes hidden alt-ref frames.
    let encoder = EncoderSettings {
        vp9_deadline: "good".to_string(),
        vp9_cpu_used: 5,
        ..EncoderSettings::default()
    };
    fan_out_matches_single_pass(&cpu(), OutputFormat::Webm, None, encoder);
}

#[test]
fn mov_fanned_out_matches_a_single_pass() {
    fan_out_matches_single_pass(&cpu(), OutputFormat::Mov, None, EncoderSettings::default());
}

#[test]
fn mp4_fanned_out_on_the_gpu_compositor_matches_a_single_pass() {
    if let Some(engine) = gpu_engine() {
        fan_out_matches_single_pass(&engine, OutputFormat::Mp4, None, EncoderSettings::default());
    }
}

#[test]
fn an_open_gop_source_with_b_frames_joins_with_monotonic_dts() {
    fan_out_matches_single_pass(
        &cpu(),
        OutputFormat::Mp4,
        Some("open-gop=1:bframes=3:b-pyramid=normal:keyint=25:min-keyint=25:scenecut=0"),
        EncoderSettings::default(),
    );
}

/// The stream fields a player reads of `path`'s video, to compare a join with a render.
fn video_tags(path: &Path) -> Vec<(String, String)> {
    let streams = fixtures::ffprobe_streams(path).expect("ffprobe");
    let v = stream(&streams, "video").expect("video");
    [
        "codec_name",
        "codec_tag_string",
        "profile",
        "pix_fmt",
        "color_range",
        "color_space",
        "color_transfer",
        "color_primaries",
        "sample_aspect_ratio",
        "nb_read_frames",
    ]
    .iter()
    .map(|k| (k.to_string(), v.get(*k).cloned().unwrap_or_default()))
    .collect()
}
