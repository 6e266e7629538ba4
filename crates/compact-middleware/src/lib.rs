//! The compact library: everything an agent needs to keep its context window
//! under control, with no HTTP server and no cloud SDK inside.
//!
//! The engine is here; `model`, `tokens`, `estimate` and `price` come from
//! `compact-model` and `summarize` from `compact-summarize`, re-exported.
//!
//! - [`model`]: the message model. Lossless codecs for OpenAI Chat Completions
//!   messages and Responses input items, atomic groups, turns, the validator.
//! - [`tokens`]: exact OpenAI BPE token accounting, model profiles, the
//!   per-message count cache.
//! - [`config`]: the YAML configuration, `COMPACT_*` environment overrides,
//!   validation that names the field path.
//! - [`summarize`]: the `Summarizer` trait, the deterministic extractive summarizer and
//!   the `openai` summarizer (any OpenAI-compatible chat-completions endpoint).
//! - [`events`]: the `compact-events` crate, re-exported: Ariadne spans, the
//!   `Exporter` trait, the non-blocking dispatcher.
//! - [`estimate`]: whole-request estimates and the breakdown, model limits.
//! - [`trigger`]: whether a call compacts, and why.
//! - [`pipeline`]: the tiers (budgeting, clearing, summarizing, reducing) and modes.
//! - [`invariants`]: the checks of docs/design.md §12, for tests, the soak harness and users.
//! - [`manager`]: [`CompactManager`], sessions, the `before_model_call` hook.
//! - [`archive`]: the `StorageAdapter` trait (bytes under keys), the
//!   filesystem adapter, and the `Archive` on top: layout, hash-chained
//!   manifest, `verify`, the spool.
//! - [`redact`]: the `Redactor` applied to everything exported or archived.
//! - [`memory`]: the memory store (SQLite), the sliding-window memory,
//!   cross-session memory and memory files injected into the instructions.
//! - [`state`]: the `SessionStore` trait and its in-memory, SQLite and PostgreSQL stores:
//!   session state that outlives a process (docs/design.md §13).
//! - [`strategy`]: per request > per conversation > per agent > defaults.
//! - [`cache`]: the provider's prompt cache around a call: what it can serve
//!   of the returned request, what the caller reported it served of the last one.
//! - [`price`]: list prices per million tokens (`models.NAME.price` and the
//!   built-in table) and the cost of a call's input, cache and output tokens.
pub mod archive;
pub mod cache;
pub mod config;
mod db;
pub mod invariants;
pub mod manager;
pub mod memory;
mod pgtls;
pub mod pipeline;
pub mod recall;
pub mod redact;
pub mod state;
pub mod strategy;
pub mod trigger;

/// The message model, the token counting, the estimates and the prices live
/// in `compact-model`, the leaf every crate that reads a history shares; the
/// `compact_middleware::{model, tokens, estimate, price}` paths stay valid.
pub use compact_model::{estimate, model, price, tokens};

/// The summarizers and the fact ledger live in `compact-summarize`; the
/// `compact_middleware::summarize::...` paths stay valid.
pub use compact_summarize as summarize;

pub use manager::{
    BeforeModelCall, CompactError, CompactManager, ModelCallContext, PreflightOutcome,
    PreflightRequest, Report,
};
pub use model::Message;

/// Ariadne spans, the `Exporter` trait and the dispatcher live in their own
/// crate so the server and the exporters need not build this one; the
/// `compact_middleware::events::...` paths stay valid.
pub use compact_events as events;

/// A boxed, sendable future: what the async traits of this crate
/// (`Summarizer`, `StorageAdapter`) and `events::Exporter` return, so they
/// stay object safe. Defined in `compact-events`.
pub use compact_events::BoxFuture;
