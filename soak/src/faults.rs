//! Injected faults. Summarizer faults for now; exporter and storage faults
//! join as those adapters do.

use std::sync::Mutex;
use std::time::Duration;

use compact_middleware::BoxFuture;
use compact_middleware::summarize::{
    ExtractiveSummarizer, SummarizeError, Summarizer, Summary, SummaryRequest,
};

use compact_fixtures::Rng;

/// A summarizer standing in for an LLM that fails in every way an LLM
/// endpoint does: errors, timeouts, refusals, empty, over-long summaries.
/// When it succeeds it answers like the extractive one.
#[derive(Debug)]
pub(crate) struct FlakySummarizer {
    rng: Mutex<Rng>,
    failure_rate: f64,
}

impl FlakySummarizer {
    pub(crate) fn new(seed: u64, failure_rate: f64) -> Self {
        Self {
            rng: Mutex::new(Rng::new(seed)),
            failure_rate,
        }
    }

    fn draw(&self) -> u64 {
        let mut r = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        if r.chance(self.failure_rate) {
            1 + r.below(5)
        } else {
            0
        }
    }
}

impl Summarizer for FlakySummarizer {
    fn name(&self) -> &str {
        "flaky-llm"
    }

    fn summarize<'a>(
        &'a self,
        req: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<Summary, SummarizeError>> {
        let fault = self.draw();
        Box::pin(async move {
            match fault {
                1 => Err(SummarizeError::Transport("connection reset by peer".into())),
                2 => {
                    // A slow endpoint that then times out (kept short: simulated).
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    Err(SummarizeError::Timeout)
                }
                3 => Err(SummarizeError::Refusal("I can't help with that.".into())),
                4 => Ok(Summary {
                    model: Some("flaky".into()),
                    ..Summary::default()
                }),
                5 => {
                    // Ignores the budget.
                    let text = "too long ".repeat(req.max_tokens + 50);
                    Ok(Summary {
                        tokens: (req.count_tokens)(&text),
                        text,
                        model: Some("flaky".into()),
                        ..Summary::default()
                    })
                }
                _ => Ok(ExtractiveSummarizer.summarize_sync(req)),
            }
        })
    }
}

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use compact_middleware::archive::{ArchiveError, StorageAdapter};

/// A storage adapter that refuses writes at random (as a flaky disk or an
/// S3 outage would), in front of a real one. Reads always work, so the
/// harness can check what finally landed.
#[derive(Debug)]
pub(crate) struct FlakyStorage {
    inner: Arc<dyn StorageAdapter>,
    rng: Mutex<Rng>,
    failure_rate: f64,
    pub failures: AtomicU64,
}

impl FlakyStorage {
    pub(crate) fn new(inner: Arc<dyn StorageAdapter>, seed: u64, failure_rate: f64) -> Self {
        Self {
            inner,
            rng: Mutex::new(Rng::new(seed)),
            failure_rate,
            failures: AtomicU64::new(0),
        }
    }

    fn fail(&self) -> bool {
        let mut r = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        let f = r.chance(self.failure_rate);
        if f {
            self.failures.fetch_add(1, Ordering::Relaxed);
        }
        f
    }

    /// Whether a write to `key` fails. Only data writes fail, never the
    /// manifest entry after one: a whole archive write is refused or not, as
    /// a backend outage refuses it before anything lands.
    fn refuses(&self, key: &str) -> bool {
        !key.ends_with(compact_middleware::archive::MANIFEST_FILE) && self.fail()
    }

    fn refused() -> ArchiveError {
        ArchiveError::Backend {
            backend: "flaky".into(),
            message: "injected fault: storage unavailable".into(),
        }
    }
}

