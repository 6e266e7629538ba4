//! `ServerConfig`: where the server listens, where it keeps its data, who
//! may talk to it, and how much it holds. Deserializable so `compact serve
//! --config F` can read it; every field has a default.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Everything [`crate::serve`] needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Listen address. Loopback by default; anything else needs both
    /// tokens or `insecure`.
    pub addr: SocketAddr,
    /// Directory of the durable event log.
    pub data_dir: PathBuf,
    /// Bearer token required by the ingest routes, when set.
    pub ingest_token: Option<String>,
    /// Bearer token required by the read routes (`/events`, `/api`, `/metrics`), when set.
    pub read_token: Option<String>,
    /// Browser origins allowed by CORS (exact match, e.g. `http://localhost:5173`).
    pub cors_origins: Vec<String>,
    /// Allow a non-loopback bind without tokens.
    pub insecure: bool,
    /// Request, connection and stream limits.
    pub limits: Limits,
    /// How much history is kept, in memory and on disk.
    pub retention: Retention,
    /// Where events are kept: the durable log (tuning), or a shared
    /// ClickHouse (`backend: clickhouse`).
    pub store: StoreOptions,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 5175)),
            data_dir: PathBuf::from(".compact/server"),
            ingest_token: None,
            read_token: None,
            // The Ariadne web UI's dev server origins: its UI works unchanged.
            cors_origins: vec![
                "http://localhost:5173".to_owned(),
                "http://127.0.0.1:5173".to_owned(),
            ],
            insecure: false,
            limits: Limits::default(),
            retention: Retention::default(),
            store: StoreOptions::default(),
        }
    }
}

/// Request, connection and stream limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// `POST /ingest` body limit in bytes (Ariadne's 256 KiB).
    pub ingest_body_bytes: usize,
    /// `POST /v1/traces/ingest` and `POST /v1/traces` body limit. Large
    /// because the OpenAI Agents SDK never retries a 413: the batch is lost.
    pub otel_body_bytes: usize,
    /// Open TCP connections; further connections wait in the accept queue.
    pub max_connections: usize,
    /// Concurrent `/events` subscribers; more get a 503.
    pub max_sse_clients: usize,
    /// Events a subscriber may fall behind before it skips (and is told so).
    pub sse_queue: usize,
    /// Seconds between `:heartbeat` comments.
    pub heartbeat_secs: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            ingest_body_bytes: 262_144,
            otel_body_bytes: 16 * 1024 * 1024,
            max_connections: 1024,
            max_sse_clients: 256,
            sse_queue: 4096,
            heartbeat_secs: 15,
        }
    }
}

impl Limits {
    /// The heartbeat period (at least 1 ms).
    pub fn heartbeat(&self) -> Duration {
        Duration::from_secs(self.heartbeat_secs).max(Duration::from_millis(1))
    }
}

/// How much history is kept. The oldest events go first when either bound
/// is exceeded; both bound the memory the server uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Retention {
    /// Events kept (the `capacity` of `/healthz`).
    pub max_events: usize,
    /// Seconds an event is kept after it was received; 0 keeps forever.
    pub max_age_secs: u64,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            max_events: 100_000,
            max_age_secs: 7 * 24 * 3600,
        }
    }
}

/// Where events are kept, and the durable log's tuning.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreOptions {
    /// A segment file is closed and a new one started past this size.
    pub segment_bytes: u64,
    /// `log` (the default: this process's durable log under `data_dir`) or
    /// `clickhouse` (a ClickHouse server that several replicas share).
    pub backend: StoreBackend,
    /// The ClickHouse HTTP interface (`backend: clickhouse`), e.g.
    /// `http://127.0.0.1:8123`; user and password may be in the URL.
    pub clickhouse_url: Option<String>,
    /// The ClickHouse database (created if missing).
    pub clickhouse_database: String,
    /// The ClickHouse table of events (created if missing).
    pub clickhouse_table: String,
    /// This replica's name in the shared store; unique per process when
    /// unset (host name, process id and a random suffix).
    pub replica: Option<String>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            segment_bytes: 16 * 1024 * 1024,
            backend: StoreBackend::Log,
            clickhouse_url: None,
            clickhouse_database: "default".to_owned(),
            clickhouse_table: "compact_events".to_owned(),
            replica: None,
        }
    }
}

// By hand: the ClickHouse URL may hold a password, which is never printed.
impl std::fmt::Debug for StoreOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let url = self
            .clickhouse_url
            .as_deref()
            .map(|u| match u.split_once("://") {
                Some((scheme, rest)) => match rest.rsplit_once('@') {
                    Some((user, host)) => {
                        let user = user.split_once(':').map_or(user, |(name, _)| name);
                        format!("{scheme}://{user}:***@{host}")
                    }
                    None => u.to_owned(),
                },
                None => u.to_owned(),
            });
        f.debug_struct("StoreOptions")
            .field("segment_bytes", &self.segment_bytes)
            .field("backend", &self.backend)
            .field("clickhouse_url", &url)
            .field("clickhouse_database", &self.clickhouse_database)
            .field("clickhouse_table", &self.clickhouse_table)
            .field("replica", &self.replica)
            .finish()
    }
}

/// Which store keeps the events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreBackend {
    /// The durable segmented log under `data_dir`, one process.
    #[default]
    Log,
    /// A ClickHouse server that several `compact serve` replicas share.
    Clickhouse,
}

impl ServerConfig {
    /// Checks the security rules before binding: a non-loopback address
    /// needs both tokens unless `insecure`.
    pub fn check(&self) -> Result<(), crate::ServerError> {
        let tokens = self.ingest_token.is_some() && self.read_token.is_some();
        if !self.addr.ip().is_loopback() && !tokens && !self.insecure {
            return Err(crate::ServerError::InsecureBind(self.addr));
        }
        for t in [&self.ingest_token, &self.read_token].into_iter().flatten() {
            if t.is_empty() {
                return Err(crate::ServerError::Config(
                    "a token must not be empty".into(),
                ));
            }
        }
        if self.retention.max_events == 0 {
            return Err(crate::ServerError::Config(
                "retention.max_events must be at least 1".into(),
            ));
        }
        if self.store.backend == StoreBackend::Clickhouse
            && self
                .store
                .clickhouse_url
                .as_deref()
                .is_none_or(|u| u.trim().is_empty())
        {
            return Err(crate::ServerError::Config(
                "store.backend clickhouse needs store.clickhouse_url".into(),
            ));
        }
        if self.limits.sse_queue == 0 || self.limits.max_connections == 0 {
            return Err(crate::ServerError::Config(
                "limits.sse_queue and limits.max_connections must be at least 1".into(),
            ));
        }
        Ok(())
    }
}
