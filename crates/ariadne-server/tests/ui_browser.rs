//! The timeline UI in a real browser: a loopback axum server with the UI
//! router plus a small fake `/events` SSE stream and `/api/traces`, and
//! Debian's headless Chromium rendering the page. Asserts on the DOM the
//! page built from the events.
//!
//! Needs `chromium` (Debian: `apt-get install -y chromium`); `CHROMIUM`
//! overrides the path. Set `COMPACT_UI_SCREENSHOT=/tmp/ui.png` to also save
//! a 1400x900 screenshot of the page.

use std::convert::Infallible;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use ariadne_server::map::sdk_to_events;
use axum::Router;
use axum::extract::{Path, RawQuery};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::response::sse::{Event as SseEvent, Sse};
use axum::routing::get;
use compact_events::{Event, SpanEvent, SpanStatus, TraceEvent};
use serde_json::{Map, Value, json};

const SUMMARY: &str = "Goal: plan the Berlin offsite. Done: weather checked (14C, rain), venue shortlist of 3. Open: book venue by Friday.";
const LIVE_TRACE: &str = "sess-live-42";
const HISTORY_FIXTURE: &str = "openai-agents-0.24.0/tool_error.json";

fn chromium() -> PathBuf {
    let path = std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    assert!(
        path.exists(),
        "headless Chromium is required for the UI test: apt-get install -y chromium (or set CHROMIUM)"
    );
    path
}

