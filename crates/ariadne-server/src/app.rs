//! Wiring: the shared state, the router, and running the server.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::routing::{get, post};
use tokio::sync::{Semaphore, oneshot, watch};
use tokio::task::JoinHandle;

use crate::config::{ServerConfig, StoreBackend};
use crate::error::ServerError;
use crate::listener::LimitedListener;
use crate::metrics::Metrics;
use crate::routes::{api, health, ingest, sessions};
use crate::security::{self, Access};
use crate::sse;
use crate::store::Store;

/// What every handler shares; cheap to clone.
#[derive(Clone, Debug)]
pub struct AppState(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    config: ServerConfig,
    store: Store,
    metrics: Arc<Metrics>,
    sse_permits: Arc<Semaphore>,
    shutdown: watch::Receiver<bool>,
}

impl AppState {
    /// Opens the durable log under `data_dir` and builds the state. A
    /// shared store (`store.backend: clickhouse`) is reached over the
    /// network: use [`AppState::open`].
    pub fn new(config: ServerConfig, shutdown: watch::Receiver<bool>) -> Result<Self, ServerError> {
        config.check()?;
        if config.store.backend == StoreBackend::Clickhouse {
            return Err(ServerError::Config(
                "store.backend clickhouse is opened with AppState::open (async)".into(),
            ));
        }
        let store = Store::open(
            &config.data_dir,
            &config.store,
            &config.retention,
            config.limits.sse_queue,
        )?;
        Ok(Self::with_store(config, store, shutdown))
    }

    /// Opens the configured store (the durable log, or ClickHouse) and
    /// builds the state.
    pub async fn open(
        config: ServerConfig,
        shutdown: watch::Receiver<bool>,
    ) -> Result<Self, ServerError> {
        if config.store.backend != StoreBackend::Clickhouse {
            return Self::new(config, shutdown);
        }
        config.check()?;
        let store =
            Store::open_clickhouse(&config.store, &config.retention, config.limits.sse_queue)
                .await?;
        Ok(Self::with_store(config, store, shutdown))
    }

    fn with_store(config: ServerConfig, store: Store, shutdown: watch::Receiver<bool>) -> Self {
        AppState(Arc::new(Inner {
            sse_permits: Arc::new(Semaphore::new(config.limits.max_sse_clients)),
            config,
            store,
            metrics: Arc::new(Metrics::default()),
            shutdown,
        }))
    }

    /// The configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.0.config
    }

    /// The event store.
    pub(crate) fn store(&self) -> &Store {
        &self.0.store
    }

    /// The counters.
    pub(crate) fn metrics(&self) -> &Arc<Metrics> {
        &self.0.metrics
    }

    /// Adds metrics rendered by `source` to `GET /metrics` (Prometheus
    /// text appended as it is): how an embedding crate reports its own
    /// counters, such as the service's dispatcher.
    pub fn add_metrics(&self, source: impl Fn(&mut String) + Send + Sync + 'static) {
        self.0.metrics.add_source(Box::new(source));
    }

    pub(crate) fn sse_permits(&self) -> Arc<Semaphore> {
        self.0.sse_permits.clone()
    }

    pub(crate) fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.0.shutdown.clone()
    }

    /// Stores events produced in this process (the sidecar's preflights)
    /// exactly as `/ingest` would: validated, durable, then on the SSE
    /// stream. Returns how many were stored.
    pub async fn ingest_events(
        &self,
        events: Vec<compact_events::Event>,
    ) -> Result<usize, ServerError> {
        let valid = crate::routes::ingest::validate_mapped(events).map_err(|issues| {
            ServerError::Io(std::io::Error::other(format!(
                "events refused by the ingest schema: {}",
                serde_json::to_string(&issues).unwrap_or_default()
            )))
        })?;
        let n = valid.len();
        self.metrics().observe_events(&valid);
        self.store().append(valid).await?;
        Ok(n)
    }
}

/// Routes another crate mounts on the server (the `compact` binary's
/// session API): `write` behind the ingest token, `read` behind the read
/// token, both under CORS. Built once the state exists, so handlers can
/// hold it (see [`AppState::ingest_events`]).
#[derive(Debug, Default)]
pub struct Mount {
    /// Routes that change something (`POST`, `PATCH`, `DELETE`).
    pub write: Router,
    /// Routes that only read.
    pub read: Router,
}

async fn ingest_auth(state: State<AppState>, req: Request, next: Next) -> axum::response::Response {
    security::require(state, Access::Ingest, req, next).await
}

async fn read_auth(state: State<AppState>, req: Request, next: Next) -> axum::response::Response {
    security::require(state, Access::Read, req, next).await
}

/// The whole application: ingest routes behind the ingest token, read
/// routes behind the read token, `/healthz` and the UI open, CORS outside.
pub fn router(state: AppState) -> Router {
    router_with(state, Mount::default())
}

