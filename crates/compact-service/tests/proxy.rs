//! `compact proxy` against a scripted provider on loopback
//! (`support/upstream.rs`), driven by a real HTTP client: bodies and
//! streams pass byte for byte, requests are compacted once the window
//! fills and stay provider-valid (no orphan, thinking blocks and
//! compaction items byte-identical), a context-length refusal is retried
//! once compacted, and every failure of ours answers in the provider's
//! error shape. Each call is one `compact.model_call` span.

#[path = "../../compact-middleware/tests/cache_markers/mod.rs"]
mod cache_markers;
mod support;

use std::time::Duration;

use cache_markers::body_markers as breakpoints;
use compact_middleware::model::Format;
use serde_json::{Value, json};
use support::harness::{provider_valid, proxy};
use support::upstream::Upstream;

const KEY: &str = "sk-test-SECRET-0123456789abcdef";

async fn post(url: &str, body: &Value, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut r = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json");
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    r.body(serde_json::to_vec(body).unwrap())
        .send()
        .await
        .expect("the proxy answers")
}

fn big(n: usize) -> String {
    (0..n)
        .map(|i| format!("line {i}: value={} status=ok\n", i * 7))
        .collect()
}

#[tokio::test]
async fn a_call_nothing_triggers_passes_byte_for_byte_with_its_key() {
    let up = Upstream::start().await;
    let px = proxy(&up.url, "").await;
    let body = json!({"model": "gpt-4o", "prompt_cache_key": "pck-42",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"}],
        "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]});
    let sent = serde_json::to_vec(&body).unwrap();
    let r = post(
        &format!("{}/v1/chat/completions", px.url),
        &body,
        &[
            ("authorization", &format!("Bearer {KEY}")),
            ("openai-organization", "org-1"),
        ],
    )
    .await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-compact-session"], "pck-42");
    assert_eq!(r.headers()["x-compact-compaction"], "none");
    let got = r.bytes().await.unwrap();
    let log = up.log();
    assert_eq!(log.len(), 1);
    assert_eq!(
        &log[0].body[..],
        &sent[..],
        "the body went upstream as it came"
    );
    assert_eq!(log[0].headers["authorization"], format!("Bearer {KEY}"));
    assert_eq!(log[0].headers["openai-organization"], "org-1");
    assert!(log[0].headers.get("x-compact-session").is_none());
    assert_eq!(got, log[0].answer, "the answer came back as it was sent");

    let calls = px.model_calls();
    assert_eq!(calls.len(), 1);
    let d = &calls[0]["data"];
    assert_eq!(calls[0]["trace_id"], "pck-42");
    assert_eq!(calls[0]["kind"], "llm");
    assert_eq!(
        (
            d["api"].as_str(),
            d["status"].as_u64(),
            d["compaction"].as_str()
        ),
        (Some("chat_completions"), Some(200), Some("none"))
    );
    assert_eq!(d["session_source"], "prompt_cache_key");
    assert_eq!(d["input_tokens"].as_u64(), Some((sent.len() / 4) as u64));
    assert_eq!(d["cached_tokens"].as_u64(), Some((sent.len() / 8) as u64));
    assert_eq!(d["output_tokens"], 9);
    assert!(d["tokens_before"].as_u64().is_some_and(|n| n > 10));
    assert!(d["ttft_ms"].is_null(), "not a stream");
    // The caller's key is nowhere in what was exported.
    let exported = serde_json::to_string(&px.events.events()).unwrap();
    assert!(!exported.contains("SECRET"), "{exported}");
}

#[tokio::test]
async fn streams_of_every_api_arrive_intact_with_usage_and_first_token() {
    let up = Upstream::start().await;
    up.script(|s| s.event_gap = Duration::from_millis(5));
    let px = proxy(&up.url, "").await;
    let cases = [
        (
            "/v1/chat/completions",
            json!({"model": "gpt-4o", "stream": true, "stream_options": {"include_usage": true},
            "messages": [{"role": "user", "content": "hi"}]}),
        ),
        (
            "/v1/responses",
            json!({"model": "gpt-4o", "stream": true, "instructions": "Be brief.",
            "input": [{"role": "user", "content": "hi"}]}),
        ),
        (
            "/v1/messages",
            json!({"model": "claude-sonnet-4-5", "stream": true, "max_tokens": 100, "system": "Be brief.",
            "messages": [{"role": "user", "content": "hi"}]}),
        ),
    ];
    for (i, (path, body)) in cases.iter().enumerate() {
        let r = post(
            &format!("{}{path}", px.url),
            body,
            &[
                ("x-api-key", KEY),
                ("anthropic-beta", "interleaved-thinking-2025-05-14"),
            ],
        )
        .await;
        assert_eq!(r.status(), 200, "{path}");
        assert!(
            r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream")
        );
        let got = r.bytes().await.unwrap();
        let logged = &up.log()[i];
        assert_eq!(
            got, logged.answer,
            "{path}: the stream arrived byte for byte"
        );
        assert_eq!(
            logged.headers["anthropic-beta"],
            "interleaved-thinking-2025-05-14"
        );
        assert_eq!(logged.headers["x-api-key"], KEY);
    }
    let calls = px.model_calls();
    assert_eq!(calls.len(), 3);
    for c in &calls {
        let d = &c["data"];
        assert_eq!(d["stream"], true);
        assert!(d["ttft_ms"].as_u64().is_some(), "{d}");
        assert!(d["ttft_ms"].as_u64() <= d["latency_ms"].as_u64(), "{d}");
        assert!(d["input_tokens"].as_u64().is_some_and(|n| n > 0), "{d}");
        assert_eq!(d["output_tokens"], 9, "{d}");
    }
    // Anthropic: input is input + cache creation + cache read.
    let anthropic = &up.log()[2];
    let n = (anthropic.body.len() / 4) as u64;
    assert_eq!(
        calls[2]["data"]["input_tokens"].as_u64(),
        Some(n / 4 + n / 4 + n / 2)
    );
    assert_eq!(calls[2]["data"]["cached_tokens"].as_u64(), Some(n / 2));
}

/// An OpenAI Chat Completions tool loop, as an agent runs it: the whole
/// history resent every call. Returns the number of calls.
async fn chat_session(url: &str, session: &str, turns: usize, output: usize) -> usize {
    let mut messages = vec![json!({"role": "system", "content": "You are a careful agent."})];
    let mut calls = 0;
    for turn in 0..turns {
        messages.push(json!({"role": "user", "content": format!("Task {turn}: inspect the data and report.")}));
        loop {
            let body = json!({"model": "gpt-4o", "messages": messages,
                "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]});
            let r = post(
                &format!("{url}/v1/chat/completions"),
                &body,
                &[
                    ("x-compact-session", session),
                    ("authorization", "Bearer k"),
                ],
            )
            .await;
            assert_eq!(r.status(), 200);
            calls += 1;
            let answer: Value = r.json().await.unwrap();
            let message = answer["choices"][0]["message"].clone();
            messages.push(message.clone());
            let Some(tool_calls) = message["tool_calls"].as_array() else {
                break;
            };
            for call in tool_calls {
                messages.push(
                    json!({"role": "tool", "tool_call_id": call["id"], "content": big(output)}),
                );
            }
        }
    }
    calls
}

#[tokio::test]
async fn requests_are_compacted_once_the_window_fills_and_stay_valid() {
    let up = Upstream::start().await;
    let px = proxy(
        &up.url,
        "max_context_tokens: 4000\npolicy: {keep_recent_turns: 1, keep_tool_io_pairs: 1}",
    )
    .await;
    let calls = chat_session(&px.url, "agent-1", 4, 60).await;
    let upstream = up.model_calls();
    assert_eq!(upstream.len(), calls);
    for l in &upstream {
        provider_valid(&l.json(), Format::Chat);
    }
    let spans = px.model_calls();
    let applied = spans
        .iter()
        .filter(|s| s["data"]["compaction"] == "applied")
        .count();
    assert!(
        applied >= 1,
        "no call was compacted: {:?}",
        spans
            .iter()
            .map(|s| &s["data"]["compaction"])
            .collect::<Vec<_>>()
    );
    let compacted = upstream.iter().filter(|l| {
        let t = String::from_utf8_lossy(&l.body);
        t.contains("COMPACT-SUMMARY") || t.contains("removed: tool output")
    });
    assert!(
        compacted.count() >= 1,
        "the upstream never saw a compacted request"
    );
    // Every request stayed within the window once compaction ran.
    let last = &spans.last().unwrap()["data"];
    assert!(last["tokens_after"].as_u64().unwrap() <= 4000, "{last}");
    assert!(
        spans
            .iter()
            .all(|s| s["trace_id"] == "agent-1" && s["data"]["session_source"] == "header")
    );
    // The calls' preflights are in the same trace.
    let preflights = px.spans("compact.preflight");
    assert!(
        preflights
            .iter()
            .any(|s| s["trace_id"] == "agent-1" && s["data"]["triggered"] == true)
    );
    // Each response's usage went whole to the next preflight: reported and
    // priced beside the prediction (Report::cache). The upstream reports
    // a quarter of the body's bytes, half of them cached.
    let first_input = (upstream[0].body.len() / 4) as u64;
    let second = &preflights[1]["data"];
    assert_eq!(
        second["input_tokens_reported"].as_u64(),
        Some(first_input),
        "{second}"
    );
    assert_eq!(
        second["cache_read_reported"].as_u64(),
        Some(first_input / 2),
        "{second}"
    );
}

#[tokio::test]
async fn anthropic_sessions_keep_thinking_blocks_and_cache_control_byte_identical() {
    let up = Upstream::start().await;
    let px = proxy(
        &up.url,
        "max_context_tokens: 5000\npolicy: {keep_recent_turns: 1, keep_tool_io_pairs: 1}",
    )
    .await;
    let mut messages: Vec<Value> = Vec::new();
    let system = json!([{"type": "text", "text": "You are a careful agent.", "cache_control": {"type": "ephemeral"}}]);
    let mut thinking_sent = Vec::new();
    for turn in 0..4 {
        messages.push(json!({"role": "user", "content": [{"type": "text", "text": format!("Task {turn}: check the logs."), "cache_control": {"type": "ephemeral"}}]}));
        loop {
            let body = json!({"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": system,
                "thinking": {"type": "enabled", "budget_tokens": 1024},
                "tools": [{"name": "lookup", "input_schema": {"type": "object"}}], "messages": messages});
            let r = post(
                &format!("{}/v1/messages", px.url),
                &body,
                &[
                    ("x-api-key", KEY),
                    ("anthropic-version", "2023-06-01"),
                    ("anthropic-beta", "context-management-2025-06-27"),
                ],
            )
            .await;
            assert_eq!(r.status(), 200);
            let answer: Value = r.json().await.unwrap();
            let content = answer["content"].clone();
            for b in content.as_array().unwrap() {
                if b["type"] == "thinking" {
                    thinking_sent.push(serde_json::to_string(b).unwrap());
                }
            }
            messages.push(json!({"role": "assistant", "content": content}));
            let uses: Vec<&Value> = content
                .as_array()
                .unwrap()
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .collect();
            if uses.is_empty() {
                break;
            }
            let results: Vec<Value> = uses
                .iter()
                .map(|u| json!({"type": "tool_result", "tool_use_id": u["id"], "content": big(50)}))
                .collect();
            messages.push(json!({"role": "user", "content": results}));
        }
    }
    let upstream = up.model_calls();
    let mut compacted = 0;
    for l in &upstream {
        let body = l.json();
        provider_valid(&body, Format::Anthropic);
        assert_eq!(
            body["system"], system,
            "the system prompt and its cache_control stay"
        );
        assert_eq!(l.headers["anthropic-beta"], "context-management-2025-06-27");
        for m in body["messages"].as_array().unwrap() {
            for b in m["content"].as_array().into_iter().flatten() {
                if b["type"] == "thinking" {
                    let text = serde_json::to_string(b).unwrap();
                    assert!(
                        thinking_sent.contains(&text),
                        "a thinking block changed: {text}"
                    );
                }
            }
        }
        if String::from_utf8_lossy(&l.body).contains("COMPACT-SUMMARY")
            || String::from_utf8_lossy(&l.body).contains("removed: tool output")
        {
            compacted += 1;
        }
    }
    assert!(compacted >= 1, "no request was compacted");
    assert!(
        px.model_calls()
            .iter()
            .any(|s| s["data"]["compaction"] == "applied")
    );
}

#[tokio::test]
async fn responses_compaction_items_and_previous_response_ids_pass_untouched() {
    let up = Upstream::start().await;
    let px = proxy(
        &up.url,
        "max_context_tokens: 4000\npolicy: {keep_recent_turns: 1, keep_tool_io_pairs: 1}",
    )
    .await;
    let compaction = json!({"type": "compaction", "id": "cmp_1", "encrypted_content": format!("gAAAA{}", "Zm9v".repeat(30))});
    let mut input = vec![
        json!({"role": "user", "content": "Start the audit."}),
        compaction.clone(),
    ];
    // The call that brings a fresh provider compaction is not compacted by
    // compact (docs/integrations.md); the next ones are.
    let first =
        json!({"model": "gpt-4o", "instructions": "Be brief.", "input": input, "store": false});
    let r = post(
        &format!("{}/v1/responses", px.url),
        &first,
        &[
            ("authorization", "Bearer k"),
            ("x-compact-session", "resp-1"),
        ],
    )
    .await;
    assert_eq!(r.status(), 200);
    for i in 0..12 {
        input.push(json!({"type": "function_call", "call_id": format!("c{i}"), "name": "lookup", "arguments": "{}"}));
        input.push(
            json!({"type": "function_call_output", "call_id": format!("c{i}"), "output": big(40)}),
        );
    }
    input.push(json!({"role": "user", "content": "Summarise what you found."}));
    let body =
        json!({"model": "gpt-4o", "instructions": "Be brief.", "input": input, "store": false});
    let r = post(
        &format!("{}/v1/responses", px.url),
        &body,
        &[
            ("authorization", "Bearer k"),
            ("x-compact-session", "resp-1"),
        ],
    )
    .await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-compact-compaction"], "applied");
    let sent = up.model_calls()[1].json();
    provider_valid(&sent, Format::Responses);
    assert_eq!(
        sent["instructions"], "Be brief.",
        "instructions stay where they were"
    );
    let items = sent["input"].as_array().unwrap();
    assert_eq!(
        items.iter().filter(|i| **i == compaction).count(),
        1,
        "the compaction item went up byte-identical, once"
    );
    assert!(
        up.model_calls()[1].body.len() < serde_json::to_vec(&body).unwrap().len() / 2,
        "the history went up compacted"
    );

    let chained = json!({"model": "gpt-4o", "previous_response_id": "resp_1",
        "input": [{"type": "function_call_output", "call_id": "c_x", "output": big(400)}]});
    let r = post(
        &format!("{}/v1/responses", px.url),
        &chained,
        &[("authorization", "Bearer k")],
    )
    .await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-compact-compaction"], "skipped");
    assert_eq!(
        &up.model_calls()[2].body[..],
        &serde_json::to_vec(&chained).unwrap()[..]
    );
    let spans = px.model_calls();
    assert!(
        spans[2]["data"]["error"]
            .as_str()
            .unwrap()
            .contains("previous_response_id")
    );
}

#[tokio::test]
async fn a_context_length_refusal_is_compacted_and_retried_once() {
    let up = Upstream::start().await;
    let px = proxy(&up.url, "policy: {hard_cap_buffer: 50}").await;
    let mut messages = vec![
        json!({"role": "system", "content": "Be careful."}),
        json!({"role": "user", "content": "Audit the logs."}),
    ];
    for i in 0..10 {
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("t{i}"), "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": format!("t{i}"), "content": big(60)}));
    }
    messages.push(json!({"role": "user", "content": "Now report."}));
    let body = json!({"model": "gpt-4o", "messages": messages});
    let size = serde_json::to_vec(&body).unwrap().len();
    up.script(|s| s.refuse_above = Some(size / 2));
    let r = post(
        &format!("{}/v1/chat/completions", px.url),
        &body,
        &[("x-compact-session", "overflow-1")],
    )
    .await;
    assert_eq!(r.status(), 200, "{:?}", r.text().await);
    let log = up.model_calls();
    assert_eq!(log.len(), 2, "one refusal, one retry");
    assert!(log[1].body.len() <= size / 2);
    provider_valid(&log[1].json(), Format::Chat);
    let span = &px.model_calls()[0]["data"];
    assert_eq!(
        (span["compaction"].as_str(), span["status"].as_u64()),
        (Some("reactive"), Some(200))
    );
    let pre = px.spans("compact.trigger_decision");
    assert!(
        pre.iter().any(|s| s["data"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("overflow"))),
        "{pre:?}"
    );

    // A refusal nothing can shrink stands, and is sent back as it came.
    up.script(|s| s.refuse_above = Some(10));
    let small = json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]});
    let r = post(
        &format!("{}/v1/chat/completions", px.url),
        &small,
        &[("x-compact-session", "overflow-2")],
    )
    .await;
    assert_eq!(r.status(), 400);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "context_length_exceeded");
}

