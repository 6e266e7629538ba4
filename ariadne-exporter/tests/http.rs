//! The exporters against a real HTTP server on loopback: an axum app that
//! records what it receives, answers from a script, and enforces the
//! Ariadne body limit.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ariadne_exporter::{AriadneExporter, HttpOptions, OtlpExporter, span_id_for, trace_id_for};
use ariadne_server::map::otlp_to_events;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use compact_events::truncate::TRUNCATION_MARK;
use compact_events::{
    DispatchOptions, Dispatcher, Event, Exporter, SpanBuilder, SpanStatus, TraceEvent,
};
use serde_json::{Value, json};

const LIMIT: usize = 262_144;

#[derive(Default)]
struct Recorder {
    bodies: Vec<Vec<u8>>,
    auth: Vec<Option<String>>,
    script: VecDeque<StatusCode>,
    /// Requests to answer only after this long (to trigger client timeouts).
    stall: VecDeque<Duration>,
    too_large: usize,
}

type Shared = Arc<Mutex<Recorder>>;

fn lock(s: &Shared) -> std::sync::MutexGuard<'_, Recorder> {
    s.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn record(State(rec): State<Shared>, headers: HeaderMap, body: Bytes) -> impl IntoResponse {
    let stall = lock(&rec).stall.pop_front();
    if let Some(d) = stall {
        tokio::time::sleep(d).await;
    }
    let mut r = lock(&rec);
    if body.len() > LIMIT {
        r.too_large += 1;
        return (StatusCode::PAYLOAD_TOO_LARGE, "too large").into_response();
    }
    r.auth.push(
        headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    );
    r.bodies.push(body.to_vec());
    let status = r.script.pop_front().unwrap_or(StatusCode::OK);
    (status, "{\"success\":true}").into_response()
}

async fn start_on(listener: tokio::net::TcpListener, rec: Shared) -> SocketAddr {
    let addr = listener.local_addr().expect("addr");
    let app = Router::new()
        .route("/ingest", post(record))
        .route("/v1/traces", post(record))
        // Bodies up to 16 MiB reach the handler, which applies the limit itself.
        .layer(axum::extract::DefaultBodyLimit::max(16 * 1024 * 1024))
        .with_state(rec);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}

async fn start(rec: Shared) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    start_on(listener, rec).await
}

fn fast() -> HttpOptions {
    HttpOptions {
        initial_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(20),
        ..HttpOptions::default()
    }
}

fn span(session: &str, name: &str, data: Value) -> Event {
    let mut b = SpanBuilder::start(session, name).kind("compaction");
    if let Value::Object(m) = data {
        for (k, v) in m {
            b = b.data(k, v);
        }
    }
    b.finish(SpanStatus::Ok)
}

fn received_events(rec: &Shared) -> Vec<Value> {
    lock(rec)
        .bodies
        .iter()
        .flat_map(|b| {
            let v: Value = serde_json::from_slice(b).expect("body is JSON");
            v["batch"].as_array().cloned().expect("a batch")
        })
        .collect()
}

#[tokio::test]
async fn bodies_stay_under_the_limit_and_keep_order() {
    let rec = Shared::default();
    let addr = start(rec.clone()).await;
    let exp = AriadneExporter::new(&format!("http://{addr}/ingest"), fast()).expect("exporter");

    let mut batch: Vec<Event> = (0..60)
        .map(|i| {
            span(
                "s",
                &format!("e{i}"),
                json!({"i": i, "blob": "x".repeat(20_000)}),
            )
        })
        .collect();
    // One over the per-string limit, one that only fits once reduced further.
    batch.push(span(
        "s",
        "long",
        json!({"i": 60, "text": "y".repeat(300_000)}),
    ));
    let mut wide = json!({"i": 61});
    for k in 0..5 {
        wide[format!("part{k}")] = json!("z".repeat(90_000));
    }
    batch.push(span("s", "wide", wide));
    batch.push(span("s", &"n".repeat(5000), json!({"i": 62})));

    exp.export(&batch).await.expect("delivered");

    let r = lock(&rec);
    assert_eq!(r.too_large, 0, "never sent a body the server refuses");
    assert!(r.bodies.len() > 1, "split into several bodies");
    assert!(r.bodies.iter().all(|b| b.len() < LIMIT));
    drop(r);
    let got = received_events(&rec);
    let order: Vec<i64> = got
        .iter()
        .map(|e| e["data"]["i"].as_i64().unwrap_or(-1))
        .collect();
    assert_eq!(
        order,
        (0..63).collect::<Vec<_>>(),
        "every event once, in order"
    );
    let long = got[60]["data"]["text"].as_str().expect("text");
    assert_eq!(long.len(), 100 * 1024 + TRUNCATION_MARK.len());
    assert!(long.ends_with(TRUNCATION_MARK));
    assert!(
        got[61]["data"]["part0"]
            .as_str()
            .expect("part")
            .ends_with(TRUNCATION_MARK)
    );
    assert_eq!(
        got[62]["name"].as_str().expect("name").chars().count(),
        1024 + TRUNCATION_MARK.len()
    );
    let stats = exp.stats();
    assert_eq!(stats.events_delivered, 63);
    assert_eq!(stats.events_truncated, 3);
    assert_eq!(stats.events_failed, 0);
}

