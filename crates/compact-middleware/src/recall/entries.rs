//! What of a history is indexed: each tool output on its own (keyed by its
//! call), every other user or assistant message whole. Instructions stay in
//! the context (pinned), our summaries and bridges are ours, and outputs
//! that are already placeholders hold nothing to recall.

use std::collections::HashMap;

use serde_json::Value;

use super::RecallKey;
use crate::model::{Message, Role};
use crate::pipeline::SUMMARY_HEADER;

/// One entry to index, before redaction.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) id: String,
    pub(crate) turn: u32,
    pub(crate) kind: &'static str,
    pub(crate) role: &'static str,
    pub(crate) tool: Option<String>,
    pub(crate) call_id: Option<String>,
    pub(crate) file: Option<String>,
    pub(crate) text: String,
}

/// Argument names that say which file a call read or wrote.
const FILE_KEYS: [&str; 6] = [
    "path",
    "file_path",
    "file",
    "filename",
    "filepath",
    "target_file",
];

/// The file a call's JSON arguments name, if any.
fn file_of(args: &str) -> Option<String> {
    let v: Value = serde_json::from_str(args).ok()?;
    let obj = v.as_object()?;
    FILE_KEYS
        .iter()
        .find_map(|k| obj.get(*k).and_then(Value::as_str))
        .map(str::to_owned)
}

/// Whether a tool output is one of our placeholders (cleared before).
pub(crate) fn is_placeholder(text: &str) -> bool {
    text.starts_with("⟦removed: ")
}

/// The entries of `messages`, ids derived with `key`; messages for which
/// `skip` is true (indexed before) are passed over, but still count turns
/// and name calls.
pub(crate) fn entries(
    key: &RecallKey,
    messages: &[Message],
    skip: &dyn Fn(&Message) -> bool,
) -> Vec<Entry> {
    // Call id → (tool name, the message that made the call); the file is
    // read from the arguments only for outputs that are indexed.
    let mut calls: HashMap<&str, (&str, &Message)> = HashMap::new();
    for m in messages {
        for c in &m.kind().calls {
            calls.insert(c.call_id.as_str(), (c.name.as_str(), m));
        }
    }
    let file_of_call = |call_id: &str| -> Option<String> {
        let (_, m) = calls.get(call_id)?;
        m.tool_arguments()
            .into_iter()
            .find(|(id, _)| *id == call_id)
            .and_then(|(_, args)| file_of(&args))
    };
    let mut out = Vec::new();
    let mut turn = 0u32;
    for m in messages {
        if m.starts_turn() {
            turn += 1;
        }
        if skip(m) || m.is_bridge() || m.label().is_some_and(|l| l.starts_with(SUMMARY_HEADER)) {
            continue;
        }
        let outputs = m.tool_outputs();
        if !outputs.is_empty() {
            for (call_id, text) in outputs {
                if text.trim().is_empty() || is_placeholder(&text) {
                    continue;
                }
                let (tool, file) = match calls.get(call_id) {
                    Some((name, _)) => (Some((*name).to_owned()), file_of_call(call_id)),
                    None => (m.kind().result_name.clone(), None),
                };
                out.push(Entry {
                    // A capped output's marker names the original's id:
                    // indexed already (then skipped as known), or, when the
                    // original never reached this index, the capped text
                    // answers under that id.
                    id: key.received_output_id(call_id, &text),
                    turn,
                    kind: "tool_output",
                    role: "tool",
                    tool,
                    call_id: Some(call_id.to_owned()),
                    file,
                    text: text.into_owned(),
                });
            }
            continue;
        }
        let role = m.role();
        if !matches!(role, Role::User | Role::Assistant) {
            continue;
        }
        let text = m.plain_text();
        if text.trim().is_empty() || text.starts_with(SUMMARY_HEADER) {
            continue;
        }
        let first_call = m.kind().calls.first();
        out.push(Entry {
            id: key.message_id(role.as_str(), &text),
            turn,
            kind: "message",
            role: role.as_str(),
            tool: first_call.map(|c| c.name.clone()),
            call_id: first_call.map(|c| c.call_id.clone()),
            file: first_call.and_then(|c| file_of_call(&c.call_id)),
            text,
        });
    }
    out
}
