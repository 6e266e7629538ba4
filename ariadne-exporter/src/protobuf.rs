//! OTLP/HTTP protobuf: the `ExportTraceServiceRequest` that `otlp` builds
//! as OTLP JSON, written in the protobuf wire format
//! (`opentelemetry/proto/collector/trace/v1`), for receivers that take only
//! protobuf (Arize Phoenix) and as OTLP's default `http/protobuf`.
//!
//! One encoder builds the request (the JSON tree); this module only walks
//! it with the message layouts below, so the two encodings cannot drift
//! apart. By hand rather than with `prost`: eight small messages, no build
//! script, no code generation.
//!
//! Field numbers (trace/v1, common/v1, resource/v1):
//! `ExportTraceServiceRequest{1: repeated ResourceSpans}`,
//! `ResourceSpans{1: Resource, 2: repeated ScopeSpans}`,
//! `Resource{1: repeated KeyValue}`,
//! `ScopeSpans{1: InstrumentationScope, 2: repeated Span}`,
//! `InstrumentationScope{1: name, 2: version}`,
//! `Span{1: trace_id, 2: span_id, 4: parent_span_id, 5: name, 6: kind,
//! 7: start_time_unix_nano (fixed64), 8: end_time_unix_nano (fixed64),
//! 9: repeated KeyValue, 15: Status}`, `Status{2: message, 3: code}`,
//! `KeyValue{1: key, 2: AnyValue}`, `AnyValue{1: string, 2: bool, 3: int64,
//! 4: double, 5: ArrayValue{1: repeated AnyValue}, 6: KeyValueList{1:
//! repeated KeyValue}}`.

use serde_json::Value;

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;

