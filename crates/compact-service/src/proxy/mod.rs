//! `compact proxy`: compaction and observability for any agent by
//! changing one base URL (docs/design.md §15). The proxy speaks the
//! providers' APIs: OpenAI `POST /v1/chat/completions` and `POST
//! /v1/responses`, Anthropic `POST /v1/messages`, each request compacted
//! through `CompactManager::preflight_with` (the same core, session store
//! and events as every entry point) and forwarded; everything else under
//! `/v1/` is forwarded as is. Responses pass through byte for byte,
//! streams with back-pressure, while their usage and first output are
//! noted: one `compact.model_call` span per call and `/metrics`.
//!
//! Modules: `upstream` (where a path goes), `identity` (the session of a
//! request), `wire` (the providers' APIs, error shapes, usage), `body` (a
//! body read once, its history apart), `history` (each session's last
//! history, decoded, so a resent one decodes only what is new), `compact`
//! (a body through the core and back), `forward` (the handler), `tap` (a
//! response on its way), `metrics`.

mod body;
mod compact;
mod forward;
mod history;
mod identity;
mod metrics;
mod tap;
mod upstream;
mod wire;

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use compact_middleware::CompactManager;
use compact_middleware::config::ProxySettings;

pub use identity::SESSION_HEADER;

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The `proxy:` section names no usable upstream or address.
    #[error("proxy: {0}")]
    Config(String),
    /// The HTTP client could not be built.
    #[error("proxy: HTTP client: {0}")]
    Client(String),
    /// The listen address could not be bound, or serving failed.
    #[error("proxy: {0}")]
    Io(#[from] std::io::Error),
}

/// Usage entries kept per process before the map starts over.
const MAX_USAGE_SESSIONS: usize = 100_000;

/// The proxy's state, shared by every call.
pub(crate) struct Inner {
    pub(crate) manager: CompactManager,
    pub(crate) upstreams: upstream::Upstreams,
    pub(crate) client: reqwest::Client,
    pub(crate) settings: ProxySettings,
    /// The usage object the provider reported for each session's last
    /// response: the next call's estimate is anchored to its input tokens
    /// and its cache figures are reported and priced (`Report::cache`).
    usage: Mutex<HashMap<String, serde_json::Value>>,
    /// Each session's last history, decoded (`proxy.history_cache_bytes`).
    pub(crate) histories: history::Histories,
    pub(crate) metrics: metrics::Metrics,
}

impl Inner {
    /// The session's last reported usage, forgotten: a call that fails
    /// leaves nothing stale to anchor on.
    pub(crate) fn take_usage(&self, session: &str) -> Option<serde_json::Value> {
        let mut map = self
            .usage
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.remove(session)
    }

    pub(crate) fn keep_usage(&self, session: &str, usage: serde_json::Value) {
        let mut map = self
            .usage
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if map.len() >= MAX_USAGE_SESSIONS {
            map.clear();
        }
        map.insert(session.to_owned(), usage);
    }
}

/// A provider-compatible proxy over one manager.
#[derive(Clone)]
pub struct Proxy(Arc<Inner>);

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("upstreams", &self.0.upstreams.describe())
            .finish_non_exhaustive()
    }
}

impl Proxy {
    /// The proxy of `settings` (the configuration's `proxy:` section, the
    /// flags applied) compacting through `manager`.
    pub fn new(settings: &ProxySettings, manager: CompactManager) -> Result<Self, ProxyError> {
        // Advertising would offer the model a tool nobody answers: the
        // agent behind the proxy does not know it, and the proxy does not
        // run it yet. Said at startup, not found in a model's failed call.
        if manager.config().recall.advertise {
            return Err(ProxyError::Config(
                "recall.advertise: the proxy does not answer compact_recall calls yet; set it to \
                 false (recall ids in placeholders and `compact recall` work without it)"
                    .into(),
            ));
        }
        let upstreams =
            upstream::Upstreams::new(settings.upstream.as_deref(), &settings.prefixed_upstreams())
                .map_err(ProxyError::Config)?;
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(settings.connect_timeout_ms))
            .pool_idle_timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| ProxyError::Client(e.to_string()))?;
        Ok(Self(Arc::new(Inner {
            manager,
            upstreams,
            client,
            settings: settings.clone(),
            usage: Mutex::new(HashMap::new()),
            histories: history::Histories::new(settings.history_cache_bytes),
            metrics: metrics::Metrics::default(),
        })))
    }

    /// `proxy.addr`.
    pub fn addr(&self) -> Result<SocketAddr, ProxyError> {
        self.0
            .settings
            .addr
            .parse()
            .map_err(|_| ProxyError::Config(format!("proxy.addr: {:?}", self.0.settings.addr)))
    }

    /// Where paths go: `/anthropic -> https://api.anthropic.com, * -> …`.
    pub fn describe(&self) -> String {
        self.0.upstreams.describe()
    }

    /// The manager every call goes through.
    pub fn manager(&self) -> &CompactManager {
        &self.0.manager
    }

    /// Appends the proxy's figures, in Prometheus text, to `out`.
    pub fn render_metrics(&self, out: &mut String) {
        self.0.metrics.render(out);
    }
}

/// The proxy's routes: `GET /healthz`, `GET /metrics`, and every other
/// path forwarded.
pub fn router(proxy: Proxy) -> Router {
    let metrics = proxy.clone();
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/metrics",
            get(move || {
                let proxy = metrics.clone();
                async move {
                    let mut out = String::new();
                    proxy.render_metrics(&mut out);
                    (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            "text/plain; version=0.0.4",
                        )],
                        out,
                    )
                }
            }),
        )
        .fallback(forward::handle)
        .with_state(proxy.0)
}

/// Serves the proxy on `listener` until `shutdown` resolves.
pub async fn serve(
    proxy: Proxy,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ProxyError> {
    use axum::serve::ListenerExt;
    // Stream events are small writes: without TCP_NODELAY the first one
    // after the headers waits on the caller's ACK (Nagle).
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY could not be set");
        }
    });
    let manager = proxy.manager().clone();
    let served = axum::serve(listener, router(proxy))
        .with_graceful_shutdown(shutdown)
        .await;
    // Recall index writes run on the blocking pool, and a runtime drops
    // what has not started when it shuts down: what the last compactions
    // took out of the context stays recallable (as `compact serve` does).
    manager.flush_recall(None).await;
    served?;
    Ok(())
}
