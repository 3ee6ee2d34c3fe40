//! The staged render: demux+decode thread -> compose thread -> encode+mux thread, joined by
//! bounded queues. A slow stage back-pressures the others; a dead stage disconnects its
//! queues so the others stop instead of hanging.

mod reader;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TrySendError, bounded};
use ffmpeg::Packet;
use ffmpeg::frame;
use ffmpeg_next as ffmpeg;
use vidforge_gpu::Yuv420Frame;

pub(crate) use reader::{DecodedExtent, FrameReader};
use reader::{Item, frame_timing};

use crate::compose::Compositor;
use crate::error::MediaError;
use crate::muxer::Muxer;
use crate::quality::QualityTally;
use crate::types::{Progress, Stage, StageTimes};

/// Frames buffered between stages. A few are enough to absorb jitter; more only costs memory.
const QUEUE_FRAMES: usize = 4;
/// Fewest frames buffered between stages.
const MIN_QUEUE_FRAMES: usize = 1;
/// Bytes a queue may hold: big frames get shallower queues. At 4K each queued frame is
/// 12.4 MB, and deep queues only add peak memory: the encoder is the bottleneck there
/// (~100 ms/frame against ~5 ms to compose), so one queued frame keeps it fed. Measured at
/// 4K: depth 4 -> 2 saved ~24 MB of peak RSS.
const QUEUE_BYTES: usize = 16 << 20;

/// How many frames each inter-stage queue holds, by frame size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QueueDepths {
    /// Decoded frames (source size) waiting for the compositor.
    pub decoded: usize,
    /// Composed frames (output size) waiting for the encoder.
    pub composed: usize,
}

impl QueueDepths {
    pub fn for_sizes(src: (u32, u32), out: (u32, u32)) -> Self {
        let depth = |(w, h): (u32, u32)| {
            let bytes = (w as usize * h as usize * 3 / 2).max(1);
            (QUEUE_BYTES / bytes).clamp(MIN_QUEUE_FRAMES, QUEUE_FRAMES)
        };
        QueueDepths {
            decoded: depth(src),
            composed: depth(out),
        }
    }
}
enum Decoded {
    Video(frame::Video),
    Audio(Packet),
    End,
}

enum Composed {
    Video {
        frame: Yuv420Frame,
        pts: Option<i64>,
        duration: i64,
    },
    Audio(Packet),
    End,
}

enum Event {
    Frames(u64),
    Finalizing(u64),
}

/// Why a stage stopped without finishing.
enum StageFail {
    Error(MediaError),
    /// A neighbour disappeared (its own failure is reported by it).
    PeerGone,
}

impl From<MediaError> for StageFail {
    fn from(e: MediaError) -> Self {
        StageFail::Error(e)
    }
}

type StageResult<T> = Result<T, StageFail>;

fn check_cancel(cancel: &AtomicBool) -> StageResult<()> {
    if cancel.load(Ordering::Relaxed) {
        Err(StageFail::Error(MediaError::Cancelled))
    } else {
        Ok(())
    }
}

fn send<T>(tx: &Sender<T>, msg: T) -> StageResult<()> {
    tx.send(msg).map_err(|_| StageFail::PeerGone)
}

fn decode_stage(
    mut reader: FrameReader,
    tx: Sender<Decoded>,
    cancel: &AtomicBool,
) -> StageResult<(Duration, DecodedExtent)> {
    let mut busy = Duration::ZERO;
    loop {
        check_cancel(cancel)?;
        let t = Instant::now();
        let item = reader.next_item()?;
        busy += t.elapsed();
        match item {
            Some(Item::Video(f)) => send(&tx, Decoded::Video(f))?,
            Some(Item::Audio(p)) => send(&tx, Decoded::Audio(p))?,
            None => {
                send(&tx, Decoded::End)?;
                return Ok((busy, reader.extent()));
            }
        }
    }
}

/// Composed frames that may be alive at once (composing, queued, or lent to the encoder),
/// beyond the queue itself: one being composed while the encoder holds another.
const FRAMES_BEYOND_QUEUE: usize = 1;
/// Longest wait for the encoder to hand a composed frame back before composing into a new
/// buffer anyway (an encoder that keeps references must not stall the render).
const RECYCLE_WAIT: Duration = Duration::from_secs(2);