#[tokio::test]
async fn failures_of_ours_answer_in_the_providers_error_shape() {
    let up = Upstream::start().await;
    let px = proxy(
        &up.url,
        "proxy: {max_body_bytes: 2048, response_timeout_ms: 300}",
    )
    .await;
    let huge =
        json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "x".repeat(4000)}]});
    let r = post(&format!("{}/v1/chat/completions", px.url), &huge, &[]).await;
    assert_eq!(r.status(), 413);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "request_too_large");
    let r = post(
        &format!("{}/v1/messages", px.url),
        &huge,
        &[("anthropic-version", "2023-06-01")],
    )
    .await;
    assert_eq!(r.status(), 413);
    let e: Value = r.json().await.unwrap();
    assert_eq!(
        (e["type"].as_str(), e["error"]["type"].as_str()),
        (Some("error"), Some("request_too_large"))
    );
    assert!(up.log().is_empty(), "nothing over the limit was forwarded");

    let r = post(
        &format!("{}/v1/chat/completions", px.url),
        &json!({"messages": []}),
        &[("x-compact-session", "a/b")],
    )
    .await;
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("x-compact-session"));

    up.script(|s| s.delay = Duration::from_millis(1500));
    let small = json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]});
    let r = post(&format!("{}/v1/chat/completions", px.url), &small, &[]).await;
    assert_eq!(r.status(), 504);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "upstream_timeout");

    // An upstream that is down: 502, in each shape.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let down = proxy(&format!("http://127.0.0.1:{port}"), "").await;
    let r = post(
        &format!("{}/v1/chat/completions", down.url),
        &small,
        &[("authorization", &format!("Bearer {KEY}"))],
    )
    .await;
    assert_eq!(r.status(), 502);
    let e: Value = r.json().await.unwrap();
    assert_eq!(
        (e["error"]["type"].as_str(), e["error"]["code"].as_str()),
        (Some("api_error"), Some("upstream_unreachable"))
    );
    let r = post(
        &format!("{}/v1/messages", down.url),
        &small,
        &[("x-api-key", KEY)],
    )
    .await;
    assert_eq!(r.status(), 502);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["type"], "api_error");
    let spans = down.model_calls();
    assert!(
        spans
            .iter()
            .all(|s| s["status"] == "error" && s["data"]["status"] == 502)
    );
    assert!(!serde_json::to_string(&spans).unwrap().contains("SECRET"));
}

