//! The prompt cache around each preflight (`Report::cache`, the
//! `compact.preflight` event): what a provider can serve of the returned
//! request, the break a compaction causes, and the caller's reported
//! figures, priced.

use std::sync::Arc;
use std::time::Duration;

use compact_middleware::cache::{CacheRule, ReportedUsage, openai_cached};
use compact_middleware::config::Config;
use compact_middleware::events::payload::Preflight;
use compact_middleware::events::{CollectingExporter, Event};
use compact_middleware::model::{Format, Message, Request};
use compact_middleware::tokens::REPLY_PRIMING;
use compact_middleware::{CompactManager, PreflightOutcome, PreflightRequest};
use serde_json::{Value, json};

fn manager(model: &str, window: usize) -> (CompactManager, Arc<CollectingExporter>) {
    let collect = Arc::new(CollectingExporter::new());
    let config = Config {
        model: model.to_string(),
        max_context_tokens: Some(window),
        ..Config::default()
    };
    let m = CompactManager::builder(config)
        .without_config_exporters()
        .without_storage()
        .exporter(collect.clone())
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    (m, collect)
}

fn decode(items: Vec<Value>) -> Vec<Message> {
    Request::from_value(Value::Array(items), Format::Chat)
        .unwrap_or_else(|e| panic!("{e}"))
        .messages
}

/// Turn `i`: a request, a tool call, its (long) output, a reply.
fn turn(i: usize) -> Vec<Message> {
    let output: String = (0..60)
        .map(|l| format!("line {l} of run {i}: check passed for module m{i}_{l}\n"))
        .collect();
    decode(vec![
        json!({"role": "user", "content": format!("step {i}: run the checks of module m{i}")}),
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("c{i}"), "type": "function",
               "function": {"name": "run", "arguments": format!("{{\"module\":\"m{i}\"}}")}}]}),
        json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": output}),
        json!({"role": "assistant", "content": format!("module m{i} passes")}),
    ])
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn preflights(events: &[Event]) -> Vec<Preflight> {
    events
        .iter()
        .filter_map(|e| e.as_span())
        .filter(|s| s.name.as_deref() == Some("compact.preflight"))
        .map(|s| {
            serde_json::from_value(Value::Object(s.data.clone())).unwrap_or_else(|e| panic!("{e}"))
        })
        .collect()
}

#[test]
fn each_call_predicts_the_cache_and_each_rewrite_reports_its_break() {
    let (m, collect) = manager("gpt-4o", 8_000);
    let rt = rt();
    let system = "You are a careful agent. ".repeat(80);
    let mut context = decode(vec![json!({"role": "system", "content": system})]);
    let mut outcomes: Vec<PreflightOutcome> = Vec::new();
    for i in 0..14 {
        context.extend(turn(i));
        let o = rt
            .block_on(m.preflight("s", std::mem::take(&mut context)))
            .unwrap_or_else(|e| panic!("call {i}: {e}"));
        context = o.messages.clone();
        outcomes.push(o);
    }
    assert!(m.dispatcher().flush(Duration::from_secs(5)));
    let events = preflights(&collect.take());
    assert_eq!(events.len(), outcomes.len());
    let mut breaks = 0;
    for (k, (o, e)) in outcomes.iter().zip(&events).enumerate() {
        let c = o
            .report
            .cache
            .unwrap_or_else(|| panic!("call {k}: no cache report"));
        assert_eq!(c.rule, CacheRule::Openai);
        assert_eq!(e.cache_read_predicted, Some(c.predicted_read as u64));
        assert_eq!(e.prefix_shared_tokens, Some(c.shared_tokens as u64));
        assert_eq!(e.prefix_broken_tokens, c.broken_tokens.map(|n| n as u64));
        assert!(c.predicted_input_cost_usd.is_some(), "gpt-4o has a price");
        if k == 0 {
            assert_eq!(
                (c.shared_tokens, c.predicted_read, c.broken_tokens),
                (0, 0, None)
            );
            continue;
        }
        let prev = outcomes[k - 1].report.tokens_after;
        // The shared tokens are those of the leading messages the previous
        // request had too, as the estimator counts them.
        let shared: usize = o
            .messages
            .iter()
            .zip(&outcomes[k - 1].messages)
            .take_while(|(a, b)| a.provider_hash() == b.provider_hash())
            .map(|(a, _)| m.estimator().count_message(a))
            .sum();
        assert_eq!(c.shared_tokens, shared, "call {k}");
        assert_eq!(c.predicted_read, openai_cached(c.shared_tokens));
        match c.broken_tokens {
            // The previous request is a prefix: all of it is shared.
            Some(0) => assert_eq!(c.shared_tokens + REPLY_PRIMING, prev, "call {k}"),
            // A rewrite: only what precedes it is shared, the rest is lost,
            // and only a compaction rewrites.
            Some(lost) => {
                breaks += 1;
                assert!(o.report.triggered && !o.report.tiers.is_empty(), "call {k}");
                assert_eq!(c.shared_tokens + lost, prev, "call {k}");
            }
            None => panic!("call {k}: no break figure"),
        }
        // Priced at gpt-4o's list prices: $2.50 plain, $1.25 cached.
        let want = ((o.report.tokens_after - c.predicted_read) as f64 * 2.5
            + c.predicted_read as f64 * 1.25)
            / 1e6;
        let got = c.predicted_input_cost_usd.unwrap_or(f64::NAN);
        assert!((got - want).abs() < 1e-12, "call {k}: {got} vs {want}");
    }
    assert!(breaks > 0, "the session compacted");
    assert!(
        breaks < outcomes.len() - 1,
        "and kept its prefix between compactions"
    );
}