/// [`router`] with `mount`'s routes behind the same tokens and CORS.
pub fn router_with(state: AppState, mount: Mount) -> Router {
    // axum refuses a route layer on a router without routes.
    let mut extra_write = mount.write;
    if extra_write.has_routes() {
        extra_write =
            extra_write.route_layer(middleware::from_fn_with_state(state.clone(), ingest_auth));
    }
    let mut extra_read = mount.read;
    if extra_read.has_routes() {
        extra_read =
            extra_read.route_layer(middleware::from_fn_with_state(state.clone(), read_auth));
    }
    let ingest_routes = Router::new()
        .route("/ingest", post(ingest::ingest))
        .route("/v1/traces/ingest", post(ingest::sdk))
        .route("/v1/traces", post(ingest::otlp))
        .route_layer(middleware::from_fn_with_state(state.clone(), ingest_auth));
    let read_routes = Router::new()
        .route("/events", get(sse::events))
        .route("/api/traces", get(api::list))
        .route("/api/traces/{trace_id}", get(api::get))
        .route("/api/sessions", get(sessions::list))
        .route("/api/sessions/{id}", get(sessions::get))
        .route(
            "/api/sessions/{id}/preflights/{span_id}",
            get(sessions::preflight),
        )
        .route("/metrics", get(health::metrics))
        .route_layer(middleware::from_fn_with_state(state.clone(), read_auth));
    Router::new()
        .merge(ingest_routes)
        .merge(read_routes)
        .route("/healthz", get(health::healthz))
        .merge(crate::ui::router())
        .with_state(state.clone())
        .merge(extra_write)
        .merge(extra_read)
        .layer(middleware::from_fn_with_state(state, security::cors))
}

/// Runs the server until `shutdown` resolves, then stops accepting, ends
/// the SSE streams, lets in-flight requests finish, and stops the store.
pub async fn serve(
    config: ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    serve_with(config, |_| Mount::default(), shutdown).await
}

/// [`serve`] with the routes `mount` builds from the state.
pub async fn serve_with(
    config: ServerConfig,
    mount: impl FnOnce(&AppState) -> Mount,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let (listener, state, stop_tx) = bind(config).await?;
    let mount = mount(&state);
    run(listener, state, mount, stop_tx, shutdown).await
}

async fn bind(
    config: ServerConfig,
) -> Result<(LimitedListener, AppState, watch::Sender<bool>), ServerError> {
    config.check()?;
    let addr = config.addr;
    let tcp = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let listener = LimitedListener::new(tcp, config.limits.max_connections);
    let state = AppState::open(config, stop_rx).await?;
    Ok((listener, state, stop_tx))
}

async fn run(
    listener: LimitedListener,
    state: AppState,
    mount: Mount,
    stop_tx: watch::Sender<bool>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let local = axum::serve::Listener::local_addr(&listener)?;
    tracing::info!(addr = %local, data_dir = %state.config().data_dir.display(), "ariadne server listening");
    let app = router_with(state, mount);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.await;
            // SSE streams never end on their own; tell them to.
            let _ = stop_tx.send(true);
        })
        .await?;
    tracing::info!("ariadne server stopped");
    Ok(())
}

/// A server running in the background (tests, `compact demo`, benchmarks).
#[derive(Debug)]
pub struct RunningServer {
    /// The bound address (the real port when `0` was asked for).
    pub addr: SocketAddr,
    /// The server task.
    pub handle: JoinHandle<Result<(), ServerError>>,
    stop: Option<oneshot::Sender<()>>,
}

impl RunningServer {
    /// `http://addr`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Shuts down gracefully and waits for the server to stop.
    pub async fn shutdown(mut self) -> Result<(), ServerError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match (&mut self.handle).await {
            Ok(r) => r,
            Err(e) => Err(ServerError::Io(std::io::Error::other(e.to_string()))),
        }
    }
}

/// Binds (port 0 picks a free one), opens the store, and serves in a
/// background task.
pub async fn spawn(config: ServerConfig) -> Result<RunningServer, ServerError> {
    spawn_with(config, |_| Mount::default()).await
}

/// [`spawn`] with the routes `mount` builds from the state.
pub async fn spawn_with(
    config: ServerConfig,
    mount: impl FnOnce(&AppState) -> Mount,
) -> Result<RunningServer, ServerError> {
    let (listener, state, stop_tx) = bind(config).await?;
    let mount = mount(&state);
    let addr = axum::serve::Listener::local_addr(&listener)?;
    let (stop, stopped) = oneshot::channel::<()>();
    let handle = tokio::spawn(run(listener, state, mount, stop_tx, async move {
        let _ = stopped.await;
    }));
    Ok(RunningServer {
        addr,
        handle,
        stop: Some(stop),
    })
}
