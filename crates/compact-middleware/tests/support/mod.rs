//! Shared generators for integration tests (and the runtime and count cache
//! their cases share): random but well-formed agent
//! histories in every wire format (Chat Completions, Responses, Anthropic Messages).
#![allow(dead_code)]

pub(crate) mod invariants;

use std::sync::{Arc, OnceLock};

use compact_middleware::model::{Format, Message, Request};
use compact_middleware::tokens::CountCache;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// One current-thread runtime for every case of a property test.
pub(crate) fn rt() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    })
}

/// One token count cache for every case of a property test.
pub(crate) fn cache() -> Arc<CountCache> {
    static C: OnceLock<Arc<CountCache>> = OnceLock::new();
    C.get_or_init(|| Arc::new(CountCache::new(100_000))).clone()
}

/// Which wire format a generated history uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wire {
    Chat,
    Responses,
    /// Anthropic Messages: text, `thinking` (signed), `tool_use` blocks in assistant
    /// messages, `tool_result` blocks in the user message after them.
    Anthropic,
}

/// True for an Anthropic user message that only carries `tool_result` blocks (a tool
/// answer, not a user turn).
pub(crate) fn is_tool_result_message(item: &Value) -> bool {
    item.get("role").and_then(Value::as_str) == Some("user")
        && item
            .get("content")
            .and_then(Value::as_array)
            .is_some_and(|blocks| {
                !blocks.is_empty()
                    && blocks
                        .iter()
                        .all(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
            })
}

/// Random JSON scalars/objects for unknown fields (round-trip must keep them).
pub(crate) fn arb_extra() -> impl Strategy<Value = Option<(String, Value)>> {
    prop::option::weighted(
        0.3,
        (
            "x_[a-z]{1,6}",
            prop_oneof![
                any::<i64>().prop_map(Value::from),
                "[a-zA-Z0-9 ]{0,8}".prop_map(Value::from),
                Just(json!({"nested": [1, 2.5, null, true]})),
            ],
        ),
    )
}

/// Text with some unicode, occasionally long.
pub(crate) fn arb_text() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => "[a-zA-Z0-9 ,.!?'/_-]{0,60}",
        1 => "[\\p{L}\\p{N} ]{0,30}",
        1 => "(error|TODO|must|never|ABC-[0-9]{3}|src/[a-z]{3}\\.rs|[0-9]{2,4} ms| ){4,40}",
    ]
}

/// One turn's plan: user text, then steps; each step is either an assistant
/// reply or a batch of parallel tool calls (sizes of outputs vary).
#[derive(Debug, Clone)]
pub(crate) struct TurnPlan {
    pub user: String,
    pub protected: bool,
    pub steps: Vec<Step>,
    pub extra: Option<(String, Value)>,
}

#[derive(Debug, Clone)]
pub(crate) enum Step {
    Reply(String),
    Tools {
        reasoning: bool,
        calls: Vec<(String, String, usize)>,
    },
}

pub(crate) fn arb_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        2 => arb_text().prop_map(Step::Reply),
        3 => (
            any::<bool>(),
            prop::collection::vec(
                ("(get_weather|fetch_report|run_tests|read_file|search)", arb_text(), 0usize..3000),
                1..4
            )
        )
            .prop_map(|(reasoning, calls)| Step::Tools { reasoning, calls }),
    ]
}

pub(crate) fn arb_turn() -> impl Strategy<Value = TurnPlan> {
    (
        arb_text(),
        prop::bool::weighted(0.1),
        prop::collection::vec(arb_step(), 0..4),
        arb_extra(),
    )
        .prop_map(|(user, protected, steps, extra)| TurnPlan {
            user,
            protected,
            steps,
            extra,
        })
}

/// A random history: an optional system prompt, then turns.
pub(crate) fn arb_history(
    wire: Wire,
    turns: std::ops::Range<usize>,
) -> impl Strategy<Value = Vec<Value>> {
    (any::<bool>(), prop::collection::vec(arb_turn(), turns))
        .prop_map(move |(system, plans)| render(wire, system, &plans))
}

