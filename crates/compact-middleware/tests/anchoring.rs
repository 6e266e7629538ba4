//! Usage anchoring through the manager: the provider's reported `usage.input_tokens`
//! replaces the estimate of the last request, the trigger decides on the anchored
//! figure, and the report and the `compact.token_estimate` event say the basis and
//! the observed error. Models without a public tokenizer count with the ratio
//! estimator.

use std::sync::Arc;

use compact_middleware::config::Config;
use compact_middleware::estimate::{Basis, relative_error};
use compact_middleware::events::{CollectingExporter, Event};
use compact_middleware::manager::PreflightRequest;
use compact_middleware::{CompactManager, Message};
use serde_json::Value;

fn manager(config: Config) -> (CompactManager, Arc<CollectingExporter>) {
    let collect = Arc::new(CollectingExporter::new());
    let manager = CompactManager::builder(config)
        .without_config_exporters()
        .without_storage()
        .exporter(collect.clone())
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    (manager, collect)
}

fn history(turns: usize) -> Vec<Message> {
    let mut out = vec![Message::system("You are an agent.")];
    for i in 0..turns {
        out.push(Message::user(format!(
            "question {i}: {}",
            "why ".repeat(30)
        )));
        out.push(Message::assistant(format!(
            "answer {i}: {}",
            "because ".repeat(30)
        )));
    }
    out.push(Message::user("and now?"));
    out
}

/// The `data` of every `compact.token_estimate` span so far.
fn token_estimates(collect: &CollectingExporter) -> Vec<serde_json::Map<String, Value>> {
    collect
        .events()
        .iter()
        .filter_map(Event::as_span)
        .filter(|s| s.name.as_deref() == Some("compact.token_estimate"))
        .map(|s| s.data.clone())
        .collect()
}