fn fixture(rel: &str) -> Value {
    let path = format!("{}/tests/fixtures/{rel}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).expect("fixture")).expect("fixture json")
}

#[allow(clippy::too_many_arguments)]
fn span(
    id: &str,
    parent: Option<&str>,
    kind: &str,
    name: &str,
    start: &str,
    end: &str,
    status: SpanStatus,
    data: Value,
) -> Event {
    let data: Map<String, Value> = match data {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    Event::Span(SpanEvent {
        trace_id: LIVE_TRACE.to_owned(),
        span_id: id.to_owned(),
        parent_id: parent.map(str::to_owned),
        kind: Some(kind.to_owned()),
        name: Some(name.to_owned()),
        started_at: format!("2026-03-02T10:15:{start}Z"),
        ended_at: Some(format!("2026-03-02T10:15:{end}Z")),
        data,
        status,
    })
}

/// A live compact session: agent spans with a compaction inside.
fn live_events() -> Vec<Event> {
    let mut md = std::collections::BTreeMap::new();
    md.insert("agent_name".to_owned(), "offsite-planner".to_owned());
    vec![
        Event::Trace(TraceEvent {
            trace_id: LIVE_TRACE.to_owned(),
            name: Some("offsite-planner".to_owned()),
            group_id: None,
            started_at: Some("2026-03-02T10:15:00.000Z".to_owned()),
            ended_at: None,
            metadata: Some(md),
        }),
        span(
            "a1",
            None,
            "agent",
            "offsite-planner",
            "00.000",
            "09.800",
            SpanStatus::Ok,
            json!({"tools":["get_weather","search_venues"]}),
        ),
        span(
            "g1",
            Some("a1"),
            "generation",
            "generation gpt-4o",
            "00.100",
            "01.900",
            SpanStatus::Ok,
            json!({"usage":{"input_tokens":81234,"output_tokens":412}}),
        ),
        span(
            "f1",
            Some("a1"),
            "function",
            "get_weather",
            "02.000",
            "02.450",
            SpanStatus::Ok,
            json!({"input":"{\"city\":\"Berlin\"}","output":"14C, light rain"}),
        ),
        span(
            "f2",
            Some("a1"),
            "function",
            "search_venues",
            "02.500",
            "04.100",
            SpanStatus::Error,
            json!({"error":{"message":"venue API timed out"}}),
        ),
        span(
            "p1",
            Some("a1"),
            "compaction",
            "compact.preflight",
            "04.200",
            "05.300",
            SpanStatus::Ok,
            json!({"session_id":LIVE_TRACE}),
        ),
        span(
            "p1-est",
            Some("p1"),
            "compaction",
            "compact.token_estimate",
            "04.200",
            "04.260",
            SpanStatus::Ok,
            json!({"model":"gpt-4o","t_est":118420,"max_tokens":128000,"usage_pct":0.925}),
        ),
        span(
            "p1-dec",
            Some("p1"),
            "compaction",
            "compact.trigger_decision",
            "04.260",
            "04.270",
            SpanStatus::Ok,
            json!({"triggered":true,"reason":"usage_pct >= trigger_pct","trigger_pct":0.85,"pruned_count":47}),
        ),
        span(
            "p1-sum",
            Some("p1"),
            "compaction",
            "compact.summary_created",
            "04.270",
            "05.250",
            SpanStatus::Ok,
            json!({"summary_tokens":480,"output_text":SUMMARY}),
        ),
        span(
            "p1-prune",
            Some("p1"),
            "compaction",
            "compact.pruned_messages",
            "05.250",
            "05.300",
            SpanStatus::Ok,
            json!({"pruned_count":47,"tokens_before":118420,"tokens_after":31877}),
        ),
        // The agent recalls what the compaction cleared: a root span.
        span(
            "r1",
            None,
            "compaction",
            "compact.recall",
            "05.350",
            "05.352",
            SpanStatus::Ok,
            json!({"mode":"query","query":"venue shortlist","id":null,"limit":5,"hits":3,"ids":["r7kq2m4x","rb3dh9tw","rc4ej2ux"],"latency_us":1840}),
        ),
        span(
            "g2",
            Some("a1"),
            "generation",
            "generation gpt-4o",
            "05.400",
            "09.700",
            SpanStatus::Ok,
            json!({"usage":{"input_tokens":31877,"output_tokens":655}}),
        ),
    ]
}

/// Arrives only on a resumed stream.
fn late_event() -> Event {
    span(
        "g3",
        Some("a1"),
        "generation",
        "generation gpt-4o-mini (late)",
        "09.750",
        "09.790",
        SpanStatus::Ok,
        json!({}),
    )
}

/// `?access_token=` must match when the test server has a token.
fn authorized(token: Option<&'static str>, query: &Option<String>) -> bool {
    match token {
        None => true,
        Some(t) => query
            .as_deref()
            .unwrap_or("")
            .split('&')
            .any(|p| p == format!("access_token={t}")),
    }
}

fn app(token: Option<&'static str>) -> Router {
    let history = sdk_to_events(&fixture(HISTORY_FIXTURE)).expect("history maps");
    let history_trace = history
        .iter()
        .find_map(|e| match e {
            Event::Trace(t) => Some(t.clone()),
            Event::Span(_) => None,
        })
        .expect("history trace");
    let history_id = history_trace.trace_id.clone();
    let history_spans: Vec<Value> = history
        .iter()
        .filter(|e| e.as_span().is_some())
        .filter_map(|e| serde_json::to_value(e).ok())
        .collect();
    let mut listed = serde_json::to_value(&history_trace).expect("trace json");
    if let Some(o) = listed.as_object_mut() {
        o.remove("type");
        o.insert("event_count".into(), json!(history.len()));
        o.insert("last_seq".into(), json!(history.len()));
    }
    let list_body = json!({"traces":[listed], "next_before": null});
    let detail_body =
        json!({"trace_id": history_id, "trace": history_trace, "spans": history_spans});

    ariadne_server::ui::router()
        .route(
            "/events",
            get(
                move |RawQuery(q): RawQuery, headers: HeaderMap| async move {
                    if !authorized(token, &q) {
                        return StatusCode::UNAUTHORIZED.into_response();
                    }
                    // Like the real server: replay after Last-Event-ID. This one
                    // ends the stream after what it has (headless Chromium's
                    // virtual time only runs while no request is open), so the
                    // page reconnects and must resume without duplicates; the
                    // resumed stream brings one late event.
                    let after: usize = headers
                        .get("last-event-id")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    let mut events = live_events();
                    if after > 0 {
                        events.push(late_event());
                    }
                    let mut msgs =
                        vec![SseEvent::default().retry(Duration::from_millis(300)).data(
                            r#"{"type":"connected","timestamp":"2026-03-02T10:15:00.000Z"}"#,
                        )];
                    for (i, ev) in events.iter().enumerate().skip(after) {
                        let data = serde_json::to_string(ev).unwrap_or_default();
                        msgs.push(SseEvent::default().id((i + 1).to_string()).data(data));
                    }
                    Sse::new(tokio_stream::iter(
                        msgs.into_iter().map(Ok::<_, Infallible>),
                    ))
                    .into_response()
                },
            ),
        )
        .route(
            "/api/traces",
            get(move |RawQuery(q): RawQuery| {
                let body = list_body.clone();
                async move {
                    if !authorized(token, &q) {
                        return StatusCode::UNAUTHORIZED.into_response();
                    }
                    axum::Json(body).into_response()
                }
            }),
        )
        .route(
            "/api/traces/{id}",
            get(move |Path(id): Path<String>, RawQuery(q): RawQuery| {
                let body = detail_body.clone();
                let known = body["trace_id"] == id.as_str();
                async move {
                    if !authorized(token, &q) {
                        return StatusCode::UNAUTHORIZED.into_response();
                    }
                    if !known {
                        return (
                            StatusCode::NOT_FOUND,
                            axum::Json(json!({"error":"Trace not found"})),
                        )
                            .into_response();
                    }
                    axum::Json(body).into_response()
                }
            }),
        )
}

async fn serve(token: Option<&'static str>) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app(token)).await;
    });
    addr
}

