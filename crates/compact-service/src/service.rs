//! [`Service`]: what the handlers share, built before anything listens.

use std::sync::{Arc, OnceLock};

use ariadne_server::AppState;
use compact_middleware::cache::ReportedUsage;
use compact_middleware::config::Config;
use compact_middleware::events::{Event, ExportError, Exporter};
use compact_middleware::manager::Overlays;
use compact_middleware::model::Request;
use compact_middleware::trigger::Forced;
use compact_middleware::{BoxFuture, CompactError, CompactManager, PreflightRequest};
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
    /// More figures for the server's `/metrics` (the proxy's).
    metrics: Vec<MetricsSource>,
}

type MetricsSource = Box<dyn Fn(&mut String) + Send + Sync>;

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
            metrics: Vec::new(),
        })
    }

    /// The manager every call goes through.
    pub fn manager(&self) -> &CompactManager {
        &self.manager
    }

    /// Adds figures (Prometheus text) to the server's `/metrics`: the
    /// proxy's, when `compact serve --proxy` runs it beside the service.
    pub fn add_metrics(&mut self, source: impl Fn(&mut String) + Send + Sync + 'static) {
        self.metrics.push(Box::new(source));
    }

    /// Sends the service's events into `server`'s store from now on.
    pub(crate) fn attach(&mut self, server: &AppState) {
        // Set once: a service is mounted on one server.
        if self.events.0.set(server.clone()).is_ok() {
            // A reader, not a handle: the dispatcher's exporter holds the
            // server, so a handle here would keep both alive.
            let reader = self.manager.dispatcher().stats_reader();
            let store = self.manager.session_store().cloned();
            server.add_metrics(move |out| {
                if let Some(stats) = reader.stats() {
                    dispatch_metrics(&stats, out);
                }
                if let Some(store) = &store {
                    state_metrics(store.kind(), store.write_stats(), out);
                }
            });
            for source in self.metrics.drain(..) {
                server.add_metrics(source);
            }
        }
    }
}

/// What the session store wrote: saves, and the bytes of record text they
/// wrote (a long session's preflight writes what changed, not its record).
fn state_metrics(kind: &str, stats: compact_middleware::state::WriteStats, out: &mut String) {
    use std::fmt::Write;
    let _ = writeln!(
        out,
        "# HELP compact_state_saves_total Session records saved.\n# TYPE compact_state_saves_total counter\ncompact_state_saves_total{{store=\"{kind}\"}} {}",
        stats.saves
    );
    let _ = writeln!(
        out,
        "# HELP compact_state_written_bytes_total Bytes of session record text those saves wrote.\n# TYPE compact_state_written_bytes_total counter\ncompact_state_written_bytes_total{{store=\"{kind}\"}} {}",
        stats.bytes
    );
}

/// The manager's dispatcher in Prometheus text: what was emitted, what the
/// queue refused, and per exporter what it acknowledged, what failed and
/// what it skipped for falling behind (`lagged`: its drops).
fn dispatch_metrics(stats: &compact_middleware::events::DispatchStats, out: &mut String) {
    use std::fmt::Write;
    let counter = |out: &mut String, name: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
    };
    counter(
        out,
        "compact_dispatcher_emitted_total",
        "Events the service's preflights emitted.",
    );
    let _ = writeln!(out, "compact_dispatcher_emitted_total {}", stats.emitted);
    counter(
        out,
        "compact_dispatcher_dropped_total",
        "Events the dispatcher's queue refused (full or shut down): no exporter saw them.",
    );
    let _ = writeln!(out, "compact_dispatcher_dropped_total {}", stats.dropped);
    type Get = fn(&compact_middleware::events::ExporterStats) -> u64;
    let families: [(&str, &str, Get); 4] = [
        (
            "compact_dispatcher_exported_total",
            "Events an exporter acknowledged.",
            |e| e.exported,
        ),
        (
            "compact_dispatcher_failed_events_total",
            "Events in batches an exporter failed to export.",
            |e| e.failed_events,
        ),
        (
            "compact_dispatcher_lagged_total",
            "Events an exporter never got because it fell too far behind (its drops).",
            |e| e.lagged,
        ),
        (
            "compact_dispatcher_export_failures_total",
            "Failed export or flush calls of an exporter.",
            |e| e.failures,
        ),
    ];
    for (name, help, get) in families {
        counter(out, name, help);
        for e in &stats.exporters {
            let label = e.name.replace('\\', "\\\\").replace('"', "\\\"");
            let _ = writeln!(out, "{name}{{exporter=\"{label}\"}} {}", get(e));
        }
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

/// One call as the manager takes it: the decoded history and tools (moved
/// out of `req`), the caller's usage figures, what forces it and its
/// overlays. The session API and the proxy both build theirs here.
pub(crate) fn preflight_request(
    req: &mut Request,
    (usage, usage_details): (Option<usize>, Option<ReportedUsage>),
    forced: Option<Forced>,
    note: Option<String>,
    overlays: Overlays,
) -> PreflightRequest {
    PreflightRequest {
        messages: std::mem::take(&mut req.messages),
        tools: std::mem::take(&mut req.tools),
        forced,
        note,
        strict: false,
        usage,
        usage_details,
        overlays,
    }
}
