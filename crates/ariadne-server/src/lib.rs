//! An Ariadne-compatible trace server: the public Ariadne Trace Viewer's
//! web UI and Python exporter work against it unchanged (docs/design.md §8), and
//! it adds what Ariadne lacks: durability (a 200 means on disk), SSE
//! replay by event id, tokens, CORS limits, metrics, and the OpenAI
//! Agents SDK and OTLP ingest formats.
//!
//! The API is what running and embedding the server needs, at the crate
//! root: [`ServerConfig`] and its [`Limits`], [`Retention`] and
//! [`StoreOptions`]; [`serve`] and [`spawn`] (a [`RunningServer`]), and
//! their `_with` forms that add a [`Mount`] of routes behind the same
//! tokens; [`AppState`] and [`router`] to mount it in another axum app; the errors
//! [`ServerError`] and [`StoreError`]; [`openapi`], the routes' OpenAPI
//! document. Two namespaces: [`map`] (OpenAI Agents
//! SDK and OTLP JSON to events) and [`ui`] (the timeline web UI's routes).
//!
//! Private modules: `app` (the router, `serve`, `spawn`), `config`, `schema`
//! (`/ingest` validation, truncation, the older span shape), `body` (body
//! reading under a byte limit), `store` (the durable segmented log with
//! group commit, and the in-memory index), `session` (a session's
//! preflights, one row each, from its spans), `sse` (`GET /events`), `routes`
//! (ingest, API, health and metrics handlers), `security` (bearer tokens and
//! CORS), `listener` (the connection-limited TCP listener), `metrics`
//! (Prometheus counters), `error`.

mod app;
mod body;
mod config;
mod error;
mod listener;
pub mod map;
mod metrics;
mod openapi;
mod routes;
mod schema;
mod security;
mod session;
mod sse;
mod store;
pub mod ui;

pub use app::{
    AppState, Mount, RunningServer, router, router_with, serve, serve_with, spawn, spawn_with,
};
pub use config::{Limits, Retention, ServerConfig, StoreBackend, StoreOptions};
pub use error::{ServerError, StoreError};
pub use openapi::openapi;
