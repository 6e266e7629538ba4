//! The ingest routes: Ariadne's `/ingest`, and the OpenAI Agents SDK and
//! OTLP/HTTP JSON formats, whose mapping lives in [`crate::map`].

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};

use super::reply;
use crate::app::AppState;
use crate::body::{BodyError, read_limited};
use crate::schema::{self, Issue, Refusal, ValidEvent};

/// Metric labels.
const INGEST: &str = "/ingest";
const SDK: &str = "/v1/traces/ingest";
const OTLP: &str = "/v1/traces";

fn validation_failed(issues: &[Issue]) -> Response {
    reply(
        StatusCode::BAD_REQUEST,
        json!({"error":"Validation failed","details": issues}),
    )
}

fn too_large(e: &BodyError) -> Response {
    let status = match e {
        BodyError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        BodyError::Read(_) => StatusCode::BAD_REQUEST,
    };
    let error = match e {
        BodyError::TooLarge { .. } => "Payload too large",
        BodyError::Read(_) => "Bad request",
    };
    reply(status, json!({"error": error, "message": e.message()}))
}

/// Reads a body under `limit`; a refusal is already a response.
async fn read_body(
    state: &AppState,
    endpoint: &'static str,
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<Vec<u8>, Response> {
    read_limited(headers, body, limit).await.map_err(|e| {
        let resp = too_large(&e);
        state
            .metrics()
            .ingest(endpoint, resp.status().as_u16(), 0, 0);
        resp
    })
}

fn invalid_json(message: String) -> Response {
    reply(
        StatusCode::BAD_REQUEST,
        json!({"error":"Invalid JSON","message": message}),
    )
}

/// Reads and parses a JSON body; a refusal is already a response.
async fn json_body(
    state: &AppState,
    endpoint: &'static str,
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<(Value, usize), Response> {
    let bytes = read_body(state, endpoint, headers, body, limit).await?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(v) => Ok((v, bytes.len())),
        Err(e) => {
            state.metrics().ingest(endpoint, 400, 0, bytes.len());
            Err(invalid_json(e.to_string()))
        }
    }
}

/// Stores validated events durably and answers: 200 only once on disk.
async fn commit(
    state: &AppState,
    endpoint: &'static str,
    events: Vec<ValidEvent>,
    bytes: usize,
    ok_body: impl FnOnce(usize) -> Value,
) -> Response {
    let n = events.len();
    // Compaction metrics count only what is about to be acknowledged; a
    // failed write below is rare enough not to undo them.
    state.metrics().observe_events(&events);
    match state.store().append(events).await {
        Ok(_) => {
            state.metrics().ingest(endpoint, 200, n, bytes);
            reply(StatusCode::OK, ok_body(n))
        }
        Err(e) => {
            tracing::error!(error = %e, "ingest refused: the store could not write");
            state.metrics().ingest(endpoint, 503, n, bytes);
            reply(
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"error":"Store unavailable","message": e.to_string()}),
            )
        }
    }
}

/// `POST /ingest`: one event or `{"batch":[...]}`.
#[utoipa::path(post, path = "/ingest", tag = "trace server",
    request_body(content = Object, description = "One event, or `{\"batch\": [...]}`"),
    responses((status = 200, description = "Stored durably"), (status = 400, description = "Refused, with the JSON path of each problem"), (status = 401, description = "No or a wrong ingest token"), (status = 413, description = "Past `server.limits.ingest_body_bytes`")))]
pub(crate) async fn ingest(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let limit = state.config().limits.ingest_body_bytes;
    let bytes = match read_body(&state, INGEST, &headers, body, limit).await {
        Ok(b) => b,
        Err(resp) => return resp,
    };
    match schema::parse_body(&bytes) {
        Ok(events) => {
            commit(
                &state,
                INGEST,
                events,
                bytes.len(),
                |n| json!({"success":true,"count":n}),
            )
            .await
        }
        Err(Refusal::Json(message)) => {
            state.metrics().ingest(INGEST, 400, 0, bytes.len());
            invalid_json(message)
        }
        Err(Refusal::Invalid(issues)) => {
            state.metrics().ingest(INGEST, 400, 0, bytes.len());
            validation_failed(&issues)
        }
    }
}

