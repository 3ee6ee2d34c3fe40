//! The one source of truth for vidforge's error codes, TTLs and poll intervals.
//!
//! Tool descriptions, the `_meta` error catalog, the capability summary and the behaviour of
//! the store and scheduler all read these values, so documentation cannot drift from behaviour.

use std::time::Duration;

/// How long a task record (and so `tasks/get`) lives after creation: 24 h.
pub const TASK_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// How long a rendered result and its status stay reachable: 7 days.
pub const RESULT_TTL: Duration = Duration::from_secs(7 * 24 * 60 * 60);
/// How long an idempotency key is remembered: 24 h.
pub const IDEMPOTENCY_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// How long a render waits for a watermark decision before ending with
/// `watermark_approval_timeout`: 30 min (configurable per deployment).
pub const APPROVAL_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// Suggested poll interval while a render is queued or running.
pub const POLL_INTERVAL_WORKING: Duration = Duration::from_secs(10);
/// Suggested `tasks/get` poll interval while waiting for a human (input_required) or when the
/// task is terminal.
pub const POLL_INTERVAL_AWAITING: Duration = Duration::from_secs(30);
/// Suggested fallback-tool poll interval while waiting for approval.
pub const POLL_AFTER_AWAITING_FALLBACK: Duration = Duration::from_secs(15);
/// `retry_after_ms` suggested with `render_quota_exceeded`.
pub const QUOTA_RETRY_AFTER: Duration = Duration::from_secs(30);
/// How often the sweeper looks for expired records and files.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(60);
/// How often render progress is written to the store (not per frame).
pub const PROGRESS_PUBLISH_INTERVAL: Duration = Duration::from_millis(250);

/// Largest result `resources/read` returns inline as a base64 blob; larger results are
/// downloaded over HTTP.
pub const MAX_INLINE_RESOURCE_BYTES: u64 = 64 * 1024 * 1024;

/// `server/discover` cache lifetime.
pub const DISCOVER_TTL: Duration = Duration::from_secs(60 * 60);

/// A duration in words for descriptions and messages: "30 minutes", "24 hours", "7 days".
pub fn human_duration(d: Duration) -> String {
    let secs = d.as_secs();
    // Whole days from two days up ("7 days"); "24 hours" reads better than "1 day".
    let (n, unit) = if secs >= 2 * 86_400 && secs.is_multiple_of(86_400) {
        (secs / 86_400, "day")
    } else if secs >= 3_600 && secs.is_multiple_of(3_600) {
        (secs / 3_600, "hour")
    } else if secs >= 60 && secs.is_multiple_of(60) {
        (secs / 60, "minute")
    } else {
        (secs, "second")
    };
    format!("{n} {unit}{}", if n == 1 { "" } else { "s" })
}

/// Every error code vidforge emits, with whether retrying the same call can succeed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    SourceNotFound,
    UnsupportedCodec,
    WatermarkRejected,
    WatermarkApprovalTimeout,
    RenderQuotaExceeded,
    RenderFailed,
    InvalidArguments,
    RenderNotFound,
    TaskExpired,
    ResultExpired,
    ApprovalAlreadyRecorded,
    ApprovalNotPending,
    IdempotencyConflict,
    AssetTooLarge,
    AssetInvalid,
    RenderCancelled,
    ResultTooLargeToInline,
}

impl ErrorCode {
    /// Every code, in catalog order.
    pub const ALL: [ErrorCode; 17] = [
        ErrorCode::SourceNotFound,
        ErrorCode::UnsupportedCodec,
        ErrorCode::WatermarkRejected,
        ErrorCode::WatermarkApprovalTimeout,
        ErrorCode::RenderQuotaExceeded,
        ErrorCode::RenderFailed,
        ErrorCode::InvalidArguments,
        ErrorCode::RenderNotFound,
        ErrorCode::TaskExpired,
        ErrorCode::ResultExpired,
        ErrorCode::ApprovalAlreadyRecorded,
        ErrorCode::ApprovalNotPending,
        ErrorCode::IdempotencyConflict,
        ErrorCode::AssetTooLarge,
        ErrorCode::AssetInvalid,
        ErrorCode::RenderCancelled,
        ErrorCode::ResultTooLargeToInline,
    ];

    /// The codes `vidforge_render_video` lists inline in its `_meta` (repair-critical only).
    pub const RENDER_TOOL_INLINE: [ErrorCode; 6] = [
        ErrorCode::SourceNotFound,
        ErrorCode::UnsupportedCodec,
        ErrorCode::WatermarkRejected,
        ErrorCode::WatermarkApprovalTimeout,
        ErrorCode::RenderQuotaExceeded,
        ErrorCode::RenderFailed,
    ];

