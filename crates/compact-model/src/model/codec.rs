//! Wire JSON → [`Message`], with every input error named by its JSON path.

use std::fmt::Display;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::InputError;
use super::message::{CallRef, ItemType, Kind, Message, Role, Shape};

/// Which wire format a list of messages is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// Decide from the items (see [`detect_format`]).
    #[default]
    Auto,
    /// OpenAI Chat Completions messages.
    Chat,
    /// OpenAI Responses input items.
    Responses,
    /// Anthropic Messages (`content` blocks, top-level `system`).
    Anthropic,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Format::Auto),
            "chat" => Ok(Format::Chat),
            "responses" => Ok(Format::Responses),
            "anthropic" => Ok(Format::Anthropic),
            other => Err(format!(
                "unknown format {other:?} (expected auto, chat, responses or anthropic)"
            )),
        }
    }
}

/// The formats an item could be in: a set of [`Format`]s, with the fields that
/// narrowed it, for error messages.
#[derive(Debug, Clone)]
struct Fit {
    mask: u8,
    why: Vec<String>,
}

const CHAT: u8 = 1;
const RESPONSES: u8 = 2;
const ANTHROPIC: u8 = 4;
const ANY: u8 = CHAT | RESPONSES | ANTHROPIC;

impl Fit {
    fn narrow(&mut self, mask: u8, why: impl FnOnce() -> String) {
        if self.mask & mask != self.mask {
            self.mask &= mask;
            self.why.push(why());
        }
    }
}

fn mask_names(mask: u8) -> String {
    let names: Vec<&str> = [
        (CHAT, "Chat Completions"),
        (RESPONSES, "Responses"),
        (ANTHROPIC, "Anthropic Messages"),
    ]
    .iter()
    .filter(|(m, _)| mask & m != 0)
    .map(|(_, n)| *n)
    .collect();
    if names.is_empty() {
        "no known format".into()
    } else {
        names.join(" or ")
    }
}

/// Which formats one item fits, from the fields only some formats have.
fn fit(item: &Value) -> Fit {
    let mut f = Fit {
        mask: ANY,
        why: Vec::new(),
    };
    // Not an object: the decoder says so, with its path.
    let Some(o) = item.as_object() else { return f };
    let ty = o.get("type").and_then(Value::as_str);
    match ty {
        Some("message") => f.narrow(RESPONSES | ANTHROPIC, || "type \"message\"".into()),
        Some(t) => f.narrow(RESPONSES, || format!("type {t:?}")),
        None => {}
    }
    match o.get("role").and_then(Value::as_str) {
        Some(r @ ("tool" | "function")) => f.narrow(CHAT, || format!("role {r:?}")),
        Some("developer") => f.narrow(CHAT | RESPONSES, || "role \"developer\"".into()),
        Some(_) => {}
        None if ty.is_none() => f.narrow(0, || "neither a role nor a type".into()),
        None => {}
    }
    for key in ["tool_calls", "tool_call_id", "function_call"] {
        if o.get(key).is_some_and(|v| !v.is_null()) {
            f.narrow(CHAT, || format!("{key:?}"));
        }
    }
    match o.get("content") {
        Some(Value::Null) => f.narrow(CHAT, || "content null".into()),
        Some(Value::Array(parts)) => {
            for part in parts {
                let Some(pt) = part.get("type").and_then(Value::as_str) else {
                    continue;
                };
                let mask = match pt {
                    "input_text" | "output_text" | "input_image" | "input_file" => RESPONSES,
                    "refusal" => CHAT | RESPONSES,
                    "image_url" | "input_audio" | "file" => CHAT,
                    t if super::anthropic::is_own_block(t) => ANTHROPIC,
                    _ => continue,
                };
                f.narrow(mask, || format!("a {pt:?} content part"));
            }
        }
        _ => {}
    }
    f
}

/// The format `mask` allows, by preference: Chat, then Responses, then Anthropic
/// (Anthropic first when the request has a top-level `system`).
fn pick(mask: u8, prefer_anthropic: bool) -> Format {
    if prefer_anthropic && mask & ANTHROPIC != 0 {
        Format::Anthropic
    } else if mask & CHAT != 0 {
        Format::Chat
    } else if mask & RESPONSES != 0 {
        Format::Responses
    } else {
        Format::Anthropic
    }
}

