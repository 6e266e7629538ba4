//! Repair of broken pairing (`policy.repair: fix`): orphaned and duplicate tool results
//! are dropped, and calls that never got a result are answered with a placeholder, in
//! the shape of their wire format, right where the provider expects the result.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{Map, Value};

use super::message::{CallRef, ItemType, Kind, Message, Role, Shape};
use super::validate::{Problem, validate};

/// What repair did about one pairing problem. `index` is the position in the input of
/// the item that held the result, or made the call.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Repaired {
    /// A tool result with no call before it was dropped.
    DroppedOrphan {
        /// Index of the item that carried the result.
        index: usize,
        /// The call id it claimed to answer.
        call_id: String,
    },
    /// A second result for one call was dropped.
    DroppedDuplicate {
        /// Index of the item that carried the second result.
        index: usize,
        /// The call it answered again.
        call_id: String,
    },
    /// A call with no result got a placeholder result.
    AnsweredCall {
        /// Index of the item that made the call.
        index: usize,
        /// The call that is now answered.
        call_id: String,
    },
}

/// The result a repaired call gets: it says the call never returned.
pub fn missing_result_placeholder(name: &str, call_id: &str) -> String {
    format!("⟦no result: tool call {name} (call_id={call_id}) never returned; reason=repair⟧")
}

/// Marks an item repair changed or created (ours, stripped from the provider view).
const REPAIRED_META: &str = "repaired";

/// Fixes every pairing problem of `messages`: drops orphaned and duplicate results
/// (the whole item, or the one Anthropic `tool_result` block) and answers unanswered
/// calls with [`missing_result_placeholder`]. Returns the fixed list and what was done,
/// in input order. A list without problems comes back unchanged.
pub fn repair(messages: Vec<Message>) -> (Vec<Message>, Vec<Repaired>) {
    let problems = validate(&messages);
    if problems.is_empty() {
        return (messages, Vec::new());
    }
    let mut done = Vec::new();
    // Results to drop, per item: (call id, duplicate?).
    let mut drops: BTreeMap<usize, Vec<(String, bool)>> = BTreeMap::new();
    let mut unanswered: BTreeMap<usize, BTreeSet<String>> = BTreeMap::new();
    for p in problems {
        match p {
            Problem::OrphanResult { index, call_id } => {
                drops
                    .entry(index)
                    .or_default()
                    .push((call_id.clone(), false));
                done.push(Repaired::DroppedOrphan { index, call_id });
            }
            Problem::DuplicateResult { index, call_id } => {
                drops
                    .entry(index)
                    .or_default()
                    .push((call_id.clone(), true));
                done.push(Repaired::DroppedDuplicate { index, call_id });
            }
            Problem::UnansweredCall { index, call_id } => {
                unanswered.entry(index).or_default().insert(call_id.clone());
                done.push(Repaired::AnsweredCall { index, call_id });
            }
        }
    }

    // Drops first: they never move an unanswered call's item, only remove or edit results.
    let mut slots: Vec<Option<Message>> = messages.into_iter().map(Some).collect();
    for (&i, ids) in &drops {
        if let Some(m) = slots[i].take() {
            slots[i] = drop_results(m, ids);
        }
    }
    // Then the answers, from the last call backwards, so insertion points stay valid.
    let mut out: Vec<Option<Message>> = slots;
    for (&i, ids) in unanswered.iter().rev() {
        let Some(call_item) = out[i].clone() else {
            continue;
        };
        let calls: Vec<CallRef> = call_item
            .kind()
            .calls
            .iter()
            .filter(|c| ids.contains(&c.call_id))
            .cloned()
            .collect();
        answer(&mut out, i, &call_item, &calls);
    }
    done.sort_by_key(|r| match r {
        Repaired::DroppedOrphan { index, .. }
        | Repaired::DroppedDuplicate { index, .. }
        | Repaired::AnsweredCall { index, .. } => *index,
    });
    (out.into_iter().flatten().collect(), done)
}

/// `m` without the results in `ids` (`true`: drop a second occurrence only); `None`
/// when nothing of it is left.
fn drop_results(m: Message, ids: &[(String, bool)]) -> Option<Message> {
    if m.kind().shape != Shape::AnthropicMessage {
        // One result per item: the item goes.
        return None;
    }
    let mut raw = m.raw().clone();
    if let Some(Value::Array(blocks)) = raw.get_mut("content") {
        for (id, duplicate) in ids {
            let matching: Vec<usize> = blocks
                .iter()
                .enumerate()
                .filter(|(_, b)| {
                    b.get("type").and_then(Value::as_str) == Some("tool_result")
                        && b.get("tool_use_id").and_then(Value::as_str) == Some(id.as_str())
                })
                .map(|(k, _)| k)
                .collect();
            // A duplicate across items is this item's only block for the id; within one
            // item, the first block stays.
            let victims: Vec<usize> = if *duplicate && matching.len() > 1 {
                matching[1..].to_vec()
            } else {
                matching
            };
            for k in victims.into_iter().rev() {
                blocks.remove(k);
            }
        }
        if blocks.is_empty() {
            return None;
        }
    }
    redecode_anthropic(raw)
}

