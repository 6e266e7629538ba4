//! `GET /events` against a real server: the connected message, ids,
//! filters, heartbeat, replay after `Last-Event-ID`, and backpressure.

mod common;

use std::time::Duration;

use common::{Msg, TestServer, WAIT, batch, span};
use serde_json::json;

#[tokio::test]
async fn connected_first_then_events_with_increasing_ids() {
    let s = TestServer::start().await;
    let mut sse = s.subscribe("", None).await;
    let (id, hello) = sse.next_data(WAIT).await.expect("connected");
    assert_eq!(id, None);
    assert_eq!(hello["type"], "connected");
    assert!(hello["timestamp"].is_string());
    assert_eq!(s.post("/ingest", &batch("t", 0..3)).await.0, 200);
    let mut last = 0;
    for i in 0..3 {
        let (id, ev) = sse.next_data(WAIT).await.expect("event");
        let id = id.expect("every event has an id");
        assert!(id > last);
        last = id;
        assert_eq!(ev["data"]["i"], i);
        // Only known fields, exactly as ingested.
        assert_eq!(ev, span("t", i));
    }
}

#[tokio::test]
async fn filters_by_trace_kind_and_since() {
    let s = TestServer::start().await;
    let mut by_trace = s.subscribe("?traceId=b", None).await;
    let mut by_kind = s.subscribe("?kinds=tool,%20llm", None).await;
    let mut by_since = s.subscribe("?since=2026-06-01T00:00:00Z", None).await;
    for sub in [&mut by_trace, &mut by_kind, &mut by_since] {
        assert_eq!(sub.next_data(WAIT).await.unwrap().1["type"], "connected");
    }
    let events = json!({"batch":[
        {"type":"span","trace_id":"a","span_id":"1","kind":"tool","started_at":"2026-01-01T00:00:00Z"},
        {"type":"span","trace_id":"b","span_id":"2","kind":"agent","started_at":"2026-07-01T00:00:00Z"},
        {"type":"trace","trace_id":"c"},
        {"type":"span","trace_id":"c","span_id":"3","kind":"llm"},
        {"type":"span","trace_id":"b","span_id":"4"}
    ]});
    assert_eq!(s.post("/ingest", &events).await.0, 200);
    let ids = |evs: Vec<serde_json::Value>| -> Vec<String> {
        evs.iter()
            .map(|e| e["span_id"].as_str().unwrap_or("trace").to_owned())
            .collect()
    };
    let take = async |sub: &mut common::Sse, n: usize| {
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(sub.next_data(WAIT).await.expect("event").1);
        }
        out
    };
    assert_eq!(ids(take(&mut by_trace, 2).await), ["2", "4"]);
    // Kinds filter spans only; traces pass (as in Ariadne).
    assert_eq!(ids(take(&mut by_kind, 3).await), ["1", "trace", "3"]);
    // Since drops spans that started earlier; spans without a start and traces pass.
    assert_eq!(ids(take(&mut by_since, 4).await), ["2", "trace", "3", "4"]);
    // Nothing else arrives.
    assert_eq!(by_trace.next_data(Duration::from_millis(200)).await, None);

    let (st, reply) = s.get("/events?since=yesterday").await;
    assert_eq!(
        (st, reply),
        (400, json!({"error":"Invalid since parameter"}))
    );
}

#[tokio::test]
async fn heartbeat_comment() {
    let s = TestServer::start_with(|c| c.limits.heartbeat_secs = 1).await;
    let mut sse = s.subscribe("", None).await;
    assert!(matches!(sse.next(WAIT).await, Some(Msg::Data { .. })));
    assert_eq!(sse.next(WAIT).await, Some(Msg::Comment("heartbeat".into())));
}

