//! Mappings from other trace formats to Ariadne events (OpenAI Agents SDK
//! exporter, OTLP/HTTP JSON). Placeholder: the mapping is owned elsewhere
//! and replaces this file.

use compact_middleware::events::Event;
use serde_json::Value;

/// A body that cannot be mapped, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapError {
    /// JSON path of the offending value.
    pub path: String,
    /// What is wrong with it.
    pub message: String,
}

impl std::fmt::Display for MapError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl std::error::Error for MapError {}

/// OpenAI Agents SDK `{"data":[...]}` to events.
pub fn sdk_to_events(_body: &Value) -> Result<Vec<Event>, MapError> {
    Ok(vec![])
}

/// OTLP/HTTP JSON `ExportTraceServiceRequest` to events.
pub fn otlp_to_events(_body: &Value) -> Result<Vec<Event>, MapError> {
    Ok(vec![])
}
