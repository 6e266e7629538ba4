//! In-process benchmarks behind `compact bench`: synthetic but realistic
//! workloads and a small timing harness that reports medians and tails.
//! Timings are wall clock on a shared machine: compare medians and ratios.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};

use crate::config::Config;
use crate::manager::{CompactManager, PreflightRequest};
use crate::model::{Format, Message, Request};
use crate::tokens::{self, Backend, CountCache, Encoding};

/// Distribution of one measurement, in microseconds.
#[derive(Debug, Clone, Serialize)]
pub struct Stats {
    pub runs: usize,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub min_us: f64,
    pub max_us: f64,
}

impl Stats {
    fn from(mut samples: Vec<Duration>) -> Self {
        samples.sort();
        let us = |d: Duration| (d.as_nanos() as f64 / 1_000.0 * 10.0).round() / 10.0;
        let at = |q: f64| us(samples[((samples.len() - 1) as f64 * q).round() as usize]);
        Stats {
            runs: samples.len(),
            p50_us: at(0.5),
            p90_us: at(0.9),
            p99_us: at(0.99),
            min_us: us(samples[0]),
            max_us: us(samples[samples.len() - 1]),
        }
    }
}

/// Runs `f` `runs` times after `warmup` untimed runs.
pub fn measure(warmup: usize, runs: usize, mut f: impl FnMut()) -> Stats {
    measure_with(warmup, runs, || (), |()| f())
}

/// Like [`measure`], with an untimed `setup` producing each run's input
/// (so building the request is not charged to the code under test).
pub fn measure_with<T>(
    warmup: usize,
    runs: usize,
    mut setup: impl FnMut() -> T,
    mut f: impl FnMut(T),
) -> Stats {
    for _ in 0..warmup {
        f(setup());
    }
    let samples = (0..runs.max(1))
        .map(|_| {
            let input = setup();
            let t = Instant::now();
            f(input);
            t.elapsed()
        })
        .collect();
    Stats::from(samples)
}

/// About `bytes` of mixed English prose, JSON and code.
pub fn mixed_text(bytes: usize) -> String {
    const PROSE: &str = "The refresh endpoint must not exceed 250 ms at p99; we decided to move the network call outside the lock because contention was the root cause. ";
    const CODE: &str = "fn refresh(&self, tenant: TenantId) -> Result<Token, Error> {\n    let guard = self.cache.read()?;\n    guard.get(&tenant).cloned().ok_or(Error::Missing)\n}\n";
    let mut s = String::with_capacity(bytes + 512);
    let mut i = 0u64;
    while s.len() < bytes {
        s.push_str(PROSE);
        s.push_str(
            &json!({"id": format!("req-{i:06}"), "status": "ok", "latency_ms": i % 997, "tags": ["auth", "session"]})
                .to_string(),
        );
        s.push('\n');
        s.push_str(CODE);
        i += 1;
    }
    s
}

/// A chat history of `turns` turns (4 messages each: user, assistant tool
/// call, tool result of about `output_chars`, assistant reply).
pub fn history(turns: usize, output_chars: usize) -> Vec<Message> {
    let mut items = vec![json!({"role": "system", "content": "You are a careful coding agent."})];
    for t in 0..turns {
        let id = format!("call_{t:04}");
        items.push(json!({"role": "user", "content": format!("Step {t}: check the logs of job J-{t} and fix ticket AUTH-{}.", 1000 + t)}));
        items.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "read_logs", "arguments": format!("{{\"job\":\"J-{t}\"}}")}}]}));
        let mut out = String::with_capacity(output_chars + 64);
        let mut i = 0;
        while out.len() < output_chars {
            out.push_str(&format!(
                "J-{t} line {i}: request req-{i:05} took {} ms, status=ok\n",
                (i * 37) % 900
            ));
            i += 1;
        }
        items.push(json!({"role": "tool", "tool_call_id": id, "content": out}));
        items.push(json!({"role": "assistant", "content": format!("Job J-{t} is healthy; p99 stayed under 250 ms.")}));
    }
    Request::from_value(Value::Array(items), Format::Chat)
        .map(|r| r.messages)
        .unwrap_or_default()
}