/// Runs headless Chromium on `url` with `extra` flags; returns stdout.
async fn chromium_run(url: String, extra: Vec<String>) -> String {
    let bin = chromium();
    tokio::task::spawn_blocking(move || {
        let profile = tempdir();
        let mut cmd = Command::new(bin);
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--no-first-run",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(&extra)
        .arg(&url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let child = cmd.spawn().expect("start chromium");
        // A hang guard only: the page's content is what is asserted.
        let out = wait_with_guard(child, Duration::from_secs(120));
        let _ = std::fs::remove_dir_all(&profile);
        out
    })
    .await
    .expect("chromium task")
}

fn wait_with_guard(child: std::process::Child, guard: Duration) -> String {
    let id = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(guard) {
        Ok(Ok(out)) => {
            assert!(
                out.status.success(),
                "chromium failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
        Ok(Err(e)) => panic!("chromium: {e}"),
        Err(_) => {
            let _ = Command::new("kill").arg(id.to_string()).status();
            panic!("chromium did not finish");
        }
    }
}

fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "compact-ui-test-{}-{}",
        std::process::id(),
        compact_events::new_span_id()
    ));
    std::fs::create_dir_all(&dir).expect("profile dir");
    dir
}

fn element_text<'a>(dom: &'a str, id: &str) -> Option<&'a str> {
    let start = dom.find(&format!("id=\"{id}\">"))? + id.len() + 6;
    let end = dom[start..].find('<')? + start;
    Some(&dom[start..end])
}

