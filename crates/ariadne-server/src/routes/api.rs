//! `GET /api/traces` (newest activity first, paged by `before`) and
//! `GET /api/traces/{trace_id}` (the trace and its spans).
//!
//! A trace's fields are merged over its trace events (a later one overrides
//! what it carries). Its range covers its events: a `started_at` it carries
//! is moved back to its earliest event's time, an `ended_at` forward to its
//! latest (a mapped OpenAI Agents SDK or OTLP trace only knows the spans of
//! the body it came in). A trace that carries neither (the Ariadne Python
//! exporter sends none), or that has no trace event at all, gets both from
//! its events, and `"times_derived": true` says so; one that carries only
//! `started_at` is in progress and gets no `ended_at`. Every entry also has
//! `last_activity_at`: when the server received its latest event.

use std::collections::HashMap;

use compact_events::format_rfc3339_millis;

use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::{BadRequest, reply};
use crate::app::AppState;
use crate::store::TraceSummary;

const DEFAULT_LIMIT: usize = 50;
const MAX_LIMIT: usize = 1000;

/// `limit` and `before` of a listing, or the 400 that refuses them.
pub(crate) fn page_params(q: &HashMap<String, String>) -> Result<(usize, Option<u64>), BadRequest> {
    let limit = match q.get("limit").map(|s| s.parse::<usize>()) {
        None => DEFAULT_LIMIT,
        Some(Ok(n)) if n >= 1 => n.min(MAX_LIMIT),
        Some(_) => {
            return Err(BadRequest(json!({"error":"Invalid limit parameter"})));
        }
    };
    let before = match q.get("before").map(|s| s.parse::<u64>()) {
        None => None,
        Some(Ok(n)) => Some(n),
        Some(Err(_)) => {
            return Err(BadRequest(json!({"error":"Invalid before parameter"})));
        }
    };
    Ok((limit, before))
}

/// The cursor for the page after `page`, when it may not be the last.
pub(crate) fn next_before(page: &[TraceSummary], limit: usize) -> Option<u64> {
    if page.len() == limit {
        page.last().map(|t| t.last_seq)
    } else {
        None
    }
}

/// A trace as the listings show it: its merged trace fields (without
/// `type`), times derived from its events when it carries none,
/// `last_activity_at`, `event_count` and `last_seq`.
pub(crate) fn trace_entry(t: &TraceSummary) -> Map<String, Value> {
    let mut obj = t
        .trace_json
        .as_deref()
        .and_then(|j| serde_json::from_str::<Map<String, Value>>(j).ok())
        .unwrap_or_default();
    obj.remove("type");
    obj.insert("trace_id".into(), Value::from(t.trace_id.as_str()));
    let derived = !t.has_started && !t.has_ended;
    for (key, carried, ms) in [
        ("started_at", t.has_started, t.first_ms),
        ("ended_at", t.has_ended, t.last_ms),
    ] {
        if let Some(ms) = ms.filter(|_| carried || derived) {
            obj.insert(key.into(), Value::from(format_rfc3339_millis(ms)));
        }
    }
    if derived && t.first_ms.is_some() {
        obj.insert("times_derived".into(), Value::Bool(true));
    }
    obj.insert(
        "last_activity_at".into(),
        Value::from(format_rfc3339_millis(t.last_received_ms)),
    );
    obj.insert("event_count".into(), Value::from(t.event_count));
    obj.insert("last_seq".into(), Value::from(t.last_seq));
    obj
}

/// `GET /api/traces?limit=&before=`: `{"traces":[...],"next_before":seq|null}`.
/// Each entry: `trace_id`, the trace fields (`name`, `group_id`,
/// `started_at`, `ended_at`, `metadata`) merged over its retained trace
/// events, `times_derived` when the times come from its events,
/// `last_activity_at`, `event_count`, `last_seq`. Pass `next_before` as
/// `before` for the next page.
#[utoipa::path(get, path = "/api/traces", tag = "trace server",
    params(("limit" = Option<usize>, Query, description = "Traces per page"), ("before" = Option<u64>, Query, description = "The `next_before` of the previous page")),
    responses((status = 200, description = "`{\"traces\": [...], \"next_before\"}`", body = Object), (status = 401, description = "No or a wrong read token")))]
pub(crate) async fn list(
    State(state): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let (limit, before) = match page_params(&q) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let page = state.store().memory().traces(limit, before);
    let traces: Vec<Value> = page.iter().map(|t| Value::Object(trace_entry(t))).collect();
    reply(
        StatusCode::OK,
        json!({"traces": traces, "next_before": next_before(&page, limit)}),
    )
}

/// `GET /api/traces/{trace_id}`: `{"trace":<event>|null,"spans":[...]}`,
/// spans in arrival order, each as ingested plus its `seq`; the trace is
/// its trace events merged; 404 if unknown.
#[utoipa::path(get, path = "/api/traces/{trace_id}", tag = "trace server",
    params(("trace_id" = String, Path, description = "The trace")),
    responses((status = 200, description = "`{\"trace\", \"spans\": [...]}`", body = Object), (status = 404, description = "Unknown trace")))]
pub(crate) async fn get(State(state): State<AppState>, Path(trace_id): Path<String>) -> Response {
    let (events, summary) = {
        let memory = state.store().memory();
        (memory.trace_events(&trace_id), memory.trace(&trace_id))
    };
    let Some(events) = events else {
        return reply(StatusCode::NOT_FOUND, json!({"error":"Trace not found"}));
    };
    // Stitch the stored JSON together rather than re-parse every span.
    let trace = summary
        .and_then(|t| t.trace_json)
        .unwrap_or_else(|| "null".to_owned());
    let mut spans = String::from("[");
    for ev in &events {
        if ev.is_span {
            if spans.len() > 1 {
                spans.push(',');
            }
            // `{...}` → `{"seq":N,...}`: stored JSON is always a non-empty object.
            spans.push_str(&format!("{{\"seq\":{},", ev.seq));
            spans.push_str(&ev.json()[1..]);
        }
    }
    spans.push(']');
    let body = format!(
        "{{\"trace_id\":{},\"trace\":{trace},\"spans\":{spans}}}",
        Value::from(trace_id)
    );
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}
