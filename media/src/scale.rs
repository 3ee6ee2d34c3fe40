//! Thin safe wrapper over swscale, plus the plane helpers both compositors share
//! (tight-packing decoded frames, rotating planes).

use std::ptr;

use ffmpeg::ffi;
use ffmpeg::format::Pixel;
use ffmpeg::frame;
use ffmpeg_next as ffmpeg;
use vidforge_gpu::{Rotation, SampleDepth, Yuv420Frame};

use crate::error::MediaError;

/// Everything that decides a swscale context; a change rebuilds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SwsKey {
    pub src_fmt: Pixel,
    pub src_w: u32,
    pub src_h: u32,
    pub dst_fmt: Pixel,
    pub dst_w: u32,
    pub dst_h: u32,
    pub flags: i32,
    /// SWS_CS_* of the source / destination matrix.
    pub src_space: i32,
    pub src_full: bool,
    pub dst_space: i32,
    pub dst_full: bool,
}

/// An owned `SwsContext`.
pub(crate) struct Sws {
    ptr: *mut ffi::SwsContext,
    key: SwsKey,
}

// SAFETY: an SwsContext has no thread affinity; we only use it from one thread at a time.
unsafe impl Send for Sws {}

impl Drop for Sws {
    fn drop(&mut self) {
        // SAFETY: ptr came from sws_getContext and is freed once.
        unsafe { ffi::sws_freeContext(self.ptr) }
    }
}

impl Sws {
    pub fn new(key: SwsKey) -> Result<Self, MediaError> {
        // SAFETY: plain FFI constructor; every argument is a value.
        let ptr = unsafe {
            ffi::sws_getContext(
                key.src_w as i32,
                key.src_h as i32,
                key.src_fmt.into(),
                key.dst_w as i32,
                key.dst_h as i32,
                key.dst_fmt.into(),
                key.flags,
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null(),
            )
        };
        if ptr.is_null() {
            return Err(MediaError::failed(format!(
                "swscale cannot convert {:?} {}x{} to {:?} {}x{}",
                key.src_fmt, key.src_w, key.src_h, key.dst_fmt, key.dst_w, key.dst_h
            )));
        }
        // SAFETY: valid context; coefficient tables are static. The return value only says
        // whether a YUV->YUV conversion needed no matrix change, so it is not an error.
        unsafe {
            ffi::sws_setColorspaceDetails(
                ptr,
                ffi::sws_getCoefficients(key.src_space),
                key.src_full as i32,
                ffi::sws_getCoefficients(key.dst_space),
                key.dst_full as i32,
                0,
                1 << 16,
                1 << 16,
            );
        }
        Ok(Sws { ptr, key })
    }

    /// Reuses `slot` when its key matches, else rebuilds it.
    pub fn cached(slot: &mut Option<Sws>, key: SwsKey) -> Result<&mut Sws, MediaError> {
        if slot.as_ref().is_none_or(|s| s.key != key) {
            *slot = Some(Sws::new(key)?);
        }
        slot.as_mut()
            .ok_or_else(|| MediaError::failed("swscale context missing"))
    }

    /// Scales `src` (which must match the key's source) into raw destination planes.
    ///
    /// # Safety
    /// `dst[i]` must point to writable planes of at least `dst_stride[i] * plane_height` bytes
    /// for the key's destination format and size.
    unsafe fn scale_raw(&mut self, src: &frame::Video, dst: [*mut u8; 4], dst_stride: [i32; 4]) {
        // SAFETY: src is a decoded frame of the key's format and size (checked by callers);
        // destination validity is the caller's contract.
        unsafe {
            let f = src.as_ptr();
            ffi::sws_scale(
                self.ptr,
                (*f).data.as_ptr() as *const *const u8,
                (*f).linesize.as_ptr(),
                0,
                self.key.src_h as i32,
                dst.as_ptr(),
                dst_stride.as_ptr(),
            );
        }
    }

