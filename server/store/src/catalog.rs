//! The one source of truth for vidforge's error codes, default TTLs and poll intervals.
//!
//! Tool descriptions, the `_meta` error catalog, the capability summary and the behaviour of
//! the store and scheduler all read these values, so documentation cannot drift from behaviour.
//! TTLs and the approval timeout are defaults a deployment may override (see
//! the `config` module): text that states them takes the configured [`Lifetimes`], never the
//! constants.

use std::time::Duration;

/// Longest note a watermark decision may carry (the approval tool, the form, the page).
pub const MAX_NOTE_CHARS: usize = 2000;
/// Default for how long a task record (and so `tasks/get`) lives after creation: 24 h.
pub const TASK_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// Default for how long a rendered result and its status stay reachable: 7 days.
pub const RESULT_TTL: Duration = Duration::from_secs(7 * 24 * 60 * 60);
/// `retry_after_ms` of `storage_full` and `asset_in_use`: conditions that clear on their own.
pub const STORAGE_RETRY_AFTER: Duration = Duration::from_secs(60);
/// Default for how long an uploaded asset is kept: 7 days (renders still using it keep it).
pub const ASSET_TTL: Duration = Duration::from_secs(7 * 24 * 60 * 60);
/// Default for how long an idempotency key is remembered: 24 h.
pub const IDEMPOTENCY_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// Default for how long a render waits for a watermark decision before ending with
/// `watermark_approval_timeout`: 30 min.
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
/// downloaded over HTTP. (A 4k watermark preview of pure noise, the largest preview there is,
/// is 24.9 MB.)
pub const MAX_INLINE_RESOURCE_BYTES: u64 = 32 * 1024 * 1024;
/// Bytes one principal's inline reads (`resources/read` blobs, the MCP App's preview) may
/// hold at once: an answer costs a few times its bytes (the file, its base64, the JSON).
pub const INLINE_BYTES_PER_PRINCIPAL: u64 = MAX_INLINE_RESOURCE_BYTES;
/// Bytes every inline read on a node may hold at once.
pub const INLINE_BYTES_PER_NODE: u64 = 2 * MAX_INLINE_RESOURCE_BYTES;
/// The largest copy of a preview sized for a chat view (640 px of RGB, with room to spare).
pub const MAX_VIEW_PREVIEW_BYTES: u64 = 2 * 1024 * 1024;
/// `retry_after_ms` of an inline read refused for its budget.
pub const INLINE_RETRY_AFTER: Duration = Duration::from_secs(1);

/// `server/discover` cache lifetime.
pub const DISCOVER_TTL: Duration = Duration::from_secs(60 * 60);
/// `ttlMs` of the `vidforge://capabilities` resource.
pub const CAPABILITIES_RESOURCE_TTL: Duration = Duration::from_secs(60);

/// The lifetimes a deployment runs with (`Config::lifetimes`): what every
/// description and message states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lifetimes {
    pub task_ttl: Duration,
    pub result_ttl: Duration,
    pub idempotency_ttl: Duration,
    pub approval_timeout: Duration,
    pub asset_ttl: Duration,
}

impl Default for Lifetimes {
    /// The catalog defaults.
    fn default() -> Self {
        Lifetimes {
            task_ttl: TASK_TTL,
            result_ttl: RESULT_TTL,
            idempotency_ttl: IDEMPOTENCY_TTL,
            approval_timeout: APPROVAL_TIMEOUT,
            asset_ttl: ASSET_TTL,
        }
    }
}

/// A duration in words for descriptions and messages: "30 minutes", "24 hours", "7 days".
///
/// The one implementation (maintenance messages use it too). Not `humantime::format_duration`:
/// its "30m", "24h", "7days" and "1m 30s" are terse units for logs, not prose for users and
/// models; this names whole units and never mixes them.
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
    AssetNotFound,
    AssetInUse,
    StorageFull,
    RequestForbidden,
    UnsupportedMediaType,
    UploadTimeout,
    ServiceUnavailable,
    RenderTooLarge,
    RenderBudgetExceeded,
    RateLimited,
    UploadsBusy,
    InsufficientScope,
}

// Every code, in catalog order, and its symbolic wire name.
vidforge_names::enum_names!(ErrorCode {
    SourceNotFound => "source_not_found",
    UnsupportedCodec => "unsupported_codec",
    WatermarkRejected => "watermark_rejected",
    WatermarkApprovalTimeout => "watermark_approval_timeout",
    RenderQuotaExceeded => "render_quota_exceeded",
    RenderFailed => "render_failed",
    InvalidArguments => "invalid_arguments",
    RenderNotFound => "render_not_found",
    TaskExpired => "task_expired",
    ResultExpired => "result_expired",
    ApprovalAlreadyRecorded => "approval_already_recorded",
    ApprovalNotPending => "approval_not_pending",
    IdempotencyConflict => "idempotency_conflict",
    AssetTooLarge => "asset_too_large",
    AssetInvalid => "asset_invalid",
    RenderCancelled => "render_cancelled",
    ResultTooLargeToInline => "result_too_large_to_inline",
    AssetNotFound => "asset_not_found",
    AssetInUse => "asset_in_use",
    StorageFull => "storage_full",
    RequestForbidden => "request_forbidden",
    UnsupportedMediaType => "unsupported_media_type",
    UploadTimeout => "upload_timeout",
    ServiceUnavailable => "service_unavailable",
    RenderTooLarge => "render_too_large",
    RenderBudgetExceeded => "render_budget_exceeded",
    RateLimited => "rate_limited",
    UploadsBusy => "uploads_busy",
    InsufficientScope => "insufficient_scope",
});

