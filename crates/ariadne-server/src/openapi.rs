//! The OpenAPI description of the server's routes, generated from the
//! handlers' `#[utoipa::path]` annotations; `compact serve` merges it into
//! the document it serves at `GET /openapi.json`.

use utoipa::OpenApi;

use crate::routes::{api, health, ingest, sessions};
use crate::sse;

#[derive(OpenApi)]
#[openapi(paths(
    ingest::ingest,
    ingest::sdk,
    ingest::otlp,
    sse::events,
    api::list,
    api::get,
    sessions::list,
    sessions::get,
    sessions::preflight,
    health::healthz,
    health::metrics,
))]
struct ServerApi;

/// The server's routes (the UI's pages left out) as an OpenAPI 3.1
/// document.
pub fn openapi() -> utoipa::openapi::OpenApi {
    ServerApi::openapi()
}