/// Takes back the composed frames the encoder is done with. At `limit` frames out, waits for
/// one first: without the wait a fast compositor runs ahead into fresh buffers, and at 4K
/// each is 12.4 MB of peak memory.
fn reclaim(
    comp: &mut dyn Compositor,
    recycle: &Receiver<Yuv420Frame>,
    outstanding: &mut usize,
    limit: usize,
    cancel: &AtomicBool,
) -> StageResult<()> {
    let mut take = |buf, outstanding: &mut usize| {
        *outstanding = outstanding.saturating_sub(1);
        comp.recycle(buf);
    };
    while let Ok(buf) = recycle.try_recv() {
        take(buf, outstanding);
    }
    let started = Instant::now();
    while *outstanding >= limit && started.elapsed() < RECYCLE_WAIT {
        match recycle.recv_timeout(Duration::from_millis(50)) {
            Ok(buf) => take(buf, outstanding),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => check_cancel(cancel)?,
            // The encoder is gone; the next send reports it.
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
        }
    }
    if *outstanding >= limit {
        *outstanding = 0;
    }
    Ok(())
}

fn compose_stage(
    make: Box<dyn FnOnce() -> Result<Box<dyn Compositor>, MediaError> + Send + '_>,
    rx: Receiver<Decoded>,
    tx: Sender<Composed>,
    recycle: Receiver<Yuv420Frame>,
    max_outstanding: usize,
    cancel: &AtomicBool,
) -> StageResult<Duration> {
    let mut busy = Duration::ZERO;
    let t = Instant::now();
    let mut comp = make()?;
    busy += t.elapsed();
    // Timing of frames inside the compositor (the GPU delays output by a few frames).
    let mut timing: VecDeque<(Option<i64>, i64)> = VecDeque::new();
    // Composed frames sent on and not yet back through `recycle`.
    let mut outstanding = 0usize;
    let emit =
        |frame: Yuv420Frame, timing: &mut VecDeque<(Option<i64>, i64)>, outstanding: &mut usize| {
            let (pts, duration) = timing.pop_front().unwrap_or((None, 0));
            *outstanding += 1;
            send(
                &tx,
                Composed::Video {
                    frame,
                    pts,
                    duration,
                },
            )
        };
    loop {
        let msg = rx.recv().map_err(|_| StageFail::PeerGone)?;
        match msg {
            Decoded::Video(f) => {
                check_cancel(cancel)?;
                reclaim(
                    comp.as_mut(),
                    &recycle,
                    &mut outstanding,
                    max_outstanding,
                    cancel,
                )?;
                let t = Instant::now();
                timing.push_back(frame_timing(&f));
                let out = comp.push(&f)?;
                drop(f);
                busy += t.elapsed();
                if let Some(o) = out {
                    emit(o, &mut timing, &mut outstanding)?;
                }
            }
            Decoded::Audio(p) => send(&tx, Composed::Audio(p))?,
            Decoded::End => {
                let t = Instant::now();
                let rest = comp.finish()?;
                busy += t.elapsed();
                for o in rest {
                    emit(o, &mut timing, &mut outstanding)?;
                }
                send(&tx, Composed::End)?;
                return Ok(busy);
            }
        }
    }
}

pub(crate) struct EncodeOutcome {
    pub frames: u64,
    pub video_seconds: f64,
    pub busy: Duration,
    /// When measured.
    pub quality: Option<QualityTally>,
}

fn encode_stage(
    mut muxer: Muxer,
    rx: Receiver<Composed>,
    recycle: Sender<Yuv420Frame>,
    events: Sender<Event>,
    cancel: &AtomicBool,
) -> StageResult<EncodeOutcome> {
    let mut busy = Duration::ZERO;
    let mut frames = 0u64;
    loop {
        let msg = rx.recv().map_err(|_| StageFail::PeerGone)?;
        match msg {
            Composed::Video {
                frame,
                pts,
                duration,
            } => {
                check_cancel(cancel)?;
                let t = Instant::now();
                // The frame returns to the compositor through `recycle` once encoded.
                muxer.write_video(frame, pts, duration, Some(&recycle))?;
                busy += t.elapsed();
                frames += 1;
                // Best effort: a full queue means the caller is behind; it gets a later count.
                match events.try_send(Event::Frames(frames)) {
                    Ok(()) | Err(TrySendError::Full(_)) => {}
                    Err(TrySendError::Disconnected(_)) => return Err(StageFail::PeerGone),
                }
            }
            Composed::Audio(p) => {
                let t = Instant::now();
                muxer.write_audio(p)?;
                busy += t.elapsed();
            }
            Composed::End => {
                let _ = events.send(Event::Finalizing(frames));
                check_cancel(cancel)?;
                let t = Instant::now();
                let timing = muxer.finish()?;
                busy += t.elapsed();
                return Ok(EncodeOutcome {
                    frames,
                    video_seconds: timing.seconds,
                    busy,
                    quality: timing.quality,
                });
            }
        }
    }
}

