//! The trace server's settings: the `server:` section of the configuration
//! file (docs/configuration.md), defined once. The middleware's configuration
//! loads this type from the file and the `COMPACT_SERVER_*` variables;
//! `ariadne-server` runs with it. It lives here because both crates depend on
//! this one and the server must not compile the middleware.
//!
//! Two sets of rules, both here:
//! - [`ServerSettings::problems`]: what any value of a key must be. The
//!   configuration reports these with the key's path when it is loaded.
//! - [`ServerSettings::check`]: those, and what serving needs on top (both
//!   tokens on a non-loopback address, a URL for the ClickHouse store), checked
//!   when the server starts, after the CLI flags are applied. A file may name
//!   `store: clickhouse` before the URL comes from the environment.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `server:`: where `compact serve` listens, where it keeps its data, who may
/// talk to it, and how much it holds. Every key has a default; field order is
/// the order `compact config print` shows.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerSettings {
    /// Listen address. Loopback by default; anything else needs both tokens
    /// or `insecure`.
    #[serde(with = "socket_addr")]
    pub addr: SocketAddr,
    /// Directory of the durable event log (and of the session state when
    /// `state.store` is left at its default).
    pub data_dir: PathBuf,
    /// Bearer token required by the write routes (ingest, preflight, the
    /// session API's writes), when set.
    pub ingest_token: Option<String>,
    /// Bearer token required by the read routes (`/events`, `/api`,
    /// `/metrics`, `GET /v1/sessions/{id}`), when set.
    pub read_token: Option<String>,
    /// Browser origins allowed by CORS (exact match, e.g. `http://localhost:5173`).
    pub cors_origins: Vec<String>,
    /// Allow a non-loopback bind without tokens.
    pub insecure: bool,
    /// Request, connection and stream limits.
    pub limits: ServerLimits,
    /// How much history is kept, in memory and on disk.
    pub retention: ServerRetention,
    /// Where events are kept: the durable log (and its tuning), or a shared
    /// ClickHouse.
    pub store: ServerStore,
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
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
            limits: ServerLimits::default(),
            retention: ServerRetention::default(),
            store: ServerStore::default(),
        }
    }
}

// By hand: tokens are never printed.
impl fmt::Debug for ServerSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hidden = |t: &Option<String>| t.as_ref().map(|_| "***");
        f.debug_struct("ServerSettings")
            .field("addr", &self.addr)
            .field("data_dir", &self.data_dir)
            .field("ingest_token", &hidden(&self.ingest_token))
            .field("read_token", &hidden(&self.read_token))
            .field("cors_origins", &self.cors_origins)
            .field("insecure", &self.insecure)
            .field("limits", &self.limits)
            .field("retention", &self.retention)
            .field("store", &self.store)
            .finish()
    }
}

/// `server.limits:`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerLimits {
    /// `POST /ingest` body limit in bytes (Ariadne's 256 KiB).
    pub ingest_body_bytes: usize,
    /// `POST /v1/traces/ingest` and `POST /v1/traces` body limit. Large
    /// because the OpenAI Agents SDK never retries a 413: the batch is lost.
    pub otel_body_bytes: usize,
    /// Body limit of the sidecar routes (`/v1/preflight`, the session API):
    /// whole histories. Read by compact-service, not by the trace server.
    pub preflight_body_bytes: usize,
    /// Open TCP connections; more wait in the accept queue.
    pub max_connections: usize,
    /// Concurrent `/events` subscribers; more get a 503.
    pub max_sse_clients: usize,
    /// Events a subscriber may fall behind before it skips (and is told so).
    pub sse_queue: usize,
    /// Seconds between `:heartbeat` comments.
    pub heartbeat_secs: u64,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            ingest_body_bytes: 262_144,
            otel_body_bytes: 16 * 1024 * 1024,
            preflight_body_bytes: 32 * 1024 * 1024,
            max_connections: 1024,
            max_sse_clients: 256,
            sse_queue: 4096,
            heartbeat_secs: 15,
        }
    }
}

impl ServerLimits {
    /// The heartbeat period (at least 1 ms).
    pub fn heartbeat(&self) -> Duration {
        Duration::from_secs(self.heartbeat_secs).max(Duration::from_millis(1))
    }
}

/// `server.retention:`: how much history is kept. The oldest events go first
/// when either bound is exceeded; both bound the memory the server uses.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerRetention {
    /// Events kept (the `capacity` of `/healthz`).
    pub max_events: usize,
    /// Seconds an event is kept after it was received; 0 keeps forever.
    pub max_age_secs: u64,
}

impl Default for ServerRetention {
    fn default() -> Self {
        Self {
            max_events: 100_000,
            max_age_secs: 7 * 24 * 3600,
        }
    }
}