    /// Scales `src` into a tightly packed yuv420p frame of the key's destination size.
    pub fn scale_to_yuv420(
        &mut self,
        src: &frame::Video,
        dst: &mut Yuv420Frame,
    ) -> Result<(), MediaError> {
        check_frame(src, &self.key)?;
        if self.key.dst_fmt != crate::hdr_out::pixel_format(dst.depth)
            || dst.width != self.key.dst_w
            || dst.height != self.key.dst_h
        {
            return Err(MediaError::failed(
                "swscale destination does not match its context",
            ));
        }
        // Rows in bytes.
        let b = dst.depth.bytes();
        let (cw, ch) = Yuv420Frame::chroma_size(dst.width, dst.height);
        let (cw, ch) = (cw as usize * b, ch as usize);
        let (w, h) = (dst.width as usize * b, dst.height as usize);
        if dst.y.len() < w * h || dst.u.len() < cw * ch || dst.v.len() < cw * ch {
            return Err(MediaError::failed("destination planes too small"));
        }
        // SAFETY: the planes were just checked to hold the destination size at these strides.
        unsafe {
            self.scale_raw(
                src,
                [
                    dst.y.as_mut_ptr(),
                    dst.u.as_mut_ptr(),
                    dst.v.as_mut_ptr(),
                    ptr::null_mut(),
                ],
                [w as i32, cw as i32, cw as i32, 0],
            );
        }
        Ok(())
    }

    /// Scales `src` into `dst`, an allocated FFmpeg frame of the key's destination format
    /// and size.
    pub fn scale_to_frame(
        &mut self,
        src: &frame::Video,
        dst: &mut frame::Video,
    ) -> Result<(), MediaError> {
        check_frame(src, &self.key)?;
        if dst.format() != self.key.dst_fmt
            || dst.width() != self.key.dst_w
            || dst.height() != self.key.dst_h
            || dst.planes() == 0
        {
            return Err(MediaError::failed(
                "swscale destination frame does not match its context",
            ));
        }
        // SAFETY: `dst` was allocated by FFmpeg for exactly this format and size, so its
        // planes hold `linesize * plane height` bytes each.
        unsafe {
            let f = dst.as_mut_ptr();
            let d = (*f).data;
            let l = (*f).linesize;
            self.scale_raw(src, [d[0], d[1], d[2], d[3]], [l[0], l[1], l[2], l[3]]);
        }
        Ok(())
    }

    /// Scales a yuv420p `Yuv420Frame` into a packed single-plane destination (RGB24 for PNGs).
    pub fn yuv420_to_packed(
        &mut self,
        src: &Yuv420Frame,
        dst: &mut [u8],
        dst_stride: usize,
    ) -> Result<(), MediaError> {
        let k = self.key;
        if k.src_fmt != Pixel::YUV420P || src.width != k.src_w || src.height != k.src_h {
            return Err(MediaError::failed(
                "swscale source does not match its context",
            ));
        }
        if dst.len() < dst_stride * k.dst_h as usize {
            return Err(MediaError::failed("destination buffer too small"));
        }
        let cw = src.width.div_ceil(2) as i32;
        let planes = [src.y.as_ptr(), src.u.as_ptr(), src.v.as_ptr(), ptr::null()];
        let strides = [src.width as i32, cw, cw, 0];
        let dptr = [
            dst.as_mut_ptr(),
            ptr::null_mut(),
            ptr::null_mut(),
            ptr::null_mut(),
        ];
        let dstride = [dst_stride as i32, 0, 0, 0];
        // SAFETY: source planes are the tight planes of `src` (sizes guaranteed by the type's
        // invariant and checked dimensions); destination checked above.
        unsafe {
            ffi::sws_scale(
                self.ptr,
                planes.as_ptr(),
                strides.as_ptr(),
                0,
                k.src_h as i32,
                dptr.as_ptr(),
                dstride.as_ptr(),
            );
        }
        Ok(())
    }
}

fn check_frame(src: &frame::Video, key: &SwsKey) -> Result<(), MediaError> {
    if src.format() != key.src_fmt || src.width() != key.src_w || src.height() != key.src_h {
        return Err(MediaError::failed(format!(
            "frame {:?} {}x{} does not match the scaler's {:?} {}x{}",
            src.format(),
            src.width(),
            src.height(),
            key.src_fmt,
            key.src_w,
            key.src_h
        )));
    }
    Ok(())
}

