//! The Anthropic Messages wire format end to end: the codec (lossless round trip,
//! `system`, tool_use / tool_result blocks, thinking, images, documents, cache_control,
//! server compaction blocks), format detection, and a real Claude-shaped session through
//! every mode with no orphan, byte-identical signed blocks and alternating roles.
//!
//! `UPDATE_GOLDEN=1 cargo test -p compact-middleware --test anthropic` regenerates the
//! goldens under `tests/fixtures/anthropic/`.

mod cache_markers;
mod manager_support;
mod support;

use std::path::PathBuf;

use cache_markers::body_markers;
use compact_middleware::PreflightRequest;
use compact_middleware::cache::breakpoints::{self, Layer};
use compact_middleware::config::{CacheBreakpoints, CacheTtl, Mode, Policy};
use compact_middleware::model::{
    Format, ItemType, Message, Request, Role, Shape, groups, validate,
};
use compact_middleware::trigger::Forced;
use manager_support::policy_manager;
use serde_json::{Value, json};
use support::invariants::{Tracker, check_call};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/anthropic")
}

fn session_json() -> Value {
    let text = std::fs::read_to_string(fixtures().join("session.json")).expect("fixture");
    serde_json::from_str(&text).expect("fixture is JSON")
}

fn decode(v: Value) -> Request {
    Request::from_value(v, Format::Auto).expect("decodes")
}

fn err(v: Value, f: Format) -> String {
    match Request::from_value(v, f) {
        Ok(r) => format!("ok: {:?}", r.format),
        Err(e) => e.to_string(),
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn check_golden(name: &str, actual: &Value) {
    let path = fixtures().join(format!("{name}.golden.json"));
    let text = serde_json::to_string_pretty(actual).expect("json") + "\n";
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &text).expect("write golden");
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 creates it)", path.display()));
    assert_eq!(
        text, want,
        "golden {name} differs; UPDATE_GOLDEN=1 regenerates it"
    );
}

// ---------------------------------------------------------------- the codec

#[test]
fn a_real_session_decodes_and_round_trips_byte_for_byte() {
    let v = session_json();
    let req = decode(v.clone());
    assert_eq!(req.format, Format::Anthropic);
    // The top-level system is message 0, pinned and counted like a system message.
    let m0 = &req.messages[0];
    assert_eq!(m0.kind().shape, Shape::AnthropicSystem);
    assert_eq!(m0.role(), Role::System);
    assert_eq!(
        req.messages.len(),
        v["messages"].as_array().unwrap().len() + 1
    );
    assert_eq!(req.tools.len(), 5);
    // Lossless: the same JSON, key order included, unknown fields included.
    let back = req.to_value(&req.messages, true);
    assert_eq!(back, v);
    assert_eq!(
        serde_json::to_string(&back).unwrap(),
        serde_json::to_string(&v).unwrap()
    );
    assert!(validate(&req.messages).is_empty());
}

#[test]
fn tool_use_and_tool_result_blocks_are_calls_and_results() {
    let req = decode(session_json());
    let ms = &req.messages;
    // Parallel calls in one assistant message, answered in one user message.
    let parallel = ms
        .iter()
        .position(|m| m.kind().calls.len() == 2)
        .expect("the parallel call");
    assert_eq!(ms[parallel].role(), Role::Assistant);
    let answer = &ms[parallel + 1];
    assert_eq!(answer.kind().item, ItemType::ToolResult);
    assert_eq!(answer.role(), Role::Tool);
    assert_eq!(
        answer.kind().results,
        vec!["toolu_01B7mD4xP".to_string(), "toolu_01C2hZ8wR".to_string()]
    );
    assert!(!answer.starts_turn());
    let outputs = answer.tool_outputs();
    assert_eq!(outputs.len(), 2);
    assert!(outputs[0].1.starts_with("from decimal import Decimal"));
    // A user message mixing a tool_result and text is a result, not a new turn.
    let mixed = ms
        .iter()
        .find(|m| m.kind().results == ["toolu_01D5nB1vT"])
        .unwrap();
    assert!(!mixed.starts_turn());
    assert!(mixed.plain_text().contains("screenshot from staging"));
    // Each call with its results is one group.
    let gs = groups(ms);
    assert!(gs.contains(&(parallel..parallel + 2)));
    // Server tools are answered inside the assistant message: no pairing to keep.
    let web = ms
        .iter()
        .find(|m| m.plain_text().contains("issue #88"))
        .unwrap();
    assert!(web.kind().calls.is_empty() && web.kind().results.is_empty());
    // The message with the server compaction block is the provider's, pinned.
    let compaction: Vec<&Message> = ms.iter().filter(|m| m.kind().compaction).collect();
    assert_eq!(compaction.len(), 1);
    assert!(Policy::default().pins(compaction[0]));
    // Signed blocks are recognised.
    assert_eq!(ms.iter().filter(|m| m.has_signed_blocks()).count(), 3);
}

