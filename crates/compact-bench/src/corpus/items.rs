//! Wire items for the named corpora, in Chat Completions or Responses.

use compact_middleware::model::Format;
use serde_json::{Value, json};

/// One tool call and what it returned.
pub(super) struct Call {
    pub id: String,
    pub name: &'static str,
    /// JSON text, as the model wrote it.
    pub arguments: String,
    pub output: String,
}

/// A system message.
pub(super) fn system(text: &str) -> Value {
    json!({"role": "system", "content": text})
}

/// A user message (the same item in both formats).
pub(super) fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

/// An assistant message without calls.
pub(super) fn assistant(wire: Format, text: &str) -> Value {
    if wire == Format::Responses {
        json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]})
    } else {
        json!({"role": "assistant", "content": text})
    }
}

/// A Responses reasoning item with a summary.
pub(super) fn reasoning(id: &str, text: &str) -> Value {
    json!({"type": "reasoning", "id": id, "summary": [{"type": "summary_text", "text": text}]})
}

/// The items of one round of calls: in Chat an assistant message (with
/// `content`, when given, beside its calls) and one tool message per call;
/// in Responses a `function_call` per call (the content, if any, as an
/// assistant message before them) and then their outputs.
pub(super) fn calls(wire: Format, content: Option<&str>, calls: &[Call]) -> Vec<Value> {
    let mut items = Vec::new();
    if wire == Format::Responses {
        if let Some(text) = content {
            items.push(assistant(wire, text));
        }
        for c in calls {
            items.push(json!({"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}));
        }
        for c in calls {
            items
                .push(json!({"type": "function_call_output", "call_id": c.id, "output": c.output}));
        }
    } else {
        let tc: Vec<Value> = calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
        items.push(json!({"role": "assistant", "content": content, "tool_calls": tc}));
        for c in calls {
            items.push(json!({"role": "tool", "tool_call_id": c.id, "content": c.output}));
        }
    }
    items
}