async fn screenshot_if_asked(addr: std::net::SocketAddr, query: &str) {
    if let Some(path) = std::env::var_os("COMPACT_UI_SCREENSHOT") {
        let path = PathBuf::from(path);
        chromium_run(
            format!("http://{addr}/{query}"),
            vec![
                format!("--screenshot={}", path.display()),
                "--window-size=1400,900".to_owned(),
            ],
        )
        .await;
        assert!(path.exists(), "screenshot written");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeline_renders_live_and_historical_events() {
    let addr = serve(None).await;
    let dom = chromium_run(format!("http://{addr}/"), vec!["--dump-dom".to_owned()]).await;

    // Live session from the SSE stream.
    assert!(dom.contains(LIVE_TRACE), "live trace id shown in:\n{dom}");
    for name in [
        "compact.preflight",
        "compact.token_estimate",
        "compact.trigger_decision",
        "compact.summary_created",
        "compact.pruned_messages",
        "get_weather",
        "search_venues",
        "generation gpt-4o",
    ] {
        assert!(dom.contains(name), "span {name} shown");
    }
    // The summary (data.output_text) is shown as text in the inspector.
    assert!(dom.contains(SUMMARY), "summary text shown");
    assert!(dom.contains("Summary (output_text)"));
    // compact.* spans are highlighted, the failed tool is an error row.
    assert!(
        dom.contains("span-row k-compaction compact"),
        "compaction rows highlighted"
    );
    assert!(dom.contains("data-span-id=\"f2\"") && dom.contains("k-function error"));
    // A recall is drawn in its own colour with its hit count.
    assert!(
        dom.contains("span-row k-compaction compact n-compact-recall"),
        "recall row styled: {dom}"
    );
    assert!(dom.contains("<span class=\"recall-hits\">3 hits</span>"));
    // Live counter: every SSE event but the `connected` hello; the stream was resumed after Last-Event-ID: the late event came,
    // nothing was counted twice.
    assert!(
        dom.contains("generation gpt-4o-mini (late)"),
        "resumed stream delivered"
    );
    assert_eq!(element_text(&dom, "c-events"), Some("13"));

    // History from /api/traces and /api/traces/{id}: the SDK sample.
    assert!(
        dom.contains("trace_9a75caf89dce4bc9a5d69c179632996e"),
        "historical trace listed"
    );
    assert!(
        dom.contains("flaky_lookup") && dom.contains("fetch_report"),
        "historical spans loaded"
    );
    assert!(dom.contains("agents-sdk-offline-check"));
    assert_eq!(element_text(&dom, "c-traces"), Some("2"));
    // 12 live spans + 21 historical spans, each once.
    assert_eq!(element_text(&dom, "c-spans"), Some("33"));
    assert_eq!(element_text(&dom, "c-errors"), Some("2"));

    screenshot_if_asked(addr, "").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_token_is_passed_to_the_stream_and_the_api() {
    let addr = serve(Some("s3cret")).await;

    let without = chromium_run(format!("http://{addr}/"), vec!["--dump-dom".to_owned()]).await;
    assert!(!without.contains(LIVE_TRACE), "no token, no events");
    assert_eq!(element_text(&without, "c-events"), Some("0"));

    let with = chromium_run(
        format!("http://{addr}/?token=s3cret&trace={LIVE_TRACE}"),
        vec!["--dump-dom".to_owned()],
    )
    .await;
    assert!(with.contains(SUMMARY));
    assert!(with.contains("trace_9a75caf89dce4bc9a5d69c179632996e"));
    assert_eq!(element_text(&with, "c-events"), Some("13"));
    // `?trace=` preselects the live trace: only its timeline is drawn.
    assert!(with.contains(&format!(
        "class=\"trace-block\" data-trace-id=\"{LIVE_TRACE}\""
    )));
    assert!(!with.contains("class=\"trace-block\" data-trace-id=\"trace_9a75"));
}

#[tokio::test]
async fn ui_assets_are_served_with_their_types() {
    let addr = serve(None).await;
    for (path, ty) in [
        ("/", "text/html"),
        ("/ui/app.js", "text/javascript"),
        ("/ui/app.css", "text/css"),
        ("/favicon.svg", "image/svg+xml"),
        ("/favicon.ico", "image/svg+xml"),
    ] {
        let resp = raw_get(addr, path).await;
        assert!(resp.starts_with("HTTP/1.1 200"), "{path}: {resp}");
        assert!(
            resp.to_ascii_lowercase()
                .contains(&format!("content-type: {ty}")),
            "{path}"
        );
        assert!(
            resp.to_ascii_lowercase()
                .contains("content-security-policy")
        );
    }
}

async fn raw_get(addr: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .expect("write");
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.expect("read");
    String::from_utf8_lossy(&out).into_owned()
}
