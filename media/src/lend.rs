//! Frame lending: composed frames handed to the encoder in place (a reference-counted AVFrame
//! over the frame's own planes, returned to the compositor's pool when FFmpeg drops it), and
//! the copying path for frames whose strides do not suit the encoder.

use std::ffi::c_void;

use crossbeam_channel::Sender;
use ffmpeg::ffi;
use ffmpeg::frame;
use ffmpeg_next as ffmpeg;
use vidforge_gpu::Yuv420Frame;

use crate::error::MediaError;
use crate::hdr_out::pixel_format;

/// A composed frame lent to FFmpeg, and where it returns once FFmpeg is done with it.
struct Lent {
    frame: Yuv420Frame,
    home: Option<Sender<Yuv420Frame>>,
}

/// FFmpeg's free callback for a lent frame's buffer.
///
/// # Safety
///
/// `opaque` must be the `Box<Lent>` that `lend_frame` leaked into the buffer, and this must run
/// at most once for it (FFmpeg calls a buffer's free callback exactly once).
unsafe extern "C" fn release_lent(opaque: *mut c_void, _data: *mut u8) {
    // SAFETY: `opaque` is the `Box<Lent>` leaked by `lend_frame`; FFmpeg calls this once.
    let lent = unsafe { Box::from_raw(opaque as *mut Lent) };
    let Lent { frame, home } = *lent;
    if let Some(home) = home {
        // A full pool just drops the frame.
        let _ = home.try_send(frame);
    }
}

/// Wraps `img`'s planes in a reference-counted AVFrame without copying. Strides are the plane
/// widths, so only widths whose luma and chroma rows stay 16-byte aligned qualify (encoders'
/// SIMD input paths expect aligned rows); otherwise `img` comes back for the copying path.
pub(crate) fn lend_frame(
    img: Yuv420Frame,
    home: Option<&Sender<Yuv420Frame>>,
) -> Result<frame::Video, Yuv420Frame> {
    let (w, h) = (img.width as usize, img.height as usize);
    let (cw, ch) = Yuv420Frame::chroma_size(img.width, img.height);
    // Plane rows in bytes.
    let b = img.depth.bytes();
    let (w, cw, ch) = (w * b, cw as usize * b, ch as usize);
    let aligned = |p: *const u8| (p as usize).is_multiple_of(16);
    if !w.is_multiple_of(64)
        || img.y.len() < w * h
        || img.u.len() < cw * ch
        || img.v.len() < cw * ch
        || !aligned(img.y.as_ptr())
        || !aligned(img.u.as_ptr())
        || !aligned(img.v.as_ptr())
    {
        return Err(img);
    }
    let mut lent = Box::new(Lent {
        frame: img,
        home: home.cloned(),
    });
    let planes = [
        lent.frame.y.as_mut_ptr(),
        lent.frame.u.as_mut_ptr(),
        lent.frame.v.as_mut_ptr(),
    ];
    let y_len = lent.frame.y.len();
    let (fw, fh) = (lent.frame.width, lent.frame.height);
    let format = pixel_format(lent.frame.depth);
    let opaque = Box::into_raw(lent);
    // SAFETY: the planes live in `*opaque`, whose heap buffers do not move while it is leaked;
    // the buffer frees it exactly once through `release_lent`.
    let buf =
        unsafe { ffi::av_buffer_create(planes[0], y_len, Some(release_lent), opaque.cast(), 0) };
    if buf.is_null() {
        // SAFETY: not handed to FFmpeg; reclaim it.
        let lent = unsafe { Box::from_raw(opaque) };
        return Err(lent.frame);
    }
    let mut f = frame::Video::empty();
    // SAFETY: a fresh empty AVFrame; fields set as av_frame_get_buffer would, with `buf[0]`
    // owning (through the callback) all three planes.
    unsafe {
        let p = f.as_mut_ptr();
        (*p).format = ffi::AVPixelFormat::from(format) as i32;
        (*p).width = fw as i32;
        (*p).height = fh as i32;
        (*p).buf[0] = buf;
        for (i, plane) in planes.into_iter().enumerate() {
            (*p).data[i] = plane;
        }
        (*p).linesize[0] = w as i32;
        (*p).linesize[1] = cw as i32;
        (*p).linesize[2] = cw as i32;
    }
    Ok(f)
}

/// The copying path: `img` into the muxer's own (lazily allocated) encoder frame.
pub(crate) fn copy_frame<'a>(
    slot: &'a mut Option<frame::Video>,
    img: &Yuv420Frame,
) -> Result<&'a mut frame::Video, MediaError> {
    let f = slot
        .get_or_insert_with(|| frame::Video::new(pixel_format(img.depth), img.width, img.height));
    // SAFETY: the frame was allocated with buffers; make_writable copies them only if the
    // encoder still holds a reference.
    let r = unsafe { ffi::av_frame_make_writable(f.as_mut_ptr()) };
    if r < 0 {
        return Err(MediaError::ffmpeg(
            "allocating an encoder frame",
            ffmpeg::Error::from(r),
        ));
    }
    let (cw, ch) = Yuv420Frame::chroma_size(img.width, img.height);
    // Rows in bytes.
    let b = img.depth.bytes();
    let planes: [(&[u8], usize, usize); 3] = [
        (&img.y, img.width as usize * b, img.height as usize),
        (&img.u, cw as usize * b, ch as usize),
        (&img.v, cw as usize * b, ch as usize),
    ];
    for (i, (src, w, h)) in planes.into_iter().enumerate() {
        let stride = f.stride(i);
        let dst = f.data_mut(i);
        for row in 0..h {
            dst[row * stride..row * stride + w].copy_from_slice(&src[row * w..(row + 1) * w]);
        }
    }
    Ok(f)
}