#[test]
fn reported_figures_reach_the_event_and_are_priced() {
    let (m, collect) = manager("claude-sonnet-4-5", 200_000);
    let rt = rt();
    let mut history = decode(vec![json!({"role": "system", "content": "You are terse."})]);
    history.extend(turn(0));
    let reported = ReportedUsage {
        input_tokens: 12_000,
        cache_read: 10_000,
        cache_write: 1_500,
        cache_write_1h: 0,
        output_tokens: Some(300),
    };
    // Session `s` of `history` on `m`, with the provider's usage figures.
    let with_usage = |m: &CompactManager, history: Vec<Message>| {
        rt.block_on(m.preflight_with(
            "s",
            PreflightRequest {
                messages: history,
                usage_details: Some(reported),
                ..PreflightRequest::default()
            },
        ))
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let o = with_usage(&m, history);
    let c = o.report.cache.unwrap_or_else(|| panic!("no cache report"));
    assert_eq!(c.rule, CacheRule::Anthropic);
    // No cache_control in the request: Anthropic caches nothing.
    assert_eq!((c.predicted_read, c.predicted_write), (0, 0));
    assert_eq!(c.reported, Some(reported));
    // The usage figures also anchor the estimate.
    assert!(o.report.anchor.is_some());
    // 500 plain x $3 + 10,000 x $0.30 + 1,500 x $3.75 + 300 x $15 per million.
    let want = (500.0 * 3.0 + 10_000.0 * 0.30 + 1_500.0 * 3.75 + 300.0 * 15.0) / 1e6;
    assert!((c.reported_cost_usd.unwrap_or(f64::NAN) - want).abs() < 1e-12);
    assert!(m.dispatcher().flush(Duration::from_secs(5)));
    let e = &preflights(&collect.take())[0];
    assert_eq!(e.input_tokens_reported, Some(12_000));
    assert_eq!(e.cache_read_reported, Some(10_000));
    assert_eq!(e.cache_write_reported, Some(1_500));
    assert_eq!(e.cost_reported_usd, c.reported_cost_usd);
    // A model without a price: predicted and reported figures, no cost.
    let (m, _) = manager("gpt-4", 8_000);
    let mut history = decode(vec![json!({"role": "system", "content": "s"})]);
    history.extend(turn(0));
    let o = with_usage(&m, history);
    let c = o.report.cache.unwrap_or_else(|| panic!("no cache report"));
    assert_eq!(
        (c.predicted_input_cost_usd, c.reported_cost_usd),
        (None, None)
    );
}