#[tokio::test]
async fn a_compaction_failure_sends_the_request_unchanged_and_records_it() {
    let up = Upstream::start().await;
    // The pinned system prompt alone is over the window: nothing fits.
    let px = proxy(&up.url, "max_context_tokens: 2000").await;
    let body = json!({"model": "gpt-4o", "messages": [
        {"role": "system", "content": big(300)}, {"role": "user", "content": "hi"}]});
    let r = post(
        &format!("{}/v1/chat/completions", px.url),
        &body,
        &[("x-compact-session", "fail-1")],
    )
    .await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-compact-compaction"], "failed");
    assert_eq!(
        &up.log()[0].body[..],
        &serde_json::to_vec(&body).unwrap()[..]
    );
    let span = &px.model_calls()[0]["data"];
    assert_eq!(span["compaction"], "failed");
    assert!(
        span["error"]
            .as_str()
            .unwrap()
            .contains("InsufficientBudget"),
        "{span}"
    );
    assert!(
        !px.spans("compact.error").is_empty(),
        "the core recorded the error too"
    );
}

#[tokio::test]
async fn other_paths_and_prefixed_upstreams_are_forwarded_as_is() {
    let openai = Upstream::start().await;
    let anthropic = Upstream::start().await;
    let yaml = format!(
        "proxy: {{upstream: '{}', upstreams: ['/anthropic={}']}}",
        openai.url, anthropic.url
    );
    let px = proxy(&openai.url, &yaml).await;
    let client = reqwest::Client::new();
    let r = client
        .get(format!("{}/v1/models?limit=2", px.url))
        .header("authorization", "Bearer k")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.bytes().await.unwrap(), openai.log()[0].answer);
    let emb = json!({"model": "e", "input": "hello"});
    let r = post(&format!("{}/v1/embeddings", px.url), &emb, &[]).await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        &openai.log()[1].body[..],
        &serde_json::to_vec(&emb).unwrap()[..]
    );
    let msg = json!({"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]});
    let r = post(
        &format!("{}/anthropic/v1/messages", px.url),
        &msg,
        &[("x-api-key", KEY)],
    )
    .await;
    assert_eq!(r.status(), 200);
    assert_eq!(anthropic.log().len(), 1);
    assert_eq!(anthropic.log()[0].path, "/v1/messages");
    let r = client
        .get(format!("{}/elsewhere", px.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);

    let metrics = client
        .get(format!("{}/metrics", px.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("compact_proxy_calls_total{api=\"messages\",status=\"200\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("compact_proxy_calls_total{api=\"other\",status=\"200\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("compact_proxy_tokens_total{api=\"messages\",kind=\"output\"} 9"),
        "{metrics}"
    );
    assert!(
        metrics.contains("compact_proxy_overhead_seconds_count 2"),
        "{metrics}"
    );
}

#[tokio::test]
async fn without_ids_a_session_is_the_hash_of_its_opening() {
    let up = Upstream::start().await;
    let px = proxy(&up.url, "").await;
    let first = json!({"model": "gpt-4o", "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "task A"}]});
    let later = json!({"model": "gpt-4o", "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "task A"},
        {"role": "assistant", "content": "ok"}, {"role": "user", "content": "go on"}]});
    let other = json!({"model": "gpt-4o", "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "task B"}]});
    let mut ids = Vec::new();
    for b in [&first, &later, &other] {
        let r = post(&format!("{}/v1/chat/completions", px.url), b, &[]).await;
        ids.push(
            r.headers()["x-compact-session"]
                .to_str()
                .unwrap()
                .to_owned(),
        );
    }
    assert_eq!(ids[0], ids[1]);
    assert_ne!(ids[0], ids[2]);
    assert!(ids[0].starts_with("h-"));
    assert!(
        px.model_calls()
            .iter()
            .all(|s| s["data"]["session_source"] == "hash")
    );
}

#[tokio::test]
async fn a_stream_is_pulled_only_as_fast_as_the_caller_reads() {
    let up = Upstream::start().await;
    up.script(|s| s.endless = true);
    let px = proxy(&up.url, "").await;
    let body =
        json!({"model": "gpt-4o", "stream": true, "messages": [{"role": "user", "content": "go"}]});
    let mut r = post(
        &format!("{}/v1/chat/completions", px.url),
        &body,
        &[("x-compact-session", "slow-reader")],
    )
    .await;
    let mut read = 0;
    while read < 1 << 20 {
        read += r.chunk().await.unwrap().expect("more of the stream").len();
    }
    // The caller stops reading: once the buffers on the way are full, the
    // upstream is asked for nothing more.
    let mut last = up.pulled();
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = up.pulled();
        if now == last {
            break;
        }
        last = now;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        up.pulled(),
        last,
        "the proxy kept pulling while the caller read nothing"
    );
    assert!(last < 64 << 20, "{last} bytes pulled for 1 MiB read");
    // The caller goes away: the call is recorded as cut short.
    drop(r);
    let mut spans = Vec::new();
    for _ in 0..100 {
        spans = px.model_calls();
        if !spans.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        spans[0]["data"]["error"]
            .as_str()
            .unwrap()
            .contains("caller closed"),
        "{spans:?}"
    );
}

/// An Anthropic agent through the proxy, keeping its own history (the
/// proxy's output never comes back): `turns` tasks, each run to the end of
/// its tool calls. `extra` goes into every body.
async fn anthropic_agent(px: &str, system: &Value, tools: &Value, extra: &Value, turns: usize) {
    let mut messages: Vec<Value> = Vec::new();
    for turn in 0..turns {
        messages.push(json!({"role": "user", "content": format!("Task {turn}: check the logs.")}));
        loop {
            let mut body = json!({"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": system,
                "tools": tools, "messages": messages});
            if let (Value::Object(b), Value::Object(e)) = (&mut body, extra) {
                b.extend(e.clone());
            }
            let r = post(
                &format!("{px}/v1/messages"),
                &body,
                &[("x-api-key", KEY), ("anthropic-version", "2023-06-01")],
            )
            .await;
            assert_eq!(r.status(), 200);
            let answer: Value = r.json().await.unwrap();
            let content = answer["content"].clone();
            messages.push(json!({"role": "assistant", "content": content}));
            let uses: Vec<Value> = content
                .as_array()
                .unwrap()
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .cloned()
                .collect();
            if uses.is_empty() {
                break;
            }
            let results: Vec<Value> = uses
                .iter()
                .map(|u| json!({"type": "tool_result", "tool_use_id": u["id"], "content": big(50)}))
                .collect();
            messages.push(json!({"role": "user", "content": results}));
        }
    }
}

#[tokio::test]
async fn anthropic_requests_reach_the_provider_with_at_most_four_breakpoints() {
    let up = Upstream::start().await;
    let px = proxy(
        &up.url,
        "max_context_tokens: 5000\npolicy: {keep_recent_turns: 1, keep_tool_io_pairs: 1}",
    )
    .await;
    let system = json!("You are a careful agent.");
    let tools = json!([{"name": "lookup", "input_schema": {"type": "object"}}]);
    anthropic_agent(&px.url, &system, &tools, &json!({}), 4).await;
    let upstream = up.model_calls();
    assert!(upstream.len() >= 4);
    let mut compacted = 0;
    for l in &upstream {
        let body = l.json();
        provider_valid(&body, Format::Anthropic);
        let marks = breakpoints(&body);
        assert!(marks.len() <= 4, "{marks:?}");
        assert!(
            !marks
                .iter()
                .any(|t| t.contains("thinking") || t == "empty text"),
            "{marks:?}"
        );
        // The system prompt closes tools and system; the history's end has one.
        assert_eq!(
            body["system"],
            json!([{"type": "text", "text": "You are a careful agent.", "cache_control": {"type": "ephemeral"}}])
        );
        let last = body["messages"].as_array().unwrap().last().unwrap();
        let last_block = last["content"].as_array().unwrap().last().unwrap();
        assert_eq!(
            last_block["cache_control"],
            json!({"type": "ephemeral"}),
            "{last}"
        );
        let text = String::from_utf8_lossy(&l.body);
        if text.contains("removed: tool output") || text.contains("COMPACT-SUMMARY") {
            compacted += 1;
        }
    }
    assert!(compacted >= 1, "no request was compacted");
    // Breakpoints alone are no compaction: the calls that only got them say
    // `none`, the others `applied`.
    let labels: Vec<String> = px
        .model_calls()
        .iter()
        .map(|s| s["data"]["compaction"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(labels.iter().any(|l| l == "none"), "{labels:?}");
    assert!(labels.iter().any(|l| l == "applied"), "{labels:?}");
}

#[tokio::test]
async fn the_callers_breakpoints_stay_and_a_top_level_one_counts() {
    let up = Upstream::start().await;
    let px = proxy(
        &up.url,
        "max_context_tokens: 5000\npolicy: {keep_recent_turns: 1, keep_tool_io_pairs: 1}",
    )
    .await;
    let eph = json!({"type": "ephemeral"});
    let system =
        json!([{"type": "text", "text": "You are a careful agent.", "cache_control": eph}]);
    let tools =
        json!([{"name": "lookup", "input_schema": {"type": "object"}, "cache_control": eph}]);
    // Anthropic's automatic caching: one more of the four.
    anthropic_agent(&px.url, &system, &tools, &json!({"cache_control": eph}), 2).await;
    let upstream = up.model_calls();
    for l in &upstream {
        let body = l.json();
        provider_valid(&body, Format::Anthropic);
        let marks = breakpoints(&body);
        assert_eq!(marks.len(), 4, "{marks:?}");
        assert_eq!(body["cache_control"], eph);
        assert_eq!(body["tools"], tools);
        assert_eq!(body["system"], system);
    }
}

#[tokio::test]
async fn with_breakpoints_off_an_anthropic_call_nothing_triggers_passes_byte_for_byte() {
    let up = Upstream::start().await;
    let px = proxy(&up.url, "policy: {cache_breakpoints: off}").await;
    let body = json!({"model": "claude-sonnet-4-5", "max_tokens": 256, "system": "Be brief.",
        "tools": [{"name": "lookup", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "What is 2+2?"}]});
    let sent = serde_json::to_vec(&body).unwrap();
    let r = post(
        &format!("{}/v1/messages", px.url),
        &body,
        &[("x-api-key", KEY), ("anthropic-version", "2023-06-01")],
    )
    .await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-compact-compaction"], "none");
    let log = up.model_calls();
    assert_eq!(
        &log[0].body[..],
        &sent[..],
        "the body went upstream as it came"
    );
    // With the default (auto), the same call gets its breakpoints, which
    // are no compaction.
    let px = proxy(&up.url, "").await;
    let r = post(
        &format!("{}/v1/messages", px.url),
        &body,
        &[("x-api-key", KEY), ("anthropic-version", "2023-06-01")],
    )
    .await;
    assert_eq!(r.headers()["x-compact-compaction"], "none");
    let log = up.model_calls();
    let auto = log[1].json();
    assert_eq!(breakpoints(&auto).len(), 2, "{auto}");
    assert_ne!(&log[1].body[..], &sent[..]);
}

/// Sends `bodies` (JSON text, sent as is) in order to a proxy and returns,
/// for each, the body the upstream got, the session and compaction the
/// proxy answered, and the span's compaction and error.
async fn upstream_bodies(yaml: &str, path: &str, bodies: &[String]) -> Vec<(Vec<u8>, String)> {
    let up = Upstream::start().await;
    let px = proxy(&up.url, yaml).await;
    let mut answers = Vec::new();
    for body in bodies {
        let r = reqwest::Client::new()
            .post(format!("{}{path}", px.url))
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        answers.push(format!(
            "{} {}",
            r.headers()["x-compact-session"].to_str().unwrap(),
            r.headers()["x-compact-compaction"].to_str().unwrap()
        ));
    }
    let spans = px.model_calls();
    let log = up.model_calls();
    assert_eq!((log.len(), spans.len()), (bodies.len(), bodies.len()));
    log.iter()
        .zip(spans)
        .zip(answers)
        .map(|((l, s), answer)| {
            let d = &s["data"];
            let told = format!("{answer} {} {}", d["compaction"], d["error"]);
            (l.body.to_vec(), told)
        })
        .collect()
}

/// A proxy that reuses what it decoded of a session's last history sends
/// upstream, byte for byte, what one that decodes every body whole sends:
/// through a history resent longer, an earlier item edited, items
/// shifted, compaction rewriting the bodies, and bodies whose new items
/// serde_json reads as text but not as values (a lone surrogate, a number
/// out of range: parsed whole, they are not JSON objects to the proxy).
#[tokio::test]
async fn a_resent_history_reused_decoded_sends_what_a_whole_decode_sends() {
    let item = |role: &str, text: String| json!({"role": role, "content": text}).to_string();
    let tool_call = |id: &str| {
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
            "function": {"name": "lookup", "arguments": "{}"}}]})
        .to_string()
    };
    let tool = |id: &str, n: usize| {
        json!({"role": "tool", "tool_call_id": id, "content": big(n)}).to_string()
    };
    let mut history = vec![
        item("system", "You are a careful agent.".into()),
        item("user", "Task 0: inspect the data.".into()),
    ];
    let mut bodies = Vec::new();
    let body = |history: &[String], extra: &str| {
        format!(
            r#"{{"model":"gpt-4o","prompt_cache_key":"pck-reuse"{extra},"messages":[{}]}}"#,
            history.join(",")
        )
    };
    for turn in 0..6 {
        let id = format!("call_{turn}");
        history.push(tool_call(&id));
        history.push(tool(&id, 40));
        history.push(item("assistant", format!("Turn {turn} done.")));
        history.push(item("user", format!("Task {}: go on.", turn + 1)));
        bodies.push(body(&history, ""));
    }
    // An earlier tool output edited by the client, then items shifted.
    history[3] = tool("call_0", 41);
    bodies.push(body(&history, ""));
    history.remove(1);
    bodies.push(body(&history, r#","stream":false"#));
    // New items the whole parse refuses, then the history again.
    let mut bad = history.clone();
    bad.push(r#"{"role":"user","content":"\ud800"}"#.into());
    bodies.push(body(&bad, ""));
    bad.pop();
    bad.push(r#"{"role":"user","content":"n","n":1e999}"#.into());
    bodies.push(body(&bad, ""));
    history.push(item("user", "Last task.".into()));
    bodies.push(body(&history, ""));

    let config = "max_context_tokens: 3000\npolicy: {keep_recent_turns: 1, keep_tool_io_pairs: 1}";
    let reused = upstream_bodies(config, "/v1/chat/completions", &bodies).await;
    let whole = upstream_bodies(
        &format!("{config}\nproxy: {{history_cache_bytes: 0}}"),
        "/v1/chat/completions",
        &bodies,
    )
    .await;
    for (i, (r, w)) in reused.iter().zip(&whole).enumerate() {
        assert_eq!(r.1, w.1, "call {i}");
        assert!(r.0 == w.0, "call {i}: the upstream bodies differ");
    }
    let told: Vec<&str> = reused.iter().map(|r| r.1.as_str()).collect();
    assert!(
        told.iter().any(|t| t.contains("\"applied\"")),
        "no call was compacted: {told:?}"
    );
    for t in &told[8..10] {
        assert!(
            t.starts_with("h-") && t.contains("not a JSON object"),
            "{t}"
        );
    }
}

/// What the proxy's compactions took out of the context is in the recall
/// index once `serve` returns: the index writes pending on the blocking
/// pool are waited for, not dropped with the runtime.
#[tokio::test]
async fn after_shutdown_what_the_proxy_compacted_is_recallable() {
    use compact_middleware::CompactManager;
    use compact_middleware::config::Config;
    use compact_middleware::recall::{RecallIndex, RecallQuery};
    use compact_service::proxy::Proxy;

    let up = Upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("recall.sqlite3");
    let yaml = format!(
        "storage: {{adapter: none}}\nmax_context_tokens: 4000\n\
         policy: {{keep_recent_turns: 1, keep_tool_io_pairs: 1}}\n\
         recall: {{enabled: true, path: {:?}}}\nproxy: {{upstream: {:?}}}",
        index.display().to_string(),
        up.url
    );
    let config = Config::from_yaml_str(&yaml).expect("config");
    let manager = CompactManager::builder(config.clone())
        .build()
        .expect("manager");
    let proxy = Proxy::new(&config.proxy, manager.clone()).expect("proxy");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(compact_service::proxy::serve(proxy, listener, async {
        let _ = stopped.await;
    }));
    // Another process holds the index's write lock while the session
    // runs: the compactions' index writes wait for it.
    let blocker = rusqlite::Connection::open(&index).unwrap();
    blocker.execute_batch("BEGIN EXCLUSIVE").unwrap();
    chat_session(&url, "agent-r", 4, 60).await;
    stop.send(()).unwrap();
    let release = tokio::task::spawn_blocking(move || {
        std::thread::sleep(Duration::from_millis(300));
        blocker.execute_batch("COMMIT").unwrap();
    });
    served.await.unwrap().expect("the proxy stops cleanly");
    release.await.unwrap();

    // Read by another handle on the file, as another process would.
    let reader = RecallIndex::open(&index).expect("the index opens");
    let at_stop = reader.count("agent-r").expect("count");
    assert!(at_stop > 0, "nothing the proxy compacted was indexed");
    manager.flush_recall(None).await;
    assert_eq!(
        reader.count("agent-r").expect("count"),
        at_stop,
        "index writes were still pending when the proxy stopped"
    );
    // And it answers: the cleared outputs' lines are found by their words.
    let hits = manager
        .recall("agent-r", RecallQuery::text("value status"))
        .await
        .expect("recall")
        .hits;
    assert!(!hits.is_empty());
}
