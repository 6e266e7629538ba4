//! An Ariadne-compatible trace server: the public Ariadne Trace Viewer's
//! web UI and Python exporter work against it unchanged (`docs/design.md §8`), and
//! it adds what Ariadne lacks: durability (a 200 means on disk), SSE
//! replay by event id, tokens, CORS limits, metrics, and the OpenAI
//! Agents SDK and OTLP ingest formats.
//!
//! Modules:
//! - [`config`]: [`ServerConfig`] and its limits, retention and store options.
//! - [`app`]: the router, [`serve`] and [`spawn`].
//! - [`schema`]: `/ingest` validation, truncation, the seed 004 shape.
//! - [`body`]: body reading under a byte limit.
//! - [`store`]: the durable segmented log with group commit, and the in-memory index.
//! - [`sse`]: `GET /events`.
//! - [`routes`]: the other handlers (ingest, API, health and metrics).
//! - [`security`]: bearer tokens and CORS.
//! - [`listener`]: the connection-limited TCP listener.
//! - [`metrics`]: Prometheus counters.
//! - [`map`]: OpenAI Agents SDK and OTLP JSON to events.
//! - [`session`]: a session's preflights, one row each, from its spans.
//! - [`ui`]: the timeline web UI.
//! - [`error`]: [`ServerError`], [`StoreError`].

pub mod app;
pub mod body;
pub mod config;
pub mod error;
pub mod listener;
pub mod map;
pub mod metrics;
pub mod routes;
pub mod schema;
pub mod security;
pub mod session;
pub mod sse;
pub mod store;
pub mod ui;

pub use app::{AppState, RunningServer, router, serve, spawn};
pub use config::{Limits, Retention, ServerConfig, StoreOptions};
pub use error::{ServerError, StoreError};
