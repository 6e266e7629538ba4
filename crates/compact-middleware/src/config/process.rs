//! The sections that configure the rest of the program: `state:` (where
//! session state lives, docs/design.md §13), `server:` (`compact serve`,
//! docs/design.md §8) and `proxy:` (`compact proxy`, docs/design.md §15).
//! One file configures the library, the sidecar and the trace server. The
//! `server:` section's type, defaults and rules are the trace server's own
//! ([`compact_events::settings`]; the server crate does not depend on this
//! one), so what the file says reaches the server unchanged.

use garde::{Error, Validate};
use serde::{Deserialize, Serialize};

use super::rules;
pub use compact_events::settings::{
    ServerLimits, ServerRetention, ServerSettings, ServerStore, ServerStoreBackend,
    redact_url_password,
};

/// Which session store keeps session state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StateStoreKind {
    /// In this process only (the library's default).
    #[default]
    Memory,
    /// A SQLite file at `state.path`.
    Sqlite,
    /// A PostgreSQL database at `state.url` (replicas share it).
    Postgres,
}

/// The default of `state.wait_ms`: long enough for a queue a healthy
/// replica drains (calls hold a connection for milliseconds, or for a
/// summarizer's round trip), short enough that a client told "busy" still
/// has time to be answered elsewhere.
pub const DEFAULT_STATE_WAIT_MS: u64 = 2_000;

/// `state:`: where session state lives.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Validate)]
#[serde(default, deny_unknown_fields)]
pub struct StateSettings {
    /// `memory`, `sqlite` or `postgres`.
    #[garde(skip)]
    pub store: StateStoreKind,
    /// The SQLite file (`store: sqlite`).
    #[garde(custom(rules::non_empty))]
    pub path: String,
    /// The PostgreSQL connection URL (`store: postgres`); its password is
    /// never printed or logged.
    #[garde(custom(postgres_url))]
    pub url: Option<String>,
    /// TLS to PostgreSQL: libpq's `sslmode` (`disable`, `allow`, `prefer`,
    /// `require`, `verify-ca`, `verify-full`), for a URL that does not set
    /// it; `null`: the URL's, else `prefer`.
    #[garde(custom(ssl_mode_rule))]
    pub ssl_mode: Option<String>,
    /// The CA certificates (a PEM file) that check the server's certificate,
    /// or `system` for the bundled public roots: libpq's `sslrootcert`, for
    /// a URL that does not set it.
    #[garde(skip)]
    pub ssl_root_cert: Option<String>,
    /// How long a call waits for the PostgreSQL store before it fails as
    /// busy (HTTP 503, which a client retries, on another replica): for one
    /// of the process's connections when all are in use, and for the
    /// session when another call (in any replica) holds it. A replica that
    /// cannot start a call in this time is overloaded or the session is
    /// stuck elsewhere; saying so beats a wait with no end.
    #[garde(custom(rules::at_least_u64(1)))]
    pub wait_ms: u64,
}

impl StateSettings {
    /// `url` with `ssl_mode` and `ssl_root_cert` added as the URL
    /// parameters it does not have (the URL's own win).
    pub fn postgres_url(&self) -> Option<String> {
        let mut url = self.url.clone()?;
        let has = |url: &str, key: &str| {
            url.split_once('?').is_some_and(|(_, q)| {
                q.split('&')
                    .any(|p| p.split_once('=').map_or(p, |(k, _)| k) == key)
            })
        };
        for (key, value) in [
            ("sslmode", &self.ssl_mode),
            ("sslrootcert", &self.ssl_root_cert),
        ] {
            if let Some(value) = value
                && !has(&url, key)
            {
                url.push(if url.contains('?') { '&' } else { '?' });
                url.push_str(key);
                url.push('=');
                for c in value.chars() {
                    match c {
                        '%' | '&' | '#' | ' ' | '+' | '?' => {
                            url.push_str(&format!("%{:02X}", c as u32))
                        }
                        c => url.push(c),
                    }
                }
            }
        }
        Some(url)
    }
}

impl Default for StateSettings {
    fn default() -> Self {
        Self {
            store: StateStoreKind::Memory,
            path: "./.compact/state.sqlite3".to_owned(),
            url: None,
            ssl_mode: None,
            ssl_root_cert: None,
            wait_ms: DEFAULT_STATE_WAIT_MS,
        }
    }
}

impl std::fmt::Debug for StateSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateSettings")
            .field("store", &self.store)
            .field("path", &self.path)
            .field("url", &self.url.as_deref().map(redact_url_password))
            .field("ssl_mode", &self.ssl_mode)
            .field("ssl_root_cert", &self.ssl_root_cert)
            .field("wait_ms", &self.wait_ms)
            .finish()
    }
}

