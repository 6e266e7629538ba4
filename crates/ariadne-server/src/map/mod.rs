//! Mappings from foreign trace formats to Ariadne events.
//!
//! - [`sdk_to_events`]: the OpenAI Agents SDK's own exporter format
//!   (`POST /v1/traces/ingest`, `{"data":[...]}` of `trace` and
//!   `trace.span` objects, what `BackendSpanExporter` sends).
//! - [`otlp_to_events`]: OTLP/HTTP JSON (`POST /v1/traces`, an
//!   `ExportTraceServiceRequest`).
//!
//! Both are pure functions of the request body: they never panic, whatever
//! the JSON, and a body of the wrong shape is a [`MapError`] naming the JSON
//! path of the first offending value (`$.data[3].span_data: expected
//! object`). `docs/integrations.md` documents the field mapping.

mod otlp;
mod sdk;

pub use otlp::otlp_to_events;
pub use sdk::sdk_to_events;

use serde_json::Value;

/// A request body that cannot be mapped: where, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapError {
    /// JSONPath-style location of the offending value, from `$`.
    pub path: String,
    /// What is wrong with it.
    pub message: String,
}

impl MapError {
    pub(crate) fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        MapError {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for MapError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl std::error::Error for MapError {}

/// The JSON type of a value, for error messages.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `expected <what>, found <type>` at `path`.
pub(crate) fn expected(path: &str, what: &str, found: &Value) -> MapError {
    MapError::new(path, format!("expected {what}, found {}", type_name(found)))
}

/// A value as a metadata string: strings as they are, everything else as
/// its compact JSON text (`3`, `true`, `{"a":1}`); `None` for null.
pub(crate) fn metadata_string(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}
