//! The pipelined compositor: 4:2:0 YUV in (planar, NV12 or P010), planar YUV out, one fused
//! compute pass per frame.
//!
//! Per frame: the planes are written into a mapped upload buffer of a ring slot, then one
//! command buffer copies them to the device input buffer, runs the compose pass (two
//! dispatches of specialised pipelines: luma, then chroma; each output sample is scaled,
//! colour-converted and watermarked in one go) and copies the output into that slot's
//! readback buffer, which is mapped asynchronously. With `frames_in_flight` slots the GPU
//! works on later frames while the caller consumes earlier ones; outputs come back strictly in
//! submission order.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use bytemuck::{Pod, Zeroable};

use crate::context::{GpuContext, PipelineKey};
use crate::error::GpuError;
use crate::filter::{self, Kernel, MAX_TAPS};
use crate::frame::{
    ColorSpec, PreparedWatermark, Rotation, SourceFormat, SourceFrame, Yuv420Frame,
};

/// What [`GpuCompositor::kernel_timing`] measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KernelTiming {
    /// GPU time of one compose pass (both dispatches).
    pub per_frame: Duration,
    /// Bytes one pass must move at least: the source read once, the output written once.
    pub bytes_per_frame: u64,
    /// Source size.
    pub source: (u32, u32),
}

impl KernelTiming {
    /// Effective memory bandwidth of the pass, in bytes per second.
    pub fn bandwidth(&self) -> f64 {
        self.bytes_per_frame as f64 / self.per_frame.as_secs_f64().max(1e-12)
    }
}

/// Everything that stays fixed for a run of frames.
#[derive(Clone, Debug, PartialEq)]
pub struct ComposeConfig {
    /// Coded size of the decoded frames (before rotation).
    pub src_width: u32,
    pub src_height: u32,
    pub src_color: ColorSpec,
    /// Clockwise rotation applied before scaling (output is in display orientation).
    pub rotation: Rotation,
    pub out_width: u32,
    pub out_height: u32,
    pub out_color: ColorSpec,
    /// Already resampled and converted to `out_color` by [`crate::prepare_watermark`].
    pub watermark: Option<PreparedWatermark>,
    /// Memory layout of the submitted frames.
    pub src_format: SourceFormat,
}

