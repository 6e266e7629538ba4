//! An Ariadne-compatible trace server (DESIGN §8).
//!
//! Modules:
//! - [`map`]: the OpenAI Agents SDK exporter format (`/v1/traces/ingest`)
//!   and OTLP/HTTP JSON (`/v1/traces`) mapped to Ariadne events.
//! - [`ui`]: the live timeline web UI served at `GET /`.

pub mod map;
pub mod ui;