#[test]
fn tokens_count_text_not_base64_and_skip_cache_control() {
    let m = policy_manager(Policy::default(), 200_000);
    let req = decode(session_json());
    let est = m.estimate(&req.messages, &req.tools);
    // The screenshot is 3 KB of base64: a fixed image cost, not thousands of tokens.
    let with_image = req
        .messages
        .iter()
        .find(|m| m.kind().results == ["toolu_01D5nB1vT"])
        .unwrap();
    let c = m.estimator().count_message(with_image);
    assert!(
        (1600..1700).contains(&c),
        "image message costs {c}: 1600 for the image plus the text"
    );
    // cache_control is not rendered: adding it changes nothing.
    let plain =
        decode(json!([{"role": "user", "content": [{"type": "text", "text": "hello there"}]}]));
    let cached = decode(
        json!([{"role": "user", "content": [{"type": "text", "text": "hello there", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}]),
    );
    assert_eq!(
        m.estimator().count_message(&plain.messages[0]),
        m.estimator().count_message(&cached.messages[0])
    );
    // Redacted thinking is opaque; a thinking block counts its text, not its signature.
    let thinking = decode(json!([{"role": "assistant", "content": [
        {"type": "thinking", "thinking": "short", "signature": "x".repeat(4000)}]}]));
    assert!(m.estimator().count_message(&thinking.messages[0]) < 20);
    assert!(est.breakdown.system > 20 && est.breakdown.tools_schema > 40);
    assert!(est.t_est < 9000, "{est:?}");
}

#[test]
fn explicit_format_and_bare_arrays() {
    let items = json!([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}
    ]);
    let req = Request::from_value(items.clone(), Format::Anthropic).unwrap();
    assert_eq!(req.messages.len(), 3);
    assert_eq!(req.to_value(&req.messages, false), items);
    assert_eq!(decode(items).format, Format::Anthropic);
    // A plain role/content list fits every format and decodes as chat, unless the
    // envelope has Anthropic's top-level system.
    let plain = json!([{"role": "user", "content": "hi"}]);
    assert_eq!(decode(plain.clone()).format, Format::Chat);
    let env = decode(json!({"system": "be brief", "messages": plain}));
    assert_eq!(env.format, Format::Anthropic);
    assert_eq!(env.messages.len(), 2);
    // Writing back: the system goes to `system`, never into `messages`.
    let back = env.to_value(&env.messages, true);
    assert_eq!(
        back,
        json!({"system": "be brief", "messages": [{"role": "user", "content": "hi"}]})
    );
    // Without the system message, `system` goes away.
    let back = env.to_value(&env.messages[1..], true);
    assert_eq!(
        back,
        json!({"messages": [{"role": "user", "content": "hi"}]})
    );
}

#[test]
fn auto_refuses_what_it_cannot_classify_and_names_the_item() {
    assert_eq!(
        err(
            json!([{"role": "user", "content": "a"}, {"content": "x"}]),
            Format::Auto
        ),
        "$[1]: cannot tell the wire format of this item (neither a role nor a type); pass --format chat, responses or anthropic"
    );
    // Chat and Anthropic tool results cannot share a list.
    let e = err(
        json!([
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
            {"role": "tool", "tool_call_id": "t1", "content": "ok"}
        ]),
        Format::Auto,
    );
    assert!(e.starts_with("$[1]: the list mixes wire formats: this item is Chat Completions (role \"tool\"), but $[0] is Anthropic Messages (a \"tool_use\" content part)"), "{e}");
    // In an envelope the path starts at $.messages.
    let e = err(
        json!({"messages": [{"role": "tool", "tool_call_id": "c", "content": "x"}, {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}]}),
        Format::Auto,
    );
    assert!(
        e.starts_with("$.messages[1]: the list mixes wire formats"),
        "{e}"
    );
    // One item that fits no format on its own.
    let e = err(
        json!([{"role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "tool_result", "tool_use_id": "x"}]}]),
        Format::Auto,
    );
    assert!(
        e.starts_with("$[0]: cannot tell the wire format of this item"),
        "{e}"
    );
    // Chat-style messages beside Responses items are valid Responses input.
    let mixed = decode(json!([
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "ok"},
        {"role": "assistant", "content": "done"}
    ]));
    assert_eq!(mixed.format, Format::Responses);
}

#[test]
fn decoding_errors_name_the_json_path() {
    let a = Format::Anthropic;
    assert_eq!(
        err(
            json!([{"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]),
            a
        ),
        "$[0].content[0]: a tool_use block in a user message (tool calls belong to the assistant)"
    );
    assert_eq!(
        err(
            json!([{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}]),
            a
        ),
        "$[0].content[0].tool_use_id: missing (expected string)"
    );
    assert_eq!(
        err(
            json!([{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": "{}"}]}]),
            a
        ),
        "$[0].content[0].input: expected object, got string"
    );
    assert_eq!(
        err(json!({"system": 3, "messages": []}), a),
        "$.system: expected string or array of text blocks, got number"
    );
    assert_eq!(
        err(json!([{"role": "user", "content": null}]), a),
        "$[0].content: expected string or array of content blocks, got null"
    );
    assert!(
        err(
            json!([{"role": "tool", "tool_call_id": "c", "content": "x"}]),
            a
        )
        .contains("use --format chat or auto")
    );
    // An Anthropic block forced through the chat decoder is named, not swallowed.
    assert_eq!(
        err(
            json!([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "y"}]}]),
            Format::Chat
        ),
        "$[0].content[0]: an Anthropic tool_result block outside anthropic format; use --format anthropic or auto"
    );
}

// ---------------------------------------------------------------- the engine

/// Roles on the wire, the system prompt left out (it is not a message there).
fn wire_roles(msgs: &[Message]) -> Vec<String> {
    msgs.iter()
        .filter(|m| m.role() != Role::System)
        .map(|m| m.raw()["role"].as_str().unwrap_or("").to_string())
        .collect()
}

/// Every Anthropic-specific promise about one output.
fn check_anthropic(input: &[Message], output: &[Message]) {
    assert!(
        validate(output).is_empty(),
        "pairing: {:?}",
        validate(output)
    );
    // Signed blocks: their message comes out byte-identical, or not at all.
    for m in output.iter().filter(|m| m.has_signed_blocks()) {
        assert!(
            input.iter().any(|i| i.to_value() == m.to_value()),
            "a message with thinking blocks changed: {}",
            m.to_value()
        );
    }
    // The provider's compaction survives byte-identical.
    for m in input.iter().filter(|m| m.kind().compaction) {
        assert!(output.iter().any(|o| o == m), "provider compaction lost");
    }
    // User first (or the provider's compaction message, which is how the API itself
    // continues after compacting), then strict alternation.
    let roles = wire_roles(output);
    let first = output.iter().find(|m| m.role() != Role::System);
    assert!(
        roles.first().map(String::as_str) == Some("user")
            || first.is_some_and(|m| m.kind().compaction),
        "{roles:?}"
    );
    for w in roles.windows(2) {
        assert_ne!(w[0], w[1], "two {} messages in a row: {roles:?}", w[0]);
    }
}

#[test]
fn every_mode_keeps_pairs_thinking_and_alternation() {
    let rt = rt();
    let v = session_json();
    for mode in [
        Mode::None,
        Mode::Trim,
        Mode::Compact,
        Mode::Summarize,
        Mode::Auto,
    ] {
        for (window, keep) in [(6000, 2), (4500, 1), (20_000, 3)] {
            let policy = Policy {
                mode,
                keep_recent_turns: keep,
                keep_tool_io_pairs: 1,
                hard_cap_buffer: 500,
                clear_tool_inputs: true,
                ..Policy::default()
            };
            let m = policy_manager(policy, window);
            let req = decode(v.clone());
            let mut tracker = Tracker::new();
            for forced in [None, Some(Forced::Manual)] {
                let result = rt.block_on(m.preflight_with(
                    "s",
                    PreflightRequest {
                        messages: req.messages.clone(),
                        tools: req.tools.clone(),
                        forced,
                        ..PreflightRequest::default()
                    },
                ));
                let mut fresh = Tracker::new();
                let t = if forced.is_none() {
                    &mut tracker
                } else {
                    &mut fresh
                };
                if let Err(e) = check_call(&m, t, &req.messages, &req.tools, &result) {
                    panic!("{mode:?} window {window} keep {keep} forced {forced:?}: {e}");
                }
                let o = match result {
                    Ok(o) => o,
                    Err(e) => panic!("{mode:?} window {window}: {e}"),
                };
                let label = format!("{mode:?} window {window} keep {keep} forced {forced:?}");
                let checked =
                    std::panic::catch_unwind(|| check_anthropic(&req.messages, &o.messages));
                if checked.is_err() {
                    let out: Vec<Value> = o
                        .messages
                        .iter()
                        .map(|m| {
                            let t = m.plain_text();
                            json!([m.raw()["role"], t.chars().take(60).collect::<String>()])
                        })
                        .collect();
                    panic!("{label}: {}", serde_json::to_string_pretty(&out).unwrap());
                }
                // Written back, the request is a valid Anthropic request.
                let back = req.to_value(&o.messages, true);
                assert_eq!(back["system"], v["system"]);
                assert!(
                    back["messages"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .all(|m| m["role"] != "system" && m.get("meta").is_none())
                );
                m.end_session("s");
            }
        }
    }
}

#[test]
fn cleared_results_keep_their_id_and_attachments_become_text() {
    // `cache_breakpoints: off` gives today's output byte for byte: the
    // goldens predate breakpoints (auto: `breakpoints_on_the_golden_sessions`).
    let policy = Policy {
        mode: Mode::Compact,
        keep_recent_turns: 1,
        keep_tool_io_pairs: 0,
        cache_breakpoints: CacheBreakpoints::Off,
        ..Policy::default()
    };
    let m = policy_manager(policy, 200_000);
    let req = decode(session_json());
    let o = rt()
        .block_on(m.manual_compact("s", req.messages.clone(), "test"))
        .expect("compacts");
    let out = req.to_value(&o.messages, true);
    let msgs = out["messages"].as_array().unwrap();
    let results: Vec<&Value> = msgs
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_result")
        .collect();
    assert_eq!(results.len(), 5);
    for r in &results {
        let id = r["tool_use_id"].as_str().unwrap();
        assert!(
            r["content"]
                .as_str()
                .unwrap()
                .starts_with("⟦removed: tool output for ")
                && r["content"].as_str().unwrap().contains(id),
            "{r}"
        );
    }
    // is_error and cache_control stay on the cleared blocks.
    assert!(results.iter().any(|r| r["is_error"] == true));
    assert!(
        results
            .iter()
            .any(|r| r["cache_control"]["type"] == "ephemeral")
    );
    // The screenshot became a text placeholder; the document too, with its cache_control.
    let text = out.to_string();
    assert!(!text.contains("iVBORw0KGgo"));
    assert!(text.contains("⟦removed: image (image/png); reason=context_compaction⟧"));
    assert!(text.contains("⟦removed: document \\\"CHANGELOG.md\\\"; reason=context_compaction⟧"));
    check_anthropic(&req.messages, &o.messages);
    check_golden("session.compact", &out);
}

#[test]
fn the_summary_is_a_user_message_bridged_to_alternate() {
    let policy = Policy {
        mode: Mode::Summarize,
        keep_recent_turns: 1,
        keep_tool_io_pairs: 0,
        summary_role: compact_middleware::config::Role::System,
        cache_breakpoints: CacheBreakpoints::Off,
        ..Policy::default()
    };
    let m = policy_manager(policy, 200_000);
    let req = decode(session_json());
    let rt = rt();
    let o = rt
        .block_on(m.manual_compact("s", req.messages.clone(), "test"))
        .expect("compacts");
    check_anthropic(&req.messages, &o.messages);
    let out = req.to_value(&o.messages, true);
    let msgs = out["messages"].as_array().unwrap();
    // The provider's compaction message first (the API drops what came before it),
    // then the task (the first request after it, kept like a pinned message), a
    // bridge, the summary as a user message (the configured system role does not
    // exist in Anthropic messages), a bridge, and the kept turn, which opens with a
    // user message.
    assert!(o.messages[1].kind().compaction);
    assert_eq!(msgs[0]["role"], "assistant");
    assert_eq!(msgs[1]["role"], "user");
    assert!(
        msgs[1]["content"]
            .as_str()
            .unwrap()
            .starts_with("Thanks. Is this a known issue")
    );
    assert!(o.messages[3].is_bridge());
    assert!(
        msgs[3]["content"]
            .as_str()
            .unwrap()
            .starts_with("COMPACT-SUMMARY v1")
    );
    assert_eq!(msgs[3]["role"], "user");
    assert!(o.messages[5].is_bridge());
    assert_eq!(msgs[4]["role"], "assistant");
    assert_eq!(msgs[5]["role"], "user");
    assert_eq!(msgs.len(), 6);
    check_golden("session.summarize", &out);

    // The next call (the agent kept our output and appended) recognises summary and
    // bridge, folds both into the next summary and bridges again.
    let mut next = o.messages.clone();
    next.push(Message::assistant("Committed as 4f2a9c1."));
    next.push(Message::user("Now open a pull request."));
    let next: Vec<Message> = decode(Value::Array(
        next.iter().map(Message::to_provider_value).collect(),
    ))
    .messages;
    let o2 = rt
        .block_on(m.manual_compact("s", next.clone(), "again"))
        .expect("compacts again");
    assert_eq!(o2.report.summary_version, Some(2));
    check_anthropic(&next, &o2.messages);
    // One bridge after the task, one after the summary.
    assert_eq!(o2.messages.iter().filter(|m| m.is_bridge()).count(), 2);
    assert!(
        !o2.messages
            .iter()
            .any(|m| m.plain_text().contains("COMPACT-SUMMARY v1"))
    );
}

#[test]
fn a_pinned_user_message_before_the_summary_gets_a_bridge_too() {
    let items = json!([
        {"role": "user", "content": "Task: keep the API stable.", "meta": {"protected": true}},
        {"role": "assistant", "content": [{"type": "text", "text": "Noted."}]},
        {"role": "user", "content": "Step one."},
        {"role": "assistant", "content": "Done one."},
        {"role": "user", "content": "Step two."},
        {"role": "assistant", "content": "Done two."},
        {"role": "user", "content": "Step three."}
    ]);
    let policy = Policy {
        mode: Mode::Summarize,
        keep_recent_turns: 1,
        ..Policy::default()
    };
    let m = policy_manager(policy, 200_000);
    let req = Request::from_value(items, Format::Anthropic).unwrap();
    let o = rt()
        .block_on(m.manual_compact("s", req.messages.clone(), "test"))
        .expect("compacts");
    let roles = wire_roles(&o.messages);
    assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
    assert!(o.messages[1].is_bridge() && o.messages[3].is_bridge());
    check_anthropic(&req.messages, &o.messages);
}

// ---------------------------------------------------------------- provider compaction

/// A Responses history the provider compacted: kept user messages and the opaque
/// compaction item (what `/responses/compact` returns), then what the agent appended.
fn responses_compacted(after: usize) -> Vec<Message> {
    let mut items = vec![
        json!({"role": "user", "content": "Plan the migration of the billing service."}),
        json!({"type": "compaction", "id": "cmp_01", "encrypted_content": "gAAAAABo".repeat(200)}),
    ];
    for i in 0..after {
        items.push(json!({"role": "user", "content": format!("Go on with step {i}.")}));
        items.push(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": format!("Done with step {i}. {}", "notes ".repeat(800))}]}));
    }
    Request::from_value(Value::Array(items), Format::Auto)
        .expect("decodes")
        .messages
}

#[test]
fn a_fresh_provider_compaction_skips_ours_and_says_why() {
    let policy = Policy {
        keep_recent_turns: 1,
        hard_cap_buffer: 50,
        ..Policy::default()
    };
    let m = policy_manager(policy, 950);
    let rt = rt();
    // New session, one turn after the compaction item: the provider just compacted.
    let first = responses_compacted(1);
    assert!(
        m.estimate(&first, &[]).usage_pct >= 0.85,
        "the test must trigger"
    );
    let o = rt.block_on(m.preflight("p", first.clone())).expect("ok");
    assert!(!o.report.triggered);
    assert!(
        o.report
            .reason
            .starts_with("skipped: the provider compacted this context in its last response (fresh compaction at $[1])"),
        "{}",
        o.report.reason
    );
    assert_eq!(o.messages, first);
    // The next call carries the same item: no longer fresh, ours runs; the item stays,
    // pinned, byte-identical, with the group after it.
    let mut next = o.messages.clone();
    next.extend(responses_compacted(3).into_iter().skip(4));
    let o2 = rt.block_on(m.preflight("p", next.clone())).expect("ok");
    assert!(o2.report.triggered, "{}", o2.report.reason);
    let at = o2
        .messages
        .iter()
        .position(|x| x.kind().compaction)
        .expect("compaction item kept");
    assert_eq!(o2.messages[at], next[1]);
    assert_eq!(
        o2.messages[at + 1],
        next[2],
        "the item after it stays with it"
    );
    // Forced compaction still runs, and says so.
    let o3 = rt
        .block_on(m.manual_compact("q", first, "by hand"))
        .expect("ok");
    assert!(o3.report.triggered);
    assert!(
        o3.report
            .reason
            .contains("forced despite a fresh provider compaction")
    );
}

#[test]
fn an_anthropic_compaction_block_is_fresh_right_after_the_response() {
    let v = session_json();
    let all = decode(v).messages;
    let at = all.iter().position(|m| m.kind().compaction).unwrap();
    let m = policy_manager(
        Policy {
            keep_recent_turns: 1,
            ..Policy::default()
        },
        5000,
    );
    let rt = rt();
    // The response with the compaction block, then the user's next message.
    let fresh = all[..at + 2].to_vec();
    assert!(m.estimate(&fresh, &[]).usage_pct >= 0.85);
    let o = rt.block_on(m.preflight("a", fresh.clone())).expect("ok");
    assert!(
        !o.report.triggered && o.report.reason.starts_with("skipped:"),
        "{}",
        o.report.reason
    );
    // Two turns later (a new session that never saw it): not fresh; compaction runs
    // and keeps the block's message byte-identical.
    let later = all.clone();
    let o = rt.block_on(m.preflight("b", later.clone())).expect("ok");
    assert!(o.report.triggered, "{}", o.report.reason);
    assert!(o.messages.contains(&all[at]));
    check_anthropic(&later, &o.messages);
}

// ------------------------------------------------ cache_control breakpoints

fn strip_markers(v: &mut Value) {
    match v {
        Value::Object(o) => {
            o.shift_remove("cache_control");
            o.values_mut().for_each(strip_markers);
            // A string made one text block to carry a breakpoint.
            if let Some(Value::Array(c)) = o.get("content")
                && c.len() == 1
                && c[0].get("type").and_then(Value::as_str) == Some("text")
                && c[0].as_object().is_some_and(|b| b.len() == 2)
            {
                let text = c[0]["text"].clone();
                o.insert("content".into(), text);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(strip_markers),
        _ => {}
    }
}

fn assert_provider_accepts(body: &Value) {
    let m = body_markers(body);
    assert!(m.len() <= 4, "{} breakpoints: {m:?}", m.len());
    for bad in ["thinking", "redacted_thinking", "empty text"] {
        assert!(!m.iter().any(|t| t == bad), "a breakpoint on {bad}: {m:?}");
    }
}

#[test]
fn breakpoints_on_the_golden_sessions() {
    let rt = rt();
    let req = decode(session_json());
    let golden = |name: &str| -> Value {
        let text = std::fs::read_to_string(fixtures().join(format!("{name}.golden.json")))
            .expect("golden");
        serde_json::from_str(&text).expect("json")
    };
    // The session already has four of the caller's (the system prompt, a
    // tool, two messages). Given the tools, compact adds none.
    let policy = Policy {
        mode: Mode::Compact,
        keep_recent_turns: 1,
        keep_tool_io_pairs: 0,
        ..Policy::default()
    };
    let m = policy_manager(policy.clone(), 200_000);
    let o = rt
        .block_on(m.preflight_with(
            "with-tools",
            PreflightRequest {
                messages: req.messages.clone(),
                tools: req.tools.clone(),
                forced: Some(Forced::Manual),
                ..PreflightRequest::default()
            },
        ))
        .expect("compacts");
    assert!(o.report.cache_breakpoints.is_empty());
    assert_eq!(req.to_value(&o.messages, true), golden("session.compact"));
    // Without them (`manual_compact` takes none), the core counts three and
    // adds one; the request as sent counts the tools' and ours gives way.
    let o = rt
        .block_on(m.manual_compact("no-tools", req.messages.clone(), "test"))
        .expect("compacts");
    assert_eq!(o.report.cache_breakpoints.len(), 1);
    let (mut sent, mut placed) = (o.messages.clone(), o.report.cache_breakpoints.clone());
    assert_eq!(breakpoints::fit_request(&req, &mut sent, &mut placed), 1);
    let body = req.to_value(&sent, true);
    assert_provider_accepts(&body);
    assert_eq!(body, golden("session.compact"));

    // Summarized, most of the caller's are gone with what they marked: ours
    // fill the four, and without them the output is today's.
    let policy = Policy {
        mode: Mode::Summarize,
        keep_recent_turns: 1,
        keep_tool_io_pairs: 0,
        summary_role: compact_middleware::config::Role::System,
        ..Policy::default()
    };
    let m = policy_manager(policy, 200_000);
    let o = rt
        .block_on(m.manual_compact("s", req.messages.clone(), "test"))
        .expect("compacts");
    check_anthropic(&req.messages, &o.messages);
    let (mut sent, mut placed) = (o.messages.clone(), o.report.cache_breakpoints.clone());
    breakpoints::fit_request(&req, &mut sent, &mut placed);
    let body = req.to_value(&sent, true);
    assert_provider_accepts(&body);
    assert_eq!(body_markers(&body).len(), 4, "{:?}", body_markers(&body));
    let layers: Vec<Layer> = placed.iter().map(|p| p.layer).collect();
    assert!(layers.contains(&Layer::Head), "{placed:?}");
    assert_eq!(
        req.to_value(&breakpoints::without(&sent, &placed), true),
        golden("session.summarize")
    );
    // The stable head ends with the bridge after the summary, which the
    // summary, a message of ours, could carry as well.
    let head = placed
        .iter()
        .find(|p| p.layer == Layer::Head)
        .expect("head");
    assert!(
        o.messages[head.index - 1]
            .plain_text()
            .starts_with("COMPACT-SUMMARY v1")
    );
    assert!(
        body["messages"][head.index - 1]["content"][0]
            .get("cache_control")
            .is_some()
    );
}

/// An agent loop on the Anthropic wire: a system prompt, tools, a task, then
/// rounds of a tool call and its (long) result. The agent keeps what compact
/// returns, breakpoints and all, and appends the next round.
fn agent_session(
    breakpoints_setting: CacheBreakpoints,
    calls: usize,
) -> Vec<(Value, compact_middleware::PreflightOutcome)> {
    agent_session_with(
        Policy {
            cache_breakpoints: breakpoints_setting,
            ..Policy::default()
        },
        calls,
    )
}

/// [`agent_session`] with `policy`'s cache settings.
fn agent_session_with(
    policy: Policy,
    calls: usize,
) -> Vec<(Value, compact_middleware::PreflightOutcome)> {
    let policy = Policy {
        keep_recent_turns: 1,
        keep_tool_io_pairs: 2,
        keep_recent_rounds: 2,
        ..policy
    };
    let m = policy_manager(policy, 6_000);
    let rt = rt();
    let tools = json!([{"name": "shell", "description": "Run a command.", "input_schema": {"type": "object"}}]);
    let mut history: Vec<Value> = vec![
        json!({"role": "user", "content": "The nightly build fails; find out why and fix it."}),
    ];
    let mut out = Vec::new();
    for i in 0..calls {
        if i > 0 {
            history.push(json!({"role": "assistant", "content": [
                {"type": "text", "text": format!("Round {i}: checking the next log.")},
                {"type": "tool_use", "id": format!("toolu_{i:03}"), "name": "shell", "input": {"cmd": format!("cat logs/{i}.log")}}]}));
            let log: String = (0..40)
                .map(|l| format!("[{i}:{l}] step {l} of build {i}: ok, 12.{l}s\n"))
                .collect();
            history.push(json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": format!("toolu_{i:03}"), "content": log}]}));
        }
        let body = json!({"model": "claude-sonnet-4-5", "max_tokens": 1024,
            "system": "You are a build engineer. Be precise.", "tools": tools, "messages": history});
        let req = decode(body);
        let o = rt
            .block_on(m.preflight_with(
                "agent",
                PreflightRequest {
                    messages: req.messages.clone(),
                    tools: req.tools.clone(),
                    ..PreflightRequest::default()
                },
            ))
            .expect("preflight");
        let sent = req.to_value(&o.messages, true);
        // The agent keeps what it sent.
        history = sent["messages"].as_array().cloned().unwrap_or_default();
        out.push((sent, o));
    }
    out
}

#[test]
fn an_agent_that_keeps_our_output_gets_breakpoints_that_move_and_never_pile_up() {
    let calls = agent_session(CacheBreakpoints::Auto, 24);
    assert!(
        calls.iter().any(|(_, o)| o.report.triggered),
        "nothing compacted"
    );
    for (i, (body, o)) in calls.iter().enumerate() {
        assert_provider_accepts(body);
        // Ours are taken off what comes back and placed anew: the end of the
        // history always has one, whatever the previous calls placed.
        assert!(
            o.report
                .cache_breakpoints
                .iter()
                .any(|p| p.layer == Layer::End),
            "call {i}: {:?}",
            o.report.cache_breakpoints
        );
        let last = body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .expect("a message");
        assert!(
            !body_markers(&json!({"m": last})).is_empty(),
            "call {i}: no breakpoint at the end"
        );
        if i > 0 {
            assert_ne!(
                o.report.continuation,
                compact_middleware::manager::ContinuationKind::Fresh,
                "call {i} was not recognised"
            );
        }
    }
    // Between compactions, each request starts with the previous one: the
    // system prompt and the stable head byte for byte, breakpoints included,
    // every other message byte for byte but for a breakpoint that moved on,
    // and the previous request's end still carries one, so the entry it
    // wrote is read whatever the lookback.
    let unmarked = |v: &Value| -> String {
        let mut v = v.clone();
        strip_markers(&mut v);
        v.to_string()
    };
    let mut stable = 0;
    for w in calls.windows(2) {
        let ((a, oa), (b, ob)) = (&w[0], &w[1]);
        if ob.report.triggered {
            continue;
        }
        assert_eq!(a["system"].to_string(), b["system"].to_string());
        let (am, bm) = (
            a["messages"].as_array().unwrap(),
            b["messages"].as_array().unwrap(),
        );
        for (k, m) in am.iter().enumerate() {
            assert_eq!(unmarked(m), unmarked(&bm[k]), "message {k}");
        }
        // (Message 0 is the system prompt, compared above.)
        for p in &oa.report.cache_breakpoints {
            if matches!(p.layer, Layer::Instructions | Layer::Head) && p.index > 0 {
                let k = p.index - 1;
                assert_eq!(am[k].to_string(), bm[k].to_string(), "{p:?}");
            }
        }
        let end = am.len() - 1;
        assert!(
            !body_markers(&bm[end]).is_empty(),
            "the previous end lost its breakpoint"
        );
        stable += 1;
    }
    assert!(stable >= 3, "only {stable} calls without compaction");
    // The predicted cache reads the previous request back on those calls.
    let read: Vec<usize> = calls
        .iter()
        .filter_map(|(_, o)| o.report.cache.map(|c| c.predicted_read))
        .collect();
    assert!(read.iter().any(|&r| r > 0), "{read:?}");
}

#[test]
fn with_cache_ttl_1h_every_breakpoint_of_ours_asks_for_an_hour_call_after_call() {
    let calls = agent_session_with(
        Policy {
            cache_ttl: CacheTtl::OneHour,
            ..Policy::default()
        },
        24,
    );
    assert!(
        calls.iter().any(|(_, o)| o.report.triggered),
        "nothing compacted"
    );
    let hour = json!({"type": "ephemeral", "ttl": "1h"});
    for (i, (body, o)) in calls.iter().enumerate() {
        assert_provider_accepts(body);
        // The agent sends none of its own and keeps what we send: the ones
        // it sends back are taken off, so every marker is one of this call's.
        let mut all = Vec::new();
        collect_cache_controls(body, &mut all);
        assert!(!all.is_empty(), "call {i}");
        assert_eq!(
            all.len(),
            o.report.cache_breakpoints.len(),
            "call {i}: piled up"
        );
        assert!(all.iter().all(|c| *c == hour), "call {i}: {all:?}");
        assert!(o.report.cache_breakpoints.iter().all(|p| p.one_hour));
        let report = serde_json::to_value(&o.report).expect("serializes");
        assert_eq!(report["cache_breakpoints"][0]["one_hour"], json!(true));
    }
}

fn collect_cache_controls(v: &Value, out: &mut Vec<Value>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                if k == "cache_control" {
                    out.push(x.clone());
                } else {
                    collect_cache_controls(x, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect_cache_controls(x, out)),
        _ => {}
    }
}

#[test]
fn breakpoints_off_reproduces_the_output_without_them_byte_for_byte() {
    let auto = agent_session(CacheBreakpoints::Auto, 24);
    let off = agent_session(CacheBreakpoints::Off, 24);
    for (i, ((_, a), (body, o))) in auto.iter().zip(&off).enumerate() {
        assert!(o.report.cache_breakpoints.is_empty());
        assert!(body_markers(body).is_empty(), "call {i}: {body}");
        assert!(
            serde_json::to_value(&o.report)
                .unwrap()
                .get("cache_breakpoints")
                .is_none()
        );
        // Breakpoints are the one difference: the same compaction, the same
        // decisions, byte for byte.
        let a_plain: Vec<Value> = a
            .compacted_messages()
            .iter()
            .map(Message::to_value)
            .collect();
        let o_plain: Vec<Value> = o.messages.iter().map(Message::to_value).collect();
        assert_eq!(
            serde_json::to_string(&a_plain).unwrap(),
            serde_json::to_string(&o_plain).unwrap(),
            "call {i}"
        );
        assert_eq!(a.report.triggered, o.report.triggered, "call {i}");
        assert_eq!(a.report.tokens_after, o.report.tokens_after, "call {i}");
        assert_eq!(a.report.continuation, o.report.continuation, "call {i}");
    }
}
