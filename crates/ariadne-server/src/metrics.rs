//! Counters behind `GET /metrics`, rendered as Prometheus text.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use crate::schema::ValidEvent;
use crate::store::StoreStats;

/// Upper bounds of the `memory_tokens_before_after` buckets.
const TOKEN_BUCKETS: [f64; 10] = [
    1_000.0,
    2_000.0,
    4_000.0,
    8_000.0,
    16_000.0,
    32_000.0,
    64_000.0,
    128_000.0,
    256_000.0,
    1_000_000.0,
];

#[derive(Debug, Default, Clone, Copy)]
struct IngestCounts {
    requests: u64,
    events: u64,
    bytes: u64,
}

/// A metric family over the ingest counters: name, help, which counter.
type Family = (&'static str, &'static str, fn(&IngestCounts) -> u64);

#[derive(Debug, Default, Clone)]
struct Histogram {
    buckets: [u64; TOKEN_BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, v: f64) {
        for (b, le) in self.buckets.iter_mut().zip(TOKEN_BUCKETS) {
            if v <= le {
                *b += 1;
            }
        }
        self.count += 1;
        self.sum += v;
    }
}

/// Metrics another crate renders into the exposition (the service's
/// dispatcher): text appended as it is, in the Prometheus text format.
pub(crate) type MetricsSource = Box<dyn Fn(&mut String) + Send + Sync>;

#[derive(Default)]
struct Sources(Mutex<Vec<MetricsSource>>);

impl std::fmt::Debug for Sources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.lock().map_or(0, |s| s.len());
        f.debug_tuple("Sources").field(&n).finish()
    }
}

/// The server's counters.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    sources: Sources,
    ingest: Mutex<BTreeMap<(&'static str, u16), IngestCounts>>,
    sse_clients: AtomicI64,
    sse_connections: AtomicU64,
    sse_skipped: AtomicU64,
    compaction_items: AtomicU64,
    tokens: Mutex<[Histogram; 2]>,
    cache: Mutex<CacheTotals>,
}

/// The prompt-cache figures of acknowledged `compact.preflight` spans.
#[derive(Debug, Default, Clone, Copy)]
struct CacheTotals {
    breaks: u64,
    /// By source (`predicted`, `reported`): input tokens, cache reads, micro-dollars.
    prompt: [u64; 2],
    read: [u64; 2],
    cost: [u64; 2],
}

impl Metrics {
    /// Counts one ingest request on `endpoint` answered with `status`.
    pub(crate) fn ingest(&self, endpoint: &'static str, status: u16, events: usize, bytes: usize) {
        let mut m = self
            .ingest
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let c = m.entry((endpoint, status)).or_default();
        c.requests += 1;
        c.events += events as u64;
        c.bytes += bytes as u64;
    }

    /// The two compaction metrics (`memory_compaction_items_total`,
    /// `memory_tokens_before_after`, docs/design.md §8), from acknowledged
    /// `compact.pruned_messages` spans: items = cleared + summarized +
    /// dropped; tokens before and after.
    pub(crate) fn observe_events(&self, events: &[ValidEvent]) {
        {
            let mut c = self
                .cache
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for m in events.iter().map(|ev| ev.meta.marks) {
                let k = m.cache();
                c.breaks += u64::from(m.cache_break());
                for (i, (prompt, read, cost)) in [
                    (k.predicted_prompt, k.predicted_read, k.predicted_cost),
                    (k.reported_prompt, k.reported_read, k.reported_cost),
                ]
                .into_iter()
                .enumerate()
                {
                    c.prompt[i] += prompt;
                    c.read[i] += read;
                    c.cost[i] += cost;
                }
            }
        }
        for p in events.iter().filter_map(|ev| ev.pruned) {
            self.compaction_items
                .fetch_add(p.items as u64, Ordering::Relaxed);
            let mut h = self
                .tokens
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(b) = p.before {
                h[0].observe(b);
            }
            if let Some(a) = p.after {
                h[1].observe(a);
            }
        }
    }

