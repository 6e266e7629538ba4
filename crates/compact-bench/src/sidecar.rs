//! `compact bench sidecar`: `POST /v1/preflight` of a real `compact serve`
//! over loopback, for each session store (memory, SQLite, and PostgreSQL
//! when `COMPACT_BENCH_POSTGRES_URL` names a database it may write to).
//!
//! The suite measures the product as users run it, so it spawns the
//! `compact` binary rather than linking the service: it looks for `compact`
//! next to this binary (`compact bench` runs `compact-bench` from its own
//! directory, and cargo puts both in one target directory);
//! `COMPACT_BIN` overrides that.
//!
//! - `latency`: one session whose raw history (about 128k tokens, the
//!   preflight suite's) is resent whole every turn, one message longer each
//!   time, as an agent without its own state does (target p50 < 5 ms).
//!   Building the body is not timed; the request and reading the answer are.
//! - `concurrent`: 8 clients, each running sessions back to back (a fresh
//!   session id, [`TURNS_PER_SESSION`] preflights of the same resent
//!   history, the first one compacting from scratch): sessions/s and
//!   preflights/s.
//! - `store_cost_p50_us`: SQLite's latency p50 minus memory's, the price of
//!   durable session state per preflight; `store_costs_p50_us` the same for
//!   every durable store measured.
//!
//! Session ids carry a per-run nonce, so a PostgreSQL database used before
//! holds nothing a run would continue; the run deletes its sessions at the
//! end (untimed).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::measure_with;
use crate::workload::history;

/// Preflights in one session of the concurrent benchmark.
const TURNS_PER_SESSION: usize = 10;
/// Clients of the concurrent benchmark.
const CLIENTS: usize = 8;
/// The database of the PostgreSQL store, if one is to be measured.
const POSTGRES_URL_VAR: &str = "COMPACT_BENCH_POSTGRES_URL";

/// `compact bench sidecar`.
pub(crate) fn run(quick: bool) -> Value {
    let bin = match compact_binary() {
        Ok(bin) => bin,
        Err(e) => return json!({ "error": e }),
    };
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => return json!({"error": format!("cannot build a tokio runtime: {e}")}),
    };
    let base: Arc<Vec<Value>> = Arc::new(history(100, 3000).iter().map(|m| m.to_value()).collect());
    let postgres = std::env::var(POSTGRES_URL_VAR)
        .ok()
        .filter(|u| !u.is_empty());
    let mut stores = serde_json::Map::new();
    for store in ["memory", "sqlite", "postgres"] {
        let url = match (store, &postgres) {
            ("postgres", None) => {
                stores.insert(
                    store.into(),
                    json!({"skipped": format!("set {POSTGRES_URL_VAR} to a database the bench may write to")}),
                );
                continue;
            }
            ("postgres", Some(url)) => Some(url.as_str()),
            _ => None,
        };
        let report = rt
            .block_on(one_store(&bin, store, url, &base, quick))
            .unwrap_or_else(|e| json!({ "error": e }));
        stores.insert(store.into(), report);
    }
    let p50 = |s: &str| stores[s]["latency"]["stats"]["p50_us"].as_f64();
    let cost = |s: &str| match (p50(s), p50("memory")) {
        (Some(durable), Some(memory)) => json!(((durable - memory) * 10.0).round() / 10.0),
        _ => Value::Null,
    };
    json!({
        "binary": bin.display().to_string(),
        "history_messages": base.len(),
        "stores": stores,
        "store_cost_p50_us": cost("sqlite"),
        "store_costs_p50_us": {"sqlite": cost("sqlite"), "postgres": cost("postgres")},
    })
}

/// The `compact` binary to spawn.
pub(crate) fn compact_binary() -> Result<PathBuf, String> {
    sibling_binary(
        "COMPACT_BIN",
        "compact",
        "the sidecar suite spawns the `compact` binary: build it (`cargo build --release \
         --bin compact`) or set COMPACT_BIN",
    )
}

/// The binary `stem` to spawn: `$env` when set, else the one built beside
/// this executable; `missing` is the error when there is none.
pub(crate) fn sibling_binary(env: &str, stem: &str, missing: &str) -> Result<PathBuf, String> {
    if let Some(bin) = std::env::var_os(env) {
        return Ok(bin.into());
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    // target/<profile>/compact-bench → target/<profile>/<stem> (one level
    // more for a test or an example under deps/ or examples/).
    let name = format!("{stem}{}", std::env::consts::EXE_SUFFIX);
    exe.ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join(&name))
        .find(|c| c.is_file())
        .ok_or_else(|| missing.to_owned())
}

