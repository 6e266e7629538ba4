//! The fast path of `/ingest`: a body of ordinary spans is validated and
//! written out in its canonical form straight from the request bytes, one
//! pass per event, without a `serde_json::Value` tree per event.
//!
//! It takes only what it can prove valid and produces exactly what the
//! general path ([`super::parse_payload`]) produces for it (a property test
//! holds the two together). compact's own spans whose `data` the index or
//! the metrics read have only that (small, already copied) object parsed.
//! Events it does not handle itself (traces, values the general path must
//! judge) are handed to [`super::parse_event`] one by one; anything
//! odd (the older span shape, a field of the wrong type, a key given twice,
//! a string the size rule would cut, an invalid event) sends the whole body
//! to the general path, which words the refusal.

use std::borrow::Cow;
use std::fmt;

use compact_events::names;
use compact_events::parse_rfc3339_millis;
use compact_events::truncate::{MAX_DATA_STRING_CHARS, MAX_NAME_CHARS, truncate_string};
use serde::Deserializer;
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::ValidEvent;
use super::copy::{Copy, MAX_DEPTH, NullOnly, OptObject, OptText, Text, give_up};
use super::{EventMeta, Marks, Pruned};

/// The events of a body, or `None` when the general path must decide.
pub(super) fn parse_body(bytes: &[u8]) -> Option<Vec<ValidEvent>> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let batch = de.deserialize_map(Top).ok()?;
    de.end().ok()?;
    match batch {
        // Inside the body object and the batch array.
        Some(items) => {
            let mut out = Vec::with_capacity(items.len());
            for raw in items {
                out.push(event(raw.get(), MAX_DEPTH - 2)?);
            }
            Some(out)
        }
        None => {
            let text = std::str::from_utf8(bytes).ok()?;
            Some(vec![event(text, MAX_DEPTH)?])
        }
    }
}

/// One event at `text`; `depth` containers may be entered, its own included.
fn event(text: &str, depth: usize) -> Option<ValidEvent> {
    let mut de = serde_json::Deserializer::from_str(text);
    let fields = de.deserialize_map(EventSeed { depth }).ok()?;
    de.end().ok()?;
    match fields.into_span() {
        Some(valid) => Some(valid),
        None => {
            // Well-formed, nesting checked: the general path judges it alone.
            let value: Value = serde_json::from_str(text).ok()?;
            super::parse_event(value, &[]).ok()
        }
    }
}

/// The top-level object: its `batch` array's items, or `None` for a body
/// that is one event.
struct Top;

impl<'de> Visitor<'de> for Top {
    type Value = Option<Vec<&'de RawValue>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut batch = None;
        while let Some(key) = map.next_key_seed(Text)? {
            if key == "batch" {
                if batch.is_some() {
                    return Err(give_up());
                }
                batch = Some(map.next_value_seed(Items)?);
            } else {
                map.next_value_seed(Copy {
                    out: None,
                    depth: MAX_DEPTH - 1,
                    max_chars: usize::MAX,
                })?;
            }
        }
        Ok(batch)
    }
}

/// The items of the `batch` array, as they are written (their nesting is
/// checked when each is read as an event).
struct Items;

impl<'de> DeserializeSeed<'de> for Items {
    type Value = Vec<&'de RawValue>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Items {
    type Value = Vec<&'de RawValue>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(100));
        while let Some(raw) = seq.next_element::<&'de RawValue>()? {
            items.push(raw);
        }
        Ok(items)
    }
}

/// The string fields of an event, in the order they are written.
const STRINGS: [&str; 9] = [
    "type",
    "trace_id",
    "span_id",
    "parent_id",
    "kind",
    "name",
    "started_at",
    "ended_at",
    "status",
];

/// The fields of the older span shape: only the general path maps them.
const SEED_SHAPE: [&str; 4] = ["properties", "payload", "timestamp", "duration_ms"];

/// compact's spans whose `data` the index or the metrics read.
const READ_DATA: [&str; 4] = [
    names::PREFLIGHT,
    names::TOKEN_ESTIMATE,
    names::ERROR,
    names::PRUNED_MESSAGES,
];

/// What one pass over an event found.
#[derive(Default)]
struct Fields<'de> {
    strings: [Option<Cow<'de, str>>; STRINGS.len()],
    /// The canonical `data` object.
    data: Option<Vec<u8>>,
}

struct EventSeed {
    depth: usize,
}

