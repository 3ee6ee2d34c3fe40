//! The start-up self-test of the zero-copy path, run once per process by
//! [`zero_copy_probe`](super::zero_copy_probe): a known frame is put in CUDA device memory
//! with a decoder-like pitch, copied by the render's own code ([`ZeroCopyInput::submit`])
//! into a compositor's exported input, composed, read back, and compared with the same frame
//! uploaded the ordinary way. NV12 and P010 (what NVDEC hands over), at a size whose rows are
//! not multiples of any pitch. Any difference, or any failing call, makes the path
//! unavailable.

use vidforge_gpu::{
    ColorSpec, ComposeConfig, GpuCompositor, OutputLight, Rotation, SemiPlanarFrame, SourceFormat,
    Yuv420Frame,
};

use super::layout::DeviceFrame;
use super::{ZeroCopyInput, ZeroCopyPath};
use crate::error::MediaError;

/// The test frame's size and the output's: odd rows for every format, a real downscale.
const SOURCE: (u32, u32) = (322, 182);
const OUTPUT: (u32, u32) = (160, 90);
/// The source pitch alignment FFmpeg's CUDA frames use.
const SOURCE_ALIGN: usize = 256;

/// Runs the self-test for each format NVDEC hands over.
pub(super) fn run(path: &ZeroCopyPath) -> Result<(), String> {
    for format in [SourceFormat::Nv12, SourceFormat::P010] {
        one(path, format).map_err(|e| format!("self-test ({}): {e}", format.as_str()))?;
    }
    Ok(())
}

/// A frame where every row and column differs from its neighbours, so a wrong pitch, offset
/// or plane shows in the composed output.
fn pattern() -> Yuv420Frame {
    let (w, h) = SOURCE;
    let mut f = Yuv420Frame::filled(w, h, [0, 0, 0]);
    let (cw, ch) = Yuv420Frame::chroma_size(w, h);
    for y in 0..h {
        for x in 0..w {
            f.y[(y * w + x) as usize] = (16 + (x * 3 + y * 5) % 220) as u8;
        }
    }
    for y in 0..ch {
        for x in 0..cw {
            f.u[(y * cw + x) as usize] = (16 + (x * 7 + y) % 225) as u8;
            f.v[(y * cw + x) as usize] = (16 + (x + y * 11) % 225) as u8;
        }
    }
    f
}

/// `plane` (rows of `row` bytes) with each row at a multiple of `pitch`.
fn pitched(plane: &[u8], row: usize, pitch: usize) -> Vec<u8> {
    let rows = plane.len() / row;
    let mut out = vec![0x5A; pitch * rows];
    for (r, chunk) in plane.chunks(row).enumerate() {
        out[r * pitch..r * pitch + row].copy_from_slice(chunk);
    }
    out
}

fn one(path: &ZeroCopyPath, format: SourceFormat) -> Result<(), String> {
    let (w, h) = SOURCE;
    let cfg = ComposeConfig {
        src_width: w,
        src_height: h,
        src_color: ColorSpec::OUTPUT,
        rotation: Rotation::None,
        out_width: OUTPUT.0,
        out_height: OUTPUT.1,
        watermark: None,
        src_format: format,
        light: OutputLight::Sdr,
    };
    let frame = SemiPlanarFrame::from_yuv420(&pattern(), format, 1);
    let want = GpuCompositor::new(path.gpu(), cfg.clone(), 1)
        .and_then(|mut gpu| gpu.compose_one(&frame))
        .map_err(|e| format!("the upload path: {e}"))?;

    let mut gpu = GpuCompositor::with_external_input(path.gpu(), cfg, 1)
        .map_err(|e| format!("a compositor with external input: {e}"))?;
    let input = ZeroCopyInput::new(path, &mut gpu).map_err(|e| e.to_string())?;
    let rows = [0, 1].map(|i| format.plane_shape(i, w, h).0);
    let pitch = rows[0].max(rows[1]).next_multiple_of(SOURCE_ALIGN) + SOURCE_ALIGN;
    let luma = path.cuda.upload(&pitched(&frame.y, rows[0], pitch))?;
    let chroma = path.cuda.upload(&pitched(&frame.uv, rows[1], pitch))?;
    let source = DeviceFrame {
        format,
        width: w,
        height: h,
        planes: [(luma.ptr, pitch), (chroma.ptr, pitch)],
    };
    let copies = input
        .copies(&source)
        .map_err(|e| MediaError::failed(e).to_string())?;
    let mut got: Vec<Yuv420Frame> = input
        .submit(&mut gpu, &copies)
        .map_err(|e| e.to_string())?
        .into_iter()
        .collect();
    got.extend(gpu.finish().map_err(|e| e.to_string())?);
    match got.as_slice() {
        [one] if *one == want => Ok(()),
        [one] => {
            let differ = [(&one.y, &want.y), (&one.u, &want.u), (&one.v, &want.v)]
                .iter()
                .map(|(a, b)| a.iter().zip(b.iter()).filter(|(x, y)| x != y).count())
                .sum::<usize>();
            Err(format!(
                "the frame copied through CUDA composes differently from the uploaded one \
                 ({differ} of {} samples differ)",
                want.byte_len()
            ))
        }
        frames => Err(format!("{} frames came back for one", frames.len())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pattern_tells_rows_columns_and_planes_apart() {
        let f = pattern();
        let (w, _) = SOURCE;
        let w = w as usize;
        assert_ne!(f.y[..w], f.y[w..2 * w], "neighbouring rows differ");
        assert_ne!(f.y[0], f.y[1]);
        assert_ne!(f.u, f.v);
        assert!(f.y.iter().all(|&v| (16..=235).contains(&v)));
    }

    #[test]
    fn pitched_rows_keep_their_bytes_and_pad_the_rest() {
        let plane: Vec<u8> = (0..12).collect();
        let p = pitched(&plane, 4, 8);
        assert_eq!(p.len(), 24);
        assert_eq!(&p[..4], &[0, 1, 2, 3]);
        assert_eq!(&p[8..12], &[4, 5, 6, 7]);
        assert_eq!(&p[4..8], &[0x5A; 4]);
    }
}
