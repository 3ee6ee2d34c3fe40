//! Which 2D copies move a decoded CUDA frame into a compositor input: per memory plane the
//! source pitch, where it lands, its row bytes and rows. Pure arithmetic over the frame's
//! shape and the compositor's [`InputLayout`], checked so a copy never writes outside the
//! input or reads a row shorter than it copies.

use ffmpeg::format::Pixel;
use ffmpeg_next as ffmpeg;
use vidforge_gpu::{InputLayout, SourceFormat};

/// The compositor's layout for a CUDA frame's software format: NV12 and P010 are what NVDEC
/// hands over and what the compositor reads as is.
pub(crate) fn source_format(sw_format: Pixel) -> Option<SourceFormat> {
    match sw_format {
        Pixel::NV12 => Some(SourceFormat::Nv12),
        Pixel::P010LE => Some(SourceFormat::P010),
        _ => None,
    }
}

/// A decoded frame's planes in device memory: per plane its device address and pitch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DeviceFrame {
    pub format: SourceFormat,
    pub width: u32,
    pub height: u32,
    /// (device address, bytes from one row to the next), luma then interleaved chroma.
    pub planes: [(u64, usize); 2],
}

/// One plane's 2D copy, device to device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PlaneCopy {
    pub src: u64,
    pub src_pitch: usize,
    /// Byte offset in the input buffer.
    pub dst_offset: u64,
    pub dst_pitch: usize,
    pub row_bytes: usize,
    pub rows: usize,
}

