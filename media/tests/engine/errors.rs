//! Every bad input gets its typed error, never a panic, hang or partial file; cancellation
//! stops a render and cleans up.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::common::*;
use vidforge_fixtures::{self as fixtures, ClipSpec};
use vidforge_media::{Engine, ErrorKind, MediaError, OutputFormat, Resolution, Stage, probe};

fn render_err(engine: &Engine, input: &Path, out_dir: &Path) -> MediaError {
    let out = out_dir.join("out.mp4");
    let err = engine
        .render(
            &job(input, &out, Resolution::P720, OutputFormat::Mp4),
            &mut |_| {},
            &AtomicBool::new(false),
        )
        .expect_err("render must fail");
    assert!(
        leftovers(out_dir, &[]).is_empty(),
        "files left after a failed render: {:?}",
        leftovers(out_dir, &[])
    );
    err
}

#[test]
fn engine_is_shareable() {
    fn assert_traits<T: Send + Sync + Clone + 'static>() {}
    assert_traits::<Engine>();
    let _: fn(&MediaError) -> ErrorKind = MediaError::kind;
}

#[test]
fn cancel_mid_render_leaves_nothing() {
    let dir = tempdir();
    let src = clip(
        dir.path(),
        ClipSpec {
            seconds: 4.0,
            ..ClipSpec::h264(320, 240)
        },
    );
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).expect("mkdir");
    let out = out_dir.join("cancelled.mp4");
    let cancel = AtomicBool::new(false);
    let mut last_done = 0;
    let t = std::time::Instant::now();
    let err = cpu()
        .render(
            &job(&src, &out, Resolution::P720, OutputFormat::Mp4),
            &mut |p| {
                if p.stage == Stage::Rendering {
                    last_done = p.frames_done;
                    if p.frames_done >= 10 {
                        cancel.store(true, Ordering::Relaxed);
                    }
                }
            },
            &cancel,
        )
        .expect_err("cancelled render must fail");
    assert_eq!(err.kind(), ErrorKind::Cancelled, "{err}");
    assert!(
        last_done < 40,
        "cancel took effect late: {last_done} frames"
    );
    assert!(t.elapsed().as_secs() < 10);
    assert!(
        leftovers(&out_dir, &[]).is_empty(),
        "{:?}",
        leftovers(&out_dir, &[])
    );

    // Already cancelled before starting.
    let err = cpu()
        .render(
            &job(&src, &out, Resolution::P720, OutputFormat::Mp4),
            &mut |_| {},
            &AtomicBool::new(true),
        )
        .expect_err("pre-cancelled");
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    assert!(leftovers(&out_dir, &[]).is_empty());
}

#[test]
fn bad_inputs_get_typed_errors() {
    let dir = tempdir();
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).expect("mkdir");
    let d = dir.path();
    let engine = cpu();
    let cases: Vec<(&str, std::path::PathBuf, ErrorKind)> = vec![
        (
            "missing",
            d.join("does-not-exist.mp4"),
            ErrorKind::SourceNotFound,
        ),
        ("directory", out_dir.clone(), ErrorKind::SourceNotFound),
        (
            "zero-length",
            fixtures::empty_file(d, "mp4").expect("fx"),
            ErrorKind::InvalidInput,
        ),
        (
            "garbage",
            fixtures::garbage_file(d, "mp4", 200_000).expect("fx"),
            ErrorKind::InvalidInput,
        ),
        (
            "garbage-mkv",
            fixtures::garbage_file(d, "mkv", 5_000).expect("fx"),
            ErrorKind::InvalidInput,
        ),
        (
            "text",
            fixtures::text_file(d, "txt").expect("fx"),
            ErrorKind::UnsupportedCodec,
        ),
        (
            "text-as-mp4",
            fixtures::text_file(d, "mp4").expect("fx"),
            ErrorKind::UnsupportedCodec,
        ),
        (
            "still-png",
            fixtures::still_image(d).expect("fx"),
            ErrorKind::UnsupportedCodec,
        ),
        (
            "audio-only",
            fixtures::audio_only(d).expect("fx"),
            ErrorKind::UnsupportedCodec,
        ),
        (
            "oversized",
            fixtures::oversized_clip(d).expect("fx"),
            ErrorKind::InvalidInput,
        ),
    ];
    for (name, path, kind) in cases {
        let err = render_err(&engine, &path, &out_dir);
        assert_eq!(err.kind(), kind, "{name}: {err}");
        assert!(!err.to_string().is_empty());
        if name == "oversized" {
            assert!(err.to_string().contains("16400x16"), "{err}");
        }
        if name == "audio-only" {
            assert!(err.to_string().contains("no video stream"), "{err}");
        }
        // probe agrees, except for audio-only (a valid file without video).
        if name != "audio-only" {
            let perr = probe(&path).expect_err(name);
            assert_eq!(perr.kind(), kind, "probe {name}: {perr}");
        }
    }
}

