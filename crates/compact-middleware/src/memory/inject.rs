//! Instructions injection: memory files, cross-session memory and the
//! sliding-window conversation memory go into the instructions —
//! the first system (or developer) message — of the messages sent out, or a
//! system message prepended when there is none. The caller's history is
//! never changed, and injecting twice is a no-op (an agent that sends our
//! output back does not get the block twice).
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::model::{ItemType, Message, Role};

/// The memory file names, in the order they are read in each directory.
pub const MEMORY_FILE_NAMES: [&str; 3] = ["AGENT.md", "MEMORY.md", ".agent-context.md"];

/// Heading of the memory-files block.
pub(crate) const PROJECT_CONTEXT_HEADING: &str = "## Project Context (always apply)";
/// Prefix of the cross-session block.
pub(crate) const CROSS_SESSION_PREFIX: &str = "Cross-session memory: ";
/// Prefix of the sliding-window block.
pub(crate) const CONVERSATION_MEMORY_PREFIX: &str = "Previous context: ";

/// Every memory file found in `dirs` (in order; per directory
/// `AGENT.md`, `MEMORY.md`, `.agent-context.md`), each as
/// `# From PATH\nTEXT`, joined by `---` lines. Unreadable files are skipped
/// with a warning. Returns the files read and the text.
pub fn load_memory_files<P: AsRef<Path>>(dirs: &[P]) -> (Vec<PathBuf>, String) {
    let mut read = Vec::new();
    let mut parts = Vec::new();
    for dir in dirs {
        for name in MEMORY_FILE_NAMES {
            let path = dir.as_ref().join(name);
            if !path.is_file() {
                continue;
            }
            match std::fs::read_to_string(&path) {
                Ok(text) => {
                    parts.push(format!("# From {}\n{}", path.display(), text.trim_end()));
                    read.push(path);
                }
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "cannot read memory file")
                }
            }
        }
    }
    (read, parts.join("\n\n---\n\n"))
}

/// What is added to the instructions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstructionBlocks {
    /// The memory files' text ([`load_memory_files`]).
    pub memory_files: Option<String>,
    /// The cross-session summary.
    pub cross_session: Option<String>,
    /// The latest completed sliding-window memory.
    pub conversation_memory: Option<String>,
}

impl InstructionBlocks {
    /// Nothing to inject.
    pub fn is_empty(&self) -> bool {
        self.labels().is_empty()
    }

    /// The names of the blocks present: `memory_files`, `cross_session`,
    /// `conversation_memory` (what the report lists).
    pub fn labels(&self) -> Vec<String> {
        let present = |s: &Option<String>| s.as_deref().is_some_and(|t| !t.trim().is_empty());
        let mut out = Vec::new();
        if present(&self.memory_files) {
            out.push("memory_files".to_owned());
        }
        if present(&self.cross_session) {
            out.push("cross_session".to_owned());
        }
        if present(&self.conversation_memory) {
            out.push("conversation_memory".to_owned());
        }
        out
    }

    /// The text appended to the instructions, `None` when empty.
    pub fn render(&self) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(files) = self
            .memory_files
            .as_deref()
            .filter(|t| !t.trim().is_empty())
        {
            parts.push(format!("{PROJECT_CONTEXT_HEADING}\n\n{}", files.trim()));
        }
        if let Some(memory) = self
            .cross_session
            .as_deref()
            .filter(|t| !t.trim().is_empty())
        {
            parts.push(format!("{CROSS_SESSION_PREFIX}{}", memory.trim()));
        }
        if let Some(memory) = self
            .conversation_memory
            .as_deref()
            .filter(|t| !t.trim().is_empty())
        {
            parts.push(format!("{CONVERSATION_MEMORY_PREFIX}{}", memory.trim()));
        }
        if parts.is_empty() {
            None
        } else {
            Some(parts.join("\n\n"))
        }
    }
}

/// Adds `blocks` to the instructions of `messages`: appended to the first
/// system or developer message, or as a new leading system message. Returns
/// the messages and whether anything changed (false when empty or already
/// present).
pub fn inject_instructions(
    mut messages: Vec<Message>,
    blocks: &InstructionBlocks,
) -> (Vec<Message>, bool) {
    let Some(block) = blocks.render() else {
        return (messages, false);
    };
    let target = messages.iter().position(|m| {
        matches!(m.role(), Role::System | Role::Developer) && m.kind().item == ItemType::Message
    });
    if let Some(i) = target {
        if messages[i].plain_text().contains(&block) {
            return (messages, false);
        }
        if let Some(edited) = append_text(&messages[i], &block) {
            messages[i] = edited;
            return (messages, true);
        }
    } else if messages
        .first()
        .is_some_and(|m| m.plain_text().contains(&block))
    {
        return (messages, false);
    }
    messages.insert(
        0,
        Message::system(block).with_meta("compact_injected", true),
    );
    (messages, true)
}

/// The message with `block` appended to its text content, keeping its shape.
fn append_text(m: &Message, block: &str) -> Option<Message> {
    let mut v = m.to_value();
    let obj = v.as_object_mut()?;
    match obj.get_mut("content")? {
        Value::String(s) => {
            if !s.is_empty() {
                s.push_str("\n\n");
            }
            s.push_str(block);
        }
        Value::Array(parts) => {
            let kind = parts
                .iter()
                .find_map(|p| p.get("type").and_then(Value::as_str))
                .unwrap_or("text")
                .to_owned();
            let mut part = serde_json::Map::new();
            part.insert("type".into(), Value::String(kind));
            part.insert("text".into(), Value::String(format!("\n\n{block}")));
            parts.push(Value::Object(part));
        }
        _ => return None,
    }
    let Value::Object(raw) = v else { return None };
    Some(Message::from_parts(raw, m.kind().clone()))
}
