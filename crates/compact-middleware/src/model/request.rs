//! The request envelope: a bare array of items, or an object with
//! `messages` (and `tools`, an Anthropic `system`, and anything else, kept as-is).

use serde_json::{Map, Value};

use super::codec::{Format, classify, decode_list};
use super::error::{InputError, json_type};
use super::message::{Message, Shape};

/// A decoded request: the messages, the tool schemas, and the envelope they
/// came in, so the response can be written back in the same shape.
#[derive(Debug, Clone)]
pub struct Request {
    /// The decoded items, in order. An Anthropic top-level `system` is the first of
    /// them (shape [`Shape::AnthropicSystem`]), so it is counted and pinned like any
    /// system message; [`Request::to_value`] puts it back in `system`.
    pub messages: Vec<Message>,
    /// The `tools` of an object envelope as received (counted, never changed); empty
    /// for a bare array.
    pub tools: Vec<Value>,
    /// The format the messages were decoded in (never `Auto`).
    pub format: Format,
    /// `None` for a bare array; otherwise the object as received with
    /// `messages` emptied, so fields and key order come back unchanged.
    envelope: Option<Map<String, Value>>,
}

impl Request {
    /// Decodes `[...]` or `{"messages":[...],"tools":[...], ...}` (with `"system"` for
    /// Anthropic). `Auto` picks the one format every item fits; an item that fits none,
    /// or a list that mixes formats, is an error naming the item.
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
        // Paths inside an envelope start at `$.messages`.
        let in_envelope = |mut e: InputError| {
            if envelope.is_some() {
                e.path = e.path.replacen('$', "$.messages", 1);
            }
            e
        };
        // A top-level `system` is Anthropic's; OpenAI requests have none.
        let system = envelope
            .as_ref()
            .and_then(|o| o.get("system"))
            .filter(|s| !s.is_null());
        let format = match format {
            Format::Auto => classify(&items, system.is_some()).map_err(in_envelope)?,
            f => f,
        };
        let mut messages = decode_list(items, format).map_err(in_envelope)?;
        if format == Format::Anthropic
            && let Some(system) = system
        {
            messages.insert(0, Message::anthropic_system(system.clone(), "$.system")?);
        }
        Ok(Self {
            messages,
            tools,
            format,
            envelope,
        })
    }

    /// A field of the object envelope as received (`None` for a bare array,
    /// and for `messages`, which the request holds decoded).
    pub fn envelope_field(&self, key: &str) -> Option<&Value> {
        self.envelope
            .as_ref()?
            .get(key)
            .filter(|_| key != "messages")
    }

    /// Writes `messages` back in the envelope the request came in.
    /// `provider` strips our `meta`/`compacted` fields. In an Anthropic envelope the
    /// system message goes back to `system` (and `system` goes away if the message did).
    pub fn to_value(&self, messages: &[Message], provider: bool) -> Value {
        let item = |m: &Message| {
            if provider {
                m.to_provider_value()
            } else {
                m.to_value()
            }
        };
        let Some(envelope) = &self.envelope else {
            return Value::Array(messages.iter().map(item).collect());
        };
        let mut o = envelope.clone();
        let mut system = None;
        let mut items = Vec::with_capacity(messages.len());
        for m in messages {
            if self.format == Format::Anthropic
                && system.is_none()
                && m.kind().shape == Shape::AnthropicSystem
            {
                system = Some(m.raw().get("content").cloned().unwrap_or(Value::Null));
            } else {
                items.push(item(m));
            }
        }
        if self.format == Format::Anthropic {
            match system {
                // Replacing keeps the key where it was.
                Some(s) => {
                    o.insert("system".into(), s);
                }
                None if o.get("system").is_some_and(|s| !s.is_null()) => {
                    o.shift_remove("system");
                }
                None => {}
            }
        }
        o.insert("messages".into(), Value::Array(items));
        Value::Object(o)
    }
}
