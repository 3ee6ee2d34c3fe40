//! The rotation that makes decoded frames display upright.

/// Clockwise rotation to apply to decoded frames so they display upright.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Rotation {
    #[default]
    None,
    Cw90,
    Cw180,
    Cw270,
}

impl Rotation {
    /// From a display-matrix angle in degrees (any multiple of 90, any sign), as the clockwise
    /// rotation that makes the picture upright.
    pub fn from_clockwise_degrees(degrees: i64) -> Self {
        match degrees.rem_euclid(360) {
            90 => Rotation::Cw90,
            180 => Rotation::Cw180,
            270 => Rotation::Cw270,
            _ => Rotation::None,
        }
    }

    pub fn degrees(self) -> u32 {
        match self {
            Rotation::None => 0,
            Rotation::Cw90 => 90,
            Rotation::Cw180 => 180,
            Rotation::Cw270 => 270,
        }
    }

    /// True when width and height swap.
    pub fn swaps_axes(self) -> bool {
        matches!(self, Rotation::Cw90 | Rotation::Cw270)
    }

    /// Display size of a coded `w x h` frame after rotation.
    pub fn display_size(self, w: u32, h: u32) -> (u32, u32) {
        if self.swaps_axes() { (h, w) } else { (w, h) }
    }
}
