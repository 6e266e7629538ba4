use std::fmt;

/// Bad input: what is wrong and where, as a JSON path (`$[3].content`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct InputError {
    /// JSON path of the offending value, rooted at `$`.
    pub path: String,
    /// What was expected and what was found.
    pub message: String,
}

impl InputError {
    pub(crate) fn new(path: impl fmt::Display, message: impl Into<String>) -> Self {
        Self {
            path: path.to_string(),
            message: message.into(),
        }
    }

    /// `expected X, got <json type>`.
    pub(crate) fn expected(path: impl fmt::Display, what: &str, got: &serde_json::Value) -> Self {
        Self::new(path, format!("expected {what}, got {}", json_type(got)))
    }

    pub(crate) fn missing(path: impl fmt::Display, what: &str) -> Self {
        Self::new(path, format!("missing (expected {what})"))
    }
}

/// The JSON type name of a value, as users read it in error messages.
pub(crate) fn json_type(v: &serde_json::Value) -> &'static str {
    use serde_json::Value::*;
    match v {
        Null => "null",
        Bool(_) => "boolean",
        Number(_) => "number",
        String(_) => "string",
        Array(_) => "array",
        Object(_) => "object",
    }
}
