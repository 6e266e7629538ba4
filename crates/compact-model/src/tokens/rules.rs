//! What a message, an input item and a tool schema cost. The rules are specified in
//! `docs/tokens.md`; keep the two in step.
use super::{Encoding, TokenCounter};
use serde_json::{Map, Value};

/// Framing tokens of every message or item (cookbook `tokens_per_message`).
pub const PER_MESSAGE: usize = 3;
/// Extra token when a message carries an author `name` (cookbook `tokens_per_name`).
pub const PER_NAME: usize = 1;
/// Added once per request: every reply is primed with `<|start|>assistant<|message|>`.
pub const REPLY_PRIMING: usize = 3;
/// Framing of one tool call inside a Chat Completions assistant message. The same call sent
/// as a Responses `function_call` item is its own item and pays [`PER_MESSAGE`]; charging the
/// same here keeps the two wire formats of one conversation at the same count.
pub const PER_TOOL_CALL: usize = 3;
/// An image part with `detail: "low"` (OpenAI's fixed low-detail cost for 4o-class models).
pub const IMAGE_LOW: usize = 85;
/// Any other image part: the high-detail cost of a 1024x1024 image (85 + 4 tiles x 170).
/// The real cost depends on the pixel size, which is not known without decoding the image.
pub const IMAGE_HIGH: usize = 765;
/// A file part (PDF and similar). Its extracted text and page images are not known offline;
/// a fixed cost keeps base64 bytes out of the estimate. The filename is counted on top.
pub const FILE_PART: usize = 1000;
/// An audio part. Audio tokens depend on duration, not known without decoding.
pub const AUDIO_PART: usize = 500;
/// An Anthropic `image` block: Claude charges about width × height / 750 tokens and
/// downscales anything above about 1.15 megapixels, so 1 600 is the most an image costs.
/// The pixel size is not known without decoding the image; the bound errs on the side of
/// compacting early.
pub const IMAGE_ANTHROPIC: usize = 1600;

/// Keys of our own that are stripped before the provider sees a message.
const OUR_KEYS: [&str; 2] = ["meta", "compacted"];

/// Keys never counted at any depth: opaque provider state (`encrypted_content`) and
/// Anthropic prompt-cache markers (`cache_control`), which are not rendered to the model.
fn never_counted(key: &str) -> bool {
    matches!(key, "encrypted_content" | "cache_control")
}

/// Tokens of one message or input item, including [`PER_MESSAGE`].
///
/// Chat Completions messages (no `type`) follow the OpenAI cookbook: every string field is
/// encoded, role included, plus [`PER_NAME`] for `name`. Responses items (a string `type`)
/// do not count `type`, `id` or `status`. Content parts, tool calls and nested values follow
/// `docs/tokens.md`. Our own `meta` and `compacted` fields are ignored. [`REPLY_PRIMING`] is
/// not included: the caller adds it once per request.
pub fn count_item(c: &dyn TokenCounter, item: &Map<String, Value>) -> usize {
    let item_type = item.get("type").and_then(Value::as_str);
    let is_message = matches!(item_type, None | Some("message"));
    let mut total = PER_MESSAGE;
    for (key, value) in item {
        let key = key.as_str();
        if OUR_KEYS.contains(&key) || never_counted(key) {
            continue;
        }
        if item_type.is_some() && matches!(key, "type" | "id" | "status") {
            continue;
        }
        total += match (key, value) {
            ("name", Value::String(s)) if is_message => c.count(s) + PER_NAME,
            ("tool_calls", Value::Array(calls)) => calls
                .iter()
                .map(|call| PER_TOOL_CALL + count_value(c, call))
                .sum(),
            // The legacy single `function_call` of a chat assistant message.
            ("function_call", Value::Object(_)) if item_type.is_none() => {
                PER_TOOL_CALL + count_value(c, value)
            }
            _ => count_value(c, value),
        };
    }
    total
}

/// Cost of a nested value: strings encoded, numbers and booleans as their JSON text, null
/// free, arrays and objects by their contents (keys are structure and not counted), content
/// parts by their documented rule wherever they appear.
fn count_value(c: &dyn TokenCounter, value: &Value) -> usize {
    match value {
        Value::Null => 0,
        Value::Bool(b) => c.count(if *b { "true" } else { "false" }),
        Value::Number(n) => c.count(&n.to_string()),
        Value::String(s) => count_string(c, s),
        Value::Array(items) => items.iter().map(|v| count_value(c, v)).sum(),
        Value::Object(map) => count_object(c, map),
    }
}

/// Base64 data URLs are attachments, not text: encoding them would count megabytes of
/// base64 as tokens and trigger compaction for nothing.
fn count_string(c: &dyn TokenCounter, s: &str) -> usize {
    match data_url_kind(s) {
        Some(DataUrl::Image) => IMAGE_HIGH,
        Some(DataUrl::Audio) => AUDIO_PART,
        Some(DataUrl::Other) => FILE_PART,
        None => c.count(s),
    }
}