/// Most frames a compositor keeps in flight.
pub const MAX_FRAMES_IN_FLIGHT: usize = 16;
/// Longest wait for one frame before reporting the GPU as stuck.
const FRAME_TIMEOUT: Duration = Duration::from_secs(60);
/// Pause between checks while another thread's poll runs our buffer's map callback.
const CALLBACK_WAIT: Duration = Duration::from_micros(50);
/// Must match `@workgroup_size` in compose.wgsl.
const WORKGROUP_SIZE: u32 = 64;
/// Must match `MAX_ROW_WORDS` in compose.wgsl.
const MAX_ROW_WORDS: u32 = 8;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
struct PlaneParams {
    out_w: u32,
    out_h: u32,
    word_start: u32,
    row_words: u32,
    src_off: i32,
    src_sx: i32,
    src_sy: i32,
    oth_off: i32,
    src_w: u32,
    src_h: u32,
    _pad: [u32; 4],
    wm_x: u32,
    wm_y: u32,
    wm_w: u32,
    wm_h: u32,
    wm_off: u32,
    _pad4: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
struct Params {
    planes: [PlaneParams; 3],
    mat: [[f32; 4]; 3],
    luma_to_chroma: [f32; 4],
    misc: [u32; 4],
    misc2: [u32; 4],
}

// The WGSL uniform layout: 3 * 80 + 3 * 16 + 3 * 16 bytes, no implicit padding.
const _: () = assert!(std::mem::size_of::<Params>() == 336);

const PENDING: u8 = 0;
const READY: u8 = 1;
const FAILED: u8 = 2;

/// The source planes packed back to back, rows tightly packed, in one storage buffer (the
/// shader addresses bytes).
#[derive(Clone, Copy, Debug)]
struct InLayout {
    format: SourceFormat,
    luma: (u32, u32),
    chroma: (u32, u32),
    /// Per memory plane: byte offset, row bytes, rows (unused planes: zeros).
    planes: [(u64, usize, usize); 3],
    size: u64,
}

/// Where one display plane's samples are: the byte of sample (0, 0) of the coded plane, the
/// bytes between horizontally adjacent samples, and the bytes between rows.
#[derive(Clone, Copy, Debug)]
struct PlaneBytes {
    base: u64,
    step: u64,
    stride: u64,
}

impl InLayout {
    fn new(w: u32, h: u32, format: SourceFormat) -> Self {
        let mut planes = [(0u64, 0usize, 0usize); 3];
        let mut end = 0u64;
        for (i, plane) in planes.iter_mut().enumerate().take(format.plane_count()) {
            let (row, rows) = format.plane_shape(i, w, h);
            *plane = (end, row, rows);
            end += row as u64 * rows as u64;
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

    fn plane_dims(&self, plane: usize) -> (u32, u32) {
        if plane == 0 { self.luma } else { self.chroma }
    }

    /// Display plane `plane` (Y, U, V) in the buffer: U and V interleave in the semi-planar
    /// formats (V one sample after U).
    fn plane_bytes(&self, plane: usize) -> PlaneBytes {
        let sb = self.format.sample_bytes() as u64;
        let at = |i: usize, first: u64, step: u64| PlaneBytes {
            base: self.planes[i].0 + first,
            step,
            stride: self.planes[i].1 as u64,
        };
        match (self.format, plane) {
            (_, 0) => at(0, 0, sb),
            (SourceFormat::Yuv420p, i) => at(i, 0, 1),
            (_, i) => at(1, (i as u64 - 1) * sb, 2 * sb),
        }
    }
}

/// Word layout of the output planes: each row padded to whole u32 words, so one invocation
/// owns one word; one scratch word after the frame absorbs the stores of idle invocations.
#[derive(Clone, Copy, Debug)]
struct OutLayout {
    dims: [(u32, u32); 3],
    row_words: [u32; 3],
    word_starts: [u64; 3],
    scratch_word: u64,
    size: u64,
}

impl OutLayout {
    fn new(w: u32, h: u32) -> Self {
        let (cw, ch) = Yuv420Frame::chroma_size(w, h);
        let dims = [(w, h), (cw, ch), (cw, ch)];
        let row_words = dims.map(|(w, _)| w.div_ceil(4));
        let words = [0, 1, 2].map(|i| row_words[i] as u64 * dims[i].1 as u64);
        let scratch_word = words.iter().sum::<u64>();
        Self {
            dims,
            row_words,
            word_starts: [0, words[0], words[0] + words[1]],
            scratch_word,
            size: (scratch_word + 1) * 4,
        }
    }

    /// Copies plane `i` out of a mapped readback buffer, dropping the row padding.
    fn extract(&self, bytes: &[u8], i: usize) -> Vec<u8> {
        let (w, h) = (self.dims[i].0 as usize, self.dims[i].1 as usize);
        let stride = self.row_words[i] as usize * 4;
        let start = self.word_starts[i] as usize * 4;
        if stride == w {
            return bytes[start..start + w * h].to_vec();
        }
        let mut out = Vec::with_capacity(w * h);
        for row in 0..h {
            out.extend_from_slice(&bytes[start + row * stride..][..w]);
        }
        out
    }
}

/// One ring entry: CPU-visible buffers only (the device-side input and output buffers are
/// shared; queue order serialises their use).
struct Slot {
    upload: wgpu::Buffer,
    readback: wgpu::Buffer,
    upload_state: Arc<AtomicU8>,
    readback_state: Arc<AtomicU8>,
    submission: Option<wgpu::SubmissionIndex>,
}

/// Device objects shared by every slot.
struct Shared {
    ctx: GpuContext,
    bind_group: wgpu::BindGroup,
    input: wgpu::Buffer,
    output: wgpu::Buffer,
    in_layout: InLayout,
    out_layout: OutLayout,
    /// (pipeline, workgroups x, workgroups y) for luma, then chroma.
    dispatches: [(wgpu::ComputePipeline, u32, u32); 2],
    out_size: (u32, u32),
    // Kept alive for the bind group.
    _params: wgpu::Buffer,
    _wm: wgpu::Buffer,
}

/// Scales, rotates, colour-converts and watermarks frames on the GPU. `Send`; one per
/// render stream (share the [`GpuContext`] between them).
pub struct GpuCompositor {
    shared: Shared,
    slots: Vec<Slot>,
    free: Vec<usize>,
    in_flight: VecDeque<usize>,
    /// Dedicated slot for [`GpuCompositor::compose_one`], so previews never disturb the ring.
    preview: Option<Slot>,
}

fn invalid(reason: impl Into<String>) -> GpuError {
    GpuError::InvalidConfig {
        reason: reason.into(),
    }
}

/// Display-space addressing of a `w x h` coded plane laid out as `b`: the byte of display
/// sample (0, 0), and the byte steps for +1 display column and +1 display row.
fn plane_addressing(rotation: Rotation, b: PlaneBytes, w: i64, h: i64) -> (i64, i64, i64) {
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

fn to_i32(v: i64, what: &str) -> Result<i32, GpuError> {
    i32::try_from(v).map_err(|_| invalid(format!("{what} ({v}) exceeds 32 bits")))
}

fn to_u32(v: u64, what: &str) -> Result<u32, GpuError> {
    u32::try_from(v).map_err(|_| invalid(format!("{what} ({v}) exceeds 32 bits")))
}

fn validate_watermark(wm: &PreparedWatermark, out_w: u32, out_h: u32) -> Result<(), GpuError> {
    let p = wm.placement;
    let fits = |pos: u32, len: u32, max: u32| pos as u64 + len as u64 <= max as u64;
    if !fits(p.x, p.width, out_w) || !fits(p.y, p.height, out_h) {
        return Err(invalid(format!(
            "watermark placement {}x{} at ({}, {}) does not fit the {out_w}x{out_h} output",
            p.width, p.height, p.x, p.y
        )));
    }
    let luma = p.width as usize * p.height as usize;
    let chroma = (p.width / 2) as usize * (p.height / 2) as usize;
    let planes = [
        ("y", wm.y.len(), luma),
        ("alpha_y", wm.alpha_y.len(), luma),
        ("u", wm.u.len(), chroma),
        ("v", wm.v.len(), chroma),
        ("alpha_c", wm.alpha_c.len(), chroma),
    ];
    for (name, got, want) in planes {
        if got != want {
            return Err(invalid(format!(
                "watermark plane {name} has {got} bytes, expected {want} for a {}x{} placement",
                p.width, p.height
            )));
        }
    }
    Ok(())
}

impl GpuCompositor {
    /// Builds the buffers and bind group for `cfg`. Keeps up to
    /// `frames_in_flight` (1..=16) frames on the GPU at once.
    pub fn new(
        ctx: &GpuContext,
        cfg: ComposeConfig,
        frames_in_flight: usize,
    ) -> Result<Self, GpuError> {
        if !(1..=MAX_FRAMES_IN_FLIGHT).contains(&frames_in_flight) {
            return Err(invalid(format!(
                "frames_in_flight must be 1..={MAX_FRAMES_IN_FLIGHT}, got {frames_in_flight}"
            )));
        }
        let limits = &ctx.inner.limits;
        let max_dim = limits.max_texture_dimension_2d;
        for (name, v) in [
            ("source width", cfg.src_width),
            ("source height", cfg.src_height),
            ("output width", cfg.out_width),
            ("output height", cfg.out_height),
        ] {
            if v == 0 || v > max_dim {
                return Err(invalid(format!("{name} {v} is outside 1..={max_dim}")));
            }
        }
        if let Some(wm) = &cfg.watermark {
            validate_watermark(wm, cfg.out_width, cfg.out_height)?;
        }

        let (sw, sh) = (cfg.src_width, cfg.src_height);
        let (ow, oh) = (cfg.out_width, cfg.out_height);
        let (dw, dh) = cfg.rotation.display_size(sw, sh);
        let (scw, sch) = Yuv420Frame::chroma_size(sw, sh);
        let (dcw, dch) = cfg.rotation.display_size(scw, sch);
        let (ocw, och) = Yuv420Frame::chroma_size(ow, oh);

        let in_layout = InLayout::new(sw, sh, cfg.src_format);
        let out_layout = OutLayout::new(ow, oh);
        let max_binding = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size);
        if out_layout.size > max_binding || in_layout.size > max_binding {
            return Err(invalid(format!(
                "a {sw}x{sh} -> {ow}x{oh} frame needs {} / {} byte buffers, beyond the device's \
                 {max_binding}-byte storage binding limit",
                in_layout.size, out_layout.size
            )));
        }
        // The shader addresses source bytes with i32 and output words with u32.
        to_i32(in_layout.size as i64, "source frame size")?;
        to_u32(out_layout.scratch_word, "output words")?;

        // The filter's widest window per axis (the shader computes the weights themselves).
        let taps = [(dw, ow), (dh, oh), (dcw, ocw), (dch, och)]
            .map(|(s, d)| filter::axis_filter(s, d).taps);
        if let Some(&t) = taps.iter().find(|&&t| t > MAX_TAPS) {
            return Err(invalid(format!(
                "scaling {dw}x{dh} to {ow}x{oh} shrinks more than the compositor supports \
                 ({t} taps per axis, max {MAX_TAPS})"
            )));
        }
        let kernel = |s: u32, d: u32| (filter::kernel_for(s, d) == Kernel::Bicubic) as u32;

        // Watermark: per plane, (value, alpha) byte pairs row-major, planes back to back, so
        // four adjacent samples are 8 contiguous bytes.
        let mut wm_bytes = Vec::new();
        let mut wm_rects = [[0u32; 5]; 3];
        if let Some(wm) = &cfg.watermark {
            let p = wm.placement;
            let (cx, cy, cw, ch) = (p.x / 2, p.y / 2, p.width / 2, p.height / 2);
            let planes = [
                (&wm.y, &wm.alpha_y, [p.x, p.y, p.width, p.height]),
                (&wm.u, &wm.alpha_c, [cx, cy, cw, ch]),
                (&wm.v, &wm.alpha_c, [cx, cy, cw, ch]),
            ];
            for (i, (values, alphas, [x, y, w, h])) in planes.into_iter().enumerate() {
                let off = to_u32(wm_bytes.len() as u64, "watermark size")?;
                wm_rects[i] = [x, y, w, h, off];
                wm_bytes.extend(values.iter().zip(alphas.iter()).flat_map(|(&v, &a)| [v, a]));
            }
        }
        // Whole words, plus the two words a row-end load may read past the last pair.
        wm_bytes.resize((wm_bytes.len().div_ceil(4) + 2) * 4, 0);
        if wm_bytes.len() as u64 > max_binding {
            return Err(invalid(
                "the watermark exceeds the device's storage binding limit",
            ));
        }

        let addressing: [(i64, i64, i64); 3] = std::array::from_fn(|i| {
            let (w, h) = in_layout.plane_dims(i);
            plane_addressing(cfg.rotation, in_layout.plane_bytes(i), w as i64, h as i64)
        });
        let mut planes = [PlaneParams::default(); 3];
        for (i, plane) in planes.iter_mut().enumerate() {
            let (w, h) = out_layout.dims[i];
            let (sdw, sdh) = if i == 0 { (dw, dh) } else { (dcw, dch) };
            let (origin, step_x, step_y) = addressing[i];
            let other = match i {
                1 => addressing[2].0,
                2 => addressing[1].0,
                _ => 0,
            };
            let [wx, wy, ww, wh, wo] = wm_rects[i];
            *plane = PlaneParams {
                out_w: w,
                out_h: h,
                word_start: to_u32(out_layout.word_starts[i], "output plane offset")?,
                row_words: out_layout.row_words[i],
                src_off: to_i32(origin, "plane origin")?,
                src_sx: to_i32(step_x, "plane step")?,
                src_sy: to_i32(step_y, "plane step")?,
                oth_off: to_i32(other, "plane origin")?,
                src_w: sdw,
                src_h: sdh,
                _pad: [0; 4],
                wm_x: wx,
                wm_y: wy,
                wm_w: ww,
                wm_h: wh,
                wm_off: wo,
                _pad4: 0,
            };
        }

        let affine = filter::color_affine(cfg.src_color, cfg.out_color);
        debug_assert!(affine.rows[1][0].abs() < 1e-9 && affine.rows[2][0].abs() < 1e-9);
        let rx = dw as f64 / ow as f64;
        let ry = dh as f64 / oh as f64;
        // Output luma centre -> source display luma ((o + 0.5) * r - 0.5) -> chroma sample
        // ((l - 0.5) / 2, centre-sited).
        let luma_to_chroma = [
            (rx / 2.0) as f32,
            ((0.5 * rx - 1.0) / 2.0) as f32,
            (ry / 2.0) as f32,
            ((0.5 * ry - 1.0) / 2.0) as f32,
        ];

        // Two dispatches in one pass, one workgroup row per output row: luma, then chroma
        // with U in the first half of each row of workgroups and V in the second.
        let luma_groups = out_layout.row_words[0].div_ceil(WORKGROUP_SIZE);
        let chroma_groups = out_layout.row_words[1].div_ceil(WORKGROUP_SIZE);
        let max_groups = limits.max_compute_workgroups_per_dimension;
        if luma_groups.max(2 * chroma_groups) > max_groups || oh > max_groups {
            return Err(invalid(format!(
                "a {ow}x{oh} output needs more workgroups than the device's {max_groups} per dimension"
            )));
        }
        // Unrotated rows of 8-bit samples (planar, or NV12's interleaved chroma) are runs of
        // bytes: load whole words per source row when they are few.
        let fast_step = |plane: usize| {
            let b = in_layout.plane_bytes(plane);
            let fast = cfg.rotation == Rotation::None && cfg.src_format.sample_bytes() == 1;
            if fast { b.step as u32 } else { 0 }
        };
        let row_words = |plane: usize, (s, d): (u32, u32), taps: usize| {
            let step = fast_step(plane);
            let words = filter::row_words(s, d, taps, step);
            if step > 0 && words <= MAX_ROW_WORDS {
                words
            } else {
                0
            }
        };
        let key = |is_chroma: bool, axes: [(u32, u32); 2], taps: [usize; 2]| PipelineKey {
            is_chroma,
            sample16: cfg.src_format.sample_bytes() == 2,
            mode: affine.mode as u32,
            has_watermark: cfg.watermark.is_some(),
            kern_x: kernel(axes[0].0, axes[0].1),
            kern_y: kernel(axes[1].0, axes[1].1),
            taps_x: taps[0] as u32,
            taps_y: taps[1] as u32,
            row_words: row_words(is_chroma as usize, axes[0], taps[0]),
            row_step: fast_step(is_chroma as usize).max(1),
        };
        let dispatches = [
            (
                ctx.pipeline(key(false, [(dw, ow), (dh, oh)], [taps[0], taps[1]]))?,
                luma_groups,
                oh,
            ),
            (
                ctx.pipeline(key(true, [(dcw, ocw), (dch, och)], [taps[2], taps[3]]))?,
                2 * chroma_groups,
                och,
            ),
        ];
        let params = Params {
            planes,
            mat: affine.rows.map(|r| r.map(|v| v as f32)),
            luma_to_chroma,
            misc: [oh, affine.mode as u32, chroma_groups, och],
            misc2: [dcw, dch, out_layout.scratch_word as u32, 0],
        };

        let device = &ctx.inner.device;
        let queue = &ctx.inner.queue;
        let oom_scope = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let val_scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let params_buf = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("compose params"),
            size: std::mem::size_of::<Params>() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        queue.write_buffer(&params_buf, 0, bytemuck::bytes_of(&params));
        let wm_buf = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("compose watermark"),
            size: wm_bytes.len() as u64,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        queue.write_buffer(&wm_buf, 0, &wm_bytes);
        let input = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("compose input"),
            size: in_layout.size,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let output = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("compose output"),
            size: out_layout.size,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("compose"),
            layout: &ctx.inner.layout,
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: params_buf.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: input.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: wm_buf.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 3,
                    resource: output.as_entire_binding(),
                },
            ],
        });
        let shared = Shared {
            ctx: ctx.clone(),
            bind_group,
            input,
            output,
            in_layout,
            out_layout,
            dispatches,
            out_size: (ow, oh),
            _params: params_buf,
            _wm: wm_buf,
        };
        let slots: Vec<Slot> = (0..frames_in_flight).map(|_| shared.new_slot()).collect();
        if let Some(e) = pollster::block_on(val_scope.pop()) {
            return Err(GpuError::Device(format!(
                "creating compositor resources: {e}"
            )));
        }
        if let Some(e) = pollster::block_on(oom_scope.pop()) {
            return Err(GpuError::OutOfMemory(format!(
                "{frames_in_flight} frame slots of {} + {} bytes: {e}",
                in_layout.size, out_layout.size
            )));
        }