/// The one format every item fits, or an error naming the first item that fits none
/// or that fits no format the items before it fit. `prefer_anthropic` breaks ties
/// in favour of Anthropic (the request had a top-level `system`).
pub(super) fn classify(items: &[Value], prefer_anthropic: bool) -> Result<Format, InputError> {
    let mut mask = ANY;
    let mut fits: Vec<Fit> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let f = fit(item);
        if f.mask == 0 {
            return Err(InputError::new(
                format!("$[{i}]"),
                format!(
                    "cannot tell the wire format of this item ({}); pass --format chat, responses or anthropic",
                    f.why.join(", ")
                ),
            ));
        }
        if mask & f.mask == 0 {
            let this = format!("{} ({})", mask_names(f.mask), f.why.join(", "));
            let earlier = fits
                .iter()
                .enumerate()
                .find(|(_, e)| e.mask & f.mask == 0)
                .map(|(j, e)| format!("$[{j}] is {} ({})", mask_names(e.mask), e.why.join(", ")))
                .unwrap_or_else(|| format!("the items before it fit only {}", mask_names(mask)));
            return Err(InputError::new(
                format!("$[{i}]"),
                format!(
                    "the list mixes wire formats: this item is {this}, but {earlier}; pass --format to decode it as one format"
                ),
            ));
        }
        mask &= f.mask;
        fits.push(f);
    }
    Ok(pick(mask, prefer_anthropic))
}

/// The format of a list: the one format every item fits, Chat when several do (a
/// plain `{"role","content":"text"}` list is valid in every format and decodes the
/// same). A genuinely mixed list of Chat-style messages and Responses items is
/// Responses input (the Responses API accepts both side by side). Never `Auto`; a list
/// that fits no single format gives `Chat` here, and an error from [`super::Request`].
pub fn detect_format(items: &[Value]) -> Format {
    classify(items, false).unwrap_or(Format::Chat)
}

/// Decodes a list of items. `Auto` classifies the whole list once (an error names the
/// item that fits no format), then decodes every item strictly in that format.
pub(super) fn decode_list(items: Vec<Value>, format: Format) -> Result<Vec<Message>, InputError> {
    let format = match format {
        Format::Auto => classify(&items, false)?,
        f => f,
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, v)| decode_item(v, format, format!("$[{i}]")))
        .collect()
}

/// Decodes one item at `path`. `Auto` decides per item.
pub(super) fn decode_item(
    v: Value,
    format: Format,
    path: impl Display,
) -> Result<Message, InputError> {
    let path = path.to_string();
    let format = match format {
        Format::Auto => {
            let f = fit(&v);
            if f.mask == 0 {
                return Err(InputError::new(
                    &path,
                    format!(
                        "cannot tell the wire format of this item ({})",
                        f.why.join(", ")
                    ),
                ));
            }
            pick(f.mask, false)
        }
        f => f,
    };
    let Value::Object(o) = v else {
        return Err(InputError::expected(&path, "an object", &v));
    };
    let kind = match format {
        Format::Chat => chat_kind(&o, &path)?,
        Format::Anthropic => super::anthropic::kind(&o, &path)?,
        _ => responses_kind(&o, &path)?,
    };
    Ok(Message::from_parts(o, kind))
}

/// `path.key`, formatted only when an error needs it.
pub(super) struct P<'a>(pub(super) &'a str, pub(super) &'a str);
impl Display for P<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.0, self.1)
    }
}

pub(super) fn req_str<'a>(
    o: &'a Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<&'a str, InputError> {
    match o.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(InputError::expected(P(path, key), "string", other)),
        None => Err(InputError::missing(P(path, key), "string")),
    }
}

fn opt_str<'a>(
    o: &'a Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Option<&'a str>, InputError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(InputError::expected(P(path, key), "string", other)),
    }
}

pub(super) fn check_meta(o: &Map<String, Value>, path: &str) -> Result<(), InputError> {
    match o.get("meta") {
        None | Some(Value::Null) | Some(Value::Object(_)) => Ok(()),
        Some(other) => Err(InputError::expected(P(path, "meta"), "object", other)),
    }
}

/// Content: a string, an array of parts (objects with a string `type`), or,
/// where allowed, null.
fn check_content(
    v: Option<&Value>,
    path: &str,
    key: &str,
    null_ok: bool,
) -> Result<(), InputError> {
    let p = P(path, key).to_string();
    match v {
        Some(Value::String(_)) => Ok(()),
        Some(Value::Null) | None if null_ok => Ok(()),
        None => Err(InputError::missing(&p, "string or array of parts")),
        Some(Value::Array(parts)) => {
            for (i, part) in parts.iter().enumerate() {
                let pp = format!("{p}[{i}]");
                let Value::Object(po) = part else {
                    return Err(InputError::expected(&pp, "a content part object", part));
                };
                let ty = req_str(po, "type", &pp)?;
                if super::anthropic::is_own_block(ty) {
                    return Err(InputError::new(
                        &pp,
                        format!(
                            "an Anthropic {ty} block outside anthropic format; use --format anthropic or auto"
                        ),
                    ));
                }
                if matches!(ty, "text" | "input_text" | "output_text") {
                    req_str(po, "text", &pp)?;
                }
            }
            Ok(())
        }
        Some(other) => Err(InputError::expected(&p, "string or array of parts", other)),
    }
}

