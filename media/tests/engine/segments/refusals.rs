//! The join's refusals: no segments, a missing, truncated, corrupt, misplaced or differently
//! encoded one, and spans no frame lies in. A typed error each time (`RenderFailed` for the
//! segments: they are the engine's files, not the source), naming the segment, and no output
//! file.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use vidforge_fixtures as fixtures;
use vidforge_media::{
    ErrorKind, OutputFormat, RenderJob, RenderReport, Resolution, SegmentFile, SegmentSpan,
};

use super::{FRAMES, join, plan, render_segments, source};
use crate::common::{cpu, job, leftovers, tempdir};

/// The error's kind, and that `out` was not written (nor any temporary file left in `dir`).
fn refused(
    r: Result<RenderReport, vidforge_media::MediaError>,
    out: &Path,
    dir: &Path,
    keep: &[&Path],
) -> ErrorKind {
    let e = r.expect_err("should be refused");
    assert!(!out.exists(), "{e}: output left behind");
    assert!(
        leftovers(dir, keep).is_empty(),
        "{e}: {:?}",
        leftovers(dir, keep)
    );
    e.kind()
}

#[test]
fn bad_segments_are_refused_without_output() {
    let dir = tempdir();
    let engine = cpu();
    let src = source(dir.path(), None);
    let spans = plan(&engine, &src);
    let seg_dir = dir.path().join("segments");
    std::fs::create_dir(&seg_dir).expect("mkdir");
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).expect("mkdir");
    let out = out_dir.join("joined.mp4");
    let fan_job = job(&src, &out, Resolution::P720, OutputFormat::Mp4);
    let files = render_segments(&engine, &fan_job, &spans, &seg_dir);
    let try_join = |segs: &[SegmentFile]| {
        engine.join_segments(&fan_job, segs, &mut |_| {}, &AtomicBool::new(false))
    };
    let kind = |segs: Vec<SegmentFile>| refused(try_join(&segs), &out, &out_dir, &[]);
    // Segment 1's place holding `path`.
    let in_place_of_1 = |path: PathBuf| {
        let mut segs = files.clone();
        segs[1].path = path;
        segs
    };

    assert_eq!(kind(vec![]), ErrorKind::RenderFailed);
    assert_eq!(
        kind(in_place_of_1(seg_dir.join("nope.mp4"))),
        ErrorKind::RenderFailed
    );
    let truncated = fixtures::truncated_copy(&seg_dir, &files[1].path, 0.6).expect("truncate");
    assert_eq!(kind(in_place_of_1(truncated)), ErrorKind::RenderFailed);
    let garbage = fixtures::garbage_file(&seg_dir, "mp4", 4096).expect("garbage");
    assert_eq!(kind(in_place_of_1(garbage)), ErrorKind::RenderFailed);
    // Out of order, repeated, and one left out: a segment does not start where its span does.
    let mut swapped = files.clone();
    swapped[0].path = files[1].path.clone();
    swapped[1].path = files[0].path.clone();
    let e = try_join(&swapped).expect_err("out of order");
    assert_eq!(e.kind(), ErrorKind::RenderFailed);
    assert!(e.to_string().contains("where its span starts"), "{e}");
    assert_eq!(
        kind(in_place_of_1(files[0].path.clone())),
        ErrorKind::RenderFailed
    );
    assert_eq!(
        kind(vec![files[0].clone(), files[2].clone()]),
        ErrorKind::RenderFailed
    );
    // A segment encoded otherwise (VP9, not H.264).
    let vp9_job = RenderJob {
        format: OutputFormat::Webm,
        ..fan_job.clone()
    };
    let other = render_segments(&engine, &vp9_job, &spans[1..2], &out_dir).remove(0);
    let e = refused(
        try_join(&in_place_of_1(other.path.clone())),
        &out,
        &out_dir,
        &[&other.path],
    );
    assert_eq!(e, ErrorKind::RenderFailed);

    // A span past the source's end, and one that ends before it starts.
    let past = SegmentSpan {
        index: 9,
        start_pts: Some(1 << 40),
        end_pts: None,
        start_seconds: 1e6,
        end_seconds: 1e6,
        frames: 10,
    };
    let seg_out = out_dir.join("past.mp4");
    for span in [
        past.clone(),
        SegmentSpan {
            start_pts: Some(100),
            end_pts: Some(50),
            ..past
        },
    ] {
        let r = engine.render_segment(
            &fan_job,
            &span,
            &seg_out,
            &mut |_| {},
            &AtomicBool::new(false),
        );
        assert_eq!(r.expect_err("past the end").kind(), ErrorKind::InvalidInput);
        assert!(leftovers(&out_dir, &[&other.path]).is_empty());
    }
    // And the good ones still join.
    assert_eq!(join(&engine, &fan_job, &files).frames, FRAMES);
}
