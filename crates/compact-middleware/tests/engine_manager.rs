//! The manager's bookkeeping: one record per session, forgotten whole;
//! every way a preflight ends emits the spans it built; events say where a
//! setting came from.

mod manager_support;

use std::sync::Arc;
use std::time::Duration;

use compact_middleware::config::Config;
use compact_middleware::events::{CollectingExporter, Event, SpanStatus};
use compact_middleware::manager::{CompactError, PreflightRequest};
use compact_middleware::{CompactManager, Message};
use manager_support::collecting;
use serde_json::json;

fn turn(i: usize) -> Vec<Message> {
    vec![
        Message::user(format!(
            "turn {i}: please look at ticket OPS-{i} and the logs {}",
            "lorem ipsum ".repeat(40)
        )),
        Message::assistant(format!("Done with OPS-{i}. {}", "dolor sit ".repeat(40))),
    ]
}

fn spans(collect: &CollectingExporter) -> Vec<(String, SpanStatus)> {
    collect
        .events()
        .iter()
        .filter_map(Event::as_span)
        .map(|s| (s.name.clone().unwrap_or_default(), s.status))
        .collect()
}

fn small_window(dir: &std::path::Path) -> Config {
    let mut config = Config {
        max_context_tokens: Some(2_000),
        ..Config::default()
    };
    config.storage.path = dir.join("archive").display().to_string();
    config.storage.spool_path = dir.join("spool").display().to_string();
    config
}

#[tokio::test]
async fn end_session_forgets_the_session_and_numbering_resumes_from_the_archive() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (manager, _collect) = collecting(small_window(dir.path()));
    let mut history = vec![Message::system("You are an agent.")];
    let mut steps = Vec::new();
    for i in 0..12 {
        history.extend(turn(i));
        history.push(Message::user(format!("next {i}")));
        let out = manager
            .preflight("s-1", history.clone())
            .await
            .expect("preflight");
        if out.report.tokens_after < out.report.tokens_before {
            steps.push(i);
        }
        history = out.messages;
    }
    assert!(steps.len() >= 2, "the session compacted: {steps:?}");
    assert_eq!(manager.session_count(), 1);
    let archived = |root: &std::path::Path| {
        std::fs::read_dir(root.join("s-1"))
            .map(|rd| {
                rd.flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with("transcript-"))
                    .count()
            })
            .unwrap_or(0)
    };
    let before = archived(&dir.path().join("archive"));
    assert!(before >= 2);

    manager.end_session("s-1");
    assert_eq!(manager.session_count(), 0, "nothing of the session is kept");

    // The same id again, a fresh history: its first compaction is numbered
    // after the archived ones, never over them.
    let mut history = vec![Message::system("You are an agent.")];
    for i in 0..12 {
        history.extend(turn(i));
        let out = manager
            .preflight("s-1", history.clone())
            .await
            .expect("preflight");
        history = out.messages;
    }
    let after = archived(&dir.path().join("archive"));
    assert!(
        after > before,
        "new transcripts were added: {before} -> {after}"
    );
    let name = format!("transcript-pre-compact-{:03}.jsonl", before + 1);
    assert!(
        dir.path().join("archive/s-1").join(&name).exists(),
        "{name} continues the numbering"
    );
}

#[tokio::test]
async fn a_strict_rejection_still_emits_the_trace_an_error_and_the_preflight() {
    let (manager, collect) = collecting(Config {
        max_context_tokens: Some(100_000),
        ..Config::default()
    });
    let orphan: Message =
        serde_json::from_value(json!({"role": "tool", "tool_call_id": "call_9", "content": "42"}))
            .expect("message");
    let err = manager
        .preflight_with(
            "strict-1",
            PreflightRequest {
                messages: vec![Message::user("hi"), orphan],
                strict: true,
                ..PreflightRequest::default()
            },
        )
        .await
        .expect_err("strict input with an orphan is rejected");
    assert!(matches!(err, CompactError::InvalidInput(_)), "{err}");
    assert!(manager.dispatcher().flush(Duration::from_secs(5)));
    let events = collect.events();
    assert!(
        matches!(events.first(), Some(Event::Trace(t)) if t.trace_id == "strict-1"),
        "the trace opens the session even when its first call fails"
    );
    let names = spans(&collect);
    assert!(
        names.contains(&("compact.error".into(), SpanStatus::Error)),
        "{names:?}"
    );
    assert_eq!(
        names.last(),
        Some(&("compact.preflight".into(), SpanStatus::Error)),
        "{names:?}"
    );
    let error = events
        .iter()
        .filter_map(Event::as_span)
        .find(|s| s.name.as_deref() == Some("compact.error"))
        .expect("error span");
    assert_eq!(error.data.get("error_type"), Some(&json!("InvalidInput")));
}

#[tokio::test]
async fn an_insufficient_budget_emits_the_estimate_and_decision_before_the_error() {
    let (manager, collect) = collecting(Config {
        max_context_tokens: Some(600),
        ..Config::default()
    });
    let big = Message::system("policy ".repeat(2_000));
    let err = manager
        .preflight("tight-1", vec![big, Message::user("hello")])
        .await
        .expect_err("pinned messages exceed the window");
    assert!(
        matches!(err, CompactError::InsufficientBudget { .. }),
        "{err}"
    );
    assert!(manager.dispatcher().flush(Duration::from_secs(5)));
    let names: Vec<String> = spans(&collect).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "compact.token_estimate",
            "compact.trigger_decision",
            "compact.error",
            "compact.preflight"
        ]
    );
}

#[tokio::test]
async fn redaction_disabled_names_the_variable_that_turned_it_off() {
    let env = vec![("COMPACT_REDACTION_ENABLED".to_owned(), "false".to_owned())];
    let loaded = compact_middleware::config::load(None, &env).expect("config");
    assert!(!loaded.config.redaction.enabled);
    let collect = Arc::new(CollectingExporter::new());
    let mut config = loaded.config.clone();
    config.max_context_tokens = Some(100_000);
    let manager = CompactManager::builder(config)
        .provenance(&loaded)
        .without_config_exporters()
        .without_storage()
        .exporter(collect.clone())
        .build()
        .expect("manager");
    manager
        .preflight("redact-1", vec![Message::user("hi")])
        .await
        .expect("preflight");
    assert!(manager.dispatcher().flush(Duration::from_secs(5)));
    let events = collect.events();
    let disabled = events
        .iter()
        .filter_map(Event::as_span)
        .find(|s| s.name.as_deref() == Some("compact.redaction_disabled"))
        .expect("redaction_disabled span");
    let message = disabled.data["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("COMPACT_REDACTION_ENABLED"),
        "the event names the variable: {message}"
    );
}
