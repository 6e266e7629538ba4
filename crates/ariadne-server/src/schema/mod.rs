//! The `/ingest` schema: validation, truncation and the older span shape.
//!
//! Mirrors the Ariadne server's schema (trace: `trace_id` and optional
//! `name`, `group_id`, `started_at`, `ended_at`, string-valued `metadata`;
//! span: `trace_id`, `span_id` and optional `parent_id`, `kind`, `name`,
//! `started_at`, `ended_at`, object `data`, `status` `ok`|`error`;
//! `ended_at >= started_at`). Like Ariadne it keeps only known fields, and
//! truncates long names and `data` strings *before* validating, with the
//! rule the exporters also apply ([`compact_events::truncate`]). It departs
//! in two lenient ways, so anything Ariadne accepts we accept: a `null`
//! optional field reads as absent, and timestamps may carry a numeric
//! offset (any RFC 3339). The older span shape of docs/design.md §7
//! (`timestamp`, `duration_ms`, `properties`, `payload`) is mapped onto the
//! Ariadne fields.
//!
//! [`parse_body`] is the entry point for raw `/ingest` bodies: ordinary spans
//! take the [`fast`] path, straight from the request bytes; everything else
//! (and every refusal) is worded by the general path here.

mod copy;
mod fast;
mod meta;

use compact_events::truncate::{truncate_map, truncate_string};
use compact_events::{format_rfc3339_millis, parse_rfc3339_millis};
use serde::Serialize;
use serde_json::{Map, Value};

pub(crate) use meta::{Counts, EventMeta, Marks, Pruned};

// The truncation rule, shared with the exporters (`compact_events::truncate`).
use compact_events::truncate::{MAX_DATA_STRING_CHARS, MAX_NAME_CHARS};

/// One validation problem, in Ariadne's `details` shape.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Issue {
    /// JSON path: keys and array indices.
    pub path: Vec<Value>,
    /// What is wrong.
    pub message: String,
}

/// A validated event, ready to store: its canonical JSON and the fields
/// the server filters and indexes on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ValidEvent {
    /// What the index keeps of it.
    pub meta: EventMeta,
    /// The event as stored and streamed (known fields only), one line.
    pub json: Box<str>,
    /// What a `compact.pruned_messages` span adds to the metrics.
    pub pruned: Option<Pruned>,
}

/// Why an `/ingest` body was refused.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Refusal {
    /// Not JSON; serde_json's message.
    Json(String),
    /// JSON, but not valid events.
    Invalid(Vec<Issue>),
}

/// Validates a raw `/ingest` body: one event or `{"batch":[...]}`.
pub(crate) fn parse_body(bytes: &[u8]) -> Result<Vec<ValidEvent>, Refusal> {
    if let Some(events) = fast::parse_body(bytes) {
        return Ok(events);
    }
    let value = serde_json::from_slice::<Value>(bytes).map_err(|e| Refusal::Json(e.to_string()))?;
    parse_payload(value).map_err(Refusal::Invalid)
}

/// Validates an `/ingest` body: one event or `{"batch":[...]}`.
pub(crate) fn parse_payload(body: Value) -> Result<Vec<ValidEvent>, Vec<Issue>> {
    let Value::Object(mut obj) = body else {
        return Err(vec![issue(vec![], expected("object", &body))]);
    };
    match obj.remove("batch") {
        Some(Value::Array(items)) => {
            let mut out = Vec::with_capacity(items.len());
            let mut issues = Vec::new();
            for (i, item) in items.into_iter().enumerate() {
                let prefix = vec![Value::from("batch"), Value::from(i)];
                match parse_event(item, &prefix) {
                    Ok(e) => out.push(e),
                    Err(mut errs) => issues.append(&mut errs),
                }
            }
            if issues.is_empty() {
                Ok(out)
            } else {
                Err(issues)
            }
        }
        Some(other) => Err(vec![issue(
            vec![Value::from("batch")],
            expected("array", &other),
        )]),
        None => parse_event(Value::Object(obj), &[]).map(|e| vec![e]),
    }
}