enum DataUrl {
    Image,
    Audio,
    Other,
}

fn data_url_kind(s: &str) -> Option<DataUrl> {
    let rest = s.strip_prefix("data:")?;
    // The media type and parameters are short; do not scan a megabyte of base64 for the marker.
    let head = rest.get(..rest.len().min(256)).unwrap_or(rest);
    let head = match head.find(',') {
        Some(comma) => &head[..comma],
        None => return None,
    };
    if !head.ends_with(";base64") {
        return None;
    }
    Some(if head.starts_with("image/") {
        DataUrl::Image
    } else if head.starts_with("audio/") {
        DataUrl::Audio
    } else {
        DataUrl::Other
    })
}

fn count_object(c: &dyn TokenCounter, map: &Map<String, Value>) -> usize {
    let part_type = map.get("type").and_then(Value::as_str);
    match part_type {
        Some("text" | "input_text" | "output_text" | "summary_text" | "reasoning_text") => {
            // Only the text reaches the model; annotations and logprobs are response metadata.
            if let Some(Value::String(text)) = map.get("text") {
                return c.count(text);
            }
        }
        Some("refusal") => {
            if let Some(Value::String(refusal)) = map.get("refusal") {
                return c.count(refusal);
            }
        }
        Some("image_url" | "input_image" | "computer_screenshot") => {
            return image_cost(map);
        }
        Some("input_audio") => return AUDIO_PART,
        // Anthropic content blocks.
        Some("image") => return IMAGE_ANTHROPIC,
        Some("document") => return document_cost(c, map),
        Some("tool_use" | "server_tool_use") => {
            // Like a chat tool call: framing, id, name, and the input as the JSON text
            // the model reads (its keys included).
            let input = map.get("input").map_or(0, |v| {
                c.count(&serde_json::to_string(v).unwrap_or_default())
            });
            return PER_TOOL_CALL
                + ["id", "name"]
                    .iter()
                    .filter_map(|k| map.get(*k).and_then(Value::as_str))
                    .map(|s| c.count(s))
                    .sum::<usize>()
                + input;
        }
        Some("tool_result") => {
            let id = map
                .get("tool_use_id")
                .and_then(Value::as_str)
                .map_or(0, |s| c.count(s));
            return id + map.get("content").map_or(0, |v| count_value(c, v));
        }
        Some("thinking") => {
            // The signature is opaque and not text the model reads.
            return map
                .get("thinking")
                .and_then(Value::as_str)
                .map_or(0, |s| c.count(s));
        }
        // Encrypted reasoning: billed, but we cannot see how much it stands for.
        Some("redacted_thinking") => return 0,
        Some("file" | "input_file") => {
            let filename = map
                .get("filename")
                .or_else(|| map.get("file").and_then(|f| f.get("filename")))
                .and_then(Value::as_str)
                .map_or(0, |name| c.count(name));
            return FILE_PART + filename;
        }
        _ => {}
    }
    map.iter()
        .filter(|(key, value)| {
            // `type` discriminators are structure; encrypted reasoning is opaque to us and
            // not billed as text we can see.
            !(never_counted(key) || key.as_str() == "type" && value.is_string())
        })
        .map(|(_, value)| count_value(c, value))
        .sum()
}

/// An Anthropic `document` block: the text of a plain-text or content source; a fixed
/// [`FILE_PART`] for a PDF or URL source (its pages are not known offline); its title
/// and context on top.
fn document_cost(c: &dyn TokenCounter, map: &Map<String, Value>) -> usize {
    let source = map.get("source");
    let body = match source.and_then(|s| s.get("type")).and_then(Value::as_str) {
        Some("text") => source
            .and_then(|s| s.get("data"))
            .and_then(Value::as_str)
            .map_or(0, |s| c.count(s)),
        Some("content") => source
            .and_then(|s| s.get("content"))
            .map_or(0, |v| count_value(c, v)),
        _ => FILE_PART,
    };
    let extra: usize = ["title", "context"]
        .iter()
        .filter_map(|k| map.get(*k).and_then(Value::as_str))
        .map(|s| c.count(s))
        .sum();
    body + extra
}

fn image_cost(part: &Map<String, Value>) -> usize {
    let detail = part
        .get("detail")
        .or_else(|| part.get("image_url").and_then(|u| u.get("detail")))
        .and_then(Value::as_str);
    if detail == Some("low") {
        IMAGE_LOW
    } else {
        IMAGE_HIGH
    }
}

/// Per-encoding constants of the cookbook's `num_tokens_for_tools`.
struct ToolCosts {
    func_init: i64,
    prop_init: i64,
    prop_key: i64,
    enum_init: i64,
    enum_item: i64,
    func_end: i64,
}