fn ssl_mode_rule(value: &Option<String>, _: &()) -> garde::Result {
    const MODES: [&str; 6] = [
        "disable",
        "allow",
        "prefer",
        "require",
        "verify-ca",
        "verify-full",
    ];
    match value {
        Some(mode) if !MODES.contains(&mode.as_str()) => Err(Error::new(format!(
            "must be one of {} (got {mode:?})",
            MODES.join(", ")
        ))),
        _ => Ok(()),
    }
}

fn postgres_url(value: &Option<String>, _: &()) -> garde::Result {
    match value {
        None => Ok(()),
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => Ok(()),
        Some(url) => Err(Error::new(format!(
            "must start with postgres:// or postgresql:// (got {:?})",
            redact_url_password(url)
        ))),
    }
}

/// `proxy:`: `compact proxy` (and `compact serve --proxy`), the
/// provider-compatible proxy (docs/design.md §15).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Validate)]
#[serde(default, deny_unknown_fields)]
pub struct ProxySettings {
    /// Listen address of the proxy.
    #[garde(custom(socket_addr))]
    pub addr: String,
    /// The provider every path goes to unless a prefix of `upstreams`
    /// matches it (`https://api.openai.com`); `--upstream` sets it.
    #[garde(custom(rules::opt_http_url))]
    pub upstream: Option<String>,
    /// More providers by path prefix, each `PREFIX=URL`
    /// (`/anthropic=https://api.anthropic.com`): a request under the prefix
    /// goes to that URL with the prefix removed.
    #[garde(inner(custom(upstream_entry)))]
    pub upstreams: Vec<String>,
    /// Whether requests are compacted; `false` only forwards and observes.
    #[garde(skip)]
    pub compaction: bool,
    /// Request bodies past this get a 413 in the provider's error shape.
    #[garde(custom(rules::at_least(1024)))]
    pub max_body_bytes: usize,
    /// History text kept decoded, all sessions together, so that a history
    /// resent whole decodes only its new items (least recently used
    /// sessions dropped first; `0` keeps none). The decoded items take
    /// about as much memory again.
    #[garde(skip)]
    pub history_cache_bytes: usize,
    /// Longest wait for a connection to the upstream.
    #[garde(custom(rules::at_least_u64(1)))]
    pub connect_timeout_ms: u64,
    /// Longest wait for the upstream's response headers (a 504 past it).
    #[garde(custom(rules::at_least_u64(1)))]
    pub response_timeout_ms: u64,
    /// Longest silence inside a response body (a stream between two
    /// events); past it the response is cut off.
    #[garde(custom(rules::at_least_u64(1)))]
    pub idle_timeout_ms: u64,
}

impl Default for ProxySettings {
    fn default() -> Self {
        Self {
            addr: "127.0.0.1:5176".to_owned(),
            upstream: None,
            upstreams: Vec::new(),
            compaction: true,
            max_body_bytes: 32 * 1024 * 1024,
            history_cache_bytes: 32 * 1024 * 1024,
            connect_timeout_ms: 10_000,
            response_timeout_ms: 600_000,
            idle_timeout_ms: 300_000,
        }
    }
}

impl ProxySettings {
    /// `upstreams` as `(prefix, url)` pairs (entries that break the rule of
    /// [`ProxySettings::validate`] are left out).
    pub fn prefixed_upstreams(&self) -> Vec<(String, String)> {
        self.upstreams
            .iter()
            .filter_map(|e| split_upstream(e))
            .map(|(p, u)| (p.to_owned(), u.to_owned()))
            .collect()
    }
}

/// `PREFIX=URL` as its two halves, when the prefix is a path.
fn split_upstream(entry: &str) -> Option<(&str, &str)> {
    let (prefix, url) = entry.split_once('=')?;
    let (prefix, url) = (prefix.trim(), url.trim());
    (prefix.starts_with('/') && prefix.len() > 1 && !prefix.ends_with('/')).then_some((prefix, url))
}

fn upstream_entry(value: &str, ctx: &()) -> garde::Result {
    match split_upstream(value) {
        Some((_, url)) => rules::http_url(url, ctx),
        None => Err(Error::new(format!(
            "must be PREFIX=URL, the prefix a path such as /anthropic (got {value:?})"
        ))),
    }
}

fn socket_addr(value: &str, _: &()) -> garde::Result {
    value
        .parse::<std::net::SocketAddr>()
        .map(|_| ())
        .map_err(|_| {
            Error::new(format!(
                "must be an IP address and port such as 127.0.0.1:5175 (got {value:?})"
            ))
        })
}
