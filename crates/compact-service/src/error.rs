//! Every way a call of the service fails, as its HTTP answer. The status
//! of each library error is one exhaustive `match`: a new `CompactError`
//! variant does not compile until it has one.

use axum::Json;
use axum::extract::rejection::BytesRejection;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use compact_middleware::CompactError;

use crate::api::{CompactFailure, Detail, ValidationFailed};

/// Why a call failed.
#[derive(Debug)]
pub(crate) enum ApiError {
    /// 400 with the JSON path in the caller's body.
    Invalid {
        /// `$.session_id`, `$.messages[3].role`.
        path: String,
        /// What is wrong there.
        message: String,
    },
    /// The body could not be read: axum's own answer (413 past the limit).
    Body(BytesRejection),
    /// The library refused or failed.
    Compact(CompactError),
    /// 404: what the path names does not exist (a recall id of another
    /// session, or none).
    NotFound(String),
}

impl ApiError {
    pub(crate) fn invalid(path: &str, message: impl Into<String>) -> Self {
        ApiError::Invalid {
            path: path.to_owned(),
            message: message.into(),
        }
    }
}

impl From<CompactError> for ApiError {
    fn from(e: CompactError) -> Self {
        ApiError::Compact(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let e = match self {
            ApiError::Invalid { path, message } => return validation_failed(path, message),
            ApiError::Body(rejection) => return rejection.into_response(),
            ApiError::NotFound(message) => {
                let body = crate::api::NotFound {
                    error: "NotFound",
                    message,
                };
                return (StatusCode::NOT_FOUND, Json(body)).into_response();
            }
            ApiError::Compact(e) => e,
        };
        let status = match &e {
            // Errors about the caller's body name where in it.
            CompactError::InvalidSession(message) => {
                return validation_failed("$.session_id".into(), message.clone());
            }
            CompactError::Overlay { field, message } => {
                let path = if field.is_empty() {
                    "$".to_owned()
                } else {
                    format!("$.{field}")
                };
                return validation_failed(path, message.clone());
            }
            CompactError::InsufficientBudget { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            CompactError::InvalidInput(_) | CompactError::Config(_) => StatusCode::BAD_REQUEST,
            CompactError::State(_) => StatusCode::SERVICE_UNAVAILABLE,
            CompactError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let guidance = match &e {
            CompactError::InsufficientBudget { guidance, .. } => Some(guidance.clone()),
            _ => None,
        };
        let body = CompactFailure {
            error: e.kind(),
            message: e.to_string(),
            guidance,
        };
        if status == StatusCode::SERVICE_UNAVAILABLE {
            // The session store was busy or failed, and the call's result
            // was not kept (nothing committed): the same call can be sent
            // again at once, to another replica or here.
            return (status, [(header::RETRY_AFTER, "1")], Json(body)).into_response();
        }
        (status, Json(body)).into_response()
    }
}

fn validation_failed(path: String, message: String) -> Response {
    let body = ValidationFailed {
        error: "Validation failed",
        details: vec![Detail { path, message }],
    };
    (StatusCode::BAD_REQUEST, Json(body)).into_response()
}
