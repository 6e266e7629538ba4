//! `preflight_visibility`, run by `compact bench server`: how long after a
//! preflight returns its `compact.preflight` span is visible to a live
//! viewer. The whole path is real: a `CompactManager` whose dispatcher
//! batches for an `AriadneExporter`, HTTP to a real server, its durable
//! group commit, and an `/events` SSE subscriber (target p99 < 50 ms; the
//! seed asks for under 200 ms). As in production, where the agents, the
//! trace server and the browser are separate processes, the server and the
//! subscriber run on runtimes (threads) of their own: the agents' preflights
//! keep the bench's runtime busy, and must not hold up the server's
//! handlers or the viewer as they would if all shared two worker threads.
//!
//! Several sessions run at once, each a paced agent whose history grows by
//! one tool-heavy turn per preflight (some preflights compact). A session's
//! preflights are sequential, so its n-th preflight span seen on the stream
//! belongs to its n-th preflight.
//!
//! The exporter is wrapped to note when each preflight span's `export` call
//! starts and returns, which splits the latency into hops: `dispatch`
//! (preflight returned → its batch handed to the exporter: the dispatcher's
//! queue and batching), `export` (the HTTP request until the server's 200:
//! body, validation, durable commit), and `delivered` (the 200 → the span
//! parsed by the subscriber; negative when the stream was faster than the
//! reply, since the server publishes before it answers).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ariadne_exporter::{AriadneExporter, HttpOptions};
use compact_middleware::CompactManager;
use compact_middleware::config::Config;
use compact_middleware::events::{BoxFuture, Event, ExportError, Exporter, names};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::workload::{history, received};

/// Sessions running at once.
const SESSIONS: usize = 8;
/// Preflights per session.
const TURNS: usize = 60;
/// The simulated model call between two preflights of a session.
const PACE: Duration = Duration::from_millis(25);
/// The window: small enough that the later turns compact.
const WINDOW: usize = 32_000;

/// When the subscriber saw each session's preflight spans, in micros since
/// the bench's base instant, in arrival order.
type Seen = HashMap<String, Vec<u64>>;

/// The real exporter, noting when each session's preflight spans were
/// handed to it and when their export returned (micros since `base`).
#[derive(Debug)]
struct Timed {
    inner: AriadneExporter,
    base: Instant,
    exports: Mutex<HashMap<String, Vec<(u64, u64)>>>,
}

impl Exporter for Timed {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn export<'a>(&'a self, batch: &'a [Event]) -> BoxFuture<'a, Result<(), ExportError>> {
        Box::pin(async move {
            let start = self.base.elapsed().as_micros() as u64;
            let result = self.inner.export(batch).await;
            let end = self.base.elapsed().as_micros() as u64;
            let mut exports = self
                .exports
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for ev in batch {
                if let Some(span) = ev.as_span()
                    && span.name.as_deref() == Some(names::PREFLIGHT)
                {
                    exports
                        .entry(span.trace_id.clone())
                        .or_default()
                        .push((start, end));
                }
            }
            result
        })
    }
}

/// p50/p99/max in ms of signed micros.
fn percentiles(mut v: Vec<i64>) -> Value {
    v.sort_unstable();
    let pct = |p: f64| -> Option<f64> {
        let idx = ((v.len().checked_sub(1)?) as f64 * p).round() as usize;
        Some(v[idx] as f64 / 1000.0)
    };
    json!({"p50_ms": pct(0.50), "p99_ms": pct(0.99), "max_ms": pct(1.0)})
}

/// A multi-thread runtime with `threads` workers of its own.
pub(crate) fn own_runtime(name: &str, threads: usize) -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name(name)
        .enable_all()
        .build()
        .map_err(|e| format!("start the {name} runtime: {e}"))
}