fn tool_costs(encoding: Encoding) -> ToolCosts {
    ToolCosts {
        func_init: match encoding {
            Encoding::O200k => 7,
            Encoding::Cl100k => 10,
        },
        prop_init: 3,
        prop_key: 3,
        enum_init: -3,
        enum_item: 3,
        func_end: 12,
    }
}

/// Tokens of the tool schemas sent with a request (0 for an empty list).
///
/// Function tools in any shape (Chat `{"type":"function","function":{..}}`, Responses
/// `{"type":"function","name",..}`, Anthropic `{"name","description","input_schema"}`)
/// follow the cookbook's `num_tokens_for_tools`; nested
/// properties and non-function tools fall back to their compact JSON. Odd input never
/// panics: whatever is there is counted. See `docs/tokens.md`.
pub fn count_tools(c: &dyn TokenCounter, tools: &[Value]) -> usize {
    if tools.is_empty() {
        return 0;
    }
    let k = tool_costs(c.encoding());
    let mut total = k.func_end;
    for tool in tools {
        total += k.func_init;
        total += match function_of(tool) {
            Some(function) => count_function(c, &k, function),
            None => count_json(c, tool),
        };
    }
    usize::try_from(total.max(0)).unwrap_or(0)
}

/// The function definition inside a tool, if it is a function tool.
fn function_of(tool: &Value) -> Option<&Map<String, Value>> {
    let map = tool.as_object()?;
    match map.get("type").and_then(Value::as_str) {
        Some("function") | None => {}
        Some(_) => return None,
    }
    match map.get("function") {
        Some(Value::Object(function)) => Some(function),
        Some(_) => None,
        // Responses flat shape, or a bare legacy `functions` entry.
        None if map.get("name").is_some_and(Value::is_string) => Some(map),
        None => None,
    }
}

fn strip_period(s: &str) -> &str {
    s.strip_suffix('.').unwrap_or(s)
}

fn str_field<'a>(map: &'a Map<String, Value>, key: &str) -> &'a str {
    map.get(key).and_then(Value::as_str).unwrap_or("")
}

fn count_json(c: &dyn TokenCounter, value: &impl serde::Serialize) -> i64 {
    // Serializing a serde_json value (or a map of them) to a string cannot fail.
    let json = serde_json::to_string(value).unwrap_or_default();
    to_i64(c.count(&json))
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn count_function(c: &dyn TokenCounter, k: &ToolCosts, function: &Map<String, Value>) -> i64 {
    let name = str_field(function, "name");
    let description = strip_period(str_field(function, "description"));
    let mut total = to_i64(c.count(&format!("{name}:{description}")));
    // Anthropic tools carry the schema as `input_schema`.
    let properties = match function
        .get("parameters")
        .or_else(|| function.get("input_schema"))
    {
        None | Some(Value::Null) => return total,
        Some(Value::Object(parameters)) => match parameters.get("properties") {
            None | Some(Value::Null) => return total,
            Some(Value::Object(properties)) => properties,
            Some(_) => return total + k.prop_init + count_json(c, parameters),
        },
        Some(parameters) => return total + k.prop_init + count_json(c, parameters),
    };
    if properties.is_empty() {
        return total;
    }
    total += k.prop_init;
    for (key, schema) in properties {
        total += k.prop_key;
        total += match simple_property(schema) {
            Some((ty, description, enum_items)) => {
                let mut cost =
                    to_i64(c.count(&format!("{key}:{ty}:{}", strip_period(description))));
                if let Some(items) = enum_items {
                    cost += k.enum_init;
                    for item in items {
                        cost += k.enum_item;
                        cost += to_i64(match item {
                            Value::String(s) => c.count(s),
                            other => c.count(&other.to_string()),
                        });
                    }
                }
                cost
            }
            None => {
                let mut json = String::with_capacity(key.len() + 1);
                json.push_str(key);
                json.push(':');
                json.push_str(&serde_json::to_string(schema).unwrap_or_default());
                to_i64(c.count(&json))
            }
        };
    }
    total
}

/// `(type, description, enum)` of a property the cookbook's `key:type:description` line
/// describes: a scalar `type` and no nested schema. Everything else (objects, arrays,
/// `anyOf`, `$ref`, type lists, a non-string description) is a complex property.
fn simple_property(schema: &Value) -> Option<(&str, &str, Option<&Vec<Value>>)> {
    let map = schema.as_object()?;
    let ty = map.get("type")?.as_str()?;
    if matches!(ty, "object" | "array") {
        return None;
    }
    let mut enum_items = None;
    for (key, value) in map {
        match (key.as_str(), value) {
            ("enum", Value::Array(items)) => enum_items = Some(items),
            ("description", v) if !v.is_string() => return None,
            // Nested schemas (`anyOf`, `items`, ...) are not described by the line.
            (_, Value::Object(_) | Value::Array(_)) => return None,
            // Scalar annotations (`default`, `format`, `minimum`, ...) are ignored, as in
            // the cookbook.
            _ => {}
        }
    }
    Some((ty, str_field(map, "description"), enum_items))
}
