//! Server benchmarks, run by `compact bench server`: each starts a real
//! server on a loopback port with a fresh data directory and drives it over
//! HTTP. Every run is bounded in time; the figures come back as JSON.
//!
//! - `ingest`: durable throughput, batches of 100 events, several
//!   concurrent clients (target ≥ 20 000 events/s).
//! - `ingest_by_connections`: the same at 1, 4 and 16 clients, each on a
//!   fresh server; with `COMPACT_BENCH_REFERENCE` set, a reference server
//!   (Ariadne's own) is measured by the same client right after ours at
//!   each count, and the ratio is reported.
//! - `sse_latency`: ingest → SSE delivery p50/p99 with 20 subscribers at
//!   5 000 events/s (target p99 < 50 ms).
//! - `preflight_visibility`: preflight end → its span seen by an `/events`
//!   subscriber, through the real dispatcher and exporter (target p99 < 50 ms).
//! - `demo_visibility`: span end → arrival on an `/events` subscriber, with
//!   `compact serve` and `compact demo --url` as separate processes, several
//!   runs in a row (target p99 < 10 ms in every run; `demo_visibility.rs`).
//! - `replicas`: `compact serve` replicas on one ClickHouse
//!   (`COMPACT_BENCH_CLICKHOUSE_URL`): ingest into 1 against 2, and SSE
//!   visibility across replicas (`replicas.rs`).
//! - `rss`: the process's resident memory after 1 000 000 events under the
//!   default retention (server and client share the process, so this is an
//!   upper bound on the server's).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use ariadne_server::{ServerConfig, spawn};

/// What to run, and how long.
#[derive(Debug, Clone)]
pub(crate) struct BenchOptions {
    /// Seconds of the ingest benchmark.
    pub ingest_secs: f64,
    /// Concurrent ingest clients.
    pub ingest_clients: usize,
    /// Events per request.
    pub batch: usize,
    /// SSE subscribers in the latency benchmark.
    pub subscribers: usize,
    /// Events per second published in the latency benchmark.
    pub rate: u64,
    /// Seconds of the latency benchmark.
    pub latency_secs: f64,
    /// Events ingested before RSS is read (0 skips it).
    pub rss_events: u64,
    /// Where the temporary data directories go (default: the system temp dir).
    pub scratch: Option<PathBuf>,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            ingest_secs: 5.0,
            ingest_clients: 8,
            batch: 100,
            subscribers: 20,
            rate: 5000,
            latency_secs: 5.0,
            rss_events: 1_000_000,
            scratch: None,
        }
    }
}

/// The measurements of the suite, in the order they run.
const PARTS: [&str; 7] = [
    "ingest",
    "ingest_by_connections",
    "sse_latency",
    "preflight_visibility",
    "demo_visibility",
    "replicas",
    "rss",
];

/// Which measurements to run: `COMPACT_BENCH_SERVER`, a comma list of
/// [`PARTS`] (all when unset or empty), so one can be re-run alone.
fn selected() -> Result<Vec<&'static str>, String> {
    let asked = std::env::var("COMPACT_BENCH_SERVER").unwrap_or_default();
    let mut parts = Vec::new();
    for name in asked.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match PARTS.iter().find(|p| **p == name) {
            Some(p) => parts.push(*p),
            None => {
                return Err(format!(
                    "COMPACT_BENCH_SERVER: unknown measurement {name:?} (one of {})",
                    PARTS.join(", ")
                ));
            }
        }
    }
    Ok(if parts.is_empty() {
        PARTS.to_vec()
    } else {
        parts
    })
}

/// Runs every benchmark (or those `COMPACT_BENCH_SERVER` names); failures
/// are reported in the JSON, not raised. Skipped ones are `null`.
pub(crate) async fn run(opts: BenchOptions) -> Value {
    let parts = match selected() {
        Ok(p) => p,
        Err(e) => return json!({ "error": e }),
    };
    let mut doc = serde_json::Map::new();
    for part in PARTS {
        let report = if !parts.contains(&part) {
            Value::Null
        } else {
            match part {
                "ingest" => ingest(&opts)
                    .await
                    .unwrap_or_else(|e| json!({ "error": e })),
                "ingest_by_connections" => {
                    // The connection counts the comparison with Ariadne's
                    // server uses (docs/performance.md), each on a fresh server.
                    let reference = crate::reference::from_env();
                    let mut by_connections = Vec::new();
                    for clients in [1, 4, 16] {
                        let one = BenchOptions {
                            ingest_clients: clients,
                            ..opts.clone()
                        };
                        let mut ours = ingest(&one)
                            .await
                            .unwrap_or_else(|e| json!({ "clients": clients, "error": e }));
                        if let Some(cmd) = &reference {
                            crate::reference::compare(&mut ours, cmd, &one).await;
                        }
                        by_connections.push(ours);
                    }
                    Value::Array(by_connections)
                }
                "sse_latency" => sse_latency(&opts)
                    .await
                    .unwrap_or_else(|e| json!({ "error": e })),
                "preflight_visibility" => preflight_visibility(&opts)
                    .await
                    .unwrap_or_else(|e| json!({ "error": e })),
                "demo_visibility" => crate::demo_visibility::run()
                    .await
                    .unwrap_or_else(|e| json!({ "error": e })),
                "replicas" => crate::replicas::run(&opts)
                    .await
                    .unwrap_or_else(|e| json!({ "error": e })),
                _ if opts.rss_events > 0 => {
                    rss(&opts).await.unwrap_or_else(|e| json!({ "error": e }))
                }
                _ => Value::Null,
            }
        };
        doc.insert(part.to_owned(), report);
    }
    Value::Object(doc)
}