/// Copies a yuv420p/yuvj420p decoded frame into a tight `Yuv420Frame` (strides removed).
pub(crate) fn copy_yuv420(src: &frame::Video, dst: &mut Yuv420Frame) -> Result<(), MediaError> {
    if !matches!(src.format(), Pixel::YUV420P | Pixel::YUVJ420P)
        || src.width() != dst.width
        || src.height() != dst.height
    {
        return Err(MediaError::failed(
            "frame is not yuv420p at the expected size",
        ));
    }
    let (cw, ch) = Yuv420Frame::chroma_size(dst.width, dst.height);
    let planes: [(&mut Vec<u8>, usize, usize); 3] = [
        (&mut dst.y, dst.width as usize, dst.height as usize),
        (&mut dst.u, cw as usize, ch as usize),
        (&mut dst.v, cw as usize, ch as usize),
    ];
    for (i, (plane, w, h)) in planes.into_iter().enumerate() {
        let stride = src.stride(i);
        let data = src.data(i);
        if plane.len() < w * h || stride < w || data.len() < stride * (h - 1) + w {
            return Err(MediaError::failed(
                "decoded plane smaller than its frame size",
            ));
        }
        for row in 0..h {
            plane[row * w..(row + 1) * w].copy_from_slice(&data[row * stride..row * stride + w]);
        }
    }
    Ok(())
}

/// Rotates a tight plane `src` (`w x h` samples of any size) clockwise by `rot` into `dst`
/// (display orientation).
pub(crate) fn rotate_plane<T: Copy>(src: &[T], w: usize, h: usize, dst: &mut [T], rot: Rotation) {
    const B: usize = 32;
    match rot {
        Rotation::None => dst[..w * h].copy_from_slice(&src[..w * h]),
        Rotation::Cw180 => {
            for (d, s) in dst[..w * h].iter_mut().zip(src[..w * h].iter().rev()) {
                *d = *s;
            }
        }
        Rotation::Cw90 | Rotation::Cw270 => {
            // Output is h wide, w tall. Blocked so both sides stay in cache.
            let ow = h;
            for by in (0..h).step_by(B) {
                for bx in (0..w).step_by(B) {
                    for y in by..(by + B).min(h) {
                        let xe = (bx + B).min(w);
                        for (x, &px) in src[y * w + bx..y * w + xe].iter().enumerate() {
                            let x = bx + x;
                            let (ox, oy) = if rot == Rotation::Cw90 {
                                (h - 1 - y, x)
                            } else {
                                (y, w - 1 - x)
                            };
                            dst[oy * ow + ox] = px;
                        }
                    }
                }
            }
        }
    }
}

/// Rotates a whole frame (8- or 10-bit); `dst` must already have the rotated size and the
/// same depth.
pub(crate) fn rotate_frame(src: &Yuv420Frame, dst: &mut Yuv420Frame, rot: Rotation) {
    let (cw, ch) = Yuv420Frame::chroma_size(src.width, src.height);
    let (w, h) = (src.width as usize, src.height as usize);
    let (cw, ch) = (cw as usize, ch as usize);
    let planes = [
        (&src.y, &mut dst.y, w, h),
        (&src.u, &mut dst.u, cw, ch),
        (&src.v, &mut dst.v, cw, ch),
    ];
    for (s, d, w, h) in planes {
        match src.depth {
            SampleDepth::Eight => rotate_plane(s, w, h, d, rot),
            // Two-byte samples, moved whole (`[u8; 2]` has alignment 1: any plane casts).
            SampleDepth::Ten => rotate_plane::<[u8; 2]>(
                bytemuck::cast_slice(s),
                w,
                h,
                bytemuck::cast_slice_mut(d),
                rot,
            ),
        }
    }
}

/// A zeroed frame of the given size (Y 0, chroma 128 is not needed: every sample is written).
pub(crate) fn blank_frame(width: u32, height: u32) -> Yuv420Frame {
    Yuv420Frame::blank(width, height, vidforge_gpu::SampleDepth::Eight)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotations_move_corners_where_expected() {
        // 3 wide, 2 tall: a b c / d e f
        let src = [1u8, 2, 3, 4, 5, 6];
        let mut dst = [0u8; 6];
        rotate_plane(&src, 3, 2, &mut dst, Rotation::Cw90);
        // Clockwise: d a / e b / f c
        assert_eq!(dst, [4, 1, 5, 2, 6, 3]);
        rotate_plane(&src, 3, 2, &mut dst, Rotation::Cw270);
        // Counter-clockwise: c f / b e / a d
        assert_eq!(dst, [3, 6, 2, 5, 1, 4]);
        rotate_plane(&src, 3, 2, &mut dst, Rotation::Cw180);
        assert_eq!(dst, [6, 5, 4, 3, 2, 1]);
    }
}