fn chat_kind(o: &Map<String, Value>, path: &str) -> Result<Kind, InputError> {
    check_meta(o, path)?;
    if let Some(ty) = o.get("type").and_then(Value::as_str) {
        return Err(InputError::new(
            P(path, "type"),
            format!(
                "a Responses item (type {ty:?}) in chat format; use --format responses or auto"
            ),
        ));
    }
    let role_s = req_str(o, "role", path)?;
    let role = match role_s {
        "system" => Role::System,
        "developer" => Role::Developer,
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "tool" | "function" => Role::Tool,
        other => {
            return Err(InputError::new(
                P(path, "role"),
                format!(
                    "unknown role {other:?} (expected system, developer, user, assistant, tool or function)"
                ),
            ));
        }
    };
    opt_str(o, "name", path)?;
    let mut kind = Kind::new(role, ItemType::Message, Shape::ChatMessage);
    match role_s {
        "assistant" => {
            check_content(o.get("content"), path, "content", true)?;
            match o.get("tool_calls") {
                None | Some(Value::Null) => {}
                Some(Value::Array(calls)) => {
                    for (i, call) in calls.iter().enumerate() {
                        let cp = format!("{path}.tool_calls[{i}]");
                        let Value::Object(co) = call else {
                            return Err(InputError::expected(&cp, "a tool call object", call));
                        };
                        let id = req_str(co, "id", &cp)?;
                        let fp = format!("{cp}.function");
                        let name = match co.get("function") {
                            Some(Value::Object(f)) => {
                                let name = req_str(f, "name", &fp)?;
                                req_str(f, "arguments", &fp)?;
                                name
                            }
                            // Custom tool calls carry `custom: {name, input}`.
                            None => match co.get("custom") {
                                Some(Value::Object(c)) => {
                                    req_str(c, "name", &format!("{cp}.custom"))?
                                }
                                _ => return Err(InputError::missing(&fp, "object")),
                            },
                            Some(other) => return Err(InputError::expected(&fp, "object", other)),
                        };
                        kind.calls.push(CallRef {
                            call_id: id.to_string(),
                            name: name.to_string(),
                        });
                    }
                }
                Some(other) => {
                    return Err(InputError::expected(P(path, "tool_calls"), "array", other));
                }
            }
            // Legacy `function_call`: paired with the next `function` message by name.
            if let Some(fc) = o.get("function_call").filter(|v| !v.is_null()) {
                let fp = format!("{path}.function_call");
                let Value::Object(f) = fc else {
                    return Err(InputError::expected(&fp, "object", fc));
                };
                let name = req_str(f, "name", &fp)?;
                kind.calls.push(CallRef {
                    call_id: legacy_call_id(name),
                    name: name.to_string(),
                });
            }
        }
        "tool" => {
            check_content(o.get("content"), path, "content", false)?;
            let id = req_str(o, "tool_call_id", path)?;
            kind.item = ItemType::ToolResult;
            kind.results.push(id.to_string());
            kind.result_name = o.get("name").and_then(Value::as_str).map(str::to_string);
        }
        "function" => {
            check_content(o.get("content"), path, "content", true)?;
            let name = req_str(o, "name", path)?;
            kind.item = ItemType::ToolResult;
            kind.results.push(legacy_call_id(name));
            kind.result_name = Some(name.to_string());
        }
        _ => check_content(o.get("content"), path, "content", false)?,
    }
    Ok(kind)
}

/// Legacy chat function calls have no id; they pair by function name.
fn legacy_call_id(name: &str) -> String {
    format!("legacy-function:{name}")
}

fn responses_role(o: &Map<String, Value>, path: &str) -> Result<Role, InputError> {
    Ok(match req_str(o, "role", path)? {
        "system" => Role::System,
        "developer" => Role::Developer,
        "user" => Role::User,
        "assistant" => Role::Assistant,
        other => {
            return Err(InputError::new(
                P(path, "role"),
                format!("unknown role {other:?} (expected system, developer, user or assistant)"),
            ));
        }
    })
}

