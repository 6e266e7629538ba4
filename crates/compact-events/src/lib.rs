//! compact's events: every compaction decision as an Ariadne span
//! (`docs/design.md` §7), and the non-blocking delivery of those spans to
//! exporters. A crate of its own so the trace server and the exporters can
//! speak the wire format without compiling the middleware.
//!
//! At the crate root:
//! - the wire types ([`Event`], [`TraceEvent`], [`SpanEvent`]), RFC 3339
//!   timestamps, span ids, [`SpanBuilder`] (module `span`);
//! - the [`Exporter`] trait and the in-memory [`CollectingExporter`];
//! - the [`Dispatcher`], a bounded queue and a worker thread; `emit` never
//!   waits on an exporter;
//! - the built-in exporters, [`ConsoleExporter`] and [`JsonlExporter`].
//!
//! Four namespaces:
//! - [`names`]: the `compact.*` event names and the span kind.
//! - [`payload`]: one struct per event name, the schema of its `data`
//!   (`docs/events.md` is the reference), and [`SpanBuilder::for_payload`].
//! - [`truncate`]: the size rule for names and `data` strings, shared by the
//!   server (on ingest) and the exporters (before sending).
//! - [`settings`]: the trace server's settings (`server:` of the configuration
//!   file), their defaults and rules: the one definition that the middleware's
//!   configuration loads and the server runs with.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use compact_events::*;
//!
//! let collect = Arc::new(CollectingExporter::new());
//! let events = Dispatcher::new(vec![collect.clone()], DispatchOptions::default());
//! let preflight = SpanBuilder::start("session-1", names::PREFLIGHT).kind(names::KIND_COMPACTION);
//! let decision = SpanBuilder::start("session-1", names::TRIGGER_DECISION)
//!     .kind(names::KIND_COMPACTION)
//!     .parent(preflight.span_id())
//!     .data("triggered", false)
//!     .finish(SpanStatus::Ok);
//! events.emit(decision);
//! events.emit(preflight.finish(SpanStatus::Ok));
//! assert!(events.flush(Duration::from_secs(5)));
//! assert_eq!(collect.len(), 2);
//! ```

mod console;
mod dispatcher;
mod exporter;
mod jsonl;
pub mod names;
pub mod payload;
pub mod settings;
mod span;
pub mod truncate;

pub use console::ConsoleExporter;
pub use dispatcher::{DispatchOptions, DispatchStats, Dispatcher, ExporterStats, StatsReader};
pub use exporter::{CollectingExporter, ExportError, Exporter};
pub use jsonl::JsonlExporter;
pub use span::{
    Event, SpanBuilder, SpanEvent, SpanStatus, TraceEvent, format_rfc3339_millis, new_span_id,
    now_millis, now_rfc3339, parse_rfc3339_millis, system_time_millis,
};

/// A boxed, sendable future: what the async traits here (`Exporter`) and in
/// the middleware (`Summarizer`, `StorageAdapter`) return, so they stay
/// object safe.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;
