//! `summarizer.prompt: agent_prefix` against a scripted OpenAI-compatible
//! server on loopback, through the manager: the summary request starts
//! with the agent's own messages byte for byte (so a provider's prompt
//! cache serves them), carries the agent's tools with `tool_choice: none`,
//! ends with the instruction, and falls back to the fresh prompt when the
//! prefix does not fit the summarizer's window or the model calls a tool.
//! `fresh`, the default, sends today's request.
mod fake_openai;

use compact_middleware::config::{Config, SummaryPrompt};
use compact_middleware::manager::PreflightRequest;
use compact_middleware::model::{Format, Request};
use compact_middleware::summarize::Templates;
use compact_middleware::trigger::Forced;
use compact_middleware::{CompactManager, PreflightOutcome};
use fake_openai::{FakeServer, Reply, answer, ok};
use serde_json::{Value, json};

const TOOLS: &str = r#"[{"type":"function","function":{"name":"run_tests","description":"Run the test suite","parameters":{"type":"object","properties":{"filter":{"type":"string"}}}}}]"#;

/// The agent's messages as it serialized them: keys in its own order
/// (`content` before `role` in the user turns), tool calls and results.
fn agent_messages(turns: usize) -> Vec<String> {
    let mut out = vec![
        r#"{"role":"system","content":"You are a coding agent. Use the tools to run tests."}"#
            .to_owned(),
    ];
    for i in 0..turns {
        out.push(
            json!({
                "content": format!("Turn {i}: investigate NET-{i} in crates/net/src/client.rs and report what the retry logic does with HTTP 503. {}", "Context detail. ".repeat(20)),
                "role": "user",
            })
            .to_string(),
        );
        out.push(
            json!({
                "role": "assistant",
                "content": null,
                "tool_calls": [{"id": format!("call_{i}"), "type": "function",
                    "function": {"name": "run_tests", "arguments": format!("{{\"filter\":\"net::{i}\"}}")}}],
            })
            .to_string(),
        );
        out.push(
            json!({
                "role": "tool",
                "tool_call_id": format!("call_{i}"),
                "content": format!("running 12 tests\n{}test net::{i}::retries_on_503 ... FAILED", "test net::ok ... ok\n".repeat(10)),
            })
            .to_string(),
        );
        out.push(
            json!({
                "role": "assistant",
                "content": format!("Turn {i}: the backoff doubles from 10 ms; the test waits 1 s. {}", "Analysis detail. ".repeat(20)),
            })
            .to_string(),
        );
    }
    out.push(r#"{"role":"user","content":"Continue."}"#.to_owned());
    out
}

/// The agent's request, decoded as the manager receives it: chat
/// completions, or Anthropic Messages when `messages` are (then the
/// system prompt is the request's `system`).
fn agent_request(messages: &[String]) -> Request {
    let anthropic = messages.iter().any(|m| m.contains("\"tool_use\""));
    let text = if anthropic {
        format!(
            r#"{{"system":"You are a coding agent.","messages":[{}]}}"#,
            messages.join(",")
        )
    } else {
        format!(r#"{{"messages":[{}],"tools":{TOOLS}}}"#, messages.join(","))
    };
    let v: Value = serde_json::from_str(&text).expect("agent request is JSON");
    let format = if anthropic {
        Format::Anthropic
    } else {
        Format::Chat
    };
    Request::from_value(v, format).expect("agent request decodes")
}

/// An Anthropic Messages history of `turns` tool-using turns.
fn anthropic_messages(turns: usize) -> Vec<String> {
    let mut out = Vec::new();
    for i in 0..turns {
        out.push(
            json!({"role": "user", "content": format!("Turn {i}: investigate NET-{i} retries. {}", "Context detail. ".repeat(20))})
                .to_string(),
        );
        out.push(
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": format!("tu_{i}"), "name": "run_tests", "input": {"filter": format!("net::{i}")}}]})
                .to_string(),
        );
        out.push(
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("tu_{i}"), "content": format!("running 12 tests\n{}test net::{i}::retries_on_503 ... FAILED", "test net::ok ... ok\n".repeat(10))}]})
                .to_string(),
        );
        out.push(
            json!({"role": "assistant", "content": format!("Turn {i}: the backoff doubles from 10 ms. {}", "Analysis detail. ".repeat(20))})
                .to_string(),
        );
    }
    out.push(json!({"role": "user", "content": "Continue."}).to_string());
    out
}

