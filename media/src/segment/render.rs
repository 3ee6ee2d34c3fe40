//! One segment's render: the video of a span of the job, exactly as a single pass renders
//! those frames (same timestamps, settings and light), into a segment file.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use super::{SegmentReport, SegmentSpan, check_span};
use crate::engine::{Engine, check_complete};
use crate::error::MediaError;
use crate::tempout::TempOutput;
use crate::types::{Progress, RenderJob, Stage};

impl Engine {
    /// Renders the video of `span` of `job` (its input, resolution, watermark, encoder
    /// settings and HDR policy, exactly as a single pass; `job.output` is ignored) into
    /// `output`, written atomically, without audio. Seeks to the span's start, drops decoded
    /// frames before it (the leading pictures of an open GOP belong to the segment before)
    /// and stops once a frame at or past its end is decoded. Progress counts up to
    /// `span.frames`; cancelling works as in [`Engine::render`].
    pub fn render_segment(
        &self,
        job: &RenderJob,
        span: &SegmentSpan,
        output: &Path,
        progress: &mut dyn FnMut(Progress),
        cancel: &AtomicBool,
    ) -> Result<SegmentReport, MediaError> {
        let started = Instant::now();
        progress(Progress {
            stage: Stage::Preparing,
            frames_done: 0,
            frames_total: Some(span.frames),
        });
        check_span(span)?;
        let tmp = TempOutput::new(output)?;
        let rendered = self.render_into(job, tmp.path(), Some(span), progress, cancel)?;
        let frames = rendered.outcome.encode.frames;
        if frames == 0 {
            return Err(MediaError::invalid(format!(
                "segment {} ({:.3} s to {:.3} s): no frame of {} lies in it; it is past the \
                 source's end",
                span.index,
                span.start_seconds,
                span.end_seconds,
                job.input.display()
            )));
        }
        if frames != span.frames {
            tracing::warn!(
                segment = span.index,
                frames,
                expected = span.frames,
                "segment frame count differs from the plan"
            );
            check_complete(frames, Some(span.frames))?;
        }
        tmp.commit()?;
        let size_bytes = std::fs::metadata(output).map(|m| m.len()).unwrap_or(0);
        let elapsed = started.elapsed();
        tracing::info!(
            output = %output.display(),
            segment = span.index,
            frames,
            size_bytes,
            elapsed_ms = elapsed.as_millis() as u64,
            "segment rendered"
        );
        Ok(SegmentReport {
            frames,
            size_bytes,
            elapsed,
            quality: rendered.outcome.encode.quality,
        })
    }
}
