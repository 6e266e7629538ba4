//! OpenAI Agents SDK exporter format → Ariadne events.
//!
//! The SDK's `BackendSpanExporter` POSTs `{"data":[item, ...]}` where each
//! item is `{"object":"trace", "id", "workflow_name", "group_id",
//! "metadata"}` or `{"object":"trace.span", "id", "trace_id", "parent_id",
//! "started_at", "ended_at", "span_data":{"type", ...}, "error"}`.

use std::collections::{BTreeMap, HashMap};

use compact_events::{
    Event, SpanEvent, SpanStatus, TraceEvent, format_rfc3339_millis, parse_rfc3339_millis,
};
use serde_json::{Map, Value};

use super::{MapError, expected, metadata_string};

/// Maps an OpenAI Agents SDK export body (`{"data":[...]}`) to Ariadne
/// events, in the order of the input.
///
/// - A `trace` object becomes a trace event: `name` = `workflow_name`,
///   `group_id`, `metadata` with every value as a string. The SDK sends no
///   trace timestamps, so `started_at`/`ended_at` are the earliest start and
///   the latest end of that trace's spans in the same body (absent when the
///   body has none).
/// - A `trace.span` object becomes a span event: `kind` = `span_data.type`,
///   a readable `name` (see `span_name`), `data` = `span_data` (plus
///   `error` when set, which also makes the status `error`), timestamps
///   normalised to RFC 3339 with milliseconds and `Z`.
/// - Items whose `object` is neither (a future SDK's) are skipped.
pub fn sdk_to_events(body: &Value) -> Result<Vec<Event>, MapError> {
    let root = body
        .as_object()
        .ok_or_else(|| expected("$", "object", body))?;
    let data = root
        .get("data")
        .ok_or_else(|| MapError::new("$.data", "missing"))?;
    let items = data
        .as_array()
        .ok_or_else(|| expected("$.data", "array", data))?;

    // Spans first, so each trace can take its time range from them.
    enum Mapped {
        Trace(TraceEvent),
        Span(SpanEvent, i64, Option<i64>),
    }
    let mut mapped = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let path = format!("$.data[{i}]");
        let obj = item
            .as_object()
            .ok_or_else(|| expected(&path, "object", item))?;
        let kind = obj
            .get("object")
            .ok_or_else(|| MapError::new(format!("{path}.object"), "missing"))?;
        match kind.as_str() {
            Some("trace") => mapped.push(Mapped::Trace(map_trace(obj, &path)?)),
            Some("trace.span") => {
                let (span, start, end) = map_span(obj, &path)?;
                mapped.push(Mapped::Span(span, start, end));
            }
            Some(_) => {}
            None => return Err(expected(&format!("{path}.object"), "string", kind)),
        }
    }

    let mut range: HashMap<&str, (i64, i64)> = HashMap::new();
    for m in &mapped {
        if let Mapped::Span(s, start, end) = m {
            let end = end.unwrap_or(*start);
            let r = range.entry(s.trace_id.as_str()).or_insert((*start, end));
            r.0 = r.0.min(*start);
            r.1 = r.1.max(end);
        }
    }
    let range: HashMap<String, (i64, i64)> =
        range.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();

    Ok(mapped
        .into_iter()
        .map(|m| match m {
            Mapped::Trace(mut t) => {
                if let Some((start, end)) = range.get(&t.trace_id) {
                    t.started_at = Some(format_rfc3339_millis(*start));
                    t.ended_at = Some(format_rfc3339_millis(*end));
                }
                Event::Trace(t)
            }
            Mapped::Span(s, _, _) => Event::Span(s),
        })
        .collect())
}

fn required_str<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<&'a str, MapError> {
    let p = format!("{path}.{key}");
    match obj.get(key) {
        None => Err(MapError::new(p, "missing")),
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(Value::String(_)) => Err(MapError::new(p, "must not be empty")),
        Some(v) => Err(expected(&p, "string", v)),
    }
}

fn optional_str<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Option<&'a str>, MapError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => Err(expected(&format!("{path}.{key}"), "string or null", v)),
    }
}