fn config(base_url: &str, summarizer_extra: &str, events: &std::path::Path) -> Config {
    let yaml = format!(
        "model: gpt-4o\nmax_context_tokens: 8000\npolicy:\n  keep_recent_turns: 1\n  keep_tool_io_pairs: 0\ntelemetry:\n  exporter: jsonl\n  jsonl_path: {}\n  flush_interval_ms: 1\nsummarizer:\n  kind: openai\n  base_url: {base_url}\n  model: gpt-4o\n  retries: 0\n  retry_backoff_ms: 1\n  repair: false\n{summarizer_extra}",
        events.display()
    );
    Config::from_yaml_str(&yaml).expect("config")
}

struct Run {
    outcome: PreflightOutcome,
    created: Value,
}

/// One manual compaction of the agent's request; the outcome and the
/// `compact.summary_created` event.
async fn compact(server: &FakeServer, summarizer_extra: &str, messages: &[String]) -> Run {
    let dir = tempfile::tempdir().expect("tempdir");
    let events = dir.path().join("events.jsonl");
    let manager = CompactManager::builder(config(&server.base_url(), summarizer_extra, &events))
        .without_storage()
        .build()
        .expect("manager");
    let request = agent_request(messages);
    let outcome = manager
        .preflight_with(
            "s",
            PreflightRequest {
                messages: request.messages,
                tools: request.tools,
                forced: Some(Forced::Manual),
                ..PreflightRequest::default()
            },
        )
        .await
        .expect("compact");
    let created = fake_openai::summary_created(&manager, &events).await;
    Run { outcome, created }
}

/// Every request `server` got is the fresh prompt, and the run's summary
/// (the scripted goals) says it was made from it.
fn assert_only_fresh(server: &FakeServer, run: &Run) {
    let sent = server.requests();
    assert!(!sent.is_empty());
    for r in &sent {
        assert_fresh(&r.json());
    }
    assert!(summary_text(&run.outcome).contains("Goals: fix the NET retry tests."));
    assert_eq!(run.created["data"]["prompt"], "fresh");
    assert_eq!(
        run.outcome.report.summary_prompt,
        Some(SummaryPrompt::Fresh)
    );
}

/// `server` got two requests, the agent's prefix (no tool choice) and then
/// the fresh prompt, and the run's summary was made from the second.
fn assert_asked_again_fresh(server: &FakeServer, run: &Run) {
    let sent = server.requests();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].json()["tool_choice"], "none");
    assert_fresh(&sent[1].json());
    assert!(summary_text(&run.outcome).contains("Goals: fix the NET retry tests."));
    assert_eq!(run.created["data"]["prompt"], "fresh");
    // The report says which prompt wrote the summary: the fallback's.
    assert_eq!(
        run.outcome.report.summary_prompt,
        Some(SummaryPrompt::Fresh)
    );
}

fn summary_text(o: &PreflightOutcome) -> String {
    o.messages
        .iter()
        .map(|m| m.plain_text())
        .find(|t| t.starts_with("COMPACT-SUMMARY v1"))
        .expect("summary message")
}

