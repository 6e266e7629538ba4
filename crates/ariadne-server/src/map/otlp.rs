//! OTLP/HTTP JSON (`ExportTraceServiceRequest`) → Ariadne events.
//!
//! Follows the OTLP JSON encoding: ids are hex strings, 64-bit integers
//! (`startTimeUnixNano`, `intValue`) may be strings or numbers, enums are
//! integers, field names are lowerCamelCase (snake_case is accepted too).

use std::collections::BTreeMap;

use compact_events::{Event, SpanEvent, SpanStatus, TraceEvent, format_rfc3339_millis};
use serde_json::{Map, Value};

use super::{MapError, expected, metadata_string};

/// The attribute an exporter may set to carry the Ariadne `kind` through
/// OTLP (our own OTLP exporter does); without it the kind is the OTLP span
/// kind (`internal`, `server`, `client`, `producer`, `consumer`).
pub(super) const KIND_ATTRIBUTE: &str = "ariadne.kind";
/// The instrumentation scope of compact's own OTLP exporter.
const COMPACT_SCOPE: &str = "compact";

/// Maps an OTLP/HTTP JSON `ExportTraceServiceRequest` to Ariadne events:
/// one trace event per `traceId` (named after the resource's
/// `service.name`, the resource attributes as string metadata, started and
/// ended at its earliest and latest span), then the spans in input order.
///
/// A span's `data` holds its attributes as plain JSON (`kvlistValue` →
/// object, `arrayValue` → array, `intValue` → number), plus `otel.events`
/// (span events), `otel.status_message` and `otel.scope` when present.
/// `status.code` 2 (`ERROR`) makes the status `error`.
pub fn otlp_to_events(body: &Value) -> Result<Vec<Event>, MapError> {
    let root = body
        .as_object()
        .ok_or_else(|| expected("$", "object", body))?;
    let resource_spans = match field(root, "resourceSpans", "resource_spans") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(v) => v
            .as_array()
            .ok_or_else(|| expected("$.resourceSpans", "array", v))?,
    };

    // trace id -> (trace event, min start, max end); insertion order kept.
    let mut traces: Vec<(TraceEvent, i64, i64)> = Vec::new();
    let mut spans = Vec::new();
    for (ri, rs) in resource_spans.iter().enumerate() {
        let rpath = format!("$.resourceSpans[{ri}]");
        let rs = rs
            .as_object()
            .ok_or_else(|| expected(&rpath, "object", rs))?;
        let resource_attrs = match rs.get("resource") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(r)) => attributes(r, &format!("{rpath}.resource"))?,
            Some(v) => return Err(expected(&format!("{rpath}.resource"), "object", v)),
        };
        let service = resource_attrs
            .get("service.name")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let metadata: BTreeMap<String, String> = resource_attrs
            .iter()
            .filter_map(|(k, v)| metadata_string(v).map(|s| (k.clone(), s)))
            .collect();

        let scope_spans = match field(rs, "scopeSpans", "scope_spans") {
            None | Some(Value::Null) => continue,
            Some(Value::Array(a)) => a,
            Some(v) => return Err(expected(&format!("{rpath}.scopeSpans"), "array", v)),
        };
        for (si, ss) in scope_spans.iter().enumerate() {
            let spath = format!("{rpath}.scopeSpans[{si}]");
            let ss = ss
                .as_object()
                .ok_or_else(|| expected(&spath, "object", ss))?;
            let scope = match ss.get("scope") {
                Some(Value::Object(s)) => s
                    .get("name")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty()),
                _ => None,
            };
            let list = match ss.get("spans") {
                None | Some(Value::Null) => continue,
                Some(Value::Array(a)) => a,
                Some(v) => return Err(expected(&format!("{spath}.spans"), "array", v)),
            };
            for (pi, sp) in list.iter().enumerate() {
                let ppath = format!("{spath}.spans[{pi}]");
                let (span, start, end) = map_span(sp, &ppath, scope)?;
                match traces
                    .iter_mut()
                    .find(|(t, _, _)| t.trace_id == span.trace_id)
                {
                    Some((_, lo, hi)) => {
                        *lo = (*lo).min(start);
                        *hi = (*hi).max(end);
                    }
                    None => traces.push((
                        TraceEvent {
                            trace_id: span.trace_id.clone(),
                            name: service.clone(),
                            group_id: None,
                            started_at: None,
                            ended_at: None,
                            metadata: (!metadata.is_empty()).then(|| metadata.clone()),
                        },
                        start,
                        end,
                    )),
                }
                spans.push(Event::Span(span));
            }
        }
    }

    let mut events: Vec<Event> = traces
        .into_iter()
        .map(|(mut t, lo, hi)| {
            t.started_at = Some(format_rfc3339_millis(lo));
            t.ended_at = Some(format_rfc3339_millis(hi));
            Event::Trace(t)
        })
        .collect();
    events.extend(spans);
    Ok(events)
}