async fn preflight(
    m: &CompactManager,
    messages: Vec<Message>,
    usage: Option<usize>,
) -> compact_middleware::PreflightOutcome {
    m.preflight_with(
        "s-anchor",
        PreflightRequest {
            messages,
            usage,
            ..PreflightRequest::default()
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test]
async fn the_reported_usage_replaces_the_estimate_of_the_last_request() {
    let (m, collect) = manager(Config::default());
    let first = history(2);
    let out = preflight(&m, first.clone(), None).await;
    assert_eq!(out.report.basis, Basis::Estimate);
    assert_eq!(out.report.anchor, None);
    assert_eq!(out.report.estimate_error, None);
    let pure_first = out.report.tokens_before;

    // The agent sends our output, the reply and a new question; the provider said the
    // first request cost 100 tokens more than we estimated.
    let reply = Message::assistant("It depends.");
    let question = Message::user("On what?");
    let mut second = out.messages.clone();
    second.extend([reply.clone(), question.clone()]);
    let usage = pure_first + 100;
    let out2 = preflight(&m, second.clone(), Some(usage)).await;
    let appended = m.estimator().count_message(&reply) + m.estimator().count_message(&question);
    let r = &out2.report;
    assert_eq!(r.basis, Basis::Usage);
    let anchor = r.anchor.expect("anchored");
    assert_eq!(
        anchor.covered,
        first.len(),
        "our previous output is what was sent"
    );
    assert_eq!(anchor.estimated, pure_first);
    assert_eq!(anchor.t_est, usage + appended);
    assert_eq!(r.tokens_before, usage + appended);
    assert_eq!(anchor.pure_t_est, pure_first + appended);
    let error = relative_error(pure_first, usage);
    assert_eq!(anchor.error, error);
    assert!(error.is_some_and(|e| e < 0.0), "the estimate was under");
    assert_eq!(r.estimate_error, error);

    // A call without the usage: the pure estimate again, the last observed error kept.
    let mut third = out2.messages.clone();
    third.extend([Message::assistant("On the load."), Message::user("Thanks.")]);
    let out3 = preflight(&m, third, None).await;
    assert_eq!(out3.report.basis, Basis::Estimate);
    assert_eq!(out3.report.estimate_error, error);

    assert!(m.dispatcher().flush(std::time::Duration::from_secs(5)));
    let events = token_estimates(&collect);
    let bases: Vec<&str> = events
        .iter()
        .map(|d| d["basis"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(bases, ["estimate", "usage", "estimate"]);
    assert_eq!(events[1]["t_est"], Value::from(usage + appended));
    assert_eq!(events[0]["estimate_error"], Value::Null);
    assert_eq!(events[2]["estimate_error"], serde_json::json!(error));
}

#[tokio::test]
async fn the_trigger_decides_on_the_anchored_figure_and_compaction_aims_below_it() {
    let config = Config {
        max_context_tokens: Some(4_000),
        ..Config::default()
    };
    let (m, _collect) = manager(config.clone());
    let messages = history(6);
    let pure = m.estimate(&messages, &[]).t_est;
    assert!(pure < 2_000, "well under the trigger unanchored: {pure}");
    let quiet = preflight(&m, messages.clone(), None).await;
    assert!(!quiet.report.triggered);

    // A fresh session where the provider counted far more than we do (as a model whose
    // tokenizer splits finer would): the anchored figure triggers.
    let (m, _collect) = manager(config);
    let out = m
        .preflight_with(
            "s-fresh",
            PreflightRequest {
                messages: messages.clone(),
                usage: Some(3_500),
                ..PreflightRequest::default()
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let r = &out.report;
    assert_eq!(r.basis, Basis::Usage);
    let anchor = r.anchor.expect("anchored");
    // Nothing recognised: the usage covers what came before the last reply.
    assert_eq!(anchor.covered, messages.len() - 2);
    assert!(r.triggered, "{}", r.reason);
    assert!(r.tokens_before > 3_500);
    // The pipeline aimed at the target in estimated tokens scaled by what the provider
    // said one of them stands for; tokens_after is scaled back.
    let sent = m.estimate(&out.messages, &[]).t_est;
    let scale = anchor.t_est as f64 / anchor.pure_t_est as f64;
    assert!(scale > 2.0, "{scale}");
    assert_eq!(r.tokens_after, (sent as f64 * scale).round() as usize);
    assert!(r.tokens_after < r.tokens_before);
    assert_eq!(r.target_reached, r.tokens_after <= r.target);
}

#[test]
fn without_a_reply_there_is_nothing_to_anchor() {
    let (m, _collect) = manager(Config::default());
    let messages = vec![Message::system("s"), Message::user("first question")];
    let est = m.estimate_with_usage(&messages, &[], 500);
    assert_eq!(est.basis, Basis::Estimate);
    assert_eq!(est, m.estimate(&messages, &[]));
}

#[test]
fn claude_and_gemini_count_with_the_ratio_estimator() {
    let text = "The deployment failed because the migration locked the orders table. ".repeat(20);
    let messages = vec![Message::user(text)];
    let count = |model: &str| {
        let config = Config {
            model: model.into(),
            ..Config::default()
        };
        let (m, _) = manager(config);
        (
            m.limits().chars_per_token.is_some(),
            m.estimate(&messages, &[]).t_est,
        )
    };
    let (gpt_ratio, gpt) = count("gpt-4o");
    let (claude_ratio, claude) = count("claude-sonnet-4-5");
    let (gemini_ratio, gemini) = count("gemini-2.5-pro");
    assert!(!gpt_ratio && claude_ratio && gemini_ratio);
    // Fewer characters per token than o200k: more tokens for the same text.
    assert!(claude > gemini && gemini > gpt, "{claude} {gemini} {gpt}");
}

#[test]
fn a_configured_model_can_ask_for_the_ratio_estimator() {
    let config = Config::from_yaml_str(
        "model: my-open-model\nmodels:\n  my-open-model:\n    context_window: 32000\n    estimator: ratio\n    chars_per_token: {latin: 3.0, cjk: 1.0, code: 2.0}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (m, _) = manager(config);
    let cpt = m.limits().chars_per_token.expect("ratio");
    assert_eq!(cpt.latin, 3.0);
    assert_eq!(m.limits().max_tokens, 32_000);
    let est = m.estimate(&[Message::user("a".repeat(300))], &[]);
    // 300 Latin characters at 3 per token, plus the framing of one message and the reply.
    assert!(est.t_est >= 100 && est.t_est < 110, "{}", est.t_est);

    let bad = Config::from_yaml_str(
        "model: m\nmodels:\n  m:\n    context_window: 32000\n    encoding: o200k\n    chars_per_token: {latin: 3.0, cjk: 1.0, code: 2.0}\n",
    );
    let err = bad
        .expect_err("chars_per_token without estimator: ratio")
        .to_string();
    assert!(err.contains("models.m.chars_per_token"), "{err}");
}
