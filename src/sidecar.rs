//! The session API `compact serve` mounts on the trace server: any
//! language compacts over HTTP (`POST /v1/preflight`), reads what is
//! remembered (`GET /v1/sessions/{id}`), compacts on demand or after a
//! provider's context-length error, sets a conversation's strategy layer,
//! forgets a session. Events go straight into the server's own store and
//! SSE stream. Session state lives in the configured session store, so
//! replicas on one database answer alike.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ariadne_server::{AppState, Mount};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, patch, post};
use compact_middleware::config::Config;
use compact_middleware::events::{Event, ExportError, Exporter};
use compact_middleware::model::{Format, Request};
use compact_middleware::state::MemorySessionStore;
use compact_middleware::strategy::{Resolved, check_layer, from_seed_fields, resolve_layers};
use compact_middleware::tokens::CountCache;
use compact_middleware::trigger::Forced;
use compact_middleware::{BoxFuture, CompactError, CompactManager, PreflightRequest};
use serde_json::{Map, Value, json};

use compact_wiring::Parts;

/// Managers kept for distinct strategy layers; past this the cache restarts
/// (session state is in the store, so nothing is lost but warm-up).
const MAX_LAYERED_MANAGERS: usize = 64;

/// Everything the handlers share.
pub(crate) struct Sidecar {
    defaults: Config,
    base: CompactManager,
    parts: Parts,
    cache: Arc<CountCache>,
    layered: Mutex<HashMap<String, CompactManager>>,
}

/// Delivers a manager's events into the server's own store.
#[derive(Debug)]
struct ServerExporter(AppState);

impl Exporter for ServerExporter {
    fn name(&self) -> &str {
        "server"
    }

    fn export<'a>(&'a self, batch: &'a [Event]) -> BoxFuture<'a, Result<(), ExportError>> {
        Box::pin(async move {
            self.0
                .ingest_events(batch.to_vec())
                .await
                .map(|_| ())
                .map_err(|e| ExportError::Io(std::io::Error::other(e.to_string())))
        })
    }
}

impl Sidecar {
    /// The sidecar over `config`, its events stored by `server`.
    pub(crate) fn new(config: Config, parts: Parts, server: &AppState) -> anyhow::Result<Self> {
        let mut parts = parts.with_exporter(Arc::new(ServerExporter(server.clone())));
        // Every layered manager must see the same sessions: without a
        // configured store (`state.store: memory`) they share one in memory.
        if parts.store().is_none() {
            parts = parts.with_store(Arc::new(MemorySessionStore::new()));
        }
        let cache = Arc::new(CountCache::new(200_000));
        let base = parts
            .builder(config.clone())
            .count_cache(cache.clone())
            .without_config_exporters()
            .build()?;
        Ok(Self {
            defaults: config,
            base,
            parts,
            cache,
            layered: Mutex::new(HashMap::new()),
        })
    }

    /// The routes, behind the server's tokens: writes need the ingest
    /// token, `GET /v1/sessions/{id}` the read token.
    pub(crate) fn mount(self: Arc<Self>, body_limit: usize) -> Mount {
        let write = Router::new()
            .route("/v1/preflight", post(preflight))
            .route("/v1/sessions/{id}", delete(forget))
            .route("/v1/sessions/{id}/compact", post(manual))
            .route("/v1/sessions/{id}/overflow", post(overflow))
            .route("/v1/conversations/{id}/memory", patch(conversation))
            .layer(DefaultBodyLimit::max(body_limit))
            .with_state(self.clone());
        let read = Router::new()
            .route("/v1/sessions/{id}", get(status))
            .with_state(self);
        Mount { write, read }
    }

    /// The manager for one call's layers (`base` when there are none).
    fn manager_for(&self, resolved: &Resolved) -> Result<CompactManager, ApiError> {
        if resolved.sources.is_empty() {
            return Ok(self.base.clone());
        }
        let key = serde_json::to_string(&resolved.config).unwrap_or_default();
        let mut map = self
            .layered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(m) = map.get(&key) {
            return Ok(m.clone());
        }
        if map.len() >= MAX_LAYERED_MANAGERS {
            map.clear();
        }
        let m = self
            .parts
            .builder(resolved.config.clone())
            .count_cache(self.cache.clone())
            .without_config_exporters()
            .build()
            .map_err(ApiError::Compact)?;
        map.insert(key, m.clone());
        Ok(m)
    }
}

