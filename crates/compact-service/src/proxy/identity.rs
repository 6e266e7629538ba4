//! Which session a request belongs to, without client changes
//! (docs/design.md §15): the `X-Compact-Session` header, else the body's
//! `prompt_cache_key`, `user` or `metadata.user_id`, else a stable hash of
//! the system prompt and the first user message.

use axum::http::HeaderMap;
use compact_middleware::archive::SessionId;
use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::wire::Api;

/// The header that names the session.
pub const SESSION_HEADER: &str = "x-compact-session";

/// A request's session and where its id came from (`ModelCall::session_source`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    pub(crate) id: String,
    pub(crate) source: &'static str,
}

/// The session of a request. Only a bad header is an error: the other
/// sources are the provider's fields, hashed when they are not a usable
/// session id.
/// `body` is the parsed body; `items`, when given, its history's items,
/// read apart from it ([`super::body::split`]).
pub(crate) fn identify(
    headers: &HeaderMap,
    body: Option<&Map<String, Value>>,
    items: Option<&[&RawValue]>,
    api: Api,
) -> Result<Identity, String> {
    if let Some(value) = headers.get(SESSION_HEADER) {
        let id = value
            .to_str()
            .map_err(|_| format!("{SESSION_HEADER}: not visible ASCII"))?;
        SessionId::parse(id).map_err(|e| format!("{SESSION_HEADER}: {e}"))?;
        return Ok(Identity {
            id: id.to_owned(),
            source: "header",
        });
    }
    let Some(body) = body else {
        return Ok(hashed(&[]));
    };
    let fields: [(&'static str, Option<&Value>); 3] = [
        ("prompt_cache_key", body.get("prompt_cache_key")),
        ("user", body.get("user")),
        (
            "metadata.user_id",
            body.get("metadata").and_then(|m| m.get("user_id")),
        ),
    ];
    for (source, value) in fields {
        if let Some(key) = value.and_then(Value::as_str).filter(|k| !k.is_empty()) {
            let id = if SessionId::parse(key).is_ok() {
                key.to_owned()
            } else {
                format!("k-{:032x}", xxhash_rust::xxh3::xxh3_128(key.as_bytes()))
            };
            return Ok(Identity { id, source });
        }
    }
    let items = match items {
        Some(raw) => Items::Raw(raw),
        None => Items::Values(
            body.get(api.history_key())
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default(),
        ),
    };
    let (system, first_user) = opening(body, &items, api);
    Ok(hashed(&[system.as_deref(), first_user.as_deref()]))
}

/// `h-` and the hash of the parts' JSON.
fn hashed(parts: &[Option<&Value>]) -> Identity {
    let mut text = Vec::new();
    for part in parts {
        if let Some(v) = part {
            // A Value's JSON is deterministic (key order kept).
            let _ = serde_json::to_writer(&mut text, v);
        }
        text.push(0);
    }
    Identity {
        id: format!("h-{:032x}", xxhash_rust::xxh3::xxh3_128(&text)),
        source: "hash",
    }
}

/// A history's items: parsed, or JSON text.
enum Items<'a> {
    Values(&'a [Value]),
    Raw(&'a [&'a RawValue]),
}

impl<'a> Items<'a> {
    /// The content of the first item whose role is one of `roles`.
    fn first(&self, roles: &[&str]) -> Option<Cow<'a, Value>> {
        match self {
            Items::Values(items) => items
                .iter()
                .find(|v| {
                    v.get("role")
                        .and_then(Value::as_str)
                        .is_some_and(|r| roles.contains(&r))
                })
                .and_then(|v| v.get("content"))
                .map(Cow::Borrowed),
            Items::Raw(items) => items.iter().find_map(|raw| {
                let fields = fields(raw)?;
                let role = fields
                    .get("role")
                    .map(|r| serde_json::from_str::<String>(r.get()));
                if !matches!(role, Some(Ok(r)) if roles.contains(&r.as_str())) {
                    return None;
                }
                // An item found has its content, if any, and no other is
                // looked at. Content that will not parse is one the whole
                // body would refuse: the history's decoding fails on it and
                // the caller identifies the body again as unparsed.
                Some(
                    fields
                        .get("content")
                        .and_then(|c| serde_json::from_str::<Value>(c.get()).ok())
                        .map(Cow::Owned),
                )
            })?,
        }
    }
}

/// An item's fields as text (the last of a repeated key, as in a parsed
/// object); `None` for an item that is not an object (it has no role).
fn fields(raw: &RawValue) -> Option<HashMap<String, &RawValue>> {
    serde_json::from_str(raw.get()).ok()
}