impl StorageAdapter for FlakyStorage {
    fn kind(&self) -> &str {
        self.inner.kind()
    }
    fn root(&self) -> String {
        self.inner.root()
    }
    fn location(&self, key: &str) -> String {
        self.inner.location(key)
    }
    fn put<'a>(&'a self, key: &'a str, bytes: Vec<u8>) -> BoxFuture<'a, Result<(), ArchiveError>> {
        if self.refuses(key) {
            return Box::pin(async { Err(Self::refused()) });
        }
        self.inner.put(key, bytes)
    }
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Vec<u8>, ArchiveError>> {
        self.inner.get(key)
    }
    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<String>, ArchiveError>> {
        self.inner.list(prefix)
    }
    fn append<'a>(
        &'a self,
        key: &'a str,
        bytes: Vec<u8>,
    ) -> BoxFuture<'a, Result<u64, ArchiveError>> {
        if self.refuses(key) {
            return Box::pin(async { Err(Self::refused()) });
        }
        self.inner.append(key, bytes)
    }
    fn native_append(&self) -> bool {
        self.inner.native_append()
    }
}

/// How a run's telemetry server behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExporterFault {
    /// Answers 200.
    Healthy,
    /// Answers 500 to everything.
    Failing,
    /// Answers after [`SLOW_EXPORTER`]: longer than any preflight may take.
    Slow,
    /// Nothing listens (connection refused).
    Down,
}

/// The slow server's delay; a preflight this long means it waited on an exporter.
pub(crate) const SLOW_EXPORTER: Duration = Duration::from_secs(10);

/// A real HTTP server on loopback standing in for Ariadne: `/ok/ingest`,
/// `/fail/ingest`, `/slow/ingest`. One per soak process.
pub(crate) struct FaultServer {
    pub base: String,
    /// A loopback port nothing listens on.
    pub down: String,
    pub received: Arc<AtomicU64>,
}

impl FaultServer {
    pub(crate) fn start() -> anyhow::Result<Self> {
        use axum::routing::post;
        let received = Arc::new(AtomicU64::new(0));
        let (r1, r2) = (received.clone(), received.clone());
        let app = axum::Router::new()
            .route(
                "/ok/ingest",
                post(move |body: axum::body::Bytes| {
                    let r = r1.clone();
                    async move {
                        r.fetch_add(1, Ordering::Relaxed);
                        let _ = body;
                        (axum::http::StatusCode::OK, r#"{"success":true,"count":0}"#)
                    }
                }),
            )
            .route(
                "/fail/ingest",
                post(|| async { (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "injected") }),
            )
            .route(
                "/slow/ingest",
                post(move || {
                    let r = r2.clone();
                    async move {
                        tokio::time::sleep(SLOW_EXPORTER).await;
                        r.fetch_add(1, Ordering::Relaxed);
                        (axum::http::StatusCode::OK, r#"{"success":true,"count":0}"#)
                    }
                }),
            );
        // Its own thread and runtime: the soak's CPU-bound runs must not
        // starve it into timeouts that are not the fault being injected.
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        std_listener.set_nonblocking(true)?;
        let base = format!("http://{}", std_listener.local_addr()?);
        std::thread::Builder::new()
            .name("fault-server".into())
            .spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                else {
                    return;
                };
                rt.block_on(async move {
                    if let Ok(listener) = tokio::net::TcpListener::from_std(std_listener) {
                        let _ = axum::serve(listener, app).await;
                    }
                });
            })?;
        // Bind and release a port: connections to it are refused.
        let closed = std::net::TcpListener::bind("127.0.0.1:0")?;
        let down = format!("http://{}/ingest", closed.local_addr()?);
        drop(closed);
        Ok(Self {
            base,
            down,
            received,
        })
    }

    pub(crate) fn url(&self, fault: ExporterFault) -> String {
        match fault {
            ExporterFault::Healthy => format!("{}/ok/ingest", self.base),
            ExporterFault::Failing => format!("{}/fail/ingest", self.base),
            ExporterFault::Slow => format!("{}/slow/ingest", self.base),
            ExporterFault::Down => self.down.clone(),
        }
    }
}
