//! The OpenAPI 3.1 document of everything `compact serve` answers: the
//! session API (this crate's handlers) and the trace server's routes
//! (`ariadne_server::openapi`), generated from the handlers' annotations.
//! Users generate clients for their language from it (`GET /openapi.json`).

use utoipa::OpenApi;

use crate::api::{
    CompactFailure, CompactionParams, CompactionResponse, ConversationMemoryResponse,
    DeleteResponse, Detail, NotFound, RecallPage, RecallParams, RecallResponse, ValidationFailed,
};
use crate::routes;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "compact",
        description = "Context compaction for LLM agents over HTTP (the session API) and the Ariadne-compatible trace server. Writes need the ingest token and reads the read token when the server sets them (`Authorization: Bearer …`)."
    ),
    paths(
        routes::preflight,
        routes::manual,
        routes::overflow,
        routes::status,
        routes::recall,
        routes::recall_id,
        routes::forget,
        routes::conversation,
        routes::openapi_json,
    ),
    components(schemas(
        CompactionParams,
        CompactionResponse,
        DeleteResponse,
        ConversationMemoryResponse,
        ValidationFailed,
        Detail,
        CompactFailure,
        RecallParams,
        RecallPage,
        RecallResponse,
        NotFound,
    ))
)]
struct ServiceApi;

/// The document of every route `compact serve` answers.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut doc = ServiceApi::openapi();
    doc.merge(ariadne_server::openapi());
    doc
}
