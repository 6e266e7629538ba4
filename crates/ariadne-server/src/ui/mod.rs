//! The timeline web UI. Placeholder: owned elsewhere, replaces this file.

/// Routes serving the UI (`GET /` and its assets).
pub fn router<S: Clone + Send + Sync + 'static>() -> axum::Router<S> {
    axum::Router::new()
}
