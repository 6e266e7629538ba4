//! `compact recall` (docs/design.md §11): a session compacted by
//! `compact preflight --state FILE` with `recall.enabled` is searched and
//! read back by another process; exit 4 for an id the session lacks, 2 for
//! bad input.

mod recall_support;
mod support;

use std::process::Output;

use recall_support::{
    agent_history, assert_exit, assert_finds_the_flaky_test, compact_s1_in, first_recall_id,
    preflight_s1, recall_config, run,
};
use serde_json::{Value, json};

fn json_out(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

#[test]
fn recall_reads_what_preflight_cleared_from_another_process() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = recall_config(dir.path(), "", "");
    let config = config.as_str();
    let (state, o) = compact_s1_in(dir.path(), config);
    let state = state.as_str();
    let out = json_out(&o);
    let rid = first_recall_id(&out);
    assert!(
        dir.path().join("recall.sqlite3").exists(),
        "the index sits beside the state file"
    );

    let o = run(
        dir.path(),
        &[
            "recall",
            "s1",
            "which test was flaky in module 0?",
            "--state",
            state,
        ],
        "",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let hits = json_out(&o)["hits"].clone();
    assert_finds_the_flaky_test(&hits);

    let o = run(
        dir.path(),
        &["recall", "s1", "--id", &rid, "--state", state],
        "",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let entry = json_out(&o)["entry"].clone();
    assert!(
        entry["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("module ")),
        "{entry}"
    );
    assert_eq!(entry["origin"]["tool"], "read_file");

    // Another session does not have the id: exit 4, nothing on stdout.
    let o = run(
        dir.path(),
        &["recall", "s2", "--id", &rid, "--state", state],
        "",
    );
    assert_exit(&o, 4);
    assert!(o.stdout.is_empty());
    // Bad input: an invalid session id, no index.
    let o = run(dir.path(), &["recall", "../x", "q", "--state", state], "");
    assert_eq!(o.status.code(), Some(2));
    let o = run(
        dir.path(),
        &["recall", "s1", "q", "--index", "missing.sqlite3"],
        "",
    );
    assert_eq!(o.status.code(), Some(2));
    let o = run(dir.path(), &["recall", "s1", "q"], "");
    assert_eq!(
        o.status.code(),
        Some(2),
        "the index of a memory store is in that process"
    );
    // A configuration made for compacting (an LLM summarizer without its
    // key, the sliding window and memory injection) reads the index all the
    // same, and opens no memory store.
    let other = dir.path().join("compacting.yaml");
    std::fs::write(
        &other,
        "recall:\n  enabled: true\nsummarizer:\n  kind: openai\n  api_key_env: COMPACT_TEST_ABSENT_KEY\npolicy:\n  mode: sliding_window\nmemory:\n  injection: true\n  store_path: memory.sqlite3\n",
    )
    .expect("config");
    let o = run(
        dir.path(),
        &[
            "recall",
            "s1",
            "--id",
            &rid,
            "--config",
            other.to_str().expect("utf-8"),
            "--state",
            state,
        ],
        "",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(json_out(&o)["entry"]["id"], rid.as_str());
    assert!(!dir.path().join("memory.sqlite3").exists());
}

#[test]
fn a_cli_recall_is_a_compact_recall_event_for_the_configured_exporter() {
    let dir = tempfile::tempdir().expect("tempdir");
    let events = dir.path().join("events.jsonl");
    let config = recall_config(
        dir.path(),
        "",
        &format!(
            "telemetry:\n  exporter: jsonl\n  jsonl_path: {}\n",
            events.display()
        ),
    );
    let config = config.as_str();
    let (state, _) = compact_s1_in(dir.path(), config);
    let state = state.as_str();
    let o = run(
        dir.path(),
        &[
            "recall",
            "s1",
            "which test was flaky in module 0?",
            "--limit",
            "2",
            "--config",
            config,
            "--state",
            state,
        ],
        "",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ids: Vec<Value> = json_out(&o)["hits"]
        .as_array()
        .expect("hits")
        .iter()
        .map(|h| h["id"].clone())
        .collect();
    assert!(!ids.is_empty());
    let written = std::fs::read_to_string(&events).expect("events file");
    let recalls: Vec<Value> = written
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["name"] == "compact.recall")
        .collect();
    assert_eq!(recalls.len(), 1, "{written}");
    let d = &recalls[0]["data"];
    assert_eq!(recalls[0]["trace_id"], "s1");
    assert_eq!(d["mode"], "query");
    assert_eq!(d["query"], "which test was flaky in module 0?");
    assert_eq!(d["limit"], 2);
    assert_eq!(d["hits"], ids.len());
    assert_eq!(d["ids"], Value::Array(ids));
    assert!(
        !recalls[0].to_string().contains("log line"),
        "no recalled text"
    );
}

#[test]
fn preflight_with_recall_advertise_sends_the_tool_with_the_request() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = recall_config(dir.path(), "  advertise: true\n", "");
    let config = config.as_str();
    let tool = json!({"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}});
    let messages = agent_history();
    let o = preflight_s1(
        dir.path(),
        config,
        dir.path().join("state.sqlite3").to_str().expect("utf-8"),
        &json!({ "model": "gpt-4o", "messages": messages, "tools": [tool] }),
        &["--force"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = json_out(&o);
    assert_eq!(out["model"], "gpt-4o");
    let tools = out["tools"].as_array().expect("tools");
    assert_eq!(tools.len(), 2, "{out}");
    assert_eq!(tools[0], tool);
    assert_eq!(tools[1]["function"]["name"], "compact_recall");
    // The cleared outputs' ids are what the tool takes.
    assert!(out.to_string().contains("— recall r"), "{out}");
}
