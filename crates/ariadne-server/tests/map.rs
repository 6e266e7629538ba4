//! The SDK and OTLP mappings against real captured payloads and spec-shaped
//! samples, malformed bodies, and arbitrary JSON.

use std::collections::HashMap;

use ariadne_server::map::{otlp_to_events, sdk_to_events};
use compact_events::{Event, SpanEvent, SpanStatus, TraceEvent, parse_rfc3339_millis};
use proptest::prelude::*;
use serde_json::{Value, json};

fn fixture(rel: &str) -> Value {
    let path = format!("{}/tests/fixtures/{rel}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn split(events: &[Event]) -> (Vec<&TraceEvent>, Vec<&SpanEvent>) {
    let mut traces = Vec::new();
    let mut spans = Vec::new();
    for e in events {
        match e {
            Event::Trace(t) => traces.push(t),
            Event::Span(s) => spans.push(s),
        }
    }
    (traces, spans)
}

fn is_ms_z(ts: &str) -> bool {
    // 2026-11-22T02:54:36.525Z
    ts.len() == 24
        && ts.ends_with('Z')
        && ts.as_bytes()[19] == b'.'
        && parse_rfc3339_millis(ts).is_some()
}

/// Every mapped event must pass Ariadne's own schema checks.
fn assert_valid_ariadne(events: &[Event]) {
    assert_valid(events, true);
}

fn assert_valid(events: &[Event], round_trip: bool) {
    for e in events {
        match e {
            Event::Trace(t) => {
                assert!(!t.trace_id.is_empty());
                if let (Some(a), Some(b)) = (&t.started_at, &t.ended_at) {
                    assert!(is_ms_z(a) && is_ms_z(b), "{a} {b}");
                    assert!(a <= b);
                }
            }
            Event::Span(s) => {
                assert!(!s.trace_id.is_empty() && !s.span_id.is_empty());
                assert!(is_ms_z(&s.started_at), "{}", s.started_at);
                if let Some(end) = &s.ended_at {
                    assert!(is_ms_z(end));
                    assert!(s.started_at <= *end);
                }
            }
        }
        // And round-trip through the wire format unchanged (floats from
        // arbitrary input may move by an ulp through text, so only fixtures).
        if !round_trip {
            continue;
        }
        let wire = serde_json::to_value(e).unwrap();
        let back: Event = serde_json::from_value(wire).unwrap();
        assert_eq!(&back, e);
    }
}

#[test]
fn sdk_basic_sample_maps_to_the_expected_spans() {
    let events = sdk_to_events(&fixture("openai-agents-0.24.0/basic.json")).unwrap();
    assert_valid_ariadne(&events);
    let (traces, spans) = split(&events);
    assert_eq!(traces.len(), 1);
    assert_eq!(spans.len(), 17);

    let t = traces[0];
    assert_eq!(t.trace_id, "trace_db447962ed4043ba95606b48e93fc618");
    assert_eq!(t.name.as_deref(), Some("agents-sdk-offline-check"));
    assert_eq!(t.group_id.as_deref(), Some("sample-basic"));
    let md = t.metadata.as_ref().unwrap();
    assert_eq!(md["agent_name"], "offline-checker");
    assert_eq!(md["session_id"], "sample-basic");
    // No timestamps on SDK traces: the earliest span start, the latest span end.
    assert_eq!(t.started_at.as_deref(), Some("2026-11-22T02:54:36.519Z"));
    assert_eq!(t.ended_at.as_deref(), Some("2026-11-22T02:54:36.585Z"));

    let by_id: HashMap<&str, &SpanEvent> = spans.iter().map(|s| (s.span_id.as_str(), *s)).collect();
    let root = by_id["span_fae61a7c2ec0453091edb3b5"];
    assert_eq!(root.kind.as_deref(), Some("custom"));
    assert_eq!(root.name.as_deref(), Some("task"));
    assert_eq!(root.parent_id, None);
    assert_eq!(root.started_at, "2026-11-22T02:54:36.519Z");

    let agent = by_id["span_2d2d91efcec2423697a282ef"];
    assert_eq!(agent.kind.as_deref(), Some("agent"));
    assert_eq!(agent.name.as_deref(), Some("offline-checker"));
    assert_eq!(
        agent.parent_id.as_deref(),
        Some("span_fae61a7c2ec0453091edb3b5")
    );
    assert_eq!(
        agent.data["tools"],
        json!(["get_weather", "fetch_report", "flaky_lookup"])
    );

    let tool = by_id["span_ad96b1f99e004f9a88dd65ee"];
    assert_eq!(tool.kind.as_deref(), Some("function"));
    assert_eq!(tool.name.as_deref(), Some("get_weather"));
    assert_eq!(
        tool.parent_id.as_deref(),
        Some("span_9d4bce9d37844adca3929e1e")
    );
    assert_eq!(tool.data["output"], "Weather in Berlin: 14C, light rain");
    assert_eq!(tool.status, SpanStatus::Ok);

    let generation = by_id["span_b3182d9d5beb4c72a89f13ae"];
    assert_eq!(generation.kind.as_deref(), Some("generation"));
    assert_eq!(
        generation.name.as_deref(),
        Some("generation offline-scripted-1")
    );
    assert_eq!(generation.data["usage"]["input_tokens"], 38);

    let response = by_id["span_6b9b7ea3132e41c092f9f816"];
    assert_eq!(response.kind.as_deref(), Some("response"));
    assert_eq!(
        response.name.as_deref(),
        Some("response resp_offline1a2012d4fed0000")
    );

    let turns: Vec<_> = spans
        .iter()
        .filter(|s| s.name.as_deref() == Some("turn"))
        .collect();
    assert_eq!(turns.len(), 4);
    assert!(
        turns
            .iter()
            .all(|s| s.parent_id.as_deref() == Some("span_2d2d91efcec2423697a282ef"))
    );
    // Every parent is a span of the same body.
    for s in &spans {
        if let Some(p) = &s.parent_id {
            assert!(by_id.contains_key(p.as_str()), "dangling parent {p}");
        }
    }
    assert!(spans.iter().all(|s| s.status == SpanStatus::Ok));
}

#[test]
fn sdk_tool_error_sample_marks_the_failing_tool() {
    let events = sdk_to_events(&fixture("openai-agents-0.24.0/tool_error.json")).unwrap();
    assert_valid_ariadne(&events);
    let (traces, spans) = split(&events);
    assert_eq!(traces.len(), 1);
    assert_eq!(traces[0].group_id.as_deref(), Some("sample-tool-error"));
    assert_eq!(
        traces[0].started_at.as_deref(),
        Some("2026-11-22T02:54:38.621Z")
    );
    assert_eq!(
        traces[0].ended_at.as_deref(),
        Some("2026-11-22T02:54:38.692Z")
    );
    assert_eq!(spans.len(), 21);

    let errors: Vec<_> = spans
        .iter()
        .filter(|s| s.status == SpanStatus::Error)
        .collect();
    assert_eq!(errors.len(), 1, "only the failing tool span is an error");
    let failed = errors[0];
    assert_eq!(failed.span_id, "span_497f9b906a954516a4cc9754");
    assert_eq!(failed.kind.as_deref(), Some("function"));
    assert_eq!(failed.name.as_deref(), Some("flaky_lookup"));
    assert_eq!(
        failed.data["error"]["message"],
        "Error running tool (non-fatal)"
    );
    assert_eq!(failed.data["error"]["data"]["tool_name"], "flaky_lookup");
    assert_eq!(
        failed.parent_id.as_deref(),
        Some("span_50f1079af70c41d29679f03d")
    );
}

#[test]
fn sdk_trace_range_uses_only_its_own_spans() {
    let body = json!({"data":[
        {"object":"trace","id":"a","workflow_name":"A"},
        {"object":"trace","id":"b","workflow_name":"B"},
        {"object":"trace.span","id":"s1","trace_id":"a","started_at":"2026-01-01T00:00:01+00:00",
         "ended_at":"2026-01-01T00:00:02+00:00","span_data":{"type":"custom","name":"x"}},
        {"object":"trace.span","id":"s2","trace_id":"b","started_at":"2026-01-01T00:00:05+00:00",
         "ended_at":null,"span_data":{"type":"custom","name":"y"}},
        {"object":"trace.span","id":"s3","trace_id":"a","started_at":"2026-01-01T00:00:00.5+00:00",
         "ended_at":"2026-01-01T00:00:01.5+00:00","span_data":{"type":"custom","name":"z"}}
    ]});
    let events = sdk_to_events(&body).unwrap();
    assert_valid_ariadne(&events);
    let (traces, _) = split(&events);
    assert_eq!(
        traces[0].started_at.as_deref(),
        Some("2026-01-01T00:00:00.500Z")
    );
    assert_eq!(
        traces[0].ended_at.as_deref(),
        Some("2026-01-01T00:00:02.000Z")
    );
    assert_eq!(
        traces[1].started_at.as_deref(),
        Some("2026-01-01T00:00:05.000Z")
    );
    assert_eq!(
        traces[1].ended_at.as_deref(),
        Some("2026-01-01T00:00:05.000Z")
    );
}

#[test]
fn sdk_malformed_bodies_name_the_path() {
    let span = |patch: Value| {
        let mut s = json!({"object":"trace.span","id":"s","trace_id":"t",
            "started_at":"2026-01-01T00:00:00Z","span_data":{"type":"custom"}});
        if let (Some(obj), Some(p)) = (s.as_object_mut(), patch.as_object()) {
            for (k, v) in p {
                obj.insert(k.clone(), v.clone());
            }
        }
        s
    };
    let ok = span(json!({}));
    let cases: Vec<(Value, &str, &str)> = vec![
        (json!([]), "$", "expected object, found array"),
        (json!({}), "$.data", "missing"),
        (json!({"data":{}}), "$.data", "expected array, found object"),
        (
            json!({"data":[ok.clone(), ok.clone(), ok.clone(), span(json!({"span_data":"x"}))]}),
            "$.data[3].span_data",
            "expected object, found string",
        ),
        (
            json!({"data":[1]}),
            "$.data[0]",
            "expected object, found number",
        ),
        (json!({"data":[{"id":"x"}]}), "$.data[0].object", "missing"),
        (
            json!({"data":[span(json!({"trace_id":7}))]}),
            "$.data[0].trace_id",
            "expected string, found number",
        ),
        (
            json!({"data":[span(json!({"id":""}))]}),
            "$.data[0].id",
            "must not be empty",
        ),
        (
            json!({"data":[span(json!({"span_data":{"name":"x"}}))]}),
            "$.data[0].span_data.type",
            "missing",
        ),
        (
            json!({"data":[span(json!({"started_at":"yesterday"}))]}),
            "$.data[0].started_at",
            "not an RFC 3339 timestamp: \"yesterday\"",
        ),
        (
            json!({"data":[span(json!({"started_at":null}))]}),
            "$.data[0].started_at",
            "missing",
        ),
        (
            json!({"data":[{"object":"trace","id":"t","metadata":[1]}]}),
            "$.data[0].metadata",
            "expected object or null, found array",
        ),
    ];
    for (body, path, message) in cases {
        let err = sdk_to_events(&body).expect_err(&body.to_string());
        assert_eq!(
            (err.path.as_str(), err.message.as_str()),
            (path, message),
            "{body}"
        );
        assert_eq!(err.to_string(), format!("{path}: {message}"));
    }
}

#[test]
fn otlp_sample_maps_traces_and_spans() {
    let events = otlp_to_events(&fixture("otlp/two_services.json")).unwrap();
    assert_valid_ariadne(&events);
    let (traces, spans) = split(&events);
    assert_eq!(traces.len(), 2);
    assert_eq!(spans.len(), 4);

    let t = traces[0];
    assert_eq!(
        t.trace_id, "5b8efff798038103d269b633813fc60c",
        "hex ids are lowercased"
    );
    assert_eq!(t.name.as_deref(), Some("checkout-agent"));
    let md = t.metadata.as_ref().unwrap();
    assert_eq!(md["service.version"], "1.4.2");
    assert_eq!(md["host.cpu.count"], "8", "metadata values are strings");
    assert_eq!(t.started_at.as_deref(), Some("2026-01-01T00:00:00.000Z"));
    assert_eq!(t.ended_at.as_deref(), Some("2026-01-01T00:00:01.250Z"));
    assert_eq!(traces[1].name.as_deref(), Some("billing"));

    let root = spans[0];
    assert_eq!(root.span_id, "eee19b7ec3c1b174");
    assert_eq!(root.parent_id, None);
    assert_eq!(root.kind.as_deref(), Some("internal"));
    assert_eq!(root.name.as_deref(), Some("agent run"));
    assert_eq!(root.data["gen_ai.usage.input_tokens"], 1200);
    assert_eq!(
        root.data["otel.scope"],
        "openinference.instrumentation.openai_agents"
    );

    let chat = spans[1];
    assert_eq!(chat.parent_id.as_deref(), Some("eee19b7ec3c1b174"));
    assert_eq!(chat.kind.as_deref(), Some("client"));
    assert_eq!(
        chat.started_at, "2026-01-01T00:00:00.100Z",
        "numeric nanos are accepted"
    );
    assert_eq!(chat.data["gen_ai.request.temperature"], 0.2);
    assert_eq!(chat.data["gen_ai.response.finish_reasons"], json!(["stop"]));
    assert_eq!(
        chat.data["otel.events"][0]["name"],
        "gen_ai.content.completion"
    );
    assert_eq!(
        chat.data["otel.events"][0]["time"],
        "2026-01-01T00:00:00.500Z"
    );
    assert_eq!(chat.status, SpanStatus::Ok);

    let tool = spans[2];
    assert_eq!(tool.status, SpanStatus::Error);
    assert_eq!(
        tool.data["otel.status_message"],
        "order service returned 503"
    );
    assert_eq!(tool.data["tool.arguments"], json!({"order_id":"A-17"}));

    let http = spans[3];
    assert_eq!(http.kind.as_deref(), Some("server"));
    assert_eq!(http.trace_id, "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(http.ended_at.as_deref(), Some("2026-01-01T00:01:40.040Z"));
}

#[test]
fn otlp_empty_requests_map_to_nothing() {
    assert!(otlp_to_events(&json!({})).unwrap().is_empty());
    assert!(
        otlp_to_events(&json!({"resourceSpans":[]}))
            .unwrap()
            .is_empty()
    );
    assert!(
        otlp_to_events(&json!({"resourceSpans":[{"scopeSpans":[{"spans":[]}]}]}))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn otlp_malformed_bodies_name_the_path() {
    let span = |extra: Value| {
        let mut s = json!({"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331",
            "name":"x","startTimeUnixNano":"1"});
        if let (Some(obj), Some(p)) = (s.as_object_mut(), extra.as_object()) {
            for (k, v) in p {
                obj.insert(k.clone(), v.clone());
            }
        }
        json!({"resourceSpans":[{"scopeSpans":[{"spans":[s]}]}]})
    };
    let cases: Vec<(Value, &str, &str)> = vec![
        (json!("x"), "$", "expected object, found string"),
        (
            json!({"resourceSpans":{}}),
            "$.resourceSpans",
            "expected array, found object",
        ),
        (
            span(json!({"traceId":"not-hex!"})),
            "$.resourceSpans[0].scopeSpans[0].spans[0].traceId",
            "expected a hex id",
        ),
        (
            span(json!({"spanId":null})),
            "$.resourceSpans[0].scopeSpans[0].spans[0].spanId",
            "missing",
        ),
        (
            span(json!({"startTimeUnixNano":"soon"})),
            "$.resourceSpans[0].scopeSpans[0].spans[0].startTimeUnixNano",
            "expected an unsigned integer, found \"soon\"",
        ),
        (
            span(json!({"startTimeUnixNano":null})),
            "$.resourceSpans[0].scopeSpans[0].spans[0].startTimeUnixNano",
            "missing",
        ),
        (
            span(json!({"attributes":[{"key":"a","value":{"intValue":"1.5"}}]})),
            "$.resourceSpans[0].scopeSpans[0].spans[0].attributes[0].value.intValue",
            "expected an integer, found \"1.5\"",
        ),
        (
            span(json!({"attributes":[{"value":{"intValue":1}}]})),
            "$.resourceSpans[0].scopeSpans[0].spans[0].attributes[0].key",
            "missing",
        ),
        (
            span(json!({"status":{"code":"bad"}})),
            "$.resourceSpans[0].scopeSpans[0].spans[0].status.code",
            "expected an unsigned integer, found \"bad\"",
        ),
    ];
    for (body, path, message) in cases {
        let err = otlp_to_events(&body).expect_err(&body.to_string());
        assert_eq!(
            (err.path.as_str(), err.message.as_str()),
            (path, message),
            "{body}"
        );
    }
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop_oneof![
            "[a-z_.]{0,12}",
            Just("2026-01-01T00:00:00.123456+00:00".to_owned()),
            Just("trace.span".to_owned()),
            Just("trace".to_owned()),
            Just("0af7651916cd43dd8448eb211c80319c".to_owned()),
            Just("1767225600000000000".to_owned()),
        ]
        .prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 8, |inner| {
        let keys = prop_oneof![
            Just("data".to_owned()),
            Just("object".to_owned()),
            Just("id".to_owned()),
            Just("trace_id".to_owned()),
            Just("span_data".to_owned()),
            Just("type".to_owned()),
            Just("started_at".to_owned()),
            Just("ended_at".to_owned()),
            Just("error".to_owned()),
            Just("metadata".to_owned()),
            Just("resourceSpans".to_owned()),
            Just("scopeSpans".to_owned()),
            Just("spans".to_owned()),
            Just("traceId".to_owned()),
            Just("spanId".to_owned()),
            Just("startTimeUnixNano".to_owned()),
            Just("attributes".to_owned()),
            Just("key".to_owned()),
            Just("value".to_owned()),
            Just("stringValue".to_owned()),
            Just("arrayValue".to_owned()),
            Just("kvlistValue".to_owned()),
            Just("values".to_owned()),
            Just("status".to_owned()),
            Just("code".to_owned()),
            "[a-z]{1,6}",
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((keys, inner), 0..6)
                .prop_map(|kvs| Value::Object(kvs.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn mapping_never_panics_and_output_is_valid(v in arb_json()) {
        for body in [v.clone(), json!({"data": [v.clone()]}),
                     json!({"resourceSpans":[{"scopeSpans":[{"spans":[v.clone()]}]}]})] {
            if let Ok(events) = sdk_to_events(&body) {
                assert_valid(&events, false);
            }
            if let Ok(events) = otlp_to_events(&body) {
                assert_valid(&events, false);
            }
        }
    }
}
