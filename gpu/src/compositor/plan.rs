//! Everything the compose pass needs, derived from a [`ComposeConfig`] on the CPU before any
//! device object exists: the buffer layouts, the uniform block the shader reads, the packed
//! watermark, and per plane group (luma, then chroma) the pipeline specialisation and its
//! workgroup counts. The checks of `checks.rs` run as each value is derived.

use bytemuck::{Pod, Zeroable};

use super::ComposeConfig;
use super::checks::{self, to_i32, to_u32};
use super::layout::{InLayout, MAX_ROW_WORDS, OutLayout, plane_addressing};
use crate::context::PipelineKey;
use crate::error::GpuError;
use crate::filter::{self, ColorMode, Kernel};
use crate::frame::tonemap::ToneUniforms;
use crate::frame::{OutputLight, PreparedWatermark, Rotation, SampleDepth, Yuv420Frame};

/// Must match `@workgroup_size` in compose.wgsl.
const WORKGROUP_SIZE: u32 = 64;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub(super) struct PlaneParams {
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
pub(super) struct Params {
    planes: [PlaneParams; 3],
    mat: [[f32; 4]; 3],
    luma_to_chroma: [f32; 4],
    misc: [u32; 4],
    misc2: [u32; 4],
    chroma_to_luma: [f32; 4],
    tone: ToneUniforms,
}

// The WGSL uniform layout: 3 * 80 + 3 * 16 + 4 * 16 + 240 bytes, no implicit padding.
const _: () = assert!(std::mem::size_of::<Params>() == 592);

/// The sizes the pass works with, luma and chroma: the source in display orientation (after
/// rotation) and the output.
#[derive(Clone, Copy, Debug)]
pub(super) struct Sizes {
    pub(super) display: (u32, u32),
    pub(super) display_chroma: (u32, u32),
    pub(super) out: (u32, u32),
    pub(super) out_chroma: (u32, u32),
}

impl Sizes {
    fn new(cfg: &ComposeConfig) -> Self {
        let (sw, sh) = (cfg.src_width, cfg.src_height);
        let (scw, sch) = Yuv420Frame::chroma_size(sw, sh);
        Self {
            display: cfg.rotation.display_size(sw, sh),
            display_chroma: cfg.rotation.display_size(scw, sch),
            out: (cfg.out_width, cfg.out_height),
            out_chroma: Yuv420Frame::chroma_size(cfg.out_width, cfg.out_height),
        }
    }

    /// Per axis, (display source samples, output samples): luma x, luma y, chroma x, chroma y.
    fn axes(&self) -> [(u32, u32); 4] {
        let ((dw, dh), (dcw, dch)) = (self.display, self.display_chroma);
        let ((ow, oh), (ocw, och)) = (self.out, self.out_chroma);
        [(dw, ow), (dh, oh), (dcw, ocw), (dch, och)]
    }
}

/// A checked config, ready to become device objects.
pub(super) struct Plan {
    pub(super) sizes: Sizes,
    pub(super) in_layout: InLayout,
    pub(super) out_layout: OutLayout,
    /// The filter's widest window per axis: luma x, luma y, chroma x, chroma y.
    pub(super) taps: [usize; 4],
    pub(super) mode: ColorMode,
    /// The uniform block (binding 0).
    pub(super) params: Params,
    /// The watermark planes as the shader reads them (binding 2).
    pub(super) wm_bytes: Vec<u8>,
    /// (pipeline key, workgroups x, workgroups y) for luma, then chroma.
    pub(super) dispatches: [(PipelineKey, u32, u32); 2],
}

impl Plan {
    /// Checks `cfg` against `limits` and derives the pass, step by step; the source rows in
    /// the input buffer start at multiples of `row_align` bytes (1: tightly packed).
    pub(super) fn new(
        cfg: &ComposeConfig,
        limits: &wgpu::Limits,
        row_align: usize,
    ) -> Result<Self, GpuError> {
        checks::config(cfg, limits.max_texture_dimension_2d)?;
        let sizes = Sizes::new(cfg);
        let in_layout = InLayout::new(cfg.src_width, cfg.src_height, cfg.src_format, row_align);
        let out_layout = OutLayout::new(cfg.out_width, cfg.out_height, cfg.light.depth());
        let max_binding = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size);
        checks::buffers(cfg, &in_layout, &out_layout, max_binding)?;
        // The filter's widest window per axis (the shader computes the weights themselves).
        let taps = sizes.axes().map(|(s, d)| filter::axis_filter(s, d).taps);
        checks::taps(&taps, sizes.display, sizes.out)?;
        let (wm_bytes, wm_rects) = pack_watermark(cfg.watermark.as_ref())?;
        checks::watermark_bytes(wm_bytes.len(), max_binding)?;
        let planes = plane_params(cfg.rotation, &sizes, &in_layout, &out_layout, &wm_rects)?;
        let affine = filter::color_affine(cfg.src_color, cfg.light.out_color());
        let mode = match cfg.light {
            OutputLight::ToneMapped(_) => ColorMode::ToneMap,
            OutputLight::Sdr | OutputLight::Kept { .. } => affine.mode,
        };
        debug_assert!(affine.rows[1][0].abs() < 1e-9 && affine.rows[2][0].abs() < 1e-9);
        let (luma_groups, chroma_groups) = workgroups(&out_layout);
        let max_groups = limits.max_compute_workgroups_per_dimension;
        checks::workgroups(luma_groups, chroma_groups, sizes.out, max_groups)?;

        let [lx, ly, cx, cy] = sizes.axes();
        let key =
            |is_chroma, axes, taps| pipeline_key(cfg, &in_layout, mode, is_chroma, axes, taps);
        let (oh, och) = (sizes.out.1, sizes.out_chroma.1);
        let dispatches = [
            (key(false, [lx, ly], [taps[0], taps[1]]), luma_groups, oh),
            (
                key(true, [cx, cy], [taps[2], taps[3]]),
                2 * chroma_groups,
                och,
            ),
        ];
        let (dcw, dch) = sizes.display_chroma;
        let params = Params {
            planes,
            mat: affine.rows.map(|r| r.map(|v| v as f32)),
            luma_to_chroma: luma_to_chroma(&sizes),
            misc: [oh, mode as u32, chroma_groups, och],
            misc2: [dcw, dch, out_layout.scratch_word as u32, 0],
            chroma_to_luma: chroma_to_luma(&sizes),
            tone: cfg
                .light
                .tone_map()
                .map(|t| t.uniforms())
                .unwrap_or_default(),
        };
        Ok(Self {
            sizes,
            in_layout,
            out_layout,
            taps,
            mode,
            params,
            wm_bytes,
            dispatches,
        })
    }
}

