//! `GET /healthz` (Ariadne's shape) and `GET /metrics` (Prometheus text).

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use compact_events::now_rfc3339;
use serde_json::json;

use super::reply;
use crate::app::AppState;

/// `{"status":"ok","timestamp":...,"events":{"count","capacity"}}`.
#[utoipa::path(get, path = "/healthz", tag = "trace server",
    responses((status = 200, description = "`{\"status\": \"ok\", \"timestamp\", \"events\"}`", body = Object)))]
pub(crate) async fn healthz(State(state): State<AppState>) -> Response {
    let s = state.store().stats();
    reply(
        StatusCode::OK,
        json!({"status":"ok","timestamp": now_rfc3339(),"events":{"count": s.count,"capacity": s.capacity}}),
    )
}

/// Prometheus text exposition 0.0.4.
#[utoipa::path(get, path = "/metrics", tag = "trace server",
    responses((status = 200, description = "Prometheus text exposition 0.0.4", content_type = "text/plain"), (status = 401, description = "No or a wrong read token")))]
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
