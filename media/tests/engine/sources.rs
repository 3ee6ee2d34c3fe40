//! Awkward sources: odd sizes, rotation, anamorphic pixels, 10-bit, full range, untagged
//! colour, variable frame rate. Output must be upright, the right size and the same colour.

use crate::common::*;
use vidforge_fixtures::{self as fixtures, ClipSpec, Pattern};
use vidforge_media::{OutputFormat, Resolution, decode_frames, probe};

#[test]
fn odd_size_source_gives_even_output_in_the_box() {
    let dir = tempdir();
    let src = clip(
        dir.path(),
        ClipSpec {
            width: 321,
            height: 241,
            audio: false,
            seconds: 0.3,
            ..ClipSpec::vp9(321, 241)
        },
    );
    let out = dir.path().join("odd.mp4");
    let r = render(
        &cpu(),
        &job(&src, &out, Resolution::P720, OutputFormat::Mp4),
    );
    assert_eq!((r.width % 2, r.height % 2), (0, 0));
    assert_eq!(r.height, 720);
    let aspect = r.width as f64 / r.height as f64;
    assert!((aspect - 321.0 / 241.0).abs() < 0.01, "{r:?}");
    assert_eq!(r.frames, 9);
}

/// Upright portrait content (top half white) stored sideways, with display rotation metadata
/// that makes players (and FFmpeg's autorotate) show it upright.
fn sideways_clip(dir: &std::path::Path, transpose: &str, rotate: i32) -> std::path::PathBuf {
    clip(
        dir,
        ClipSpec {
            width: 180,
            height: 320,
            seconds: 0.2,
            audio: false,
            rotate: Some(rotate),
            pattern: Pattern::Lavfi(format!(
                "color=c=black:s=180x320:r={{fps}}:d={{secs}},drawbox=x=0:y=0:w=iw:h=ih/2:color=white:t=fill,{transpose}"
            )),
            ..ClipSpec::default()
        },
    )
}

#[test]
fn rotated_sources_come_out_upright_and_vertical() {
    let dir = tempdir();
    let engine = cpu();
    for (transpose, rotate) in [
        ("transpose=clock", 90),
        ("transpose=cclock", 270),
        ("hflip,vflip", 180),
    ] {
        let src = sideways_clip(dir.path(), transpose, rotate);
        // FFmpeg's own autorotation agrees on which way is up.
        let info = probe(&src).expect("probe");
        let v = info.video.expect("video");
        assert_eq!(
            (v.display_width, v.display_height),
            (180, 320),
            "{transpose}"
        );
        let out = dir.path().join(format!("upright-{rotate}.mp4"));
        let r = render(
            &engine,
            &job(&src, &out, Resolution::P720, OutputFormat::Mp4),
        );
        // 9:16 inside the rotated 720p box.
        assert_eq!((r.width, r.height), (720, 1280), "{transpose}");
        let frames = decode_frames(&out, 1).expect("decode output");
        let f = &frames[0];
        assert_eq!((f.width, f.height), (720, 1280));
        let top = mean_yuv(f, 0, 0, 720, 600)[0];
        let bottom = mean_yuv(f, 0, 680, 720, 600)[0];
        assert!(
            top > 225.0 && bottom < 25.0,
            "{transpose}: top {top}, bottom {bottom}"
        );
    }
}

#[test]
fn anamorphic_source_uses_display_aspect() {
    let dir = tempdir();
    let src = clip(
        dir.path(),
        ClipSpec {
            seconds: 0.2,
            audio: false,
            pattern: Pattern::Lavfi("testsrc2=s={w}x{h}:r={fps}:d={secs},setsar=4/3".into()),
            ..ClipSpec::h264(480, 360)
        },
    );
    let v = probe(&src).expect("probe").video.expect("video");
    assert_eq!(v.sample_aspect_ratio, (4, 3));
    assert_eq!((v.display_width, v.display_height), (640, 360));
    let out = dir.path().join("ana.mp4");
    let r = render(
        &cpu(),
        &job(&src, &out, Resolution::P720, OutputFormat::Mp4),
    );
    assert_eq!((r.width, r.height), (1280, 720));
    let streams = fixtures::ffprobe_streams(&out).expect("ffprobe");
    let sar = stream(&streams, "video")
        .and_then(|s| s.get("sample_aspect_ratio").cloned())
        .unwrap_or_default();
    assert!(
        sar == "1:1" || sar == "N/A" || sar.is_empty(),
        "output SAR {sar}"
    );
}