        tracing::debug!(
            src = format!("{sw}x{sh}"),
            rotation = cfg.rotation.degrees(),
            out = format!("{ow}x{oh}"),
            kernels = ?(kernel(dw, ow), kernel(dh, oh)),
            taps = ?taps,
            colour = ?affine.mode,
            watermark = cfg.watermark.is_some(),
            frames_in_flight,
            adapter = %ctx.adapter().name,
            "GPU compositor ready"
        );
        Ok(Self {
            shared,
            free: (0..frames_in_flight).rev().collect(),
            slots,
            in_flight: VecDeque::with_capacity(frames_in_flight),
            preview: None,
        })
    }

    /// Queue a frame; once `frames_in_flight` are queued, returns the oldest finished output (FIFO).
    ///
    /// Precisely: when every slot is busy, the oldest frame is waited for and returned, and the
    /// new frame takes its slot, so `frames_in_flight` frames stay queued on the GPU.
    pub fn submit<'a>(
        &mut self,
        frame: impl Into<SourceFrame<'a>>,
    ) -> Result<Option<Yuv420Frame>, GpuError> {
        let frame = frame.into();
        self.shared.check_frame(&frame)?;
        let done = if self.free.is_empty() {
            Some(self.retrieve_oldest()?)
        } else {
            None
        };
        let Some(index) = self.free.pop() else {
            return Err(GpuError::Device(
                "no free frame slot after draining the oldest".into(),
            ));
        };
        match self.shared.run(&mut self.slots[index], &frame) {
            Ok(()) => self.in_flight.push_back(index),
            Err(e) => {
                self.free.push(index);
                return Err(e);
            }
        }
        Ok(done)
    }

    /// Drain every frame still in flight, in order.
    pub fn finish(&mut self) -> Result<Vec<Yuv420Frame>, GpuError> {
        let mut out = Vec::with_capacity(self.in_flight.len());
        while !self.in_flight.is_empty() {
            out.push(self.retrieve_oldest()?);
        }
        Ok(out)
    }

    /// Convenience: compose one frame synchronously (preview). Uses its own buffers, so frames
    /// already in flight are unaffected and still come out of `submit`/`finish` in order.
    pub fn compose_one<'a>(
        &mut self,
        frame: impl Into<SourceFrame<'a>>,
    ) -> Result<Yuv420Frame, GpuError> {
        let frame = frame.into();
        self.shared.check_frame(&frame)?;
        let slot = match &mut self.preview {
            Some(slot) => slot,
            None => self.preview.insert(self.shared.new_slot()),
        };
        self.shared.run(slot, &frame)?;
        self.shared.retrieve(slot)
    }

    /// GPU time of the compose pass alone (no upload, no readback), by timestamp queries:
    /// `frame` is uploaded once, then composed `iterations` times in one pass. `None` when the
    /// adapter records no timestamps. Frames in flight are unaffected.
    pub fn kernel_timing<'a>(
        &mut self,
        frame: impl Into<SourceFrame<'a>>,
        iterations: u32,
    ) -> Result<Option<KernelTiming>, GpuError> {
        let ctx = self.shared.ctx.clone();
        if !ctx.inner.timestamps || iterations == 0 {
            return Ok(None);
        }
        // Leaves `frame` in the device input buffer.
        self.compose_one(frame)?;
        let device = &ctx.inner.device;
        let queue = &ctx.inner.queue;
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let queries = device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("compose kernel timing"),
            ty: wgpu::QueryType::Timestamp,
            count: 2,
        });
        let resolve = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("compose kernel timing resolve"),
            size: 16,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let read = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("compose kernel timing read"),
            size: 16,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("compose kernel timing"),
        });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("compose kernel timing"),
                timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                    query_set: &queries,
                    beginning_of_pass_write_index: Some(0),
                    end_of_pass_write_index: Some(1),
                }),
            });
            pass.set_bind_group(0, &self.shared.bind_group, &[]);
            for _ in 0..iterations {
                for (pipeline, x, y) in &self.shared.dispatches {
                    pass.set_pipeline(pipeline);
                    pass.dispatch_workgroups(*x, *y, 1);
                }
            }
        }
        encoder.resolve_query_set(&queries, 0..2, &resolve, 0);
        encoder.copy_buffer_to_buffer(&resolve, 0, &read, 0, 16);
        let submission = queue.submit([encoder.finish()]);
        let state = Arc::new(AtomicU8::new(PENDING));
        let done = state.clone();
        read.map_async(wgpu::MapMode::Read, .., move |r| {
            done.store(if r.is_ok() { READY } else { FAILED }, Ordering::Release);
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(GpuError::Device(format!("timing the compose pass: {e}")));
        }
        self.shared.wait_for(&state, Some(&submission))?;
        let ticks = {
            let view = read
                .get_mapped_range(..)
                .map_err(|e| GpuError::Map(format!("timestamp buffer: {e}")))?;
            let t: [u64; 2] = bytemuck::pod_read_unaligned(&view[..16]);
            t[1].saturating_sub(t[0])
        };
        read.unmap();
        let nanos = ticks as f64 * f64::from(queue.get_timestamp_period());
        let luma = self.shared.in_layout.luma;
        let src_bytes = self
            .shared
            .in_layout
            .planes
            .iter()
            .map(|p| p.1 as u64 * p.2 as u64);
        Ok(Some(KernelTiming {
            per_frame: Duration::from_secs_f64(nanos / 1e9 / f64::from(iterations)),
            // Each source byte read once and each output byte written once: the least a
            // pass must move (the filter's overlapping windows hit the caches).
            bytes_per_frame: src_bytes.sum::<u64>() + self.shared.out_layout.size,
            source: luma,
        }))
    }

    /// Bytes of GPU-visible memory this compositor holds: its ring of upload and readback
    /// buffers, the device input and output buffers, the watermark and the parameters (a
    /// preview slot, once used, counts too). What one render costs on the card.
    pub fn gpu_bytes(&self) -> u64 {
        let shared = &self.shared;
        let slot = shared.in_layout.size + shared.out_layout.size;
        let slots = (self.slots.len() + self.preview.is_some() as usize) as u64;
        slots * slot
            + shared.in_layout.size
            + shared.out_layout.size
            + shared._wm.size()
            + shared._params.size()
    }

    /// Frames submitted and not yet returned.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// The adapter this compositor runs on.
    pub fn adapter(&self) -> &crate::AdapterSummary {
        self.shared.ctx.adapter()
    }

    fn retrieve_oldest(&mut self) -> Result<Yuv420Frame, GpuError> {
        let Some(index) = self.in_flight.pop_front() else {
            return Err(GpuError::Device("no frame in flight".into()));
        };
        // The slot is reusable whatever happens: a failed readback is reported, not retried.
        self.free.push(index);
        self.shared.retrieve(&mut self.slots[index])
    }
}