#[tokio::test]
async fn reconnect_with_last_event_id_replays_exactly_what_was_missed() {
    let s = TestServer::start().await;
    assert_eq!(s.post("/ingest", &batch("before", 0..10)).await.0, 200);
    let mut sse = s.subscribe("", None).await;
    sse.next_data(WAIT).await.expect("connected");
    assert_eq!(s.post("/ingest", &batch("seen", 0..5)).await.0, 200);
    let mut last = None;
    for _ in 0..5 {
        last = sse.next_data(WAIT).await.expect("event").0;
    }
    let last = last.expect("id");
    drop(sse);

    for chunk in 0..10 {
        let r = batch("missed", chunk * 10..chunk * 10 + 10);
        assert_eq!(s.post("/ingest", &r).await.0, 200);
    }
    let mut again = s.subscribe("", Some(last)).await;
    assert_eq!(again.next_data(WAIT).await.unwrap().1["type"], "connected");
    let mut prev = last;
    for i in 0..100 {
        let (id, ev) = again.next_data(WAIT).await.expect("replayed event");
        let id = id.unwrap();
        assert_eq!(id, prev + 1, "in order, no gaps");
        prev = id;
        assert_eq!(ev["trace_id"], "missed");
        assert_eq!(ev["data"]["i"], i);
    }
    // Exactly those 100: the next thing is new, live.
    assert_eq!(again.next_data(Duration::from_millis(300)).await, None);
    assert_eq!(s.post("/ingest", &span("live", 0)).await.0, 200);
    let (id, ev) = again.next_data(WAIT).await.unwrap();
    assert_eq!(
        (id, ev["trace_id"].as_str()),
        (Some(prev + 1), Some("live"))
    );

    // `?after=` does the same for clients that cannot set headers.
    let mut q = s.subscribe(&format!("?after={}", prev - 1), None).await;
    q.next_data(WAIT).await.unwrap();
    assert_eq!(q.next_data(WAIT).await.unwrap().0, Some(prev));
}

/// A subscriber that never reads must not slow ingest, and what the server
/// holds for it is bounded: it skips, is told so, and the skip is counted.
#[tokio::test]
async fn a_stalled_subscriber_never_blocks_ingest() {
    let s = TestServer::start_with(|c| c.limits.sse_queue = 64).await;
    let mut stalled = s.subscribe("", None).await;
    stalled.next_data(WAIT).await.expect("connected");
    // Big events fill the socket buffers quickly; then the ring overflows.
    let pad = "x".repeat(4000);
    let total = 5000;
    let ingest = async {
        for chunk in 0..total / 50 {
            let mut b = batch("flood", chunk * 50..chunk * 50 + 50);
            for e in b["batch"].as_array_mut().unwrap() {
                e["data"]["pad"] = json!(pad);
            }
            assert_eq!(s.post("/ingest", &b).await.0, 200);
        }
    };
    // A liveness bound only: if ingest waited on the reader it would never finish.
    tokio::time::timeout(Duration::from_secs(120), ingest)
        .await
        .expect("ingest completes while the subscriber is stalled");
    assert_eq!(s.get("/healthz").await.1["events"]["count"], total);

    // Now read up to the newest event, which a subscriber that skips always
    // reaches (it resumes at the oldest event still held); skips are counted
    // as they are discovered, so every one is counted by then. Reading until
    // the stream goes quiet instead would stop early on a loaded machine.
    let mut warned = false;
    let mut received = 0;
    loop {
        let m = stalled.next(WAIT).await.expect("the newest event arrives");
        match m {
            Msg::Comment(c) if c == "warning stream backpressure; events skipped" => warned = true,
            Msg::Data { data, .. } => {
                received += 1;
                if data["data"]["i"] == total - 1 {
                    break;
                }
            }
            Msg::Comment(_) => {}
        }
    }
    assert!(warned, "the slow subscriber was told it skipped events");
    assert!(received < total, "received {received}");
    let (_, metrics) = s.get("/metrics").await;
    let skipped: u64 = metrics
        .as_str()
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("ariadne_sse_events_skipped_total "))
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(skipped > 0);
    assert_eq!(
        received as u64 + skipped,
        total as u64,
        "every event was either delivered or counted as skipped"
    );
}

#[tokio::test]
async fn shutdown_ends_open_streams() {
    let mut s = TestServer::start().await;
    let mut sse = s.subscribe("", None).await;
    sse.next_data(WAIT).await.unwrap();
    let server = s.server.take().unwrap();
    tokio::time::timeout(Duration::from_secs(30), server.shutdown())
        .await
        .expect("graceful shutdown does not wait on SSE clients")
        .unwrap();
    assert_eq!(sse.next(WAIT).await, None);
}

#[tokio::test]
async fn replay_past_the_retention_window_says_so() {
    let s = TestServer::start_with(|c| c.retention.max_events = 10).await;
    assert_eq!(s.post("/ingest", &batch("t", 0..30)).await.0, 200);
    let mut sse = s.subscribe("", Some(5)).await;
    assert_eq!(sse.next_data(WAIT).await.unwrap().1["type"], "connected");
    assert_eq!(
        sse.next(WAIT).await,
        Some(Msg::Comment(
            "warning replay incomplete; older events expired".into()
        ))
    );
    // Then the ten retained ones, oldest first.
    let (id, ev) = sse.next_data(WAIT).await.unwrap();
    assert_eq!((id, &ev["data"]["i"]), (Some(21), &json!(20)));
}