/// Why a call failed, as the HTTP answer.
enum ApiError {
    /// 400 with the JSON path, the shape of `/ingest`'s errors.
    Invalid {
        path: String,
        message: String,
    },
    Compact(CompactError),
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match self {
            ApiError::Invalid { path, message } => (
                StatusCode::BAD_REQUEST,
                axum::Json(json!({"error": "Validation failed",
                    "details": [{"path": path, "message": message}]})),
            )
                .into_response(),
            ApiError::Compact(CompactError::InvalidSession(message)) => ApiError::Invalid {
                path: "$.session_id".into(),
                message,
            }
            .into_response(),
            ApiError::Compact(e) => {
                let status = match &e {
                    CompactError::InsufficientBudget { .. } => StatusCode::UNPROCESSABLE_ENTITY,
                    CompactError::InvalidInput(_) => StatusCode::BAD_REQUEST,
                    CompactError::InvalidSession(_) => StatusCode::BAD_REQUEST,
                    CompactError::Config(_) => StatusCode::BAD_REQUEST,
                    CompactError::State(_) => StatusCode::SERVICE_UNAVAILABLE,
                    _ => StatusCode::INTERNAL_SERVER_ERROR,
                };
                let mut body = json!({"error": e.kind(), "message": e.to_string()});
                if let CompactError::InsufficientBudget { guidance, .. } = &e {
                    body["guidance"] = Value::String(guidance.clone());
                }
                (status, axum::Json(body)).into_response()
            }
        }
    }
}

fn invalid(path: &str, message: impl Into<String>) -> ApiError {
    ApiError::Invalid {
        path: path.to_owned(),
        message: message.into(),
    }
}

fn parse_object(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(_) => Err(invalid("$", "expected a JSON object")),
        Err(e) => Err(invalid(
            "$",
            format!(
                "invalid JSON at line {} column {}: {e}",
                e.line(),
                e.column()
            ),
        )),
    }
}

fn opt_str<'a>(o: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, ApiError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(invalid(&format!("$.{key}"), "expected a string")),
    }
}

fn opt_bool(o: &Map<String, Value>, key: &str) -> Result<bool, ApiError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(invalid(&format!("$.{key}"), "expected true or false")),
    }
}