async fn preflight_visibility(opts: &BenchOptions) -> Result<Value, String> {
    let dir = Scratch::new(opts, "visibility");
    // Its own threads, as `compact serve` is its own process (see visibility.rs).
    let rt = crate::visibility::own_runtime("bench-server", 2)?;
    let cfg = config(&dir);
    let server = rt
        .spawn(async move { spawn(cfg).await })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    let report = crate::visibility::run(&server.url()).await;
    let _ = rt.spawn(server.shutdown()).await;
    rt.shutdown_background();
    report
}

struct Scratch(PathBuf);

impl Scratch {
    fn new(opts: &BenchOptions, name: &str) -> Self {
        let base = opts.scratch.clone().unwrap_or_else(std::env::temp_dir);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        Scratch(base.join(format!(
            "ariadne-bench-{name}-{}-{nanos}",
            std::process::id()
        )))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn config(dir: &Scratch) -> ServerConfig {
    ServerConfig {
        addr: ([127, 0, 0, 1], 0).into(),
        data_dir: dir.0.clone(),
        ..ServerConfig::default()
    }
}

fn batch_body(trace: &str, first: u64, n: usize, extra: &str) -> String {
    let mut s = String::with_capacity(n * 320 + 16);
    s.push_str("{\"batch\":[");
    for i in 0..n as u64 {
        if i > 0 {
            s.push(',');
        }
        let id = first + i;
        s.push_str(&format!(
            "{{\"type\":\"span\",\"trace_id\":\"{trace}\",\"span_id\":\"s{id}\",\"kind\":\"compaction\",\
             \"name\":\"compact.token_estimate\",\"started_at\":\"2026-01-01T00:00:00.000Z\",\
             \"ended_at\":\"2026-01-01T00:00:00.042Z\",\"status\":\"ok\",\
             \"data\":{{\"t_est\":112345,\"max_tokens\":128000,\"usage_pct\":0.877{extra}}}}}"
        ));
    }
    s.push_str("]}");
    s
}

/// POSTs `body` (JSON) to the trace server's `url` (`…/ingest`); an answer
/// other than success is an error.
pub(crate) async fn post(client: &reqwest::Client, url: &str, body: String) -> Result<(), String> {
    let resp = crate::sidecar::post_json(client, url, body).await?;
    if resp.status().is_success() {
        Ok(())
    } else {
        Err(format!("ingest answered {}", resp.status()))
    }
}

async fn ingest(opts: &BenchOptions) -> Result<Value, String> {
    let dir = Scratch::new(opts, "ingest");
    let server = spawn(config(&dir)).await.map_err(|e| e.to_string())?;
    let (events, secs) = drive_ingest(&server.url(), opts).await?;
    let body = reqwest::get(format!("{}/metrics", server.url()))
        .await
        .map_err(|e| e.to_string())?
        .text()
        .await
        .map_err(|e| e.to_string())?;
    let commits = metric(&body, "ariadne_store_commits_total");
    let _ = server.shutdown().await;
    Ok(json!({
        "events": events,
        "seconds": secs,
        "events_per_sec": events as f64 / secs,
        "batch": opts.batch,
        "clients": opts.ingest_clients,
        "fsyncs": commits,
        "target_events_per_sec": 20_000,
    }))
}

/// Posts batches of `opts.batch` events to `{base}/ingest` from
/// `opts.ingest_clients` keep-alive clients for `opts.ingest_secs`; returns
/// the events acknowledged (2xx) and the seconds it took.
pub(crate) async fn drive_ingest(base: &str, opts: &BenchOptions) -> Result<(u64, f64), String> {
    let url = format!("{base}/ingest");
    let deadline = Instant::now() + Duration::from_secs_f64(opts.ingest_secs);
    let acked = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..opts.ingest_clients {
        let (url, acked, batch) = (url.clone(), acked.clone(), opts.batch);
        tasks.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut next = 0u64;
            while Instant::now() < deadline {
                post(
                    &client,
                    &url,
                    batch_body(&format!("bench-{c}"), next, batch, ""),
                )
                .await?;
                next += batch as u64;
                acked.fetch_add(batch as u64, Ordering::Relaxed);
            }
            Ok::<_, String>(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    Ok((acked.load(Ordering::Relaxed), start.elapsed().as_secs_f64()))
}

fn metric(body: &str, name: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

async fn sse_latency(opts: &BenchOptions) -> Result<Value, String> {
    let dir = Scratch::new(opts, "latency");
    let server = spawn(config(&dir)).await.map_err(|e| e.to_string())?;
    let base = Instant::now();
    let done = Arc::new(AtomicBool::new(false));
    let mut subs = Vec::new();
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<()>(opts.subscribers.max(1));
    for _ in 0..opts.subscribers {
        let (url, done, ready) = (
            format!("{}/events", server.url()),
            done.clone(),
            ready_tx.clone(),
        );
        subs.push(tokio::spawn(async move {
            let mut resp = reqwest::get(url).await.map_err(|e| e.to_string())?;
            let mut lat_us: Vec<u64> = Vec::new();
            let mut pending = String::new();
            let mut signalled = false;
            loop {
                let chunk = tokio::time::timeout(Duration::from_millis(500), resp.chunk()).await;
                let chunk = match chunk {
                    Ok(Ok(Some(c))) => c,
                    Ok(Ok(None)) | Ok(Err(_)) => break,
                    Err(_) if done.load(Ordering::Relaxed) => break,
                    Err(_) => continue,
                };
                let now = base.elapsed().as_micros() as u64;
                pending.push_str(&String::from_utf8_lossy(&chunk));
                let Some(end) = pending.rfind("\n\n") else {
                    continue;
                };
                for msg in pending[..end].split("\n\n") {
                    if !signalled && msg.contains("\"connected\"") {
                        signalled = true;
                        let _ = ready.send(()).await;
                    }
                    if let Some(i) = msg.find("\"sent_us\":") {
                        let digits: String = msg[i + 10..]
                            .chars()
                            .take_while(char::is_ascii_digit)
                            .collect();
                        if let Ok(sent) = digits.parse::<u64>() {
                            lat_us.push(now.saturating_sub(sent));
                        }
                    }
                }
                pending.drain(..end + 2);
            }
            Ok::<_, String>(lat_us)
        }));
    }
    drop(ready_tx);
    for _ in 0..opts.subscribers {
        if ready_rx.recv().await.is_none() {
            break;
        }
    }
    let url = format!("{}/ingest", server.url());
    let client = reqwest::Client::new();
    // 200 ticks a second, each publishing rate/200 events in one request.
    let per_tick = (opts.rate / 200).max(1) as usize;
    let mut tick = tokio::time::interval(Duration::from_millis(5));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let end = Instant::now() + Duration::from_secs_f64(opts.latency_secs);
    let mut sent = 0u64;
    let mut inflight = tokio::task::JoinSet::new();
    while Instant::now() < end {
        tick.tick().await;
        let stamp = base.elapsed().as_micros() as u64;
        let body = batch_body("latency", sent, per_tick, &format!(",\"sent_us\":{stamp}"));
        let (client, url) = (client.clone(), url.clone());
        inflight.spawn(async move { post(&client, &url, body).await });
        sent += per_tick as u64;
    }
    while let Some(r) = inflight.join_next().await {
        r.map_err(|e| e.to_string())??;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    done.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for s in subs {
        all.extend(s.await.map_err(|e| e.to_string())??);
    }
    let _ = server.shutdown().await;
    all.sort_unstable();
    let pct = |p: f64| -> f64 {
        if all.is_empty() {
            return f64::NAN;
        }
        let idx = ((all.len() as f64 - 1.0) * p).round() as usize;
        all[idx] as f64 / 1000.0
    };
    Ok(json!({
        "subscribers": opts.subscribers,
        "events_sent": sent,
        "deliveries": all.len(),
        "expected_deliveries": sent * opts.subscribers as u64,
        "rate_per_sec": opts.rate,
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
        "max_ms": pct(1.0),
        "target_p99_ms": 50,
    }))
}

/// Resident set size of this process in KiB, from `/proc/self/status`.
pub(crate) fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

async fn rss(opts: &BenchOptions) -> Result<Value, String> {
    let dir = Scratch::new(opts, "rss");
    let cfg = config(&dir);
    let retention = cfg.retention.clone();
    let server = spawn(cfg).await.map_err(|e| e.to_string())?;
    let before = rss_kib();
    let url = format!("{}/ingest", server.url());
    let start = Instant::now();
    let clients = opts.ingest_clients.max(1) as u64;
    let per_client = opts.rss_events.div_ceil(clients);
    let batch = opts.batch.max(1) as u64;
    let mut tasks = Vec::new();
    for c in 0..clients {
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut n = 0;
            while n < per_client {
                let k = batch.min(per_client - n);
                post(
                    &client,
                    &url,
                    batch_body(&format!("rss-{c}-{}", n / 10_000), n, k as usize, ""),
                )
                .await?;
                n += k;
            }
            Ok::<_, String>(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    let secs = start.elapsed().as_secs_f64();
    let after = rss_kib();
    let health: Value = reqwest::get(format!("{}/healthz", server.url()))
        .await
        .map_err(|e| e.to_string())?
        .text()
        .await
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))?;
    let _ = server.shutdown().await;
    Ok(json!({
        "events": per_client * clients,
        "seconds": secs,
        "retention_max_events": retention.max_events,
        "retained": health["events"]["count"],
        "rss_before_kib": before,
        "rss_after_kib": after,
        "note": "RSS of the whole process (server and its load generator)",
    }))
}
