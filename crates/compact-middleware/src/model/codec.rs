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
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Format::Auto),
            "chat" => Ok(Format::Chat),
            "responses" => Ok(Format::Responses),
            other => Err(format!(
                "unknown format {other:?} (expected auto, chat or responses)"
            )),
        }
    }
}

/// Decides the format of a list: Responses when any item is unmistakably a
/// Responses item (a `type` other than a chat content part, or Responses
/// content parts), Chat otherwise. A plain `{"role","content":"text"}` list is
/// valid in both and decodes the same either way.
pub fn detect_format(items: &[Value]) -> Format {
    let responses = items.iter().any(|item| {
        let Some(o) = item.as_object() else {
            return false;
        };
        if o.get("type").and_then(Value::as_str).is_some() {
            return true;
        }
        if let Some(Value::Array(parts)) = o.get("content") {
            return parts.iter().any(|p| {
                matches!(
                    p.get("type").and_then(Value::as_str),
                    Some("input_text" | "output_text" | "input_image" | "input_file")
                )
            });
        }
        false
    });
    if responses {
        Format::Responses
    } else {
        Format::Chat
    }
}

/// Decodes a list of items. `Auto` detects the format once for the whole list,
/// then decodes every item strictly in that format.
pub(super) fn decode_list(items: Vec<Value>, format: Format) -> Result<Vec<Message>, InputError> {
    let format = match format {
        Format::Auto => detect_format(&items),
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
        Format::Auto => detect_format(std::slice::from_ref(&v)),
        f => f,
    };
    let Value::Object(o) = v else {
        return Err(InputError::expected(&path, "an object", &v));
    };
    let kind = match format {
        Format::Chat => chat_kind(&o, &path)?,
        _ => responses_kind(&o, &path)?,
    };
    Ok(Message::from_parts(o, kind))
}

struct P<'a>(&'a str, &'a str);
impl Display for P<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.0, self.1)
    }
}

fn req_str<'a>(o: &'a Map<String, Value>, key: &str, path: &str) -> Result<&'a str, InputError> {
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

fn check_meta(o: &Map<String, Value>, path: &str) -> Result<(), InputError> {
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
    let mut kind = Kind {
        role,
        item: ItemType::Message,
        shape: Shape::ChatMessage,
        calls: Vec::new(),
        results: Vec::new(),
        result_name: None,
    };
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
    let mut kind = Kind {
        role: Role::Other,
        item: ItemType::Other,
        shape: Shape::ResponsesOther,
        calls: Vec::new(),
        results: Vec::new(),
        result_name: None,
    };
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
        Some(_) => {
            // compaction, item_reference, web_search_call, ...: passed through untouched.
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