    /// The prompt-cache families: counters over acknowledged
    /// `compact.preflight` spans, and over the retained sessions the cache
    /// hit ratio and the cost per session, by source (`predicted`: what
    /// compact predicted for the requests it returned; `reported`: what the
    /// provider billed, from the callers' usage figures).
    fn render_cache(&self, out: &mut String, store: &StoreStats) {
        let c = *self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let sources = ["predicted", "reported"];
        let _ = writeln!(
            out,
            "# HELP compact_cache_breaks_total Preflights whose request no longer starts with the previous one of its session (a compaction broke the prompt-cache prefix).\n# TYPE compact_cache_breaks_total counter\ncompact_cache_breaks_total {}",
            c.breaks
        );
        let families: [(&str, &str, [String; 2]); 3] = [
            (
                "compact_prompt_tokens_total",
                "Input tokens of model calls, by source.",
                c.prompt.map(|v| v.to_string()),
            ),
            (
                "compact_cache_read_tokens_total",
                "Input tokens served from the provider's prompt cache, by source.",
                c.read.map(|v| v.to_string()),
            ),
            (
                "compact_cost_usd_total",
                "Model call cost at the model's list prices, US dollars, by source (predicted: input only).",
                c.cost.map(|v| format!("{}", v as f64 / 1e6)),
            ),
        ];
        for (name, help, values) in families {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for (source, v) in sources.iter().zip(values) {
                let _ = writeln!(out, "{name}{{source=\"{source}\"}} {v}");
            }
        }
        let t = &store.totals;
        let hit = [
            (t.cache_read_predicted, t.prompt_tokens_predicted),
            (t.cache_read_reported, t.input_tokens_reported),
        ];
        let cost = [t.cost_predicted_micro_usd, t.cost_reported_micro_usd];
        let name = "compact_cache_hit_ratio";
        let _ = writeln!(
            out,
            "# HELP {name} Share of input tokens served from the prompt cache over the retained sessions, by source.\n# TYPE {name} gauge"
        );
        for (source, (read, prompt)) in sources.iter().zip(hit) {
            if prompt > 0 {
                let _ = writeln!(
                    out,
                    "{name}{{source=\"{source}\"}} {}",
                    read as f64 / prompt as f64
                );
            }
        }
        let name = "compact_cost_per_session_usd";
        let _ = writeln!(
            out,
            "# HELP {name} Mean model call cost of the retained sessions, US dollars, by source.\n# TYPE {name} gauge"
        );
        if store.traces > 0 {
            for (source, micros) in sources.iter().zip(cost) {
                let _ = writeln!(
                    out,
                    "{name}{{source=\"{source}\"}} {}",
                    micros as f64 / 1e6 / store.traces as f64
                );
            }
        }
    }

    /// A subscriber connected; the returned guard counts it until dropped.
    pub(crate) fn sse_connected(self: &std::sync::Arc<Self>) -> SseClientGuard {
        self.sse_clients.fetch_add(1, Ordering::Relaxed);
        self.sse_connections.fetch_add(1, Ordering::Relaxed);
        SseClientGuard(self.clone())
    }

    /// A subscriber fell behind and skipped `n` events.
    pub(crate) fn sse_skipped(&self, n: u64) {
        self.sse_skipped.fetch_add(n, Ordering::Relaxed);
    }

    /// Events skipped by backpressure so far.
    pub(crate) fn skipped_total(&self) -> u64 {
        self.sse_skipped.load(Ordering::Relaxed)
    }

    /// Adds metrics another crate renders.
    pub(crate) fn add_source(&self, source: MetricsSource) {
        self.sources
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(source);
    }

    /// Prometheus text exposition.
    pub(crate) fn render(&self, store: &StoreStats) -> String {
        let mut out = String::new();
        self.render_ingest(&mut out);
        self.render_gauges(&mut out, store);
        self.render_cache(&mut out, store);
        self.render_tokens(&mut out);
        for source in self
            .sources
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
        {
            source(&mut out);
        }
        out
    }

