//! The quality report (`vidforge_media::quality`): its figures against FFmpeg's own `psnr` and
//! `ssim` filters on the same frames (the frames the encoder was given, composed again by
//! `Engine::compose_frames`, against the output file), a degraded encode reporting less, a
//! split render's merged figures against a single pass, and no report when not asked for.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::AtomicBool;

use vidforge_fixtures::ClipSpec;
use vidforge_media::{
    EncoderSettings, OutputFormat, QualityReport, QualitySummary, Resolution, SegmentPlanOptions,
    SegmentQuality, segment_file_name,
};

use crate::common::{clip, cpu, job, render, tempdir};

/// A measured job of `input` at 720p (scaled up to 1280x720) in `format`, x264 at `crf`.
fn measured(
    input: &Path,
    output: &Path,
    format: OutputFormat,
    crf: u8,
) -> vidforge_media::RenderJob {
    let mut j = job(input, output, Resolution::P720, format);
    j.encoder = EncoderSettings {
        h264_crf: crf,
        measure_quality: true,
        ..Default::default()
    };
    j
}

fn summary(report: &Option<QualityReport>) -> QualitySummary {
    report
        .as_ref()
        .and_then(|q| q.whole.summary())
        .expect("a measured render reports figures")
}

/// FFmpeg's summaries of `output` against the raw yuv420p frames in `reference`: (psnr y,
/// psnr average, ssim All).
fn ffmpeg_figures(
    output: &Path,
    reference: &Path,
    (w, h): (u32, u32),
    fps: u32,
) -> (f64, f64, f64) {
    let o = Command::new("ffmpeg")
        .args(["-hide_banner", "-nostats", "-i"])
        .arg(output)
        .args([
            "-f",
            "rawvideo",
            "-pix_fmt",
            "yuv420p",
            "-s",
            &format!("{w}x{h}"),
        ])
        .args(["-r", &fps.to_string(), "-i"])
        .arg(reference)
        .args([
            "-lavfi",
            "[0:v]split[a][b];[1:v]split[c][d];[a][c]psnr;[b][d]ssim",
            "-f",
            "null",
            "-",
        ])
        .output()
        .expect("run ffmpeg");
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{log}");
    let field = |line: &str, key: &str| -> f64 {
        line.split(key)
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {line}"))
    };
    let psnr = log
        .lines()
        .find(|l| l.contains("PSNR y:"))
        .expect("psnr line");
    let ssim = log
        .lines()
        .find(|l| l.contains("SSIM Y:"))
        .expect("ssim line");
    (
        field(psnr, "y:"),
        field(psnr, "average:"),
        field(ssim, "All:"),
    )
}

/// One second of 320x180 testsrc2 at 25 fps, no audio.
fn one_second(dir: &Path) -> std::path::PathBuf {
    let spec = ClipSpec {
        fps: 25,
        audio: false,
        ..ClipSpec::h264(320, 180)
    };
    clip(dir, spec)
}

#[test]
fn the_figures_match_ffmpegs_psnr_and_ssim_filters_on_the_same_frames() {
    let dir = tempdir();
    let input = one_second(dir.path());
    let engine = cpu();
    let out = dir.path().join("out.mp4");
    let j = measured(&input, &out, OutputFormat::Mp4, 23);
    let report = render(&engine, &j);
    let ours = summary(&report.quality);
    assert_eq!(ours.frames_measured, report.frames);
    // The frames the encoder was given, composed again (the CPU compositor is exact), raw.
    let frames = engine.compose_frames(&j, usize::MAX).expect("compose");
    assert_eq!(frames.len() as u64, report.frames);
    let reference = dir.path().join("reference.yuv");
    let mut f = std::fs::File::create(&reference).expect("create");
    for fr in &frames {
        f.write_all(&fr.y)
            .and_then(|_| f.write_all(&fr.u))
            .and_then(|_| f.write_all(&fr.v))
            .expect("write");
    }
    drop(f);
    let (psnr_y, psnr, ssim) = ffmpeg_figures(&out, &reference, (report.width, report.height), 25);
    assert!(
        (ours.psnr_y_db - psnr_y).abs() < 0.1,
        "PSNR Y {} vs ffmpeg {psnr_y}",
        ours.psnr_y_db
    );
    assert!(
        (ours.psnr_db - psnr).abs() < 0.1,
        "PSNR {} vs ffmpeg {psnr}",
        ours.psnr_db
    );
    assert!(
        (ours.ssim - ssim).abs() < 0.002,
        "SSIM {} vs ffmpeg {ssim}",
        ours.ssim
    );
    // One second: the worst is the whole.
    assert_eq!(ours.worst.at_seconds, 0);
    assert!((ours.worst.psnr_db - ours.psnr_db).abs() < 1e-9);
}