impl ErrorCode {
    /// The codes `vidforge_render_video` lists inline in its `_meta` (repair-critical only).
    pub const RENDER_TOOL_INLINE: [ErrorCode; 6] = [
        ErrorCode::SourceNotFound,
        ErrorCode::UnsupportedCodec,
        ErrorCode::WatermarkRejected,
        ErrorCode::WatermarkApprovalTimeout,
        ErrorCode::RenderQuotaExceeded,
        ErrorCode::RenderFailed,
    ];

    /// Whether the same call may succeed later (then `retry_after_ms` may be set).
    pub fn temporary(self) -> bool {
        matches!(
            self,
            ErrorCode::RenderQuotaExceeded
                | ErrorCode::RenderFailed
                | ErrorCode::AssetInUse
                | ErrorCode::StorageFull
                | ErrorCode::UploadTimeout
                | ErrorCode::ServiceUnavailable
                | ErrorCode::RenderBudgetExceeded
                | ErrorCode::RateLimited
                | ErrorCode::UploadsBusy
        )
    }

    /// One-line catalog description, stating the deployment's configured `lifetimes`.
    pub fn description(self, lifetimes: &Lifetimes) -> String {
        match self.fixed_description() {
            Some(text) => text.into(),
            None => self.configured_description(lifetimes),
        }
    }

    /// The description of a code whose text states a configured lifetime or limit.
    fn configured_description(self, lifetimes: &Lifetimes) -> String {
        match self {
            ErrorCode::WatermarkApprovalTimeout => format!(
                "No approval within {}; re-call to start a new render.",
                human_duration(lifetimes.approval_timeout)
            ),
            ErrorCode::TaskExpired => format!(
                "Task state was deleted after its {} TTL; render results remain reachable for {}.",
                human_duration(lifetimes.task_ttl),
                human_duration(lifetimes.result_ttl)
            ),
            ErrorCode::ResultExpired => format!(
                "The rendered result was deleted after being retained for {}; re-render it.",
                human_duration(lifetimes.result_ttl)
            ),
            ErrorCode::ResultTooLargeToInline => format!(
                "The result is larger than {} MiB and is not inlined by resources/read; download it over HTTP (details.download_url).",
                MAX_INLINE_RESOURCE_BYTES / (1024 * 1024)
            ),
            ErrorCode::AssetNotFound => format!(
                "No asset with this id is visible to this credential (assets are deleted {} after upload).",
                human_duration(lifetimes.asset_ttl)
            ),
            other => other.fixed_description().unwrap_or_default().into(),
        }
    }