fn responses_kind(o: &Map<String, Value>, path: &str) -> Result<Kind, InputError> {
    check_meta(o, path)?;
    let mut kind = Kind::new(Role::Other, ItemType::Other, Shape::ResponsesOther);
    let ty = match o.get("type") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(other) => return Err(InputError::expected(P(path, "type"), "string", other)),
    };
    match ty {
        None | Some("message") => {
            if o.contains_key("tool_calls") || o.get("role").and_then(Value::as_str) == Some("tool")
            {
                return Err(InputError::new(
                    path,
                    "a Chat Completions tool message in responses format; use --format chat or auto",
                ));
            }
            kind.role = responses_role(o, path)?;
            kind.item = ItemType::Message;
            kind.shape = Shape::ResponsesMessage;
            check_content(o.get("content"), path, "content", false)?;
        }
        Some("reasoning") => {
            kind.role = Role::Assistant;
            kind.item = ItemType::Reasoning;
            kind.shape = Shape::ResponsesReasoning;
        }
        Some(t) if t.ends_with("_call_output") => {
            let id = req_str(o, "call_id", path)?;
            match o.get("output") {
                None | Some(Value::String(_)) | Some(Value::Array(_)) | Some(Value::Object(_)) => {}
                Some(other) => {
                    return Err(InputError::expected(
                        P(path, "output"),
                        "string or array of parts",
                        other,
                    ));
                }
            }
            kind.role = Role::Tool;
            kind.item = ItemType::ToolResult;
            kind.shape = Shape::ResponsesCallOutput;
            kind.results.push(id.to_string());
        }
        Some(t) if t.ends_with("_call") && o.contains_key("call_id") => {
            let id = req_str(o, "call_id", path)?;
            let name = if t == "function_call" || t == "custom_tool_call" {
                req_str(o, "name", path)?.to_string()
            } else {
                opt_str(o, "name", path)?.unwrap_or(t).to_string()
            };
            if t == "function_call" {
                req_str(o, "arguments", path)?;
            }
            kind.role = Role::Assistant;
            kind.item = ItemType::ToolCall;
            kind.shape = Shape::ResponsesCall;
            kind.calls.push(CallRef {
                call_id: id.to_string(),
                name,
            });
        }
        Some("compaction") => {
            // Opaque provider state: pinned, and kept with the group after it.
            kind.compaction = true;
        }
        Some(_) => {
            // item_reference, web_search_call, ...: passed through untouched.
        }
    }
    Ok(kind)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(v: Value, f: Format) -> String {
        match decode_list(v.as_array().cloned().unwrap_or_default(), f) {
            Ok(_) => "ok".into(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn errors_name_the_json_path() {
        assert_eq!(
            err(
                json!([{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"user","content":"c"},{"role":"user","content":5}]),
                Format::Chat
            ),
            "$[3].content: expected string or array of parts, got number"
        );
        assert_eq!(
            err(
                json!([{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":{}}}]}]),
                Format::Chat
            ),
            "$[0].tool_calls[0].function.arguments: expected string, got object"
        );
        assert_eq!(
            err(json!([{"content":"x"}]), Format::Chat),
            "$[0].role: missing (expected string)"
        );
        assert_eq!(
            err(json!(["x"]), Format::Auto),
            "$[0]: expected an object, got string"
        );
        assert_eq!(
            err(json!([{"role":"tool","content":"x"}]), Format::Chat),
            "$[0].tool_call_id: missing (expected string)"
        );
        assert_eq!(
            err(
                json!([{"type":"function_call","call_id":"c","name":"f"}]),
                Format::Responses
            ),
            "$[0].arguments: missing (expected string)"
        );
        assert_eq!(
            err(
                json!([{"role":"user","content":[{"type":"text"}]}]),
                Format::Chat
            ),
            "$[0].content[0].text: missing (expected string)"
        );
        assert!(
            err(json!([{"role":"wizard","content":"x"}]), Format::Chat)
                .starts_with("$[0].role: unknown role \"wizard\"")
        );
        assert!(
            err(
                json!([{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]),
                Format::Chat
            )
            .contains("use --format responses")
        );
        assert_eq!(
            err(
                json!([{"role":"user","content":"x","meta":3}]),
                Format::Auto
            ),
            "$[0].meta: expected object, got number"
        );
    }

    #[test]
    fn detection() {
        assert_eq!(
            detect_format(&[json!({"role":"user","content":"hi"})]),
            Format::Chat
        );
        assert_eq!(
            detect_format(&[
                json!({"role":"user","content":"hi"}),
                json!({"type":"function_call_output","call_id":"c","output":"x"})
            ]),
            Format::Responses
        );
        assert_eq!(
            detect_format(&[json!({"role":"user","content":[{"type":"input_text","text":"hi"}]})]),
            Format::Responses
        );
    }
}
