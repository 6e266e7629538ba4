//! `compact tail` end to end: the real binary against a small SSE server
//! that closes the stream once, so the binary must reconnect and resume
//! after `Last-Event-ID`; Ctrl-C (SIGINT) ends it with exit code 0.

use std::convert::Infallible;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;
use tokio_stream::StreamExt;

/// (query string, Last-Event-ID) of every `/events` request.
type Seen = Arc<Mutex<Vec<(Option<String>, Option<String>)>>>;

fn span(id: &str, name: &str, data: serde_json::Value) -> String {
    json!({"type":"span","trace_id":"sess-7","span_id":id,"name":name,"kind":"compaction",
        "status":"ok","started_at":"2026-01-01T10:00:00.000Z","ended_at":"2026-01-01T10:00:00.042Z",
        "data":data})
    .to_string()
}

async fn events(State(seen): State<Seen>, RawQuery(q): RawQuery, headers: HeaderMap) -> Response {
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    seen.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push((q, last.clone()));
    let hello =
        Event::default().data(r#"{"type":"connected","timestamp":"2026-01-01T10:00:00.000Z"}"#);
    let first = last.is_none();
    let msgs = if first {
        vec![
            hello,
            Event::default().id("1").data(span(
                "a",
                "compact.token_estimate",
                json!({"t_est": 118420}),
            )),
            Event::default().id("2").data(span(
                "b",
                "compact.trigger_decision",
                json!({"triggered": true}),
            )),
        ]
    } else {
        vec![
            hello,
            Event::default().id("3").data(span(
                "c",
                "compact.summary_created",
                json!({"summary_tokens": 480, "output_text": "Goal: ship."}),
            )),
        ]
    };
    let stream = tokio_stream::iter(msgs.into_iter().map(Ok::<_, Infallible>));
    if first {
        // The stream ends here: the client has to come back.
        Sse::new(stream).into_response()
    } else {
        Sse::new(stream.chain(tokio_stream::pending())).into_response()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_prints_events_resumes_and_exits_0_on_ctrl_c() {
    let seen = Seen::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("addr");
    let app = Router::new()
        .route("/events", get(events))
        .with_state(seen.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });

    let mut child = Command::new(env!("CARGO_BIN_EXE_compact"))
        .args([
            "tail",
            "--url",
            &format!("http://{addr}"),
            "--kinds",
            "compaction,function",
        ])
        .arg("--trace=sess-7")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start compact tail");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    while lines.len() < 3 {
        // A hang guard only.
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(l) => lines.push(l),
            Err(e) => {
                let _ = child.kill();
                panic!("compact tail printed {lines:?}, then {e}");
            }
        }
    }
    assert_eq!(
        lines[0],
        "10:00:00.042  sess-7  compact.token_estimate  ok  compaction  42ms  t_est=118420"
    );
    assert_eq!(
        lines[1],
        "10:00:00.042  sess-7  compact.trigger_decision  ok  compaction  42ms  triggered=true"
    );
    assert_eq!(
        lines[2],
        "10:00:00.042  sess-7  compact.summary_created  ok  compaction  42ms  summary_tokens=480  summary=\"Goal: ship.\""
    );

    let requests = seen
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    assert_eq!(requests.len(), 2, "{requests:?}");
    let query = Some("traceId=sess-7&kinds=compaction%2Cfunction".to_owned());
    assert_eq!(requests[0], (query.clone(), None));
    assert_eq!(
        requests[1],
        (query, Some("2".to_owned())),
        "resumed after the last id"
    );

    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(status.success());
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("join")
        .expect("wait");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("reconnecting"), "{stderr}");
}
