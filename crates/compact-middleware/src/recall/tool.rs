//! The `compact_recall` tool: its definition, in the shapes the providers
//! take, and its handler, which runs a tool call's arguments through
//! [`crate::CompactManager::recall`] and gives back the tool result's text.

use serde_json::{Value, json};

use super::{RecallAnswer, RecallQuery};
use crate::{CompactError, CompactManager};

/// The tool's name.
pub const TOOL_NAME: &str = "compact_recall";

const DESCRIPTION: &str = "Get back earlier details that were removed from this conversation to save context \
(tool outputs, files read, messages). Search with `query` (words that the text contains), or give the `id` \
from a placeholder such as \"recall r7kq2m4x\" or from an earlier hit to read that text whole \
(`offset` pages through long texts).";

/// The parameters' JSON schema.
pub fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Words to search the removed text for."},
            "id": {"type": "string", "description": "A recall id (r and 8 letters or digits)."},
            "limit": {"type": "integer", "minimum": 1, "maximum": super::MAX_LIMIT, "description": "Most hits for a query (default 5)."},
            "offset": {"type": "integer", "minimum": 0, "description": "By id: the character to read from."}
        },
        "additionalProperties": false
    })
}

/// The definition as an OpenAI Chat Completions tool.
pub fn openai_chat_tool() -> Value {
    json!({
        "type": "function",
        "function": {"name": TOOL_NAME, "description": DESCRIPTION, "parameters": parameters()}
    })
}

/// The definition as an OpenAI Responses tool.
pub fn openai_responses_tool() -> Value {
    json!({"type": "function", "name": TOOL_NAME, "description": DESCRIPTION, "parameters": parameters()})
}

/// The definition as an Anthropic Messages tool.
pub fn anthropic_tool() -> Value {
    json!({"name": TOOL_NAME, "description": DESCRIPTION, "input_schema": parameters()})
}

/// The line `recall.advertise` adds to the summary message.
pub const SUMMARY_LINE: &str = "Earlier details removed from this conversation can be recalled with the compact_recall tool: by id (the id after \"recall\" in a placeholder) or by words.";

/// A request's wire, as far as its tools go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// OpenAI Chat Completions.
    Chat,
    /// OpenAI Responses.
    Responses,
    /// Anthropic Messages.
    Anthropic,
}

impl Wire {
    /// The wire of a request with `tools` and `messages`: the tools' shape
    /// when one says (`input_schema`: Anthropic, a `function` object: Chat,
    /// a top-level `name`: Responses), else the messages' shapes (Chat when
    /// nothing says).
    pub fn of(tools: &[Value], messages: &[crate::model::Message]) -> Wire {
        for t in tools {
            if t.get("input_schema").is_some() {
                return Wire::Anthropic;
            }
            if t.get("function").is_some_and(Value::is_object) {
                return Wire::Chat;
            }
            if t.get("name").is_some_and(Value::is_string) {
                return Wire::Responses;
            }
        }
        use crate::model::Shape;
        for m in messages {
            match m.kind().shape {
                Shape::AnthropicMessage | Shape::AnthropicSystem => return Wire::Anthropic,
                Shape::ResponsesCall
                | Shape::ResponsesCallOutput
                | Shape::ResponsesReasoning
                | Shape::ResponsesOther
                | Shape::ResponsesMessage => return Wire::Responses,
                Shape::ChatMessage => {}
            }
        }
        Wire::Chat
    }

    /// The tool's definition in this wire.
    pub fn tool(self) -> Value {
        match self {
            Wire::Chat => openai_chat_tool(),
            Wire::Responses => openai_responses_tool(),
            Wire::Anthropic => anthropic_tool(),
        }
    }
}

/// Whether `tool` (any wire) is `compact_recall`.
pub fn is_recall_tool(tool: &Value) -> bool {
    let name = tool
        .get("function")
        .and_then(|f| f.get("name"))
        .or_else(|| tool.get("name"));
    name.and_then(Value::as_str) == Some(TOOL_NAME)
}

/// `tools` with the `compact_recall` definition added last, in the wire of
/// the request (`tools`, `messages`); unchanged when it is there already.
pub fn advertised(mut tools: Vec<Value>, messages: &[crate::model::Message]) -> Vec<Value> {
    if !tools.iter().any(is_recall_tool) {
        let wire = Wire::of(&tools, messages);
        tools.push(wire.tool());
    }
    tools
}

/// Runs a `compact_recall` call of `session` with `arguments` (its JSON
/// arguments, as a string or an object) and returns the text to send back
/// as the tool result. Bad arguments come back as text the model can read,
/// not as an error: the model made the call and should see why it failed.
pub async fn handle(
    manager: &CompactManager,
    session: &str,
    arguments: &Value,
) -> Result<String, CompactError> {
    let parsed: Result<RecallQuery, String> = match arguments {
        Value::String(s) => serde_json::from_str(s).map_err(|e| e.to_string()),
        other => serde_json::from_value(other.clone()).map_err(|e| e.to_string()),
    };
    let q = match parsed {
        Ok(q) => q,
        Err(e) => return Ok(format!("compact_recall: bad arguments: {e}")),
    };
    match manager.recall(session, q).await {
        Ok(answer) => Ok(render(&answer)),
        Err(CompactError::InvalidInput(m)) => Ok(format!("compact_recall: {m}")),
        Err(e) => Err(e),
    }
}

/// An answer as the tool result's text.
pub fn render(a: &RecallAnswer) -> String {
    if let Some(e) = &a.entry {
        let mut s = format!("recall {}", e.id);
        if let Some(t) = &e.origin.tool {
            s.push_str(&format!(" ({t}"));
            if let Some(f) = &e.origin.file {
                s.push_str(&format!(" {f}"));
            }
            s.push(')');
        }
        s.push_str(&format!(
            ", turn {}, chars {}..{} of {}:\n{}",
            e.origin.turn,
            e.offset,
            e.offset + e.text.chars().count(),
            e.total_chars,
            e.text
        ));
        if let Some(n) = e.next_offset {
            s.push_str(&format!(
                "\n[more: call again with id {} and offset {n}]",
                e.id
            ));
        }
        return s;
    }
    if a.hits.is_empty() {
        return "compact_recall: nothing found".into();
    }
    let mut s = String::new();
    for h in &a.hits {
        let what = match (&h.origin.tool, &h.origin.file) {
            (Some(t), Some(f)) => format!("{t} {f}"),
            (Some(t), None) => t.clone(),
            _ => h.origin.role.clone(),
        };
        s.push_str(&format!(
            "[{}] turn {}, {what}, {} chars: {}\n",
            h.id, h.origin.turn, h.chars, h.excerpt
        ));
    }
    s
}