    /// The description of a code whose text is the same on every deployment (`None`: it
    /// states a configured lifetime or limit).
    fn fixed_description(self) -> Option<&'static str> {
        let text = match self {
            ErrorCode::SourceNotFound => {
                "source_asset_uri resolves to no asset this credential can read."
            }
            ErrorCode::UnsupportedCodec => {
                "The source asset's codec cannot be rendered; details.reason names it."
            }
            ErrorCode::WatermarkRejected => {
                "User declined the watermark preview; adjust `watermark` and re-call."
            }
            ErrorCode::RenderQuotaExceeded => "Concurrent-render quota hit; honour retry_after_ms.",
            ErrorCode::RenderFailed => {
                "Renderer fault; safe to re-call (a new job is started unless idempotency_key is reused)."
            }
            ErrorCode::InvalidArguments => {
                "Arguments do not match the tool's inputSchema; details.field names the culprit."
            }
            ErrorCode::RenderNotFound => "No render with this id is visible to this credential.",
            ErrorCode::ApprovalAlreadyRecorded => {
                "A different watermark decision was already recorded for this render."
            }
            ErrorCode::ApprovalNotPending => "This render is not waiting for a watermark decision.",
            ErrorCode::IdempotencyConflict => {
                "The idempotency_key was already used with different arguments."
            }
            ErrorCode::AssetTooLarge => "The upload exceeds the server's size limit.",
            ErrorCode::AssetInvalid => "The uploaded file is not a readable video or PNG image.",
            ErrorCode::RenderCancelled => {
                "The render was cancelled; call vidforge_render_video again (with a new idempotency_key) to restart it."
            }
            ErrorCode::AssetInUse => {
                "A render that has not finished uses this asset; retry after it ends (or cancel it)."
            }
            ErrorCode::StorageFull => {
                "The server's disk is nearly full: new uploads and renders are refused for now; honour retry_after_ms. Finished results stay downloadable."
            }
            ErrorCode::RequestForbidden => {
                "The request's Host or Origin header is not allowed here (DNS-rebinding and \
                 cross-site protection); details.field names it. Call from an allowed origin, or \
                 have the operator add it to allowed_hosts / allowed_origins."
            }
            ErrorCode::UnsupportedMediaType => {
                "Uploads must be sent as application/octet-stream or the file's own video/* or \
                 image/png type; form and text content types are refused."
            }
            ErrorCode::UploadTimeout => {
                "The upload sent no data for the server's body timeout, or arrived slower than \
                 the server's minimum upload rate, and was aborted; nothing was kept. Re-send it."
            }
            ErrorCode::ServiceUnavailable => {
                "The task store or the media store cannot be reached right now; nothing was \
                 changed. Honour retry_after_ms and re-send the same call (with the same \
                 idempotency_key)."
            }
            ErrorCode::RenderTooLarge => {
                "The render's estimated work (output pixels × frames) exceeds the per-render \
                 limit; details give the estimate and the limit. Call again with a lower \
                 resolution (the repair) or a shorter source."
            }
            ErrorCode::RenderBudgetExceeded => {
                "This credential's render budget for the current window is spent; honour \
                 retry_after_ms, or call again with a lower resolution (the repair)."
            }
            ErrorCode::RateLimited => {
                "Too many failed authentication attempts from this address; honour \
                 retry_after_ms (HTTP Retry-After). Valid tokens are never slowed."
            }
            ErrorCode::UploadsBusy => {
                "Too many uploads are in progress (on this server or from this address); \
                 honour retry_after_ms and re-send."
            }
            ErrorCode::InsufficientScope => {
                "The access token is valid but lacks the scope this request needs (HTTP 403; \
                 details.required_scope and the WWW-Authenticate challenge name it: \
                 vidforge:render to upload, create, approve or cancel; vidforge:read to read; \
                 vidforge:admin for everyone's renders). Ask the authorization server for it."
            }
            ErrorCode::WatermarkApprovalTimeout
            | ErrorCode::TaskExpired
            | ErrorCode::ResultExpired
            | ErrorCode::ResultTooLargeToInline
            | ErrorCode::AssetNotFound => return None,
        };
        Some(text)
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
        let secs = Duration::from_secs;
        // Seconds: below a minute, or not a whole number of minutes.
        assert_eq!(human_duration(Duration::ZERO), "0 seconds");
        assert_eq!(human_duration(secs(1)), "1 second");
        assert_eq!(human_duration(secs(45)), "45 seconds");
        assert_eq!(human_duration(secs(90)), "90 seconds");
        // Minutes.
        assert_eq!(human_duration(secs(60)), "1 minute");
        assert_eq!(human_duration(APPROVAL_TIMEOUT), "30 minutes");
        assert_eq!(human_duration(secs(90 * 60)), "90 minutes");
        // Hours, including one day ("24 hours" reads better than "1 day").
        assert_eq!(human_duration(secs(3_600)), "1 hour");
        assert_eq!(human_duration(TASK_TTL), "24 hours");
        assert_eq!(human_duration(secs(36 * 3_600)), "36 hours");
        // Whole days from two days up.
        assert_eq!(human_duration(secs(2 * 86_400)), "2 days");
        assert_eq!(human_duration(RESULT_TTL), "7 days");
        // Sub-second parts are dropped.
        assert_eq!(human_duration(Duration::from_millis(1_500)), "1 second");
    }

    #[test]
    fn descriptions_state_the_configured_lifetimes() {
        let defaults = Lifetimes::default();
        assert_eq!(
            ErrorCode::TaskExpired.description(&defaults),
            "Task state was deleted after its 24 hours TTL; render results remain reachable for 7 days."
        );
        let custom = Lifetimes {
            task_ttl: Duration::from_secs(2 * 3_600),
            result_ttl: Duration::from_secs(3 * 86_400),
            approval_timeout: Duration::from_secs(5 * 60),
            ..defaults
        };
        assert!(
            ErrorCode::TaskExpired
                .description(&custom)
                .contains("2 hours TTL")
        );
        assert!(
            ErrorCode::ResultExpired
                .description(&custom)
                .contains("retained for 3 days")
        );
        assert!(
            ErrorCode::WatermarkApprovalTimeout
                .description(&custom)
                .contains("within 5 minutes")
        );
    }

    #[test]
    fn codes_round_trip_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for c in ErrorCode::ALL {
            assert!(seen.insert(c.as_str()));
            assert_eq!(ErrorCode::from_name(c.as_str()), Some(c));
        }
    }
}
