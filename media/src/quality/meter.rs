//! The quality meter of one encode: a thread beside the encoder that decodes its packets again
//! and compares each picture with a copy of the frame the encoder was given.
//!
//! Memory is bounded: copies of frames wait for their decoded picture (the encoder's and the
//! decoder's delay, tens of frames for x264 with frame threads), at most
//! [`REFERENCE_BYTES`] of them. When the budget is full, frames go unmeasured and from then on
//! every second, fourth, … frame is measured (`stride`), so the frames measured stay spread
//! over the whole output; the report says how many were. Every packet is decoded (the
//! pictures depend on each other). A meter that fails (a decoder FFmpeg lacks, a picture of an
//! unexpected format) logs why and reports nothing: the render goes on without figures,
//! never with made-up ones.

use std::collections::BTreeMap;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, bounded};
use ffmpeg::{Packet, Rational, codec, decoder, encoder, ffi, frame};
use ffmpeg_next as ffmpeg;
use vidforge_gpu::{SampleDepth, Yuv420Frame};

use super::QualityTally;
use super::metrics::{self, Plane};
use crate::ffutil::is_eagain;

/// The most bytes of frame copies waiting for their decoded picture (per render).
pub(crate) const REFERENCE_BYTES: usize = 96 << 20;
/// Messages queued to the meter thread: packets block the encoder when it is full.
const QUEUE: usize = 16;
/// The widest spacing of measured frames.
const MAX_STRIDE: u64 = 64;

enum Msg {
    /// A copy of the frame the encoder got with this pts (encoder time base).
    Reference(i64, Yuv420Frame),
    /// A packet the encoder made, pts in the encoder time base.
    Packet(Packet),
}

/// The encode side's handle of a meter.
pub(crate) struct Meter {
    tx: Option<Sender<Msg>>,
    /// Copies the meter is done with, for reuse.
    free: Receiver<Yuv420Frame>,
    copies: usize,
    max_copies: usize,
    stride: u64,
    /// The offer at which `stride` last grew.
    raised_at: u64,
    offered: u64,
    thread: Option<JoinHandle<Option<QualityTally>>>,
}

impl Meter {
    /// Starts the meter of `enc` (opened), whose frames are `width`×`height` of `depth`, with
    /// timestamps in `tb`. `None` (logged) when its output cannot be decoded here.
    pub fn start(
        enc: &encoder::video::Encoder,
        (width, height): (u32, u32),
        depth: SampleDepth,
        tb: Rational,
    ) -> Option<Meter> {
        let dec = match open_decoder(enc, tb) {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(error = %e, "quality not measured: no decoder for the output");
                return None;
            }
        };
        let frame_bytes = frame_bytes(width, height, depth);
        let (tx, rx) = bounded::<Msg>(QUEUE);
        let max_copies = (REFERENCE_BYTES / frame_bytes.max(1)).max(2);
        let (free_tx, free) = bounded::<Yuv420Frame>(max_copies);
        let (cw, ch) = Yuv420Frame::chroma_size(width, height);
        let (luma, chroma) = (
            u64::from(width) * u64::from(height),
            u64::from(cw) * u64::from(ch),
        );
        let tally = QualityTally::new(u32::from(depth.max_code()), [luma, chroma, chroma]);
        let thread = std::thread::Builder::new()
            .name("vf-quality".into())
            .spawn(move || run(dec, rx, free_tx, tally, tb))
            .map_err(|e| tracing::warn!(error = %e, "quality not measured: no meter thread"))
            .ok()?;
        Some(Meter {
            tx: Some(tx),
            free,
            copies: 0,
            max_copies,
            stride: 1,
            raised_at: 0,
            offered: 0,
            thread: Some(thread),
        })
    }

    /// The frame the encoder gets with `pts`: copied for comparison when it is one to measure
    /// and the budget has room.
    pub fn offer(&mut self, img: &Yuv420Frame, pts: i64) {
        let n = self.offered;
        self.offered += 1;
        if !n.is_multiple_of(self.stride) {
            return;
        }
        let copy = match self.free.try_recv() {
            Ok(mut buf) => {
                buf.y.clone_from(&img.y);
                buf.u.clone_from(&img.u);
                buf.v.clone_from(&img.v);
                buf.width = img.width;
                buf.height = img.height;
                buf.depth = img.depth;
                buf
            }
            Err(_) if self.copies < self.max_copies => {
                self.copies += 1;
                img.clone()
            }
            Err(_) => {
                // Copies come back only after the encoder's and decoder's delay: grow the
                // spacing again only once a budget's worth of frames went by at this one.
                let settled = self.raised_at + self.max_copies as u64 * self.stride;
                if n >= settled && self.stride < MAX_STRIDE {
                    self.stride *= 2;
                    self.raised_at = n;
                    tracing::debug!(
                        stride = self.stride,
                        "quality: copy budget full, measuring fewer frames"
                    );
                }
                return;
            }
        };
        self.send(Msg::Reference(pts, copy));
    }

    /// A packet the encoder made (timestamps in the encoder's time base).
    pub fn packet(&mut self, pkt: &Packet) {
        self.send(Msg::Packet(pkt.clone()));
    }

    fn send(&mut self, msg: Msg) {
        // A meter that stopped (failed) is dropped: the render goes on unmeasured.
        if let Some(tx) = &self.tx
            && tx.send(msg).is_err()
        {
            self.tx = None;
        }
    }

    /// Waits for the last pictures; the tally, `None` when the meter failed.
    pub fn finish(mut self) -> Option<QualityTally> {
        self.tx = None;
        self.thread.take()?.join().ok().flatten()
    }
}