/// A fresh request: the summarizer's system message and one user message,
/// no tools.
fn assert_fresh(body: &Value) {
    let messages = body["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 2, "{body}");
    assert_eq!(messages[0]["content"], Templates::builtin().system);
    assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
}

#[tokio::test]
async fn the_summary_request_starts_with_the_agents_messages_byte_for_byte() {
    let server = FakeServer::start(vec![Reply::Json(
        200,
        json!({
            "model": "gpt-4o",
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": "Goals: fix the NET-0..NET-3 retry tests (backoff 10 ms)."}}],
            "usage": {"prompt_tokens": 2400, "completion_tokens": 40,
                "prompt_tokens_details": {"cached_tokens": 2176}}
        }),
    )])
    .await;
    let messages = agent_messages(4);
    let run = compact(&server, "  prompt: agent_prefix\n", &messages).await;
    let sent = server.requests();
    assert_eq!(sent.len(), 1);
    let body = String::from_utf8(sent[0].body.clone()).expect("utf8");

    // Everything but the kept last turn is folded: the prefix is the
    // agent's messages up to the last folded one, as the agent wrote them.
    let folded = messages.len() - 1;
    let head = format!(
        "{{\"model\":\"gpt-4o\",\"messages\":[{},{{\"role\":\"user\",\"content\":",
        messages[..folded].join(",")
    );
    assert!(
        body.starts_with(&head),
        "the body does not start with the agent's messages:\n{body}"
    );
    let v: Value = serde_json::from_str(&body).expect("json");
    let sent_messages = v["messages"].as_array().expect("messages");
    assert_eq!(sent_messages.len(), folded + 1, "the instruction is last");
    let instruction = sent_messages[folded]["content"].as_str().expect("text");
    assert!(
        instruction.contains("do not call any tool"),
        "{instruction}"
    );
    assert!(instruction.contains("answer with the summary text only"));
    assert!(instruction.contains("--- CONVERSATION HISTORY ---"));
    // The agent's tools, unchanged, and no tool may be called.
    let tools: Value = serde_json::from_str(TOOLS).expect("tools");
    assert_eq!(v["tools"], tools);
    assert!(body.contains(&format!("\"tools\":{TOOLS},\"tool_choice\":\"none\"")));

    // The model's summary is the one committed, and the event says how it
    // was asked for and what the cache served.
    assert!(
        summary_text(&run.outcome).contains("Goals: fix the NET-0..NET-3 retry tests"),
        "{}",
        summary_text(&run.outcome)
    );
    let data = &run.created["data"];
    assert_eq!(data["prompt"], "agent_prefix");
    assert_eq!(data["cached_prompt_tokens"], 2176);
    assert_eq!(data["prompt_tokens"], 2400);
    // So does the preflight's report, on the wire as the caller reads it.
    let report = serde_json::to_value(&run.outcome.report).expect("report");
    assert_eq!(report["summary_prompt"], "agent_prefix");
    assert_eq!(report["summary_cached_prompt_tokens"], 2176);
}

#[tokio::test]
async fn a_prefix_too_large_for_the_summarizer_window_gets_the_fresh_prompt() {
    let server = FakeServer::start(vec![]).await;
    server.set_default(ok("Goals: fix the NET retry tests."));
    let messages = agent_messages(6);
    // The prefix alone is larger than the whole window.
    let run = compact(
        &server,
        "  prompt: agent_prefix\n  context_window: 1024\n",
        &messages,
    )
    .await;
    assert_only_fresh(&server, &run);
}

#[tokio::test]
async fn a_tool_call_answer_to_the_prefix_is_asked_again_with_the_fresh_prompt() {
    let call = answer(
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c9", "type": "function",
            "function": {"name": "run_tests", "arguments": "{}"}}]}),
        "tool_calls",
    );
    let server = FakeServer::start(vec![call, ok("Goals: fix the NET retry tests.")]).await;
    let run = compact(&server, "  prompt: agent_prefix\n", &agent_messages(4)).await;
    assert_asked_again_fresh(&server, &run);
    assert!(
        run.outcome.report.fallbacks.is_empty(),
        "{:?}",
        run.outcome.report.fallbacks
    );
}

#[tokio::test]
async fn an_anthropic_history_gets_the_fresh_prompt() {
    // The summarizer speaks chat completions: an Anthropic request's prefix
    // is not one it can send.
    let server = FakeServer::start(vec![]).await;
    server.set_default(ok("Goals: fix the NET retry tests."));
    let run = compact(&server, "  prompt: agent_prefix\n", &anthropic_messages(4)).await;
    assert_only_fresh(&server, &run);
}

