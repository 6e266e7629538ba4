//! The HTTP side shared by the exporters: options, the bounded retry loop,
//! counters, and the rate-limited `[Ariadne]` failure log.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use compact_events::ExportError;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};

use crate::BuildError;

/// The longest a single HTTP request may take: a longer configured
/// `request_timeout` is clamped to it.
pub const MAX_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// How an exporter talks HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpOptions {
    /// Sent as `Authorization: Bearer <token>` when set.
    pub token: Option<String>,
    /// Per request; clamped to [`MAX_REQUEST_TIMEOUT`].
    pub request_timeout: Duration,
    /// Tries per request body, the first included (at least 1).
    pub max_attempts: u32,
    /// Wait before the first retry; doubles on each further one.
    pub initial_backoff: Duration,
    /// Longest wait between two tries.
    pub max_backoff: Duration,
    /// Everything one `export` call may spend, retries included. Keep it
    /// below the dispatcher's `export_timeout` (5 s by default).
    pub deadline: Duration,
    /// Largest request body. The Ariadne server refuses more than 256 KiB.
    pub max_body_bytes: usize,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            token: None,
            request_timeout: MAX_REQUEST_TIMEOUT,
            max_attempts: 3,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            deadline: Duration::from_secs(4),
            // 1 KiB under the server's 262 144-byte limit.
            max_body_bytes: 255 * 1024,
        }
    }
}

/// Counters of one exporter, a snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SendStats {
    /// HTTP requests made, retries included.
    pub requests: u64,
    /// Retries after a 5xx, 408, 429, timeout or connection error.
    pub retries: u64,
    /// Request bodies the server accepted.
    pub bodies_delivered: u64,
    /// Events in accepted bodies.
    pub events_delivered: u64,
    /// Request bodies given up on.
    pub bodies_failed: u64,
    /// Events not delivered (their body failed, or they could not be encoded).
    pub events_failed: u64,
    /// Events cut down to fit the size rules.
    pub events_truncated: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub requests: AtomicU64,
    pub retries: AtomicU64,
    pub bodies_delivered: AtomicU64,
    pub events_delivered: AtomicU64,
    pub bodies_failed: AtomicU64,
    pub events_failed: AtomicU64,
    pub events_truncated: AtomicU64,
}

impl Counters {
    pub(crate) fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> SendStats {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        SendStats {
            requests: g(&self.requests),
            retries: g(&self.retries),
            bodies_delivered: g(&self.bodies_delivered),
            events_delivered: g(&self.events_delivered),
            bodies_failed: g(&self.bodies_failed),
            events_failed: g(&self.events_failed),
            events_truncated: g(&self.events_truncated),
        }
    }
}

/// One failure line per window; the ones in between are counted and
/// reported with the next line.
const LOG_WINDOW: Duration = Duration::from_secs(30);

#[derive(Debug, Default)]
pub(crate) struct FailureLog {
    state: Mutex<(Option<Instant>, u64)>,
}

impl FailureLog {
    pub(crate) fn failure(&self, what: &str, message: &str) {
        let mut st = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        let due =
            st.0.is_none_or(|last| now.duration_since(last) >= LOG_WINDOW);
        if !due {
            st.1 += 1;
            return;
        }
        let suppressed = std::mem::take(&mut st.1);
        st.0 = Some(now);
        drop(st);
        let line = if suppressed > 0 {
            format!(
                "[Ariadne] {what}: {message} ({suppressed} more failures since the last report)"
            )
        } else {
            format!("[Ariadne] {what}: {message}")
        };
        // With a tracing subscriber installed the line goes through it (the
        // CLI's writes to stderr); without one, straight to stderr, so a
        // library user still sees it.
        if tracing::dispatcher::has_been_set() {
            tracing::warn!(target: "ariadne_exporter", "{line}");
        } else {
            eprintln!("{line}");
        }
    }
}

/// Parses and checks an exporter URL.
pub(crate) fn parse_url(url: &str) -> Result<reqwest::Url, BuildError> {
    let bad = |reason: &str| BuildError::Url {
        url: url.to_owned(),
        reason: reason.to_owned(),
    };
    let parsed = reqwest::Url::parse(url).map_err(|e| bad(&e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad("the scheme must be http or https"));
    }
    if parsed.host_str().is_none() {
        return Err(bad("no host"));
    }
    Ok(parsed)
}