/// `server.store:` (in a file also just the backend's name: `store: clickhouse`).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerStore {
    /// `log` (this process's durable log under `data_dir`) or `clickhouse`
    /// (one ClickHouse that several replicas share).
    pub backend: ServerStoreBackend,
    /// ClickHouse's HTTP interface (`backend: clickhouse`), e.g.
    /// `http://127.0.0.1:8123`; a user and password may be in the URL (never
    /// printed or logged).
    pub clickhouse_url: Option<String>,
    /// The ClickHouse database (created if missing).
    pub clickhouse_database: String,
    /// The ClickHouse table of events (created if missing).
    pub clickhouse_table: String,
    /// This replica's name in the shared store (default: host name, process
    /// id and a random suffix).
    pub replica: Option<String>,
    /// A log segment is closed past this size (`backend: log`). Last, as it
    /// was the section's only key.
    pub segment_bytes: u64,
}

impl Default for ServerStore {
    fn default() -> Self {
        Self {
            backend: ServerStoreBackend::Log,
            clickhouse_url: None,
            clickhouse_database: "default".to_owned(),
            clickhouse_table: "compact_events".to_owned(),
            replica: None,
            segment_bytes: 16 * 1024 * 1024,
        }
    }
}

// By hand: the ClickHouse URL may hold a password, which is never printed.
impl fmt::Debug for ServerStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerStore")
            .field("backend", &self.backend)
            .field(
                "clickhouse_url",
                &self.clickhouse_url.as_deref().map(redact_url_password),
            )
            .field("clickhouse_database", &self.clickhouse_database)
            .field("clickhouse_table", &self.clickhouse_table)
            .field("replica", &self.replica)
            .field("segment_bytes", &self.segment_bytes)
            .finish()
    }
}

/// Which store keeps the trace server's events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerStoreBackend {
    /// The durable log under `server.data_dir` (one process).
    #[default]
    Log,
    /// A ClickHouse server that several `compact serve` replicas share.
    Clickhouse,
}

/// One broken rule: the key's path below `server.` (`limits.sse_queue`,
/// `cors_origins[1]`) and what is wrong, with the value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The key, relative to the `server:` section.
    pub path: String,
    /// The rule, then `(got VALUE)` where there is a value to show.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Why the server refuses to start with these settings.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// A non-loopback bind without tokens and without `insecure`.
    #[error(
        "refusing to bind {0}: a non-loopback address needs --ingest-token and --read-token (or --insecure)"
    )]
    InsecureBind(SocketAddr),
    /// Values that break a rule, every one of them.
    #[error("invalid configuration: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<Problem>),
}

impl ServerSettings {
    /// Every key whose value breaks its rule, in key order.
    pub fn problems(&self) -> Vec<Problem> {
        let mut out = Rules::default();
        out.non_empty("data_dir", &self.data_dir.to_string_lossy());
        for (path, token) in [
            ("ingest_token", &self.ingest_token),
            ("read_token", &self.read_token),
        ] {
            if let Some(token) = token {
                out.non_empty(path, token);
            }
        }
        for (i, origin) in self.cors_origins.iter().enumerate() {
            out.non_empty(&format!("cors_origins[{i}]"), origin);
        }
        let l = &self.limits;
        out.at_least("limits.ingest_body_bytes", l.ingest_body_bytes as u64, 1024);
        out.at_least("limits.otel_body_bytes", l.otel_body_bytes as u64, 1024);
        out.at_least(
            "limits.preflight_body_bytes",
            l.preflight_body_bytes as u64,
            1024,
        );
        out.at_least("limits.max_connections", l.max_connections as u64, 1);
        out.at_least("limits.sse_queue", l.sse_queue as u64, 1);
        out.at_least("retention.max_events", self.retention.max_events as u64, 1);
        let s = &self.store;
        if let Some(url) = &s.clickhouse_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            out.push(
                "store.clickhouse_url",
                format!(
                    "must start with http:// or https:// (ClickHouse's HTTP interface) (got {:?})",
                    redact_url_password(url)
                ),
            );
        }
        out.identifier("store.clickhouse_database", &s.clickhouse_database);
        out.identifier("store.clickhouse_table", &s.clickhouse_table);
        if let Some(replica) = &s.replica {
            out.non_empty("store.replica", replica);
        }
        out.at_least("store.segment_bytes", s.segment_bytes, 4096);
        out.0
    }

    /// Whether the server may start with these settings: [`Self::problems`],
    /// then what serving needs on top. Run after the CLI flags are applied.
    pub fn check(&self) -> Result<(), SettingsError> {
        let tokens = self.ingest_token.is_some() && self.read_token.is_some();
        if !self.addr.ip().is_loopback() && !tokens && !self.insecure {
            return Err(SettingsError::InsecureBind(self.addr));
        }
        let mut problems = self.problems();
        if self.store.backend == ServerStoreBackend::Clickhouse
            && self
                .store
                .clickhouse_url
                .as_deref()
                .is_none_or(|u| u.trim().is_empty())
        {
            problems.push(Problem {
                path: "store.clickhouse_url".into(),
                message: "is required when store.backend is clickhouse".into(),
            });
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(SettingsError::Invalid(problems))
        }
    }
}

/// The problems found so far; each rule writes the message the
/// configuration reference promises (the middleware's rules word theirs the
/// same way).
#[derive(Default)]
struct Rules(Vec<Problem>);