#[tokio::test]
async fn a_500_is_retried_then_delivered() {
    let rec = Shared::default();
    lock(&rec).script.extend([
        StatusCode::INTERNAL_SERVER_ERROR,
        StatusCode::SERVICE_UNAVAILABLE,
    ]);
    let addr = start(rec.clone()).await;
    let exp = AriadneExporter::new(&format!("http://{addr}/ingest"), fast()).expect("exporter");
    exp.export(&[span("s", "compact.preflight", json!({}))])
        .await
        .expect("delivered on the third try");
    let r = lock(&rec);
    assert_eq!(r.bodies.len(), 3);
    assert!(
        r.bodies.windows(2).all(|w| w[0] == w[1]),
        "the same body each time"
    );
    assert_eq!(exp.stats().retries, 2);
    assert_eq!(exp.stats().events_delivered, 1);
}

#[tokio::test]
async fn a_400_is_not_retried() {
    let rec = Shared::default();
    lock(&rec).script.push_back(StatusCode::BAD_REQUEST);
    let addr = start(rec.clone()).await;
    let exp = AriadneExporter::new(&format!("http://{addr}/ingest"), fast()).expect("exporter");
    let err = exp
        .export(&[span("s", "x", json!({}))])
        .await
        .expect_err("rejected");
    assert!(err.to_string().contains("400"), "{err}");
    assert_eq!(lock(&rec).bodies.len(), 1);
    assert_eq!(exp.stats().events_failed, 1);
}

#[tokio::test]
async fn retries_are_bounded() {
    let rec = Shared::default();
    lock(&rec).script.extend([StatusCode::BAD_GATEWAY; 10]);
    let addr = start(rec.clone()).await;
    let exp = AriadneExporter::new(&format!("http://{addr}/ingest"), fast()).expect("exporter");
    assert!(exp.export(&[span("s", "x", json!({}))]).await.is_err());
    assert_eq!(lock(&rec).bodies.len(), 3, "max_attempts requests, no more");
}

#[tokio::test]
async fn a_timed_out_request_is_retried() {
    let rec = Shared::default();
    // The first request is never answered; the retry must be answered within
    // the request timeout, which is therefore far beyond what a loaded
    // machine needs for a loopback request.
    lock(&rec).stall.push_back(Duration::from_secs(3600));
    let addr = start(rec.clone()).await;
    let opts = HttpOptions {
        request_timeout: Duration::from_secs(3),
        ..fast()
    };
    let exp = AriadneExporter::new(&format!("http://{addr}/ingest"), opts).expect("exporter");
    exp.export(&[span("s", "x", json!({"i": 0}))])
        .await
        .expect("second try delivers");
    assert_eq!(exp.stats().retries, 1);
    assert_eq!(exp.stats().events_delivered, 1);
}

#[tokio::test]
async fn the_bearer_token_is_sent() {
    let rec = Shared::default();
    let addr = start(rec.clone()).await;
    let opts = HttpOptions {
        token: Some("tok-123".to_owned()),
        ..fast()
    };
    let exp = AriadneExporter::new(&format!("http://{addr}/ingest"), opts).expect("exporter");
    exp.export(&[span("s", "x", json!({}))])
        .await
        .expect("delivered");
    assert_eq!(lock(&rec).auth, vec![Some("Bearer tok-123".to_owned())]);
}

#[test]
fn bad_urls_are_refused() {
    for url in ["ftp://x/ingest", "not a url", "http://"] {
        assert!(
            AriadneExporter::new(url, HttpOptions::default()).is_err(),
            "{url}"
        );
    }
}

fn dispatch_opts() -> DispatchOptions {
    DispatchOptions {
        flush_interval: Duration::from_millis(10),
        ..DispatchOptions::default()
    }
}

