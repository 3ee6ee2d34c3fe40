//! Production wiring of the engine seam to `vidforge-media`.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use vidforge_media as media;

use crate::config::Config;
use crate::engine::{
    EngineError, EngineProgress, EngineReport, EngineSegmentReport, HardwareInfo, Prober,
    RenderPlan, Renderer, SegmentFile, SegmentPlanOptions, SegmentSpan,
};
use crate::store::{AssetColor, AssetProbe};

/// [`Renderer`] backed by `vidforge_media::Engine`.
pub struct MediaRenderer {
    engine: media::Engine,
}

impl MediaRenderer {
    /// Initialises the engine: the GPU adapter, the CUDA device and the NVENC probe are
    /// chosen here, once for the process.
    pub fn new(config: &Config) -> Result<Self, EngineError> {
        let hardware = media::HardwareChoice {
            decode: config.hwdecode,
            encoder: config.encoder,
            zero_copy: config.zero_copy,
        };
        let engine =
            media::Engine::with_hardware(config.backend, hardware, media::Workload::Service)
                .map_err(map_error)?;
        Ok(MediaRenderer { engine })
    }
}

fn map_error(e: media::MediaError) -> EngineError {
    EngineError::new(e.kind(), e.to_string())
}

impl Renderer for MediaRenderer {
    fn backend_name(&self) -> String {
        self.engine.backend_name()
    }

    fn hardware(&self) -> HardwareInfo {
        let plan = self.engine.hardware_plan();
        HardwareInfo {
            compositor: self.engine.backend_name(),
            decoder: plan.decode.as_str().into(),
            h264_encoder: self.engine.h264_encoder().ffmpeg_name().into(),
            why: plan.why.clone(),
        }
    }

    fn render(
        &self,
        plan: &RenderPlan,
        progress: &mut dyn FnMut(EngineProgress),
        cancel: &AtomicBool,
    ) -> Result<EngineReport, EngineError> {
        self.engine
            .render(plan, progress, cancel)
            .map_err(map_error)
    }

    fn render_preview(
        &self,
        plan: &RenderPlan,
        png_out: &Path,
        view_out: &Path,
    ) -> Result<(u32, u32), EngineError> {
        self.engine
            .render_preview(plan, png_out, Some(view_out))
            .map_err(map_error)
    }

    fn plan_segments(
        &self,
        plan: &RenderPlan,
        options: &SegmentPlanOptions,
    ) -> Result<Vec<SegmentSpan>, EngineError> {
        self.engine
            .plan_segments(&plan.input, options)
            .map_err(map_error)
    }

    fn render_segment(
        &self,
        plan: &RenderPlan,
        span: &SegmentSpan,
        out: &Path,
        progress: &mut dyn FnMut(EngineProgress),
        cancel: &AtomicBool,
    ) -> Result<EngineSegmentReport, EngineError> {
        self.engine
            .render_segment(plan, span, out, progress, cancel)
            .map_err(map_error)
    }

    fn join_segments(
        &self,
        plan: &RenderPlan,
        segments: &[SegmentFile],
        progress: &mut dyn FnMut(EngineProgress),
        cancel: &AtomicBool,
    ) -> Result<EngineReport, EngineError> {
        self.engine
            .join_segments(plan, segments, progress, cancel)
            .map_err(map_error)
    }
}

/// [`Prober`] backed by `vidforge_media::probe`.
#[derive(Debug, Default, Clone, Copy)]
pub struct MediaProber;

impl Prober for MediaProber {
    fn probe_video(
        &self,
        path: &Path,
        limits: &media::SourceLimits,
    ) -> Result<AssetProbe, EngineError> {
        let info = media::probe_within(path, limits).map_err(map_error)?;
        let video = info.video.as_ref();
        Ok(AssetProbe {
            width: video.map(|v| v.width),
            height: video.map(|v| v.height),
            duration_seconds: Some(info.duration_seconds).filter(|d| d.is_finite() && *d > 0.0),
            video_codec: video.map(|v| v.codec.clone()),
            audio_codec: info.audio.as_ref().map(|a| a.codec.clone()),
            format: Some(info.format.clone()),
            fps: video.map(|v| v.fps).filter(|f| f.is_finite() && *f > 0.0),
            color: video.map(|v| asset_color(&v.color)),
        })
    }
}

/// The stored form of a probed video's colour.
fn asset_color(c: &media::SourceColor) -> AssetColor {
    AssetColor {
        primaries: c.primaries.clone(),
        transfer: c.transfer.clone(),
        matrix: c.matrix.clone(),
        range: c.range.clone(),
        dynamic_range: c.dynamic_range.as_str().to_string(),
        mastering_max_nits: c.mastering.map(|m| m.max_nits),
        mastering_min_nits: c.mastering.map(|m| m.min_nits),
        max_cll: c.content_light.map(|l| l.max_cll),
        max_fall: c.content_light.map(|l| l.max_fall),
        dolby_vision_profile: c.dolby_vision.map(|d| d.profile),
    }
}
