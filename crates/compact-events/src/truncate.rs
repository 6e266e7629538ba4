//! The size rule of the wire format, the same on both sides: the server
//! applies it on ingest, before validating (as Ariadne does), and the
//! exporters apply it before sending, so what they send is what the server
//! stores.
//!
//! A name longer than [`MAX_NAME_CHARS`] characters and a string anywhere in
//! a span's `data` longer than [`MAX_DATA_STRING_CHARS`] characters keep
//! their first that many characters and get [`TRUNCATION_MARK`] appended.
//! Characters, not bytes, so a cut never splits a UTF-8 sequence. Ariadne
//! only recurses into objects; this rule also recurses into arrays, so a long
//! string cannot dodge the limit by sitting in a list.

use serde_json::{Map, Value};

use crate::span::Event;

/// Names are cut past this many characters.
pub const MAX_NAME_CHARS: usize = 1024;
/// Strings inside `data` are cut past this many characters.
pub const MAX_DATA_STRING_CHARS: usize = 100 * 1024;
/// Appended to whatever was cut.
pub const TRUNCATION_MARK: &str = "... [truncated]";

/// Cuts `s` to its first `max` characters plus the mark; `true` if it did.
pub fn truncate_string(s: &mut String, max: usize) -> bool {
    match s.char_indices().nth(max) {
        Some((cut, _)) => {
            s.truncate(cut);
            s.push_str(TRUNCATION_MARK);
            true
        }
        None => false,
    }
}

/// Cuts every string in `v` (at any depth, in objects and arrays) to `max`
/// characters; `true` if anything was cut.
pub fn truncate_value(v: &mut Value, max: usize) -> bool {
    match v {
        Value::String(s) => truncate_string(s, max),
        // Every item is visited: no short-circuit once one was cut.
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |cut, x| truncate_value(x, max) | cut),
        Value::Object(m) => truncate_map(m, max),
        _ => false,
    }
}

/// [`truncate_value`] over every value of a map (a span's `data`).
pub fn truncate_map(m: &mut Map<String, Value>, max: usize) -> bool {
    m.values_mut()
        .fold(false, |cut, x| truncate_value(x, max) | cut)
}

/// Applies the rule to one event; `true` if anything was cut.
///
/// Besides the name and the span's `data`, this also cuts a trace's
/// `metadata` values at [`MAX_DATA_STRING_CHARS`]: the exporters do, to keep
/// request bodies small, while the server leaves metadata as sent.
pub fn truncate_event(event: &mut Event) -> bool {
    truncate_event_with(event, MAX_DATA_STRING_CHARS)
}

/// [`truncate_event`] with a smaller limit for `data` strings (and trace
/// metadata values), for an exporter shrinking an event that is still too
/// big for one request body. Names are still cut at [`MAX_NAME_CHARS`].
pub fn truncate_event_with(event: &mut Event, max_data: usize) -> bool {
    match event {
        Event::Trace(t) => {
            let mut cut = t
                .name
                .as_mut()
                .is_some_and(|n| truncate_string(n, MAX_NAME_CHARS));
            if let Some(md) = t.metadata.as_mut() {
                for v in md.values_mut() {
                    cut |= truncate_string(v, max_data);
                }
            }
            cut
        }
        Event::Span(s) => {
            let cut = s
                .name
                .as_mut()
                .is_some_and(|n| truncate_string(n, MAX_NAME_CHARS));
            truncate_map(&mut s.data, max_data) | cut
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::span::{SpanBuilder, SpanStatus};
    use serde_json::json;

    #[test]
    fn cuts_by_characters_not_bytes() {
        let mut s = "é".repeat(10);
        assert!(truncate_string(&mut s, 4));
        assert_eq!(s, format!("éééé{TRUNCATION_MARK}"));
        let mut short = "abc".to_owned();
        assert!(!truncate_string(&mut short, 3));
    }

    #[test]
    fn names_and_nested_data_strings_are_truncated() {
        let long = "x".repeat(MAX_DATA_STRING_CHARS + 1);
        let mut ev = SpanBuilder::start("t", "n".repeat(2000))
            .data("a", json!({"b": [long.clone()], "c": 1}))
            .data("d", long)
            .finish(SpanStatus::Ok);
        assert!(truncate_event(&mut ev));
        let s = ev.as_span().unwrap();
        assert_eq!(
            s.name.as_ref().unwrap().chars().count(),
            MAX_NAME_CHARS + TRUNCATION_MARK.len()
        );
        let inner = s.data["a"]["b"][0].as_str().unwrap();
        assert!(inner.ends_with(TRUNCATION_MARK));
        assert_eq!(inner.len(), MAX_DATA_STRING_CHARS + TRUNCATION_MARK.len());
        assert_eq!(s.data["a"]["c"], 1);
    }

    #[test]
    fn every_long_string_of_an_array_is_cut() {
        let mut v = json!(["abcdef", {"k": "ghijkl"}, "ok"]);
        assert!(truncate_value(&mut v, 3));
        assert_eq!(
            v,
            json!([
                format!("abc{TRUNCATION_MARK}"),
                {"k": format!("ghi{TRUNCATION_MARK}")},
                "ok"
            ])
        );
    }
}