const COLOUR: [u8; 3] = [0x33, 0x66, 0xcc];

/// Source colour (as RGB, from its own decoded code values) vs output colour (BT.709 limited).
fn assert_same_colour(
    src: &std::path::Path,
    src_bt709: bool,
    src_full: bool,
    out: &std::path::Path,
) {
    let s = &decode_frames(src, 1).expect("decode source")[0];
    let o = &decode_frames(out, 1).expect("decode output")[0];
    let centre = |f: &vidforge_media::Yuv420Frame| {
        let even = |v: u32| (v as usize / 2) & !1;
        mean_yuv(
            f,
            even(f.width / 2),
            even(f.height / 2),
            even(f.width),
            even(f.height),
        )
    };
    let (s_yuv, o_yuv) = (centre(s), centre(o));
    let s_rgb = yuv_to_rgb(s_yuv, src_bt709, src_full);
    let o_rgb = yuv_to_rgb(o_yuv, true, false);
    for c in 0..3 {
        let d = (s_rgb[c] - o_rgb[c]).abs() * 255.0;
        assert!(
            d <= 2.5,
            "{}: colour moved: source {s_yuv:?} -> rgb {s_rgb:?}, output {o_yuv:?} -> rgb {o_rgb:?}",
            src.display()
        );
    }
}

#[test]
fn colour_is_kept_for_601_709_full_range_and_10_bit_sources() {
    let dir = tempdir();
    let engine = cpu();
    let base = ClipSpec {
        seconds: 0.2,
        audio: false,
        pattern: Pattern::Solid(COLOUR),
        ..ClipSpec::h264(320, 240)
    };
    let cases: Vec<(&str, ClipSpec, bool, bool)> = vec![
        // Untagged SD: BT.601 by convention.
        ("untagged-601", base.clone(), false, false),
        (
            "tagged-709",
            ClipSpec {
                pattern: Pattern::Lavfi(
                    "color=c=0x3366cc:s={w}x{h}:r={fps}:d={secs},scale=out_color_matrix=bt709"
                        .into(),
                ),
                extra_args: [
                    "-colorspace",
                    "bt709",
                    "-color_primaries",
                    "bt709",
                    "-color_trc",
                    "bt709",
                ]
                .map(String::from)
                .to_vec(),
                ..base.clone()
            },
            true,
            false,
        ),
        (
            "full-range",
            ClipSpec {
                pix_fmt: "yuvj420p".into(),
                ..base.clone()
            },
            false,
            true,
        ),
        (
            "10-bit",
            ClipSpec {
                pix_fmt: "yuv420p10le".into(),
                ..base.clone()
            },
            false,
            false,
        ),
    ];
    for (name, spec, bt709, full) in cases {
        let src = clip(dir.path(), spec);
        let info = probe(&src).expect("probe");
        if name == "10-bit" {
            assert_eq!(info.video.as_ref().and_then(|v| v.bit_depth), Some(10));
        }
        if name == "full-range" {
            assert_eq!(
                info.video.as_ref().map(|v| v.color.range.as_str()),
                Some("pc")
            );
        }
        let out = dir.path().join(format!("{name}.mp4"));
        render(
            &engine,
            &job(&src, &out, Resolution::P720, OutputFormat::Mp4),
        );
        let streams = fixtures::ffprobe_streams(&out).expect("ffprobe");
        let v = stream(&streams, "video").expect("video");
        assert_eq!(v["pix_fmt"], "yuv420p", "{name}: 8-bit 4:2:0 out");
        // decode_frames reads a 10-bit source as 8-bit in its own colour.
        assert_same_colour(&src, bt709, full, &out);
    }
}

