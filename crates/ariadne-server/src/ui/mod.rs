//! The live timeline web UI: one self-contained page (HTML, CSS and vanilla
//! JavaScript embedded in the binary, no build step, no CDN).
//!
//! Routes: `GET /` (the page), `GET /ui/app.js`, `GET /ui/app.css`, and the
//! icon at `GET /favicon.svg` and `GET /favicon.ico` (the same SVG). The page
//! talks to the server's `GET /events` (SSE, resumed with `Last-Event-ID`),
//! `GET /api/sessions` (the fleet), `GET /api/sessions/{id}` and
//! `GET /api/sessions/{id}/preflights/{span}` (the session view), and
//! `GET /api/traces/{id}` (the spans). A read token given
//! as `/?token=T` is passed on to those requests as `?token=T` (an
//! `EventSource` cannot send an `Authorization` header). `docs/integrations.md`
//! describes what it shows.

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

const INDEX_HTML: &str = include_str!("index.html");
const APP_JS: &str = include_str!("app.js");
const APP_CSS: &str = include_str!("app.css");
const FAVICON_SVG: &str = include_str!("favicon.svg");

// The page loads only its own script and stylesheet and talks only to its
// own origin; nothing inline runs.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                   connect-src 'self'; img-src 'self' data:; base-uri 'none'; \
                   form-action 'none'; frame-ancestors 'none'";

fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
}

/// The UI's routes, to merge into the server's router.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(
            "/",
            get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }),
        )
        .route(
            "/ui/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }),
        )
        .route(
            "/ui/app.css",
            get(|| async { asset("text/css; charset=utf-8", APP_CSS) }),
        )
        .route(
            "/favicon.svg",
            get(|| async { asset("image/svg+xml", FAVICON_SVG) }),
        )
        .route(
            "/favicon.ico",
            get(|| async { asset("image/svg+xml", FAVICON_SVG) }),
        )
}