#[tokio::test]
async fn fresh_the_default_sends_todays_request() {
    assert_eq!(
        Config::default().summarizer.prompt,
        SummaryPrompt::Fresh,
        "the default is today's behaviour"
    );
    let server = FakeServer::start(vec![]).await;
    server.set_default(ok("Goals: fix the NET retry tests."));
    let messages = agent_messages(4);
    compact(&server, "", &messages).await;
    compact(&server, "  prompt: fresh\n", &messages).await;
    let sent = server.requests();
    assert_eq!(sent.len(), 2);
    assert_eq!(
        sent[0].body, sent[1].body,
        "unset and `fresh` are one request"
    );
    let v = sent[0].json();
    assert_fresh(&v);
    // Today's fields, in today's order (`tests/openai.rs` pins the bodies).
    let keys: Vec<&str> = v
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "model",
            "messages",
            "temperature",
            "seed",
            "max_tokens",
            "n",
            "stream"
        ]
    );
    assert!(
        !String::from_utf8_lossy(&sent[0].body).contains("tool_call_id"),
        "the span is rendered as text, not sent as the agent's messages"
    );
}

#[tokio::test]
async fn a_4xx_answer_to_the_prefix_is_asked_again_with_the_fresh_prompt() {
    let server = FakeServer::start(vec![
        fake_openai::status(400),
        ok("Goals: fix the NET retry tests."),
    ])
    .await;
    let run = compact(&server, "  prompt: agent_prefix\n", &agent_messages(4)).await;
    assert_asked_again_fresh(&server, &run);
}

#[tokio::test]
async fn the_next_summary_reads_the_previous_one_in_the_prefix() {
    // Rolling: the agent keeps compact's output and appends; the second
    // compaction's prefix holds the first summary message as the provider
    // received it, and the instruction points at it.
    let server = FakeServer::start(vec![
        ok("Goals: fix NET-0..NET-3 (backoff 10 ms)."),
        ok("Goals: fix NET-0..NET-7; NET-4..NET-7 pass."),
    ])
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let manager = CompactManager::builder(config(
        &server.base_url(),
        "  prompt: agent_prefix\n",
        &dir.path().join("events.jsonl"),
    ))
    .without_storage()
    .build()
    .expect("manager");
    let call = |messages: Vec<compact_middleware::Message>| {
        let tools = agent_request(&agent_messages(0)).tools;
        manager.preflight_with(
            "s",
            PreflightRequest {
                messages,
                tools,
                forced: Some(Forced::Manual),
                ..PreflightRequest::default()
            },
        )
    };
    let first = call(agent_request(&agent_messages(4)).messages)
        .await
        .expect("first");
    let mut history = first.messages.clone();
    let more: Vec<String> = agent_messages(8)[17..].to_vec();
    history.extend(agent_request(&more).messages);
    let second = call(history.clone()).await.expect("second");
    let sent = server.requests();
    assert_eq!(sent.len(), 2);
    let body = String::from_utf8(sent[1].body.clone()).expect("utf8");
    let folded = history.len() - 1;
    let as_sent: Vec<String> = history[..folded]
        .iter()
        .map(|m| m.to_provider_value().to_string())
        .collect();
    assert!(
        as_sent
            .iter()
            .any(|m| m.contains("COMPACT-SUMMARY v1") && m.contains("NET-0..NET-3")),
        "the first summary is in the prefix"
    );
    let head = format!(
        "{{\"model\":\"gpt-4o\",\"messages\":[{},{{\"role\":\"user\",\"content\":",
        as_sent.join(",")
    );
    assert!(body.starts_with(&head), "{body}");
    let v: Value = serde_json::from_str(&body).expect("json");
    let instruction = v["messages"][folded]["content"].as_str().expect("text");
    assert!(
        instruction.contains("(the COMPACT-SUMMARY message in the conversation above)"),
        "{instruction}"
    );
    let summary = second
        .messages
        .iter()
        .map(|m| m.plain_text())
        .find(|t| t.starts_with("COMPACT-SUMMARY v2"))
        .expect("second summary");
    assert!(summary.contains("NET-4..NET-7 pass"), "{summary}");
}
