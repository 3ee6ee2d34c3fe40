//! A [`ComposeConfig`] against what the compositor and the device can do: each check returns
//! the typed [`GpuError::InvalidConfig`] that names the offending value. Run in the order
//! [`GpuCompositor::new`](super::GpuCompositor::new) meets them, so a bad config always
//! reports the same first problem.

use super::ComposeConfig;
use super::MAX_FRAMES_IN_FLIGHT;
use super::layout::{InLayout, OutLayout};
use crate::error::GpuError;
use crate::filter::MAX_TAPS;
use crate::frame::{PreparedWatermark, SampleDepth};

pub(super) fn invalid(reason: impl Into<String>) -> GpuError {
    GpuError::InvalidConfig {
        reason: reason.into(),
    }
}

pub(super) fn to_i32(v: i64, what: &str) -> Result<i32, GpuError> {
    i32::try_from(v).map_err(|_| invalid(format!("{what} ({v}) exceeds 32 bits")))
}

pub(super) fn to_u32(v: u64, what: &str) -> Result<u32, GpuError> {
    u32::try_from(v).map_err(|_| invalid(format!("{what} ({v}) exceeds 32 bits")))
}

/// The ring holds 1..=[`MAX_FRAMES_IN_FLIGHT`] slots.
pub(super) fn frames_in_flight(frames_in_flight: usize) -> Result<(), GpuError> {
    if !(1..=MAX_FRAMES_IN_FLIGHT).contains(&frames_in_flight) {
        return Err(invalid(format!(
            "frames_in_flight must be 1..={MAX_FRAMES_IN_FLIGHT}, got {frames_in_flight}"
        )));
    }
    Ok(())
}

/// Every size in 1..=`max_dim`, and the watermark inside the output.
pub(super) fn config(cfg: &ComposeConfig, max_dim: u32) -> Result<(), GpuError> {
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
        watermark(wm, cfg.out_width, cfg.out_height, cfg.light.depth())?;
    }
    Ok(())
}

/// The placement fits the `out_w x out_h` output, the watermark was prepared for the output's
/// depth, and every plane has its placement's size.
fn watermark(
    wm: &PreparedWatermark,
    out_w: u32,
    out_h: u32,
    depth: SampleDepth,
) -> Result<(), GpuError> {
    let p = wm.placement;
    let fits = |pos: u32, len: u32, max: u32| pos as u64 + len as u64 <= max as u64;
    if !fits(p.x, p.width, out_w) || !fits(p.y, p.height, out_h) {
        return Err(invalid(format!(
            "watermark placement {}x{} at ({}, {}) does not fit the {out_w}x{out_h} output",
            p.width, p.height, p.x, p.y
        )));
    }
    if wm.depth != depth {
        return Err(invalid(format!(
            "the watermark is prepared for {}-bit frames but the output is {}-bit",
            wm.depth.bits(),
            depth.bits()
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
                "watermark plane {name} has {got} samples, expected {want} for a {}x{} placement",
                p.width, p.height
            )));
        }
    }
    Ok(())
}

/// Both device buffers within the storage binding limit, and their addresses within the
/// shader's integers.
pub(super) fn buffers(
    cfg: &ComposeConfig,
    in_layout: &InLayout,
    out_layout: &OutLayout,
    max_binding: u64,
) -> Result<(), GpuError> {
    let (sw, sh) = (cfg.src_width, cfg.src_height);
    let (ow, oh) = (cfg.out_width, cfg.out_height);
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
    Ok(())
}

/// No axis window wider than [`MAX_TAPS`]; `taps` per axis: luma x, luma y, chroma x, chroma y.
pub(super) fn taps(
    taps: &[usize; 4],
    display: (u32, u32),
    out: (u32, u32),
) -> Result<(), GpuError> {
    let ((dw, dh), (ow, oh)) = (display, out);
    if let Some(&t) = taps.iter().find(|&&t| t > MAX_TAPS) {
        return Err(invalid(format!(
            "scaling {dw}x{dh} to {ow}x{oh} shrinks more than the compositor supports \
             ({t} taps per axis, max {MAX_TAPS})"
        )));
    }
    Ok(())
}

/// The packed watermark within the storage binding limit.
pub(super) fn watermark_bytes(len: usize, max_binding: u64) -> Result<(), GpuError> {
    if len as u64 > max_binding {
        return Err(invalid(
            "the watermark exceeds the device's storage binding limit",
        ));
    }
    Ok(())
}

/// One workgroup row per output row, and luma's (or both chroma planes') words per row
/// within the device's workgroups per dimension.
pub(super) fn workgroups(
    luma_groups: u32,
    chroma_groups: u32,
    out: (u32, u32),
    max_groups: u32,
) -> Result<(), GpuError> {
    let (ow, oh) = out;
    if luma_groups.max(2 * chroma_groups) > max_groups || oh > max_groups {
        return Err(invalid(format!(
            "a {ow}x{oh} output needs more workgroups than the device's {max_groups} per dimension"
        )));
    }
    Ok(())
}