impl Drop for Meter {
    fn drop(&mut self) {
        // Disconnects the thread, which then ends within a picture.
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        while let Ok(b) = self.free.try_recv() {
            drop(b);
        }
    }
}

fn frame_bytes(width: u32, height: u32, depth: SampleDepth) -> usize {
    let (cw, ch) = Yuv420Frame::chroma_size(width, height);
    (width as usize * height as usize + 2 * cw as usize * ch as usize) * depth.bytes()
}

/// A decoder of `enc`'s output: its codec, extradata and size, one thread per core.
fn open_decoder(enc: &encoder::video::Encoder, tb: Rational) -> Result<decoder::Video, String> {
    let params = codec::Parameters::from(enc);
    let mut ctx = codec::context::Context::from_parameters(params).map_err(|e| e.to_string())?;
    ctx.set_threading(ffmpeg::codec::threading::Config {
        kind: ffmpeg::codec::threading::Type::Frame,
        count: 0,
        ..Default::default()
    });
    // SAFETY: plain field writes on an unopened context.
    unsafe {
        let p = ctx.as_mut_ptr();
        (*p).thread_type = ffi::FF_THREAD_FRAME | ffi::FF_THREAD_SLICE;
        (*p).pkt_timebase = tb.into();
    }
    ctx.decoder().video().map_err(|e| e.to_string())
}

/// What the meter thread keeps: the decoder, the copies waiting, the tally.
struct Compare {
    dec: decoder::Video,
    waiting: BTreeMap<i64, Yuv420Frame>,
    free: Sender<Yuv420Frame>,
    tally: QualityTally,
    tb: Rational,
    picture: frame::Video,
}

/// The meter thread: until the encode side hangs up, then the decoder's last pictures.
fn run(
    dec: decoder::Video,
    rx: Receiver<Msg>,
    free: Sender<Yuv420Frame>,
    tally: QualityTally,
    tb: Rational,
) -> Option<QualityTally> {
    let mut c = Compare {
        dec,
        waiting: BTreeMap::new(),
        free,
        tally,
        tb,
        picture: frame::Video::empty(),
    };
    let outcome = (|| {
        loop {
            match rx.recv() {
                Ok(Msg::Reference(pts, f)) => {
                    c.waiting.insert(pts, f);
                }
                Ok(Msg::Packet(p)) => {
                    c.dec
                        .send_packet(&p)
                        .map_err(|e| format!("decoding: {e}"))?;
                    c.receive()?;
                }
                // The encode side is done (or gone): the decoder's last pictures.
                Err(_) => break,
            }
        }
        c.dec.send_eof().map_err(|e| format!("flushing: {e}"))?;
        c.receive()
    })();
    match outcome {
        Ok(()) => Some(c.tally),
        Err(e) => {
            tracing::warn!(error = %e, "quality not measured");
            None
        }
    }
}

impl Compare {
    /// Compares the pictures the decoder has ready with their copies.
    fn receive(&mut self) -> Result<(), String> {
        loop {
            match self.dec.receive_frame(&mut self.picture) {
                Ok(()) => self.compare()?,
                Err(ffmpeg::Error::Eof) => return Ok(()),
                Err(e) if is_eagain(&e) => return Ok(()),
                Err(e) => return Err(format!("decoding: {e}")),
            }
        }
    }

    fn compare(&mut self) -> Result<(), String> {
        let Some(pts) = self.picture.pts().or(self.picture.timestamp()) else {
            return Ok(());
        };
        // Copies of earlier frames whose picture never came: none in a sound stream.
        while let Some(entry) = self.waiting.first_entry() {
            if *entry.key() >= pts {
                break;
            }
            let _ = self.free.try_send(entry.remove());
        }
        let Some(reference) = self.waiting.remove(&pts) else {
            return Ok(());
        };
        let wide = reference.depth == SampleDepth::Ten;
        let expected = crate::hdr_out::pixel_format(reference.depth);
        let p = &self.picture;
        if p.format() != expected || (p.width(), p.height()) != (reference.width, reference.height)
        {
            return Err(format!(
                "decoded {:?} {}x{}, expected {expected:?} {}x{}",
                p.format(),
                p.width(),
                p.height(),
                reference.width,
                reference.height
            ));
        }
        let (w, h) = (reference.width as usize, reference.height as usize);
        let (cw, ch) = Yuv420Frame::chroma_size(reference.width, reference.height);
        let b = reference.depth.bytes();
        let sizes = [
            (w, h),
            (cw as usize, ch as usize),
            (cw as usize, ch as usize),
        ];
        let ours = [&reference.y, &reference.u, &reference.v];
        let mut squared_error = [0u64; 3];
        let mut ssim = 0.0;
        let total: u64 = self.tally.plane_samples.iter().sum();
        for (i, ((pw, ph), data)) in sizes.into_iter().zip(ours).enumerate() {
            let a = Plane {
                data,
                stride: pw * b,
                width: pw,
                height: ph,
                wide,
            };
            let d = Plane {
                data: p.data(i),
                stride: p.stride(i),
                width: pw,
                height: ph,
                wide,
            };
            if !a.fits() || !d.fits() {
                return Err(format!("plane {i} is shorter than its size"));
            }
            squared_error[i] = metrics::squared_error(a, d);
            let weight = self.tally.plane_samples[i] as f64 / total as f64;
            ssim += weight * metrics::ssim(a, d, self.tally.peak);
        }
        let seconds = (pts.max(0) as f64 * f64::from(self.tb)).floor();
        self.tally
            .add(seconds.min(f64::from(u32::MAX)) as u32, squared_error, ssim);
        let _ = self.free.try_send(reference);
        Ok(())
    }
}