/// Validates one event at `prefix` (for error paths).
pub(crate) fn parse_event(value: Value, prefix: &[Value]) -> Result<ValidEvent, Vec<Issue>> {
    let at = |key: &str| -> Vec<Value> {
        let mut p = prefix.to_vec();
        p.push(Value::from(key));
        p
    };
    let Value::Object(mut obj) = value else {
        return Err(vec![issue(prefix.to_vec(), expected("object", &value))]);
    };
    // `null` reads as absent: a lenient superset of Ariadne's schema.
    obj.retain(|_, v| !v.is_null());
    let mut issues = Vec::new();
    map_seed_shape(&mut obj, &at, &mut issues);

    let is_span = match obj.get("type").and_then(Value::as_str) {
        Some("span") => true,
        Some("trace") => false,
        _ => {
            issues.push(issue(
                at("type"),
                "Invalid literal value, expected \"trace\" or \"span\"".into(),
            ));
            return Err(issues);
        }
    };
    let mut out = Map::new();
    out.insert(
        "type".into(),
        Value::from(if is_span { "span" } else { "trace" }),
    );

    take_string(&mut out, &mut obj, &at, "trace_id", true, &mut issues);
    if is_span {
        take_string(&mut out, &mut obj, &at, "span_id", true, &mut issues);
        take_string(&mut out, &mut obj, &at, "parent_id", false, &mut issues);
        take_string(&mut out, &mut obj, &at, "kind", false, &mut issues);
    }
    if let Some(Value::String(name)) = obj.get_mut("name") {
        truncate_string(name, MAX_NAME_CHARS);
    }
    take_string(&mut out, &mut obj, &at, "name", false, &mut issues);
    if !is_span {
        take_string(&mut out, &mut obj, &at, "group_id", false, &mut issues);
    }
    take_string(&mut out, &mut obj, &at, "started_at", false, &mut issues);
    take_string(&mut out, &mut obj, &at, "ended_at", false, &mut issues);
    let started_ms = check_time(&out, "started_at", &at, &mut issues);
    let ended_ms = check_time(&out, "ended_at", &at, &mut issues);
    if let (Some(s), Some(e)) = (started_ms, ended_ms)
        && e < s
    {
        issues.push(issue(
            at("ended_at"),
            "ended_at must be >= started_at".into(),
        ));
    }

    take_body(&mut out, &mut obj, is_span, &at, &mut issues);

    if !issues.is_empty() {
        return Err(issues);
    }
    Ok(valid_event(out, is_span, started_ms, ended_ms))
}

/// Moves the string `key` from `obj` to `out`, with an issue when it is
/// no string, or `required` and missing or empty.
fn take_string(
    out: &mut Map<String, Value>,
    obj: &mut Map<String, Value>,
    at: &dyn Fn(&str) -> Vec<Value>,
    key: &str,
    required: bool,
    issues: &mut Vec<Issue>,
) {
    match obj.remove(key) {
        Some(Value::String(s)) => {
            if required && s.is_empty() {
                issues.push(issue(
                    at(key),
                    "String must contain at least 1 character(s)".into(),
                ));
            }
            out.insert(key.to_owned(), Value::String(s));
        }
        Some(other) => issues.push(issue(at(key), expected("string", &other))),
        None if required => issues.push(issue(at(key), "Required".into())),
        None => {}
    }
}

/// Moves what a span carries (`data`, `status`) or a trace (`metadata`)
/// from `obj` to `out`, with an issue for each value of the wrong shape.
fn take_body(
    out: &mut Map<String, Value>,
    obj: &mut Map<String, Value>,
    is_span: bool,
    at: &dyn Fn(&str) -> Vec<Value>,
    issues: &mut Vec<Issue>,
) {
    if is_span {
        match obj.remove("data") {
            Some(Value::Object(mut data)) => {
                truncate_map(&mut data, MAX_DATA_STRING_CHARS);
                out.insert("data".into(), Value::Object(data));
            }
            Some(other) => issues.push(issue(at("data"), expected("object", &other))),
            None => {}
        }
        match obj.remove("status") {
            Some(Value::String(s)) if s == "ok" || s == "error" => {
                out.insert("status".into(), Value::String(s));
            }
            Some(_) => issues.push(issue(
                at("status"),
                "Invalid enum value. Expected 'ok' | 'error'".into(),
            )),
            None => {}
        }
    } else {
        match obj.remove("metadata") {
            Some(Value::Object(meta)) => {
                for (k, v) in &meta {
                    if !v.is_string() {
                        let mut p = at("metadata");
                        p.push(Value::from(k.as_str()));
                        issues.push(issue(p, expected("string", v)));
                    }
                }
                out.insert("metadata".into(), Value::Object(meta));
            }
            Some(other) => issues.push(issue(at("metadata"), expected("object", &other))),
            None => {}
        }
    }
}

