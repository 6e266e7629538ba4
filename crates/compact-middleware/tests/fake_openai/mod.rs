//! A scripted OpenAI-compatible chat-completions server: a real axum HTTP
//! server on loopback. Each request pops the next scripted reply (the
//! default reply when the script is empty) and is recorded with its body and
//! `Authorization` header.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::Notify;

/// One scripted reply.
#[derive(Clone)]
pub(crate) enum Reply {
    /// A status and a JSON body.
    Json(u16, Value),
    /// Never answers within any sane timeout.
    Hang(Duration),
    /// Waits for the gate to open, then answers with the inner reply.
    Gated(Arc<Notify>, Box<Reply>),
    /// Computed from the request: its index among the requests the server
    /// received (0-based) and its JSON body. A scripted model that reads
    /// its prompt, as a real one does.
    Computed(Responder),
}

/// What a [`Reply::Computed`] calls.
pub(crate) type Responder = Arc<dyn Fn(usize, &Value) -> Reply + Send + Sync>;

/// A recorded request.
#[derive(Clone, Debug)]
pub(crate) struct Recorded {
    pub body: Vec<u8>,
    pub authorization: Option<String>,
}

impl Recorded {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("request body is JSON")
    }
    pub(crate) fn user_prompt(&self) -> String {
        self.json()["messages"][1]["content"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

#[derive(Default)]
struct Shared {
    script: VecDeque<Reply>,
    default: Option<Reply>,
    requests: Vec<Recorded>,
}

pub(crate) struct FakeServer {
    addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
}

/// A successful completion with `text`.
pub(crate) fn ok(text: &str) -> Reply {
    Reply::Json(
        200,
        json!({
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "model": "served-model",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": null},
                "finish_reason": "stop"
            }],
            "usage": {"prompt_tokens": 321, "completion_tokens": 45, "total_tokens": 366}
        }),
    )
}

/// A completion whose `message` and `finish_reason` are given.
pub(crate) fn answer(message: Value, finish_reason: &str) -> Reply {
    Reply::Json(
        200,
        json!({
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10}
        }),
    )
}

pub(crate) fn status(code: u16) -> Reply {
    Reply::Json(
        code,
        json!({"error": {"message": format!("scripted {code}")}}),
    )
}

async fn handle(
    State(shared): State<Arc<Mutex<Shared>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (reply, index) = {
        let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
        let index = s.requests.len();
        s.requests.push(Recorded {
            body: body.to_vec(),
            authorization: headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
        });
        let reply = s
            .script
            .pop_front()
            .or_else(|| s.default.clone())
            .unwrap_or_else(|| ok("Goals: default summary."));
        (reply, index)
    };
    let reply = match reply {
        Reply::Computed(f) => {
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            f(index, &body)
        }
        other => other,
    };
    respond(reply).await
}

fn respond(reply: Reply) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send>> {
    Box::pin(async move {
        match reply {
            Reply::Json(code, v) => (
                StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                axum::Json(v),
            )
                .into_response(),
            Reply::Hang(d) => {
                tokio::time::sleep(d).await;
                StatusCode::GATEWAY_TIMEOUT.into_response()
            }
            Reply::Gated(gate, inner) => {
                gate.notified().await;
                respond(*inner).await
            }
            // Resolved in `handle`; one that computes another computed
            // reply is a broken script.
            Reply::Computed(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        }
    })
}

impl FakeServer {
    pub(crate) async fn start(script: Vec<Reply>) -> Self {
        let shared = Arc::new(Mutex::new(Shared {
            script: script.into(),
            ..Shared::default()
        }));
        let app = Router::new()
            .route("/v1/chat/completions", post(handle))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, shared }
    }

    pub(crate) fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub(crate) fn push(&self, reply: Reply) {
        self.lock().script.push_back(reply);
    }

    /// The reply used once the script is exhausted.
    pub(crate) fn set_default(&self, reply: Reply) {
        self.lock().default = Some(reply);
    }

    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.lock().requests.clone()
    }

    pub(crate) fn hits(&self) -> usize {
        self.lock().requests.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The `compact.summary_created` event `manager` wrote to the JSONL file
/// `events`, once its dispatcher has flushed.
pub(crate) async fn summary_created(
    manager: &compact_middleware::CompactManager,
    events: &std::path::Path,
) -> Value {
    // A hang guard only: flush returns as soon as the file has every event.
    assert!(
        manager
            .dispatcher()
            .flush_async(Duration::from_secs(120))
            .await
    );
    let text = std::fs::read_to_string(events).expect("events written");
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["name"] == "compact.summary_created")
        .expect("summary_created event")
}
