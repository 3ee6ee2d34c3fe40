//! Watermark PNGs: decoding to straight-alpha RGBA8 and preparing them for an output size.

use std::path::Path;

use vidforge_gpu::frame::prepare_watermark_hdr;
use vidforge_gpu::{
    ColorSpec, OutputLight, PreparedWatermark, WatermarkImage, place_watermark, prepare_watermark,
};

use crate::error::MediaError;
use crate::types::WatermarkSpec;

/// Largest watermark side accepted (it is resampled to at most half the frame anyway).
const MAX_WATERMARK_SIDE: u32 = 8192;

/// Decodes a PNG (any colour type and bit depth; palette, grey and 16-bit are expanded) to
/// straight-alpha RGBA8.
pub fn load_watermark_png(path: &Path) -> Result<WatermarkImage, MediaError> {
    crate::source::check_readable("watermark image", path)?;
    let bad = |what: String| MediaError::invalid(format!("watermark {}: {what}", path.display()));
    let file =
        std::fs::File::open(path).map_err(|e| MediaError::not_found("watermark image", path, e))?;
    let mut decoder = png::Decoder::new(std::io::BufReader::new(file));
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder
        .read_info()
        .map_err(|e| bad(format!("not a valid PNG ({e})")))?;
    let (w, h) = {
        let info = reader.info();
        (info.width, info.height)
    };
    if w == 0 || h == 0 || w > MAX_WATERMARK_SIDE || h > MAX_WATERMARK_SIDE {
        return Err(bad(format!(
            "{w}x{h} is outside the supported 1..={MAX_WATERMARK_SIDE} pixels per side"
        )));
    }
    // Fallible allocations: a picture too large for this process's memory is a clean error,
    // never an abort.
    let mut buf = zeroed_buffer(reader.output_buffer_size())
        .map_err(|_| bad(format!("{w}x{h} does not fit in memory")))?;
    let frame = reader
        .next_frame(&mut buf)
        .map_err(|e| bad(format!("corrupt PNG data ({e})")))?;
    let (color, depth) = (frame.color_type, frame.bit_depth);
    if depth != png::BitDepth::Eight {
        return Err(bad(format!(
            "unexpected bit depth {depth:?} after expansion"
        )));
    }
    let pixels = (w * h) as usize;
    let line = frame.line_size;
    let mut rgba = Vec::new();
    rgba.try_reserve_exact(pixels * 4)
        .map_err(|_| bad(format!("{w}x{h} does not fit in memory")))?;
    let channels = match color {
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        png::ColorType::Indexed => return Err(bad("palette was not expanded".into())),
    };
    for row in 0..h as usize {
        let src = buf
            .get(row * line..row * line + w as usize * channels)
            .ok_or_else(|| bad("truncated PNG rows".into()))?;
        for px in src.chunks_exact(channels) {
            let p = match channels {
                1 => [px[0], px[0], px[0], 255],
                2 => [px[0], px[0], px[0], px[1]],
                3 => [px[0], px[1], px[2], 255],
                _ => [px[0], px[1], px[2], px[3]],
            };
            rgba.extend_from_slice(&p);
        }
    }
    Ok(WatermarkImage {
        width: w,
        height: h,
        rgba,
    })
}

/// A zero-filled buffer of `len` bytes, or an error when the allocation fails.
pub(crate) fn zeroed_buffer(len: usize) -> Result<Vec<u8>, std::collections::TryReserveError> {
    let mut buf = Vec::new();
    buf.try_reserve_exact(len)?;
    buf.resize(len, 0);
    Ok(buf)
}

/// Checks the opacity is a number in 0..=1.
pub(crate) fn check_opacity(opacity: f32) -> Result<(), MediaError> {
    if !opacity.is_finite() || !(0.0..=1.0).contains(&opacity) {
        return Err(MediaError::invalid(format!(
            "watermark opacity {opacity} is outside 0..=1"
        )));
    }
    Ok(())
}

/// Loads, places and prepares the watermark for an `out_w x out_h` output. `None` when the
/// watermark would be empty at this size.
/// In the output's `light`: HDR kept (10-bit values in its signal), else SDR BT.709.
pub(crate) fn prepare(
    spec: &WatermarkSpec,
    out_w: u32,
    out_h: u32,
    light: &OutputLight,
) -> Result<Option<PreparedWatermark>, MediaError> {
    check_opacity(spec.opacity)?;
    let img = load_watermark_png(&spec.image)?;
    Ok(
        place_watermark(out_w, out_h, img.width, img.height, spec.position).map(|placement| {
            match light.kept_signal() {
                Some(signal) => prepare_watermark_hdr(&img, placement, spec.opacity, signal),
                None => prepare_watermark(&img, placement, spec.opacity, ColorSpec::OUTPUT),
            }
        }),
    )
}
