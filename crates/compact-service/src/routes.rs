//! The handlers, [`router`] and [`serve`].

use std::future::Future;
use std::sync::Arc;

use ariadne_server::{AppState, Mount, ServerConfig};
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::routing::{delete, get, patch, post};
use axum::{Json, Router};
use compact_middleware::PreflightOutcome;
use compact_middleware::manager::Overlays;
use compact_middleware::model::{Format, Message, Request};
use compact_middleware::trigger::Forced;
use serde_json::{Map, Value};

use crate::api::{
    CompactFailure, CompactionParams, CompactionResponse, ConversationMemoryResponse,
    DeleteResponse, NotFound, RecallPage, RecallParams, RecallResponse, ValidationFailed,
};
use crate::error::ApiError;
use crate::json::JsonBody;
use crate::service::{Service, ServiceError, preflight_request};

type Shared = State<Arc<Service>>;

/// The whole application: the trace server's routes on `server`, and the
/// service's behind the same tokens (writes behind the ingest token,
/// `GET /v1/sessions/{id}` and `GET /openapi.json` behind the read token).
pub fn router(server: AppState, mut service: Service) -> Router {
    service.attach(&server);
    ariadne_server::router_with(server, mount(service))
}

/// Runs the trace server with the service mounted until `shutdown`
/// resolves (see [`ariadne_server::serve`]).
pub async fn serve(
    mut service: Service,
    server: ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServiceError> {
    let manager = service.manager.clone();
    let served = ariadne_server::serve_with(
        server,
        |state| {
            service.attach(state);
            mount(service)
        },
        shutdown,
    )
    .await;
    // Recall index writes run on the blocking pool; the runtime drops
    // what has not started when it shuts down.
    manager.flush_recall(None).await;
    served?;
    Ok(())
}

fn mount(service: Service) -> Mount {
    let body_limit = service.body_limit;
    let service = Arc::new(service);
    let write = Router::new()
        .route("/v1/preflight", post(preflight))
        .route("/v1/sessions/{id}", delete(forget))
        .route("/v1/sessions/{id}/compact", post(manual))
        .route("/v1/sessions/{id}/overflow", post(overflow))
        .route("/v1/conversations/{id}/memory", patch(conversation))
        .layer(DefaultBodyLimit::max(body_limit))
        .with_state(service.clone());
    let read = Router::new()
        .route("/v1/sessions/{id}", get(status))
        .route("/v1/sessions/{id}/recall", post(recall))
        .route("/v1/sessions/{id}/recall/{rid}", get(recall_id))
        .route("/openapi.json", get(openapi_json))
        .with_state(service);
    Mount { write, read }
}

/// Estimates, decides and, when the history is too big, compacts it
/// (docs/design.md §5), for the session `session_id`.
#[utoipa::path(post, path = "/v1/preflight", tag = "session API",
    request_body = CompactionParams,
    responses(
        (status = 200, description = "The history to send and the report", body = CompactionResponse),
        (status = 400, description = "A refused body, with the JSON path", body = ValidationFailed),
        (status = 413, description = "Past `server.limits.preflight_body_bytes`"),
        (status = 422, description = "The pinned messages do not fit, with guidance", body = CompactFailure),
        (status = 503, description = "The session store failed", body = CompactFailure),
    ))]
pub(crate) async fn preflight(
    State(s): Shared,
    JsonBody(p): JsonBody<CompactionParams>,
) -> Result<Json<CompactionResponse>, ApiError> {
    let session = p
        .session_id
        .clone()
        .ok_or_else(|| ApiError::invalid("$.session_id", "missing: a session id"))?;
    let force = p.force.unwrap_or(false);
    let forced = force.then_some(Forced::Manual);
    let note = force.then(|| "POST /v1/preflight force".to_owned());
    compaction(&s, &session, p, forced, note).await
}

/// Compacts now, whatever the trigger says (`note` goes into the events).
#[utoipa::path(post, path = "/v1/sessions/{id}/compact", tag = "session API",
    params(("id" = String, Path, description = "The session")),
    request_body = CompactionParams,
    responses(
        (status = 200, description = "The history to send and the report", body = CompactionResponse),
        (status = 400, description = "A refused body, with the JSON path", body = ValidationFailed),
        (status = 413, description = "Past `server.limits.preflight_body_bytes`"),
        (status = 422, description = "The pinned messages do not fit", body = CompactFailure),
    ))]
pub(crate) async fn manual(
    State(s): Shared,
    Path(id): Path<String>,
    JsonBody(p): JsonBody<CompactionParams>,
) -> Result<Json<CompactionResponse>, ApiError> {
    let note = p
        .note
        .clone()
        .unwrap_or_else(|| "POST /v1/sessions/{id}/compact".to_owned());
    compaction(&s, &id, p, Some(Forced::Manual), Some(note)).await
}