/// The history as a new request would carry it: decoded from JSON, never
/// hashed or counted before (a clone would carry memoised hashes).
fn received(msgs: &[Message]) -> Vec<Message> {
    msgs.iter()
        .filter_map(|m| serde_json::from_value(m.to_value()).ok())
        .collect()
}

fn runtime() -> tokio::runtime::Runtime {
    // A current-thread runtime: the preflight path is CPU-bound and this
    // measures it without scheduler noise.
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => panic!("cannot build a tokio runtime for benchmarks: {e}"),
    }
}

/// `compact bench tokens`.
pub fn tokens_suite(quick: bool) -> Value {
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

/// `compact bench preflight`.
pub fn preflight_suite(quick: bool) -> Value {
    let rt = runtime();
    let base = history(100, 3000);
    let runs = if quick { 30 } else { 200 };

    // Warm, not triggering: a 1M window.
    let config = Config {
        max_context_tokens: Some(1_000_000),
        ..Config::default()
    };
    let Ok(manager) = CompactManager::builder(config)
        .without_config_exporters()
        .without_storage()
        .build()
    else {
        return json!({"error": "cannot build manager"});
    };
    let t_est = manager.estimate(&base, &[]).t_est;
    let mut k = 0usize;
    let fresh_copy = |k: usize, base: &[Message]| {
        let mut msgs = received(base);
        msgs.push(Message::user(format!("new message {k}")));
        msgs
    };
    let no_trigger = measure_with(
        3,
        runs,
        || {
            k += 1;
            fresh_copy(k, &base)
        },
        |msgs| {
            let _ = rt.block_on(manager.preflight("bench-warm", msgs));
        },
    );

    // Mode (b): the full raw history resent every call, growing by one turn.
    let mut raw: Vec<Message> = base.clone();
    let raw_mode = measure_with(
        3,
        runs,
        || {
            raw.push(Message::user(format!("raw message {}", raw.len())));
            received(&raw)
        },
        |msgs| {
            let _ = rt.block_on(manager.preflight("bench-raw", msgs));
        },
    );

    // Triggering: the same history in a 128k window (usage ~100%).
    let config = Config {
        model: "gpt-4o".into(),
        ..Config::default()
    };
    let Ok(manager) = CompactManager::builder(config)
        .without_config_exporters()
        .without_storage()
        .build()
    else {
        return json!({"error": "cannot build manager"});
    };
    let mut n = 0usize;
    let mut tokens_after = 0;
    let mut triggered_after = 0;
    let triggered = measure_with(
        2,
        if quick { 10 } else { 60 },
        || received(&base),
        |messages| {
            // A fresh session each run, so every run compacts from scratch.
            n += 1;
            if let Ok(o) = rt.block_on(manager.preflight_with(
                &format!("bench-trigger-{n}"),
                PreflightRequest {
                    messages,
                    ..PreflightRequest::default()
                },
            )) {
                triggered_after = o.report.tokens_after;
            }
        },
    );
    // Manual compaction: always summarizes the remainder (extractive).
    let mut summary_tokens = 0;
    let summarized = measure_with(
        2,
        if quick { 10 } else { 60 },
        || received(&base),
        |messages| {
            n += 1;
            if let Ok(o) =
                rt.block_on(manager.manual_compact(&format!("bench-manual-{n}"), messages, "bench"))
            {
                tokens_after = o.report.tokens_after;
                summary_tokens = o.report.summary_tokens.unwrap_or(0);
            }
        },
    );
    json!({
        "history": {"messages": base.len(), "t_est": t_est},
        "no_trigger_warm": no_trigger,
        "forced_summary_extractive": {"stats": summarized, "tokens_after": tokens_after, "summary_tokens": summary_tokens},
        "raw_history_mode_b": raw_mode,
        "triggered_auto": {"stats": triggered, "tokens_after": triggered_after},
    })
}
