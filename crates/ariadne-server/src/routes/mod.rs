//! The HTTP handlers, one module per concern.
//!
//! - [`ingest`]: `POST /ingest`, `POST /v1/traces/ingest`, `POST /v1/traces`.
//! - [`api`]: `GET /api/traces`, `GET /api/traces/{trace_id}`.
//! - [`health`]: `GET /healthz`, `GET /metrics`.

pub(crate) mod api;
pub(crate) mod health;
pub(crate) mod ingest;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

/// A JSON reply with `status`.
pub(crate) fn reply(status: StatusCode, body: Value) -> Response {
    (status, Json(body)).into_response()
}
