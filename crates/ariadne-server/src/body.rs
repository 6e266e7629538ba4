//! Reading a request body under a byte limit, counted on the bytes actually
//! read: a `Content-Length` over the limit is refused before reading, and
//! a body without one (chunked) is cut off as soon as it passes the limit.

use axum::body::Body;
use axum::http::HeaderMap;
use axum::http::header::CONTENT_LENGTH;
use futures_util::StreamExt;

/// Why a body was not read.
#[derive(Debug)]
pub(crate) enum BodyError {
    /// Over the limit; `declared` is the `Content-Length`, when it said so.
    TooLarge {
        /// The declared length, if any.
        declared: Option<u64>,
        /// The limit.
        limit: usize,
    },
    /// The connection failed mid-body.
    Read(String),
}

impl BodyError {
    /// The 413 `message`, worded like Ariadne's.
    pub(crate) fn message(&self) -> String {
        match self {
            BodyError::TooLarge {
                declared: Some(n),
                limit,
            } => format!("Request size {n} bytes exceeds maximum of {limit} bytes"),
            BodyError::TooLarge {
                declared: None,
                limit,
            } => format!("Request body exceeds maximum of {limit} bytes"),
            BodyError::Read(e) => format!("Could not read the request body: {e}"),
        }
    }
}

/// Reads the whole body, refusing more than `limit` bytes.
pub(crate) async fn read_limited(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<Vec<u8>, BodyError> {
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(BodyError::TooLarge { declared, limit });
    }
    let mut buf = Vec::with_capacity(declared.map_or(8 * 1024, |n| n as usize));
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| BodyError::Read(e.to_string()))?;
        if buf.len() + chunk.len() > limit {
            return Err(BodyError::TooLarge {
                declared: None,
                limit,
            });
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf)
}