/// An HTTP endpoint with retries, counters and the failure log.
#[derive(Debug)]
pub(crate) struct Sender {
    client: reqwest::Client,
    url: reqwest::Url,
    auth: Option<HeaderValue>,
    pub opts: HttpOptions,
    pub counters: Counters,
    pub log: FailureLog,
    pub what: &'static str,
    /// The request bodies' `Content-Type`.
    pub content_type: &'static str,
}

enum Attempt {
    Done,
    Retry(String),
    Fatal(String),
}

impl Sender {
    pub(crate) fn new(
        url: &str,
        opts: HttpOptions,
        what: &'static str,
    ) -> Result<Self, BuildError> {
        let url = parse_url(url)?;
        let auth = match opts.token.as_deref().filter(|t| !t.is_empty()) {
            None => None,
            Some(t) => {
                let mut v = HeaderValue::from_str(&format!("Bearer {t}")).map_err(|_| {
                    BuildError::Client("the token is not a valid header value".to_owned())
                })?;
                v.set_sensitive(true);
                Some(v)
            }
        };
        let client = reqwest::Client::builder()
            .user_agent(concat!(
                "compact-ariadne-exporter/",
                env!("CARGO_PKG_VERSION")
            ))
            .connect_timeout(opts.request_timeout.min(MAX_REQUEST_TIMEOUT))
            .build()
            .map_err(|e| BuildError::Client(e.to_string()))?;
        Ok(Sender {
            client,
            url,
            auth,
            opts,
            counters: Counters::default(),
            log: FailureLog::default(),
            what,
            content_type: "application/json",
        })
    }

    pub(crate) fn url(&self) -> &reqwest::Url {
        &self.url
    }

    async fn attempt(&self, body: &[u8], timeout: Duration) -> Attempt {
        Counters::add(&self.counters.requests, 1);
        let mut req = self
            .client
            .post(self.url.clone())
            .timeout(timeout)
            .header(CONTENT_TYPE, self.content_type)
            .body(body.to_vec());
        if let Some(auth) = &self.auth {
            req = req.header(AUTHORIZATION, auth.clone());
        }
        match req.send().await {
            Ok(resp) => {
                let status = resp.status();
                if status.is_success() {
                    return Attempt::Done;
                }
                // A short look at the reply helps whoever reads the log.
                let text = resp.text().await.unwrap_or_default();
                let snippet: String = text.chars().take(200).collect();
                let msg = format!("HTTP {status}: {snippet}");
                if status.is_server_error() || status.as_u16() == 408 || status.as_u16() == 429 {
                    Attempt::Retry(msg)
                } else {
                    Attempt::Fatal(msg)
                }
            }
            Err(e) if e.is_timeout() => Attempt::Retry(format!("timed out after {timeout:?}")),
            Err(e) if e.is_connect() || e.is_request() => Attempt::Retry(error_chain(&e)),
            Err(e) => Attempt::Fatal(error_chain(&e)),
        }
    }

    /// POSTs one body, retrying retryable failures with backoff until
    /// `max_attempts` or the export's `deadline` runs out.
    pub(crate) async fn post(
        &self,
        body: &[u8],
        events: u64,
        deadline: Instant,
    ) -> Result<(), ExportError> {
        let attempts = self.opts.max_attempts.max(1);
        let mut backoff = self.opts.initial_backoff;
        let mut last = String::new();
        for n in 1..=attempts {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let timeout = self.opts.request_timeout.min(MAX_REQUEST_TIMEOUT).min(left);
            match self.attempt(body, timeout).await {
                Attempt::Done => {
                    Counters::add(&self.counters.bodies_delivered, 1);
                    Counters::add(&self.counters.events_delivered, events);
                    return Ok(());
                }
                Attempt::Fatal(msg) => {
                    self.give_up(events, &msg);
                    return Err(ExportError::Rejected(msg));
                }
                Attempt::Retry(msg) => last = msg,
            }
            if n == attempts {
                break;
            }
            // Do not start a wait the deadline would cut short anyway.
            if Instant::now() + backoff >= deadline {
                break;
            }
            Counters::add(&self.counters.retries, 1);
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(self.opts.max_backoff);
        }
        let msg = if last.is_empty() {
            "export deadline reached".to_owned()
        } else {
            last
        };
        self.give_up(events, &msg);
        Err(ExportError::Other(msg))
    }

    fn give_up(&self, events: u64, msg: &str) {
        Counters::add(&self.counters.bodies_failed, 1);
        Counters::add(&self.counters.events_failed, events);
        self.log.failure(
            self.what,
            &format!("could not deliver {events} events to {}: {msg}", self.url),
        );
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        out.push_str(": ");
        out.push_str(&s.to_string());
        src = s.source();
    }
    out
}
