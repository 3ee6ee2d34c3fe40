//! The service's typed errors. Each maps to one catalog code ([`ServiceError::code`]); the MCP
//! layer and the HTTP routes turn them into the §6 envelope (`vidforge_http::envelope`).

use crate::catalog::{self, ErrorCode};
use crate::store::{RenderState, StoreError};

/// Whether `e` means the disk (or a quota) is full.
pub fn is_no_space(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::StorageFull
        || e.kind() == std::io::ErrorKind::QuotaExceeded
        || e.raw_os_error() == Some(rustix::io::Errno::NOSPC.raw_os_error())
}

/// `retry_after_ms` of [`ServiceError::Unavailable`]: PostgreSQL restarts in seconds.
pub const STORE_RETRY_AFTER_MS: u64 = 2_000;

/// What a refusal for the work a render would cost says: the estimate, the limit it broke
/// and, when one fits, the highest lower resolution that would be accepted now.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkRefusal {
    /// Output width × height × frames of the refused render.
    pub estimated_pixel_frames: u64,
    /// The same at the server's `render_pixel_rate`, rounded up.
    pub estimated_seconds: u64,
    /// The per-render limit, or the budget per window.
    pub limit_pixel_frames: u64,
    pub limit_seconds: u64,
    /// Budget still free in the window (0 for the per-render limit).
    pub remaining_pixel_frames: u64,
    pub remaining_seconds: u64,
    /// The budget's window (`None` for the per-render limit).
    pub window_seconds: Option<u64>,
    /// When enough of the budget frees up for this render (`None` for the per-render limit).
    pub retry_after_ms: Option<u64>,
    /// The highest resolution below the requested one that fits now.
    pub fits: Option<crate::store::Resolution>,
}

/// Why a service call failed.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// Arguments fail validation; `field` is a dotted path (`watermark.opacity`).
    #[error("invalid argument `{field}`: {reason}")]
    InvalidArguments { field: String, reason: String },
    /// An asset URI resolves to nothing this principal can read (another principal's asset
    /// looks exactly like a missing one).
    #[error("{field} resolves to no asset this credential can read")]
    SourceNotFound { field: String, reason: String },
    /// The source cannot be rendered.
    #[error("unsupported source: {reason}")]
    UnsupportedCodec { reason: String },
    /// Unknown render id, or another principal's (indistinguishable on purpose).
    #[error("no render with this id is visible to this credential")]
    NotFound,
    /// The render exists but has no result to read (yet, or ever).
    #[error("render is {}, so it has no result to read", state.public_name())]
    NotReady { state: RenderState },
    /// The result existed but was deleted after its retention.
    #[error("the result of this render was deleted after its retention")]
    ResultExpired {
        /// Unix ms when it expired.
        expired_at: u64,
    },
    /// A decision arrived for a render that is not awaiting one.
    #[error("render is {}, not awaiting a watermark decision", state.public_name())]
    ApprovalNotPending { state: RenderState },
    /// A different decision was already recorded.
    #[error("a different watermark decision was already recorded (approved: {recorded_approved})")]
    ApprovalAlreadyRecorded { recorded_approved: bool },
    /// The idempotency key was used with different arguments.
    #[error("idempotency_key was already used with different arguments")]
    IdempotencyConflict,
    /// The pool or the principal's concurrent-render limit is full.
    #[error("render quota exceeded: {reason}")]
    QuotaExceeded { reason: String, retry_after_ms: u64 },
    /// The render's estimated work is over the per-render limit (or over the whole
    /// per-principal budget): the same arguments will never be accepted.
    #[error(
        "the render's estimated work ({} s at this server's rate) exceeds the limit of {} s \
         per render",
        .0.estimated_seconds,
        .0.limit_seconds
    )]
    RenderTooLarge(WorkRefusal),
    /// The principal's render budget for the current window would be exceeded.
    #[error(
        "this render ({} s of estimated work) does not fit in the credential's remaining \
         render budget ({} s of {} s per {} s)",
        .0.estimated_seconds,
        .0.remaining_seconds,
        .0.limit_seconds,
        .0.window_seconds.unwrap_or_default()
    )]
    RenderBudgetExceeded(WorkRefusal),
    /// An upload is over the size limit (nothing was kept).
    #[error("upload exceeds the limit of {limit_bytes} bytes")]
    AssetTooLarge { limit_bytes: u64 },
    /// An upload is neither a readable video nor a PNG image (nothing was kept).
    #[error("upload is not a readable video or PNG image: {reason}")]
    AssetInvalid { reason: String },
    /// No asset with this id is visible to this credential.
    #[error("no asset with this id is visible to this credential")]
    AssetNotFound,
    /// Unfinished renders use the asset.
    #[error("renders that have not finished use this asset: {}", renders.join(", "))]
    AssetInUse { renders: Vec<String> },
    /// Free disk space is under the configured floor, or a write found the disk full.
    #[error("the server's disk is full: {reason}")]
    StorageFull { reason: String },
    /// The task store cannot be reached for now (PostgreSQL restarting or unreachable):
    /// nothing was written, and the same call may succeed in a few seconds.
    #[error("the task store is temporarily unavailable; retry in a few seconds")]
    Unavailable { reason: String },
    /// The media store (a bucket) cannot be reached or failed the request: nothing was kept,
    /// and the same call may succeed shortly (`service_unavailable`).
    #[error("the media store is temporarily unavailable; nothing was kept; retry in a few seconds")]
    MediaUnavailable { reason: String },
    /// Store or file-system fault.
    #[error("internal error: {0}")]
    Internal(String),
}

