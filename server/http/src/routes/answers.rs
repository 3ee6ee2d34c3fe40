//! A service error as an HTTP answer: its status and the §6 envelope.

use axum::http::StatusCode;
use axum::response::Response;

use crate::envelope::{Envelope, RepairContext, error_response};
use vidforge_core::error::ServiceError;

/// The HTTP status for a service error.
pub fn status_for(e: &ServiceError) -> StatusCode {
    match e {
        ServiceError::NotFound | ServiceError::NotReady { .. } => StatusCode::NOT_FOUND,
        ServiceError::SourceNotFound { .. } => StatusCode::NOT_FOUND,
        ServiceError::ResultExpired { .. } => StatusCode::GONE,
        ServiceError::AssetTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        ServiceError::AssetInvalid { .. } | ServiceError::UnsupportedCodec { .. } => {
            StatusCode::UNPROCESSABLE_ENTITY
        }
        ServiceError::InvalidArguments { .. } => StatusCode::BAD_REQUEST,
        ServiceError::QuotaExceeded { .. } | ServiceError::RenderBudgetExceeded(_) => {
            StatusCode::TOO_MANY_REQUESTS
        }
        ServiceError::RenderTooLarge(_) => StatusCode::UNPROCESSABLE_ENTITY,
        ServiceError::ApprovalNotPending { .. }
        | ServiceError::ApprovalAlreadyRecorded { .. }
        | ServiceError::IdempotencyConflict => StatusCode::CONFLICT,
        ServiceError::AssetNotFound => StatusCode::NOT_FOUND,
        ServiceError::AssetInUse { .. } => StatusCode::CONFLICT,
        ServiceError::StorageFull { .. } => StatusCode::INSUFFICIENT_STORAGE,
        ServiceError::Unavailable { .. } | ServiceError::MediaUnavailable { .. } => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        ServiceError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// A service error as its HTTP status and §6 envelope.
pub(crate) fn service_error(e: &ServiceError) -> Response {
    error_response(
        status_for(e),
        &Envelope::from_service_error(e, RepairContext::default()),
    )
}
