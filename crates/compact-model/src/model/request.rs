//! The request envelope: a bare array of items, or an object with
//! `messages` (and `tools`, an Anthropic `system`, and anything else, kept as-is).

use serde_json::{Map, Value};

use super::codec::{Format, classify, decode_item, decode_list};
use super::error::{InputError, json_type};
use super::message::{Message, Shape};

/// One item of a history handed to [`Request::from_envelope`].
#[derive(Debug, Clone)]
pub enum Item {
    /// As received: decoded in the request's format.
    Json(Value),
    /// Decoded before from the same JSON text, in the same format.
    Decoded(Message),
}

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
                let tools = tools_of(&o)?;
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
        let in_envelope = in_envelope(envelope.is_some());
        let system = system_of(envelope.as_ref());
        let format = match format {
            Format::Auto => classify(&items, system.is_some()).map_err(in_envelope)?,
            f => f,
        };
        let messages = decode_list(items, format).map_err(in_envelope)?;
        Self::assemble(messages, tools, format, envelope)
    }

    /// [`Request::from_value`] for an object whose `messages` were taken out
    /// of it, some of them decoded already: a caller that keeps what it
    /// decoded of the same JSON text before (a proxy that sees one history
    /// resent whole every call) decodes only what is new. `messages` is set
    /// to `null` in `envelope` (kept where it is, or added at the end) and
    /// written back there by [`Request::to_value`]. The result, and any
    /// error (its order and paths), are those of [`Request::from_value`] on
    /// the object with the items in place, a [`Item::Decoded`] standing for
    /// the JSON it was decoded from in `format`. `format` must be named:
    /// `Auto` classifies JSON, which decoded items no longer are.
    pub fn from_envelope(
        mut envelope: Map<String, Value>,
        items: Vec<Item>,
        format: Format,
    ) -> Result<Self, InputError> {
        if format == Format::Auto {
            return Err(InputError::new(
                "$",
                "decoded items need a named format (chat, responses or anthropic), not auto",
            ));
        }
        envelope.insert("messages".into(), Value::Null);
        let tools = tools_of(&envelope)?;
        let in_envelope = in_envelope(true);
        let messages = items
            .into_iter()
            .enumerate()
            .map(|(i, item)| match item {
                Item::Decoded(m) => Ok(m),
                Item::Json(v) => decode_item(v, format, format!("$[{i}]")).map_err(in_envelope),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Self::assemble(messages, tools, format, Some(envelope))
    }

    /// The request of decoded `messages`: an Anthropic top-level `system`
    /// of the envelope becomes the first of them.
    fn assemble(
        mut messages: Vec<Message>,
        tools: Vec<Value>,
        format: Format,
        envelope: Option<Map<String, Value>>,
    ) -> Result<Self, InputError> {
        if format == Format::Anthropic
            && let Some(system) = system_of(envelope.as_ref())
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

/// The `tools` of an object envelope, as received (empty when absent or null).
fn tools_of(o: &Map<String, Value>) -> Result<Vec<Value>, InputError> {
    match o.get("tools") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(t)) => Ok(t.clone()),
        Some(other) => Err(InputError::expected("$.tools", "array", other)),
    }
}

/// An envelope's non-null top-level `system` (Anthropic's; OpenAI requests have none).
fn system_of(envelope: Option<&Map<String, Value>>) -> Option<&Value> {
    envelope
        .and_then(|o| o.get("system"))
        .filter(|s| !s.is_null())
}

/// Error paths inside an envelope start at `$.messages`.
fn in_envelope(envelope: bool) -> impl Fn(InputError) -> InputError + Copy {
    move |mut e| {
        if envelope {
            e.path = e.path.replacen('$', "$.messages", 1);
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(o) => o,
            _ => unreachable!(),
        }
    }

    /// `from_envelope` with some items decoded before is `from_value` on the
    /// whole object: messages, tools, and the body written back.
    #[test]
    fn from_envelope_is_from_value_with_decoded_items() {
        let items = vec![
            json!({"role": "user", "content": "hi"}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "ok"}]}),
            json!({"role": "user", "content": "more"}),
        ];
        let body = json!({"model": "m", "system": "be brief", "messages": items.clone(),
            "tools": [{"name": "t"}], "max_tokens": 5});
        let whole = Request::from_value(body.clone(), Format::Anthropic).unwrap();
        let earlier = Request::from_value(Value::Array(items.clone()), Format::Anthropic).unwrap();
        let mut envelope = object(body);
        envelope.insert("messages".into(), json!([]));
        let split = vec![
            Item::Decoded(earlier.messages[0].clone()),
            Item::Decoded(earlier.messages[1].clone()),
            Item::Json(items[2].clone()),
        ];
        let split = Request::from_envelope(envelope, split, Format::Anthropic).unwrap();
        assert_eq!(split.messages, whole.messages);
        assert_eq!(split.tools, whole.tools);
        assert_eq!(
            serde_json::to_string(&split.to_value(&split.messages, true)).unwrap(),
            serde_json::to_string(&whole.to_value(&whole.messages, true)).unwrap()
        );
    }

    #[test]
    fn from_envelope_errors_as_from_value() {
        let bad = json!({"messages": [{"role": "user", "content": "hi"}, {"role": "nobody"}]});
        let whole = Request::from_value(bad.clone(), Format::Chat).unwrap_err();
        let items = bad["messages"].as_array().unwrap().clone();
        let split = Request::from_envelope(
            Map::new(),
            items.into_iter().map(Item::Json).collect(),
            Format::Chat,
        )
        .unwrap_err();
        assert_eq!((split.path, split.message), (whole.path, whole.message));
        let tools = object(json!({"tools": 3}));
        let whole = Request::from_value(
            json!({"tools": 3, "messages": [{"role": "nobody"}]}),
            Format::Chat,
        )
        .unwrap_err();
        let split = Request::from_envelope(
            tools,
            vec![Item::Json(json!({"role": "nobody"}))],
            Format::Chat,
        )
        .unwrap_err();
        assert_eq!(
            (split.path.as_str(), whole.path.as_str()),
            ("$.tools", "$.tools")
        );
        assert!(Request::from_envelope(Map::new(), Vec::new(), Format::Auto).is_err());
    }
}