#[test]
fn variable_frame_rate_timestamps_are_kept() {
    let dir = tempdir();
    // 30 frames; after frame 15 the clock jumps by half a second.
    let src = clip(
        dir.path(),
        ClipSpec {
            audio: false,
            pattern: Pattern::Lavfi(
                "testsrc2=s={w}x{h}:r={fps}:d={secs},setpts='(N/30+gte(N\\,15)*0.5)/TB'".into(),
            ),
            extra_args: ["-fps_mode", "passthrough"].map(String::from).to_vec(),
            ..ClipSpec::h264(320, 240)
        },
    );
    let src_dur = fixtures::ffprobe_duration(&src).expect("duration");
    assert!(src_dur > 1.4, "fixture should be VFR, duration {src_dur}");
    for format in [OutputFormat::Mp4, OutputFormat::Webm] {
        let out = dir.path().join(format!("vfr.{}", format.extension()));
        let r = render(&cpu(), &job(&src, &out, Resolution::P720, format));
        assert_eq!(r.frames, 30);
        let dur = fixtures::ffprobe_duration(&out).expect("duration");
        assert!(
            (dur - src_dur).abs() < 0.07,
            "{format}: {dur} vs source {src_dur}"
        );
        let streams = fixtures::ffprobe_streams(&out).expect("ffprobe");
        assert_eq!(
            num(stream(&streams, "video").expect("video"), "nb_read_frames"),
            30
        );
    }
}

#[test]
fn probe_describes_streams() {
    let dir = tempdir();
    let src = clip(
        dir.path(),
        ClipSpec {
            rotate: Some(90),
            ..ClipSpec::h264(320, 240)
        },
    );
    let info = probe(&src).expect("probe");
    assert!(info.format.contains("mp4"), "{info:?}");
    assert!((info.duration_seconds - 1.0).abs() < 0.1);
    assert!(info.size_bytes > 0);
    let v = info.video.expect("video");
    assert_eq!(v.codec, "h264");
    assert_eq!((v.width, v.height), (320, 240));
    assert_eq!((v.display_width, v.display_height), (240, 320));
    assert_eq!(v.rotation_degrees, 270);
    assert_eq!(v.frames, Some(30));
    assert!((v.fps - 30.0).abs() < 0.01);
    assert_eq!(v.pix_fmt.as_deref(), Some("yuv420p"));
    assert_eq!(v.bit_depth, Some(8));
    let a = info.audio.expect("audio");
    assert_eq!(
        (a.codec.as_str(), a.sample_rate, a.channels),
        ("aac", 48000, 2)
    );

    let audio = fixtures::audio_only(dir.path()).expect("audio fixture");
    let info = probe(&audio).expect("probe audio-only");
    assert!(info.video.is_none() && info.audio.is_some());
}

/// HDR sources say what they are: PQ with its mastering display and content light level
/// (HDR10 in Matroska), HLG (a phone's MP4); an SDR clip says SDR.
#[test]
fn probe_reads_hdr_tags_and_metadata() {
    use vidforge_media::DynamicRange;
    let dir = tempdir();
    let pq = fixtures::hdr_clip(dir.path(), DynamicRange::Pq).expect("PQ fixture (mkvmerge)");
    let v = probe(&pq).expect("probe").video.expect("video");
    let c = &v.color;
    assert_eq!(
        (
            c.primaries.as_str(),
            c.transfer.as_str(),
            c.matrix.as_str(),
            c.range.as_str()
        ),
        ("bt2020", "smpte2084", "bt2020nc", "tv")
    );
    assert_eq!(c.dynamic_range, DynamicRange::Pq);
    assert!(c.is_hdr());
    assert_eq!(v.bit_depth, Some(10));
    let (max, min, cll, fall) = fixtures::HDR10_MASTERING;
    let m = c.mastering.expect("mastering display");
    assert_eq!((m.max_nits, m.min_nits), (max, min));
    let [r, g, b, white] = m.primaries.expect("mastering primaries");
    let near = |a: (f64, f64), e: (f64, f64)| (a.0 - e.0).abs() < 1e-3 && (a.1 - e.1).abs() < 1e-3;
    assert!(near(r, (0.708, 0.292)) && near(g, (0.170, 0.797)) && near(b, (0.131, 0.046)));
    assert!(near(white, (0.3127, 0.3290)), "{white:?}");
    let l = c.content_light.expect("content light level");
    assert_eq!((l.max_cll, l.max_fall), (cll, fall));
    assert!(c.dolby_vision.is_none());

    let hlg = fixtures::hdr_clip(dir.path(), DynamicRange::Hlg).expect("HLG fixture");
    let c = probe(&hlg).expect("probe").video.expect("video").color;
    assert_eq!(
        (c.transfer.as_str(), c.dynamic_range),
        ("arib-std-b67", DynamicRange::Hlg)
    );
    assert!(c.mastering.is_none() && c.content_light.is_none());

    let sdr = clip(dir.path(), ClipSpec::h264(320, 240));
    let c = probe(&sdr).expect("probe").video.expect("video").color;
    assert_eq!(c.dynamic_range, DynamicRange::Sdr);
    assert!(!c.is_hdr());
}

