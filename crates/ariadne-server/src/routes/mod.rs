//! The HTTP handlers, one module per concern.
//!
//! - [`ingest`]: `POST /ingest`, `POST /v1/traces/ingest`, `POST /v1/traces`.
//! - [`api`]: `GET /api/traces`, `GET /api/traces/{trace_id}`.
//! - [`sessions`]: `GET /api/sessions`, `GET /api/sessions/{id}`,
//!   `GET /api/sessions/{id}/preflights/{span_id}`.
//! - [`health`]: `GET /healthz`, `GET /metrics`.

pub(crate) mod api;
pub(crate) mod health;
pub(crate) mod ingest;
pub(crate) mod sessions;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

/// A JSON reply with `status`.
pub(crate) fn reply(status: StatusCode, body: Value) -> Response {
    (status, Json(body)).into_response()
}

/// A refused query parameter: a 400 with this JSON body.
pub(crate) struct BadRequest(pub(crate) Value);

impl IntoResponse for BadRequest {
    fn into_response(self) -> Response {
        reply(StatusCode::BAD_REQUEST, self.0)
    }
}
