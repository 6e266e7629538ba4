//! `compact bench preflight`: the preflight path warm without a trigger,
//! with the raw history resent (mode b), triggered, and a forced summary.

use compact_middleware::config::Config;
use compact_middleware::model::Message;
use compact_middleware::{CompactManager, PreflightRequest};
use serde_json::{Value, json};

use crate::harness::measure_with;
use crate::workload::{history, received};

/// `compact bench preflight`.
pub(crate) fn run(quick: bool) -> Value {
    // A current-thread runtime: the preflight path is CPU-bound and this
    // measures it without scheduler noise.
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return json!({"error": format!("cannot build a tokio runtime: {e}")}),
    };
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