/// Watermark: per plane, (value, alpha) pairs row-major, planes back to back, so four
/// adjacent samples are contiguous: byte pairs for 8-bit output (8 bytes per four samples),
/// for 10-bit one little-endian word per pair, `value | alpha << 16`. Also per plane (Y, U,
/// V) its rectangle in output samples and its byte offset: `[x, y, w, h, offset]` (zeros
/// without a watermark).
fn pack_watermark(wm: Option<&PreparedWatermark>) -> Result<(Vec<u8>, [[u32; 5]; 3]), GpuError> {
    let mut wm_bytes = Vec::new();
    let mut wm_rects = [[0u32; 5]; 3];
    if let Some(wm) = wm {
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
            let pairs = values.iter().zip(alphas.iter());
            match wm.depth {
                // Code values of the watermark's depth: 8-bit ones fit their byte.
                SampleDepth::Eight => wm_bytes.extend(pairs.flat_map(|(&v, &a)| [v as u8, a])),
                SampleDepth::Ten => wm_bytes.extend(
                    pairs.flat_map(|(&v, &a)| (u32::from(v) | u32::from(a) << 16).to_le_bytes()),
                ),
            }
        }
    }
    // Whole words, plus the two words a row-end load may read past the last pair.
    wm_bytes.resize((wm_bytes.len().div_ceil(4) + 2) * 4, 0);
    Ok((wm_bytes, wm_rects))
}

