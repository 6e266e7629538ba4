//! `compact bench tokens`: counting throughput of both BPE backends, and
//! whole-history estimates warm (shared count cache) and cold.

use std::sync::Arc;

use compact_middleware::CompactManager;
use compact_middleware::config::Config;
use compact_middleware::model::Message;
use compact_middleware::tokens::{self, Backend, CountCache, Encoding};
use serde_json::{Value, json};

use crate::harness::{measure, measure_with};
use crate::workload::{history, mixed_text, received};

/// `compact bench tokens`.
pub(crate) fn run(quick: bool) -> Value {
    let text = mixed_text(1 << 20);
    let mb = text.len() as f64 / (1 << 20) as f64;
    let runs = if quick { 3 } else { 10 };
    let mut throughput = serde_json::Map::new();
    for backend in [Backend::Bpe, Backend::Tiktoken] {
        let c = tokens::counter(backend, Encoding::O200k);
        let mut n = 0;
        let s = measure(1, runs, || n = c.count(&text));
        throughput.insert(
            format!("{backend:?}").to_lowercase(),
            json!({"tokens": n, "p50_ms": s.p50_us / 1000.0, "mb_per_s": (mb / (s.p50_us / 1e6) * 10.0).round() / 10.0}),
        );
    }

    // 400 messages, about 128k tokens.
    let base = history(100, 3000);
    let config = Config {
        max_context_tokens: Some(1_000_000),
        ..Config::default()
    };
    let cold_runs = if quick { 3 } else { 10 };
    let cold = measure(0, cold_runs, || {
        let manager = CompactManager::builder(config.clone())
            .without_config_exporters()
            .count_cache(Arc::new(CountCache::new(100_000)))
            .without_storage()
            .build();
        if let Ok(m) = manager {
            let msgs = received(&base);
            std::hint::black_box(m.estimate(&msgs, &[]));
        }
    });
    let manager = match CompactManager::builder(config)
        .without_config_exporters()
        .without_storage()
        .build()
    {
        Ok(m) => m,
        Err(e) => return json!({"error": e.to_string()}),
    };
    let t_est = manager.estimate(&base, &[]).t_est;
    let mut k = 0usize;
    let reestimate = measure_with(
        3,
        if quick { 50 } else { 300 },
        || {
            // A fresh copy of the history (as an agent would send it, never
            // hashed before) plus one new message.
            let mut msgs = received(&base);
            msgs.push(Message::user(format!("new message {k}")));
            k += 1;
            msgs
        },
        |msgs| {
            std::hint::black_box(manager.estimate(&msgs, &[]));
        },
    );
    json!({
        "counting_1mb_mixed": throughput,
        "history": {"messages": base.len(), "t_est": t_est},
        "reestimate_after_append": reestimate,
        "cold_estimate": cold,
    })
}