fn field<'a>(obj: &'a Map<String, Value>, camel: &str, snake: &str) -> Option<&'a Value> {
    obj.get(camel).or_else(|| obj.get(snake))
}

/// A hex id (`traceId`, `spanId`), lowercased. `None` when absent or empty.
fn hex_id(
    obj: &Map<String, Value>,
    camel: &str,
    snake: &str,
    path: &str,
) -> Result<Option<String>, MapError> {
    let p = format!("{path}.{camel}");
    match field(obj, camel, snake) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => {
            if s.len() > 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(MapError::new(p, "expected a hex id"));
            }
            Ok(Some(s.to_ascii_lowercase()))
        }
        Some(v) => Err(expected(&p, "hex string", v)),
    }
}

/// A 64-bit unsigned integer encoded as a JSON string or number.
fn uint64(v: &Value, path: &str) -> Result<u64, MapError> {
    match v {
        Value::String(s) => s
            .trim()
            .parse::<u64>()
            .map_err(|_| MapError::new(path, format!("expected an unsigned integer, found {s:?}"))),
        Value::Number(n) => n
            .as_u64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| *f >= 0.0 && f.is_finite())
                    .map(|f| f as u64)
            })
            .ok_or_else(|| MapError::new(path, "expected an unsigned integer")),
        other => Err(expected(path, "integer (string or number)", other)),
    }
}

fn nanos_to_millis(n: u64) -> i64 {
    i64::try_from(n / 1_000_000).unwrap_or(i64::MAX)
}

fn map_span(
    sp: &Value,
    path: &str,
    scope: Option<&str>,
) -> Result<(SpanEvent, i64, i64), MapError> {
    let obj = sp.as_object().ok_or_else(|| expected(path, "object", sp))?;
    let trace_id = hex_id(obj, "traceId", "trace_id", path)?
        .ok_or_else(|| MapError::new(format!("{path}.traceId"), "missing"))?;
    let span_id = hex_id(obj, "spanId", "span_id", path)?
        .ok_or_else(|| MapError::new(format!("{path}.spanId"), "missing"))?;
    let parent_id = hex_id(obj, "parentSpanId", "parent_span_id", path)?;

    let start_path = format!("{path}.startTimeUnixNano");
    let start = match field(obj, "startTimeUnixNano", "start_time_unix_nano") {
        None | Some(Value::Null) => return Err(MapError::new(start_path, "missing")),
        Some(v) => nanos_to_millis(uint64(v, &start_path)?),
    };
    let end = match field(obj, "endTimeUnixNano", "end_time_unix_nano") {
        None | Some(Value::Null) => None,
        Some(v) => {
            let n = uint64(v, &format!("{path}.endTimeUnixNano"))?;
            // 0 means "not ended" in OTLP.
            (n != 0).then(|| nanos_to_millis(n).max(start))
        }
    };

    let mut data = attributes(obj, path)?;
    if scope == Some(COMPACT_SCOPE) {
        // compact's own exporter derives these from `data` for other
        // backends (semantic conventions, session grouping): the event
        // already has them in its own keys, none of which has a dot.
        data.retain(|k, _| {
            !(k.starts_with("gen_ai.") || k == "session.id" || k == "openinference.span.kind")
        });
    }
    let kind = match data.remove(KIND_ATTRIBUTE) {
        Some(Value::String(k)) if !k.is_empty() => k,
        _ => span_kind_name(obj.get("kind")).to_owned(),
    };
    let name = match obj.get("name") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()).filter(|s| !s.is_empty()),
        Some(v) => return Err(expected(&format!("{path}.name"), "string", v)),
    };

    let mut status = SpanStatus::Ok;
    match obj.get("status") {
        None | Some(Value::Null) => {}
        Some(Value::Object(st)) => {
            let code = match st.get("code") {
                None | Some(Value::Null) => 0,
                Some(Value::String(s)) if s == "STATUS_CODE_ERROR" => 2,
                Some(Value::String(s)) if s == "STATUS_CODE_OK" => 1,
                Some(Value::String(s)) if s == "STATUS_CODE_UNSET" => 0,
                Some(v) => uint64(v, &format!("{path}.status.code"))?,
            };
            if code == 2 {
                status = SpanStatus::Error;
            }
            if let Some(msg) = st
                .get("message")
                .and_then(Value::as_str)
                .filter(|m| !m.is_empty())
            {
                data.insert(
                    "otel.status_message".to_owned(),
                    Value::String(msg.to_owned()),
                );
            }
        }
        Some(v) => return Err(expected(&format!("{path}.status"), "object", v)),
    }

    match obj.get("events") {
        None | Some(Value::Null) => {}
        Some(Value::Array(evs)) if evs.is_empty() => {}
        Some(Value::Array(evs)) => {
            let mut out = Vec::with_capacity(evs.len());
            for (ei, ev) in evs.iter().enumerate() {
                let epath = format!("{path}.events[{ei}]");
                let e = ev
                    .as_object()
                    .ok_or_else(|| expected(&epath, "object", ev))?;
                let mut m = Map::new();
                if let Some(n) = e.get("name").and_then(Value::as_str) {
                    m.insert("name".to_owned(), Value::String(n.to_owned()));
                }
                if let Some(t) = field(e, "timeUnixNano", "time_unix_nano") {
                    let ms = nanos_to_millis(uint64(t, &format!("{epath}.timeUnixNano"))?);
                    m.insert("time".to_owned(), Value::String(format_rfc3339_millis(ms)));
                }
                let attrs = attributes(e, &epath)?;
                if !attrs.is_empty() {
                    m.insert("attributes".to_owned(), Value::Object(attrs));
                }
                out.push(Value::Object(m));
            }
            data.insert("otel.events".to_owned(), Value::Array(out));
        }
        Some(v) => return Err(expected(&format!("{path}.events"), "array", v)),
    }
    if let Some(scope) = scope {
        data.insert("otel.scope".to_owned(), Value::String(scope.to_owned()));
    }

    let span = SpanEvent {
        trace_id,
        span_id,
        parent_id,
        kind: Some(kind),
        name,
        started_at: format_rfc3339_millis(start),
        ended_at: end.map(format_rfc3339_millis),
        data,
        status,
    };
    Ok((span, start, end.unwrap_or(start)))
}