/// The provider refused the history as too long: compacts to
/// `policy.reactive_target_pct` and returns a history for one retry.
#[utoipa::path(post, path = "/v1/sessions/{id}/overflow", tag = "session API",
    params(("id" = String, Path, description = "The session")),
    request_body = CompactionParams,
    responses(
        (status = 200, description = "The history for one retry and the report", body = CompactionResponse),
        (status = 400, description = "A refused body, with the JSON path", body = ValidationFailed),
        (status = 413, description = "Past `server.limits.preflight_body_bytes`"),
        (status = 422, description = "The pinned messages do not fit", body = CompactFailure),
    ))]
pub(crate) async fn overflow(
    State(s): Shared,
    Path(id): Path<String>,
    JsonBody(p): JsonBody<CompactionParams>,
) -> Result<Json<CompactionResponse>, ApiError> {
    let note = p
        .error
        .clone()
        .unwrap_or_else(|| "context length exceeded".to_owned());
    compaction(&s, &id, p, Some(Forced::ContextOverflow), Some(note)).await
}

/// What the manager remembers about a session now (redacted).
#[utoipa::path(get, path = "/v1/sessions/{id}", tag = "session API",
    params(("id" = String, Path, description = "The session")),
    responses(
        (status = 200, description = "The session's status: summary, ledger, layers and report of its last call, breaker", body = Object),
        (status = 400, description = "Not a usable session id", body = ValidationFailed),
    ))]
pub(crate) async fn status(
    State(s): Shared,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let status = s.manager.status(&id).await?;
    let value = serde_json::to_value(status).map_err(|e| {
        ApiError::Compact(compact_middleware::CompactError::Internal(e.to_string()))
    })?;
    Ok(Json(value))
}

/// Searches what left the session's context (`recall.enabled`): BM25-ranked
/// excerpts for a `query`, one entry's text for an `id`. A read: behind the
/// read token.
#[utoipa::path(post, path = "/v1/sessions/{id}/recall", tag = "session API",
    params(("id" = String, Path, description = "The session")),
    request_body = RecallParams,
    responses(
        (status = 200, description = "Hits for a query (maybe none); the entry for an id", body = RecallResponse),
        (status = 400, description = "Neither or both of query and id, a bad session id, or recall is off", body = ValidationFailed),
        (status = 404, description = "An id this session does not have", body = NotFound),
        (status = 503, description = "The recall index failed", body = CompactFailure),
    ))]
pub(crate) async fn recall(
    State(s): Shared,
    Path(id): Path<String>,
    JsonBody(p): JsonBody<RecallParams>,
) -> Result<Json<RecallResponse>, ApiError> {
    let by_id = p.id.clone();
    let q = compact_middleware::recall::RecallQuery {
        query: p.query,
        id: p.id,
        limit: p.limit,
        offset: p.offset,
    };
    recall_answer(&s, id, q, by_id).await
}

/// One recalled entry's whole text, paged with `offset`.
#[utoipa::path(get, path = "/v1/sessions/{id}/recall/{rid}", tag = "session API",
    params(
        ("id" = String, Path, description = "The session"),
        ("rid" = String, Path, description = "The recall id (from a placeholder or a hit)"),
        RecallPage,
    ),
    responses(
        (status = 200, description = "The entry", body = RecallResponse),
        (status = 400, description = "A bad session id, or recall is off", body = ValidationFailed),
        (status = 404, description = "An id this session does not have", body = NotFound),
    ))]
pub(crate) async fn recall_id(
    State(s): Shared,
    Path((id, rid)): Path<(String, String)>,
    Query(page): Query<RecallPage>,
) -> Result<Json<RecallResponse>, ApiError> {
    let q = compact_middleware::recall::RecallQuery {
        offset: page.offset,
        ..compact_middleware::recall::RecallQuery::id(rid.clone())
    };
    recall_answer(&s, id, q, Some(rid)).await
}

async fn recall_answer(
    s: &Service,
    session: String,
    q: compact_middleware::recall::RecallQuery,
    by_id: Option<String>,
) -> Result<Json<RecallResponse>, ApiError> {
    let a = s.manager.recall(&session, q).await?;
    if let Some(rid) = by_id
        && a.entry.is_none()
    {
        return Err(ApiError::NotFound(format!(
            "session {session} has no recall id {rid}"
        )));
    }
    let json = |v: serde_json::Result<Value>| {
        v.map_err(|e| ApiError::Compact(compact_middleware::CompactError::Internal(e.to_string())))
    };
    Ok(Json(RecallResponse {
        session_id: session,
        hits: json(serde_json::to_value(&a.hits))?,
        entry: a.entry.map(serde_json::to_value).transpose().map_err(|e| {
            ApiError::Compact(compact_middleware::CompactError::Internal(e.to_string()))
        })?,
    }))
}

/// Forgets a session (its summary chain, its last call, its conversation
/// overlay); its archive stays.
#[utoipa::path(delete, path = "/v1/sessions/{id}", tag = "session API",
    params(("id" = String, Path, description = "The session")),
    responses(
        (status = 200, description = "Whether anything was remembered", body = DeleteResponse),
        (status = 400, description = "Not a usable session id", body = ValidationFailed),
    ))]
