//! The proxy's figures in Prometheus text (`GET /metrics` on the proxy,
//! and on the trace server of `compact serve --proxy`): calls by API and
//! status, what compaction did, latency, time to first token, the
//! proxy's own overhead and the tokens providers reported.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

use compact_middleware::events::payload::ModelCall;

/// Seconds: model calls take from milliseconds to minutes.
const LATENCY: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];
/// Seconds: the proxy's own time before forwarding.
const OVERHEAD: [f64; 10] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1, 1.0,
];

#[derive(Debug, Default, Clone)]
struct Histogram {
    buckets: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, bounds: &[f64], v: f64) {
        if self.buckets.len() != bounds.len() {
            self.buckets = vec![0; bounds.len()];
        }
        for (b, bound) in self.buckets.iter_mut().zip(bounds) {
            if v <= *bound {
                *b += 1;
            }
        }
        self.sum += v;
        self.count += 1;
    }

    fn render(&self, out: &mut String, name: &str, labels: &str, bounds: &[f64]) {
        let sep = if labels.is_empty() { "" } else { "," };
        for (b, bound) in self.buckets.iter().zip(bounds) {
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{bound}\"}} {b}");
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}",
            self.count
        );
        let braces = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let _ = writeln!(out, "{name}_sum{braces} {}", self.sum);
        let _ = writeln!(out, "{name}_count{braces} {}", self.count);
    }
}

#[derive(Debug, Default)]
struct Inner {
    calls: BTreeMap<(String, u16), u64>,
    compaction: BTreeMap<String, u64>,
    latency: BTreeMap<String, Histogram>,
    ttft: BTreeMap<String, Histogram>,
    overhead: Histogram,
    tokens: BTreeMap<(String, &'static str), u64>,
}

/// Counters and histograms of every call the proxy forwarded.
#[derive(Debug, Default)]
pub(crate) struct Metrics(Mutex<Inner>);

impl Metrics {
    pub(crate) fn record(&self, call: &ModelCall) {
        let mut m = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *m.calls.entry((call.api.clone(), call.status)).or_default() += 1;
        *m.compaction.entry(call.compaction.clone()).or_default() += 1;
        m.latency
            .entry(call.api.clone())
            .or_default()
            .observe(&LATENCY, call.latency_ms as f64 / 1000.0);
        if let Some(t) = call.ttft_ms {
            m.ttft
                .entry(call.api.clone())
                .or_default()
                .observe(&LATENCY, t as f64 / 1000.0);
        }
        m.overhead.observe(&OVERHEAD, call.overhead_us as f64 / 1e6);
        for (kind, n) in [
            ("input", call.input_tokens),
            ("cached", call.cached_tokens),
            ("output", call.output_tokens),
        ] {
            if let Some(n) = n {
                *m.tokens.entry((call.api.clone(), kind)).or_default() += n;
            }
        }
    }

    pub(crate) fn render(&self, out: &mut String) {
        let m = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let head = |out: &mut String, name: &str, kind: &str, help: &str| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        };
        head(
            out,
            "compact_proxy_calls_total",
            "counter",
            "Calls the proxy forwarded, by API and the status the caller got.",
        );
        for ((api, status), n) in &m.calls {
            let _ = writeln!(
                out,
                "compact_proxy_calls_total{{api=\"{api}\",status=\"{status}\"}} {n}"
            );
        }
        head(
            out,
            "compact_proxy_compaction_total",
            "counter",
            "What compaction did to each call (none, applied, reactive, skipped, failed, off).",
        );
        for (label, n) in &m.compaction {
            let _ = writeln!(
                out,
                "compact_proxy_compaction_total{{outcome=\"{label}\"}} {n}"
            );
        }
        head(
            out,
            "compact_proxy_latency_seconds",
            "histogram",
            "From a call's arrival to its response's last byte.",
        );
        for (api, h) in &m.latency {
            h.render(
                out,
                "compact_proxy_latency_seconds",
                &format!("api=\"{api}\""),
                &LATENCY,
            );
        }
        head(
            out,
            "compact_proxy_ttft_seconds",
            "histogram",
            "Streams: from a call's arrival to its first output event.",
        );
        for (api, h) in &m.ttft {
            h.render(
                out,
                "compact_proxy_ttft_seconds",
                &format!("api=\"{api}\""),
                &LATENCY,
            );
        }
        head(
            out,
            "compact_proxy_overhead_seconds",
            "histogram",
            "The proxy's own time before forwarding (reading, compacting).",
        );
        m.overhead
            .render(out, "compact_proxy_overhead_seconds", "", &OVERHEAD);
        head(
            out,
            "compact_proxy_tokens_total",
            "counter",
            "Tokens providers reported, by API and kind (input includes cached).",
        );
        for ((api, kind), n) in &m.tokens {
            let _ = writeln!(
                out,
                "compact_proxy_tokens_total{{api=\"{api}\",kind=\"{kind}\"}} {n}"
            );
        }
    }
}
