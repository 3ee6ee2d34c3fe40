//! The watermark lands in the requested corner with the requested opacity; nothing else
//! changes. Previews show the same composition.

use crate::common::*;
use vidforge_fixtures::{self as fixtures, ClipSpec, Pattern};
use vidforge_media::gpu::{
    ColorSpec, Placement, WatermarkImage, place_watermark, prepare_watermark,
};
use vidforge_media::{OutputFormat, Position, Resolution, WatermarkSpec, decode_frames};

const WM_RGBA: [u8; 4] = [230, 20, 40, 200];
const OPACITY: f32 = 0.6;

fn blend(dst: f64, src: f64, a: f64) -> f64 {
    (dst * (255.0 - a) + src * a) / 255.0
}

/// Expected Y/U/V of the watermark interior over a background of `bg` (all code values).
fn expected_inside(placement: Placement, bg: [f64; 3]) -> [f64; 3] {
    let img = WatermarkImage {
        width: 200,
        height: 100,
        rgba: std::iter::repeat_n(WM_RGBA, 200 * 100).flatten().collect(),
    };
    let wm = prepare_watermark(&img, placement, OPACITY, ColorSpec::OUTPUT);
    // Uniform image: the centre sample is representative.
    let (cx, cy) = (placement.width as usize / 2, placement.height as usize / 2);
    let i = cy * placement.width as usize + cx;
    let j = (cy / 2) * (placement.width as usize / 2) + cx / 2;
    [
        blend(bg[0], wm.y[i] as f64, wm.alpha_y[i] as f64),
        blend(bg[1], wm.u[j] as f64, wm.alpha_c[j] as f64),
        blend(bg[2], wm.v[j] as f64, wm.alpha_c[j] as f64),
    ]
}