    /// The symbolic wire code.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::SourceNotFound => "source_not_found",
            ErrorCode::UnsupportedCodec => "unsupported_codec",
            ErrorCode::WatermarkRejected => "watermark_rejected",
            ErrorCode::WatermarkApprovalTimeout => "watermark_approval_timeout",
            ErrorCode::RenderQuotaExceeded => "render_quota_exceeded",
            ErrorCode::RenderFailed => "render_failed",
            ErrorCode::InvalidArguments => "invalid_arguments",
            ErrorCode::RenderNotFound => "render_not_found",
            ErrorCode::TaskExpired => "task_expired",
            ErrorCode::ResultExpired => "result_expired",
            ErrorCode::ApprovalAlreadyRecorded => "approval_already_recorded",
            ErrorCode::ApprovalNotPending => "approval_not_pending",
            ErrorCode::IdempotencyConflict => "idempotency_conflict",
            ErrorCode::AssetTooLarge => "asset_too_large",
            ErrorCode::AssetInvalid => "asset_invalid",
            ErrorCode::RenderCancelled => "render_cancelled",
            ErrorCode::ResultTooLargeToInline => "result_too_large_to_inline",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// Whether the same call may succeed later (then `retry_after_ms` may be set).
    pub fn temporary(self) -> bool {
        matches!(
            self,
            ErrorCode::RenderQuotaExceeded | ErrorCode::RenderFailed
        )
    }

    /// One-line catalog description.
    pub fn description(self) -> String {
        match self {
            ErrorCode::SourceNotFound => {
                "source_asset_uri resolves to no asset this credential can read.".into()
            }
            ErrorCode::UnsupportedCodec => {
                "The source asset's codec cannot be rendered; details.reason names it.".into()
            }
            ErrorCode::WatermarkRejected => {
                "User declined the watermark preview; adjust `watermark` and re-call.".into()
            }
            ErrorCode::WatermarkApprovalTimeout => format!(
                "No approval within {} minutes; re-call to start a new render.",
                APPROVAL_TIMEOUT.as_secs() / 60
            ),
            ErrorCode::RenderQuotaExceeded => {
                "Concurrent-render quota hit; honour retry_after_ms.".into()
            }
            ErrorCode::RenderFailed => "Renderer fault; safe to re-call (a new job is started unless idempotency_key is reused).".into(),
            ErrorCode::InvalidArguments => {
                "Arguments do not match the tool's inputSchema; details.field names the culprit."
                    .into()
            }
            ErrorCode::RenderNotFound => {
                "No render with this id is visible to this credential.".into()
            }
            ErrorCode::TaskExpired => format!(
                "Task state was deleted after its {}h TTL; render results remain reachable for {} days.",
                TASK_TTL.as_secs() / 3600,
                RESULT_TTL.as_secs() / 86400
            ),
            ErrorCode::ResultExpired => format!(
                "The rendered result was deleted after its {}-day retention; re-render it.",
                RESULT_TTL.as_secs() / 86400
            ),
            ErrorCode::ApprovalAlreadyRecorded => {
                "A different watermark decision was already recorded for this render.".into()
            }
            ErrorCode::ApprovalNotPending => {
                "This render is not waiting for a watermark decision.".into()
            }
            ErrorCode::IdempotencyConflict => {
                "The idempotency_key was already used with different arguments.".into()
            }
            ErrorCode::AssetTooLarge => "The upload exceeds the server's size limit.".into(),
            ErrorCode::AssetInvalid => {
                "The uploaded file is not a readable video or PNG image.".into()
            }
            ErrorCode::RenderCancelled => {
                "The render was cancelled; call vidforge_render_video again (with a new idempotency_key) to restart it.".into()
            }
            ErrorCode::ResultTooLargeToInline => format!(
                "The result is larger than {} MiB and is not inlined by resources/read; download it over HTTP (details.download_url).",
                MAX_INLINE_RESOURCE_BYTES / (1024 * 1024)
            ),
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human_duration(APPROVAL_TIMEOUT), "30 minutes");
        assert_eq!(human_duration(TASK_TTL), "24 hours");
        assert_eq!(human_duration(RESULT_TTL), "7 days");
        assert_eq!(human_duration(Duration::from_secs(1)), "1 second");
        assert_eq!(human_duration(Duration::from_secs(90)), "90 seconds");
    }

    #[test]
    fn codes_round_trip_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for c in ErrorCode::ALL {
            assert!(seen.insert(c.as_str()));
            assert_eq!(ErrorCode::parse(c.as_str()), Some(c));
        }
    }
}
