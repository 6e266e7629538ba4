//! The cheap tiers: capping oversized tool results (seed 003) and clearing
//! old tool I/O with placeholders (seed 001). Both rewrite messages in place
//! and keep tool names and call ids, so pairing never changes.

use std::collections::HashMap;

use crate::model::{ItemType, Message};

/// The seed 001 placeholder for a cleared tool output.
pub fn output_placeholder(name: &str, call_id: &str) -> String {
    format!("⟦removed: tool output for {name} (call_id={call_id}); reason=context_compaction⟧")
}

/// The placeholder for cleared tool arguments. It is a JSON string, so the
/// arguments stay valid JSON for providers that parse them.
pub fn input_placeholder(name: &str, call_id: &str) -> String {
    serde_json::Value::String(format!(
        "⟦removed: tool input for {name} (call_id={call_id}); reason=context_compaction⟧"
    ))
    .to_string()
}

/// Tool names by call id, from every call in the history.
pub fn call_names(messages: &[Message]) -> HashMap<String, String> {
    messages
        .iter()
        .flat_map(|m| m.kind().calls.iter())
        .map(|c| (c.call_id.clone(), c.name.clone()))
        .collect()
}

/// The tool name a result answers, falling back to `tool`.
pub fn result_name<'a>(m: &'a Message, names: &'a HashMap<String, String>) -> &'a str {
    if let Some(n) = &m.kind().result_name {
        return n;
    }
    m.kind()
        .results
        .first()
        .and_then(|id| names.get(id))
        .map(String::as_str)
        .unwrap_or("tool")
}

/// Cuts `text` to about `max_chars` characters, keeping the head and the tail
/// (errors and totals tend to sit at the end of logs) and marking the cut.
/// Returns `None` when the text already fits.
pub fn cap_text(text: &str, max_chars: usize, name: &str, call_id: &str) -> Option<String> {
    let total = text.chars().count();
    if total <= max_chars {
        return None;
    }
    // The result, marker included, fits `max_chars`, so capping twice is a no-op.
    let marker_for = |removed: usize| {
        format!(
            "\n⟦truncated: {removed} of {total} chars removed from tool output for {name} (call_id={call_id}); reason=tool_result_budget⟧\n"
        )
    };
    let marker_len = marker_for(total).chars().count();
    let keep = max_chars.saturating_sub(marker_len);
    let head_chars = keep * 3 / 5;
    let tail_chars = keep - head_chars;
    let byte_at = |n: usize| text.char_indices().nth(n).map_or(text.len(), |(i, _)| i);
    let head_end = byte_at(head_chars);
    let tail_start = byte_at(total - tail_chars);
    let marker = marker_for(total - head_chars - tail_chars);
    Some(format!(
        "{}{marker}{}",
        &text[..head_end],
        &text[tail_start..]
    ))
}

/// Tier 1: caps every tool result in `indices` longer than `max_chars`.
/// Returns the indices it changed.
pub fn cap_tool_results(
    messages: &mut [Message],
    indices: impl IntoIterator<Item = usize>,
    max_chars: usize,
    names: &HashMap<String, String>,
) -> Vec<usize> {
    let mut changed = Vec::new();
    for i in indices {
        let m = &messages[i];
        if m.kind().item != ItemType::ToolResult {
            continue;
        }
        let Some(out) = m.tool_output() else { continue };
        let call_id = m.kind().results.first().cloned().unwrap_or_default();
        let name = result_name(m, names).to_string();
        if let Some(capped) = cap_text(&out, max_chars, &name, &call_id) {
            let m = &mut messages[i];
            m.set_tool_output(capped);
            m.set_compacted();
            changed.push(i);
        }
    }
    changed
}

/// Which tools tier 2 may clear: `include_tools` wins when non-empty.
#[derive(Debug, Clone, Default)]
pub struct ToolFilter {
    pub include: Vec<String>,
    pub exclude: Vec<String>,
}

impl ToolFilter {
    pub fn allows(&self, name: &str) -> bool {
        if !self.include.is_empty() {
            self.include.iter().any(|t| t == name)
        } else {
            !self.exclude.iter().any(|t| t == name)
        }
    }
}

/// Tier 2: replaces the outputs (and with `clear_inputs`, the arguments) of
/// the tool I/O in `indices` with placeholders. Returns the indices changed.
pub fn clear_tool_io(
    messages: &mut [Message],
    indices: impl IntoIterator<Item = usize>,
    clear_inputs: bool,
    filter: &ToolFilter,
    names: &HashMap<String, String>,
) -> Vec<usize> {
    let mut changed = Vec::new();
    for i in indices {
        let m = &messages[i];
        let mut did = false;
        if m.kind().item == ItemType::ToolResult {
            let call_id = m.kind().results.first().cloned().unwrap_or_default();
            let name = result_name(m, names).to_string();
            let placeholder = output_placeholder(&name, &call_id);
            let already = m.tool_output().is_some_and(|o| o == placeholder);
            if filter.allows(&name) && !already {
                messages[i].set_tool_output(placeholder);
                did = true;
            }
        }
        if clear_inputs {
            let cleared = messages[i].set_tool_arguments(|c| {
                filter
                    .allows(&c.name)
                    .then(|| input_placeholder(&c.name, &c.call_id))
            });
            did |= cleared > 0;
        }
        if did {
            messages[i].set_compacted();
            changed.push(i);
        }
    }
    changed
}
