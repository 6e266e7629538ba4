//! `GET /healthz` (Ariadne's shape) and `GET /metrics` (Prometheus text).

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use compact_events::now_rfc3339;
use serde_json::json;

use super::reply;
use crate::app::AppState;

/// `{"status":"ok","timestamp":...,"events":{"count","capacity"}}`.
pub(crate) async fn healthz(State(state): State<AppState>) -> Response {
    let s = state.store().stats();
    reply(
        StatusCode::OK,
        json!({"status":"ok","timestamp": now_rfc3339(),"events":{"count": s.count,"capacity": s.capacity}}),
    )
}

/// Prometheus text exposition 0.0.4.
pub(crate) async fn metrics(State(state): State<AppState>) -> Response {
    let body = state.metrics().render(&state.store().stats());
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}
