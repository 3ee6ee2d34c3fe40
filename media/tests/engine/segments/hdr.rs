//! Kept HDR through segments: HEVC Main10 HLG joined with the single pass's stream tags.

use std::process::Command;

use vidforge_media::synthetic::run_tool;
use vidforge_media::{HdrPolicy, OutputFormat, RenderJob, Resolution, SegmentPlanOptions};

use super::{FPS, assert_monotonic, join, render_segments, video_tags};
use crate::common::seams::video_packets;
use crate::common::{cpu, job, render, tempdir};

#[test]
fn kept_hdr_joins_with_the_single_pass_tags() {
    let dir = tempdir();
    let engine = cpu();
    let src = dir.path().join("hlg.mp4");
    let x265 = "log-level=error:keyint=25:min-keyint=25:scenecut=0:colorprim=bt2020:\
                transfer=arib-std-b67:colormatrix=bt2020nc:range=limited";
    run_tool(
        Command::new("ffmpeg")
            .args(["-v", "error", "-y", "-f", "lavfi", "-i"])
            .arg(format!("testsrc2=s=320x180:r={FPS}:d=2"))
            .args([
                "-pix_fmt",
                "yuv420p10le",
                "-c:v",
                "libx265",
                "-preset",
                "ultrafast",
            ])
            .args(["-x265-params", x265, "-color_primaries", "bt2020"])
            .args(["-color_trc", "arib-std-b67", "-colorspace", "bt2020nc"])
            .arg(&src),
    )
    .expect("HLG source");
    let opts = SegmentPlanOptions {
        target_seconds: 1.0,
        min_source_seconds: 1.0,
    };
    let spans = engine.plan_segments(&src, &opts).expect("plan");
    assert_eq!(spans.len(), 2, "{spans:?}");
    let single_job = RenderJob {
        hdr: HdrPolicy::Keep,
        ..job(
            &src,
            &dir.path().join("single.mp4"),
            Resolution::P720,
            OutputFormat::Mp4,
        )
    };
    let single = render(&engine, &single_job);
    let fan_job = RenderJob {
        output: dir.path().join("joined.mp4"),
        ..single_job.clone()
    };
    let files = render_segments(&engine, &fan_job, &spans, dir.path());
    let joined = join(&engine, &fan_job, &files);
    assert_eq!(joined.frames, single.frames);
    let tags = video_tags(&fan_job.output);
    assert_eq!(tags, video_tags(&single_job.output));
    assert!(
        tags.contains(&("codec_tag_string".into(), "hvc1".into())),
        "{tags:?}"
    );
    assert!(
        tags.contains(&("color_transfer".into(), "arib-std-b67".into())),
        "{tags:?}"
    );
    let (pa, pb) = (
        video_packets(&fan_job.output),
        video_packets(&single_job.output),
    );
    assert_monotonic(&fan_job.output, &pa);
    let pts = |p: &[(i64, i64)]| {
        p.iter()
            .map(|p| p.0)
            .collect::<std::collections::BTreeSet<_>>()
    };
    assert_eq!(pts(&pa), pts(&pb));
}