/// `events.flush` (30 s) from a blocking thread, as a synchronous caller
/// would.
async fn flush_blocking(events: &Dispatcher) -> bool {
    tokio::task::spawn_blocking({
        let events = events.clone();
        move || events.flush(Duration::from_secs(30))
    })
    .await
    .expect("join")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_down_then_back_through_the_dispatcher() {
    // Reserve a port, then close it: the server is down.
    let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = probe.local_addr().expect("addr");
    drop(probe);

    let exp =
        Arc::new(AriadneExporter::new(&format!("http://{addr}/ingest"), fast()).expect("exporter"));
    let events = Dispatcher::new(vec![exp.clone()], dispatch_opts());
    for i in 0..3 {
        events.emit(span("s", &format!("down{i}"), json!({"i": i})));
    }
    let flushed = flush_blocking(&events).await;
    assert!(flushed);
    let stats = events.stats();
    assert!(stats.export_failures >= 1, "{stats:?}");
    assert_eq!(stats.exporters[0].failed_events, 3);
    assert_eq!(exp.stats().events_failed, 3);

    // emit still returns at once and the dispatcher keeps going.
    let rec = Shared::default();
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .expect("rebind the same port");
    start_on(listener, rec.clone()).await;
    for i in 0..2 {
        events.emit(span("s", &format!("up{i}"), json!({"i": i})));
    }
    let flushed = flush_blocking(&events).await;
    assert!(flushed);
    let names: Vec<String> = received_events(&rec)
        .iter()
        .filter_map(|e| e["name"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(names, vec!["up0", "up1"], "delivery resumed");
    assert_eq!(events.stats().exporters[0].exported, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_delivers_what_is_queued() {
    let rec = Shared::default();
    let addr = start(rec.clone()).await;
    let exp =
        Arc::new(AriadneExporter::new(&format!("http://{addr}/ingest"), fast()).expect("exporter"));
    let events = Dispatcher::new(
        vec![exp.clone()],
        DispatchOptions {
            flush_interval: Duration::from_secs(60),
            ..DispatchOptions::default()
        },
    );
    for i in 0..100 {
        events.emit(span("s", "e", json!({"i": i})));
    }
    tokio::task::spawn_blocking(move || drop(events))
        .await
        .expect("join");
    assert_eq!(received_events(&rec).len(), 100);
    assert_eq!(exp.stats().events_delivered, 100);
}

#[tokio::test]
async fn otlp_output_round_trips_through_the_server_mapping() {
    let rec = Shared::default();
    let addr = start(rec.clone()).await;
    let exp = OtlpExporter::new(&format!("http://{addr}/v1/traces"), "compact-test", fast())
        .expect("exporter");

    let session = "sess-otlp-1";
    let trace = Event::Trace(TraceEvent::session(session, "planner"));
    let parent = SpanBuilder::start(session, "compact.preflight").kind("compaction");
    let child = SpanBuilder::start(session, "compact.summary_created")
        .kind("compaction")
        .parent(parent.span_id())
        .data("output_text", "Goal: ship it.")
        .data("summary_tokens", 480)
        .data("usage_pct", 0.925)
        .data("triggered", true)
        .data(
            "policy",
            json!({"keep_recent_turns": 6, "strategy": "task_state", "tags": ["a", "b"]}),
        )
        .finish(SpanStatus::Ok);
    let failed = SpanBuilder::start(session, "compact.error")
        .kind("compaction")
        .data("error", json!({"message": "summarizer failed"}))
        .finish(SpanStatus::Error);
    let parent = parent.finish(SpanStatus::Ok);
    let sent = vec![trace, child.clone(), failed.clone(), parent.clone()];
    exp.export(&sent).await.expect("delivered");

    let bodies = lock(&rec).bodies.clone();
    assert_eq!(bodies.len(), 1);
    let body: Value = serde_json::from_slice(&bodies[0]).expect("json");
    let back = otlp_to_events(&body).expect("our own OTLP is accepted");

    let Event::Trace(t) = &back[0] else {
        panic!("trace first")
    };
    assert_eq!(t.trace_id, trace_id_for(session));
    assert_eq!(t.name.as_deref(), Some("compact-test"));
    let md = t.metadata.as_ref().expect("metadata");
    assert_eq!(md["session.id"], session);
    assert_eq!(md["agent_name"], "planner");

    let spans: Vec<_> = back.iter().filter_map(Event::as_span).collect();
    assert_eq!(spans.len(), 3);
    for (orig, got) in [&child, &failed, &parent].into_iter().zip(&spans) {
        let orig = orig.as_span().expect("span");
        assert_eq!(got.trace_id, trace_id_for(session));
        assert_eq!(got.span_id, orig.span_id, "our hex span ids pass unchanged");
        assert_eq!(got.parent_id, orig.parent_id.as_deref().map(span_id_for));
        assert_eq!(got.name, orig.name);
        assert_eq!(got.kind, orig.kind);
        assert_eq!(got.status, orig.status);
        assert_eq!(got.started_at, orig.started_at);
        assert_eq!(got.ended_at, orig.ended_at);
        let mut data = got.data.clone();
        assert_eq!(data.remove("otel.scope"), Some(json!("compact")));
        data.remove("otel.status_message");
        assert_eq!(data, orig.data, "data survives the round trip");
    }
    assert_eq!(spans[1].data["otel.status_message"], "summarizer failed");
}