/// The history of a body: `messages` (Chat Completions) or `input`
/// (Responses), in the format asked for or detected. Taken out of the body,
/// not copied: a real history is megabytes.
fn history(o: &mut Map<String, Value>) -> Result<Request, ApiError> {
    let format = match opt_str(o, "format")? {
        None => Format::Auto,
        Some(f) => f
            .parse::<Format>()
            .map_err(|e| invalid("$.format", e.to_string()))?,
    };
    let (key, items) = match o.remove("messages") {
        Some(items) => ("messages", items),
        None => match o.remove("input") {
            Some(items) => ("input", items),
            None => {
                return Err(invalid(
                    "$.messages",
                    "missing: an array of messages (or \"input\")",
                ));
            }
        },
    };
    let mut envelope = Map::new();
    envelope.insert("messages".into(), items);
    if let Some(tools) = o.remove("tools") {
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

/// The messages of an outcome as the caller gets them back.
fn messages_out(req: &Request, messages: &[compact_middleware::Message], keep_meta: bool) -> Value {
    match req.to_value(messages, !keep_meta) {
        Value::Object(mut o) => o.remove("messages").unwrap_or(Value::Null),
        other => other,
    }
}

/// The input tokens the provider reported for the last response (see
/// [`compact_wiring::usage_tokens`] for the shapes accepted).
fn usage_tokens(usage: Option<&Value>) -> Result<Option<usize>, ApiError> {
    compact_wiring::usage_tokens(usage).map_err(|e| ApiError::Invalid {
        path: e.path,
        message: e.message,
    })
}

/// The manager of one call and the layers that chose it: the request's
/// `config`, the `agent` it names from the configuration's `agents:`, and
/// the session's conversation layer (`PATCH /v1/conversations/{id}/memory`),
/// in the precedence request > conversation > agent > defaults.
async fn layered(
    s: &Sidecar,
    o: &Map<String, Value>,
    session: &str,
) -> Result<(CompactManager, Resolved), ApiError> {
    let request_layer = match o.get("config") {
        None | Some(Value::Null) => None,
        Some(layer) => {
            check_layer(&from_seed_fields(layer)).map_err(|e| layer_error("$.config", &e))?;
            Some(layer.clone())
        }
    };
    let agent_layer = match opt_str(o, "agent")? {
        None => None,
        Some(name) => Some(s.defaults.agents.get(name).cloned().ok_or_else(|| {
            invalid(
                "$.agent",
                format!("no agent {name:?} in the configuration's agents"),
            )
        })?),
    };
    let conversation = s
        .base
        .conversation_layer(session)
        .await
        .map_err(ApiError::Compact)?;
    let resolved = resolve_layers(
        &s.defaults,
        agent_layer.as_ref(),
        conversation.as_ref(),
        request_layer.as_ref(),
    )
    .map_err(|e| layer_error("$.config", &e))?;
    let manager = s.manager_for(&resolved)?;
    Ok((manager, resolved))
}

/// The answer of a compaction call: the messages as the caller gets them
/// back, and the report with `config_sources` (which layer set each
/// overridden key).
fn answer(
    req: &Request,
    outcome: &compact_middleware::PreflightOutcome,
    resolved: &Resolved,
    keep_meta: bool,
) -> Response {
    // Each overridden key once, with the level that won it.
    let mut seen = std::collections::HashSet::new();
    let sources: Vec<Value> = resolved
        .sources
        .iter()
        .filter(|(key, _)| seen.insert(key.as_str()))
        .map(|(key, _)| json!({"key": key, "level": resolved.source_of(key)}))
        .collect();
    let mut report = serde_json::to_value(&outcome.report).unwrap_or(Value::Null);
    report["config_sources"] = Value::Array(sources);
    axum::Json(json!({
        "messages": messages_out(req, &outcome.messages, keep_meta),
        "report": report,
    }))
    .into_response()
}

async fn preflight(State(s): State<Arc<Sidecar>>, body: Bytes) -> Result<Response, ApiError> {
    let mut o = parse_object(&body)?;
    let session = opt_str(&o, "session_id")?
        .ok_or_else(|| invalid("$.session_id", "missing: a session id"))?
        .to_owned();
    let req = history(&mut o)?;
    let keep_meta = opt_bool(&o, "keep_meta")?;
    let force = opt_bool(&o, "force")?;
    let usage = usage_tokens(o.get("usage"))?;
    let (manager, resolved) = layered(&s, &o, &session).await?;
    let outcome = manager
        .preflight_with(
            &session,
            PreflightRequest {
                messages: req.messages.clone(),
                tools: req.tools.clone(),
                forced: force.then_some(Forced::Manual),
                note: force.then(|| "POST /v1/preflight force".to_owned()),
                strict: false,
                usage,
            },
        )
        .await
        .map_err(ApiError::Compact)?;
    Ok(answer(&req, &outcome, &resolved, keep_meta))
}

fn layer_error(prefix: &str, e: &compact_middleware::config::ConfigError) -> ApiError {
    match e.field_errors().first() {
        Some(fe) => invalid(
            format!("{prefix}.{}", fe.path).trim_end_matches('.'),
            fe.message.clone(),
        ),
        None => invalid(prefix, e.to_string()),
    }
}

async fn status(
    State(s): State<Arc<Sidecar>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let status = s.base.status(&id).await.map_err(ApiError::Compact)?;
    Ok(axum::Json(status).into_response())
}

async fn forget(
    State(s): State<Arc<Sidecar>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let existed = s
        .base
        .delete_session(&id)
        .await
        .map_err(ApiError::Compact)?;
    Ok(axum::Json(json!({"session_id": id, "deleted": existed})).into_response())
}

async fn manual(
    State(s): State<Arc<Sidecar>>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    forced(s, id, body, Forced::Manual).await
}

async fn overflow(
    State(s): State<Arc<Sidecar>>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    forced(s, id, body, Forced::ContextOverflow).await
}

/// Manual or reactive compaction of `{"messages", "note"|"error",
/// "tools"?, "config"?, "agent"?, "usage"?}`, under the same layers as
/// `/v1/preflight`.
async fn forced(
    s: Arc<Sidecar>,
    id: String,
    body: Bytes,
    why: Forced,
) -> Result<Response, ApiError> {
    let mut o = parse_object(&body)?;
    let req = history(&mut o)?;
    let keep_meta = opt_bool(&o, "keep_meta")?;
    let usage = usage_tokens(o.get("usage"))?;
    let note = match why {
        Forced::ContextOverflow => opt_str(&o, "error")?.unwrap_or("context length exceeded"),
        _ => opt_str(&o, "note")?.unwrap_or("POST /v1/sessions/{id}/compact"),
    }
    .to_owned();
    let (manager, resolved) = layered(&s, &o, &id).await?;
    let outcome = manager
        .preflight_with(
            &id,
            PreflightRequest {
                messages: req.messages.clone(),
                tools: req.tools.clone(),
                forced: Some(why),
                note: Some(note),
                strict: false,
                usage,
            },
        )
        .await
        .map_err(ApiError::Compact)?;
    Ok(answer(&req, &outcome, &resolved, keep_meta))
}

async fn conversation(
    State(s): State<Arc<Sidecar>>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let layer: Value = serde_json::from_slice(&body).map_err(|e| invalid("$", e.to_string()))?;
    let merged = match layer {
        Value::Null => None,
        Value::Object(_) => {
            // PATCH: merged into what the conversation had.
            let mut current = s
                .base
                .conversation_layer(&id)
                .await
                .map_err(ApiError::Compact)?
                .map(|v| from_seed_fields(&v))
                .unwrap_or(Value::Object(Map::new()));
            merge(&mut current, from_seed_fields(&layer));
            check_layer(&current).map_err(|e| layer_error("$", &e))?;
            resolve_layers(&s.defaults, None, Some(&current), None)
                .map_err(|e| layer_error("$", &e))?;
            Some(current)
        }
        _ => {
            return Err(invalid(
                "$",
                "expected an object (or null to remove the layer)",
            ));
        }
    };
    s.base
        .set_conversation_layer(&id, merged.clone())
        .await
        .map_err(ApiError::Compact)?;
    Ok(axum::Json(json!({"conversation_id": id, "memory": merged})).into_response())
}

fn merge(target: &mut Value, incoming: Value) {
    match (target, incoming) {
        (Value::Object(t), Value::Object(i)) => {
            for (k, v) in i {
                match t.get_mut(&k) {
                    Some(existing) if existing.is_object() && v.is_object() => merge(existing, v),
                    _ => {
                        t.insert(k, v);
                    }
                }
            }
        }
        (t, i) => *t = i,
    }
}