/// Per output plane (Y, U, V): its size and words, where its display-space source samples
/// are in the input buffer (origin, column and row steps; for U and V also the other chroma
/// plane's origin), its display source size and its watermark rectangle.
fn plane_params(
    rotation: Rotation,
    sizes: &Sizes,
    in_layout: &InLayout,
    out_layout: &OutLayout,
    wm_rects: &[[u32; 5]; 3],
) -> Result<[PlaneParams; 3], GpuError> {
    let addressing: [(i64, i64, i64); 3] = std::array::from_fn(|i| {
        let (w, h) = in_layout.plane_dims(i);
        plane_addressing(rotation, in_layout.plane_bytes(i), w as i64, h as i64)
    });
    let mut planes = [PlaneParams::default(); 3];
    for (i, plane) in planes.iter_mut().enumerate() {
        let (w, h) = out_layout.dims[i];
        let (sdw, sdh) = if i == 0 {
            sizes.display
        } else {
            sizes.display_chroma
        };
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
    Ok(planes)
}

/// Output luma centre -> source display luma ((o + 0.5) * r - 0.5) -> chroma sample
/// ((l - 0.5) / 2, centre-sited): scale and offset for x, then for y.
fn luma_to_chroma(sizes: &Sizes) -> [f32; 4] {
    let ((dw, dh), (ow, oh)) = (sizes.display, sizes.out);
    let rx = dw as f64 / ow as f64;
    let ry = dh as f64 / oh as f64;
    [
        (rx / 2.0) as f32,
        ((0.5 * rx - 1.0) / 2.0) as f32,
        (ry / 2.0) as f32,
        ((0.5 * ry - 1.0) / 2.0) as f32,
    ]
}

/// Output chroma (x, y) -> source display luma position, the centre of the 2x2 output luma
/// samples it covers: (x * a.x + a.y, y * a.z + a.w). Tone mapping reads luma there.
fn chroma_to_luma(sizes: &Sizes) -> [f32; 4] {
    let ((dw, dh), (ow, oh)) = (sizes.display, sizes.out);
    let rx = dw as f64 / ow as f64;
    let ry = dh as f64 / oh as f64;
    [
        (2.0 * rx) as f32,
        (rx - 0.5) as f32,
        (2.0 * ry) as f32,
        (ry - 0.5) as f32,
    ]
}

/// Two dispatches in one pass, one workgroup row per output row (an invocation per four
/// samples): luma, then chroma with U in the first half of each row of workgroups and V in
/// the second. Returns the workgroups per row of luma and of one chroma plane.
fn workgroups(out_layout: &OutLayout) -> (u32, u32) {
    let luma_groups = out_layout.row_quads[0].div_ceil(WORKGROUP_SIZE);
    let chroma_groups = out_layout.row_quads[1].div_ceil(WORKGROUP_SIZE);
    (luma_groups, chroma_groups)
}

/// The shader's kernel flag for resampling `s` samples to `d`: 1 bicubic, 0 area.
fn kernel(s: u32, d: u32) -> u32 {
    (filter::kernel_for(s, d) == Kernel::Bicubic) as u32
}

/// Unrotated rows of 8-bit samples (planar, or NV12's interleaved chroma) are runs of bytes:
/// the byte step between samples of `plane`, whose rows the shader may load as whole words;
/// 0 when they are not such runs.
fn fast_step(cfg: &ComposeConfig, in_layout: &InLayout, plane: usize) -> u32 {
    let b = in_layout.plane_bytes(plane);
    let fast = cfg.rotation == Rotation::None && cfg.src_format.sample_bytes() == 1;
    if fast { b.step as u32 } else { 0 }
}

/// Words per source row to load whole when a fast row's window spans few of them, else 0.
fn row_words(step: u32, (s, d): (u32, u32), taps: usize) -> u32 {
    let words = filter::row_words(s, d, taps, step);
    if step > 0 && words <= MAX_ROW_WORDS {
        words
    } else {
        0
    }
}

/// The specialisation of compose.wgsl for one plane group: luma, or (`is_chroma`) both chroma
/// planes; `axes` and `taps` for x, then y.
fn pipeline_key(
    cfg: &ComposeConfig,
    in_layout: &InLayout,
    mode: ColorMode,
    is_chroma: bool,
    axes: [(u32, u32); 2],
    taps: [usize; 2],
) -> PipelineKey {
    let step = fast_step(cfg, in_layout, is_chroma as usize);
    PipelineKey {
        is_chroma,
        sample16: cfg.src_format.sample_bytes() == 2,
        out16: cfg.light.depth() == SampleDepth::Ten,
        mode: mode as u32,
        has_watermark: cfg.watermark.is_some(),
        kern_x: kernel(axes[0].0, axes[0].1),
        kern_y: kernel(axes[1].0, axes[1].1),
        taps_x: taps[0] as u32,
        taps_y: taps[1] as u32,
        row_words: row_words(step, axes[0], taps[0]),
        row_step: step.max(1),
    }
}