/// The copies that put `frame` where `layout` wants it, or why it cannot go there (another
/// format or size than the compositor was built for, rows shorter than they must be, a
/// layout that does not fit its buffer).
pub(crate) fn plane_copies(
    frame: &DeviceFrame,
    layout: &InputLayout,
) -> Result<[PlaneCopy; 2], String> {
    if frame.format != layout.format || (frame.width, frame.height) != (layout.width, layout.height)
    {
        return Err(format!(
            "a {}x{} {} frame for a compositor of {}x{} {}",
            frame.width,
            frame.height,
            frame.format.as_str(),
            layout.width,
            layout.height,
            layout.format.as_str()
        ));
    }
    if layout.planes.len() != 2 {
        return Err(format!(
            "{} has {} planes, not 2",
            layout.format.as_str(),
            layout.planes.len()
        ));
    }
    let mut copies = [PlaneCopy {
        src: 0,
        src_pitch: 0,
        dst_offset: 0,
        dst_pitch: 0,
        row_bytes: 0,
        rows: 0,
    }; 2];
    for (i, (copy, plane)) in copies.iter_mut().zip(&layout.planes).enumerate() {
        let (row, rows) = frame.format.plane_shape(i, frame.width, frame.height);
        let (src, src_pitch) = frame.planes[i];
        if (row as u64, rows as u64) != (plane.row_bytes, plane.rows) {
            return Err(format!(
                "plane {i}: {rows} rows of {row} bytes, the input has {} of {}",
                plane.rows, plane.row_bytes
            ));
        }
        if src == 0 || src_pitch < row {
            return Err(format!(
                "plane {i}: source at {src:#x} with a {src_pitch}-byte pitch for {row}-byte rows"
            ));
        }
        let end = plane.pitch * (plane.rows.saturating_sub(1)) + plane.row_bytes;
        if plane.pitch < plane.row_bytes || plane.offset.saturating_add(end) > layout.size {
            return Err(format!(
                "plane {i}: the input's pitch {} at {} overruns its {} bytes",
                plane.pitch, plane.offset, layout.size
            ));
        }
        *copy = PlaneCopy {
            src,
            src_pitch,
            dst_offset: plane.offset,
            dst_pitch: plane.pitch as usize,
            row_bytes: row,
            rows,
        };
    }
    Ok(copies)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vidforge_gpu::InputPlane;

    /// The layout the compositor makes (512-byte pitches and plane offsets).
    fn layout(format: SourceFormat, w: u32, h: u32) -> InputLayout {
        let mut planes = Vec::new();
        let mut end = 0u64;
        for i in 0..2 {
            let (row, rows) = format.plane_shape(i, w, h);
            let offset = end.next_multiple_of(512);
            let pitch = (row as u64).next_multiple_of(512);
            planes.push(InputPlane {
                offset,
                row_bytes: row as u64,
                rows: rows as u64,
                pitch,
            });
            end = offset + pitch * rows as u64;
        }
        InputLayout {
            format,
            width: w,
            height: h,
            planes,
            size: end + 32,
        }
    }

    fn frame(format: SourceFormat, w: u32, h: u32, pitch: usize) -> DeviceFrame {
        DeviceFrame {
            format,
            width: w,
            height: h,
            planes: [(0x7000_0000, pitch), (0x7800_0000, pitch)],
        }
    }

    #[test]
    fn nv12_1080p_copies_both_planes_at_the_input_pitch() {
        let l = layout(SourceFormat::Nv12, 1920, 1080);
        let c = plane_copies(&frame(SourceFormat::Nv12, 1920, 1080, 2048), &l).unwrap();
        assert_eq!((c[0].row_bytes, c[0].rows), (1920, 1080));
        assert_eq!((c[1].row_bytes, c[1].rows), (1920, 540));
        assert_eq!((c[0].src_pitch, c[0].dst_pitch), (2048, 2048));
        assert_eq!(c[0].dst_offset, 0);
        assert_eq!(c[1].dst_offset, 2048 * 1080);
        assert_eq!((c[0].src, c[1].src), (0x7000_0000, 0x7800_0000));
    }

    #[test]
    fn p010_rows_are_two_bytes_a_sample_and_odd_sizes_round_chroma_up() {
        let l = layout(SourceFormat::P010, 1918, 1079);
        let c = plane_copies(&frame(SourceFormat::P010, 1918, 1079, 4096), &l).unwrap();
        assert_eq!((c[0].row_bytes, c[0].rows), (3836, 1079));
        // 959 chroma positions of U and V, 2 bytes each; 540 rows.
        assert_eq!((c[1].row_bytes, c[1].rows), (3836, 540));
        assert_eq!(c[0].dst_pitch, 4096);
        assert_eq!(c[1].dst_offset, 4096 * 1079);
    }

    #[test]
    fn mismatches_are_refused_with_a_reason() {
        let l = layout(SourceFormat::Nv12, 640, 360);
        let wrong_format = plane_copies(&frame(SourceFormat::P010, 640, 360, 1536), &l);
        assert!(wrong_format.unwrap_err().contains("p010"));
        let wrong_size = plane_copies(&frame(SourceFormat::Nv12, 640, 352, 1024), &l);
        assert!(wrong_size.unwrap_err().contains("640x352"));
        let short_rows = plane_copies(&frame(SourceFormat::Nv12, 640, 360, 600), &l);
        assert!(short_rows.unwrap_err().contains("600-byte pitch"));
        let mut null = frame(SourceFormat::Nv12, 640, 360, 1024);
        null.planes[1].0 = 0;
        assert!(plane_copies(&null, &l).is_err());
        let mut small = l.clone();
        small.size = 1024 * 360;
        assert!(
            plane_copies(&frame(SourceFormat::Nv12, 640, 360, 1024), &small)
                .unwrap_err()
                .contains("overruns")
        );
    }

    #[test]
    fn only_nvdec_layouts_go_zero_copy() {
        assert_eq!(source_format(Pixel::NV12), Some(SourceFormat::Nv12));
        assert_eq!(source_format(Pixel::P010LE), Some(SourceFormat::P010));
        assert_eq!(source_format(Pixel::YUV444P), None);
        assert_eq!(source_format(Pixel::P016LE), None);
    }
}
