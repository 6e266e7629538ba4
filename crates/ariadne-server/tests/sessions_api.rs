//! The session API (`/api/sessions`, `/api/sessions/{id}`, a preflight in
//! full) and the trace fields `/api/traces` derives, against a real server:
//! counts that include history (and survive a restart), filters, search,
//! times for traces that carry none on every ingest route, and a trace
//! ended by a second trace event.

mod common;

use common::TestServer;
use serde_json::{Value, json};

fn span(trace: &str, id: &str, parent: Option<&str>, name: &str, data: Value) -> Value {
    let mut v = json!({"type":"span","trace_id":trace,"span_id":id,"kind":"compaction",
        "name":name,"started_at":"2026-01-01T00:00:01.000Z",
        "ended_at":"2026-01-01T00:00:01.200Z","data":data,"status":"ok"});
    if let Some(p) = parent {
        v["parent_id"] = json!(p);
    }
    v
}

/// One preflight's spans, as the middleware sends them (children first).
fn preflight(trace: &str, n: usize, compacted: bool, extra: Vec<Value>) -> Vec<Value> {
    let p = format!("{trace}-p{n}");
    let mut out = vec![
        span(
            trace,
            &format!("{p}-e"),
            Some(&p),
            "compact.token_estimate",
            json!({"t_est":900,"max_tokens":1000,"usage_pct":0.9}),
        ),
        span(
            trace,
            &format!("{p}-d"),
            Some(&p),
            "compact.trigger_decision",
            json!({"triggered":compacted,"reason":"usage_pct >= trigger_pct",
                   "policy":{"trigger_pct":0.85,"target_pct":0.6}}),
        ),
    ];
    if compacted {
        out.push(span(
            trace,
            &format!("{p}-s"),
            Some(&p),
            "compact.summary_created",
            json!({"version":n,"output_text":format!("summary v{n}")}),
        ));
    }
    for (i, mut e) in extra.into_iter().enumerate() {
        e["trace_id"] = json!(trace);
        e["span_id"] = json!(format!("{p}-x{i}"));
        e["parent_id"] = json!(p);
        out.push(e);
    }
    out.push(span(
        trace,
        &p,
        None,
        "compact.preflight",
        json!({"session_id":trace,"triggered":compacted,"tokens_before":900,
               "tokens_after":if compacted {500} else {900}}),
    ));
    out
}

fn error(error_type: &str, fallback: &str) -> Value {
    json!({"type":"span","kind":"compaction","name":"compact.error","status":"error",
           "started_at":"2026-01-01T00:00:01.100Z","ended_at":"2026-01-01T00:00:01.100Z",
           "data":{"error_type":error_type,"message":"x","fallback":fallback}})
}

async fn send(s: &TestServer, events: Vec<Value>) {
    let (st, body) = s.post("/ingest", &json!({ "batch": events })).await;
    assert_eq!(st, 200, "{body}");
}

