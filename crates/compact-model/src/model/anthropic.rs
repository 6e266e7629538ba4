//! The Anthropic Messages wire format.
//!
//! A message is `{"role": "user" | "assistant", "content": string | [block]}`; the system
//! prompt is the request's top-level `system` (a string or `text` blocks). Tool calls are
//! `tool_use` blocks in an assistant message; their results are `tool_result` blocks in the
//! user message after it, which may answer several calls and carry text too. `thinking` and
//! `redacted_thinking` blocks are signed by the provider, so a message that carries one is
//! never edited (`docs/design.md §3`).

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::codec::{P, check_meta, req_str};
use super::error::InputError;
use super::message::{CallRef, ItemType, Kind, Markers, Role, Shape, push_line};
use crate::price::Ttl;

/// Content block types that only Anthropic messages use (format detection). Server tool
/// results (`web_search_tool_result`, …) are recognised by their `_tool_result` suffix.
const OWN_BLOCKS: &[&str] = &[
    "image",
    "document",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "compaction",
    "server_tool_use",
    "mcp_tool_use",
    "mcp_tool_result",
    "search_result",
    "container_upload",
];

/// True when a content part of type `ty` can only be an Anthropic block.
pub(super) fn is_own_block(ty: &str) -> bool {
    OWN_BLOCKS.contains(&ty) || ty.ends_with("_tool_result")
}

/// Blocks whose bytes the provider signs: a message carrying one is never rewritten.
fn is_signed(ty: &str) -> bool {
    matches!(ty, "thinking" | "redacted_thinking")
}

fn blocks(raw: &Map<String, Value>) -> &[Value] {
    match raw.get("content") {
        Some(Value::Array(b)) => b,
        _ => &[],
    }
}

fn block_type(b: &Value) -> Option<&str> {
    b.get("type").and_then(Value::as_str)
}

/// The format-neutral view of an Anthropic message at `path`.
pub(super) fn kind(o: &Map<String, Value>, path: &str) -> Result<Kind, InputError> {
    check_meta(o, path)?;
    match o.get("type").and_then(Value::as_str) {
        // A response object appended as is (`{"type":"message","role",...}`).
        None | Some("message") => {}
        Some(ty) => {
            return Err(InputError::new(
                P(path, "type"),
                format!(
                    "a Responses item (type {ty:?}) in anthropic format; use --format responses or auto"
                ),
            ));
        }
    }
    let role_s = req_str(o, "role", path)?;
    let role = match role_s {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        // Some gateways accept the system prompt as a first message; it stays where it is.
        "system" => Role::System,
        "tool" | "function" => {
            return Err(InputError::new(
                P(path, "role"),
                "a Chat Completions tool message in anthropic format (results are tool_result blocks in a user message); use --format chat or auto",
            ));
        }
        other => {
            return Err(InputError::new(
                P(path, "role"),
                format!("unknown role {other:?} (expected user or assistant)"),
            ));
        }
    };
    if o.contains_key("tool_calls") {
        return Err(InputError::new(
            P(path, "tool_calls"),
            "Chat Completions tool calls in anthropic format (calls are tool_use blocks); use --format chat or auto",
        ));
    }
    let mut kind = Kind::new(role, ItemType::Message, Shape::AnthropicMessage);
    let content_path = P(path, "content").to_string();
    match o.get("content") {
        Some(Value::String(_)) => {}
        Some(Value::Array(parts)) => {
            for (i, part) in parts.iter().enumerate() {
                read_block(part, &format!("{content_path}[{i}]"), role_s, &mut kind)?;
            }
        }
        Some(other) => {
            return Err(InputError::expected(
                &content_path,
                "string or array of content blocks",
                other,
            ));
        }
        None => {
            return Err(InputError::missing(
                &content_path,
                "string or array of content blocks",
            ));
        }
    }
    if !kind.results.is_empty() {
        kind.role = Role::Tool;
        kind.item = ItemType::ToolResult;
    }
    Ok(kind)
}

