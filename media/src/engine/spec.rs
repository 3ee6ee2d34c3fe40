//! The compose spec of a job's source, built here once per render or preview: the output
//! size, the output's light ([`OutputLight`]: decided here, and nowhere else) and the
//! watermark prepared in that light.

use vidforge_gpu::OutputLight;

use crate::compose::ComposeSpec;
use crate::error::MediaError;
use crate::source::Source;
use crate::source::hdr::SourceColor;
use crate::types::{HdrPolicy, RenderJob, Resolution};
use crate::watermark;

/// Output size for a display size: fit inside the resolution's box (turned upright for
/// vertical video), aspect preserved, even dimensions. Small sources are enlarged.
pub fn output_size(display_width: u32, display_height: u32, resolution: Resolution) -> (u32, u32) {
    let (bw, bh) = resolution.box_size();
    let (bw, bh) = if display_height > display_width {
        (bh, bw)
    } else {
        (bw, bh)
    };
    let (dw, dh) = (display_width.max(1) as f64, display_height.max(1) as f64);
    let s = (bw as f64 / dw).min(bh as f64 / dh);
    let even = |v: f64, max: u32| (((v / 2.0).round() as u32) * 2).clamp(2, max);
    (even(dw * s, bw), even(dh * s, bh))
}

/// What the compositor makes of `src` for `job`. `video`: for the video itself, whose
/// HDR may be kept ([`HdrPolicy::Keep`]); previews (PNG) are always SDR.
pub(crate) fn compose_spec(
    job: &RenderJob,
    src: &Source,
    video: bool,
) -> Result<ComposeSpec, MediaError> {
    let (w, h) = output_size(
        src.video.display_width,
        src.video.display_height,
        job.resolution,
    );
    let light = output_light(&src.video.declared_color, job.hdr, video);
    let wm = match &job.watermark {
        Some(spec) => watermark::prepare(spec, w, h, &light)?,
        None => None,
    };
    Ok(ComposeSpec {
        out_width: w,
        out_height: h,
        rotation: src.video.rotation,
        watermark: wm,
        light,
    })
}

/// The output's light, decided here once for a render and carried unchanged to the
/// compositors, the watermark and the encoder: SDR sources stay SDR; HDR sources are kept HDR
/// when `policy` says so and `video` (previews are SDR PNGs), else tone-mapped.
fn output_light(declared: &SourceColor, policy: HdrPolicy, video: bool) -> OutputLight {
    match declared.tone_map() {
        None => OutputLight::Sdr,
        Some(tone) if video && policy == HdrPolicy::Keep => OutputLight::kept(&tone),
        Some(tone) => OutputLight::ToneMapped(tone),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_size_fits_the_box_and_keeps_orientation() {
        use Resolution::*;
        assert_eq!(output_size(1920, 1080, P720), (1280, 720));
        assert_eq!(output_size(3840, 2160, P1080), (1920, 1080));
        // Small sources are enlarged to the requested class.
        assert_eq!(output_size(640, 360, P4k), (3840, 2160));
        assert_eq!(output_size(320, 240, P1080), (1440, 1080));
        // Vertical stays vertical: the box turns with it.
        assert_eq!(output_size(1080, 1920, P720), (720, 1280));
        assert_eq!(output_size(1080, 1920, P4k), (2160, 3840));
        // Square uses the short side.
        assert_eq!(output_size(500, 500, P720), (720, 720));
        // Ultra-wide: width-bound, even height.
        let (w, h) = output_size(2560, 1080, P720);
        assert_eq!(w, 1280);
        assert_eq!(h % 2, 0);
        assert!((h as i32 - 540).abs() <= 2);
        // Odd sizes round to even and never exceed the box.
        for (sw, sh) in [(321, 241), (1, 1), (16384, 3), (3, 16384)] {
            let (w, h) = output_size(sw, sh, P720);
            assert_eq!((w % 2, h % 2), (0, 0));
            assert!(w >= 2 && h >= 2);
            assert!(w.max(h) <= 1280 && w.min(h) <= 720, "{sw}x{sh} -> {w}x{h}");
        }
    }

    #[test]
    fn the_light_is_kept_hdr_only_for_an_hdr_video_whose_policy_keeps_it() {
        use crate::source::hdr::DynamicRange;
        let color = |dynamic_range, transfer: &str| SourceColor {
            primaries: "bt2020".into(),
            transfer: transfer.into(),
            matrix: "bt2020nc".into(),
            range: "tv".into(),
            dynamic_range,
            mastering: None,
            content_light: None,
            dolby_vision: None,
        };
        let sdr = color(DynamicRange::Sdr, "bt709");
        let pq = color(DynamicRange::Pq, "smpte2084");
        let tone = pq.tone_map().expect("PQ tone-maps");
        for (policy, video) in [(HdrPolicy::Keep, true), (HdrPolicy::ToSdr, false)] {
            assert_eq!(output_light(&sdr, policy, video), OutputLight::Sdr);
        }
        assert_eq!(
            output_light(&pq, HdrPolicy::Keep, true),
            OutputLight::kept(&tone)
        );
        // Previews are SDR PNGs whatever the policy; `ToSdr` maps the video too.
        for (policy, video) in [(HdrPolicy::Keep, false), (HdrPolicy::ToSdr, true)] {
            assert_eq!(
                output_light(&pq, policy, video),
                OutputLight::ToneMapped(tone)
            );
        }
    }
}