fn redecode_anthropic(mut raw: Map<String, Value>) -> Option<Message> {
    let meta = raw
        .entry("meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(meta) = meta {
        meta.insert(REPAIRED_META.into(), Value::Bool(true));
    }
    let kind = super::anthropic::kind(&raw, "$").ok()?;
    Some(Message::from_parts(raw, kind))
}

/// Adds placeholder results for `calls` of the item at `i`, where the provider wants
/// them: after the results already there (Chat, Responses), or as `tool_result` blocks
/// in the user message right after the call (Anthropic).
fn answer(out: &mut Vec<Option<Message>>, i: usize, call_item: &Message, calls: &[CallRef]) {
    if calls.is_empty() {
        return;
    }
    match call_item.kind().shape {
        Shape::AnthropicMessage => answer_anthropic(out, i, calls),
        shape => {
            // After the run of results (and, for Responses, calls and reasoning) that
            // follows the call.
            let belongs = |m: &Message| match shape {
                Shape::ChatMessage => m.kind().item == ItemType::ToolResult,
                _ => matches!(
                    m.kind().item,
                    ItemType::ToolResult | ItemType::ToolCall | ItemType::Reasoning
                ),
            };
            let mut at = i + 1;
            while at < out.len() && out[at].as_ref().is_none_or(belongs) {
                at += 1;
            }
            let ty = call_item.raw().get("type").and_then(Value::as_str);
            for (k, c) in calls.iter().enumerate() {
                let m = match shape {
                    Shape::ResponsesCall => responses_output(ty.unwrap_or("function_call"), c),
                    _ => chat_result(c),
                };
                out.insert(at + k, Some(m));
            }
        }
    }
}

fn mark(mut raw: Map<String, Value>) -> Map<String, Value> {
    raw.insert(
        "meta".into(),
        Value::Object(Map::from_iter([(REPAIRED_META.into(), Value::Bool(true))])),
    );
    raw
}

fn chat_result(c: &CallRef) -> Message {
    let text = Value::String(missing_result_placeholder(&c.name, &c.call_id));
    let mut raw = Map::new();
    let mut kind = Kind::new(Role::Tool, ItemType::ToolResult, Shape::ChatMessage);
    if let Some(name) = c.call_id.strip_prefix("legacy-function:") {
        // A legacy function call is answered by a `function` message of that name.
        raw.insert("role".into(), Value::String("function".into()));
        raw.insert("name".into(), Value::String(name.into()));
        kind.result_name = Some(name.into());
    } else {
        raw.insert("role".into(), Value::String("tool".into()));
        raw.insert("tool_call_id".into(), Value::String(c.call_id.clone()));
    }
    raw.insert("content".into(), text);
    kind.results.push(c.call_id.clone());
    Message::from_parts(mark(raw), kind)
}

fn responses_output(call_type: &str, c: &CallRef) -> Message {
    let mut raw = Map::new();
    raw.insert("type".into(), Value::String(format!("{call_type}_output")));
    raw.insert("call_id".into(), Value::String(c.call_id.clone()));
    raw.insert(
        "output".into(),
        Value::String(missing_result_placeholder(&c.name, &c.call_id)),
    );
    let mut kind = Kind::new(Role::Tool, ItemType::ToolResult, Shape::ResponsesCallOutput);
    kind.results.push(c.call_id.clone());
    Message::from_parts(mark(raw), kind)
}

fn answer_anthropic(out: &mut Vec<Option<Message>>, i: usize, calls: &[CallRef]) {
    let blocks: Vec<Value> = calls
        .iter()
        .map(|c| {
            Value::Object(Map::from_iter([
                ("type".to_string(), Value::String("tool_result".into())),
                ("tool_use_id".to_string(), Value::String(c.call_id.clone())),
                (
                    "content".to_string(),
                    Value::String(missing_result_placeholder(&c.name, &c.call_id)),
                ),
            ]))
        })
        .collect();
    let next = out
        .iter()
        .enumerate()
        .skip(i + 1)
        .find_map(|(k, m)| m.as_ref().map(|m| (k, m)));
    if let Some((k, m)) = next
        && m.kind().shape == Shape::AnthropicMessage
        && m.raw().get("role").and_then(Value::as_str) == Some("user")
    {
        // Results lead the user message after the call, after any already there.
        let mut raw = m.raw().clone();
        let content = match raw.remove("content") {
            Some(Value::Array(b)) => b,
            Some(Value::String(s)) => vec![Value::Object(Map::from_iter([
                ("type".to_string(), Value::String("text".into())),
                ("text".to_string(), Value::String(s)),
            ]))],
            _ => Vec::new(),
        };
        let lead = content
            .iter()
            .take_while(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
            .count();
        let mut merged = content;
        for (n, b) in blocks.into_iter().enumerate() {
            merged.insert(lead + n, b);
        }
        raw.insert("content".into(), Value::Array(merged));
        if let Some(fixed) = redecode_anthropic(raw) {
            out[k] = Some(fixed);
        }
        return;
    }
    let mut raw = Map::new();
    raw.insert("role".into(), Value::String("user".into()));
    raw.insert("content".into(), Value::Array(blocks));
    if let Some(m) = redecode_anthropic(raw) {
        out.insert(i + 1, Some(m));
    }
}