fn read_block(part: &Value, pp: &str, role: &str, kind: &mut Kind) -> Result<(), InputError> {
    let Value::Object(b) = part else {
        return Err(InputError::expected(pp, "a content block object", part));
    };
    match req_str(b, "type", pp)? {
        "text" => {
            req_str(b, "text", pp)?;
        }
        "tool_use" => {
            if role != "assistant" {
                return Err(InputError::new(
                    pp,
                    format!(
                        "a tool_use block in a {role} message (tool calls belong to the assistant)"
                    ),
                ));
            }
            let id = req_str(b, "id", pp)?;
            let name = req_str(b, "name", pp)?;
            match b.get("input") {
                None | Some(Value::Object(_)) => {}
                Some(other) => return Err(InputError::expected(P(pp, "input"), "object", other)),
            }
            kind.calls.push(CallRef {
                call_id: id.to_string(),
                name: name.to_string(),
            });
        }
        "tool_result" => {
            if role != "user" {
                return Err(InputError::new(
                    pp,
                    format!(
                        "a tool_result block in a {role} message (results belong to the user message after the call)"
                    ),
                ));
            }
            let id = req_str(b, "tool_use_id", pp)?;
            match b.get("content") {
                None | Some(Value::Null | Value::String(_) | Value::Array(_)) => {}
                Some(other) => {
                    return Err(InputError::expected(
                        P(pp, "content"),
                        "string or array of content blocks",
                        other,
                    ));
                }
            }
            kind.results.push(id.to_string());
        }
        "compaction" => kind.compaction = true,
        _ => {}
    }
    Ok(())
}

/// The top-level `system` of a request as a message: a string or text blocks.
pub(super) fn system_kind(v: &Value, path: &str) -> Result<Kind, InputError> {
    match v {
        Value::String(_) => {}
        Value::Array(parts) => {
            for (i, part) in parts.iter().enumerate() {
                let pp = format!("{path}[{i}]");
                let Value::Object(b) = part else {
                    return Err(InputError::expected(&pp, "a text block object", part));
                };
                if req_str(b, "type", &pp)? == "text" {
                    req_str(b, "text", &pp)?;
                }
            }
        }
        other => {
            return Err(InputError::expected(
                path,
                "string or array of text blocks",
                other,
            ));
        }
    }
    Ok(Kind::new(
        Role::System,
        ItemType::Message,
        Shape::AnthropicSystem,
    ))
}

/// True when the message carries a `thinking` or `redacted_thinking` block.
pub(super) fn has_signed_blocks(raw: &Map<String, Value>) -> bool {
    blocks(raw).iter().filter_map(block_type).any(is_signed)
}

/// Text of a `tool_result` content (a string, or the text of its text blocks).
fn result_text(content: Option<&Value>) -> Cow<'_, str> {
    match content {
        Some(Value::String(s)) => Cow::Borrowed(s.as_str()),
        Some(Value::Array(parts)) => {
            let mut s = String::new();
            for p in parts {
                if let Some(t) = p.get("text").and_then(Value::as_str) {
                    push_line(&mut s, t);
                }
            }
            Cow::Owned(s)
        }
        _ => Cow::Borrowed(""),
    }
}