fn with_extra(mut v: Value, extra: &Option<(String, Value)>) -> Value {
    if let (Some((k, x)), Value::Object(o)) = (extra, &mut v) {
        o.insert(k.clone(), x.clone());
    }
    v
}

/// Tool output of roughly `size` characters, deterministic.
pub(crate) fn tool_output(name: &str, args: &str, size: usize) -> String {
    let mut s = format!("{name} result for {args}: ");
    let mut i = 0;
    while s.len() < size {
        s.push_str(&format!("row {i} value={} status=ok; ", i * 7 % 13));
        i += 1;
    }
    s
}

/// Renders turn plans into wire JSON with unique call ids.
pub(crate) fn render(wire: Wire, system: bool, plans: &[TurnPlan]) -> Vec<Value> {
    let mut out = Vec::new();
    let mut call = 0usize;
    if system {
        out.push(json!({"role": "system", "content": "You are a careful coding agent."}));
    }
    for (t, plan) in plans.iter().enumerate() {
        let text = format!("turn {t}: {}", plan.user);
        let mut user = match wire {
            // Anthropic user text as blocks, sometimes with a cache breakpoint.
            Wire::Anthropic if t % 2 == 1 => json!({"role": "user", "content": [
                {"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}
            ]}),
            _ => json!({"role": "user", "content": text}),
        };
        if plan.protected {
            user["meta"] = json!({"protected": true, "label": "requirement"});
        }
        out.push(with_extra(user, &plan.extra));
        for step in &plan.steps {
            match step {
                Step::Reply(text) => out.push(match wire {
                    Wire::Anthropic => {
                        json!({"role": "assistant", "content": [{"type": "text", "text": text}]})
                    }
                    _ => json!({"role": "assistant", "content": text}),
                }),
                Step::Tools { reasoning, calls } => {
                    let ids: Vec<String> = calls
                        .iter()
                        .map(|_| {
                            call += 1;
                            format!("call_{call:05}")
                        })
                        .collect();
                    match wire {
                        Wire::Chat => {
                            let tc: Vec<Value> = calls
                                .iter()
                                .zip(&ids)
                                .map(|((name, args, _), id)| {
                                    json!({"id": id, "type": "function", "function": {"name": name, "arguments": json!({"q": args}).to_string()}})
                                })
                                .collect();
                            out.push(
                                json!({"role": "assistant", "content": null, "tool_calls": tc}),
                            );
                            for ((name, args, size), id) in calls.iter().zip(&ids) {
                                out.push(json!({"role": "tool", "tool_call_id": id, "content": tool_output(name, args, *size)}));
                            }
                        }
                        Wire::Responses => {
                            if *reasoning {
                                out.push(json!({"type": "reasoning", "id": format!("rs_{call}"), "summary": [{"type": "summary_text", "text": "thinking about tools"}]}));
                            }
                            for ((name, args, _), id) in calls.iter().zip(&ids) {
                                out.push(json!({"type": "function_call", "id": format!("fc_{id}"), "call_id": id, "name": name, "arguments": json!({"q": args}).to_string(), "status": "completed"}));
                            }
                            for ((name, args, size), id) in calls.iter().zip(&ids) {
                                out.push(json!({"type": "function_call_output", "call_id": id, "output": tool_output(name, args, *size)}));
                            }
                        }
                        Wire::Anthropic => {
                            let mut blocks = Vec::new();
                            if *reasoning {
                                blocks.push(json!({"type": "thinking", "thinking": format!("Which tools answer turn {t}?"), "signature": format!("sig-{call}-EqQBCkgIARABGAIiQL")}));
                            }
                            for ((name, args, _), id) in calls.iter().zip(&ids) {
                                blocks.push(json!({"type": "tool_use", "id": format!("toolu_{id}"), "name": name, "input": {"q": args}}));
                            }
                            out.push(json!({"role": "assistant", "content": blocks}));
                            // Every answer in one user message, as the API wants them.
                            let results: Vec<Value> = calls
                                .iter()
                                .zip(&ids)
                                .map(|((name, args, size), id)| {
                                    json!({"type": "tool_result", "tool_use_id": format!("toolu_{id}"), "content": tool_output(name, args, *size)})
                                })
                                .collect();
                            out.push(json!({"role": "user", "content": results}));
                        }
                    }
                }
            }
        }
    }
    out
}

/// A generated history decoded in its wire format.
pub(crate) fn decode(items: &[Value], wire: Wire) -> Vec<Message> {
    let f = match wire {
        Wire::Chat => Format::Chat,
        Wire::Responses => Format::Responses,
        Wire::Anthropic => Format::Anthropic,
    };
    Request::from_value(Value::Array(items.to_vec()), f)
        .expect("generated history decodes")
        .messages
}

/// A JSON object from `json!` (panics in tests only).
pub(crate) fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(o) => o,
        _ => panic!("not an object"),
    }
}