#[test]
fn watermark_at_requested_corner_with_requested_opacity() {
    let dir = tempdir();
    let src = clip(
        dir.path(),
        ClipSpec {
            seconds: 0.2,
            audio: false,
            pattern: Pattern::Solid([0x40, 0x90, 0x70]),
            ..ClipSpec::h264(640, 360)
        },
    );
    let png = fixtures::watermark_png(dir.path(), 200, 100, WM_RGBA).expect("png");
    let engine = cpu();
    let plain = dir.path().join("plain.mp4");
    render(
        &engine,
        &job(&src, &plain, Resolution::P720, OutputFormat::Mp4),
    );
    let base = &decode_frames(&plain, 1).expect("decode")[0];
    assert_eq!((base.width, base.height), (1280, 720));

    for position in [Position::TopLeft, Position::BottomRight, Position::Center] {
        let out = dir.path().join(format!("wm-{}.mp4", position.as_str()));
        let j = with_watermark(
            job(&src, &out, Resolution::P720, OutputFormat::Mp4),
            WatermarkSpec {
                image: png.clone(),
                position,
                opacity: OPACITY,
            },
        );
        render(&engine, &j);
        let f = &decode_frames(&out, 1).expect("decode")[0];
        let p = place_watermark(1280, 720, 200, 100, position).expect("placement");
        // Inside, away from the edges (codec ringing).
        let (ix, iy, iw, ih) = (
            p.x as usize + 8,
            p.y as usize + 8,
            p.width as usize - 16,
            p.height as usize - 16,
        );
        let bg = mean_yuv(base, ix, iy, iw, ih);
        let want = expected_inside(p, bg);
        let got = mean_yuv(f, ix, iy, iw, ih);
        for c in 0..3 {
            assert!(
                (got[c] - want[c]).abs() <= 3.0,
                "{position:?} plane {c}: got {got:?}, want {want:?} over {bg:?}"
            );
        }
        // The watermark is clearly visible (red over green-grey).
        assert!(
            got[2] - bg[2] > 20.0,
            "{position:?}: not visible: {got:?} vs {bg:?}"
        );
        // Outside the rectangle nothing changes: a band just right/below the rect and the
        // whole opposite half of the frame.
        let checks = [
            (
                (p.x + p.width + 8).min(1270) as usize,
                p.y as usize,
                8,
                p.height as usize,
            ),
            (
                p.x as usize,
                (p.y + p.height + 8).min(710) as usize,
                p.width as usize,
                8,
            ),
        ];
        for (x, y, w, h) in checks {
            if x + w <= 1280 && y + h <= 720 {
                let a = mean_yuv(base, x & !1, y & !1, w & !1, h & !1);
                let b = mean_yuv(f, x & !1, y & !1, w & !1, h & !1);
                for c in 0..3 {
                    assert!(
                        (a[c] - b[c]).abs() <= 1.5,
                        "{position:?} outside changed: {a:?} vs {b:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn preview_png_shows_the_composition() {
    let dir = tempdir();
    let src = clip(
        dir.path(),
        ClipSpec {
            seconds: 3.0,
            audio: false,
            pattern: Pattern::Solid([0x40, 0x90, 0x70]),
            ..ClipSpec::h264(640, 360)
        },
    );
    let png = fixtures::watermark_png(dir.path(), 200, 100, [255, 255, 255, 255]).expect("png");
    let engine = cpu();
    let j = with_watermark(
        job(
            &src,
            &dir.path().join("unused.mp4"),
            Resolution::P720,
            OutputFormat::Mp4,
        ),
        WatermarkSpec {
            image: png,
            position: Position::TopRight,
            opacity: 1.0,
        },
    );
    let out = dir.path().join("preview.png");
    let view = dir.path().join("view.png");
    let (w, h) = engine
        .render_preview(&j, &out, Some(&view))
        .expect("preview");
    assert_eq!((w, h), (1280, 720));
    let decoder = png::Decoder::new(std::fs::File::open(&out).expect("open png"));
    let mut reader = decoder.read_info().expect("png info");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("png frame");
    assert_eq!((info.width, info.height), (1280, 720));
    let px = |x: usize, y: usize| {
        let i = (y * 1280 + x) * 3;
        [buf[i], buf[i + 1], buf[i + 2]]
    };
    let p = place_watermark(1280, 720, 200, 100, Position::TopRight).expect("placement");
    let inside = px((p.x + p.width / 2) as usize, (p.y + p.height / 2) as usize);
    assert!(
        inside.iter().all(|&c| c >= 250),
        "watermark pixel {inside:?}"
    );
    let outside = px(100, 600);
    for (c, want) in outside.iter().zip([0x40u8, 0x90, 0x70]) {
        assert!(
            (*c as i32 - want as i32).abs() <= 3,
            "background pixel {outside:?}"
        );
    }
    // The view's copy: half the size (a chat view's 640 px), the watermark where it was.
    let decoder = png::Decoder::new(std::fs::File::open(&view).expect("open view png"));
    let mut reader = decoder.read_info().expect("png info");
    let mut small = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut small).expect("png frame");
    assert_eq!((info.width, info.height), (640, 360));
    let i = (((p.y + p.height / 2) / 2) as usize * 640 + ((p.x + p.width / 2) / 2) as usize) * 3;
    assert!(
        small[i..i + 3].iter().all(|&c| c >= 250),
        "{:?}",
        &small[i..i + 3]
    );
    // Nothing else was written (the clip, the logo, the preview and its view's copy).
    assert_eq!(
        leftovers(dir.path(), &[]).len(),
        4,
        "{:?}",
        leftovers(dir.path(), &[])
    );
}

#[test]
fn bad_watermarks_are_invalid_input() {
    let dir = tempdir();
    let src = clip(
        dir.path(),
        ClipSpec {
            seconds: 0.1,
            audio: false,
            ..ClipSpec::h264(320, 240)
        },
    );
    let engine = cpu();
    let out = dir.path().join("out.mp4");
    let not_png = fixtures::text_file(dir.path(), "png").expect("text");
    let good = fixtures::watermark_png(dir.path(), 20, 10, [1, 2, 3, 4]).expect("png");
    for (image, opacity) in [(not_png, 0.5), (good.clone(), 1.5), (good, f32::NAN)] {
        let j = with_watermark(
            job(&src, &out, Resolution::P720, OutputFormat::Mp4),
            WatermarkSpec {
                image: image.clone(),
                position: Position::Center,
                opacity,
            },
        );
        let err = engine
            .render(&j, &mut |_| {}, &std::sync::atomic::AtomicBool::new(false))
            .expect_err("bad watermark must fail");
        assert_eq!(err.kind(), vidforge_media::ErrorKind::InvalidInput, "{err}");
        assert!(!out.exists());
    }
    let missing = with_watermark(
        job(&src, &out, Resolution::P720, OutputFormat::Mp4),
        WatermarkSpec {
            image: dir.path().join("nope.png"),
            position: Position::Center,
            opacity: 0.5,
        },
    );
    let err = engine
        .render_preview(&missing, &dir.path().join("p.png"), None)
        .expect_err("missing watermark");
    assert_eq!(
        err.kind(),
        vidforge_media::ErrorKind::SourceNotFound,
        "{err}"
    );
}

#[test]
fn watermark_png_colour_types_decode() {
    let dir = tempdir();
    let p = fixtures::watermark_png(dir.path(), 3, 2, [10, 20, 30, 40]).expect("png");
    let img = vidforge_media::load_watermark_png(&p).expect("load");
    assert_eq!((img.width, img.height), (3, 2));
    assert_eq!(&img.rgba[..4], &[10, 20, 30, 40]);
    // Grey + 16-bit, written with the png crate: expanded to RGBA8.
    let path = dir.path().join("grey16.png");
    {
        let f = std::fs::File::create(&path).expect("create");
        let mut enc = png::Encoder::new(f, 2, 1);
        enc.set_color(png::ColorType::Grayscale);
        enc.set_depth(png::BitDepth::Sixteen);
        let mut w = enc.write_header().expect("header");
        w.write_image_data(&[0xff, 0xff, 0x80, 0x00]).expect("data");
    }
    let img = vidforge_media::load_watermark_png(&path).expect("load grey16");
    assert_eq!(img.rgba, vec![255, 255, 255, 255, 128, 128, 128, 255]);
}
