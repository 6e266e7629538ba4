//! Exporters that ship compact's events off the machine, behind the
//! non-blocking [`Dispatcher`](compact_events::Dispatcher) of `compact-events`
//! (`emit` never waits on them).
//!
//! - [`AriadneExporter`] (module `ariadne`): `POST {"batch":[...]}` to an Ariadne
//!   `/ingest` (`telemetry.ariadne_url`): bodies split under the 256 KiB
//!   limit, oversized strings truncated with the server's rules, bounded
//!   retries with backoff on 5xx and timeouts, optional bearer token.
//! - [`OtlpExporter`] (module `otlp`): the same events as OTLP/HTTP
//!   (`ExportTraceServiceRequest`), JSON or protobuf ([`OtlpProtocol`];
//!   `protobuf`, private, writes the wire format), to any OpenTelemetry
//!   collector or OTLP receiver (`telemetry.otlp_endpoint`), with the GenAI
//!   semantic conventions ([`genai_attributes`]); [`trace_id_for`] and
//!   [`span_id_for`] are the id mapping it uses.
//! - `truncate` (private): the size rules both apply before sending.
//! - [`HttpOptions`] and [`SendStats`] (module `http`): the shared HTTP
//!   client options, retry loop and the rate-limited `[Ariadne]` failure log.
//! - [`tail`]: the client side of the server's `/events` SSE stream (parser,
//!   reconnecting follower, one-line rendering), for `compact tail`.
//!
//! Plain `http://` and `https://` (rustls, webpki roots) both work.

mod ariadne;
mod http;
mod otlp;
mod protobuf;
pub mod tail;
mod truncate;

pub use ariadne::AriadneExporter;
pub use http::{HttpOptions, MAX_REQUEST_TIMEOUT, SendStats};
pub use otlp::{OtlpExporter, OtlpProtocol, genai_attributes, span_id_for, trace_id_for};

/// Why an exporter could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The URL is not an `http://` or `https://` URL.
    #[error("invalid URL {url:?}: {reason}")]
    Url {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The HTTP client could not be created (TLS backend initialisation).
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
}