#[test]
fn a_degraded_encode_reports_lower_figures_and_an_unmeasured_one_none() {
    let dir = tempdir();
    let input = one_second(dir.path());
    let engine = cpu();
    let good = render(
        &engine,
        &measured(&input, &dir.path().join("good.mp4"), OutputFormat::Mp4, 18),
    );
    let bad = render(
        &engine,
        &measured(&input, &dir.path().join("bad.mp4"), OutputFormat::Mp4, 51),
    );
    let (good, bad) = (summary(&good.quality), summary(&bad.quality));
    assert!(
        bad.psnr_db + 3.0 < good.psnr_db,
        "crf 51: {bad:?}, crf 18: {good:?}"
    );
    assert!(
        bad.psnr_y_db < good.psnr_y_db && bad.ssim < good.ssim,
        "{bad:?} vs {good:?}"
    );
    // VP9 is measured the same way (its own decoder).
    let webm = render(
        &engine,
        &measured(
            &input,
            &dir.path().join("good.webm"),
            OutputFormat::Webm,
            18,
        ),
    );
    assert!(summary(&webm.quality).psnr_db > 25.0);
    let off = render(
        &engine,
        &job(
            &input,
            &dir.path().join("off.mp4"),
            Resolution::P720,
            OutputFormat::Mp4,
        ),
    );
    assert_eq!(off.quality, None);
}

#[test]
fn a_split_render_reports_each_segment_and_a_whole_within_a_single_pass() {
    let dir = tempdir();
    let spec = ClipSpec {
        width: 320,
        height: 180,
        fps: 10,
        seconds: 4.0,
        audio: false,
        extra_args: ["-g", "10", "-keyint_min", "10", "-sc_threshold", "0"]
            .map(String::from)
            .to_vec(),
        ..ClipSpec::h264(320, 180)
    };
    let input = clip(dir.path(), spec);
    let engine = cpu();
    let single = render(
        &engine,
        &measured(
            &input,
            &dir.path().join("single.mp4"),
            OutputFormat::Mp4,
            23,
        ),
    );
    let j = measured(&input, &dir.path().join("split.mp4"), OutputFormat::Mp4, 23);
    let opts = SegmentPlanOptions {
        target_seconds: 2.0,
        min_source_seconds: 3.0,
    };
    let spans = engine.plan_segments(&input, &opts).expect("plan");
    assert!(spans.len() >= 2, "{spans:?}");
    let parts: Vec<SegmentQuality> = spans
        .iter()
        .map(|span| {
            let out = dir.path().join(segment_file_name(span.index));
            let r = engine
                .render_segment(&j, span, &out, &mut |_| {}, &AtomicBool::new(false))
                .expect("segment");
            SegmentQuality {
                index: span.index,
                start_seconds: span.start_seconds,
                end_seconds: span.end_seconds,
                tally: r.quality.expect("a measured segment reports its tally"),
            }
        })
        .collect();
    let split = QualityReport::of_segments(parts)
        .expect("merge")
        .expect("segments");
    let (whole, one) = (
        split.whole.summary().expect("figures"),
        summary(&single.quality),
    );
    assert_eq!(whole.frames_measured, one.frames_measured);
    assert!(
        (whole.psnr_db - one.psnr_db).abs() < 0.3,
        "split {whole:?}, single {one:?}"
    );
    assert!(
        (whole.ssim - one.ssim).abs() < 0.01,
        "split {whole:?}, single {one:?}"
    );
    for s in &split.segments {
        let f = s.tally.summary().expect("segment figures");
        assert!(
            f.psnr_db > 25.0 && f.frames_measured > 0,
            "segment {}: {f:?}",
            s.index
        );
    }
}