/// The system prompt and the first user message's content of a body.
fn opening<'a>(
    body: &'a Map<String, Value>,
    items: &Items<'a>,
    api: Api,
) -> (Option<Cow<'a, Value>>, Option<Cow<'a, Value>>) {
    let system = match api {
        Api::Messages => body.get("system").map(Cow::Borrowed),
        Api::Responses => body
            .get("instructions")
            .map(Cow::Borrowed)
            .or_else(|| items.first(&["system", "developer"])),
        _ => items.first(&["system", "developer"]),
    };
    // Responses input may be a bare string: the first user message itself.
    let user = match body.get(api.history_key()) {
        Some(s @ Value::String(_)) => Some(Cow::Borrowed(s)),
        _ => items.first(&["user"]),
    };
    (system, user)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(o) => o,
            _ => unreachable!(),
        }
    }

    #[test]
    fn header_then_body_fields_then_a_hash() {
        let mut headers = HeaderMap::new();
        let b = body(json!({"prompt_cache_key": "pck-1", "user": "u", "messages": []}));
        headers.insert(SESSION_HEADER, "from-header".parse().unwrap());
        let id = identify(&headers, Some(&b), None, Api::Chat).unwrap();
        assert_eq!((id.id.as_str(), id.source), ("from-header", "header"));
        let id = identify(&HeaderMap::new(), Some(&b), None, Api::Chat).unwrap();
        assert_eq!((id.id.as_str(), id.source), ("pck-1", "prompt_cache_key"));
        let b = body(json!({"user": "alice@example.com", "messages": []}));
        let id = identify(&HeaderMap::new(), Some(&b), None, Api::Chat).unwrap();
        assert_eq!(id.source, "user");
        assert!(id.id.starts_with("k-") && SessionId::parse(&id.id).is_ok());
        let b = body(json!({"metadata": {"user_id": "user_abc"}, "messages": []}));
        let id = identify(&HeaderMap::new(), Some(&b), None, Api::Messages).unwrap();
        assert_eq!(
            (id.id.as_str(), id.source),
            ("user_abc", "metadata.user_id")
        );
    }

    #[test]
    fn the_hash_reads_the_system_prompt_and_the_first_user_message_only() {
        let turn1 = body(json!({"system": "be brief", "messages": [
            {"role": "user", "content": "task"}]}));
        let turn2 = body(json!({"system": "be brief", "messages": [
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "more"}]}));
        let other = body(json!({"system": "be brief", "messages": [
            {"role": "user", "content": "another task"}]}));
        let id = |b| identify(&HeaderMap::new(), Some(b), None, Api::Messages).unwrap();
        assert_eq!(id(&turn1), id(&turn2));
        assert_eq!(id(&turn1).source, "hash");
        assert_ne!(id(&turn1), id(&other));
    }

    #[test]
    fn a_bad_header_is_refused() {
        let mut headers = HeaderMap::new();
        headers.insert(SESSION_HEADER, "../etc".parse().unwrap());
        assert!(identify(&headers, None, None, Api::Chat).is_err());
    }

    /// A body read with its history apart gets the identity of the body
    /// parsed whole.
    #[test]
    fn a_split_body_is_identified_as_a_whole_one() {
        let bodies = [
            (
                Api::Chat,
                r#"{"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"u"}]}]}"#,
            ),
            (
                Api::Chat,
                r#"{"messages":[3,{"role":"user"},{"role":"user","content":"later"}]}"#,
            ),
            (
                Api::Chat,
                r#"{"messages":[{"role":"user","content":null,"role":"developer"},{"content":"x","role":"user"}]}"#,
            ),
            (
                Api::Chat,
                r#"{"messages":[{"role":7},{"role":"us\u0065r","content":"escaped"}]}"#,
            ),
            (Api::Chat, r#"{"user":"alice","messages":[]}"#),
            (
                Api::Responses,
                r#"{"input":[{"role":"developer","content":"d"},{"type":"message","role":"user","content":"u"}]}"#,
            ),
            (
                Api::Responses,
                r#"{"instructions":"i","input":[{"role":"user","content":"u"}]}"#,
            ),
            (
                Api::Messages,
                r#"{"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":"u"}]}"#,
            ),
        ];
        for (api, text) in bodies {
            let whole: Map<String, Value> = serde_json::from_str(text).unwrap();
            let whole = identify(&HeaderMap::new(), Some(&whole), None, api).unwrap();
            let split = super::super::body::split(text.as_bytes(), api.history_key()).unwrap();
            let split =
                identify(&HeaderMap::new(), Some(&split.doc), Some(&split.items), api).unwrap();
            assert_eq!(split, whole, "{text}");
        }
    }
}
