//! Where the planes sit in the device buffers: the source planes packed back to back (bytes),
//! the output planes in padded rows of whole words, and how display-space addressing walks a
//! rotated source plane.

use crate::frame::{Rotation, SampleDepth, SourceFormat, Yuv420Frame};

/// Must match `MAX_ROW_WORDS` in compose.wgsl.
pub(super) const MAX_ROW_WORDS: u32 = 8;

/// One memory plane of the source in the device input buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct PlaneSpan {
    /// Byte offset of its first row.
    pub(super) offset: u64,
    /// Bytes of one row's samples.
    pub(super) row: usize,
    pub(super) rows: usize,
    /// Bytes from one row's start to the next (`row` when tightly packed).
    pub(super) pitch: usize,
}

/// Where one display plane's samples are: the byte of sample (0, 0) of the coded plane, the
/// bytes between horizontally adjacent samples, and the bytes between rows.
#[derive(Clone, Copy, Debug)]
pub(super) struct PlaneBytes {
    pub(super) base: u64,
    pub(super) step: u64,
    pub(super) stride: u64,
}

/// The source planes back to back in one storage buffer (the shader addresses bytes): rows
/// tightly packed for uploads, or, for input written by another API, every row and plane
/// starting at a multiple of a pitch alignment.
#[derive(Clone, Copy, Debug)]
pub(super) struct InLayout {
    pub(super) format: SourceFormat,
    pub(super) luma: (u32, u32),
    pub(super) chroma: (u32, u32),
    /// Per memory plane (unused planes: zeros).
    pub(super) planes: [PlaneSpan; 3],
    pub(super) size: u64,
}

impl InLayout {
    /// Rows and planes aligned to `align` bytes (1: tightly packed).
    pub(super) fn new(w: u32, h: u32, format: SourceFormat, align: usize) -> Self {
        let align = align.max(1);
        let mut planes = [PlaneSpan::default(); 3];
        let mut end = 0u64;
        for (i, plane) in planes.iter_mut().enumerate().take(format.plane_count()) {
            let (row, rows) = format.plane_shape(i, w, h);
            let offset = end.next_multiple_of(align as u64);
            let pitch = row.next_multiple_of(align);
            *plane = PlaneSpan {
                offset,
                row,
                rows,
                pitch,
            };
            end = offset + pitch as u64 * rows as u64;
        }
        Self {
            format,
            luma: (w, h),
            chroma: Yuv420Frame::chroma_size(w, h),
            planes,
            // Copies move whole words; the shader's row loads may read a few words past the
            // last plane (unused bytes), so keep them inside the buffer.
            size: (end.div_ceil(4) + MAX_ROW_WORDS as u64) * 4,
        }
    }

    pub(super) fn plane_dims(&self, plane: usize) -> (u32, u32) {
        if plane == 0 { self.luma } else { self.chroma }
    }

    /// Display plane `plane` (Y, U, V) in the buffer: U and V interleave in the semi-planar
    /// formats (V one sample after U).
    pub(super) fn plane_bytes(&self, plane: usize) -> PlaneBytes {
        let sb = self.format.sample_bytes() as u64;
        let at = |i: usize, first: u64, step: u64| PlaneBytes {
            base: self.planes[i].offset + first,
            step,
            stride: self.planes[i].pitch as u64,
        };
        match (self.format, plane) {
            (_, 0) => at(0, 0, sb),
            (SourceFormat::Yuv420p, i) => at(i, 0, 1),
            (_, i) => at(1, (i as u64 - 1) * sb, 2 * sb),
        }
    }

    /// Bytes of the source planes proper (no row padding, no slack words).
    pub(super) fn source_bytes(&self) -> u64 {
        self.planes
            .iter()
            .map(|p| p.row as u64 * p.rows as u64)
            .sum()
    }
}

/// Word layout of the output planes: each row padded to whole u32 words, so one invocation
/// owns its words (one for four 8-bit samples, two for four 16-bit ones); two scratch words
/// after the frame absorb the stores of idle invocations.
#[derive(Clone, Copy, Debug)]
pub(super) struct OutLayout {
    pub(super) depth: SampleDepth,
    pub(super) dims: [(u32, u32); 3],
    /// Invocations per row: one per four samples.
    pub(super) row_quads: [u32; 3],
    pub(super) row_words: [u32; 3],
    pub(super) word_starts: [u64; 3],
    pub(super) scratch_word: u64,
    pub(super) size: u64,
}

impl OutLayout {
    pub(super) fn new(w: u32, h: u32, depth: SampleDepth) -> Self {
        let (cw, ch) = Yuv420Frame::chroma_size(w, h);
        let dims = [(w, h), (cw, ch), (cw, ch)];
        let row_quads = dims.map(|(w, _)| w.div_ceil(4));
        let row_words = row_quads.map(|q| q * depth.bytes() as u32);
        let words = [0, 1, 2].map(|i| row_words[i] as u64 * dims[i].1 as u64);
        let scratch_word = words.iter().sum::<u64>();
        Self {
            depth,
            dims,
            row_quads,
            row_words,
            word_starts: [0, words[0], words[0] + words[1]],
            scratch_word,
            size: (scratch_word + 2) * 4,
        }
    }

    /// Copies plane `i` out of a mapped readback buffer, dropping the row padding.
    pub(super) fn extract(&self, bytes: &[u8], i: usize) -> Vec<u8> {
        let (w, h) = (self.dims[i].0 as usize, self.dims[i].1 as usize);
        let row = w * self.depth.bytes();
        let stride = self.row_words[i] as usize * 4;
        let start = self.word_starts[i] as usize * 4;
        if stride == row {
            return bytes[start..start + row * h].to_vec();
        }
        let mut out = Vec::with_capacity(row * h);
        for r in 0..h {
            out.extend_from_slice(&bytes[start + r * stride..][..row]);
        }
        out
    }
}

/// Display-space addressing of a `w x h` coded plane laid out as `b`: the byte of display
/// sample (0, 0), and the byte steps for +1 display column and +1 display row.
pub(super) fn plane_addressing(
    rotation: Rotation,
    b: PlaneBytes,
    w: i64,
    h: i64,
) -> (i64, i64, i64) {
    let (base, s, r) = (b.base as i64, b.step as i64, b.stride as i64);
    match rotation {
        // Display (dx, dy) shows coded (dx, dy).
        Rotation::None => (base, s, r),
        // Turned clockwise: display (dx, dy) shows coded (dy, h - 1 - dx).
        Rotation::Cw90 => (base + (h - 1) * r, -r, s),
        Rotation::Cw180 => (base + (h - 1) * r + (w - 1) * s, -s, -r),
        // Display (dx, dy) shows coded (w - 1 - dy, dx).
        Rotation::Cw270 => (base + (w - 1) * s, r, -s),
    }
}