impl<'de> Visitor<'de> for EventSeed {
    type Value = Fields<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an event object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let Some(depth) = self.depth.checked_sub(1) else {
            return Err(give_up());
        };
        let mut fields = Fields::default();
        let mut seen = [false; STRINGS.len() + 1];
        while let Some(key) = map.next_key_seed(Text)? {
            if let Some(i) = STRINGS.iter().position(|s| *s == key) {
                if std::mem::replace(&mut seen[i], true) {
                    return Err(give_up());
                }
                fields.strings[i] = map.next_value_seed(OptText)?;
            } else if key == "data" {
                if std::mem::replace(&mut seen[STRINGS.len()], true) {
                    return Err(give_up());
                }
                let mut out = Vec::with_capacity(512);
                let copy = Copy {
                    out: Some(&mut out),
                    depth,
                    max_chars: MAX_DATA_STRING_CHARS,
                };
                if map.next_value_seed(OptObject(copy))? {
                    fields.data = Some(out);
                }
            } else if SEED_SHAPE.contains(&key.as_ref()) {
                map.next_value_seed(NullOnly)?;
            } else {
                // Dropped, as the general path drops unknown fields.
                map.next_value_seed(Copy {
                    out: None,
                    depth,
                    max_chars: usize::MAX,
                })?;
            }
        }
        Ok(fields)
    }
}

impl Fields<'_> {
    /// The valid span these fields make, or `None` when the general path
    /// must judge the event.
    fn into_span(self) -> Option<ValidEvent> {
        let [
            ty,
            trace_id,
            span_id,
            parent_id,
            kind,
            name,
            started_at,
            ended_at,
            status,
        ] = self.strings;
        if ty.as_deref() != Some("span") {
            return None;
        }
        let trace_id = trace_id.filter(|t| !t.is_empty())?;
        let span_id = span_id.filter(|s| !s.is_empty())?;
        let error = match status.as_deref() {
            None | Some("ok") => false,
            Some("error") => true,
            Some(_) => return None,
        };
        let name = match name {
            Some(n) if n.len() > MAX_NAME_CHARS => {
                let mut n = n.into_owned();
                truncate_string(&mut n, MAX_NAME_CHARS);
                Some(Cow::Owned(n))
            }
            other => other,
        };
        let time = |t: &Option<Cow<'_, str>>| match t {
            None => Some(None),
            Some(s) => parse_rfc3339_millis(s).map(Some),
        };
        let started_ms = time(&started_at)?;
        let ended_ms = time(&ended_at)?;
        if let (Some(s), Some(e)) = (started_ms, ended_ms)
            && e < s
        {
            return None;
        }

        let mut out = Vec::with_capacity(256 + self.data.as_ref().map_or(0, Vec::len));
        out.extend_from_slice(br#"{"type":"span""#);
        let fields = [
            ("trace_id", Some(&trace_id)),
            ("span_id", Some(&span_id)),
            ("parent_id", parent_id.as_ref()),
            ("kind", kind.as_ref()),
            ("name", name.as_ref()),
            ("started_at", started_at.as_ref()),
            ("ended_at", ended_at.as_ref()),
        ];
        for (key, value) in fields {
            if let Some(v) = value {
                put_field(&mut out, key, v)?;
            }
        }
        if let Some(data) = &self.data {
            out.extend_from_slice(br#","data":"#);
            out.extend_from_slice(data);
        }
        if let Some(s) = &status {
            put_field(&mut out, "status", s)?;
        }
        out.push(b'}');
        let (marks, pruned) = match name.as_deref() {
            Some(n) if READ_DATA.contains(&n) => {
                let data = match &self.data {
                    Some(bytes) => Some(serde_json::from_slice::<Map<String, Value>>(bytes).ok()?),
                    None => None,
                };
                let pruned = (n == names::PRUNED_MESSAGES)
                    .then(|| data.as_ref().map(Pruned::of))
                    .flatten();
                (Marks::of_span(error, Some(n), data.as_ref()), pruned)
            }
            _ => (Marks::span(true, error), None),
        };
        let json = String::from_utf8(out).ok()?.into_boxed_str();
        Some(ValidEvent {
            meta: EventMeta {
                is_span: true,
                trace_id: trace_id.as_ref().into(),
                kind: kind.as_deref().map(Into::into),
                started_ms,
                ended_ms,
                marks,
            },
            json,
            pruned,
        })
    }
}