impl Shared {
    fn new_slot(&self) -> Slot {
        let device = &self.ctx.inner.device;
        let upload = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("compose upload"),
            size: self.in_layout.size,
            usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: true,
        });
        let readback = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("compose readback"),
            size: self.out_layout.size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Slot {
            upload,
            readback,
            upload_state: Arc::new(AtomicU8::new(READY)),
            readback_state: Arc::new(AtomicU8::new(PENDING)),
            submission: None,
        }
    }

    fn check_frame(&self, frame: &SourceFrame) -> Result<(), GpuError> {
        let (w, h) = self.in_layout.luma;
        let mismatch = |detail: String| GpuError::FrameSizeMismatch {
            expected_width: w,
            expected_height: h,
            width: frame.width,
            height: frame.height,
            detail,
        };
        if (frame.width, frame.height) != (w, h) {
            return Err(mismatch("dimensions differ".into()));
        }
        let format = self.in_layout.format;
        if frame.format != format {
            return Err(mismatch(format!(
                "the frame is {} but the compositor was built for {}",
                frame.format.as_str(),
                format.as_str()
            )));
        }
        for (i, &(data, stride)) in frame.planes.iter().enumerate().take(format.plane_count()) {
            let (_, row, rows) = self.in_layout.planes[i];
            let need = stride
                .saturating_mul(rows.saturating_sub(1))
                .saturating_add(row);
            if stride < row || data.len() < need {
                return Err(mismatch(format!(
                    "plane {i} has {} bytes with a {stride}-byte stride; {rows} rows of {row} \
                     bytes need a stride of at least {row} and {need} bytes",
                    data.len()
                )));
            }
        }
        Ok(())
    }

    fn check_lost(&self) -> Result<(), GpuError> {
        match self.ctx.lost() {
            Some(reason) => Err(GpuError::DeviceLost(reason)),
            None => Ok(()),
        }
    }

    /// Blocks until `state` leaves PENDING, driving the device up to `submission`.
    fn wait_for(
        &self,
        state: &AtomicU8,
        submission: Option<&wgpu::SubmissionIndex>,
    ) -> Result<(), GpuError> {
        let device = &self.ctx.inner.device;
        let deadline = Instant::now() + FRAME_TIMEOUT;
        // A Wait returns once our submission is done and the callbacks its poll collected
        // have run. With many compositors on one device another thread's poll may have
        // collected our map callback and not have run it yet: then wait for it (bounded).
        while state.load(Ordering::Acquire) == PENDING {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            device
                .poll(wgpu::PollType::Wait {
                    submission_index: submission.cloned(),
                    timeout: Some(left),
                })
                .map_err(|e| GpuError::Poll(e.to_string()))?;
            if state.load(Ordering::Acquire) == PENDING {
                if self.ctx.lost().is_some() {
                    break;
                }
                std::thread::sleep(CALLBACK_WAIT);
            }
        }
        match state.load(Ordering::Acquire) {
            READY => Ok(()),
            FAILED => {
                self.check_lost()?;
                Err(GpuError::Map("the buffer could not be mapped".into()))
            }
            _ => {
                self.check_lost()?;
                Err(GpuError::Poll(format!(
                    "the buffer mapping did not complete within {} s",
                    FRAME_TIMEOUT.as_secs()
                )))
            }
        }
    }

    /// Uploads `frame` into `slot` and submits the compose work for it.
    fn run(&self, slot: &mut Slot, frame: &SourceFrame) -> Result<(), GpuError> {
        self.check_lost()?;
        let inner = &self.ctx.inner;
        self.wait_for(&slot.upload_state, slot.submission.as_ref())?;
        {
            let mut view = slot
                .upload
                .get_mapped_range_mut(..)
                .map_err(|e| GpuError::Map(format!("upload buffer: {e}")))?;
            let format = self.in_layout.format;
            for (i, &(data, stride)) in frame.planes.iter().enumerate().take(format.plane_count()) {
                let (start, row, rows) = self.in_layout.planes[i];
                let start = start as usize;
                if stride == row {
                    view.slice(start..start + row * rows)
                        .copy_from_slice(&data[..row * rows]);
                } else {
                    // Decoders pad their rows: drop the padding.
                    for r in 0..rows {
                        view.slice(start + r * row..start + (r + 1) * row)
                            .copy_from_slice(&data[r * stride..r * stride + row]);
                    }
                }
            }
        }
        slot.upload.unmap();
        slot.upload_state.store(PENDING, Ordering::Release);
        // A readback left mapped by an earlier failure would make this submission invalid.
        if slot.readback_state.swap(PENDING, Ordering::AcqRel) == READY {
            slot.readback.unmap();
        }

        let scope = inner.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let mut encoder = inner
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("compose"),
            });
        encoder.copy_buffer_to_buffer(&slot.upload, 0, &self.input, 0, self.in_layout.size);
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("compose"),
                timestamp_writes: None,
            });
            pass.set_bind_group(0, &self.bind_group, &[]);
            for (pipeline, x, y) in &self.dispatches {
                pass.set_pipeline(pipeline);
                pass.dispatch_workgroups(*x, *y, 1);
            }
        }
        encoder.copy_buffer_to_buffer(&self.output, 0, &slot.readback, 0, self.out_layout.size);
        let submission = inner.queue.submit([encoder.finish()]);
        let state = slot.upload_state.clone();
        slot.upload.map_async(wgpu::MapMode::Write, .., move |r| {
            state.store(if r.is_ok() { READY } else { FAILED }, Ordering::Release);
        });
        let state = slot.readback_state.clone();
        slot.readback.map_async(wgpu::MapMode::Read, .., move |r| {
            state.store(if r.is_ok() { READY } else { FAILED }, Ordering::Release);
        });
        slot.submission = Some(submission);
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(GpuError::Device(format!("submitting a frame: {e}")));
        }
        Ok(())
    }

    /// Waits for `slot`'s frame and copies its planes out.
    fn retrieve(&self, slot: &mut Slot) -> Result<Yuv420Frame, GpuError> {
        self.wait_for(&slot.readback_state, slot.submission.as_ref())?;
        let frame = slot
            .readback
            .get_mapped_range(..)
            .map_err(|e| GpuError::Map(format!("readback buffer: {e}")))
            .map(|view| Yuv420Frame {
                width: self.out_size.0,
                height: self.out_size.1,
                y: self.out_layout.extract(&view, 0),
                u: self.out_layout.extract(&view, 1),
                v: self.out_layout.extract(&view, 2),
            });
        // Unmap even on failure, so the slot can be submitted again.
        slot.readback.unmap();
        slot.readback_state.store(PENDING, Ordering::Release);
        frame
    }
}
