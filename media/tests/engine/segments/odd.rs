//! Valid sources with odd timing, split into small segments: a paused screen recording, a
//! jump of the frame rate, a hole in Matroska and in WebM, a slideshow whose segments would
//! hold one frame each, keyframes out of presentation order. Each joins to exactly the frames
//! of its single pass, cut only where a segment can start (never right after a gap, never
//! at a keyframe out of order, never leaving one frame).

use std::path::Path;

use vidforge_fixtures as fixtures;
use vidforge_media::{OutputFormat, RenderJob, Resolution, SegmentPlanOptions, SegmentSpan};

use super::{join, render_segments};
use crate::common::seams::video_packets;
use crate::common::{cpu, job, render, tempdir};

/// Plans `src` in `target`-second segments, renders and joins them to `format`, and checks the
/// join against the single pass: the same frames at the same times. Returns the plan.
fn split_matches_single_pass(src: &Path, format: OutputFormat, target: f64) -> Vec<SegmentSpan> {
    let engine = cpu();
    let dir = src.parent().expect("the source's folder");
    let opts = SegmentPlanOptions {
        target_seconds: target,
        min_source_seconds: 1.0,
    };
    let spans = engine.plan_segments(src, &opts).expect("plan");
    assert!(spans.len() >= 2, "{}: not split: {spans:?}", src.display());
    assert!(spans.iter().all(|s| s.frames >= 2), "{spans:?}");
    let ext = format.extension();
    let stem = src.file_stem().and_then(|s| s.to_str()).unwrap_or("src");
    let single_job = job(
        src,
        &dir.join(format!("{stem}-single.{ext}")),
        Resolution::P720,
        format,
    );
    let single = render(&engine, &single_job);
    let fan_job = RenderJob {
        output: dir.join(format!("{stem}-joined.{ext}")),
        ..single_job.clone()
    };
    let seg_dir = dir.join(format!("{stem}-segments"));
    std::fs::create_dir(&seg_dir).expect("mkdir");
    let files = render_segments(&engine, &fan_job, &spans, &seg_dir);
    let joined = join(&engine, &fan_job, &files);
    assert_eq!(joined.frames, single.frames, "{}", src.display());
    let pts = |path: &Path| {
        let mut v: Vec<i64> = video_packets(path).iter().map(|p| p.0).collect();
        v.sort_unstable();
        v
    };
    assert_eq!(
        pts(&fan_job.output),
        pts(&single_job.output),
        "{}: the join's frames differ from the single pass",
        src.display()
    );
    spans
}

fn starts(spans: &[SegmentSpan]) -> Vec<f64> {
    spans.iter().map(|s| s.start_seconds).collect()
}

#[test]
fn a_paused_recording_and_a_frame_rate_jump_join_like_a_single_pass() {
    let dir = tempdir();
    let paused = fixtures::paused_recording(dir.path(), 12.0, 5, (4.0, 7.0)).expect("source");
    let spans = split_matches_single_pass(&paused, OutputFormat::Mp4, 2.0);
    assert!(spans.len() >= 3, "{spans:?}");
    let vfr = fixtures::frame_rate_jump(dir.path()).expect("source");
    split_matches_single_pass(&vfr, OutputFormat::Mp4, 1.0);
}

#[test]
fn a_hole_in_matroska_and_webm_joins_like_a_single_pass() {
    let dir = tempdir();
    for (container, format) in [("mkv", OutputFormat::Mp4), ("webm", OutputFormat::Webm)] {
        let src = fixtures::with_hole(dir.path(), container, 600).expect("source");
        let spans = split_matches_single_pass(&src, format, 1.0);
        // No segment starts at the first frame after the hole (603 s).
        assert!(
            starts(&spans).iter().all(|&s| (s - 603.0).abs() > 1e-3),
            "{container}: {spans:?}"
        );
    }
}

#[test]
fn slides_and_keyframes_out_of_order_join_like_a_single_pass() {
    let dir = tempdir();
    // A keyframe every 2 s: 1 s segments would hold one frame each.
    let slides = fixtures::slideshow(dir.path(), 20.0, 2).expect("source");
    let spans = split_matches_single_pass(&slides, OutputFormat::Mp4, 1.0);
    assert!(
        spans.iter().all(|s| s.frames == 2 || s.frames == 3),
        "{spans:?}"
    );
    // Keyframes present at 0, 2, 1 and 3 s in decode order: only 3 s is a clean cut.
    let shuffled = fixtures::keyframes_out_of_order(dir.path()).expect("source");
    let spans = split_matches_single_pass(&shuffled, OutputFormat::Mp4, 1.0);
    assert_eq!(starts(&spans), [0.0, 3.0], "{spans:?}");
}