#[test]
fn truncated_files_error_or_render_what_they_can() {
    let dir = tempdir();
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).expect("mkdir");
    let engine = cpu();
    // moov at the end: half a file has no index at all.
    let plain = clip(dir.path(), ClipSpec::h264(320, 240));
    let cut = fixtures::truncated_copy(dir.path(), &plain, 0.5).expect("truncate");
    let err = render_err(&engine, &cut, &out_dir);
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    // Header only.
    let stub = fixtures::truncated_copy(dir.path(), &plain, 0.01).expect("truncate");
    assert_eq!(
        render_err(&engine, &stub, &out_dir).kind(),
        ErrorKind::InvalidInput
    );

    // moov first (faststart): the index survives, the media data is cut short.
    let fast = clip(
        dir.path(),
        ClipSpec {
            extra_args: ["-movflags", "+faststart"].map(String::from).to_vec(),
            ..ClipSpec::h264(320, 240)
        },
    );
    let cut = fixtures::truncated_copy(dir.path(), &fast, 0.6).expect("truncate");
    let out = out_dir.join("partial.mp4");
    match engine.render(
        &job(&cut, &out, Resolution::P720, OutputFormat::Mp4),
        &mut |_| {},
        &AtomicBool::new(false),
    ) {
        Ok(r) => {
            assert!(r.frames > 0 && r.frames < 30, "{r:?}");
            assert!(probe(&out).is_ok());
        }
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
            assert!(leftovers(&out_dir, &[]).is_empty());
        }
    }
}

/// Matroska keeps its declared duration in the segment header, which a cut file keeps, but
/// declares no frame count: a webm or mkv cut at half is an error naming the truncation, not
/// a short video; a complete webm whose audio outlasts its video still renders.
#[test]
fn truncated_matroska_files_are_errors_but_long_audio_is_not() {
    let dir = tempdir();
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).expect("mkdir");
    let engine = cpu();
    let webm = clip(
        dir.path(),
        ClipSpec {
            seconds: 2.0,
            ..ClipSpec::vp9(320, 240)
        },
    );
    let mkv = clip(
        dir.path(),
        ClipSpec {
            seconds: 2.0,
            audio: false,
            container: "mkv".into(),
            ..ClipSpec::h264(320, 240)
        },
    );
    for full in [&webm, &mkv] {
        let cut = fixtures::truncated_copy(dir.path(), full, 0.5).expect("truncate");
        // Refused when probed (an upload), naming the truncation...
        let err = vidforge_media::probe(&cut).expect_err("a truncated file probes");
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains("truncated") && msg.contains("declares 2.0"),
            "{msg}"
        );
        // ...and by a render of it all the same.
        let err = render_err(&engine, &cut, &out_dir);
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains("truncated") && msg.contains("declares 2.0"),
            "{msg}"
        );
    }
    // Complete files probe and render.
    for full in [&webm, &mkv] {
        vidforge_media::probe(full).expect("a complete file probes");
        let out = out_dir.join("full.mp4");
        render(
            &engine,
            &job(full, &out, Resolution::P720, OutputFormat::Mp4),
        );
        std::fs::remove_file(&out).expect("rm");
    }
    // One second of video under two of audio: the container declares 2 s, the video is
    // short by design, the audio reaches the end.
    let long_audio = clip(
        dir.path(),
        ClipSpec {
            seconds: 2.0,
            pattern: fixtures::Pattern::Lavfi("testsrc2=s={w}x{h}:r={fps}:d=1".into()),
            ..ClipSpec::vp9(320, 240)
        },
    );
    vidforge_media::probe(&long_audio).expect("video shorter than its audio probes");
    let out = out_dir.join("long-audio.mp4");
    let report = render(
        &engine,
        &job(&long_audio, &out, Resolution::P720, OutputFormat::Mp4),
    );
    assert_eq!(report.frames, 30, "{report:?}");
}

#[test]
fn unwritable_output_is_render_failed_and_leaves_nothing() {
    let dir = tempdir();
    let src = clip(
        dir.path(),
        ClipSpec {
            seconds: 0.1,
            ..ClipSpec::h264(320, 240)
        },
    );
    let err = cpu()
        .render(
            &job(
                &src,
                &dir.path().join("no/such/dir/out.mp4"),
                Resolution::P720,
                OutputFormat::Mp4,
            ),
            &mut |_| {},
            &AtomicBool::new(false),
        )
        .expect_err("missing output dir");
    assert_eq!(err.kind(), ErrorKind::RenderFailed, "{err}");
}

#[test]
fn parallel_renders_share_one_engine() {
    let dir = tempdir();
    let src = clip(
        dir.path(),
        ClipSpec {
            seconds: 0.3,
            ..ClipSpec::h264(320, 240)
        },
    );
    let engine = cpu();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|i| {
                let engine = engine.clone();
                let src = src.clone();
                let out = dir.path().join(format!("par-{i}.webm"));
                s.spawn(move || {
                    render(
                        &engine,
                        &job(&src, &out, Resolution::P720, OutputFormat::Webm),
                    )
                })
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().expect("thread").frames, 9);
        }
    });
}