impl Rules {
    fn push(&mut self, path: &str, message: String) {
        self.0.push(Problem {
            path: path.to_owned(),
            message,
        });
    }

    fn non_empty(&mut self, path: &str, value: &str) {
        if value.trim().is_empty() {
            self.push(path, "must not be empty".to_owned());
        }
    }

    fn at_least(&mut self, path: &str, value: u64, min: u64) {
        if value < min {
            self.push(path, format!("must be at least {min} (got {value})"));
        }
    }

    /// A ClickHouse name, spliced into SQL: letters, digits and `_` only.
    fn identifier(&mut self, path: &str, value: &str) {
        if value.is_empty() || !value.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            self.push(path, format!("letters, digits and _ only (got {value:?})"));
        }
    }
}

/// `addr` is written as text (`127.0.0.1:5175`); a value that is not an IP
/// address and port is refused with the rule, not serde's wording.
mod socket_addr {
    use std::net::SocketAddr;

    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub(super) fn serialize<S: Serializer>(addr: &SocketAddr, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(addr)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(|_| {
            D::Error::custom(format!(
                "must be an IP address and port such as 127.0.0.1:5175 (got {text:?})"
            ))
        })
    }
}

/// `postgres://user:secret@host/db` → `postgres://user:***@host/db`: a
/// connection URL as it may be shown (the session store's, ClickHouse's).
pub fn redact_url_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    // The last `@` ends the user info even when an unescaped password holds
    // `/` or `@`: hiding too much is fine, showing a password is not.
    if let Some(at) = rest.rfind('@') {
        let (userinfo, host) = (&rest[..at], &rest[at + 1..]);
        return match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
            None => url.to_owned(),
        };
    }
    // key=value parameters: hide a password= parameter.
    let hidden: Vec<String> = rest
        .split('&')
        .map(|kv| match kv.split_once('=') {
            Some((k, _)) if k.rsplit(['?', '&']).next() == Some("password") => format!("{k}=***"),
            _ => kv.to_owned(),
        })
        .collect();
    format!("{scheme}://{}", hidden.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_hidden() {
        assert_eq!(
            redact_url_password("postgres://u:s3cret@db:5432/x?sslmode=disable"),
            "postgres://u:***@db:5432/x?sslmode=disable"
        );
        assert_eq!(
            redact_url_password("postgresql://u@db/x"),
            "postgresql://u@db/x"
        );
        assert_eq!(
            redact_url_password("postgres://db/x?user=u&password=p"),
            "postgres://db/x?user=u&password=***"
        );
        assert!(!redact_url_password("postgres://a:b:c@h/d").contains("b:c"));
        assert!(!redact_url_password("postgres://a:p/w@h/d").contains("p/w"));
        assert_eq!(
            redact_url_password("postgres://db/x?password=p"),
            "postgres://db/x?password=***"
        );
    }

    #[test]
    fn the_defaults_break_no_rule_and_may_serve() {
        let settings = ServerSettings::default();
        assert_eq!(settings.problems(), Vec::new());
        assert!(settings.check().is_ok());
    }

    #[test]
    fn serving_needs_tokens_off_loopback_and_a_url_for_clickhouse() {
        let mut open = ServerSettings {
            addr: SocketAddr::from(([0, 0, 0, 0], 5175)),
            ..ServerSettings::default()
        };
        assert!(matches!(open.check(), Err(SettingsError::InsecureBind(_))));
        open.insecure = true;
        assert!(open.check().is_ok());

        let mut shared = ServerSettings::default();
        shared.store.backend = ServerStoreBackend::Clickhouse;
        // A rule of serving, not of the key: a file may name the backend first.
        assert_eq!(shared.problems(), Vec::new());
        let Err(SettingsError::Invalid(problems)) = shared.check() else {
            panic!("clickhouse without a URL served");
        };
        assert_eq!(problems[0].path, "store.clickhouse_url");
    }

    #[test]
    fn each_broken_rule_names_its_key_and_value() {
        let mut s = ServerSettings {
            cors_origins: vec!["http://ok".into(), " ".into()],
            ..ServerSettings::default()
        };
        s.limits.sse_queue = 0;
        s.store.clickhouse_table = "x; DROP".into();
        let shown: Vec<String> = s.problems().iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "cors_origins[1]: must not be empty",
                "limits.sse_queue: must be at least 1 (got 0)",
                "store.clickhouse_table: letters, digits and _ only (got \"x; DROP\")",
            ]
        );
    }

    #[test]
    fn addr_is_text_and_a_bad_one_is_refused_with_the_rule() {
        let json = serde_json::to_value(ServerSettings::default()).expect("serializes");
        assert_eq!(json["addr"], "127.0.0.1:5175");
        assert_eq!(json["data_dir"], ".compact/server");
        let err = serde_json::from_value::<ServerSettings>(serde_json::json!({"addr": "nowhere"}))
            .expect_err("not an address");
        assert!(err.to_string().starts_with(
            "must be an IP address and port such as 127.0.0.1:5175 (got \"nowhere\")"
        ));
    }
}