/// A spawned `compact serve`, killed on drop, with its scratch directory.
pub(crate) struct Sidecar {
    child: Child,
    /// Its data directory (removed on drop).
    pub(crate) dir: PathBuf,
    /// `http://127.0.0.1:PORT`.
    pub(crate) base: String,
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts `compact serve` on a free loopback port with a fresh data
/// directory and the session store `store`; returns once it is healthy.
pub(crate) async fn start_serve(
    bin: &Path,
    store: &str,
    url: Option<&str>,
) -> Result<Sidecar, String> {
    start_serve_with(bin, store, url, &[]).await
}

/// [`start_serve`] with extra environment variables (the event store's).
pub(crate) async fn start_serve_with(
    bin: &Path,
    store: &str,
    url: Option<&str>,
    env: &[(&str, &str)],
) -> Result<Sidecar, String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| e.to_string())?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!(
        "compact-bench-sidecar-{store}-{}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let mut cmd = Command::new(bin);
    if let Some(url) = url {
        cmd.env("COMPACT_STATE_URL", url);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd
        .args([
            "serve",
            "--addr",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
        ])
        .arg(&dir)
        .env("COMPACT_STATE_STORE", store)
        .env("HOME", &dir)
        .env_remove("COMPACT_STATE_PATH")
        .env_remove("COMPACT_INGEST_TOKEN")
        .env_remove("COMPACT_READ_TOKEN")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot spawn {}: {e}", bin.display()))?;
    let sidecar = Sidecar {
        child,
        dir,
        base: format!("http://127.0.0.1:{port}"),
    };
    let client = reqwest::Client::new();
    // PostgreSQL may take a moment to accept the first connection.
    for _ in 0..1200 {
        if let Ok(r) = client.get(format!("{}/healthz", sidecar.base)).send().await
            && r.status().is_success()
        {
            return Ok(sidecar);
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    Err(format!("{} never became healthy", sidecar.base))
}

/// The body of one turn: the raw history plus `extra` user messages.
fn body(session: &str, base: &[Value], extra: usize) -> Vec<u8> {
    let mut input = base.to_vec();
    input
        .extend((0..extra).map(|k| json!({"role": "user", "content": format!("raw message {k}")})));
    serde_json::to_vec(&json!({"session_id": session, "messages": input})).unwrap_or_default()
}

async fn preflight(client: &reqwest::Client, url: &str, body: Vec<u8>) -> Result<Value, String> {
    let r = post_json(client, url, body).await?;
    let status = r.status();
    let bytes = r.bytes().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("preflight answered {status}"));
    }
    serde_json::from_slice(&bytes).map_err(|e| e.to_string())
}

/// POSTs `body` to `url` as JSON; the answer, whatever its status.
pub(crate) async fn post_json(
    client: &reqwest::Client,
    url: &str,
    body: impl Into<reqwest::Body>,
) -> Result<reqwest::Response, String> {
    client
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| e.to_string())
}

/// A prefix unique to this run, for session ids.
fn nonce() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("b{}-{nanos}", std::process::id())
}

async fn one_store(
    bin: &Path,
    store: &str,
    db: Option<&str>,
    base: &Arc<Vec<Value>>,
    quick: bool,
) -> Result<Value, String> {
    let sidecar = start_serve(bin, store, db).await?;
    let url = format!("{}/v1/preflight", sidecar.base);
    let client = reqwest::Client::new();
    let run = nonce();
    let latency_id = format!("{run}-latency");

    // The first turn compacts from scratch; it is reported, not in the stats.
    let t = Instant::now();
    let first = preflight(&client, &url, body(&latency_id, base, 1)).await?;
    let first_us = t.elapsed().as_micros();
    let report = &first["report"];

    let runs = if quick { 20 } else { 300 };
    let mut turn = 1;
    let mut failed = 0usize;
    let mut last = Value::Null;
    let stats = tokio::task::block_in_place(|| {
        let handle = tokio::runtime::Handle::current();
        measure_with(
            5,
            runs,
            || {
                turn += 1;
                body(&latency_id, base, turn)
            },
            |b| match handle.block_on(preflight(&client, &url, b)) {
                Ok(answer) => last = answer["report"].clone(),
                Err(_) => failed += 1,
            },
        )
    });
    let latency = json!({
        "stats": stats,
        "failed": failed,
        "first_turn_us": first_us,
        "tokens_before": report["tokens_before"],
        "tokens_after": report["tokens_after"],
        "last_continuation": last["continuation"],
        "last_tokens_before": last["tokens_before"],
    });
    let (concurrent, mut ids) = concurrent(&url, &run, base, if quick { 1.0 } else { 5.0 }).await?;
    ids.push(latency_id);
    // Untimed: leave a shared database as it was.
    for id in ids {
        let _ = client
            .delete(format!("{}/v1/sessions/{id}", sidecar.base))
            .send()
            .await;
    }
    Ok(json!({"latency": latency, "concurrent": concurrent}))
}

/// The concurrent benchmark; also returns the session ids it used.
async fn concurrent(
    url: &str,
    run: &str,
    base: &Arc<Vec<Value>>,
    secs: f64,
) -> Result<(Value, Vec<String>), String> {
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let (sessions, preflights) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let (url, base, run) = (url.to_owned(), base.clone(), run.to_owned());
        let (sessions, preflights) = (sessions.clone(), preflights.clone());
        tasks.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut n = 0;
            while Instant::now() < deadline {
                let id = format!("{run}-c{c}-s{n}");
                for turn in 1..=TURNS_PER_SESSION {
                    preflight(&client, &url, body(&id, &base, turn)).await?;
                    preflights.fetch_add(1, Ordering::Relaxed);
                }
                sessions.fetch_add(1, Ordering::Relaxed);
                n += 1;
            }
            Ok::<_, String>(n)
        }));
    }
    let mut ids = Vec::new();
    for (c, t) in tasks.into_iter().enumerate() {
        let n = t.await.map_err(|e| e.to_string())??;
        ids.extend((0..n).map(|k| format!("{run}-c{c}-s{k}")));
    }
    let elapsed = start.elapsed().as_secs_f64();
    let (s, p) = (
        sessions.load(Ordering::Relaxed),
        preflights.load(Ordering::Relaxed),
    );
    let rate = |n: u64| (n as f64 / elapsed * 10.0).round() / 10.0;
    let report = json!({
        "clients": CLIENTS,
        "turns_per_session": TURNS_PER_SESSION,
        "seconds": (elapsed * 100.0).round() / 100.0,
        "sessions": s,
        "sessions_per_s": rate(s),
        "preflights_per_s": rate(p),
    });
    Ok((report, ids))
}