/// Engine-test decorations over a rendered history, one mark per item
/// (cycled): pin assistant replies, tool results, reasoning items or user
/// messages; insert developer messages before a turn; paste a summary
/// look-alike into a user message (ordinary content, never our summary).
pub(crate) fn decorate(items: Vec<Value>, marks: &[u8], wire: Wire) -> Vec<Value> {
    if marks.is_empty() {
        return items;
    }
    let mut out = Vec::with_capacity(items.len() + 4);
    for (i, mut item) in items.into_iter().enumerate() {
        let mark = marks[i % marks.len()] % 16;
        let role = item.get("role").and_then(Value::as_str).unwrap_or("");
        let ty = item.get("type").and_then(Value::as_str).unwrap_or("");
        let is_reply = role == "assistant" && item.get("tool_calls").is_none();
        let tool_answer = is_tool_result_message(&item);
        let is_result = role == "tool" || ty == "function_call_output" || tool_answer;
        // An Anthropic history has no developer messages.
        let anthropic = wire == Wire::Anthropic;
        let role = if tool_answer { "" } else { role };
        let pin = json!({"protected": true, "label": format!("pin {i}")});
        match mark {
            0 if is_reply => item["meta"] = pin,
            1 if is_result => item["meta"] = pin,
            2 if role == "user" && !anthropic => {
                out.push(json!({"role": "developer", "content": format!("Developer note {i}: answers stay short.")}));
            }
            3 if role == "user" => {
                let text = match &item["content"] {
                    Value::Array(blocks) => blocks
                        .iter()
                        .filter_map(|b| b.get("text").and_then(Value::as_str))
                        .collect::<Vec<_>>()
                        .join(" "),
                    other => other.as_str().unwrap_or("").to_string(),
                };
                item["content"] = Value::String(format!("COMPACT-SUMMARY v1\n(pasted) {text}"));
            }
            4 if role == "user" => item["meta"] = pin,
            5 if ty == "reasoning" => item["meta"] = pin,
            _ => {}
        }
        out.push(item);
    }
    out
}

/// A random history for engine tests: [`arb_history`] plus [`decorate`].
pub(crate) fn arb_rich_history(
    wire: Wire,
    turns: std::ops::Range<usize>,
) -> impl Strategy<Value = Vec<Value>> {
    (
        arb_history(wire, turns),
        prop::collection::vec(any::<u8>(), 1..24),
    )
        .prop_map(move |(items, marks)| decorate(items, &marks, wire))
}

/// Index of the item that opens user turn `t` (the `t`-th user message; an Anthropic
/// message of tool results is none), or the length when there are fewer.
pub(crate) fn turn_boundary(items: &[Value], t: usize) -> usize {
    items
        .iter()
        .enumerate()
        .filter(|(_, v)| {
            v.get("role").and_then(Value::as_str) == Some("user") && !is_tool_result_message(v)
        })
        .map(|(i, _)| i)
        .nth(t)
        .unwrap_or(items.len())
}