fn key(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn bytes_field(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    key(out, field, LEN);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn message(out: &mut Vec<u8>, field: u32, build: impl FnOnce(&mut Vec<u8>)) {
    let mut inner = Vec::new();
    build(&mut inner);
    bytes_field(out, field, &inner);
}

fn string_field(out: &mut Vec<u8>, field: u32, v: Option<&Value>) {
    if let Some(s) = v.and_then(Value::as_str)
        && !s.is_empty()
    {
        bytes_field(out, field, s.as_bytes());
    }
}

fn hex_field(out: &mut Vec<u8>, field: u32, v: Option<&Value>) {
    let Some(hex) = v.and_then(Value::as_str) else {
        return;
    };
    let bytes: Option<Vec<u8>> = (0..hex.len() / 2)
        .map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok())
        .collect();
    if let Some(bytes) = bytes.filter(|b| !b.is_empty() && hex.len() % 2 == 0) {
        bytes_field(out, field, &bytes);
    }
}

/// OTLP JSON writes 64-bit integers as strings.
fn u64_of(v: Option<&Value>) -> Option<u64> {
    match v? {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_u64(),
        _ => None,
    }
}

fn items(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn key_value(out: &mut Vec<u8>, kv: &Value) {
    string_field(out, 1, kv.get("key"));
    if let Some(v) = kv.get("value") {
        message(out, 2, |o| any_value(o, v));
    }
}

fn any_value(out: &mut Vec<u8>, v: &Value) {
    if let Some(s) = v.get("stringValue").and_then(Value::as_str) {
        bytes_field(out, 1, s.as_bytes());
    } else if let Some(b) = v.get("boolValue").and_then(Value::as_bool) {
        key(out, 2, VARINT);
        varint(out, u64::from(b));
    } else if let Some(i) = v.get("intValue").and_then(|i| match i {
        Value::String(s) => s.parse::<i64>().ok(),
        other => other.as_i64(),
    }) {
        key(out, 3, VARINT);
        // int64 is written as its two's complement, ten bytes when negative.
        varint(out, i as u64);
    } else if let Some(f) = v.get("doubleValue").and_then(Value::as_f64) {
        key(out, 4, FIXED64);
        out.extend_from_slice(&f.to_bits().to_le_bytes());
    } else if let Some(arr) = v.get("arrayValue") {
        message(out, 5, |o| {
            for item in items(arr.get("values")) {
                message(o, 1, |o| any_value(o, item));
            }
        });
    } else if let Some(list) = v.get("kvlistValue") {
        message(out, 6, |o| {
            for kv in items(list.get("values")) {
                message(o, 1, |o| key_value(o, kv));
            }
        });
    }
    // `{}` (a null): an AnyValue with nothing set.
}

fn span(out: &mut Vec<u8>, s: &Value) {
    hex_field(out, 1, s.get("traceId"));
    hex_field(out, 2, s.get("spanId"));
    hex_field(out, 4, s.get("parentSpanId"));
    string_field(out, 5, s.get("name"));
    if let Some(kind) = s.get("kind").and_then(Value::as_u64) {
        key(out, 6, VARINT);
        varint(out, kind);
    }
    for (field, name) in [(7, "startTimeUnixNano"), (8, "endTimeUnixNano")] {
        if let Some(n) = u64_of(s.get(name)) {
            key(out, field, FIXED64);
            out.extend_from_slice(&n.to_le_bytes());
        }
    }
    for kv in items(s.get("attributes")) {
        message(out, 9, |o| key_value(o, kv));
    }
    if let Some(status) = s.get("status") {
        message(out, 15, |o| {
            string_field(o, 2, status.get("message"));
            if let Some(code) = status.get("code").and_then(Value::as_u64) {
                key(o, 3, VARINT);
                varint(o, code);
            }
        });
    }
}

/// The protobuf bytes of an OTLP JSON `ExportTraceServiceRequest`.
pub(crate) fn encode_request(req: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    for rs in items(req.get("resourceSpans")) {
        message(&mut out, 1, |o| {
            if let Some(resource) = rs.get("resource") {
                message(o, 1, |o| {
                    for kv in items(resource.get("attributes")) {
                        message(o, 1, |o| key_value(o, kv));
                    }
                });
            }
            for ss in items(rs.get("scopeSpans")) {
                message(o, 2, |o| {
                    if let Some(scope) = ss.get("scope") {
                        message(o, 1, |o| {
                            string_field(o, 1, scope.get("name"));
                            string_field(o, 2, scope.get("version"));
                        });
                    }
                    for s in items(ss.get("spans")) {
                        message(o, 2, |o| span(o, s));
                    }
                });
            }
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn varints_and_negative_ints() {
        let mut out = Vec::new();
        varint(&mut out, 300);
        assert_eq!(out, [0xac, 0x02]);
        let mut out = Vec::new();
        any_value(&mut out, &json!({"intValue": "-1"}));
        // key 3/varint, then ten bytes of two's complement.
        assert_eq!(out.len(), 11);
        assert_eq!(out[0], 0x18);
    }

    #[test]
    fn a_span_has_its_fields_in_order() {
        let req = json!({"resourceSpans": [{
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "compact"}}]},
            "scopeSpans": [{"scope": {"name": "compact"}, "spans": [{
                "traceId": "000102030405060708090a0b0c0d0e0f", "spanId": "0001020304050607",
                "name": "compact.preflight", "kind": 1,
                "startTimeUnixNano": "1000", "endTimeUnixNano": "2000",
                "attributes": [{"key": "n", "value": {"doubleValue": 0.5}}],
                "status": {"code": 1}
            }]}]
        }]});
        let bytes = encode_request(&req);
        // The trace id's 16 bytes and the name are there, verbatim.
        let trace: Vec<u8> = (0u8..16).collect();
        assert!(bytes.windows(16).any(|w| w == trace.as_slice()));
        assert!(bytes.windows(17).any(|w| w == b"compact.preflight"));
        // Both times as fixed64 little-endian after their keys (7 and 8).
        assert!(
            bytes
                .windows(9)
                .any(|w| w[0] == 0x39 && w[1..] == 1000u64.to_le_bytes())
        );
        assert!(
            bytes
                .windows(9)
                .any(|w| w[0] == 0x41 && w[1..] == 2000u64.to_le_bytes())
        );
    }
}