pub(crate) async fn forget(
    State(s): Shared,
    Path(id): Path<String>,
) -> Result<Json<DeleteResponse>, ApiError> {
    let deleted = s.manager.delete_session(&id).await?;
    Ok(Json(DeleteResponse {
        session_id: id,
        deleted,
    }))
}

/// Merges a strategy overlay into a conversation's (a JSON merge patch of
/// configuration keys; `null` removes it), applied to its later calls.
#[utoipa::path(patch, path = "/v1/conversations/{id}/memory", tag = "session API",
    params(("id" = String, Path, description = "The conversation (its session id)")),
    request_body(content = Object, description = "Configuration keys among `model`, `max_context_tokens`, `policy`, `summarizer` (or the flat names), or null"),
    responses(
        (status = 200, description = "The overlay now stored", body = ConversationMemoryResponse),
        (status = 400, description = "A refused overlay, with the path of the key", body = ValidationFailed),
    ))]
pub(crate) async fn conversation(
    State(s): Shared,
    Path(id): Path<String>,
    JsonBody(layer): JsonBody<Value>,
) -> Result<Json<ConversationMemoryResponse>, ApiError> {
    if !(layer.is_object() || layer.is_null()) {
        return Err(ApiError::invalid(
            "$",
            "expected an object (or null to remove the layer)",
        ));
    }
    let memory = s.manager.patch_conversation_overlay(&id, layer).await?;
    Ok(Json(ConversationMemoryResponse {
        conversation_id: id,
        memory,
    }))
}

/// This document: every route of the server, generated from the handlers.
#[utoipa::path(get, path = "/openapi.json", tag = "session API",
    responses((status = 200, description = "The OpenAPI 3.1 document", body = Object)))]
pub(crate) async fn openapi_json() -> Json<utoipa::openapi::OpenApi> {
    Json(crate::openapi())
}

/// One compaction call: the body as the library's request, the overlays
/// applied by the manager, the outcome in the shape the history came in.
async fn compaction(
    s: &Service,
    session: &str,
    p: CompactionParams,
    forced: Option<Forced>,
    note: Option<String>,
) -> Result<Json<CompactionResponse>, ApiError> {
    let mut req = history(p.messages, p.input, p.tools, p.format.as_deref())?;
    let usage = compact_wiring::usage_figures(p.usage.as_ref()).map_err(|e| ApiError::Invalid {
        path: e.path,
        message: e.message,
    })?;
    let overlays = Overlays {
        agent: p.agent,
        request: p.config,
    };
    let call = preflight_request(&mut req, usage, forced, note, overlays);
    let outcome = s.manager.preflight_with(session, call).await?;
    Ok(Json(answer(&req, outcome, p.keep_meta.unwrap_or(false))))
}

/// The history of a body: `messages` (or `input`, Responses items) with
/// `tools`, in the format asked for or detected. Moved, not copied.
fn history(
    messages: Option<Value>,
    input: Option<Value>,
    tools: Option<Value>,
    format: Option<&str>,
) -> Result<Request, ApiError> {
    let format = match format {
        None => Format::Auto,
        Some(f) => f
            .parse::<Format>()
            .map_err(|e| ApiError::invalid("$.format", e.to_string()))?,
    };
    let (key, items) = match (messages, input) {
        (Some(items), _) => ("messages", items),
        (None, Some(items)) => ("input", items),
        (None, None) => {
            return Err(ApiError::invalid(
                "$.messages",
                "missing: an array of messages (or \"input\")",
            ));
        }
    };
    let mut envelope = Map::new();
    envelope.insert("messages".into(), items);
    if let Some(tools) = tools {
        envelope.insert("tools".into(), tools);
    }
    Request::from_value(Value::Object(envelope), format).map_err(|e| ApiError::Invalid {
        // The path in the caller's body, which may have said `input`.
        path: match e.path.strip_prefix("$.messages") {
            Some(rest) => format!("$.{key}{rest}"),
            None => e.path,
        },
        message: e.message,
    })
}

/// The outcome as the caller gets it back: the messages in the request's
/// shape, the report with `config_sources` (always present here).
fn answer(req: &Request, outcome: PreflightOutcome, keep_meta: bool) -> CompactionResponse {
    let mut report = serde_json::to_value(&outcome.report).unwrap_or(Value::Null);
    report["config_sources"] =
        serde_json::to_value(&outcome.report.config_sources).unwrap_or(Value::Array(Vec::new()));
    // `recall.advertise` added the compact_recall tool: the caller sends
    // these tools (and runs that tool's calls through the recall routes).
    let tools = (outcome.tools != req.tools).then(|| Value::Array(outcome.tools.clone()));
    CompactionResponse {
        messages: messages_out(req, &outcome.messages, keep_meta),
        report,
        tools,
    }
}

fn messages_out(req: &Request, messages: &[Message], keep_meta: bool) -> Value {
    match req.to_value(messages, !keep_meta) {
        Value::Object(mut o) => o.remove("messages").unwrap_or(Value::Null),
        other => other,
    }
}
