//! compact's HTTP entry points as a library: the session API and `POST
//! /v1/preflight` (docs/design.md §8), mounted on the trace server's
//! router behind its tokens, and the provider-compatible proxy
//! ([`proxy`], docs/design.md §15), with with the OpenAPI 3.1 document of every route
//! (the trace server's included) generated from the handlers and served at
//! `GET /openapi.json`. `compact serve` builds a [`Service`] (everything
//! that can fail happens there, before a port is bound) and calls
//! [`serve`]; a test or another program calls [`router`].
//!
//! The service owns its request and response types (`api`) and converts
//! them to the library's `PreflightRequest` and back; the report is the one
//! shape it shares with the library (`Report`'s JSON, plus
//! `config_sources`). Strategy overlays (a request's `config`, its `agent`,
//! a conversation's `PATCH`ed memory) are applied by the manager, once per
//! call.
//!
//! Private modules: `service` ([`Service`], [`ServiceError`], the exporter
//! into the server's store), `api` (the bodies), `json` (the one JSON
//! extractor, whose rejection is compact's error shape `{"error":
//! "Validation failed", "details": [{"path", "message"}]}`), `error` (every
//! failure as an HTTP answer), `routes` (the handlers, [`router`],
//! [`serve`]), `openapi` ([`openapi`]). Public: [`proxy`] (`compact
//! proxy`: [`proxy::Proxy`], [`proxy::router`], [`proxy::serve`]).

mod api;
mod error;
mod json;
mod openapi;
pub mod proxy;
mod routes;
mod service;

pub use openapi::openapi;
pub use routes::{router, serve};
pub use service::{Service, ServiceError};
