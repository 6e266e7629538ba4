//! The bodies of the session API, one type per route and direction
//! (`*Params` in, `*Response` out). The histories (`messages`, `input`)
//! stay JSON values and are moved, not copied, into the library's
//! `Request`; the report is the library's `Report` as JSON.
//!
//! No body refuses fields it does not know: callers may send more than a
//! route reads (docs/design.md §8).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// The body of the three compaction routes: `POST /v1/preflight`
/// (`session_id` required, `force`), `POST /v1/sessions/{id}/compact`
/// (`note`) and `POST /v1/sessions/{id}/overflow` (`error`). One type, not
/// three wrapped around a shared part: `#[serde(flatten)]` would buffer and
/// copy the history, which is megabytes.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(expecting = "a JSON object")]
pub(crate) struct CompactionParams {
    /// `POST /v1/preflight`: the session (letters, digits, `-`, `_`, `.`).
    pub(crate) session_id: Option<String>,
    /// The history: OpenAI Chat Completions messages (or Anthropic
    /// messages). Required unless `input` is given.
    #[schema(value_type = Option<Vec<Object>>)]
    pub(crate) messages: Option<Value>,
    /// The history as OpenAI Responses input items.
    #[schema(value_type = Option<Vec<Object>>)]
    pub(crate) input: Option<Value>,
    /// Tool schemas sent with the model call (counted, never changed).
    #[schema(value_type = Option<Vec<Object>>)]
    pub(crate) tools: Option<Value>,
    /// `auto` (default), `chat`, `responses` or `anthropic`.
    pub(crate) format: Option<String>,
    /// Return the library form (with `meta`) instead of the provider form.
    pub(crate) keep_meta: Option<bool>,
    /// The provider's reported usage of the last response (`{"input_tokens":
    /// N}`, OpenAI's or Anthropic's usage object, or N): anchors the estimate;
    /// an object's cache figures (`prompt_tokens_details.cached_tokens`,
    /// `cache_read_input_tokens`, `cache_creation_input_tokens`) are reported
    /// on the call's `compact.preflight` event and `report.cache`.
    #[schema(value_type = Option<Object>)]
    pub(crate) usage: Option<Value>,
    /// This call's strategy overlay: configuration keys among `model`,
    /// `max_context_tokens`, `policy`, `summarizer` (or the flat names).
    #[schema(value_type = Option<Object>)]
    pub(crate) config: Option<Value>,
    /// An agent of the configuration's `agents:`, whose overlay applies.
    pub(crate) agent: Option<String>,
    /// `POST /v1/preflight`: compact even if nothing triggers.
    pub(crate) force: Option<bool>,
    /// `POST /v1/sessions/{id}/compact`: free text carried into the events.
    pub(crate) note: Option<String>,
    /// `POST /v1/sessions/{id}/overflow`: the provider's error message.
    pub(crate) error: Option<String>,
}

/// The answer of every compaction route.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CompactionResponse {
    /// The history to send, in the shape it came in (provider-clean unless
    /// `keep_meta`).
    #[schema(value_type = Vec<Object>)]
    pub(crate) messages: Value,
    /// What the call did: the library's report (docs/design.md §5), with
    /// `config_sources`, the level that set each overridden key.
    #[schema(value_type = Object)]
    pub(crate) report: Value,
    /// The tools to send, when compaction changed them: the request's and
    /// the `compact_recall` tool (`recall.advertise`). Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub(crate) tools: Option<Value>,
}

/// `DELETE /v1/sessions/{id}`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DeleteResponse {
    /// The session.
    pub(crate) session_id: String,
    /// Whether anything was remembered about it.
    pub(crate) deleted: bool,
}

/// `PATCH /v1/conversations/{id}/memory`: the overlay now stored.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ConversationMemoryResponse {
    /// The conversation (its session id).
    pub(crate) conversation_id: String,
    /// Its strategy overlay after the patch (`null`: none).
    #[schema(value_type = Option<Object>)]
    pub(crate) memory: Option<Value>,
}

/// A body or a value the service refuses (400), the shape of `/ingest`'s.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ValidationFailed {
    /// Always `Validation failed`.
    pub(crate) error: &'static str,
    /// Each problem, with the JSON path in the caller's body.
    pub(crate) details: Vec<Detail>,
}

/// One problem of a refused body.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Detail {
    /// `$.messages[3].role`, `$.session_id`, `$.config.policy.trigger_pct`.
    pub(crate) path: String,
    /// What is wrong there.
    pub(crate) message: String,
}

/// A call the library could not answer (422 insufficient budget, 503
/// session store, 500 a bug).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CompactFailure {
    /// The error's kind: `InsufficientBudget`, `State`, `Internal`, ….
    pub(crate) error: &'static str,
    /// The whole message.
    pub(crate) message: String,
    /// For `InsufficientBudget`: what to change so the history fits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) guidance: Option<String>,
}

/// `POST /v1/sessions/{id}/recall`: a query in natural words, or an id
/// (exactly one).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(expecting = "a JSON object")]
pub(crate) struct RecallParams {
    /// Words to search what left the context for (ranked by BM25).
    pub(crate) query: Option<String>,
    /// A recall id from a placeholder or an earlier hit: its whole text.
    pub(crate) id: Option<String>,
    /// Most hits (default 5, at most 20).
    pub(crate) limit: Option<usize>,
    /// With `id`: the character to read from (paging).
    pub(crate) offset: Option<usize>,
}

/// `GET /v1/sessions/{id}/recall/{rid}`: paging.
#[derive(Debug, Deserialize, ToSchema, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct RecallPage {
    /// The character to read from (default 0).
    pub(crate) offset: Option<usize>,
}

/// The answer of the recall routes.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RecallResponse {
    /// The session.
    pub(crate) session_id: String,
    /// Ranked hits, best first: `id`, `score`, `excerpt`, `chars`, `origin`
    /// (`step`, `turn`, `kind`, `role`, `tool`, `call_id`, `file`).
    #[schema(value_type = Vec<Object>)]
    pub(crate) hits: Value,
    /// By id: `id`, `origin`, `text` (at most 8,000 characters from
    /// `offset`), `offset`, `total_chars`, `next_offset` (absent on the last
    /// page).
    #[schema(value_type = Option<Object>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) entry: Option<Value>,
}

/// A recall id the session does not have (404).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct NotFound {
    /// Always `NotFound`.
    pub(crate) error: &'static str,
    /// What was not found.
    pub(crate) message: String,
}