fn span_kind_name(v: Option<&Value>) -> &'static str {
    let code = match v {
        Some(Value::Number(n)) => n.as_u64().unwrap_or(0),
        Some(Value::String(s)) => match s.as_str() {
            "SPAN_KIND_INTERNAL" => 1,
            "SPAN_KIND_SERVER" => 2,
            "SPAN_KIND_CLIENT" => 3,
            "SPAN_KIND_PRODUCER" => 4,
            "SPAN_KIND_CONSUMER" => 5,
            other => other.parse().unwrap_or(0),
        },
        _ => 0,
    };
    match code {
        2 => "server",
        3 => "client",
        4 => "producer",
        5 => "consumer",
        // 0 (unspecified) reads as internal, as the spec says to treat it.
        _ => "internal",
    }
}

/// The `attributes` list of `obj` (a `KeyValue[]`) as a JSON object.
fn attributes(obj: &Map<String, Value>, path: &str) -> Result<Map<String, Value>, MapError> {
    match obj.get("attributes") {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Array(kvs)) => key_values(kvs, &format!("{path}.attributes")),
        Some(v) => Err(expected(&format!("{path}.attributes"), "array", v)),
    }
}

fn key_values(kvs: &[Value], path: &str) -> Result<Map<String, Value>, MapError> {
    let mut out = Map::new();
    for (i, kv) in kvs.iter().enumerate() {
        let kpath = format!("{path}[{i}]");
        let kv = kv
            .as_object()
            .ok_or_else(|| expected(&kpath, "object", kv))?;
        let key = match kv.get("key") {
            Some(Value::String(k)) => k.clone(),
            None => return Err(MapError::new(format!("{kpath}.key"), "missing")),
            Some(v) => return Err(expected(&format!("{kpath}.key"), "string", v)),
        };
        let value = match kv.get("value") {
            None | Some(Value::Null) => Value::Null,
            Some(v) => any_value(v, &format!("{kpath}.value"), 0)?,
        };
        out.insert(key, value);
    }
    Ok(out)
}

/// Nesting deeper than this is refused rather than followed, so a hostile
/// body cannot exhaust the stack.
const MAX_DEPTH: usize = 64;

