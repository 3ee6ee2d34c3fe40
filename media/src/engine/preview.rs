//! Previews: one representative frame, composed as renders compose it (always SDR), as a PNG.

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

impl Engine {
    /// Writes a PNG of one representative frame (about a third into the video) at output
    /// size with the watermark applied, through the same compositor as renders. Returns the
    /// PNG's size.
    pub fn render_preview(
        &self,
        job: &RenderJob,
        png_out: &Path,
    ) -> Result<(u32, u32), MediaError> {
        if let Some(wm) = &job.watermark {
            watermark::check_opacity(wm.opacity)?;
        }
        let t0 = Instant::now();
        let tmp = TempOutput::new(png_out)?;
        let src = source::open(&job.input)?;
        let spec = compose_spec(job, &src, false)?;
        let t_open = t0.elapsed();
        let frame = preview_frame(src, &job.input)?;
        let t_decode = t0.elapsed();
        let out = self.compositor(spec).compose_single(&frame)?;
        let t_compose = t0.elapsed();
        write_png(&out, tmp.path())?;
        tmp.commit()?;
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

/// BT.709 limited yuv420p -> RGB24 PNG.
fn write_png(img: &Yuv420Frame, path: &Path) -> Result<(), MediaError> {
    let (w, h) = (img.width, img.height);
    let key = SwsKey {
        src_fmt: Pixel::YUV420P,
        src_w: w,
        src_h: h,
        dst_fmt: Pixel::RGB24,
        dst_w: w,
        dst_h: h,
        flags: ffi::SWS_BICUBIC | ffi::SWS_FULL_CHR_H_INT | ffi::SWS_ACCURATE_RND,
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