    /// The ingest counters, by endpoint and status.
    fn render_ingest(&self, out: &mut String) {
        let ingest = self
            .ingest
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let families: [Family; 3] = [
            (
                "ariadne_ingest_requests_total",
                "Ingest requests by endpoint and status.",
                |c| c.requests,
            ),
            (
                "ariadne_ingest_events_total",
                "Events acknowledged or refused, by endpoint and status.",
                |c| c.events,
            ),
            (
                "ariadne_ingest_bytes_total",
                "Request body bytes read, by endpoint and status.",
                |c| c.bytes,
            ),
        ];
        for (name, help, get) in families {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for ((endpoint, status), c) in &ingest {
                let _ = writeln!(
                    out,
                    "{name}{{endpoint=\"{endpoint}\",status=\"{status}\"}} {}",
                    get(c)
                );
            }
        }
    }

    /// One-value gauges and counters: subscribers, the store, compaction.
    fn render_gauges(&self, out: &mut String, store: &StoreStats) {
        let values: [(&str, &str, &str, String); 11] = [
            (
                "ariadne_sse_clients",
                "Connected /events subscribers.",
                "gauge",
                self.sse_clients.load(Ordering::Relaxed).to_string(),
            ),
            (
                "ariadne_sse_connections_total",
                "/events subscriptions accepted.",
                "counter",
                self.sse_connections.load(Ordering::Relaxed).to_string(),
            ),
            (
                "ariadne_sse_events_skipped_total",
                "Events a slow subscriber skipped because it fell behind (backpressure).",
                "counter",
                self.skipped_total().to_string(),
            ),
            (
                "ariadne_store_events",
                "Retained events.",
                "gauge",
                store.count.to_string(),
            ),
            (
                "ariadne_store_capacity",
                "Retention bound on retained events.",
                "gauge",
                store.capacity.to_string(),
            ),
            (
                "ariadne_store_memory_bytes",
                "Bytes of retained event JSON in memory.",
                "gauge",
                store.json_bytes.to_string(),
            ),
            (
                "ariadne_store_disk_bytes",
                "Bytes of the durable log on disk.",
                "gauge",
                store.disk_bytes.to_string(),
            ),
            (
                "ariadne_store_commits_total",
                "Group commits (one fsync each).",
                "counter",
                store.commits.to_string(),
            ),
            (
                "ariadne_store_last_seq",
                "Newest sequence number (the SSE id).",
                "gauge",
                store.last_seq.unwrap_or(0).to_string(),
            ),
            (
                "ariadne_store_recovered_torn_bytes",
                "Bytes of a torn last write cut at startup.",
                "gauge",
                store.recovered_torn_bytes.to_string(),
            ),
            (
                "memory_compaction_items_total",
                "Context items compacted away (cleared + summarized + dropped), from compact.pruned_messages spans.",
                "counter",
                self.compaction_items.load(Ordering::Relaxed).to_string(),
            ),
        ];
        for (name, help, kind, v) in values {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
            );
        }
    }

    /// The histogram of context tokens before and after compaction.
    fn render_tokens(&self, out: &mut String) {
        let hist = self
            .tokens
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let name = "memory_tokens_before_after";
        let _ = writeln!(
            out,
            "# HELP {name} Context tokens before and after compaction, from compact.pruned_messages spans.\n# TYPE {name} histogram"
        );
        for (stage, h) in ["before", "after"].iter().zip(hist.iter()) {
            for (le, n) in TOKEN_BUCKETS.iter().zip(h.buckets) {
                let _ = writeln!(out, "{name}_bucket{{stage=\"{stage}\",le=\"{le}\"}} {n}");
            }
            let _ = writeln!(
                out,
                "{name}_bucket{{stage=\"{stage}\",le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(out, "{name}_sum{{stage=\"{stage}\"}} {}", h.sum);
            let _ = writeln!(out, "{name}_count{{stage=\"{stage}\"}} {}", h.count);
        }
    }
}

/// Decrements the connected-subscriber gauge when the stream ends.
#[derive(Debug)]
pub(crate) struct SseClientGuard(std::sync::Arc<Metrics>);

impl Drop for SseClientGuard {
    fn drop(&mut self) {
        self.0.sse_clients.fetch_sub(1, Ordering::Relaxed);
    }
}
