//! The message model: codecs, lossless round trip, groups, turns, validator.

mod support;

use compact_middleware::model::{
    Format, ItemType, Message, Problem, Request, Role, groups, lost_results, turns, validate,
};
use proptest::prelude::*;
use serde_json::{Value, json};
use support::{Wire, arb_history};

fn decode(v: Value) -> Vec<Message> {
    Request::from_value(v, Format::Auto)
        .expect("valid input")
        .messages
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn chat_round_trip_is_lossless(items in arb_history(Wire::Chat, 0..12)) {
        let req = Request::from_value(Value::Array(items.clone()), Format::Chat).unwrap();
        prop_assert_eq!(req.to_value(&req.messages, false), Value::Array(items.clone()));
        // Byte-identical too, key order included.
        prop_assert_eq!(serde_json::to_string(&req.messages).unwrap(), serde_json::to_string(&items).unwrap());
        prop_assert!(validate(&req.messages).is_empty());
    }

    #[test]
    fn responses_round_trip_is_lossless(items in arb_history(Wire::Responses, 0..12)) {
        let req = Request::from_value(json!({"session_id": "s", "messages": items.clone(), "config": {"x": 1}}), Format::Auto).unwrap();
        // A history with no Responses-only item is plain role/content: valid as chat too.
        let has_items = items.iter().any(|i| i.get("type").is_some());
        prop_assert_eq!(req.format, if has_items { Format::Responses } else { Format::Chat });
        let back = req.to_value(&req.messages, false);
        prop_assert_eq!(&back["messages"], &Value::Array(items.clone()));
        prop_assert_eq!(back.as_object().unwrap().keys().collect::<Vec<_>>(), vec!["session_id", "messages", "config"]);
        prop_assert!(validate(&req.messages).is_empty());
    }

    #[test]
    fn anthropic_round_trip_is_lossless(items in arb_history(Wire::Anthropic, 0..12)) {
        let mut v = json!({"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": items.clone()});
        let system = items.first().filter(|m| m["role"] == "system").cloned();
        if let Some(system) = &system {
            // The top-level form of the system prompt.
            v["messages"] = Value::Array(items[1..].to_vec());
            v["system"] = system["content"].clone();
        }
        let req = Request::from_value(v.clone(), Format::Anthropic).unwrap();
        let back = req.to_value(&req.messages, false);
        prop_assert_eq!(serde_json::to_string(&back).unwrap(), serde_json::to_string(&v).unwrap());
        prop_assert!(validate(&req.messages).is_empty());
        // A history with a tool_use or thinking block is recognised as Anthropic.
        let anthropic_only = serde_json::to_string(&items).unwrap().contains("\"tool_use\"");
        if anthropic_only {
            let auto = Request::from_value(v, Format::Auto).unwrap();
            prop_assert_eq!(auto.format, Format::Anthropic);
        }
    }

    #[test]
    fn anthropic_groups_never_split_a_pair(items in arb_history(Wire::Anthropic, 0..10)) {
        let req = Request::from_value(Value::Array(items), Format::Anthropic).unwrap();
        let ms = req.messages;
        let gs = groups(&ms);
        let mut next = 0;
        for g in &gs {
            prop_assert_eq!(g.start, next);
            next = g.end;
            prop_assert!(validate(&ms[g.clone()]).is_empty(), "group {:?} not self-contained", g);
        }
        prop_assert_eq!(next, ms.len());
    }

    #[test]
    fn groups_partition_and_never_split_a_pair(items in arb_history(Wire::Responses, 0..10)) {
        let ms = decode(Value::Array(items));
        let gs = groups(&ms);
        let mut next = 0;
        for g in &gs {
            prop_assert_eq!(g.start, next);
            prop_assert!(g.end > g.start);
            next = g.end;
            // Each group on its own is pairing-clean.
            prop_assert!(validate(&ms[g.clone()]).is_empty(), "group {:?} not self-contained", g);
        }
        prop_assert_eq!(next, ms.len());
    }
}

#[test]
fn provider_value_strips_meta_and_compacted_only() {
    let v = json!({"role": "user", "content": "hi", "meta": {"protected": true, "label": "policy"}, "compacted": true, "x_custom": 1});
    let m: Message = serde_json::from_value(v.clone()).unwrap();
    assert!(m.is_protected("protected"));
    assert_eq!(m.label(), Some("policy"));
    assert!(m.is_compacted());
    assert_eq!(m.to_value(), v);
    assert_eq!(
        m.to_provider_value(),
        json!({"role": "user", "content": "hi", "x_custom": 1})
    );
}

#[test]
fn parallel_chat_tool_calls_form_one_group() {
    let ms = decode(json!([
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u1"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "A"},
        {"role": "tool", "tool_call_id": "b", "content": "B"},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "u2"},
        {"role": "assistant", "content": "ok"}
    ]));
    assert_eq!(groups(&ms), vec![0..1, 1..2, 2..5, 5..6, 6..7, 7..8]);
    assert_eq!(turns(&ms), vec![0..1, 1..6, 6..8]);
    assert_eq!(ms[2].kind().calls.len(), 2);
    assert_eq!(ms[3].kind().item, ItemType::ToolResult);
    assert_eq!(ms[3].role(), Role::Tool);
}

