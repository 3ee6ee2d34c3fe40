//! The frame types: a planar frame ([`Yuv420Frame`], 8-bit or 10-bit, what every compositor returns), the
//! memory layouts decoders hand over ([`SourceFormat`]), a borrowed view of any of them
//! ([`SourceFrame`]) and an owned semi-planar frame ([`SemiPlanarFrame`]).

/// Bits per sample of a [`Yuv420Frame`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SampleDepth {
    /// One byte per sample (`yuv420p`): every SDR output.
    #[default]
    Eight,
    /// Two bytes per sample, little-endian, the value in the low 10 bits (`yuv420p10le`):
    /// HDR output.
    Ten,
}

impl SampleDepth {
    /// Bytes per sample.
    pub fn bytes(self) -> usize {
        match self {
            SampleDepth::Eight => 1,
            SampleDepth::Ten => 2,
        }
    }

    /// Bits per sample value.
    pub fn bits(self) -> u32 {
        match self {
            SampleDepth::Eight => 8,
            SampleDepth::Ten => 10,
        }
    }

    /// The largest code value.
    pub fn max_code(self) -> u16 {
        match self {
            SampleDepth::Eight => 255,
            SampleDepth::Ten => 1023,
        }
    }
}

/// A planar 4:2:0 frame, tightly packed (a plane's row is its width in samples), 8-bit or,
/// for HDR output, 10-bit in little-endian 16-bit samples (`depth`).
///
/// Chroma planes are `ceil(width/2) x ceil(height/2)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Yuv420Frame {
    pub width: u32,
    pub height: u32,
    pub y: Vec<u8>,
    pub u: Vec<u8>,
    pub v: Vec<u8>,
    pub depth: SampleDepth,
}

impl Yuv420Frame {
    /// An 8-bit frame from its three planes.
    pub fn from_planes(width: u32, height: u32, y: Vec<u8>, u: Vec<u8>, v: Vec<u8>) -> Self {
        Yuv420Frame {
            width,
            height,
            y,
            u,
            v,
            depth: SampleDepth::Eight,
        }
    }

    /// A zeroed frame of this size and depth.
    pub fn blank(width: u32, height: u32, depth: SampleDepth) -> Self {
        let (cw, ch) = Self::chroma_size(width, height);
        let b = depth.bytes();
        Yuv420Frame {
            width,
            height,
            y: vec![0; width as usize * height as usize * b],
            u: vec![0; cw as usize * ch as usize * b],
            v: vec![0; cw as usize * ch as usize * b],
            depth,
        }
    }

    /// Sample `i` of a 10-bit plane (`depth` [`SampleDepth::Ten`]).
    #[inline]
    pub fn sample16(plane: &[u8], i: usize) -> u16 {
        u16::from_le_bytes([plane[2 * i], plane[2 * i + 1]])
    }

    /// Sets sample `i` of a 10-bit plane.
    #[inline]
    pub fn set_sample16(plane: &mut [u8], i: usize, value: u16) {
        plane[2 * i..2 * i + 2].copy_from_slice(&value.to_le_bytes());
    }

    /// Chroma plane size for a luma size.
    pub fn chroma_size(width: u32, height: u32) -> (u32, u32) {
        (width.div_ceil(2), height.div_ceil(2))
    }

    /// A frame filled with one colour given as Y, U, V code values.
    pub fn filled(width: u32, height: u32, yuv: [u8; 3]) -> Self {
        let (cw, ch) = Self::chroma_size(width, height);
        Self {
            width,
            height,
            y: vec![yuv[0]; (width * height) as usize],
            u: vec![yuv[1]; (cw * ch) as usize],
            v: vec![yuv[2]; (cw * ch) as usize],
            depth: SampleDepth::Eight,
        }
    }

    /// Total bytes of the three planes.
    pub fn byte_len(&self) -> usize {
        self.y.len() + self.u.len() + self.v.len()
    }
}

/// How a source frame's planes are laid out in memory: what decoders hand over. Software
/// decoders mostly give planar `Yuv420p`; NVDEC (and many hardware decoders) give `Nv12`
/// (8-bit luma plane + one interleaved U/V plane) or `P010` for 10-bit video (the same
/// layout with 16-bit little-endian samples, the value in the high 10 bits).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SourceFormat {
    #[default]
    Yuv420p,
    Nv12,
    P010,
}

