//! `compact bench proxy`: what `compact proxy` adds to a model call that
//! compaction leaves alone. A spawned `compact proxy` (memory sessions, no
//! archive) in front of an in-process provider on loopback that answers
//! at once; the same calls straight to the provider and through the
//! proxy, one agent session resending its whole history one message
//! longer each call (the common case: nothing triggers). Direct and
//! proxied calls alternate, so load on a shared machine falls on both.
//!
//! - `overhead_p50_us`: p50 of a whole call through the proxy minus p50
//!   straight to the provider (target < 1 ms), per history size (~8k,
//!   ~33k, ~123k tokens);
//! - `ttfb_delta_p50_us`: the same for a stream's first body byte
//!   (target: unchanged within 1 ms).
//!
//! Like the sidecar suite it spawns `compact` (next to this binary, or
//! `COMPACT_BIN`; compact-service's `examples/proxy` is `compact proxy`
//! without the CLI, which a release build gets without the AWS SDK).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::routing::post;
use serde_json::{Value, json};

use crate::harness::Stats;
use crate::sidecar::compact_binary;
use crate::workload::history;

const ANSWER: &str = r#"{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":1,"total_tokens":1001}}"#;

/// The provider: a chat completion at once, whole or as a stream whose
/// first event is sent before the rest.
async fn provider() -> Result<String, String> {
    let app = Router::new().route(
        "/v1/chat/completions",
        post(|body: Bytes| async move {
            let stream = serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| v.get("stream").and_then(Value::as_bool))
                == Some(true);
            if !stream {
                return ([("content-type", "application/json")], Body::from(ANSWER));
            }
            let events = [
                "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"ok\"}}]}\n\n",
                "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":1000,\"completion_tokens\":1,\"total_tokens\":1001}}\n\n",
                "data: [DONE]\n\n",
            ];
            let stream = futures_stream(events.iter().map(|e| Bytes::from_static(e.as_bytes())).collect());
            ([("content-type", "text/event-stream")], Body::from_stream(stream))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let url = format!(
        "http://{}",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(url)
}

/// The events one at a time, each its own body chunk.
fn futures_stream(
    events: Vec<Bytes>,
) -> impl tokio_stream::Stream<Item = Result<Bytes, std::io::Error>> {
    tokio_stream::iter(events.into_iter().map(Ok))
}

struct Spawned(Child, std::path::PathBuf);

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

async fn start_proxy(upstream: &str) -> Result<(Spawned, String), String> {
    let bin = compact_binary()?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| e.to_string())?;
    let dir = std::env::temp_dir().join(format!("compact-bench-proxy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let child = Command::new(&bin)
        .args([
            "proxy",
            "--upstream",
            upstream,
            "--addr",
            &format!("127.0.0.1:{port}"),
        ])
        // A 1M window, as the preflight suite's `no_trigger_warm`: no size
        // measured here triggers, which is what the suite is about.
        .args(["--max-context-tokens", "1000000"])
        .env("HOME", &dir)
        .env("COMPACT_STATE_STORE", "memory")
        .env("COMPACT_STORAGE_ADAPTER", "none")
        .env("COMPACT_TELEMETRY_EXPORTER", "none")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot spawn {}: {e}", bin.display()))?;
    let spawned = Spawned(child, dir);
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    for _ in 0..400 {
        if client
            .get(format!("{base}/healthz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return Ok((spawned, base));
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    Err(format!("{base} never became healthy"))
}

/// `compact bench proxy`.
pub(crate) fn run(quick: bool) -> Value {
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => return json!({"error": format!("cannot build a tokio runtime: {e}")}),
    };
    rt.block_on(async {
        let result: Result<Value, String> = async {
            let upstream = provider().await?;
            let (_proxy, base) = start_proxy(&upstream).await?;
            let mut sizes = serde_json::Map::new();
            // ~8k, ~33k and ~123k tokens: an agent early, well into its
            // run, and near a 128k window (the sidecar suite's history).
            for (label, turns) in [("8k_tokens", 10), ("33k_tokens", 40), ("123k_tokens", 100)] {
                sizes.insert(
                    label.into(),
                    one_size(&upstream, &base, label, turns, quick).await?,
                );
            }
            Ok(json!({"sizes": sizes}))
        }
        .await;
        result.unwrap_or_else(|e| json!({"error": e}))
    })
}

async fn one_size(
    upstream: &str,
    proxy: &str,
    label: &str,
    turns: usize,
    quick: bool,
) -> Result<Value, String> {
    let base: Vec<Value> = history(turns, 3000).iter().map(|m| m.to_value()).collect();
    let client = reqwest::Client::new();
    let runs = if quick { 20 } else { 400 };
    let mut measured = serde_json::Map::new();
    let mut compaction: std::collections::BTreeMap<String, usize> = Default::default();
    let mut failed = 0usize;
    for stream in [false, true] {
        // Direct and proxied calls alternate, each turn's body sent to both
        // (in turns' alternating order), so that a shared machine's load
        // weighs on both sides of the difference alike.
        let targets = [("direct", upstream), ("proxied", proxy)];
        let session = format!("bench-{label}-{stream}");
        let mut samples = [Vec::with_capacity(runs), Vec::with_capacity(runs)];
        for turn in 0..runs + 10 {
            let b = body(&base, turn + 1, stream);
            for k in [turn % 2, 1 - turn % 2] {
                let sent = b.clone();
                let t = Instant::now();
                match call(&client, targets[k].1, &session, sent, stream).await {
                    Ok((header, first_byte)) => {
                        *compaction.entry(header.unwrap_or_default()).or_default() += 1;
                        // Streams: to the first body byte; whole calls: all of it.
                        let took = if stream { first_byte } else { t.elapsed() };
                        if turn >= 10 {
                            samples[k].push(took);
                        }
                    }
                    Err(_) => failed += 1,
                }
            }
        }
        for ((target, _), samples) in targets.into_iter().zip(samples) {
            if samples.is_empty() {
                return Err(format!("every {target} call failed"));
            }
            let key = if stream {
                format!("{target}_ttfb")
            } else {
                target.to_owned()
            };
            measured.insert(
                key,
                serde_json::to_value(Stats::from(samples)).unwrap_or(Value::Null),
            );
        }
    }
    let p50 = |k: &str| measured[k]["p50_us"].as_f64().unwrap_or(f64::NAN);
    let round = |x: f64| (x * 10.0).round() / 10.0;
    Ok(json!({
        "history_messages": base.len(),
        "body_bytes": body(&base, 1, false).len(),
        "stats": measured,
        "overhead_p50_us": round(p50("proxied") - p50("direct")),
        "ttfb_delta_p50_us": round(p50("proxied_ttfb") - p50("direct_ttfb")),
        // What the proxy's `X-Compact-Compaction` said (direct calls: "").
        "compaction": compaction,
        "failed_calls": failed,
    }))
}

/// The raw history plus `extra` new user messages, as an agent resends it.
fn body(base: &[Value], extra: usize, stream: bool) -> Vec<u8> {
    let mut messages = base.to_vec();
    messages
        .extend((0..extra).map(|k| json!({"role": "user", "content": format!("raw message {k}")})));
    serde_json::to_vec(&json!({"model": "gpt-4o", "stream": stream, "messages": messages}))
        .unwrap_or_default()
}

/// One call, read to its end; returns the proxy's compaction header and
/// the time to the first body byte.
async fn call(
    client: &reqwest::Client,
    url: &str,
    session: &str,
    body: Vec<u8>,
    stream: bool,
) -> Result<(Option<String>, Duration), String> {
    let t = Instant::now();
    let mut r = client
        .post(format!("{url}/v1/chat/completions"))
        .header("content-type", "application/json")
        .header("authorization", "Bearer sk-bench")
        .header("x-compact-session", session)
        .body(body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let compaction = r
        .headers()
        .get("x-compact-compaction")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if !r.status().is_success() {
        return Err(format!("{}", r.status()));
    }
    r.chunk().await.map_err(|e| e.to_string())?;
    let first_byte = t.elapsed();
    let _ = stream;
    while r.chunk().await.map_err(|e| e.to_string())?.is_some() {}
    Ok((compaction, first_byte))
}