impl ServiceError {
    /// The catalog code. `Internal` maps to `render_failed` (temporary: retrying may work);
    /// check [`ServiceError::is_internal`] to report it as a JSON-RPC fault instead.
    pub fn code(&self) -> ErrorCode {
        match self {
            ServiceError::InvalidArguments { .. } => ErrorCode::InvalidArguments,
            ServiceError::SourceNotFound { .. } => ErrorCode::SourceNotFound,
            ServiceError::UnsupportedCodec { .. } => ErrorCode::UnsupportedCodec,
            ServiceError::NotFound | ServiceError::NotReady { .. } => ErrorCode::RenderNotFound,
            ServiceError::ResultExpired { .. } => ErrorCode::ResultExpired,
            ServiceError::ApprovalNotPending { .. } => ErrorCode::ApprovalNotPending,
            ServiceError::ApprovalAlreadyRecorded { .. } => ErrorCode::ApprovalAlreadyRecorded,
            ServiceError::IdempotencyConflict => ErrorCode::IdempotencyConflict,
            ServiceError::QuotaExceeded { .. } => ErrorCode::RenderQuotaExceeded,
            ServiceError::RenderTooLarge(_) => ErrorCode::RenderTooLarge,
            ServiceError::RenderBudgetExceeded(_) => ErrorCode::RenderBudgetExceeded,
            ServiceError::AssetTooLarge { .. } => ErrorCode::AssetTooLarge,
            ServiceError::AssetInvalid { .. } => ErrorCode::AssetInvalid,
            ServiceError::AssetNotFound => ErrorCode::AssetNotFound,
            ServiceError::AssetInUse { .. } => ErrorCode::AssetInUse,
            ServiceError::StorageFull { .. } => ErrorCode::StorageFull,
            ServiceError::Unavailable { .. } | ServiceError::MediaUnavailable { .. } => {
                ErrorCode::ServiceUnavailable
            }
            ServiceError::Internal(_) => ErrorCode::RenderFailed,
        }
    }

    /// The argument at fault, when one is.
    pub fn field(&self) -> Option<&str> {
        match self {
            ServiceError::InvalidArguments { field, .. }
            | ServiceError::SourceNotFound { field, .. } => Some(field),
            ServiceError::UnsupportedCodec { .. } => Some("source_asset_uri"),
            ServiceError::IdempotencyConflict => Some("idempotency_key"),
            ServiceError::RenderTooLarge(_) | ServiceError::RenderBudgetExceeded(_) => {
                Some("resolution")
            }
            _ => None,
        }
    }

    /// What only the operator may read (logged, never sent): an internal fault's text, or why
    /// a store could not be reached (its endpoint, bucket, key).
    pub fn internal_detail(&self) -> Option<&str> {
        match self {
            ServiceError::Internal(detail)
            | ServiceError::Unavailable { reason: detail }
            | ServiceError::MediaUnavailable { reason: detail } => Some(detail),
            _ => None,
        }
    }