/// An OTLP `AnyValue` as plain JSON.
fn any_value(v: &Value, path: &str, depth: usize) -> Result<Value, MapError> {
    if depth > MAX_DEPTH {
        return Err(MapError::new(path, "nested too deeply"));
    }
    let obj = v
        .as_object()
        .ok_or_else(|| expected(path, "AnyValue object", v))?;
    let Some((tag, inner)) = obj
        .iter()
        .find(|(k, _)| k.ends_with("Value") || k.ends_with("_value"))
    else {
        // `{}` is an empty AnyValue.
        return Ok(Value::Null);
    };
    let ipath = format!("{path}.{tag}");
    Ok(match tag.as_str() {
        "stringValue" | "string_value" => match inner {
            Value::String(s) => Value::String(s.clone()),
            other => return Err(expected(&ipath, "string", other)),
        },
        "boolValue" | "bool_value" => match inner {
            Value::Bool(b) => Value::Bool(*b),
            other => return Err(expected(&ipath, "boolean", other)),
        },
        "intValue" | "int_value" => match inner {
            Value::Number(n) if n.is_i64() || n.is_u64() => Value::Number(n.clone()),
            Value::String(s) => match s.trim().parse::<i64>() {
                Ok(i) => Value::from(i),
                Err(_) => {
                    return Err(MapError::new(
                        ipath,
                        format!("expected an integer, found {s:?}"),
                    ));
                }
            },
            other => return Err(expected(&ipath, "integer", other)),
        },
        "doubleValue" | "double_value" => match inner {
            Value::Number(n) => Value::Number(n.clone()),
            // proto3 JSON spells the non-finite doubles as strings.
            Value::String(s) => Value::String(s.clone()),
            other => return Err(expected(&ipath, "number", other)),
        },
        "bytesValue" | "bytes_value" => match inner {
            Value::String(s) => Value::String(s.clone()),
            other => return Err(expected(&ipath, "base64 string", other)),
        },
        "arrayValue" | "array_value" => {
            let arr = inner
                .as_object()
                .ok_or_else(|| expected(&ipath, "object", inner))?;
            match arr.get("values") {
                None | Some(Value::Null) => Value::Array(Vec::new()),
                Some(Value::Array(vals)) => {
                    let mut out = Vec::with_capacity(vals.len());
                    for (i, x) in vals.iter().enumerate() {
                        out.push(any_value(x, &format!("{ipath}.values[{i}]"), depth + 1)?);
                    }
                    Value::Array(out)
                }
                Some(other) => return Err(expected(&format!("{ipath}.values"), "array", other)),
            }
        }
        "kvlistValue" | "kvlist_value" => {
            let kl = inner
                .as_object()
                .ok_or_else(|| expected(&ipath, "object", inner))?;
            match kl.get("values") {
                None | Some(Value::Null) => Value::Object(Map::new()),
                Some(Value::Array(vals)) => {
                    let mut out = Map::new();
                    for (i, kv) in vals.iter().enumerate() {
                        let kpath = format!("{ipath}.values[{i}]");
                        let kv = kv
                            .as_object()
                            .ok_or_else(|| expected(&kpath, "object", kv))?;
                        let key = kv.get("key").and_then(Value::as_str).ok_or_else(|| {
                            MapError::new(format!("{kpath}.key"), "expected string")
                        })?;
                        let value = match kv.get("value") {
                            None | Some(Value::Null) => Value::Null,
                            Some(x) => any_value(x, &format!("{kpath}.value"), depth + 1)?,
                        };
                        out.insert(key.to_owned(), value);
                    }
                    Value::Object(out)
                }
                Some(other) => return Err(expected(&format!("{ipath}.values"), "array", other)),
            }
        }
        other => {
            return Err(MapError::new(
                path,
                format!("unknown AnyValue field {other:?}"),
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn any_values_become_plain_json() {
        let v = json!({"kvlistValue":{"values":[
            {"key":"s","value":{"stringValue":"x"}},
            {"key":"i","value":{"intValue":"42"}},
            {"key":"d","value":{"doubleValue":1.5}},
            {"key":"b","value":{"boolValue":true}},
            {"key":"a","value":{"arrayValue":{"values":[{"intValue":1},{"stringValue":"y"}]}}},
            {"key":"e","value":{}}
        ]}});
        let got = any_value(&v, "$", 0).unwrap();
        assert_eq!(
            got,
            json!({"s":"x","i":42,"d":1.5,"b":true,"a":[1,"y"],"e":null})
        );
    }

    #[test]
    fn deep_nesting_is_refused_not_followed() {
        let mut v = json!({"stringValue":"leaf"});
        for _ in 0..200 {
            v = json!({"arrayValue":{"values":[v]}});
        }
        let err = any_value(&v, "$", 0).unwrap_err();
        assert_eq!(err.message, "nested too deeply");
    }

    #[test]
    fn span_kinds() {
        assert_eq!(span_kind_name(Some(&json!(2))), "server");
        assert_eq!(span_kind_name(Some(&json!("SPAN_KIND_CLIENT"))), "client");
        assert_eq!(span_kind_name(None), "internal");
    }
}