#[test]
fn reasoning_binds_to_the_following_calls_in_responses() {
    let ms = decode(json!([
        {"role": "user", "content": "u"},
        {"type": "reasoning", "id": "rs1", "summary": []},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "1"},
        {"type": "function_call_output", "call_id": "c2", "output": "2"},
        {"type": "reasoning", "id": "rs2", "summary": []},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
        {"type": "reasoning", "id": "rs3", "summary": []}
    ]));
    assert_eq!(groups(&ms), vec![0..1, 1..6, 6..8, 8..9]);
}

#[test]
fn validator_finds_planted_orphans_with_indices() {
    let ms = decode(json!([
        {"role": "user", "content": "u"},
        {"role": "tool", "tool_call_id": "ghost", "content": "x"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "A"},
        {"role": "tool", "tool_call_id": "a", "content": "A again"}
    ]));
    assert_eq!(
        validate(&ms),
        vec![
            Problem::OrphanResult {
                index: 1,
                call_id: "ghost".into()
            },
            Problem::UnansweredCall {
                index: 2,
                call_id: "b".into()
            },
            Problem::DuplicateResult {
                index: 4,
                call_id: "a".into()
            },
        ]
    );
    assert_eq!(
        validate(&ms)[0].to_string(),
        "$[1]: tool result for call_id \"ghost\" has no preceding tool call"
    );
}

#[test]
fn lost_results_are_detected() {
    let before = decode(json!([
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "A"}
    ]));
    let after = vec![before[0].clone(), before[1].clone()];
    assert_eq!(lost_results(&before, &after), vec!["a".to_string()]);
    assert!(lost_results(&before, &before).is_empty());
    assert!(lost_results(&before, &before[..1]).is_empty());
}

#[test]
fn tool_output_and_arguments_can_be_rewritten_in_both_formats() {
    let mut ms = decode(json!([
        {"role": "assistant", "content": null, "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{\"k\":1}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "big"}
    ]));
    assert_eq!(ms[1].tool_output().as_deref(), Some("big"));
    assert!(ms[1].set_tool_output("small".into()));
    assert_eq!(
        ms[0].set_tool_arguments(|c| Some(format!("cleared {}", c.call_id))),
        1
    );
    assert_eq!(
        ms[0].raw()["tool_calls"][0]["function"]["arguments"],
        "cleared a"
    );
    assert_eq!(ms[1].raw()["content"], "small");

    let mut rs = decode(json!([
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "big"}
    ]));
    assert!(rs[1].set_tool_output("small".into()));
    assert_eq!(rs[1].raw()["output"], "small");
    assert_eq!(rs[0].set_tool_arguments(|_| Some("x".into())), 1);
    assert!(!rs[0].set_tool_output("nope".into()));
}

#[test]
fn content_hash_changes_with_content_and_is_stable() {
    let a: Message = serde_json::from_value(json!({"role": "user", "content": "ab"})).unwrap();
    let b: Message = serde_json::from_value(json!({"role": "user", "content": "ab"})).unwrap();
    let c: Message = serde_json::from_value(json!({"role": "user", "content": "ac"})).unwrap();
    assert_eq!(a.content_hash(), b.content_hash());
    assert_ne!(a.content_hash(), c.content_hash());
    let mut d = a.clone();
    d.set_meta("label", json!("x"));
    assert_ne!(a.content_hash(), d.content_hash());
}

#[test]
fn real_openai_agents_sdk_requests_decode_and_round_trip() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/openai-agents-0.24.0");
    let mut seen = 0;
    for sub in ["basic", "tool_error"] {
        for entry in std::fs::read_dir(dir.join(sub)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if !name.starts_with("preflight_request_") {
                continue;
            }
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let req = Request::from_value(v.clone(), Format::Auto).unwrap();
            assert_eq!(req.to_value(&req.messages, false), v, "{name}");
            assert!(
                validate(&req.messages).is_empty(),
                "{name}: {:?}",
                validate(&req.messages)
            );
            seen += 1;
        }
    }
    assert_eq!(seen, 9);
}

#[test]
fn envelope_errors_are_rooted_at_messages() {
    let e = Request::from_value(
        json!({"messages": [{"role": "user", "content": 1}]}),
        Format::Auto,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "$.messages[0].content: expected string or array of parts, got number"
    );
    let e = Request::from_value(json!(3), Format::Auto).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("$: expected an array of messages")
    );
    let e = Request::from_value(json!({"messages": [], "tools": {}}), Format::Auto).unwrap_err();
    assert_eq!(e.to_string(), "$.tools: expected array, got object");
}