/// A raw H.264 stream declares no length and its packets carry no timestamps: the probe
/// counts them, so a tiny file that decodes to many frames says so (the server bounds a
/// render's work by this length).
#[test]
fn a_raw_stream_without_a_declared_length_is_measured_by_its_packets() {
    let dir = tempdir();
    let raw = dir.path().join("tiny.h264");
    let status = std::process::Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi"])
        .args(["-i", "color=s=16x16:r=30", "-t", "120"])
        .args(["-c:v", "libx264", "-preset", "ultrafast", "-f", "h264"])
        .arg(&raw)
        .status()
        .expect("run ffmpeg");
    assert!(status.success());
    assert!(std::fs::metadata(&raw).unwrap().len() < 100_000);
    let info = probe(&raw).expect("probe");
    assert!(
        (info.duration_seconds - 120.0).abs() < 0.5,
        "3,600 frames at 30 fps: {info:?}"
    );
}

/// Dolby Vision with a base layer vidforge can show (profile 8.4: HLG) is read and rendered
/// from that layer; profile 5, whose only layer is Dolby's IPTPQc2, is refused when opened
/// (upload, probe, render) with a typed error that says why, rather than rendered in wrong
/// colours.
#[test]
fn dolby_vision_without_a_usable_base_layer_is_refused() {
    let dir = tempdir();
    let hlg = fixtures::hdr_clip(dir.path(), vidforge_media::DynamicRange::Hlg).expect("clip");
    let p8 = fixtures::dolby_vision_clip(dir.path(), &hlg, 8, 4).expect("profile 8.4 clip");
    let dv = probe(&p8)
        .expect("profile 8.4 opens")
        .video
        .expect("video")
        .color;
    let dv = dv.dolby_vision.expect("the dvcC record is read");
    assert_eq!((dv.profile, dv.base_layer_usable()), (8, true));
    let out = dir.path().join("p8.mp4");
    render(&cpu(), &job(&p8, &out, Resolution::P720, OutputFormat::Mp4));

    let p5 = fixtures::dolby_vision_clip(dir.path(), &hlg, 5, 0).expect("profile 5 clip");
    let err = probe(&p5).expect_err("profile 5 is refused");
    assert_eq!(
        err.kind(),
        vidforge_media::ErrorKind::UnsupportedCodec,
        "{err}"
    );
    assert!(err.to_string().contains("Dolby Vision profile 5"), "{err}");
    let out = dir.path().join("p5.mp4");
    let refused = cpu().render(
        &job(&p5, &out, Resolution::P720, OutputFormat::Mp4),
        &mut |_| {},
        &std::sync::atomic::AtomicBool::new(false),
    );
    assert_eq!(
        refused
            .expect_err("a render of profile 5 is refused")
            .kind(),
        vidforge_media::ErrorKind::UnsupportedCodec
    );
    assert!(!out.exists(), "no output for a refused render");
}
