//! Shared test helpers: a real server on an ephemeral port with its own
//! data directory, an HTTP client, and an SSE reader.
#![allow(dead_code)]

use std::time::Duration;

use ariadne_server::{RunningServer, ServerConfig, spawn};
use serde_json::{Value, json};

pub(crate) struct TestServer {
    pub server: Option<RunningServer>,
    pub dir: tempfile::TempDir,
    pub url: String,
    pub client: reqwest::Client,
}

pub(crate) fn config(dir: &std::path::Path) -> ServerConfig {
    ServerConfig {
        addr: ([127, 0, 0, 1], 0).into(),
        data_dir: dir.to_owned(),
        ..ServerConfig::default()
    }
}

impl TestServer {
    pub(crate) async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    pub(crate) async fn start_with(tweak: impl FnOnce(&mut ServerConfig)) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cfg = config(dir.path());
        tweak(&mut cfg);
        let server = spawn(cfg).await.expect("server starts");
        let url = server.url();
        TestServer {
            server: Some(server),
            dir,
            url,
            client: reqwest::Client::new(),
        }
    }

    /// Stops the server and starts a new one on the same data directory.
    pub(crate) async fn restart(&mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown().await.expect("clean shutdown");
        }
        let server = spawn(config(self.dir.path())).await.expect("restarts");
        self.url = server.url();
        self.server = Some(server);
    }

    pub(crate) async fn post_raw(
        &self,
        path: &str,
        body: impl Into<reqwest::Body>,
    ) -> (u16, Value) {
        let resp = self
            .client
            .post(format!("{}{path}", self.url))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("request");
        answer(resp).await
    }

    pub(crate) async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.post_raw(path, body.to_string()).await
    }

    pub(crate) async fn get(&self, path: &str) -> (u16, Value) {
        let resp = self
            .client
            .get(format!("{}{path}", self.url))
            .send()
            .await
            .expect("request");
        answer(resp).await
    }

    pub(crate) async fn subscribe(&self, query: &str, last_event_id: Option<u64>) -> Sse {
        let mut req = self.client.get(format!("{}/events{query}", self.url));
        if let Some(id) = last_event_id {
            req = req.header("Last-Event-ID", id.to_string());
        }
        let resp = req.send().await.expect("subscribe");
        assert_eq!(resp.status().as_u16(), 200);
        Sse {
            resp,
            pending: String::new(),
        }
    }
}

pub(crate) fn span(trace: &str, i: usize) -> Value {
    json!({"type":"span","trace_id":trace,"span_id":format!("s{i}"),"kind":"compaction",
           "name":"compact.token_estimate","started_at":"2026-01-01T00:00:00.000Z",
           "ended_at":"2026-01-01T00:00:00.042Z","status":"ok","data":{"i":i}})
}

pub(crate) fn batch(trace: &str, range: std::ops::Range<usize>) -> Value {
    json!({"batch": range.map(|i| span(trace, i)).collect::<Vec<_>>()})
}

/// One SSE message: its `id:`, its `data:` (parsed), or a comment.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Msg {
    Data { id: Option<u64>, data: Value },
    Comment(String),
}

pub(crate) struct Sse {
    pub resp: reqwest::Response,
    pending: String,
}

impl Sse {
    /// The next message, or `None` if the stream ended or nothing came in `wait`.
    pub(crate) async fn next(&mut self, wait: Duration) -> Option<Msg> {
        loop {
            if let Some(end) = self.pending.find("\n\n") {
                let raw: String = self.pending.drain(..end + 2).collect();
                return Some(parse(&raw));
            }
            match tokio::time::timeout(wait, self.resp.chunk()).await {
                Ok(Ok(Some(c))) => self.pending.push_str(&String::from_utf8_lossy(&c)),
                _ => return None,
            }
        }
    }

    /// The next `data:` message that is not a comment.
    pub(crate) async fn next_data(&mut self, wait: Duration) -> Option<(Option<u64>, Value)> {
        loop {
            match self.next(wait).await? {
                Msg::Data { id, data } => return Some((id, data)),
                Msg::Comment(_) => continue,
            }
        }
    }
}

fn parse(raw: &str) -> Msg {
    let mut id = None;
    let mut data = String::new();
    for line in raw.lines() {
        if let Some(c) = line.strip_prefix(':') {
            return Msg::Comment(c.to_owned());
        } else if let Some(v) = line.strip_prefix("id: ") {
            id = v.parse().ok();
        } else if let Some(v) = line.strip_prefix("data: ") {
            data.push_str(v);
        }
    }
    Msg::Data {
        id,
        data: serde_json::from_str(&data).unwrap_or(Value::String(data)),
    }
}

pub(crate) const WAIT: Duration = Duration::from_secs(10);

/// A response's status and its body as JSON (a string when it is not).
async fn answer(resp: reqwest::Response) -> (u16, Value) {
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}
