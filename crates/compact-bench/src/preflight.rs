//! `compact bench preflight`: the preflight path warm without a trigger,
//! with the raw history resent (mode b), triggered, and a forced summary.

use compact_middleware::config::{CacheBreakpoints, Config};
use compact_middleware::model::{Format, Message, Request};
use compact_middleware::{CompactManager, PreflightRequest};
use serde_json::{Value, json};

use crate::harness::measure_with;
use crate::workload::{history, received};

/// `compact bench preflight`.
pub(crate) fn run(quick: bool) -> Value {
    // A current-thread runtime: the preflight path is CPU-bound and this
    // measures it without scheduler noise.
    let rt = match crate::harness::current_thread() {
        Ok(rt) => rt,
        Err(e) => return e,
    };
    let base = history(100, 3000);
    let runs = if quick { 30 } else { 200 };

    // Warm, not triggering: a 1M window.
    let config = Config {
        max_context_tokens: Some(1_000_000),
        ..Config::default()
    };
    let manager = match bare_manager(config) {
        Ok(m) => m,
        Err(e) => return e,
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
    let manager = match bare_manager(config) {
        Ok(m) => m,
        Err(e) => return e,
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
    // The same, on the Anthropic wire, the agent keeping what it gets:
    // what placing the cache breakpoints (and taking them off again) costs.
    let anthropic_off = anthropic_warm(&rt, runs, CacheBreakpoints::Off);
    let anthropic_auto = anthropic_warm(&rt, runs, CacheBreakpoints::Auto);
    json!({
        "history": {"messages": base.len(), "t_est": t_est},
        "no_trigger_warm": no_trigger,
        "no_trigger_warm_anthropic": {"breakpoints_off": anthropic_off, "breakpoints_auto": anthropic_auto},
        "forced_summary_extractive": {"stats": summarized, "tokens_after": tokens_after, "summary_tokens": summary_tokens},
        "raw_history_mode_b": raw_mode,
        "triggered_auto": {"stats": triggered, "tokens_after": triggered_after},
    })
}

/// An Anthropic agent run: a system prompt, a task, then `rounds` rounds of
/// a tool call and its output of `chars` characters.
fn anthropic_history(rounds: usize, chars: usize) -> Vec<Message> {
    let mut messages = vec![
        json!({"role": "user", "content": "Find out why the nightly build fails and fix it."}),
    ];
    for i in 0..rounds {
        messages.push(json!({"role": "assistant", "content": [
            {"type": "text", "text": format!("Round {i}: reading the next log.")},
            {"type": "tool_use", "id": format!("toolu_{i:04}"), "name": "shell", "input": {"cmd": format!("cat logs/{i}.log")}}]}));
        let line = format!("[{i}] step ok in 12.{i}s; cache warm; nothing to report here\n");
        let output: String = line
            .repeat(chars / line.len() + 1)
            .chars()
            .take(chars)
            .collect();
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("toolu_{i:04}"), "content": output}]}));
    }
    anthropic(json!({"system": "You are a build engineer. Be precise.", "messages": messages}))
}

fn anthropic(v: Value) -> Vec<Message> {
    Request::from_value(v, Format::Anthropic)
        .map(|r| r.messages)
        .unwrap_or_default()
}

/// A manager without storage or exporters, or the suite's JSON error.
fn bare_manager(config: Config) -> Result<CompactManager, Value> {
    CompactManager::builder(config)
        .without_config_exporters()
        .without_storage()
        .build()
        .map_err(|_| json!({"error": "cannot build manager"}))
}

/// Warm preflights that do not trigger, each the last output (as the agent
/// got it) plus a new exchange, under `setting`.
fn anthropic_warm(rt: &tokio::runtime::Runtime, runs: usize, setting: CacheBreakpoints) -> Value {
    let mut config = Config {
        max_context_tokens: Some(1_000_000),
        ..Config::default()
    };
    config.policy.cache_breakpoints = setting;
    let manager = match bare_manager(config) {
        Ok(m) => m,
        Err(e) => return e,
    };
    let sent = std::cell::RefCell::new(anthropic_history(133, 3000));
    let mut k = 0usize;
    let stats = measure_with(
        3,
        runs,
        || {
            k += 1;
            let mut msgs = sent.borrow().clone();
            msgs.extend(anthropic(json!([
                {"role": "assistant", "content": format!("Step {k} done.")},
                {"role": "user", "content": format!("Go on with step {}.", k + 1)}
            ])));
            msgs
        },
        |msgs| {
            if let Ok(o) = rt.block_on(manager.preflight("bench-anthropic", msgs)) {
                *sent.borrow_mut() = o.messages;
            }
        },
    );
    json!(stats)
}
