//! Bearer tokens for ingest and reads, and CORS for configured origins.
//!
//! Tokens: `Authorization: Bearer T`. Read routes also take
//! `?access_token=T`, because a browser `EventSource` cannot set headers.
//! CORS: only an `Origin` in the configured list gets
//! `Access-Control-Allow-Origin` (its own origin echoed, `Vary: Origin`);
//! preflights from it are answered here; other origins get no CORS headers.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::app::AppState;

/// Which token a route needs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Access {
    /// The ingest token.
    Ingest,
    /// The read token.
    Read,
}

// Compares without an early exit, so response timing does not reveal how
// much of a guessed token was right.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn presented<'a>(headers: &'a HeaderMap, query: Option<&'a str>, access: Access) -> Vec<&'a str> {
    let mut out = Vec::new();
    if let Some(v) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        && let Some(t) = v
            .strip_prefix("Bearer ")
            .or_else(|| v.strip_prefix("bearer "))
    {
        out.push(t.trim());
    }
    if matches!(access, Access::Read) {
        for pair in query.unwrap_or("").split('&') {
            if let Some(t) = pair.strip_prefix("access_token=") {
                out.push(t);
            }
        }
    }
    out
}

/// Middleware: refuses with 401 unless the configured token is presented.
pub(crate) async fn require(
    state: State<AppState>,
    access: Access,
    req: Request,
    next: Next,
) -> Response {
    let cfg = state.config();
    let want = match access {
        Access::Ingest => cfg.ingest_token.as_deref(),
        Access::Read => cfg.read_token.as_deref(),
    };
    if let Some(want) = want {
        let ok = presented(req.headers(), req.uri().query(), access)
            .iter()
            .any(|t| same(t.as_bytes(), want.as_bytes()));
        if !ok {
            let mut resp = (
                StatusCode::UNAUTHORIZED,
                axum::Json(
                    json!({"error":"Unauthorized","message":"missing or invalid bearer token"}),
                ),
            )
                .into_response();
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return resp;
        }
    }
    next.run(req).await
}

/// Middleware: CORS for the configured origins only.
pub(crate) async fn cors(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let origin = req.headers().get(header::ORIGIN).cloned();
    let allowed = origin.as_ref().is_some_and(|o| {
        state
            .config()
            .cors_origins
            .iter()
            .any(|a| a.as_bytes() == o.as_bytes())
    });
    let preflight = req.method() == Method::OPTIONS
        && req
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    if preflight {
        let mut resp = StatusCode::NO_CONTENT.into_response();
        if !allowed {
            *resp.status_mut() = StatusCode::FORBIDDEN;
            return resp;
        }
        let h = resp.headers_mut();
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, POST, OPTIONS"),
        );
        h.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("Content-Type, Authorization, Last-Event-ID"),
        );
        h.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static("600"),
        );
        add_origin(h, origin);
        return resp;
    }
    let mut resp = next.run(req).await;
    if allowed {
        add_origin(resp.headers_mut(), origin);
    }
    resp
}

fn add_origin(h: &mut HeaderMap, origin: Option<HeaderValue>) {
    if let Some(o) = origin {
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, o);
        h.append(header::VARY, HeaderValue::from_static("Origin"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares_whole_tokens() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"abcd"));
    }
}