/// What a reader sees: text, tool calls as `name(input)`, tool results, thinking, the
/// text of a provider compaction.
pub(super) fn plain_text(raw: &Map<String, Value>, out: &mut String) {
    match raw.get("content") {
        Some(Value::String(s)) => push_line(out, s),
        Some(Value::Array(parts)) => {
            for b in parts {
                match block_type(b) {
                    Some("text") => {
                        push_line(out, b.get("text").and_then(Value::as_str).unwrap_or(""))
                    }
                    Some("tool_use") => {
                        let name = b.get("name").and_then(Value::as_str).unwrap_or("tool");
                        let input = b.get("input").map(Value::to_string).unwrap_or_default();
                        push_line(out, &format!("{name}({input})"));
                    }
                    Some("tool_result") => push_line(out, &result_text(b.get("content"))),
                    Some("thinking") => {
                        push_line(out, b.get("thinking").and_then(Value::as_str).unwrap_or(""))
                    }
                    Some("compaction") => {
                        push_line(out, b.get("content").and_then(Value::as_str).unwrap_or(""))
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// `(tool_use_id, output text)` of every `tool_result` block, in order.
pub(super) fn tool_outputs(raw: &Map<String, Value>) -> Vec<(&str, Cow<'_, str>)> {
    blocks(raw)
        .iter()
        .filter(|b| block_type(b) == Some("tool_result"))
        .filter_map(|b| {
            let id = b.get("tool_use_id")?.as_str()?;
            Some((id, result_text(b.get("content"))))
        })
        .collect()
}

/// Replaces the content of the `tool_result` answering `call_id` with `text`; the block
/// keeps its `tool_use_id`, `is_error` and `cache_control`. False when there is none.
pub(super) fn set_tool_output(raw: &mut Map<String, Value>, call_id: &str, text: String) -> bool {
    let Some(Value::Array(parts)) = raw.get_mut("content") else {
        return false;
    };
    for b in parts.iter_mut() {
        if block_type(b) == Some("tool_result")
            && b.get("tool_use_id").and_then(Value::as_str) == Some(call_id)
            && let Value::Object(o) = b
        {
            o.insert("content".into(), Value::String(text));
            return true;
        }
    }
    false
}

/// Replaces the `input` of each `tool_use` block with `text(call)` (a JSON object, or any
/// other JSON value or text wrapped as `{"removed": ...}`: the API requires an object).
/// A message with signed blocks is left alone. Returns how many inputs changed.
pub(super) fn set_tool_inputs(
    raw: &mut Map<String, Value>,
    calls: &[CallRef],
    mut text: impl FnMut(&CallRef) -> Option<String>,
) -> usize {
    if has_signed_blocks(raw) {
        return 0;
    }
    let Some(Value::Array(parts)) = raw.get_mut("content") else {
        return 0;
    };
    let mut n = 0;
    for b in parts.iter_mut() {
        if block_type(b) != Some("tool_use") {
            continue;
        }
        let Some(call) = b
            .get("id")
            .and_then(Value::as_str)
            .and_then(|id| calls.iter().find(|c| c.call_id == id))
        else {
            continue;
        };
        let Some(t) = text(call) else { continue };
        let input = match serde_json::from_str::<Value>(&t) {
            Ok(Value::Object(o)) => Value::Object(o),
            Ok(other) => Value::Object(Map::from_iter([("removed".to_string(), other)])),
            Err(_) => Value::Object(Map::from_iter([("removed".to_string(), Value::String(t))])),
        };
        if let Value::Object(o) = b
            && o.get("input") != Some(&input)
        {
            o.insert("input".into(), input);
            n += 1;
        }
    }
    n
}

/// Replaces every top-level `image` and `document` block with a `text` block saying what
/// was there (`placeholder(what)`, where `what` is `image (image/png)` or `document
/// "title"`); `cache_control` moves to the placeholder so the cache breakpoints stay.
/// A message with signed blocks is left alone. Returns how many blocks were replaced.
pub(super) fn clear_attachments(
    raw: &mut Map<String, Value>,
    placeholder: impl Fn(&str) -> String,
) -> usize {
    if has_signed_blocks(raw) {
        return 0;
    }
    let Some(Value::Array(parts)) = raw.get_mut("content") else {
        return 0;
    };
    let mut n = 0;
    for b in parts.iter_mut() {
        let what = match block_type(b) {
            Some("image") => {
                let media = b
                    .pointer("/source/media_type")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown type");
                format!("image ({media})")
            }
            Some("document") => match b.get("title").and_then(Value::as_str) {
                Some(title) => format!("document {title:?}"),
                None => "document".to_string(),
            },
            _ => continue,
        };
        let mut text = Map::new();
        text.insert("type".into(), Value::String("text".into()));
        text.insert("text".into(), Value::String(placeholder(&what)));
        if let Some(cc) = b.get("cache_control") {
            text.insert("cache_control".into(), cc.clone());
        }
        *b = Value::Object(text);
        n += 1;
    }
    n
}

/// The `cache_control` Anthropic caches a prefix at: `{"type":
/// "ephemeral"}` for its default 5 minutes, with `"ttl": "1h"` for an hour.
fn ephemeral(ttl: Ttl) -> Value {
    let mut cc = Map::from_iter([("type".to_string(), Value::String("ephemeral".into()))]);
    if ttl == Ttl::OneHour {
        cc.insert("ttl".into(), Value::String(ttl.name().into()));
    }
    Value::Object(cc)
}

/// The lifetime a `cache_control` asks for: an hour with `"ttl": "1h"`,
/// else Anthropic's default five minutes.
pub fn cache_control_ttl(cache_control: &Value) -> Ttl {
    if cache_control.get("ttl").and_then(Value::as_str) == Some(Ttl::OneHour.name()) {
        Ttl::OneHour
    } else {
        Ttl::FiveMinutes
    }
}

/// Block types Anthropic accepts a `cache_control` on, and that we may mark:
/// never a `thinking` block (rejected, and signed) nor an empty text block
/// (rejected).
fn can_mark(b: &Value) -> bool {
    match block_type(b) {
        Some("text") => b
            .get("text")
            .and_then(Value::as_str)
            .is_some_and(|t| !t.is_empty()),
        Some("image" | "document" | "tool_use" | "tool_result" | "search_result") => true,
        _ => false,
    }
}

/// The `cache_control` markers a message (or the system prompt) carries: on
/// the message, on its blocks, and on the blocks inside its tool results,
/// by lifetime (a shorter-lived breakpoint may not come before a longer
/// one).
pub(super) fn breakpoints(raw: &Map<String, Value>) -> Markers {
    // Every message of every request is scanned: one pass over each
    // object's few entries, no hashed look-ups.
    fn scan(o: &Map<String, Value>, depth: u8, m: &mut Markers) {
        for (k, v) in o {
            match k.as_str() {
                "cache_control" if !v.is_null() => {
                    m.count += 1;
                    match cache_control_ttl(v) {
                        Ttl::OneHour => m.one_hour = true,
                        Ttl::FiveMinutes => m.five_minutes = true,
                    }
                }
                "content" if depth < 2 => {
                    if let Value::Array(blocks) = v {
                        for b in blocks.iter().filter_map(Value::as_object) {
                            scan(b, depth + 1, m);
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let mut m = Markers::default();
    scan(raw, 0, &mut m);
    m
}

/// Whether [`add_breakpoint`] would mark the message: its last block (or
/// its text, when the content is a string) can carry one, it carries no
/// marker there yet, and no block of it is signed.
pub(super) fn can_carry_breakpoint(raw: &Map<String, Value>) -> bool {
    if raw.contains_key("cache_control") || has_signed_blocks(raw) {
        return false;
    }
    match raw.get("content") {
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(b)) => b
            .last()
            .is_some_and(|last| can_mark(last) && last.get("cache_control").is_none()),
        _ => false,
    }
}

/// Puts an ephemeral `cache_control` living `ttl` on the last block of the
/// message, so the prefix it caches ends with the whole message. A string content
/// becomes one text block first. `None` (and nothing changed) when the
/// message cannot carry one ([`can_carry_breakpoint`]); otherwise the
/// marked block and whether the content was a string, what
/// [`remove_breakpoint`] needs to undo it byte for byte.
pub(super) fn add_breakpoint(raw: &mut Map<String, Value>, ttl: Ttl) -> Option<(usize, bool)> {
    if !can_carry_breakpoint(raw) {
        return None;
    }
    let content = raw.get_mut("content")?;
    if let Value::String(s) = content {
        let text = std::mem::take(s);
        let block = Map::from_iter([
            ("type".to_string(), Value::String("text".into())),
            ("text".to_string(), Value::String(text)),
            ("cache_control".to_string(), ephemeral(ttl)),
        ]);
        *content = Value::Array(vec![Value::Object(block)]);
        return Some((0, true));
    }
    let Value::Array(parts) = content else {
        return None;
    };
    let i = parts.len().checked_sub(1)?;
    let Value::Object(last) = &mut parts[i] else {
        return None;
    };
    last.insert("cache_control".into(), ephemeral(ttl));
    Some((i, false))
}

/// Undoes [`add_breakpoint`]: the marker of block `block` goes, and a
/// content that was a string is one again. False when the message does not
/// have that marker (it was not ours, or it changed since).
pub(super) fn remove_breakpoint(
    raw: &mut Map<String, Value>,
    block: usize,
    from_string: bool,
) -> bool {
    let Some(Value::Array(parts)) = raw.get_mut("content") else {
        return false;
    };
    let Some(Value::Object(b)) = parts.get_mut(block) else {
        return false;
    };
    if b.remove("cache_control").is_none() {
        return false;
    }
    // Back to the string it was, when the block is still just that text.
    let text = match parts.as_slice() {
        [Value::Object(b)] if from_string && b.len() == 2 => match b.get("text") {
            Some(Value::String(t)) if b.get("type").and_then(Value::as_str) == Some("text") => {
                Some(t.clone())
            }
            _ => None,
        },
        _ => None,
    };
    if let Some(text) = text {
        raw.insert("content".into(), Value::String(text));
    }
    true
}