fn timestamp(obj: &Map<String, Value>, key: &str, path: &str) -> Result<Option<i64>, MapError> {
    match optional_str(obj, key, path)? {
        None => Ok(None),
        Some(s) => parse_rfc3339_millis(s).map(Some).ok_or_else(|| {
            MapError::new(
                format!("{path}.{key}"),
                format!("not an RFC 3339 timestamp: {s:?}"),
            )
        }),
    }
}

fn map_trace(obj: &Map<String, Value>, path: &str) -> Result<TraceEvent, MapError> {
    let trace_id = required_str(obj, "id", path)?.to_owned();
    let name = optional_str(obj, "workflow_name", path)?.map(str::to_owned);
    let group_id = optional_str(obj, "group_id", path)?.map(str::to_owned);
    let metadata = match obj.get("metadata") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => {
            let map: BTreeMap<String, String> = m
                .iter()
                .filter_map(|(k, v)| metadata_string(v).map(|s| (k.clone(), s)))
                .collect();
            (!map.is_empty()).then_some(map)
        }
        Some(v) => return Err(expected(&format!("{path}.metadata"), "object or null", v)),
    };
    Ok(TraceEvent {
        trace_id,
        name,
        group_id,
        started_at: None,
        ended_at: None,
        metadata,
    })
}

fn map_span(
    obj: &Map<String, Value>,
    path: &str,
) -> Result<(SpanEvent, i64, Option<i64>), MapError> {
    let span_id = required_str(obj, "id", path)?.to_owned();
    let trace_id = required_str(obj, "trace_id", path)?.to_owned();
    let parent_id = optional_str(obj, "parent_id", path)?.map(str::to_owned);
    let ended = timestamp(obj, "ended_at", path)?;
    let started = match timestamp(obj, "started_at", path)? {
        Some(t) => t,
        // A span exported without a start (never seen from the SDK) still
        // has a place on the timeline if it has an end.
        None => ended.ok_or_else(|| MapError::new(format!("{path}.started_at"), "missing"))?,
    };
    // Ariadne rejects a span that ends before it starts; clocks step back.
    let ended = ended.map(|e| e.max(started));

    let sd_path = format!("{path}.span_data");
    let sd_value = obj
        .get("span_data")
        .ok_or_else(|| MapError::new(&sd_path, "missing"))?;
    let span_data = sd_value
        .as_object()
        .ok_or_else(|| expected(&sd_path, "object", sd_value))?;
    let kind = required_str(span_data, "type", &sd_path)?.to_owned();
    let name = span_name(&kind, span_data);

    let mut data = span_data.clone();
    let mut status = SpanStatus::Ok;
    match obj.get("error") {
        None | Some(Value::Null) => {}
        Some(err) => {
            status = SpanStatus::Error;
            data.insert("error".to_owned(), err.clone());
        }
    }

    let span = SpanEvent {
        trace_id,
        span_id,
        parent_id,
        kind: Some(kind),
        name: Some(name),
        started_at: format_rfc3339_millis(started),
        ended_at: ended.map(format_rfc3339_millis),
        data,
        status,
    };
    Ok((span, started, ended))
}

fn str_field<'a>(sd: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    sd.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
}

