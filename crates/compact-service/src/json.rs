//! The one JSON body extractor of the service. It reads the body under the
//! route's byte limit (`DefaultBodyLimit`: 413 past it) whatever its
//! `Content-Type` (callers such as `curl -d` send none that says JSON),
//! and decodes it straight into the route's type with the JSON path of the
//! first problem: a refusal is compact's error shape, `{"error":
//! "Validation failed", "details": [{"path", "message"}]}`.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// A body decoded into `T`.
pub(crate) struct JsonBody<T>(pub(crate) T);

/// A type a body decodes into.
pub(crate) trait Body: DeserializeOwned {
    /// Whether the body must be a JSON object (serde would also read a
    /// struct from an array, by position).
    const OBJECT: bool;
}

impl Body for serde_json::Value {
    const OBJECT: bool = false;
}

impl Body for crate::api::CompactionParams {
    const OBJECT: bool = true;
}

impl Body for crate::api::RecallParams {
    const OBJECT: bool = true;
}

impl<S: Send + Sync, T: Body> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(ApiError::Body)?;
        decode(&bytes).map(JsonBody)
    }
}

/// `bytes` as a `T`, or where and why not.
pub(crate) fn decode<T: Body>(bytes: &[u8]) -> Result<T, ApiError> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if T::OBJECT
        && first.is_some_and(|b| *b != b'{')
        && serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok()
    {
        return Err(ApiError::invalid("$", "expected a JSON object"));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| {
            let path = json_path(&e.path().to_string());
            refusal(path, e.into_inner())
        })
        .and_then(|value| {
            de.end().map_err(|e| refusal("$".into(), e))?;
            Ok(value)
        })?;
    Ok(value)
}

/// A decoding error as a 400: a syntax error is the body's, at `$`.
fn refusal(path: String, e: serde_json::Error) -> ApiError {
    if e.is_syntax() || e.is_eof() {
        return ApiError::invalid(
            "$",
            format!(
                "invalid JSON at line {} column {}: {e}",
                e.line(),
                e.column()
            ),
        );
    }
    ApiError::invalid(&path, e.to_string())
}

/// `serde_path_to_error`'s path (`.`, `messages[3].role`, `[0]`) as a JSON
/// path (`$`, `$.messages[3].role`, `$[0]`).
fn json_path(path: &str) -> String {
    match path {
        "" | "." => "$".to_owned(),
        p if p.starts_with('[') => format!("${p}"),
        p => format!("$.{p}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_read_as_json_paths() {
        assert_eq!(json_path("."), "$");
        assert_eq!(json_path("session_id"), "$.session_id");
        assert_eq!(json_path("usage.input_tokens"), "$.usage.input_tokens");
        assert_eq!(json_path("[2].role"), "$[2].role");
    }
}