fn ids(list: &Value, key: &str) -> Vec<String> {
    list[key]
        .as_array()
        .expect("list")
        .iter()
        .map(|t| t["trace_id"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn fleet_lists_sessions_with_badges_filters_and_totals() {
    let mut s = TestServer::start().await;
    send(&s, preflight("calm", 1, false, vec![])).await;
    send(
        &s,
        [
            preflight("busy", 1, true, vec![]),
            preflight("busy", 2, true, vec![error("Timeout", "extractive")]),
        ]
        .concat(),
    )
    .await;
    send(
        &s,
        preflight(
            "broken",
            1,
            false,
            vec![
                error("CircuitOpen", "pruning_only"),
                error("InsufficientBudget", "none"),
            ],
        ),
    )
    .await;

    let check = |list: &Value| {
        assert_eq!(ids(list, "sessions"), ["broken", "busy", "calm"]);
        let busy = &list["sessions"][1]["counts"];
        assert_eq!(busy["preflights"], 2);
        assert_eq!(busy["compactions"], 2);
        assert_eq!(busy["fallbacks"], 1);
        assert_eq!(busy["errors"], 1);
        let broken = &list["sessions"][0]["counts"];
        assert_eq!(broken["breaker_open"], 1);
        assert_eq!(broken["insufficient"], 1);
        assert_eq!(broken["fallbacks"], 1);
        assert_eq!(list["sessions"][2]["usage_pct"], 0.9);
        let totals = &list["totals"];
        assert_eq!(totals["traces"], 3);
        assert_eq!(totals["preflights"], 4);
        assert_eq!(totals["compactions"], 2);
        assert_eq!(totals["errors"], 3);
        assert_eq!(totals["events"], totals["spans"]);
    };
    let (st, list) = s.get("/api/sessions").await;
    assert_eq!(st, 200);
    check(&list);
    // The counts are history, not what a live client happened to see:
    // a restart recovers them from the log.
    s.restart().await;
    check(&s.get("/api/sessions").await.1);

    assert_eq!(
        ids(&s.get("/api/sessions?q=BUS").await.1, "sessions"),
        ["busy"]
    );
    assert_eq!(
        ids(&s.get("/api/sessions?has=breaker_open").await.1, "sessions"),
        ["broken"]
    );
    assert_eq!(
        ids(
            &s.get("/api/sessions?has=compactions,insufficient").await.1,
            "sessions"
        ),
        ["broken", "busy"]
    );
    let (_, page) = s.get("/api/sessions?limit=1&has=errors").await;
    assert_eq!(ids(&page, "sessions"), ["broken"]);
    let before = page["next_before"].as_u64().expect("cursor");
    let (_, rest) = s
        .get(&format!("/api/sessions?limit=1&has=errors&before={before}"))
        .await;
    assert_eq!(ids(&rest, "sessions"), ["busy"]);
    assert_eq!(s.get("/api/sessions?has=bogus").await.0, 400);
    assert_eq!(s.get("/api/sessions?limit=0").await.0, 400);
}

#[tokio::test]
async fn session_rows_and_a_preflight_in_full() {
    let s = TestServer::start().await;
    send(
        &s,
        [
            preflight("sess", 1, false, vec![]),
            preflight("sess", 2, true, vec![]),
            preflight("sess", 3, true, vec![]),
        ]
        .concat(),
    )
    .await;
    let (st, v) = s.get("/api/sessions/sess").await;
    assert_eq!(st, 200);
    assert_eq!(v["window"], 1000);
    assert_eq!(v["trigger_pct"], 0.85);
    assert_eq!(v["target_pct"], 0.6);
    assert_eq!(v["counts"]["compactions"], 2);
    let rows = v["preflights"].as_array().expect("rows");
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[2]["tokens_after"], 500);
    assert_eq!(rows[2]["usage_before"], 0.9);
    assert_eq!(rows[2]["summary"]["version"], 3);
    assert_eq!(rows[0]["summary"], Value::Null);

    let (st, d) = s.get("/api/sessions/sess/preflights/sess-p3").await;
    assert_eq!(st, 200);
    assert_eq!(d["summary_text"], "summary v3");
    assert_eq!(d["previous_summary"]["output_text"], "summary v2");
    assert_eq!(d["previous_summary"]["preflight_span_id"], "sess-p2");
    assert_eq!(d["row"]["turn"], 3);
    assert_eq!(d["spans"].as_array().map(Vec::len), Some(4));

    assert_eq!(s.get("/api/sessions/nope").await.0, 404);
    assert_eq!(s.get("/api/sessions/sess/preflights/nope").await.0, 404);
    assert_eq!(s.get("/api/sessions/nope/preflights/sess-p3").await.0, 404);
}

/// What `/api/traces` says about one trace.
async fn listed(s: &TestServer, trace_id: &str) -> Value {
    let (_, list) = s.get("/api/traces?limit=100").await;
    list["traces"]
        .as_array()
        .and_then(|l| l.iter().find(|t| t["trace_id"] == trace_id).cloned())
        .unwrap_or_else(|| panic!("{trace_id} listed in {list}"))
}

#[tokio::test]
async fn traces_without_times_take_them_from_their_spans_on_every_route() {
    let s = TestServer::start().await;

    // /ingest: the trace as Ariadne's Python exporter sends it (no times),
    // its spans in a later request.
    let trace = json!({"type":"trace","trace_id":"py","name":"agent"});
    assert_eq!(s.post("/ingest", &trace).await.0, 200);
    assert_eq!(listed(&s, "py").await.get("started_at"), None);
    send(
        &s,
        vec![
            json!({"type":"span","trace_id":"py","span_id":"a",
                   "started_at":"2026-01-01T00:00:01.000Z","ended_at":"2026-01-01T00:00:02.000Z"}),
            json!({"type":"span","trace_id":"py","span_id":"b",
                   "started_at":"2026-01-01T00:00:03.000Z"}),
        ],
    )
    .await;
    let t = listed(&s, "py").await;
    assert_eq!(t["started_at"], "2026-01-01T00:00:01.000Z");
    assert_eq!(t["ended_at"], "2026-01-01T00:00:03.000Z");
    assert_eq!(t["times_derived"], true);
    assert_eq!(t["name"], "agent");
    assert!(t["last_activity_at"].is_string());

    // /v1/traces/ingest: the SDK sends the trace first, spans later.
    let sdk_trace = json!({"data":[{"object":"trace","id":"trace_sdk","workflow_name":"wf"}]});
    assert_eq!(s.post("/v1/traces/ingest", &sdk_trace).await.0, 200);
    let sdk_span = json!({"data":[{"object":"trace.span","id":"span_1","trace_id":"trace_sdk",
        "started_at":"2026-01-01T00:00:05.000000+00:00","ended_at":"2026-01-01T00:00:06.500000+00:00",
        "span_data":{"type":"function","name":"f"}}]});
    assert_eq!(s.post("/v1/traces/ingest", &sdk_span).await.0, 200);
    let t = listed(&s, "trace_sdk").await;
    assert_eq!(t["started_at"], "2026-01-01T00:00:05.000Z");
    assert_eq!(t["ended_at"], "2026-01-01T00:00:06.500Z");

    // /v1/traces: each OTLP body maps its own trace range; two bodies
    // cover the union.
    let otlp = |start: &str, end: &str, span: &str| {
        json!({"resourceSpans":[{"resource":{"attributes":[]},"scopeSpans":[{"spans":[{
            "traceId":"0af7651916cd43dd8448eb211c80319c","spanId":span,"name":"op",
            "startTimeUnixNano":start,"endTimeUnixNano":end}]}]}]})
    };
    let first = otlp(
        "1767225600000000000",
        "1767225601000000000",
        "b7ad6b7169203331",
    );
    let second = otlp(
        "1767225610000000000",
        "1767225612000000000",
        "b7ad6b7169203332",
    );
    assert_eq!(s.post("/v1/traces", &first).await.0, 200);
    assert_eq!(s.post("/v1/traces", &second).await.0, 200);
    let t = listed(&s, "0af7651916cd43dd8448eb211c80319c").await;
    assert_eq!(t["started_at"], "2026-01-01T00:00:00.000Z");
    assert_eq!(t["ended_at"], "2026-01-01T00:00:12.000Z");

    // A trace with spans only.
    send(
        &s,
        vec![json!({"type":"span","trace_id":"bare","span_id":"x",
                    "started_at":"2026-01-01T00:00:09.000Z"})],
    )
    .await;
    let t = listed(&s, "bare").await;
    assert_eq!(t["started_at"], "2026-01-01T00:00:09.000Z");
    assert_eq!(t["times_derived"], true);
}

#[tokio::test]
async fn a_second_trace_event_ends_the_trace_and_keeps_its_fields() {
    let s = TestServer::start().await;
    let open = json!({"type":"trace","trace_id":"run","name":"demo-agent",
        "started_at":"2026-01-01T00:00:00.000Z","metadata":{"agent_name":"demo-agent"}});
    assert_eq!(s.post("/ingest", &open).await.0, 200);
    send(
        &s,
        vec![span("run", "s1", None, "compact.token_estimate", json!({}))],
    )
    .await;
    // Still running: no end is made up.
    let t = listed(&s, "run").await;
    assert_eq!(t.get("ended_at"), None);
    assert_eq!(t.get("times_derived"), None);

    let close = json!({"type":"trace","trace_id":"run","ended_at":"2026-01-01T00:00:05.000Z",
        "metadata":{"turns":"60"}});
    assert_eq!(s.post("/ingest", &close).await.0, 200);
    let t = listed(&s, "run").await;
    assert_eq!(t["name"], "demo-agent");
    assert_eq!(t["started_at"], "2026-01-01T00:00:00.000Z");
    assert_eq!(t["ended_at"], "2026-01-01T00:00:05.000Z");
    assert_eq!(
        t["metadata"],
        json!({"agent_name":"demo-agent","turns":"60"})
    );
    let (_, one) = s.get("/api/traces/run").await;
    assert_eq!(one["trace"]["name"], "demo-agent");
    assert_eq!(one["trace"]["ended_at"], "2026-01-01T00:00:05.000Z");
}