/// A readable span name per SDK span type: what an SRE scanning the
/// timeline wants to see next to the kind.
fn span_name(kind: &str, sd: &Map<String, Value>) -> String {
    let named = |fallback: &str| str_field(sd, "name").unwrap_or(fallback).to_owned();
    let with_model = |base: &str| match str_field(sd, "model") {
        Some(m) => format!("{base} {m}"),
        None => base.to_owned(),
    };
    match kind {
        // agent / function / custom / guardrail all carry a `name`.
        "agent" | "function" | "custom" | "guardrail" => named(kind),
        "generation" | "transcription" | "speech" => with_model(kind),
        "handoff" => match (str_field(sd, "from_agent"), str_field(sd, "to_agent")) {
            (Some(f), Some(t)) => format!("handoff {f} → {t}"),
            (None, Some(t)) => format!("handoff → {t}"),
            (Some(f), None) => format!("handoff {f} →"),
            (None, None) => "handoff".to_owned(),
        },
        "mcp_tools" => match str_field(sd, "server") {
            Some(s) => format!("mcp_tools {s}"),
            None => "mcp_tools".to_owned(),
        },
        "response" => match str_field(sd, "response_id") {
            Some(id) => format!("response {id}"),
            None => "response".to_owned(),
        },
        other => named(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn span(span_data: Value) -> Value {
        json!({"data":[{"object":"trace.span","id":"s1","trace_id":"t1","parent_id":null,
            "started_at":"2026-01-01T00:00:00.000100+00:00","ended_at":"2026-01-01T00:00:00.002900+00:00",
            "span_data":span_data,"error":null}]})
    }

    fn only_span(body: &Value) -> SpanEvent {
        let events = sdk_to_events(body).unwrap();
        events[0].as_span().unwrap().clone()
    }

    #[test]
    fn names_per_type() {
        let cases = [
            (json!({"type":"agent","name":"triage"}), "triage"),
            (
                json!({"type":"function","name":"get_weather"}),
                "get_weather",
            ),
            (
                json!({"type":"generation","model":"gpt-4o"}),
                "generation gpt-4o",
            ),
            (json!({"type":"generation"}), "generation"),
            (
                json!({"type":"handoff","from_agent":"a","to_agent":"b"}),
                "handoff a → b",
            ),
            (
                json!({"type":"guardrail","name":"no_pii","triggered":true}),
                "no_pii",
            ),
            (json!({"type":"custom","name":"turn","data":{}}), "turn"),
            (
                json!({"type":"transcription","model":"whisper-1"}),
                "transcription whisper-1",
            ),
            (json!({"type":"speech","model":"tts-1"}), "speech tts-1"),
            (json!({"type":"speech_group"}), "speech_group"),
            (
                json!({"type":"mcp_tools","server":"fs","result":["ls"]}),
                "mcp_tools fs",
            ),
            (
                json!({"type":"response","response_id":"resp_1"}),
                "response resp_1",
            ),
            (json!({"type":"brand_new","name":"x"}), "x"),
            (json!({"type":"brand_new"}), "brand_new"),
        ];
        for (sd, want) in cases {
            let s = only_span(&span(sd.clone()));
            assert_eq!(s.name.as_deref(), Some(want), "{sd}");
            assert_eq!(s.kind.as_deref(), sd["type"].as_str());
        }
    }

    #[test]
    fn timestamps_are_normalised_and_truncated_to_millis() {
        let s = only_span(&span(json!({"type":"custom","name":"x"})));
        assert_eq!(s.started_at, "2026-01-01T00:00:00.000Z");
        assert_eq!(s.ended_at.as_deref(), Some("2026-01-01T00:00:00.002Z"));
    }

    #[test]
    fn end_before_start_is_clamped() {
        let body = json!({"data":[{"object":"trace.span","id":"s","trace_id":"t",
            "started_at":"2026-01-01T00:00:01Z","ended_at":"2026-01-01T00:00:00Z",
            "span_data":{"type":"custom"}}]});
        let s = only_span(&body);
        assert_eq!(s.ended_at.as_deref(), Some("2026-01-01T00:00:01.000Z"));
    }

    #[test]
    fn metadata_values_are_stringified() {
        let body = json!({"data":[{"object":"trace","id":"t","metadata":
            {"s":"x","n":3,"b":true,"o":{"a":1},"z":null}}]});
        let events = sdk_to_events(&body).unwrap();
        let Event::Trace(t) = &events[0] else {
            panic!("not a trace")
        };
        let md = t.metadata.clone().unwrap();
        assert_eq!(md["s"], "x");
        assert_eq!(md["n"], "3");
        assert_eq!(md["b"], "true");
        assert_eq!(md["o"], r#"{"a":1}"#);
        assert!(!md.contains_key("z"));
        assert_eq!(t.started_at, None, "no spans, no derived time range");
    }

    #[test]
    fn unknown_objects_are_skipped() {
        let body = json!({"data":[{"object":"trace.future","x":1}]});
        assert!(sdk_to_events(&body).unwrap().is_empty());
    }
}
