//! The `Exporter` trait, its error, and the in-memory `CollectingExporter`.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crate::span::Event;

/// Why an export (or an exporter's flush) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// Writing to a file, a socket or a pipe failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// An event could not be encoded.
    #[error("could not encode event: {0}")]
    Encode(#[from] serde_json::Error),
    /// The exporter did not finish within the dispatcher's per-export timeout.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The exporter panicked; the dispatcher caught it and carried on.
    #[error("exporter panicked: {0}")]
    Panicked(String),
    /// The receiving end refused the batch (e.g. an HTTP status).
    #[error("rejected: {0}")]
    Rejected(String),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

/// Somewhere events go: a terminal, a file, an Ariadne server, a collector.
///
/// Called only by the [`Dispatcher`](crate::Dispatcher), from its own
/// thread, one batch at a time per exporter, in emission order. Exporters
/// share that thread's tokio runtime (time and I/O enabled), so an exporter
/// must not block it: do blocking work in `tokio::task::spawn_blocking`.
/// A slow exporter only delays itself; the dispatcher cancels an export
/// that exceeds its timeout.
pub trait Exporter: Send + Sync + std::fmt::Debug {
    /// A short name for logs and stats (`console`, `jsonl`, `ariadne`).
    fn name(&self) -> &str;

    /// Delivers one batch, in order. The batch is never empty.
    fn export<'a>(&'a self, batch: &'a [Event]) -> crate::BoxFuture<'a, Result<(), ExportError>>;

    /// Makes everything exported so far durable or visible (fsync, drain a
    /// buffer). The default does nothing.
    fn flush(&self) -> crate::BoxFuture<'_, Result<(), ExportError>> {
        Box::pin(async { Ok(()) })
    }
}

/// Keeps every event it is given, in memory, in order. For tests, and for
/// a process that wants its own events back (the server's timeline).
#[derive(Debug, Default)]
pub struct CollectingExporter {
    events: Mutex<Vec<Event>>,
}

impl CollectingExporter {
    /// An empty collector.
    pub fn new() -> Self {
        Self::default()
    }

    // A panic elsewhere while holding the lock leaves the Vec valid (pushes
    // are not torn), so carry on with it rather than propagate the poison.
    fn lock(&self) -> MutexGuard<'_, Vec<Event>> {
        self.events
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A copy of the events received so far.
    pub fn events(&self) -> Vec<Event> {
        self.lock().clone()
    }

    /// Removes and returns the events received so far.
    pub fn take(&self) -> Vec<Event> {
        std::mem::take(&mut *self.lock())
    }

    /// How many events were received.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing was received.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// The names of the events received, in order (`None` for unnamed ones).
    pub fn names(&self) -> Vec<Option<String>> {
        self.lock()
            .iter()
            .map(|e| e.name().map(str::to_owned))
            .collect()
    }
}

impl Exporter for CollectingExporter {
    fn name(&self) -> &str {
        "collect"
    }

    fn export<'a>(&'a self, batch: &'a [Event]) -> crate::BoxFuture<'a, Result<(), ExportError>> {
        Box::pin(async move {
            self.lock().extend_from_slice(batch);
            Ok(())
        })
    }
}
