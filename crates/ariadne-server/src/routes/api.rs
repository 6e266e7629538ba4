//! `GET /api/traces` (newest activity first, paged by `before`) and
//! `GET /api/traces/{trace_id}` (the trace and its spans).

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::reply;
use crate::app::AppState;

const DEFAULT_LIMIT: usize = 50;
const MAX_LIMIT: usize = 1000;

/// `GET /api/traces?limit=&before=`: `{"traces":[...],"next_before":seq|null}`.
/// Each entry: `trace_id`, the latest trace event's fields (`name`,
/// `group_id`, `started_at`, `ended_at`, `metadata`) when retained,
/// `event_count`, `last_seq`. Pass `next_before` as `before` for the next page.
pub(crate) async fn list(
    State(state): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let limit = match q.get("limit").map(|s| s.parse::<usize>()) {
        None => DEFAULT_LIMIT,
        Some(Ok(n)) if n >= 1 => n.min(MAX_LIMIT),
        Some(_) => {
            return reply(
                StatusCode::BAD_REQUEST,
                json!({"error":"Invalid limit parameter"}),
            );
        }
    };
    let before = match q.get("before").map(|s| s.parse::<u64>()) {
        None => None,
        Some(Ok(n)) => Some(n),
        Some(Err(_)) => {
            return reply(
                StatusCode::BAD_REQUEST,
                json!({"error":"Invalid before parameter"}),
            );
        }
    };
    let page = state.store().memory().traces(limit, before);
    let next_before = if page.len() == limit {
        page.last().map(|t| t.last_seq)
    } else {
        None
    };
    let traces: Vec<Value> = page
        .into_iter()
        .map(|t| {
            let mut obj = t
                .trace_json
                .and_then(|j| serde_json::from_str::<serde_json::Map<String, Value>>(&j).ok())
                .unwrap_or_default();
            obj.remove("type");
            obj.insert("trace_id".into(), Value::from(t.trace_id));
            obj.insert("event_count".into(), Value::from(t.event_count));
            obj.insert("last_seq".into(), Value::from(t.last_seq));
            Value::Object(obj)
        })
        .collect();
    reply(
        StatusCode::OK,
        json!({"traces": traces, "next_before": next_before}),
    )
}

/// `GET /api/traces/{trace_id}`: `{"trace":<event>|null,"spans":[...]}`,
/// spans in arrival order, each as ingested plus its `seq`; 404 if unknown.
pub(crate) async fn get(State(state): State<AppState>, Path(trace_id): Path<String>) -> Response {
    let Some(events) = state.store().memory().trace_events(&trace_id) else {
        return reply(StatusCode::NOT_FOUND, json!({"error":"Trace not found"}));
    };
    // Stitch the stored JSON together rather than re-parse every span.
    let mut trace = "null".to_owned();
    let mut spans = String::from("[");
    for ev in &events {
        if ev.is_span {
            if spans.len() > 1 {
                spans.push(',');
            }
            // `{...}` → `{"seq":N,...}`: stored JSON is always a non-empty object.
            spans.push_str(&format!("{{\"seq\":{},", ev.seq));
            spans.push_str(&ev.json()[1..]);
        } else {
            trace = ev.json().to_owned();
        }
    }
    spans.push(']');
    let body = format!(
        "{{\"trace_id\":{},\"trace\":{trace},\"spans\":{spans}}}",
        Value::from(trace_id)
    );
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}