    /// A machine-oriented reason for `details.reason`: nothing internal.
    pub fn reason(&self) -> Option<String> {
        match self {
            ServiceError::InvalidArguments { reason, .. }
            | ServiceError::SourceNotFound { reason, .. }
            | ServiceError::UnsupportedCodec { reason }
            | ServiceError::QuotaExceeded { reason, .. }
            | ServiceError::AssetInvalid { reason } => Some(reason.clone()),
            ServiceError::NotReady { state } => {
                Some(format!("render state is {}", state.public_name()))
            }
            ServiceError::ApprovalNotPending { state } => {
                Some(format!("render state is {}", state.public_name()))
            }
            ServiceError::ApprovalAlreadyRecorded { recorded_approved } => Some(format!(
                "recorded decision: {}",
                if *recorded_approved {
                    "approved"
                } else {
                    "rejected"
                }
            )),
            ServiceError::ResultExpired { expired_at } => Some(format!(
                "retention ended at {}",
                crate::clock::rfc3339(*expired_at)
            )),
            ServiceError::AssetTooLarge { limit_bytes } => {
                Some(format!("limit is {limit_bytes} bytes"))
            }
            ServiceError::IdempotencyConflict => Some(
                "the key was first used with different arguments; use a new key for new arguments"
                    .into(),
            ),
            ServiceError::AssetInUse { renders } => Some(format!(
                "used by unfinished renders: {}",
                renders.join(", ")
            )),
            ServiceError::StorageFull { reason } => Some(reason.clone()),
            // What failed inside (addresses, buckets, keys) is for the operator's log
            // ([`ServiceError::internal_detail`]), never for the client.
            ServiceError::Unavailable { .. } => Some("the task store cannot be reached".into()),
            ServiceError::MediaUnavailable { .. } => {
                Some("the media store cannot be reached or failed the request".into())
            }
            ServiceError::RenderTooLarge(w) => Some(format!(
                "estimated {} pixel-frames (output width x height x frames), limit {} per render",
                w.estimated_pixel_frames, w.limit_pixel_frames
            )),
            ServiceError::RenderBudgetExceeded(w) => Some(format!(
                "estimated {} pixel-frames, {} left of the budget of {} per {} s",
                w.estimated_pixel_frames,
                w.remaining_pixel_frames,
                w.limit_pixel_frames,
                w.window_seconds.unwrap_or_default()
            )),
            ServiceError::NotFound | ServiceError::AssetNotFound | ServiceError::Internal(_) => {
                None
            }
        }
    }

    /// `retry_after_ms` (only for temporary codes).
    pub fn retry_after_ms(&self) -> Option<u64> {
        match self {
            ServiceError::QuotaExceeded { retry_after_ms, .. } => Some(*retry_after_ms),
            ServiceError::AssetInUse { .. } | ServiceError::StorageFull { .. } => {
                Some(catalog::STORAGE_RETRY_AFTER.as_millis() as u64)
            }
            ServiceError::Unavailable { .. } | ServiceError::MediaUnavailable { .. } => {
                Some(STORE_RETRY_AFTER_MS)
            }
            ServiceError::RenderBudgetExceeded(w) => w.retry_after_ms,
            _ => None,
        }
    }

    /// The estimate and the limit of a work refusal, for `details`.
    pub fn work_refusal(&self) -> Option<&WorkRefusal> {
        match self {
            ServiceError::RenderTooLarge(w) | ServiceError::RenderBudgetExceeded(w) => Some(w),
            _ => None,
        }
    }

    /// Whether the same call may succeed later.
    pub fn temporary(&self) -> bool {
        self.code().temporary()
    }

    /// A store or file-system fault rather than a caller-facing condition.
    pub fn is_internal(&self) -> bool {
        matches!(self, ServiceError::Internal(_))
    }

    pub fn quota(reason: impl Into<String>) -> Self {
        ServiceError::QuotaExceeded {
            reason: reason.into(),
            retry_after_ms: catalog::QUOTA_RETRY_AFTER.as_millis() as u64,
        }
    }

    /// A write found no space left on the device.
    pub(crate) fn disk_full() -> Self {
        tracing::warn!("a write found the disk full");
        ServiceError::StorageFull {
            reason: "a write found no space left on the device".into(),
        }
    }

    pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        ServiceError::InvalidArguments {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

impl From<StoreError> for ServiceError {
    fn from(e: StoreError) -> Self {
        if let Some(io) = e.io()
            && is_no_space(io)
        {
            return ServiceError::disk_full();
        }
        if let StoreError::Unavailable(reason) = e {
            tracing::warn!(%reason, "task store unavailable");
            return ServiceError::Unavailable {
                reason: "the task store (PostgreSQL) cannot be reached".into(),
            };
        }
        tracing::error!(error = %e, "store fault");
        ServiceError::Internal(e.to_string())
    }
}

impl From<std::io::Error> for ServiceError {
    fn from(e: std::io::Error) -> Self {
        if is_no_space(&e) {
            return ServiceError::disk_full();
        }
        tracing::error!(error = %e, "file-system fault");
        ServiceError::Internal(e.to_string())
    }
}
