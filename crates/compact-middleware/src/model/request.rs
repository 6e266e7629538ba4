//! The request envelope: a bare array of items, or an object with
//! `messages` (and `tools`, and anything else, kept as-is).

use serde_json::{Map, Value};

use super::codec::{Format, decode_list, detect_format};
use super::error::{InputError, json_type};
use super::message::Message;

/// A decoded request: the messages, the tool schemas, and the envelope they
/// came in, so the response can be written back in the same shape.
#[derive(Debug, Clone)]
pub struct Request {
    /// The decoded items, in order.
    pub messages: Vec<Message>,
    /// The `tools` of an object envelope as received; empty for a bare array.
    pub tools: Vec<Value>,
    /// The format the messages were decoded in (never `Auto`).
    pub format: Format,
    /// `None` for a bare array; otherwise the object as received with
    /// `messages` emptied, so fields and key order come back unchanged.
    envelope: Option<Map<String, Value>>,
}

impl Request {
    /// Decodes `[...]` or `{"messages":[...],"tools":[...], ...}`.
    pub fn from_value(v: Value, format: Format) -> Result<Self, InputError> {
        let (items, tools, envelope) = match v {
            Value::Array(items) => (items, Vec::new(), None),
            Value::Object(mut o) => {
                let items = match o.get_mut("messages").map(Value::take) {
                    Some(Value::Array(a)) => a,
                    Some(other) => {
                        return Err(InputError::expected("$.messages", "array", &other));
                    }
                    None => {
                        return Err(InputError::missing("$.messages", "array of messages"));
                    }
                };
                let tools = match o.get("tools") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::Array(t)) => t.clone(),
                    Some(other) => return Err(InputError::expected("$.tools", "array", other)),
                };
                (items, tools, Some(o))
            }
            other => {
                return Err(InputError::new(
                    "$",
                    format!(
                        "expected an array of messages or an object with \"messages\", got {}",
                        json_type(&other)
                    ),
                ));
            }
        };
        let format = match format {
            Format::Auto => detect_format(&items),
            f => f,
        };
        // Paths inside an envelope start at `$.messages`.
        let messages = decode_list(items, format).map_err(|mut e| {
            if envelope.is_some() {
                e.path = e.path.replacen('$', "$.messages", 1);
            }
            e
        })?;
        Ok(Self {
            messages,
            tools,
            format,
            envelope,
        })
    }

    /// Writes `messages` back in the envelope the request came in.
    /// `provider` strips our `meta`/`compacted` fields.
    pub fn to_value(&self, messages: &[Message], provider: bool) -> Value {
        let items: Vec<Value> = messages
            .iter()
            .map(|m| {
                if provider {
                    m.to_provider_value()
                } else {
                    m.to_value()
                }
            })
            .collect();
        match &self.envelope {
            None => Value::Array(items),
            Some(envelope) => {
                let mut o = envelope.clone();
                o.insert("messages".into(), Value::Array(items));
                Value::Object(o)
            }
        }
    }
}
