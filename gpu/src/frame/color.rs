//! How YUV code values map to colour: the matrix, the range, and the two together.

/// YUV <-> RGB matrix coefficients.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Matrix {
    Bt601,
    Bt709,
    /// BT.2020 non-constant luminance: HDR sources (read by the tone mapper).
    Bt2020,
}

impl Matrix {
    /// Kr, Kb: the red and blue weights of luma.
    pub fn coefficients(self) -> (f64, f64) {
        match self {
            Matrix::Bt601 => (0.299, 0.114),
            Matrix::Bt709 => (0.2126, 0.0722),
            Matrix::Bt2020 => (0.2627, 0.0593),
        }
    }
}

/// Code-value range of a YUV signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Range {
    /// Y 16..235, UV 16..240 ("tv"/"mpeg").
    Limited,
    /// 0..255 ("pc"/"jpeg").
    Full,
}

/// How YUV code values map to colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ColorSpec {
    pub matrix: Matrix,
    pub range: Range,
}

impl ColorSpec {
    /// What every rendered output uses: BT.709, limited range (tagged on the encoded stream).
    pub const OUTPUT: ColorSpec = ColorSpec {
        matrix: Matrix::Bt709,
        range: Range::Limited,
    };

    /// Kr, Kb of the matrix.
    pub fn coefficients(self) -> (f32, f32) {
        let (kr, kb) = self.matrix.coefficients();
        (kr as f32, kb as f32)
    }

    /// Converts non-linear RGB in 0..1 to Y, U, V code values (0..255, not rounded).
    pub fn rgb_to_yuv(self, r: f32, g: f32, b: f32) -> [f32; 3] {
        let (kr, kb) = self.coefficients();
        let kg = 1.0 - kr - kb;
        let y = kr * r + kg * g + kb * b;
        let pb = (b - y) / (2.0 * (1.0 - kb));
        let pr = (r - y) / (2.0 * (1.0 - kr));
        match self.range {
            Range::Limited => [16.0 + 219.0 * y, 128.0 + 224.0 * pb, 128.0 + 224.0 * pr],
            Range::Full => [255.0 * y, 128.0 + 255.0 * pb, 128.0 + 255.0 * pr],
        }
    }
}