/// The valid event `out` with what the store and the metrics read of it.
fn valid_event(
    out: Map<String, Value>,
    is_span: bool,
    started_ms: Option<i64>,
    ended_ms: Option<i64>,
) -> ValidEvent {
    let marks = Marks::of(&out);
    let pruned = match (out.get("name"), out.get("data")) {
        (Some(Value::String(name)), Some(Value::Object(data)))
            if is_span && name == compact_events::names::PRUNED_MESSAGES =>
        {
            Some(Pruned::of(data))
        }
        _ => None,
    };
    let meta = EventMeta {
        is_span,
        trace_id: out
            .get("trace_id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .into(),
        kind: out.get("kind").and_then(Value::as_str).map(Into::into),
        started_ms,
        ended_ms,
        marks,
    };
    ValidEvent {
        meta,
        json: Value::Object(out).to_string().into_boxed_str(),
        pruned,
    }
}

/// The older span shape: `properties` → `data`, `payload` → `data.payload`,
/// `timestamp` → `started_at`, `timestamp + duration_ms` → `ended_at`.
/// Fields already given in the Ariadne shape win.
fn map_seed_shape(
    obj: &mut Map<String, Value>,
    at: &dyn Fn(&str) -> Vec<Value>,
    issues: &mut Vec<Issue>,
) {
    let properties = obj.remove("properties");
    let payload = obj.remove("payload");
    let timestamp = obj.remove("timestamp");
    let duration = obj.remove("duration_ms");
    if properties.is_some() || payload.is_some() {
        let mut data = match obj.remove("data") {
            Some(Value::Object(d)) => d,
            Some(other) => {
                // Leave the wrong type in place for the type check to report.
                obj.insert("data".into(), other);
                return;
            }
            None => Map::new(),
        };
        match properties {
            Some(Value::Object(props)) => {
                for (k, v) in props {
                    data.entry(k).or_insert(v);
                }
            }
            Some(other) => issues.push(issue(at("properties"), expected("object", &other))),
            None => {}
        }
        if let Some(p) = payload {
            data.entry("payload").or_insert(p);
        }
        obj.insert("data".into(), Value::Object(data));
    }
    let ts_ms = match &timestamp {
        Some(Value::String(ts)) => match parse_rfc3339_millis(ts) {
            Some(ms) => {
                obj.entry("started_at")
                    .or_insert_with(|| Value::from(ts.as_str()));
                Some(ms)
            }
            None => {
                issues.push(issue(at("timestamp"), "Invalid datetime".into()));
                None
            }
        },
        Some(other) => {
            issues.push(issue(at("timestamp"), expected("string", other)));
            None
        }
        None => None,
    };
    match duration {
        Some(Value::Number(n)) => match n.as_f64() {
            Some(d) if d >= 0.0 && d.is_finite() => {
                if let Some(start) = ts_ms {
                    let end = start.saturating_add(d as i64);
                    obj.entry("ended_at")
                        .or_insert_with(|| Value::from(format_rfc3339_millis(end)));
                }
            }
            _ => issues.push(issue(
                at("duration_ms"),
                "Number must be greater than or equal to 0".into(),
            )),
        },
        Some(other) => issues.push(issue(at("duration_ms"), expected("number", &other))),
        None => {}
    }
}

fn check_time(
    out: &Map<String, Value>,
    key: &str,
    at: &dyn Fn(&str) -> Vec<Value>,
    issues: &mut Vec<Issue>,
) -> Option<i64> {
    let s = out.get(key)?.as_str()?;
    let ms = parse_rfc3339_millis(s);
    if ms.is_none() {
        issues.push(issue(at(key), "Invalid datetime".into()));
    }
    ms
}

fn issue(path: Vec<Value>, message: String) -> Issue {
    Issue { path, message }
}

fn expected(want: &str, got: &Value) -> String {
    format!("Expected {want}, received {}", crate::map::type_name(got))
}

#[cfg(test)]
mod tests {
    use super::*;
    use compact_events::truncate::TRUNCATION_MARK;
    use serde_json::json;

    fn one(v: Value) -> Result<ValidEvent, Vec<Issue>> {
        parse_payload(v).map(|mut e| e.remove(0))
    }

    #[test]
    fn keeps_known_fields_only() {
        let e = one(json!({"type":"span","trace_id":"t","span_id":"s","extra":1,"status":"ok"}))
            .unwrap();
        assert_eq!(
            &*e.json,
            r#"{"type":"span","trace_id":"t","span_id":"s","status":"ok"}"#
        );
    }

    #[test]
    fn reports_paths() {
        let err = parse_payload(json!({"batch":[
            {"type":"span","trace_id":"t","span_id":"s"},
            {"type":"span","trace_id":"t","started_at":"2026-01-01T00:00:01Z","ended_at":"2026-01-01T00:00:00Z"}
        ]}))
        .unwrap_err();
        assert_eq!(
            err[0].path,
            vec![json!("batch"), json!(1), json!("span_id")]
        );
        assert_eq!(err[0].message, "Required");
        assert_eq!(err[1].message, "ended_at must be >= started_at");
    }

    #[test]
    fn metadata_values_must_be_strings() {
        let err =
            one(json!({"type":"trace","trace_id":"t","metadata":{"a":"x","n":3}})).unwrap_err();
        assert_eq!(err[0].path, vec![json!("metadata"), json!("n")]);
    }

    #[test]
    fn truncates_before_validating() {
        let long = "é".repeat(MAX_DATA_STRING_CHARS + 5);
        let e = one(json!({"type":"span","trace_id":"t","span_id":"s",
            "name": "n".repeat(2000), "data":{"a":{"b":[long]}}}))
        .unwrap();
        let e: Value = serde_json::from_str(&e.json).unwrap();
        let name = e["name"].as_str().unwrap();
        assert_eq!(name.chars().count(), MAX_NAME_CHARS + TRUNCATION_MARK.len());
        let s = e["data"]["a"]["b"][0].as_str().unwrap();
        assert!(s.ends_with(TRUNCATION_MARK));
        assert_eq!(
            s.chars().count(),
            MAX_DATA_STRING_CHARS + TRUNCATION_MARK.len()
        );
    }

    #[test]
    fn maps_the_seed_shape() {
        let e = one(json!({"type":"span","trace_id":"t","span_id":"s",
            "name":"compact.trigger_decision","timestamp":"2025-10-19T12:34:56Z",
            "duration_ms":42,"properties":{"triggered":true},"payload":"{\"x\":1}"}))
        .unwrap();
        let e: Value = serde_json::from_str(&e.json).unwrap();
        assert_eq!(e["started_at"], "2025-10-19T12:34:56Z");
        assert_eq!(e["ended_at"], "2025-10-19T12:34:56.042Z");
        assert_eq!(e["data"]["triggered"], true);
        assert_eq!(e["data"]["payload"], "{\"x\":1}");
    }

    #[test]
    fn rejects_non_objects_and_bad_types() {
        assert!(parse_payload(json!([1])).is_err());
        assert!(parse_payload(json!({"batch":{}})).is_err());
        assert!(one(json!({"type":"span","trace_id":"t","span_id":"s","status":"meh"})).is_err());
        assert!(
            one(json!({"type":"span","trace_id":"t","span_id":"s","started_at":"yesterday"}))
                .is_err()
        );
        assert!(one(json!({"type":"x","trace_id":"t"})).is_err());
        assert!(one(json!({"type":"trace","trace_id":""})).is_err());
    }
}
