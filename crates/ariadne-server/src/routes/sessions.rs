//! The session API behind the UI's fleet and session views:
//!
//! - `GET /api/sessions?limit=&before=&q=&has=`: traces by last activity,
//!   each with its counters (`counts`: preflights, compactions, errors,
//!   insufficient, fallbacks, breaker_open), its latest context usage, and
//!   `totals` over everything retained.
//! - `GET /api/sessions/{id}`: one row per preflight ([`crate::session`]).
//! - `GET /api/sessions/{id}/preflights/{span_id}`: one preflight in full,
//!   with its summary text and the previous one.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::api::{next_before, page_params, trace_entry};
use super::{BadRequest, reply};
use crate::app::AppState;
use crate::session;
use crate::store::{Badge, TraceFilter, TraceSummary};

fn entry(t: &TraceSummary) -> Value {
    let mut obj = trace_entry(t);
    obj.insert("counts".into(), json!(t.counts));
    obj.insert("usage_pct".into(), json!(t.usage_pct));
    Value::Object(obj)
}

fn filter(q: &HashMap<String, String>) -> Result<TraceFilter, BadRequest> {
    let mut f = TraceFilter {
        id_contains: q
            .get("q")
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty()),
        has: Vec::new(),
    };
    for name in q
        .get("has")
        .into_iter()
        .flat_map(|h| h.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        match Badge::parse(name) {
            Some(b) => f.has.push(b),
            None => {
                return Err(BadRequest(
                    json!({"error":"Invalid has parameter","message":
                    format!("{name:?} is none of {}", Badge::NAMES.join(", "))}),
                ));
            }
        }
    }
    Ok(f)
}

/// `GET /api/sessions?limit=&before=&q=&has=`:
/// `{"sessions":[...],"next_before":seq|null,"totals":{...}}`. Each entry is
/// an `/api/traces` entry plus `counts` and `usage_pct`; `q` keeps the ids
/// containing it (case-insensitive), `has` (a comma list of `compactions`,
/// `errors`, `insufficient`, `fallbacks`, `breaker_open`) the sessions with
/// at least one of them. `totals` counts every retained event, the `traces`,
/// and gives the `last_seq` they include (a live client adds what comes after).
#[utoipa::path(get, path = "/api/sessions", tag = "trace server",
    params(("limit" = Option<usize>, Query, description = "Sessions per page"), ("before" = Option<u64>, Query, description = "The `next_before` of the previous page"), ("q" = Option<String>, Query, description = "Ids containing this"), ("has" = Option<String>, Query, description = "A comma list of compactions, errors, insufficient, fallbacks, breaker_open")),
    responses((status = 200, description = "`{\"sessions\": [...], \"next_before\", \"totals\"}`", body = Object), (status = 401, description = "No or a wrong read token")))]
pub(crate) async fn list(
    State(state): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let (limit, before) = match page_params(&q) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let filter = match filter(&q) {
        Ok(f) => f,
        Err(e) => return e.into_response(),
    };
    let (page, totals, traces, last_seq) = {
        let memory = state.store().memory();
        (
            memory.traces_where(limit, before, &filter),
            memory.totals(),
            memory.trace_count(),
            memory.last_seq(),
        )
    };
    let mut totals = json!(totals);
    totals["traces"] = json!(traces);
    // What these counts include: a live client adds only what comes after.
    totals["last_seq"] = json!(last_seq.unwrap_or(0));
    reply(
        StatusCode::OK,
        json!({
            "sessions": page.iter().map(entry).collect::<Vec<_>>(),
            "next_before": next_before(&page, limit),
            "totals": totals,
        }),
    )
}

fn not_found(what: &str) -> Response {
    reply(
        StatusCode::NOT_FOUND,
        json!({ "error": format!("{what} not found") }),
    )
}

/// `GET /api/sessions/{id}`: the `/api/sessions` entry of the trace plus
/// `window`, `trigger_pct`, `target_pct` and `preflights` (one row per
/// `compact.preflight`, oldest first); 404 if unknown.
#[utoipa::path(get, path = "/api/sessions/{id}", tag = "trace server",
    params(("id" = String, Path, description = "The session (its trace)")),
    responses((status = 200, description = "The session with one row per preflight", body = Object), (status = 404, description = "Unknown session")))]
pub(crate) async fn get(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    let (summary, events) = {
        let memory = state.store().memory();
        (memory.trace(&id), memory.trace_events(&id))
    };
    let (Some(summary), Some(events)) = (summary, events) else {
        return not_found("Session");
    };
    let view = session::view(&events);
    let mut body = entry(&summary);
    if let (Value::Object(body), Value::Object(view)) = (&mut body, json!(view)) {
        body.extend(view);
    }
    reply(StatusCode::OK, body)
}

/// `GET /api/sessions/{id}/preflights/{span_id}`: `{"row", "summary_text",
/// "previous_summary": {preflight_span_id, version, output_text}|null,
/// "spans": [...]}`; 404 if the session or the preflight is unknown.
#[utoipa::path(get, path = "/api/sessions/{id}/preflights/{span_id}", tag = "trace server",
    params(("id" = String, Path, description = "The session"), ("span_id" = String, Path, description = "Its `compact.preflight` span")),
    responses((status = 200, description = "The row, the summary text, the previous summary, the spans", body = Object), (status = 404, description = "Unknown session or preflight")))]
pub(crate) async fn preflight(
    State(state): State<AppState>,
    Path((id, span_id)): Path<(String, String)>,
) -> Response {
    let Some(events) = state.store().memory().trace_events(&id) else {
        return not_found("Session");
    };
    match session::detail(&events, &span_id) {
        Some(d) => reply(StatusCode::OK, json!(d)),
        None => not_found("Preflight"),
    }
}