impl SourceFormat {
    /// Bytes per sample.
    pub fn sample_bytes(self) -> u32 {
        match self {
            SourceFormat::P010 => 2,
            _ => 1,
        }
    }

    /// Planes in memory: 3 for planar, 2 for the semi-planar formats.
    pub fn plane_count(self) -> usize {
        match self {
            SourceFormat::Yuv420p => 3,
            _ => 2,
        }
    }

    /// Bytes of one row of plane `plane` and its number of rows, for a `width x height`
    /// frame (tightly packed).
    pub fn plane_shape(self, plane: usize, width: u32, height: u32) -> (usize, usize) {
        let (cw, ch) = Yuv420Frame::chroma_size(width, height);
        let sb = self.sample_bytes() as usize;
        match (self, plane) {
            (_, 0) => (width as usize * sb, height as usize),
            (SourceFormat::Yuv420p, _) => (cw as usize, ch as usize),
            // Interleaved U/V: two samples per chroma position.
            _ => (2 * cw as usize * sb, ch as usize),
        }
    }
}

vidforge_names::enum_names!(SourceFormat {
    Yuv420p => "yuv420p",
    Nv12 => "nv12",
    P010 => "p010",
});

/// A borrowed source frame of any [`SourceFormat`]: per plane its bytes and row stride (bytes
/// from one row's start to the next, at least the row's length; decoders pad rows). Unused
/// planes are empty.
#[derive(Clone, Copy, Debug)]
pub struct SourceFrame<'a> {
    pub width: u32,
    pub height: u32,
    pub format: SourceFormat,
    pub planes: [(&'a [u8], usize); 3],
}

impl<'a> From<&'a Yuv420Frame> for SourceFrame<'a> {
    fn from(f: &'a Yuv420Frame) -> Self {
        let cw = Yuv420Frame::chroma_size(f.width, f.height).0 as usize;
        SourceFrame {
            width: f.width,
            height: f.height,
            format: SourceFormat::Yuv420p,
            planes: [(&f.y, f.width as usize), (&f.u, cw), (&f.v, cw)],
        }
    }
}

impl<'a> From<&'a SemiPlanarFrame> for SourceFrame<'a> {
    fn from(f: &'a SemiPlanarFrame) -> Self {
        f.as_source()
    }
}

/// An owned semi-planar frame (NV12, or P010 with 16-bit little-endian samples), tightly
/// packed: what tests and benchmarks build from a [`Yuv420Frame`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SemiPlanarFrame {
    pub width: u32,
    pub height: u32,
    pub format: SourceFormat,
    pub y: Vec<u8>,
    pub uv: Vec<u8>,
}

impl SemiPlanarFrame {
    /// The same picture as NV12 (exact) or P010 (each 8-bit code `c` as the 10-bit `4c`, plus
    /// `low_bits` (0..=3) below it, so 10-bit detail the 8-bit output must round away).
    pub fn from_yuv420(f: &Yuv420Frame, format: SourceFormat, low_bits: u16) -> Self {
        let sample = |c: u8| -> Vec<u8> {
            match format {
                SourceFormat::P010 => ((u16::from(c) * 4 + (low_bits & 3)) << 6)
                    .to_le_bytes()
                    .to_vec(),
                _ => vec![c],
            }
        };
        let y = f.y.iter().flat_map(|&c| sample(c)).collect();
        let uv =
            f.u.iter()
                .zip(&f.v)
                .flat_map(|(&u, &v)| {
                    let mut pair = sample(u);
                    pair.extend(sample(v));
                    pair
                })
                .collect();
        SemiPlanarFrame {
            width: f.width,
            height: f.height,
            format,
            y,
            uv,
        }
    }

    pub fn as_source(&self) -> SourceFrame<'_> {
        let row = |plane| self.format.plane_shape(plane, self.width, self.height).0;
        SourceFrame {
            width: self.width,
            height: self.height,
            format: self.format,
            planes: [(&self.y, row(0)), (&self.uv, row(1)), (&[], 0)],
        }
    }
}
