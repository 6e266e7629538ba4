//! A scripted model provider on loopback, speaking the providers' wire:
//! OpenAI Chat Completions and Responses, Anthropic Messages, each whole
//! or streamed (SSE), plus `GET /v1/models` and `POST /v1/embeddings`.
//! The only fake the tests allow: a model API as a real HTTP server.
//!
//! The script is one rule for every API: after each new user message,
//! call the request's tool `tool_rounds` times (`{"cmd": "seq 1 N", ...}`,
//! which Codex's `exec_command` runs too), then answer "Done after N tool
//! calls.". It keeps that count itself, per conversation
//! (`prompt_cache_key`, else one per upstream), as a provider's model
//! would read it from a context compaction may have folded. Anthropic assistant turns carry a signed `thinking`
//! block, Responses ones a `reasoning` item, so tests can check the
//! proxy hands them back untouched. Usage is reported as a quarter of the
//! request's bytes. Every request and every response body is logged.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// One request the upstream received.
#[derive(Debug, Clone)]
pub(crate) struct Logged {
    pub(crate) method: Method,
    pub(crate) path: String,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
    /// The body it answered with (a stream's bytes, all of them).
    pub(crate) answer: Bytes,
}

impl Logged {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

/// What the upstream does; tests change it between calls.
#[derive(Debug, Clone)]
pub(crate) struct Script {
    /// Tool calls before the final answer of each user turn.
    pub(crate) tool_rounds: usize,
    /// Bytes of text each tool call asks its tool to return (the Python
    /// clients' tools honour `size`).
    pub(crate) tool_output_size: usize,
    /// Refuse a model request whose body is larger than this with the
    /// provider's context-length error.
    pub(crate) refuse_above: Option<usize>,
    /// Wait before answering (headers).
    pub(crate) delay: Duration,
    /// Wait between the events of a stream.
    pub(crate) event_gap: Duration,
    /// Answer model requests with a stream that never ends (64 KiB
    /// events), counting the bytes the server was asked for.
    pub(crate) endless: bool,
}

impl Default for Script {
    fn default() -> Self {
        Self {
            tool_rounds: 2,
            tool_output_size: 2000,
            refuse_above: None,
            delay: Duration::ZERO,
            event_gap: Duration::ZERO,
            endless: false,
        }
    }
}

#[derive(Default)]
struct Shared {
    log: Mutex<Vec<Logged>>,
    script: Mutex<Script>,
    counter: Mutex<u64>,
    /// Bytes of endless streams pulled so far.
    pulled: std::sync::atomic::AtomicU64,
    /// Per conversation: the latest user message and the tool calls made since.
    turns: Mutex<std::collections::HashMap<String, (String, usize)>>,
}

/// The running upstream.
pub(crate) struct Upstream {
    pub(crate) url: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Upstream {
    pub(crate) async fn start() -> Self {
        let shared = Arc::new(Shared::default());
        let app = Router::new().fallback(answer).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { url, shared, task }
    }

    pub(crate) fn script(&self, f: impl FnOnce(&mut Script)) {
        f(&mut self.shared.script.lock().unwrap());
    }

    /// Bytes of endless streams the server was asked for so far.
    pub(crate) fn pulled(&self) -> u64 {
        self.shared.pulled.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub(crate) fn log(&self) -> Vec<Logged> {
        self.shared.log.lock().unwrap().clone()
    }

    /// The model requests (POSTs to the three APIs), in order.
    pub(crate) fn model_calls(&self) -> Vec<Logged> {
        self.log()
            .into_iter()
            .filter(|l| {
                l.method == Method::POST
                    && ["/v1/chat/completions", "/v1/responses", "/v1/messages"]
                        .contains(&l.path.as_str())
            })
            .collect()
    }
}

async fn answer(State(s): State<Arc<Shared>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let script = s.script.lock().unwrap().clone();
    let n = {
        let mut c = s.counter.lock().unwrap();
        *c += 1;
        *c
    };
    let path = parts.uri.path().to_owned();
    if script.endless {
        let event = Bytes::from(format!(
            "data: {{\"pad\":\"{}\"}}\n\n",
            "x".repeat(64 * 1024)
        ));
        let shared = s.clone();
        let stream = futures_util::stream::repeat(event).map(move |e| {
            shared
                .pulled
                .fetch_add(e.len() as u64, std::sync::atomic::Ordering::SeqCst);
            Ok::<_, std::io::Error>(e)
        });
        return (
            [("content-type", "text/event-stream")],
            Body::from_stream(stream),
        )
            .into_response();
    }
    let doc: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let (status, content_type, events): (StatusCode, &str, Vec<Vec<u8>>) = match (&parts.method, path.as_str()) {
        (&Method::GET, "/v1/models") => (StatusCode::OK, "application/json", vec![br#"{"object":"list","data":[{"id":"gpt-4o","object":"model"}]}"#.to_vec()]),
        (&Method::POST, "/v1/embeddings") => (StatusCode::OK, "application/json", vec![serde_json::to_vec(&json!({"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,0.25]}],"model":"e","usage":{"prompt_tokens":3,"total_tokens":3}})).unwrap()]),
        (&Method::POST, "/v1/chat/completions" | "/v1/responses" | "/v1/messages") => {
            if script.refuse_above.is_some_and(|limit| body.len() > limit) {
                let refusal = if path == "/v1/messages" {
                    json!({"type":"error","error":{"type":"invalid_request_error","message":format!("prompt is too long: {} tokens > {} maximum", body.len() / 4, script.refuse_above.unwrap_or(0) / 4)}})
                } else {
                    json!({"error":{"message":format!("This model's maximum context length is {} tokens. However, your messages resulted in {} tokens.", script.refuse_above.unwrap_or(0) / 4, body.len() / 4),"type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}})
                };
                (StatusCode::BAD_REQUEST, "application/json", vec![serde_json::to_vec(&refusal).unwrap()])
            } else {
                let stream = doc.get("stream").and_then(Value::as_bool) == Some(true);
                let input_tokens = (body.len() / 4) as u64;
                let step = decide(&s, &path, &doc, &script);
                let events = match path.as_str() {
                    "/v1/chat/completions" => chat(n, &step, stream, input_tokens),
                    "/v1/responses" => responses(n, &step, stream, input_tokens),
                    _ => messages(n, &step, stream, input_tokens),
                };
                (StatusCode::OK, if stream { "text/event-stream" } else { "application/json" }, events)
            }
        }
        _ => (StatusCode::NOT_FOUND, "application/json", vec![br#"{"error":{"message":"no such route","type":"invalid_request_error","param":null,"code":null}}"#.to_vec()]),
    };
    let all: Vec<u8> = events.concat();
    s.log.lock().unwrap().push(Logged {
        method: parts.method.clone(),
        path,
        headers: parts.headers.clone(),
        body,
        answer: Bytes::from(all),
    });
    if !script.delay.is_zero() {
        tokio::time::sleep(script.delay).await;
    }
    let gap = script.event_gap;
    let stream =
        futures_util::stream::iter(events.into_iter().enumerate()).then(move |(i, e)| async move {
            if i > 0 && !gap.is_zero() {
                tokio::time::sleep(gap).await;
            }
            Ok::<_, std::io::Error>(Bytes::from(e))
        });
    let mut response =
        ([("content-type", content_type)], Body::from_stream(stream)).into_response();
    *response.status_mut() = status;
    response
}

use futures_util::StreamExt;

/// The next step of the script for a request.
enum Step {
    Tool {
        name: String,
        round: usize,
        size: usize,
    },
    Text(String),
}

/// The text of a user message, when it is one the user wrote (not tool
/// results, not compact's summary or bridge).
fn user_text(item: &Value) -> Option<String> {
    if item.get("role").and_then(Value::as_str) != Some("user") {
        return None;
    }
    let text = match item.get("content") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter(|b| {
                matches!(
                    b.get("type").and_then(Value::as_str),
                    Some("text" | "input_text")
                )
            })
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    };
    let ours =
        text.starts_with("COMPACT-SUMMARY") || text == compact_middleware::model::BRIDGE_TEXT;
    (!text.is_empty() && !ours).then_some(text)
}

fn decide(s: &Shared, path: &str, doc: &Value, script: &Script) -> Step {
    let key = if path == "/v1/responses" {
        "input"
    } else {
        "messages"
    };
    let items = doc
        .get(key)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let latest = items.iter().rev().find_map(user_text).unwrap_or_default();
    let conversation = doc
        .get("prompt_cache_key")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let results = {
        let mut turns = s.turns.lock().unwrap();
        let entry = turns
            .entry(conversation)
            .or_insert_with(|| (latest.clone(), 0));
        if entry.0 != latest {
            *entry = (latest, 0);
        }
        if entry.1 >= script.tool_rounds {
            return Step::Text(format!("Done after {} tool calls.", entry.1));
        }
        entry.1 += 1;
        entry.1 - 1
    };
    let tools = doc
        .get("tools")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let name = tools
        .iter()
        .find_map(|t| {
            t.get("name")
                .or_else(|| t.get("function").and_then(|f| f.get("name")))
                .and_then(Value::as_str)
                .filter(|n| *n == "exec_command" || *n == "lookup" || *n == "run")
        })
        .or_else(|| {
            tools
                .first()
                .and_then(|t| {
                    t.get("name")
                        .or_else(|| t.get("function").and_then(|f| f.get("name")))
                })
                .and_then(Value::as_str)
        })
        .unwrap_or("run")
        .to_owned();
    Step::Tool {
        name,
        round: results + 1,
        size: script.tool_output_size,
    }
}

fn args(round: usize, size: usize) -> String {
    json!({"cmd": format!("seq 1 {}", 300 * round), "size": size, "step": round}).to_string()
}

fn sse(event: Option<&str>, data: &Value) -> Vec<u8> {
    match event {
        Some(e) => format!("event: {e}\ndata: {data}\n\n").into_bytes(),
        None => format!("data: {data}\n\n").into_bytes(),
    }
}

fn chat(n: u64, step: &Step, stream: bool, input: u64) -> Vec<Vec<u8>> {
    let id = format!("chatcmpl-{n}");
    let usage = json!({"prompt_tokens": input, "completion_tokens": 9, "total_tokens": input + 9,
        "prompt_tokens_details": {"cached_tokens": input / 2}});
    let (message, finish) = match step {
        Step::Tool { name, round, size } => (
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("call_{n}"), "type": "function",
                "function": {"name": name, "arguments": args(*round, *size)}}]}),
            "tool_calls",
        ),
        Step::Text(t) => (json!({"role": "assistant", "content": t}), "stop"),
    };
    if !stream {
        return vec![serde_json::to_vec(&json!({"id": id, "object": "chat.completion", "created": 1, "model": "gpt-4o",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage})).unwrap()];
    }
    let chunk = |delta: Value, finish: Value| {
        json!({"id": id, "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut out = vec![sse(
        None,
        &chunk(json!({"role": "assistant", "content": ""}), Value::Null),
    )];
    match step {
        Step::Tool { .. } => {
            let call = &message["tool_calls"][0];
            out.push(sse(
                None,
                &chunk(
                    json!({"tool_calls": [{"index": 0, "id": call["id"], "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""}}]}),
                    Value::Null,
                ),
            ));
            out.push(sse(None, &chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": call["function"]["arguments"]}}]}), Value::Null)));
        }
        Step::Text(t) => {
            for word in t.split_inclusive(' ') {
                out.push(sse(None, &chunk(json!({"content": word}), Value::Null)));
            }
        }
    }
    out.push(sse(None, &chunk(json!({}), json!(finish))));
    out.push(sse(None, &json!({"id": id, "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o", "choices": [], "usage": usage})));
    out.push(b"data: [DONE]\n\n".to_vec());
    out
}

fn responses(n: u64, step: &Step, stream: bool, input: u64) -> Vec<Vec<u8>> {
    let rid = format!("resp_{n}");
    let usage = json!({"input_tokens": input, "input_tokens_details": {"cached_tokens": input / 2},
        "output_tokens": 9, "output_tokens_details": {"reasoning_tokens": 3}, "total_tokens": input + 9});
    let reasoning = json!({"type": "reasoning", "id": format!("rs_{n}"), "summary": [],
        "encrypted_content": format!("gAAAA-opaque-{n}-{}", "x".repeat(40))});
    let item = match step {
        Step::Tool { name, round, size } => {
            json!({"type": "function_call", "id": format!("fc_{n}"), "call_id": format!("call_{n}"),
            "name": name, "arguments": args(*round, *size), "status": "completed"})
        }
        Step::Text(t) => {
            json!({"type": "message", "id": format!("msg_{n}"), "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": t, "annotations": []}]})
        }
    };
    let output = vec![reasoning.clone(), item.clone()];
    let response = |status: &str, output: Value, usage: Value| {
        json!({"id": rid, "object": "response", "created_at": 1,
        "status": status, "model": "gpt-4o", "output": output, "usage": usage, "parallel_tool_calls": true,
        "tool_choice": "auto", "tools": []})
    };
    if !stream {
        return vec![serde_json::to_vec(&response("completed", json!(output), usage)).unwrap()];
    }
    let mut seq = 0;
    let mut ev = |name: &str, mut data: Value| {
        data["type"] = json!(name);
        data["sequence_number"] = json!(seq);
        seq += 1;
        sse(Some(name), &data)
    };
    let mut out = vec![ev(
        "response.created",
        json!({"response": response("in_progress", json!([]), Value::Null)}),
    )];
    for (i, it) in output.iter().enumerate() {
        out.push(ev(
            "response.output_item.added",
            json!({"output_index": i, "item": it}),
        ));
        if let Step::Text(t) = step
            && it["type"] == "message"
        {
            out.push(ev(
                "response.output_text.delta",
                json!({"item_id": it["id"], "output_index": i, "content_index": 0, "delta": t}),
            ));
        }
        out.push(ev(
            "response.output_item.done",
            json!({"output_index": i, "item": it}),
        ));
    }
    out.push(ev(
        "response.completed",
        json!({"response": response("completed", json!(output), usage)}),
    ));
    out
}

fn messages(n: u64, step: &Step, stream: bool, input: u64) -> Vec<Vec<u8>> {
    let thinking = json!({"type": "thinking", "thinking": format!("Plan for step {n}: call the tool, then answer."),
        "signature": format!("EqQBCkgIARABGAIiQL{n}{}", "s1gn".repeat(16))});
    let (block, stop) = match step {
        Step::Tool { name, round, size } => (
            json!({"type": "tool_use", "id": format!("toolu_{n}"), "name": name,
            "input": serde_json::from_str::<Value>(&args(*round, *size)).unwrap()}),
            "tool_use",
        ),
        Step::Text(t) => (json!({"type": "text", "text": t}), "end_turn"),
    };
    let usage = json!({"input_tokens": input / 4, "cache_creation_input_tokens": input / 4,
        "cache_read_input_tokens": input / 2, "output_tokens": 9});
    if !stream {
        return vec![serde_json::to_vec(&json!({"id": format!("msg_{n}"), "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5", "content": [thinking, block], "stop_reason": stop, "stop_sequence": null,
            "usage": usage})).unwrap()];
    }
    let mut out = vec![sse(
        Some("message_start"),
        &json!({"type": "message_start", "message": {"id": format!("msg_{n}"),
        "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": [], "stop_reason": null,
        "stop_sequence": null, "usage": {"input_tokens": input / 4, "cache_creation_input_tokens": input / 4,
        "cache_read_input_tokens": input / 2, "output_tokens": 1}}}),
    )];
    out.push(sse(
        Some("content_block_start"),
        &json!({"type": "content_block_start", "index": 0,
        "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
    ));
    out.push(sse(
        Some("content_block_delta"),
        &json!({"type": "content_block_delta", "index": 0,
        "delta": {"type": "thinking_delta", "thinking": thinking["thinking"]}}),
    ));
    out.push(sse(
        Some("content_block_delta"),
        &json!({"type": "content_block_delta", "index": 0,
        "delta": {"type": "signature_delta", "signature": thinking["signature"]}}),
    ));
    out.push(sse(
        Some("content_block_stop"),
        &json!({"type": "content_block_stop", "index": 0}),
    ));
    match step {
        Step::Tool { .. } => {
            let mut start = block.clone();
            start["input"] = json!({});
            out.push(sse(
                Some("content_block_start"),
                &json!({"type": "content_block_start", "index": 1, "content_block": start}),
            ));
            out.push(sse(
                Some("content_block_delta"),
                &json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": block["input"].to_string()}}),
            ));
        }
        Step::Text(t) => {
            out.push(sse(
                Some("content_block_start"),
                &json!({"type": "content_block_start", "index": 1,
                "content_block": {"type": "text", "text": ""}}),
            ));
            out.push(sse(
                Some("content_block_delta"),
                &json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "text_delta", "text": t}}),
            ));
        }
    }
    out.push(sse(
        Some("content_block_stop"),
        &json!({"type": "content_block_stop", "index": 1}),
    ));
    out.push(sse(
        Some("message_delta"),
        &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
        "usage": {"output_tokens": 9}}),
    ));
    out.push(sse(Some("message_stop"), &json!({"type": "message_stop"})));
    out
}