fn put_field(out: &mut Vec<u8>, key: &str, value: &str) -> Option<()> {
    out.push(b',');
    serde_json::to_writer(&mut *out, key).ok()?;
    out.push(b':');
    serde_json::to_writer(&mut *out, value).ok()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::schema::{Refusal, parse_payload};

    /// What the general path alone makes of `bytes`.
    fn general(bytes: &[u8]) -> Result<Vec<ValidEvent>, Refusal> {
        let value =
            serde_json::from_slice::<Value>(bytes).map_err(|e| Refusal::Json(e.to_string()))?;
        parse_payload(value).map_err(Refusal::Invalid)
    }

    /// JSON as a client may write it: any whitespace, escapes serde_json
    /// never writes, numbers in any notation, keys given twice.
    #[derive(Debug, Clone)]
    enum J {
        Null,
        Bool(bool),
        Num(String),
        Str(String),
        Arr(Vec<J>),
        Obj(Vec<(String, J)>),
    }

    #[derive(Debug, Clone, Copy)]
    struct Style {
        spaces: bool,
        escape_non_ascii: bool,
        escape_slash: bool,
    }

    fn print_str(s: &str, st: Style, out: &mut String) {
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '/' if st.escape_slash => out.push_str("\\/"),
                '\n' => out.push_str("\\n"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c if st.escape_non_ascii && !c.is_ascii() => {
                    let mut buf = [0u16; 2];
                    for unit in c.encode_utf16(&mut buf) {
                        out.push_str(&format!("\\u{unit:04X}"));
                    }
                }
                c => out.push(c),
            }
        }
        out.push('"');
    }

    fn print(j: &J, st: Style, out: &mut String) {
        let sp = if st.spaces { " \n\t" } else { "" };
        match j {
            J::Null => out.push_str("null"),
            J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            J::Num(n) => out.push_str(n),
            J::Str(s) => print_str(s, st, out),
            J::Arr(items) => {
                out.push('[');
                for (i, x) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(sp);
                    print(x, st, out);
                }
                out.push_str(sp);
                out.push(']');
            }
            J::Obj(fields) => {
                out.push('{');
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(sp);
                    print_str(k, st, out);
                    out.push_str(sp);
                    out.push(':');
                    print(v, st, out);
                }
                out.push_str(sp);
                out.push('}');
            }
        }
    }

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            "[a-z_]{1,8}",
            "[ -~]{0,12}",
            "\\PC{0,6}",
            Just("é/\"\\\n\u{1F600}".to_owned()),
        ]
    }

    fn number() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<i64>().prop_map(|n| n.to_string()),
            any::<u64>().prop_map(|n| n.to_string()),
            (-1e6f64..1e6).prop_map(|f| f.to_string()),
            Just("1e5".to_owned()),
            Just("-0".to_owned()),
            Just("1.50".to_owned()),
            Just("0.877".to_owned()),
            Just("123456789012345678901234567890".to_owned()),
            Just("2.5E-3".to_owned()),
        ]
    }

    fn json_value() -> impl Strategy<Value = J> {
        let leaf = prop_oneof![
            Just(J::Null),
            any::<bool>().prop_map(J::Bool),
            number().prop_map(J::Num),
            text().prop_map(J::Str),
        ];
        leaf.prop_recursive(4, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(J::Arr),
                prop::collection::vec((prop_oneof!["[a-c]", text()], inner), 0..4).prop_map(J::Obj),
            ]
        })
    }

    fn stamp() -> impl Strategy<Value = J> {
        prop_oneof![
            3 => Just(J::Str("2026-01-01T00:00:00.000Z".into())),
            3 => Just(J::Str("2026-01-01T00:00:01.5+02:00".into())),
            3 => Just(J::Str("2026-01-01T00:00:02Z".into())),
            1 => Just(J::Str("yesterday".into())),
            1 => Just(J::Null),
            1 => Just(J::Num("3".into())),
        ]
    }

    fn a_string() -> impl Strategy<Value = J> {
        prop_oneof![
            12 => text().prop_map(J::Str),
            1 => Just(J::Null),
            1 => Just(J::Num("1".into())),
        ]
    }

    /// One event: mostly plausible spans, with every field sometimes
    /// missing, null, of the wrong type, or odd.
    fn event() -> impl Strategy<Value = J> {
        let ty = prop_oneof![
            8 => Just(J::Str("span".into())),
            1 => Just(J::Str("trace".into())),
            1 => Just(J::Str("other".into())),
            1 => Just(J::Null),
        ];
        let name = prop_oneof![
            3 => text().prop_map(J::Str),
            1 => Just(J::Str(names::PREFLIGHT.into())),
            1 => Just(J::Str(names::PRUNED_MESSAGES.into())),
            1 => Just(J::Str(names::TOKEN_ESTIMATE.into())),
            1 => Just(J::Str(names::ERROR.into())),
            1 => Just(J::Str("compact.summary_created".into())),
            1 => Just(J::Str("ñ".repeat(MAX_NAME_CHARS + 3))),
            1 => Just(J::Num("7".into())),
        ];
        let status = prop_oneof![
            4 => Just(J::Str("ok".into())),
            2 => Just(J::Str("error".into())),
            1 => Just(J::Str("meh".into())),
            1 => Just(J::Null),
        ];
        // Keys the index and the metrics read, with values of every type.
        let data_key = prop_oneof![
            2 => "[a-d]",
            1 => text(),
            1 => prop::sample::select(vec![
                "triggered", "error", "usage_pct", "error_type", "fallback", "cleared",
                "summarized", "dropped", "tokens_before", "tokens_after",
            ])
            .prop_map(str::to_owned),
        ];
        let data_value = prop_oneof![
            3 => json_value(),
            1 => Just(J::Bool(true)),
            1 => prop::sample::select(vec!["InsufficientBudget", "CircuitOpen", "none", "extractive"])
                .prop_map(|s| J::Str(s.to_owned())),
        ];
        let data = prop_oneof![
            4 => prop::collection::vec((data_key, data_value), 0..6).prop_map(J::Obj),
            1 => json_value(),
        ];
        let extra = prop_oneof![
            Just("metadata"),
            Just("group_id"),
            Just("unknown"),
            Just("properties"),
            Just("timestamp"),
            Just("duration_ms"),
            Just("payload"),
            Just("trace_id"),
        ];
        (
            ty,
            a_string(),
            a_string(),
            prop::option::of(a_string()),
            prop::option::of(a_string()),
            prop::option::of(name),
            prop::option::of(stamp()),
            prop::option::of(stamp()),
            prop::option::of(status),
            prop::option::of(data),
            prop::collection::vec((extra, json_value()), 0..2),
            any::<bool>(),
        )
            .prop_map(
                |(ty, trace, span, parent, kind, name, start, end, status, data, extra, id_ok)| {
                    let id = |j: J| if id_ok { J::Str("t-1".into()) } else { j };
                    let mut f = vec![
                        ("type".to_owned(), ty),
                        ("trace_id".to_owned(), id(trace)),
                        ("span_id".to_owned(), id(span)),
                    ];
                    for (k, v) in [
                        ("parent_id", parent),
                        ("kind", kind),
                        ("name", name),
                        ("started_at", start),
                        ("ended_at", end),
                        ("status", status),
                        ("data", data),
                    ] {
                        if let Some(v) = v {
                            f.push((k.to_owned(), v));
                        }
                    }
                    f.extend(extra.into_iter().map(|(k, v)| (k.to_owned(), v)));
                    J::Obj(f)
                },
            )
    }

    fn body() -> impl Strategy<Value = (String, usize)> {
        let style = (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(a, b, c)| Style {
            spaces: a,
            escape_non_ascii: b,
            escape_slash: c,
        });
        (prop::collection::vec(event(), 0..6), any::<bool>(), style).prop_map(
            |(events, single, st)| {
                let n = events.len();
                let j = match (single, events.first()) {
                    (true, Some(e)) => e.clone(),
                    _ => J::Obj(vec![("batch".to_owned(), J::Arr(events))]),
                };
                let mut out = String::new();
                print(&j, st, &mut out);
                (out, n)
            },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Whatever the fast path accepts, it accepts exactly as the general
        /// path does; what the general path refuses it never accepts.
        #[test]
        fn the_fast_path_agrees_with_the_general_path((text, _n) in body()) {
            let fast = parse_body(text.as_bytes());
            let general = general(text.as_bytes());
            if let Some(fast) = fast {
                prop_assert_eq!(Ok(fast), general, "{}", text);
            }
        }
    }

    fn span_body(n: usize, data: &str) -> String {
        let events: Vec<String> = (0..n)
            .map(|i| {
                format!(
                    r#"{{"type":"span","trace_id":"t","span_id":"s{i}","kind":"function","name":"get_weather","started_at":"2026-01-01T00:00:00.000Z","ended_at":"2026-01-01T00:00:00.042Z","status":"ok","data":{data}}}"#
                )
            })
            .collect();
        format!(r#"{{"batch":[{}]}}"#, events.join(","))
    }

    #[test]
    fn ordinary_spans_take_the_fast_path_and_come_out_as_the_general_path_writes_them() {
        let data = r#"{"input":"{\"city\":\"Berlin\"}","usage":{"input_tokens":812,"ratio":0.5},"tags":["a",null,true],"é":"\u00e9\/"}"#;
        let body = span_body(3, data);
        let fast = parse_body(body.as_bytes()).expect("the fast path takes ordinary spans");
        assert_eq!(Ok(fast.clone()), general(body.as_bytes()));
        assert_eq!(fast.len(), 3);
        assert!(fast[0].json.contains(r#""é":"é/""#), "{}", fast[0].json);
    }

    #[test]
    fn compact_spans_are_marked_and_measured_as_the_general_path_does() {
        let spans = [
            (
                names::PREFLIGHT,
                r#"{"triggered":true,"error":null,"session_id":"s"}"#,
            ),
            (names::PREFLIGHT, r#"{"triggered":true,"error":"boom"}"#),
            (
                names::TOKEN_ESTIMATE,
                r#"{"usage_pct":0.877,"t_est":112345}"#,
            ),
            (
                names::ERROR,
                r#"{"error_type":"InsufficientBudget","fallback":"extractive"}"#,
            ),
            (
                names::ERROR,
                r#"{"error_type":"CircuitOpen","fallback":"none"}"#,
            ),
            (
                names::PRUNED_MESSAGES,
                r#"{"cleared":3,"summarized":40,"dropped":0,"tokens_before":118420,"tokens_after":31877}"#,
            ),
        ];
        for (name, data) in spans {
            let body = format!(
                r#"{{"batch":[{{"type":"span","trace_id":"t","span_id":"s","name":"{name}","status":"error","data":{data}}}]}}"#
            );
            let fast = parse_body(body.as_bytes()).expect("compact's spans take the fast path");
            assert_eq!(Ok(fast.clone()), general(body.as_bytes()), "{body}");
            if name == names::PRUNED_MESSAGES {
                assert!(fast[0].pruned.is_some());
            } else {
                assert_ne!(
                    fast[0].meta.marks,
                    Marks::span(true, true),
                    "{name} is marked"
                );
            }
        }
    }

    #[test]
    fn what_only_the_general_path_does_is_left_to_it() {
        for body in [
            // The older shape, a key twice, a string the size rule cuts.
            json!({"type":"span","trace_id":"t","span_id":"s","timestamp":"2026-01-01T00:00:00Z"})
                .to_string(),
            r#"{"type":"span","trace_id":"t","span_id":"s","data":{"a":1,"a":2}}"#.to_owned(),
            r#"{"type":"span","trace_id":"t","trace_id":"u","span_id":"s"}"#.to_owned(),
            json!({"type":"span","trace_id":"t","span_id":"s","data":{"x":"y".repeat(MAX_DATA_STRING_CHARS + 1)}})
                .to_string(),
            // Refusals: the general path words them.
            r#"{"batch":[{"type":"span","trace_id":"","span_id":"s"}]}"#.to_owned(),
            r#"{"batch":{}}"#.to_owned(),
            "[1]".to_owned(),
            "{".to_owned(),
        ] {
            assert_eq!(parse_body(body.as_bytes()), None, "{body}");
        }
    }

    /// A body nested `levels` deep inside one span's `data`.
    fn nested(levels: usize, batch: bool) -> String {
        let ev = format!(
            r#"{{"type":"span","trace_id":"t","span_id":"s","data":{{"x":{}{}}}}}"#,
            "[".repeat(levels),
            "]".repeat(levels)
        );
        if batch {
            format!(r#"{{"batch":[{ev}]}}"#)
        } else {
            ev
        }
    }

    #[test]
    fn nesting_is_limited_where_serde_json_limits_a_whole_body() {
        for batch in [true, false] {
            for levels in 118..128 {
                let body = nested(levels, batch);
                let general = general(body.as_bytes());
                match parse_body(body.as_bytes()) {
                    Some(fast) => assert_eq!(Ok(fast), general, "{levels} {batch}"),
                    None => assert!(
                        general.is_err(),
                        "{levels} {batch}: the fast path refused a valid body"
                    ),
                }
            }
        }
        // Deep nesting in a field that is dropped counts too.
        let body = format!(
            r#"{{"batch":[{{"type":"span","trace_id":"t","span_id":"s","junk":{}{}}}]}}"#,
            "[".repeat(130),
            "]".repeat(130)
        );
        assert!(general(body.as_bytes()).is_err());
        assert_eq!(parse_body(body.as_bytes()), None);
    }
}
