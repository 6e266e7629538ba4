//! Size rules applied before sending: the server's own rule (from
//! [`compact_events::truncate`]): a name longer than
//! [`MAX_NAME_CHARS`](compact_events::truncate::MAX_NAME_CHARS) characters
//! and a string anywhere in `data` longer than [`MAX_DATA_STRING_CHARS`]
//! keep their first that many characters and get
//! [`TRUNCATION_MARK`](compact_events::truncate::TRUNCATION_MARK) appended.
//!
//! An event that is still too big for one request body after that is
//! reduced further by [`fit`] rather than sent to get a 413.

use compact_events::Event;
use compact_events::truncate::MAX_DATA_STRING_CHARS;
pub(crate) use compact_events::truncate::truncate_event;
use compact_events::truncate::truncate_event_with;
use serde_json::{Map, Value};

/// One event encoded for sending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fitted {
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
pub(crate) fn fit(event: &Event, max_bytes: usize) -> Option<Fitted> {
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
    use compact_events::truncate::TRUNCATION_MARK;
    use compact_events::{SpanBuilder, SpanStatus};

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