pub(crate) struct PipelineOutcome {
    pub encode: EncodeOutcome,
    /// How far into the source the decode got.
    pub decoded: DecodedExtent,
    pub stage_times: StageTimes,
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

fn join_stage<T>(name: &str, r: std::thread::Result<StageResult<T>>) -> StageResult<T> {
    match r {
        Ok(r) => r,
        Err(p) => Err(StageFail::Error(MediaError::failed(format!(
            "{name} stage panicked: {}",
            panic_message(p)
        )))),
    }
}

fn real_error<T>(r: StageResult<T>) -> Result<Option<T>, MediaError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(StageFail::PeerGone) => Ok(None),
        Err(StageFail::Error(e)) => Err(e),
    }
}

/// Runs the three stages to completion. Progress is reported on the calling thread.
pub(crate) fn run(
    reader: FrameReader,
    make_compositor: Box<dyn FnOnce() -> Result<Box<dyn Compositor>, MediaError> + Send + '_>,
    muxer: Muxer,
    cancel: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
    frames_total: Option<u64>,
    depths: QueueDepths,
) -> Result<PipelineOutcome, MediaError> {
    let (dec_tx, dec_rx) = bounded::<Decoded>(depths.decoded);
    let (cmp_tx, cmp_rx) = bounded::<Composed>(depths.composed);
    let (recycle_tx, recycle_rx) = bounded::<Yuv420Frame>(depths.composed + 2);
    let (ev_tx, ev_rx) = bounded::<Event>(64);

    std::thread::scope(|s| {
        // Owned by this closure so that a panicking progress callback drops it while
        // unwinding: the encode thread then sees the disconnect instead of blocking on a full
        // queue while the scope waits for it.
        let ev_rx = ev_rx;
        let spawn_err = |what: &str, e: std::io::Error| {
            MediaError::failed(format!("cannot start the {what} thread: {e}"))
        };
        let d = std::thread::Builder::new()
            .name("vf-decode".into())
            .spawn_scoped(s, move || decode_stage(reader, dec_tx, cancel))
            .map_err(|e| spawn_err("decode", e))?;
        let c = std::thread::Builder::new()
            .name("vf-compose".into())
            .spawn_scoped(s, move || {
                compose_stage(
                    make_compositor,
                    dec_rx,
                    cmp_tx,
                    recycle_rx,
                    depths.composed + FRAMES_BEYOND_QUEUE,
                    cancel,
                )
            })
            .map_err(|e| spawn_err("compose", e))?;
        let e = std::thread::Builder::new()
            .name("vf-encode".into())
            .spawn_scoped(s, move || {
                encode_stage(muxer, cmp_rx, recycle_tx, ev_tx, cancel)
            })
            .map_err(|e| spawn_err("encode", e))?;

        // Ends when the encode thread drops its sender (done, failed or panicked).
        for ev in ev_rx.iter() {
            let (stage, frames_done) = match ev {
                Event::Frames(n) => (Stage::Rendering, n),
                Event::Finalizing(n) => (Stage::Finalizing, n),
            };
            progress(Progress {
                stage,
                frames_done,
                frames_total,
            });
        }

        let rd = join_stage("decode", d.join());
        let rc = join_stage("compose", c.join());
        let re = join_stage("encode", e.join());
        if cancel.load(Ordering::Relaxed) {
            return Err(MediaError::Cancelled);
        }
        // The first stage with a real error (upstream first) is the cause; the others only
        // saw their queues disconnect.
        let rd = real_error(rd)?;
        let rc = real_error(rc)?;
        let re = real_error(re)?;
        match (rd, rc, re) {
            (Some((decode, decoded)), Some(compose), Some(enc)) => Ok(PipelineOutcome {
                decoded,
                stage_times: StageTimes {
                    decode,
                    compose,
                    encode: enc.busy,
                },
                encode: enc,
            }),
            _ => Err(MediaError::failed("a render stage stopped unexpectedly")),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_shrink_for_big_frames() {
        let d = QueueDepths::for_sizes((1920, 1080), (1280, 720));
        assert_eq!((d.decoded, d.composed), (QUEUE_FRAMES, QUEUE_FRAMES));
        let d = QueueDepths::for_sizes((3840, 2160), (3840, 2160));
        assert_eq!(
            (d.decoded, d.composed),
            (MIN_QUEUE_FRAMES, MIN_QUEUE_FRAMES)
        );
        let d = QueueDepths::for_sizes((2560, 1440), (1920, 1080));
        assert_eq!((d.decoded, d.composed), (3, QUEUE_FRAMES));
        let d = QueueDepths::for_sizes((16384, 16384), (2, 2));
        assert_eq!((d.decoded, d.composed), (MIN_QUEUE_FRAMES, QUEUE_FRAMES));
    }
}
