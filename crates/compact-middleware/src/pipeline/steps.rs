//! The agent's steps: which model reply of the whole conversation each
//! message is, or answers. A tool's facts in the summary are labelled with
//! the step their output came at (`[run_tests @12] …`, docs/design.md
//! §12), so a fact that survives many compactions still says when it was
//! seen.
//!
//! A step is counted in model replies, not in user messages: an agent's
//! run is one user turn with hundreds of replies, and "turn 1" would say
//! nothing; in a chat, replies and user turns go together. One reply is
//! one assistant message (Chat, Anthropic) or a run of assistant items
//! (Responses reasoning, text and calls); the tool results after it are
//! its step.
//!
//! The input of a later call holds our previous output, not the history it
//! replaced: the messages before the summary are gone, and a kept tool pair
//! may sit between folded ones. So the step of every message of an output
//! is remembered with the ledger, by the message's hash ([`key`]); a
//! message the next call sends again takes its step from there, a new one
//! counts on from the message before it.

use std::collections::BTreeMap;

use crate::model::{Message, Role, Shape};

/// Most messages whose step is remembered (an output is bounded by the
/// context window; this bounds a record's size whatever the window).
const MAX_REMEMBERED: usize = 8192;

/// The key a message's step is remembered by: its provider hash, the same
/// for the message as we return it and for the copy a provider sees.
pub(crate) fn key(m: &Message) -> u64 {
    // The low half of a 128-bit content hash: unique enough for the few
    // thousand messages of one output.
    m.provider_hash() as u64
}

/// The step of each of `msgs` (`None` for our summary). A session whose
/// state predates remembered steps (a summary, no `known`) counts from the
/// start of this input: what its summary replaced is not numbered, and
/// its steps run from its first compaction since.
pub(crate) fn number(
    msgs: &[Message],
    summary_index: Option<usize>,
    known: &BTreeMap<u64, u32>,
) -> Vec<Option<u32>> {
    let mut step = 0u32;
    let mut in_reply = false;
    msgs.iter()
        .enumerate()
        .map(|(i, m)| {
            if Some(i) == summary_index || m.is_bridge() {
                in_reply = false;
                return None;
            }
            let reply = m.role() == Role::Assistant;
            // A Chat or Anthropic message is a whole reply; Responses
            // items of one reply come in a row.
            let whole = matches!(m.kind().shape, Shape::ChatMessage | Shape::AnthropicMessage);
            match known.get(&key(m)) {
                Some(&s) => step = s,
                None if reply && (whole || !in_reply) => step = step.saturating_add(1),
                None => {}
            }
            in_reply = reply;
            Some(step)
        })
        .collect()
}

/// The steps of an output to remember: each message that came from the
/// input (`Some(index)`) with the step of that input message.
pub(crate) fn remember<'m>(
    output: impl Iterator<Item = (&'m Message, Option<usize>)>,
    steps: &[Option<u32>],
) -> BTreeMap<u64, u32> {
    let mut map = BTreeMap::new();
    for (m, i) in output {
        if map.len() == MAX_REMEMBERED {
            break;
        }
        if let Some(s) = i.and_then(|i| steps.get(i).copied().flatten()) {
            map.insert(key(m), s);
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chat(items: &[serde_json::Value]) -> Vec<Message> {
        crate::model::Request::from_value(
            serde_json::Value::Array(items.to_vec()),
            crate::model::Format::Chat,
        )
        .map(|r| r.messages)
        .unwrap_or_default()
    }

    fn call(id: &str) -> serde_json::Value {
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "run_tests", "arguments": "{}"}}]})
    }

    fn result(id: &str, text: &str) -> serde_json::Value {
        json!({"role": "tool", "tool_call_id": id, "content": text})
    }

    #[test]
    fn a_step_is_a_model_reply_and_its_results() {
        let msgs = chat(&[
            json!({"role": "system", "content": "sys"}),
            json!({"role": "user", "content": "fix it"}),
            call("a"),
            result("a", "1 failed"),
            call("b"),
            result("b", "ok"),
            json!({"role": "user", "content": "thanks"}),
            json!({"role": "assistant", "content": "done"}),
        ]);
        assert_eq!(msgs.len(), 8);
        let steps = number(&msgs, None, &BTreeMap::new());
        assert_eq!(
            steps,
            [0, 0, 1, 1, 2, 2, 2, 3].map(Some).to_vec(),
            "{steps:?}"
        );
    }

    #[test]
    fn a_responses_reply_is_its_run_of_items() {
        let items = vec![
            json!({"role": "user", "content": "fix it"}),
            json!({"type": "reasoning", "id": "r1", "summary": []}),
            json!({"type": "function_call", "call_id": "a", "name": "run_tests", "arguments": "{}"}),
            json!({"type": "function_call", "call_id": "b", "name": "grep", "arguments": "{}"}),
            json!({"type": "function_call_output", "call_id": "a", "output": "1 failed"}),
            json!({"type": "function_call_output", "call_id": "b", "output": "x.py:3"}),
            json!({"type": "function_call", "call_id": "c", "name": "run_tests", "arguments": "{}"}),
            json!({"type": "function_call_output", "call_id": "c", "output": "ok"}),
        ];
        let msgs = crate::model::Request::from_value(
            serde_json::Value::Array(items),
            crate::model::Format::Responses,
        )
        .map(|r| r.messages)
        .unwrap_or_default();
        assert_eq!(msgs.len(), 8);
        let steps = number(&msgs, None, &BTreeMap::new());
        assert_eq!(
            steps,
            [0, 1, 1, 1, 1, 1, 2, 2].map(Some).to_vec(),
            "{steps:?}"
        );
    }

    #[test]
    fn a_later_input_takes_the_remembered_steps_and_counts_on() {
        let first = chat(&[
            json!({"role": "user", "content": "fix it"}),
            call("a"),
            result("a", "1 failed"),
            call("b"),
            result("b", "still 1 failed"),
            call("c"),
            result("c", "ok"),
        ]);
        let steps = number(&first, None, &BTreeMap::new());
        // The output kept the task and the last pair (steps 3), with a
        // summary in between; the agent then made a new call.
        let summary = Message::text(Role::User, "COMPACT-SUMMARY v1\n…");
        let output = [
            (&first[0], Some(0)),
            (&summary, None),
            (&first[5], Some(5)),
            (&first[6], Some(6)),
        ];
        let known = remember(output.iter().copied(), &steps);
        let mut next: Vec<Message> = output.iter().map(|(m, _)| (*m).clone()).collect();
        next.extend(chat(&[call("d"), result("d", "ok")]));
        let again = number(&next, Some(1), &known);
        assert_eq!(
            again,
            vec![Some(0), None, Some(3), Some(3), Some(4), Some(4)],
            "{again:?}"
        );
        // A state from before steps were remembered counts from the start
        // of what it has (the summary's history is not numbered).
        assert_eq!(
            number(&next, Some(1), &BTreeMap::new()),
            vec![Some(0), None, Some(1), Some(1), Some(2), Some(2)]
        );
    }
}
