//! A request body read once, its history left as text: an agent resends
//! its whole history every call, and parsing it into a JSON tree (then
//! dropping that tree) was most of what the proxy added to a call. The
//! top-level fields are parsed as usual; the history array's items stay
//! slices of the body until [`super::history`] decodes the ones it has not
//! seen before.
//!
//! Anything this reader does not take as it is (a body that is not an
//! object, a history that is not an array, a field serde_json reads as
//! text but not as a value) is left to the whole-body parse, so every body
//! ends up read exactly as before.

use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// A body split by [`split`].
#[derive(Debug)]
pub(crate) struct Split<'a> {
    /// The body's fields, in their order; the history field holds an empty
    /// array (its items are in `items`).
    pub(crate) doc: Map<String, Value>,
    /// The history array's items, as JSON text.
    pub(crate) items: Vec<&'a RawValue>,
}

/// `body` as its fields and the items of its `history` array (`messages`
/// or `input`), or `None` when the body is anything else.
pub(crate) fn split<'a>(body: &'a [u8], history: &str) -> Option<Split<'a>> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let fields = de.deserialize_map(Fields(history)).ok()?;
    de.end().ok()?;
    let mut doc = Map::with_capacity(fields.len());
    let mut items = None;
    for (key, field) in fields {
        // Later duplicates replace the value where the key first stood, as
        // in serde_json's map.
        let value = match field {
            Field::History(list) => {
                items = Some(list);
                Value::Array(Vec::new())
            }
            Field::Other(raw) => {
                let value = serde_json::from_str::<Value>(raw.get()).ok()?;
                within_depth(&value, 1).then_some(value)?
            }
        };
        doc.insert(key, value);
    }
    Some(Split { doc, items: items? })
}

/// An item of the history as a value, when the whole-body parse would
/// have read it so (`None`: that parse fails on this body).
pub(crate) fn item(raw: &RawValue) -> Option<Value> {
    let value = serde_json::from_str::<Value>(raw.get()).ok()?;
    within_depth(&value, 2).then_some(value)
}

/// Whether `value`, inside `above` arrays and objects, stays within
/// serde_json's limit of 127 nested ones: skipping text has no limit, so a
/// part can parse alone where the whole body would not.
fn within_depth(value: &Value, above: usize) -> bool {
    fn depth(v: &Value) -> usize {
        match v {
            Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
            Value::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
            _ => 0,
        }
    }
    above + depth(value) <= MAX_DEPTH
}

/// serde_json's recursion limit: nested arrays and objects it reads.
const MAX_DEPTH: usize = 127;

/// A top-level field: the history's items, or another field's text.
enum Field<'a> {
    History(Vec<&'a RawValue>),
    Other(&'a RawValue),
}

/// The top-level fields in one pass over the body; a history that is not
/// an array fails it (the whole-body parse takes such a body).
struct Fields<'h>(&'h str);

impl<'de> Visitor<'de> for Fields<'_> {
    type Value = Vec<(String, Field<'de>)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut fields = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let field = if key == self.0 {
                Field::History(map.next_value()?)
            } else {
                Field::Other(map.next_value()?)
            };
            fields.push((key, field));
        }
        Ok(fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_are_parsed_and_history_items_kept_as_text() {
        let body =
            br#"{"model":"m","messages":[ {"role":"user","content":"hi"} , 3],"stream":true}"#;
        let s = split(body, "messages").unwrap();
        assert_eq!(
            Value::Object(s.doc),
            json!({"model": "m", "messages": [], "stream": true})
        );
        let items: Vec<&str> = s.items.iter().map(|r| r.get()).collect();
        assert_eq!(items, [r#"{"role":"user","content":"hi"}"#, "3"]);
    }

    /// A part nested as deep as serde_json reads is read; one level more,
    /// which the whole body would not parse, is refused.
    #[test]
    fn depth_is_that_of_the_whole_body() {
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        for (n, ok) in [(126, true), (127, false)] {
            let body = format!(r#"{{"x":{},"messages":[]}}"#, nested(n));
            let whole = serde_json::from_str::<Map<String, Value>>(&body).is_ok();
            assert_eq!(whole, ok);
            assert_eq!(split(body.as_bytes(), "messages").is_some(), ok);
            let body = format!(r#"{{"messages":[{}]}}"#, nested(n - 1));
            let whole = serde_json::from_str::<Map<String, Value>>(&body).is_ok();
            assert_eq!(whole, ok);
            let s = split(body.as_bytes(), "messages").unwrap();
            assert_eq!(item(s.items[0]).is_some(), ok);
        }
    }

    #[test]
    fn duplicate_keys_keep_the_first_place_and_the_last_value() {
        let body = br#"{"messages":[1],"model":"a","messages":[2],"model":"b"}"#;
        let s = split(body, "messages").unwrap();
        let whole: Map<String, Value> = serde_json::from_slice(body).unwrap();
        assert_eq!(
            s.doc.keys().collect::<Vec<_>>(),
            whole.keys().collect::<Vec<_>>()
        );
        assert_eq!(s.doc["model"], whole["model"]);
        assert_eq!(s.items.len(), 1);
        assert_eq!(s.items[0].get(), "2");
    }

    #[test]
    fn other_bodies_are_left_to_the_whole_parse() {
        // (body, whether the whole-body parse reads it as an object)
        for (body, object) in [
            (&br#"[1]"#[..], false),
            (br#"{"messages":"text"}"#, true),
            (br#"{"model":"m"}"#, true),
            (br#"{"messages":[]} x"#, false),
            (br#"{"messages":[1,]}"#, false),
            // Text serde_json skips but will not parse into a value.
            (br#"{"n":1e999,"messages":[]}"#, false),
        ] {
            let text = String::from_utf8_lossy(body);
            assert!(split(body, "messages").is_none(), "{text}");
            let whole = serde_json::from_slice::<Map<String, Value>>(body).is_ok();
            assert_eq!(whole, object, "{text}");
        }
        let s = split(br#"{"messages":[1e999]}"#, "messages").unwrap();
        assert!(item(s.items[0]).is_none());
    }
}
