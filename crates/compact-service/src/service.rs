//! [`Service`]: what the handlers share, built before anything listens.

use std::sync::{Arc, OnceLock};

use ariadne_server::AppState;
use compact_middleware::config::Config;
use compact_middleware::events::{Event, ExportError, Exporter};
use compact_middleware::{BoxFuture, CompactError, CompactManager};
use compact_wiring::Parts;

/// Why the service could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The manager could not be built from the configuration.
    #[error("session API: {0}")]
    Compact(#[from] CompactError),
    /// The trace server failed (bind, store).
    #[error(transparent)]
    Server(#[from] ariadne_server::ServerError),
}

/// The session API's state: one manager over the configuration and its
/// parts, whose events go into the trace server's own store. Calls with
/// strategy overlays run on managers the manager builds and keeps for
/// them, sharing its sessions.
pub struct Service {
    pub(crate) manager: CompactManager,
    /// `server.limits.preflight_body_bytes`.
    pub(crate) body_limit: usize,
    events: Arc<ServerEvents>,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("manager", &self.manager)
            .field("body_limit", &self.body_limit)
            .finish_non_exhaustive()
    }
}

impl Service {
    /// The service over `config` with `parts` (from
    /// [`compact_wiring::Parts::new`]): fails on a configuration the
    /// manager cannot use.
    pub fn new(config: Config, parts: Parts) -> Result<Self, ServiceError> {
        let events = Arc::new(ServerEvents::default());
        let body_limit = config.server.limits.preflight_body_bytes;
        let manager = parts
            .with_exporter(events.clone())
            .builder(config)
            .without_config_exporters()
            .build()?;
        Ok(Self {
            manager,
            body_limit,
            events,
        })
    }

    /// The manager every call goes through.
    pub fn manager(&self) -> &CompactManager {
        &self.manager
    }

    /// Sends the service's events into `server`'s store from now on.
    pub(crate) fn attach(&self, server: &AppState) {
        // Set once: a service is mounted on one server.
        let _ = self.events.0.set(server.clone());
    }
}

/// Delivers the manager's events into the server's own store, as `/ingest`
/// would; the server is known once it runs (see [`Service::attach`]).
#[derive(Debug, Default)]
struct ServerEvents(OnceLock<AppState>);

impl Exporter for ServerEvents {
    fn name(&self) -> &str {
        "server"
    }

    fn export<'a>(&'a self, batch: &'a [Event]) -> BoxFuture<'a, Result<(), ExportError>> {
        Box::pin(async move {
            let Some(server) = self.0.get() else {
                return Err(ExportError::Io(std::io::Error::other(
                    "the trace server is not running",
                )));
            };
            server
                .ingest_events(batch.to_vec())
                .await
                .map(|_| ())
                .map_err(|e| ExportError::Io(std::io::Error::other(e.to_string())))
        })
    }
}
