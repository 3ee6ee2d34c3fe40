//! Every output format, every resolution class, audio handling: the output decodes with the
//! right codecs, size, frame count and duration.

use crate::common::*;
use vidforge_fixtures::{self as fixtures, ClipSpec};
use vidforge_media::{OutputFormat, Resolution, probe};

fn check_output(
    path: &std::path::Path,
    format: OutputFormat,
    size: (u32, u32),
    frames: u64,
    audio: bool,
) {
    let streams = fixtures::ffprobe_streams(path).expect("ffprobe output");
    let v = stream(&streams, "video").expect("video stream");
    assert_eq!(v["codec_name"], format.video_codec(), "{path:?}");
    assert_eq!((num(v, "width") as u32, num(v, "height") as u32), size);
    assert_eq!(v["pix_fmt"], "yuv420p");
    assert_eq!(v.get("color_space").map(String::as_str), Some("bt709"));
    assert_eq!(v.get("color_range").map(String::as_str), Some("tv"));
    let got = num(v, "nb_read_frames") as i64;
    assert!(
        (got - frames as i64).abs() <= 1,
        "{got} frames, expected {frames}"
    );
    match (audio, stream(&streams, "audio")) {
        (true, Some(a)) => assert_eq!(a["codec_name"], format.audio_codec()),
        (false, None) => {}
        (want, got) => panic!("audio expected: {want}, got {got:?}"),
    }
}

#[test]
fn every_format_at_720p() {
    let dir = tempdir();
    let spec = ClipSpec::h264(320, 240);
    let src = clip(dir.path(), spec.clone());
    let engine = cpu();
    for format in OutputFormat::ALL {
        let out = dir.path().join(format!("out.{}", format.extension()));
        let report = render(&engine, &job(&src, &out, Resolution::P720, format));
        // 4:3 inside 1280x720.
        assert_eq!((report.width, report.height), (960, 720));
        assert_eq!(report.frames, spec.frame_count());
        assert_eq!(report.backend, "cpu");
        assert!(report.size_bytes > 0 && report.fps > 0.0);
        assert!((report.duration_seconds - 1.0).abs() < 0.1, "{report:?}");
        check_output(&out, format, (960, 720), spec.frame_count(), true);
        let dur = fixtures::ffprobe_duration(&out).expect("duration");
        assert!((dur - 1.0).abs() < 0.1, "{format}: duration {dur}");
    }
}

#[test]
fn p1080_and_4k_upscale_short_clip() {
    let dir = tempdir();
    let spec = ClipSpec {
        width: 640,
        height: 360,
        seconds: 0.3,
        ..ClipSpec::h264(640, 360)
    };
    let src = clip(dir.path(), spec.clone());
    let engine = cpu();
    for (res, size) in [
        (Resolution::P1080, (1920, 1080)),
        (Resolution::P4k, (3840, 2160)),
    ] {
        let out = dir.path().join(format!("out-{res}.mp4"));
        let report = render(&engine, &job(&src, &out, res, OutputFormat::Mp4));
        assert_eq!((report.width, report.height), size);
        check_output(&out, OutputFormat::Mp4, size, spec.frame_count(), true);
    }
}

#[test]
fn clip_without_audio_has_no_audio_stream() {
    let dir = tempdir();
    let src = clip(
        dir.path(),
        ClipSpec {
            audio: false,
            ..ClipSpec::h264(320, 240)
        },
    );
    let engine = cpu();
    for format in [OutputFormat::Mp4, OutputFormat::Webm] {
        let out = dir.path().join(format!("silent.{}", format.extension()));
        render(&engine, &job(&src, &out, Resolution::P720, format));
        check_output(&out, format, (960, 720), 30, false);
        assert!(probe(&out).expect("probe").audio.is_none());
    }
}

#[test]
fn audio_is_transcoded_across_containers() {
    let dir = tempdir();
    // Opus in webm -> AAC in mp4, and AAC in mp4 -> Opus in webm.
    let webm = clip(dir.path(), ClipSpec::vp9(320, 240));
    let mp4 = clip(dir.path(), ClipSpec::h264(320, 240));
    let engine = cpu();
    let a = dir.path().join("from-webm.mp4");
    render(
        &engine,
        &job(&webm, &a, Resolution::P720, OutputFormat::Mp4),
    );
    check_output(&a, OutputFormat::Mp4, (960, 720), 30, true);
    let b = dir.path().join("from-mp4.webm");
    render(
        &engine,
        &job(&mp4, &b, Resolution::P720, OutputFormat::Webm),
    );
    check_output(&b, OutputFormat::Webm, (960, 720), 30, true);
    for out in [&a, &b] {
        let info = probe(out).expect("probe");
        let audio = info.audio.as_ref().expect("audio");
        assert_eq!(audio.channels, 2);
        assert!(
            (info.duration_seconds - 1.0).abs() < 0.1,
            "{out:?}: {info:?}"
        );
    }
    // Opus is always 48 kHz.
    assert_eq!(
        probe(&b).expect("probe").audio.expect("audio").sample_rate,
        48000
    );
}

#[test]
fn progress_reports_stages_and_counts() {
    let dir = tempdir();
    let src = clip(dir.path(), ClipSpec::h264(320, 240));
    let out = dir.path().join("p.mp4");
    let mut seen = Vec::new();
    let report = cpu()
        .render(
            &job(&src, &out, Resolution::P720, OutputFormat::Mp4),
            &mut |p| seen.push(p),
            &std::sync::atomic::AtomicBool::new(false),
        )
        .expect("render");
    assert_eq!(
        seen.first().map(|p| p.stage),
        Some(vidforge_media::Stage::Preparing)
    );
    assert_eq!(
        seen.last().map(|p| p.stage),
        Some(vidforge_media::Stage::Finalizing)
    );
    assert_eq!(seen.last().map(|p| p.frames_done), Some(report.frames));
    let rendering: Vec<_> = seen
        .iter()
        .filter(|p| p.stage == vidforge_media::Stage::Rendering)
        .collect();
    assert!(rendering.len() > 5, "per-frame progress expected: {seen:?}");
    assert!(
        rendering
            .windows(2)
            .all(|w| w[0].frames_done <= w[1].frames_done)
    );
    assert_eq!(rendering.last().and_then(|p| p.frames_total), Some(30));
    assert!(report.stage_times.encode > std::time::Duration::ZERO);
}
