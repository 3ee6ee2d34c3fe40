//! Previews: one representative frame, composed as renders compose it (always SDR), as a PNG
//! at output size, and optionally a copy sized for a chat view (at most [`VIEW_PREVIEW_MAX`]
//! on each side), small enough to travel inline.

use std::path::Path;
use std::time::{Duration, Instant};

use ffmpeg::ffi;
use ffmpeg::format::Pixel;
use ffmpeg::frame;
use ffmpeg_next as ffmpeg;
use vidforge_gpu::Yuv420Frame;

use super::Engine;
use super::spec::compose_spec;
use crate::error::MediaError;
use crate::pipeline::FrameReader;
use crate::scale::{Sws, SwsKey};
use crate::source::{self, Source};
use crate::tempout::TempOutput;
use crate::types::RenderJob;
use crate::watermark;

/// The largest side of the view-sized preview: a 4k frame's copy is 640x360, about a
/// megabyte of RGB at most (what a chat view shows, never more).
pub(crate) const VIEW_PREVIEW_MAX: u32 = 640;

/// `(w, h)` scaled down (never up) to fit [`VIEW_PREVIEW_MAX`] on each side, keeping the
/// aspect ratio; even sides of at least 2.
pub(crate) fn view_preview_size(w: u32, h: u32) -> (u32, u32) {
    let longest = w.max(h).max(1);
    if longest <= VIEW_PREVIEW_MAX {
        return (w, h);
    }
    let scale = |side: u32| {
        let s = (u64::from(side) * u64::from(VIEW_PREVIEW_MAX) / u64::from(longest)) as u32;
        (s & !1).max(2)
    };
    (scale(w), scale(h))
}

impl Engine {
    /// Writes a PNG of one representative frame (about a third into the video) at output
    /// size with the watermark applied, through the same compositor as renders, and, given
    /// `view_out`, the same frame sized for a chat view (at most 640 px a side). Returns the
    /// full PNG's size.
    pub fn render_preview(
        &self,
        job: &RenderJob,
        png_out: &Path,
        view_out: Option<&Path>,
    ) -> Result<(u32, u32), MediaError> {
        if let Some(wm) = &job.watermark {
            watermark::check_opacity(wm.opacity)?;
        }
        let t0 = Instant::now();
        let tmp = TempOutput::new(png_out)?;
        let view_tmp = view_out.map(TempOutput::new).transpose()?;
        let src = source::open(&job.input)?;
        let spec = compose_spec(job, &src, false)?;
        let t_open = t0.elapsed();
        let frame = preview_frame(src, &job.input)?;
        let t_decode = t0.elapsed();
        let out = self.compositor(spec).compose_single(&frame)?;
        let t_compose = t0.elapsed();
        write_png(&out, tmp.path(), (out.width, out.height))?;
        if let Some(view) = &view_tmp {
            write_png(&out, view.path(), view_preview_size(out.width, out.height))?;
        }
        tmp.commit()?;
        if let Some(view) = view_tmp {
            view.commit()?;
        }
        let ms = |d: Duration| format!("{:.1}", d.as_secs_f64() * 1e3);
        tracing::debug!(
            open_ms = ms(t_open),
            decode_ms = ms(t_decode - t_open),
            compose_ms = ms(t_compose - t_decode),
            png_ms = ms(t0.elapsed() - t_compose),
            "preview written"
        );
        Ok((out.width, out.height))
    }
}

/// The preview's frame: the keyframe at or before a third into the video, else the first
/// frame. One seek and the pictures up to that keyframe's (the decoder's own delay), never
/// a decode forward through the GOP: the person waits for this, and a watermark's placement
/// shows on any frame.
fn preview_frame(src: Source, path: &Path) -> Result<frame::Video, MediaError> {
    let duration = src.duration_seconds;
    let start_us = src.start_time_us;
    let decoder = src.video_decoder()?;
    let mut reader = FrameReader::new(src, decoder, false);
    if duration > 0.5 {
        let ts_us = start_us + (duration / 3.0 * ffi::AV_TIME_BASE as f64) as i64;
        if reader.input_mut().seek(ts_us, ..ts_us).is_ok() {
            reader.reset_after_seek();
            if let Ok(Some(f)) = reader.next_video() {
                return Ok(f);
            }
        }
        // The seek went nowhere useful: start over from the beginning.
        let src = source::open(path)?;
        let decoder = src.video_decoder()?;
        reader = FrameReader::new(src, decoder, false);
    }
    reader
        .next_video()?
        .ok_or_else(|| MediaError::invalid(format!("{} has no decodable frame", path.display())))
}

/// BT.709 limited yuv420p -> RGB24 PNG of `(w, h)` (area-averaged when smaller).
fn write_png(img: &Yuv420Frame, path: &Path, (w, h): (u32, u32)) -> Result<(), MediaError> {
    let filter = if (w, h) == (img.width, img.height) {
        ffi::SWS_BICUBIC
    } else {
        ffi::SWS_AREA
    };
    let key = SwsKey {
        src_fmt: Pixel::YUV420P,
        src_w: img.width,
        src_h: img.height,
        dst_fmt: Pixel::RGB24,
        dst_w: w,
        dst_h: h,
        flags: filter | ffi::SWS_FULL_CHR_H_INT | ffi::SWS_ACCURATE_RND,
        src_space: ffi::SWS_CS_ITU709,
        src_full: false,
        dst_space: ffi::SWS_CS_ITU709,
        dst_full: true,
    };
    let mut sws = Sws::new(key)?;
    let stride = w as usize * 3;
    let mut rgb = vec![0u8; stride * h as usize];
    sws.yuv420_to_packed(img, &mut rgb, stride)?;
    let io = |e: &dyn std::fmt::Display| {
        MediaError::failed(format!("writing preview PNG {}: {e}", path.display()))
    };
    let file = std::fs::File::create(path).map_err(|e| io(&e))?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), w, h);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    // Written once and shown at once: speed over the last few percent of size.
    enc.set_compression(png::Compression::Fast);
    let mut writer = enc.write_header().map_err(|e| io(&e))?;
    writer.write_image_data(&rgb).map_err(|e| io(&e))?;
    writer.finish().map_err(|e| io(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn view_previews_fit_a_chat_view_and_keep_the_aspect() {
        assert_eq!(view_preview_size(3840, 2160), (640, 360));
        assert_eq!(view_preview_size(1080, 1920), (360, 640));
        assert_eq!(view_preview_size(640, 480), (640, 480));
        assert_eq!(view_preview_size(4096, 16), (640, 2));
    }
}
