//! Size rules applied before sending, the same as the server's on ingest:
//! a name longer than [`MAX_NAME_CHARS`] characters and a string anywhere
//! in `data` longer than [`MAX_DATA_STRING_CHARS`] keep their first that
//! many characters and get [`TRUNCATION_MARK`] appended.
//!
//! An event that is still too big for one request body after that is
//! reduced further by [`fit`] rather than sent to get a 413.

use compact_events::Event;
use serde_json::{Map, Value};

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

fn truncate_value(v: &mut Value, max: usize) -> bool {
    match v {
        Value::String(s) => truncate_string(s, max),
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |cut, x| truncate_value(x, max) | cut),
        Value::Object(m) => truncate_map(m, max),
        _ => false,
    }
}

fn truncate_map(m: &mut Map<String, Value>, max: usize) -> bool {
    m.values_mut()
        .fold(false, |cut, x| truncate_value(x, max) | cut)
}

/// Applies the server's rules to one event; `true` if anything was cut.
pub fn truncate_event(event: &mut Event) -> bool {
    truncate_event_with(event, MAX_DATA_STRING_CHARS)
}

fn truncate_event_with(event: &mut Event, max_data: usize) -> bool {
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

/// One event encoded for sending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fitted {
    /// The event's JSON.
    pub bytes: Vec<u8>,
    /// Whether anything was cut or dropped to get there.
    pub reduced: bool,
}

/// The event as JSON bytes no longer than `max_bytes`: truncated with the
/// server's rules, then, if still too big, with ever shorter data strings,
/// and as a last resort with its `data` (or trace `metadata`) replaced by a
/// note saying how big the original was. `None` only when even the bare
/// event (ids, name, times) does not fit, which a sane limit never causes.
pub fn fit(event: &Event, max_bytes: usize) -> Option<Fitted> {
    let mut ev = event.clone();
    let mut reduced = truncate_event(&mut ev);
    let mut bytes = serde_json::to_vec(&ev).ok()?;
    let original = bytes.len();
    let mut limit = MAX_DATA_STRING_CHARS;
    while bytes.len() > max_bytes && limit > 64 {
        limit /= 4;
        reduced = true;
        truncate_event_with(&mut ev, limit);
        bytes = serde_json::to_vec(&ev).ok()?;
    }
    if bytes.len() > max_bytes {
        reduced = true;
        let note = |original: usize| {
            let mut m = Map::new();
            m.insert(
                "truncated".to_owned(),
                Value::String(format!(
                    "event of {original} bytes exceeded the request limit; data dropped by the exporter"
                )),
            );
            m
        };
        match &mut ev {
            Event::Span(s) => s.data = note(original),
            Event::Trace(t) => t.metadata = None,
        }
        bytes = serde_json::to_vec(&ev).ok()?;
    }
    (bytes.len() <= max_bytes).then_some(Fitted { bytes, reduced })
}

#[cfg(test)]
mod tests {
    use super::*;
    use compact_events::{SpanBuilder, SpanStatus};
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
    fn fit_reduces_an_event_that_rules_alone_leave_too_big() {
        let chunk = "y".repeat(90_000);
        let mut b = SpanBuilder::start("t", "big");
        for i in 0..10 {
            b = b.data(format!("k{i}"), chunk.clone());
        }
        let ev = b.finish(SpanStatus::Ok);
        let fitted = fit(&ev, 256 * 1024).unwrap();
        assert!(fitted.reduced);
        let bytes = fitted.bytes;
        assert!(bytes.len() <= 256 * 1024);
        let back: Event = serde_json::from_slice(&bytes).unwrap();
        let s = back.as_span().unwrap();
        assert_eq!(s.data.len(), 10, "keys kept, strings shortened");
        assert!(s.data["k0"].as_str().unwrap().ends_with(TRUNCATION_MARK));

        // Thousands of small keys: no string to shorten, data replaced.
        let mut b = SpanBuilder::start("t", "wide");
        for i in 0..40_000 {
            b = b.data(format!("key-{i}"), i);
        }
        let bytes = fit(&b.finish(SpanStatus::Ok), 64 * 1024).unwrap().bytes;
        let back: Event = serde_json::from_slice(&bytes).unwrap();
        let s = back.as_span().unwrap();
        assert!(s.data["truncated"].as_str().unwrap().contains("exceeded"));
        assert_eq!(s.name.as_deref(), Some("wide"));
    }
}