/// Runs the benchmark against the fresh server at `base_url`.
pub(crate) async fn run(base_url: &str) -> Result<Value, String> {
    let base = Instant::now();
    let (ready_tx, ready_rx) = oneshot::channel();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let (count_tx, mut count_rx) = mpsc::unbounded_channel::<()>();
    let viewer = own_runtime("bench-viewer", 1)?;
    let subscriber = viewer.spawn(subscribe(
        format!("{base_url}/events"),
        base,
        ready_tx,
        stop_rx,
        count_tx,
    ));
    ready_rx
        .await
        .map_err(|_| "the SSE subscriber never connected".to_owned())?;

    let config = Config {
        model: "gpt-4o".into(),
        max_context_tokens: Some(WINDOW),
        ..Config::default()
    };
    let exporter = Arc::new(Timed {
        inner: AriadneExporter::new(&format!("{base_url}/ingest"), HttpOptions::default())
            .map_err(|e| e.to_string())?,
        base,
        exports: Mutex::new(HashMap::new()),
    });
    let manager = CompactManager::builder(config)
        .without_config_exporters()
        .without_storage()
        .exporter(exporter.clone())
        .build()
        .map_err(|e| e.to_string())?;

    let ends = drive_agents(&manager, base).await?;
    // Every preflight span, or a hang guard (a lost event shows as missing).
    let expected = SESSIONS * TURNS;
    let mut got = 0;
    while got < expected {
        match tokio::time::timeout(Duration::from_secs(10), count_rx.recv()).await {
            Ok(Some(())) => got += 1,
            _ => break,
        }
    }
    let _ = stop_tx.send(());
    let seen = subscriber.await.map_err(|e| e.to_string())??;
    viewer.shutdown_background();
    let dispatch_stats = manager.dispatcher().stats();
    manager.dispatcher().shutdown(Duration::from_secs(2));

    let exports = std::mem::take(
        &mut *exporter
            .exports
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    let mut lat_us: Vec<u64> = Vec::with_capacity(expected);
    let (mut dispatch, mut export, mut delivered) = (Vec::new(), Vec::new(), Vec::new());
    for (session, ends) in &ends {
        let Some(seen) = seen.get(session) else {
            continue;
        };
        lat_us.extend(
            ends.iter()
                .zip(seen)
                .map(|(end, seen)| seen.saturating_sub(*end)),
        );
        let hops = exports.get(session).map(Vec::as_slice).unwrap_or_default();
        for ((end, seen), (start, done)) in ends.iter().zip(seen).zip(hops) {
            let signed = |a: u64, b: u64| a as i64 - b as i64;
            dispatch.push(signed(*start, *end));
            export.push(signed(*done, *start));
            delivered.push(signed(*seen, *done));
        }
    }
    lat_us.sort_unstable();
    let pct = |p: f64| -> Option<f64> {
        let idx = ((lat_us.len().checked_sub(1)?) as f64 * p).round() as usize;
        Some(lat_us[idx] as f64 / 1000.0)
    };
    Ok(json!({
        "sessions": SESSIONS,
        "preflights": expected,
        "seen": lat_us.len(),
        "pace_ms": PACE.as_millis() as u64,
        "events_exported": dispatch_stats.exported,
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
        "max_ms": pct(1.0),
        "target_p99_ms": 50,
        "hops": {
            "dispatch": percentiles(dispatch),
            "export": percentiles(export),
            "delivered": percentiles(delivered),
        },
        "note": "preflight returned -> its compact.preflight span parsed by an /events subscriber; dispatcher, HTTP exporter, durable commit and SSE included. hops: dispatch = preflight returned -> its batch handed to the exporter; export = the POST until the 200; delivered = the 200 -> seen on the stream (negative: the stream was first)",
    }))
}

/// Runs the agents, `SESSIONS` sessions of `TURNS` paced turns each:
/// when each preflight returned, in µs since `base`, by session.
async fn drive_agents(
    manager: &CompactManager,
    base: Instant,
) -> Result<HashMap<String, Vec<u64>>, String> {
    let full = history(TURNS, 2_500);
    let run_id = std::process::id();
    let mut agents = Vec::new();
    for s in 0..SESSIONS {
        let (manager, full) = (manager.clone(), full.clone());
        let session = format!("visibility-{run_id}-{s}");
        agents.push(tokio::spawn(async move {
            // Start the sessions out of step, as independent agents are.
            tokio::time::sleep(PACE * s as u32 / SESSIONS as u32).await;
            let mut ends = Vec::with_capacity(TURNS);
            for t in 1..=TURNS {
                let messages = received(&full[..1 + 4 * t]);
                manager
                    .preflight(&session, messages)
                    .await
                    .map_err(|e| e.to_string())?;
                ends.push(base.elapsed().as_micros() as u64);
                tokio::time::sleep(PACE).await;
            }
            Ok::<_, String>((session, ends))
        }));
    }
    let mut ends: HashMap<String, Vec<u64>> = HashMap::new();
    for a in agents {
        let (session, e) = a.await.map_err(|e| e.to_string())??;
        ends.insert(session, e);
    }
    Ok(ends)
}

/// Reads `/events` until told to stop, noting when each session's
/// preflight spans arrive.
async fn subscribe(
    url: String,
    base: Instant,
    ready: oneshot::Sender<()>,
    stop: oneshot::Receiver<()>,
    count: mpsc::UnboundedSender<()>,
) -> Result<Seen, String> {
    let mut seen = Seen::new();
    let now = || base.elapsed().as_micros() as u64;
    // Only the preflight spans are parsed: the text test is cheaper.
    let wanted = |msg: &str| msg.contains("\"compact.preflight\"");
    read_events(url, ready, stop, now, wanted, |ev, now| {
        if ev["name"] == "compact.preflight"
            && let Some(trace) = ev["trace_id"].as_str()
        {
            seen.entry(trace.to_owned()).or_default().push(now);
            let _ = count.send(());
        }
    })
    .await?;
    Ok(seen)
}

/// Reads the server's `/events` stream at `url` until `stop` fires or the
/// stream ends: signals `ready` at the server's `connected` event, and
/// hands each event whose message is `wanted` (a test of its text, before
/// it is parsed) to `each`, with `now()` read when its chunk arrived.
pub(crate) async fn read_events<T: Copy>(
    url: String,
    ready: oneshot::Sender<()>,
    mut stop: oneshot::Receiver<()>,
    now: impl Fn() -> T,
    wanted: impl Fn(&str) -> bool,
    mut each: impl FnMut(Value, T),
) -> Result<(), String> {
    let mut resp = reqwest::get(url).await.map_err(|e| e.to_string())?;
    let mut ready = Some(ready);
    let mut pending = String::new();
    loop {
        let chunk = tokio::select! {
            c = resp.chunk() => c.map_err(|e| e.to_string())?,
            _ = &mut stop => break,
        };
        let Some(chunk) = chunk else { break };
        let now = now();
        pending.push_str(&String::from_utf8_lossy(&chunk));
        let Some(end) = pending.rfind("\n\n") else {
            continue;
        };
        for msg in pending[..end].split("\n\n") {
            if msg.contains("\"connected\"")
                && let Some(r) = ready.take()
            {
                let _ = r.send(());
            }
            if !wanted(msg) {
                continue;
            }
            let Some(data) = msg.lines().find_map(|l| l.strip_prefix("data: ")) else {
                continue;
            };
            let Ok(ev) = serde_json::from_str::<Value>(data) else {
                continue;
            };
            each(ev, now);
        }
        pending.drain(..end + 2);
    }
    Ok(())
}
