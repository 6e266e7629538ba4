//! The spans the manager writes read back into their typed payloads
//! (`events::payload`) and serialize again byte for byte, with the status
//! the payload gives: the structs describe the wire as the manager writes it.

mod manager_support;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use compact_middleware::config::Config;
use compact_middleware::events::payload::{
    Archival, Failure, Payload, Preflight, PrunedMessages, RedactionDisabled, SummaryCreated,
    TokenEstimate, TriggerDecision,
};
use compact_middleware::events::{CollectingExporter, Event, SpanEvent};
use compact_middleware::model::{Format, Message, Request};
use compact_middleware::{CompactError, CompactManager};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

struct Harness {
    _dir: tempfile::TempDir,
    root: PathBuf,
    collect: Arc<CollectingExporter>,
    manager: CompactManager,
}

fn harness(max_tokens: usize, tweak: impl FnOnce(&mut Config)) -> Harness {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let root = dir.path().join("archive");
    let mut config = Config {
        max_context_tokens: Some(max_tokens),
        ..Config::default()
    };
    config.storage.path = root.display().to_string();
    config.storage.spool_path = dir.path().join("spool").display().to_string();
    tweak(&mut config);
    let (manager, collect) = manager_support::collecting(config);
    Harness {
        _dir: dir,
        root,
        collect,
        manager,
    }
}

fn history(turns: usize) -> Vec<Message> {
    let mut v = vec![json!({"role": "system", "content": "You are a careful agent."})];
    for i in 0..turns {
        v.push(json!({"role": "user", "content": format!("turn {i}: refactor module m{i} and keep tests green")}));
        v.push(json!({"role": "assistant", "content": format!("module m{i} done: renamed {} functions", i * 3)}));
    }
    Request::from_value(Value::Array(v), Format::Chat)
        .unwrap_or_else(|e| panic!("{e}"))
        .messages
}

fn rt() -> tokio::runtime::Runtime {
    manager_support::two_worker_runtime()
}

fn reads_back_as<P: Payload + DeserializeOwned>(span: &SpanEvent) {
    let typed: P = serde_json::from_value(Value::Object(span.data.clone()))
        .unwrap_or_else(|e| panic!("{} does not read as its payload: {e}", P::NAME));
    let rewritten =
        compact_middleware::events::SpanBuilder::for_payload::<P>("s").finish_payload(&typed);
    let rewritten = rewritten.as_span().expect("a span");
    assert_eq!(
        serde_json::to_string(&rewritten.data).unwrap_or_default(),
        serde_json::to_string(&span.data).unwrap_or_default(),
        "{}",
        P::NAME
    );
    assert_eq!(rewritten.status, span.status, "{} status", P::NAME);
}

/// Checks every compact span of `events`; returns the `data` key sets seen
/// per name, so a test can say which variants it covered.
fn check(events: &[Event]) -> BTreeSet<(String, Vec<String>)> {
    let mut seen = BTreeSet::new();
    for span in events.iter().filter_map(Event::as_span) {
        let name = span.name.clone().unwrap_or_default();
        match name.as_str() {
            Preflight::NAME => reads_back_as::<Preflight>(span),
            TokenEstimate::NAME => reads_back_as::<TokenEstimate>(span),
            TriggerDecision::NAME => reads_back_as::<TriggerDecision>(span),
            SummaryCreated::NAME => reads_back_as::<SummaryCreated>(span),
            PrunedMessages::NAME => reads_back_as::<PrunedMessages>(span),
            Archival::NAME => reads_back_as::<Archival>(span),
            Failure::NAME => reads_back_as::<Failure>(span),
            RedactionDisabled::NAME => reads_back_as::<RedactionDisabled>(span),
            other => panic!("unexpected span {other}"),
        }
        seen.insert((name, span.data.keys().cloned().collect()));
    }
    seen
}

fn names(seen: &BTreeSet<(String, Vec<String>)>) -> BTreeSet<&str> {
    seen.iter().map(|(n, _)| n.as_str()).collect()
}

#[test]
fn a_compaction_with_redaction_off_reads_back_as_payloads() {
    let h = harness(100_000, |c| c.redaction.enabled = false);
    let rt = rt();
    rt.block_on(h.manager.manual_compact("typed", history(10), "checkpoint"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(h.manager.dispatcher().flush(Duration::from_secs(5)));
    let seen = check(&h.collect.take());
    assert_eq!(
        names(&seen),
        BTreeSet::from([
            "compact.archival",
            "compact.preflight",
            "compact.pruned_messages",
            "compact.redaction_disabled",
            "compact.summary_created",
            "compact.token_estimate",
            "compact.trigger_decision",
        ])
    );
}

#[test]
fn archive_failures_and_spool_deliveries_read_back_as_payloads() {
    let h = harness(100_000, |_| {});
    // A file where the archive root should be: every write fails and spools.
    std::fs::write(&h.root, b"not a directory").unwrap_or_else(|e| panic!("{e}"));
    let rt = rt();
    rt.block_on(h.manager.manual_compact("spooled", history(10), "x"))
        .unwrap_or_else(|e| panic!("{e}"));
    // The backend comes back: the next preflight delivers the spool.
    std::fs::remove_file(&h.root).unwrap_or_else(|e| panic!("{e}"));
    rt.block_on(h.manager.preflight("spooled", history(11)))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(h.manager.dispatcher().flush(Duration::from_secs(5)));
    let events = h.collect.take();
    let seen = check(&events);
    assert!(
        seen.iter()
            .any(|(n, keys)| n == Failure::NAME && keys.iter().any(|k| k == "spool_path"))
    );
    let archival: Vec<&SpanEvent> = events
        .iter()
        .filter_map(Event::as_span)
        .filter(|s| s.name.as_deref() == Some(Archival::NAME))
        .collect();
    assert!(archival.iter().any(|s| s.data["spooled"] != json!([])));
    assert!(
        archival
            .iter()
            .any(|s| s.data["step"].is_null() && s.data["delivered_from_spool"] != json!([])),
        "{archival:?}"
    );
}

#[test]
fn an_insufficient_budget_reads_back_as_payloads() {
    let h = harness(3_000, |_| {});
    let mut input = history(1);
    input[0] = Request::from_value(
        json!([{"role": "system", "content": "policy clause: never skip the tests. ".repeat(400)}]),
        Format::Chat,
    )
    .unwrap_or_else(|e| panic!("{e}"))
    .messages
    .remove(0);
    let rt = rt();
    let err = rt
        .block_on(h.manager.preflight("tight", input))
        .expect_err("the pinned system prompt is over budget");
    assert!(
        matches!(err, CompactError::InsufficientBudget { .. }),
        "{err:?}"
    );
    assert!(h.manager.dispatcher().flush(Duration::from_secs(5)));
    let seen = check(&h.collect.take());
    assert!(
        seen.iter()
            .any(|(n, keys)| n == Preflight::NAME && keys.iter().any(|k| k == "error"))
    );
    assert!(
        seen.iter()
            .any(|(n, keys)| n == Failure::NAME && keys.iter().any(|k| k == "pinned_tokens"))
    );
}