/// Runs mapped events through the same schema as `/ingest` (truncation,
/// validation), so every stored event has one shape whatever its source.
pub(crate) fn validate_mapped(
    events: Vec<compact_events::Event>,
) -> Result<Vec<ValidEvent>, Vec<Issue>> {
    let mut out = Vec::with_capacity(events.len());
    for (i, ev) in events.into_iter().enumerate() {
        let value = serde_json::to_value(&ev).map_err(|e| {
            vec![Issue {
                path: vec![json!(i)],
                message: e.to_string(),
            }]
        })?;
        out.push(schema::parse_event(value, &[json!(i)])?);
    }
    Ok(out)
}

fn map_error(e: &crate::map::MapError) -> Response {
    validation_failed(&[Issue {
        path: vec![Value::from(e.path.as_str())],
        message: e.message.clone(),
    }])
}

/// `POST /v1/traces/ingest`: the OpenAI Agents SDK exporter's `{"data":[...]}`.
#[utoipa::path(post, path = "/v1/traces/ingest", tag = "trace server",
    request_body(content = Object, description = "The OpenAI Agents SDK exporter's `{\"data\": [...]}`"),
    responses((status = 200, description = "Stored durably"), (status = 400, description = "Refused"), (status = 401, description = "No or a wrong ingest token")))]
pub(crate) async fn sdk(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    let limit = state.config().limits.otel_body_bytes;
    let (value, bytes) = match json_body(&state, SDK, &headers, body, limit).await {
        Ok(v) => v,
        Err(resp) => return resp,
    };
    let mapped = crate::map::sdk_to_events(&value).map_err(|e| map_error(&e));
    finish_mapped(
        &state,
        SDK,
        mapped,
        bytes,
        |n| json!({"success":true,"count":n}),
    )
    .await
}

/// `POST /v1/traces`: OTLP/HTTP with a JSON body (protobuf gets a 415).
#[utoipa::path(post, path = "/v1/traces", tag = "trace server",
    request_body(content = Object, description = "OTLP/HTTP traces, JSON encoding"),
    responses((status = 200, description = "Stored durably"), (status = 400, description = "Refused"), (status = 401, description = "No or a wrong ingest token"), (status = 415, description = "Protobuf (only JSON is read)")))]
pub(crate) async fn otlp(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    if !content_type.starts_with("application/json") {
        state.metrics().ingest(OTLP, 415, 0, 0);
        return reply(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            json!({"error":"Unsupported Media Type","message":"send OTLP/HTTP as application/json"}),
        );
    }
    let limit = state.config().limits.otel_body_bytes;
    let (value, bytes) = match json_body(&state, OTLP, &headers, body, limit).await {
        Ok(v) => v,
        Err(resp) => return resp,
    };
    let mapped = crate::map::otlp_to_events(&value).map_err(|e| map_error(&e));
    // An empty ExportTraceServiceResponse means full success.
    finish_mapped(&state, OTLP, mapped, bytes, |_| json!({})).await
}

async fn finish_mapped(
    state: &AppState,
    endpoint: &'static str,
    mapped: Result<Vec<compact_events::Event>, Response>,
    bytes: usize,
    ok_body: impl FnOnce(usize) -> Value,
) -> Response {
    let events = match mapped {
        Ok(e) => e,
        Err(resp) => {
            state.metrics().ingest(endpoint, 400, 0, bytes);
            return resp;
        }
    };
    match validate_mapped(events) {
        Ok(valid) => commit(state, endpoint, valid, bytes, ok_body).await,
        Err(issues) => {
            state.metrics().ingest(endpoint, 400, 0, bytes);
            validation_failed(&issues)
        }
    }
}
