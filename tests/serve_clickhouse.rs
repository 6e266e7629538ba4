//! Two `compact serve` replicas on one ClickHouse (a real server) serve one
//! timeline: every replica's `/api` and `/events` show every replica's
//! events, in the same order, and nothing acknowledged is lost across a
//! SIGKILL of either; a replica started later replays the same stream.
//!
//! The server is `COMPACT_TEST_CLICKHOUSE_URL`, or one `scripts/clickhouse.sh`
//! starts here; without Debian's `clickhouse-server` the tests skip with a
//! message (scripts/test.sh installs it). Each test uses a database of its own.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::oneshot;

/// Waits that only a hang would reach; never a measurement.
const HANG_GUARD: Duration = Duration::from_secs(60);

/// A ClickHouse for this test: the given one, or one started here (stopped on drop).
struct ClickHouse {
    url: String,
    started: Option<PathBuf>,
}

impl Drop for ClickHouse {
    fn drop(&mut self) {
        if let Some(dir) = self.started.take() {
            let _ = Command::new("bash")
                .arg(repo().join("scripts/clickhouse.sh"))
                .arg("stop")
                .arg(&dir)
                .status();
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn clickhouse() -> Option<ClickHouse> {
    if let Ok(url) = std::env::var("COMPACT_TEST_CLICKHOUSE_URL")
        && !url.is_empty()
    {
        return Some(ClickHouse { url, started: None });
    }
    let installed = ["/usr/sbin/clickhouse-server", "/usr/bin/clickhouse-server"]
        .iter()
        .any(|p| Path::new(p).exists());
    if !installed {
        eprintln!(
            "skipped: no ClickHouse (set COMPACT_TEST_CLICKHOUSE_URL, or apt-get install clickhouse-server; scripts/test.sh does)"
        );
        return None;
    }
    let dir = std::env::temp_dir().join(format!(
        "compact-test-clickhouse-{}-{}",
        std::process::id(),
        nanos()
    ));
    let out = Command::new("bash")
        .arg(repo().join("scripts/clickhouse.sh"))
        .arg("start")
        .arg(&dir)
        .output()
        .expect("run scripts/clickhouse.sh");
    assert!(
        out.status.success(),
        "scripts/clickhouse.sh start failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(ClickHouse {
        url: String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        started: Some(dir),
    })
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// One `compact serve` replica; SIGKILLed on drop.
struct Replica {
    child: Child,
    base: String,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn replica(ch: &ClickHouse, database: &str, dir: &Path, name: &str) -> Replica {
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_compact"))
        .args([
            "serve",
            "--addr",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
        ])
        .arg(dir.join(name))
        .env("COMPACT_SERVER_STORE_BACKEND", "clickhouse")
        .env("COMPACT_SERVER_STORE_CLICKHOUSE_URL", &ch.url)
        .env("COMPACT_SERVER_STORE_CLICKHOUSE_DATABASE", database)
        .env("COMPACT_STATE_STORE", "memory")
        .env_remove("COMPACT_INGEST_TOKEN")
        .env_remove("COMPACT_READ_TOKEN")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("compact serve starts");
    let r = Replica {
        child,
        base: format!("http://127.0.0.1:{port}"),
    };
    let client = reqwest::Client::new();
    // A hang guard: a debug build on a loaded machine may take a while.
    for _ in 0..4800 {
        if let Ok(resp) = client.get(format!("{}/healthz", r.base)).send().await
            && resp.status().is_success()
        {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{} never became healthy", r.base);
}

fn span(trace: &str, id: &str) -> Value {
    json!({"type":"span","trace_id":trace,"span_id":id,"name":"load","data":{"pad":"x".repeat(100)}})
}

async fn ingest(client: &reqwest::Client, base: &str, batch: &[Value]) -> bool {
    client
        .post(format!("{base}/ingest"))
        .header("content-type", "application/json")
        .body(json!({ "batch": batch }).to_string())
        .send()
        .await
        .is_ok_and(|r| r.status().as_u16() == 200)
}

/// `(id, span_id)` of every span a subscriber saw, in order.
type Seen = Arc<Mutex<Vec<(u64, String)>>>;

/// Follows `/events` (after `after`, when given) until `stop` fires.
async fn subscribe(base: &str, after: Option<u64>) -> (Seen, oneshot::Sender<()>) {
    let url = match after {
        Some(a) => format!("{base}/events?after={a}"),
        None => format!("{base}/events"),
    };
    let mut resp = reqwest::get(url).await.expect("subscribe");
    let seen: Seen = Arc::default();
    let (stop_tx, mut stop) = oneshot::channel::<()>();
    let out = seen.clone();
    tokio::spawn(async move {
        let mut pending = String::new();
        loop {
            let chunk = tokio::select! {
                c = resp.chunk() => c,
                _ = &mut stop => return,
            };
            let Ok(Some(chunk)) = chunk else { return };
            pending.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = pending.find("\n\n") {
                let msg: String = pending.drain(..end + 2).collect();
                let id = msg
                    .lines()
                    .find_map(|l| l.strip_prefix("id: "))
                    .and_then(|i| i.trim().parse::<u64>().ok());
                let data = msg.lines().find_map(|l| l.strip_prefix("data: "));
                if let (Some(id), Some(data)) = (id, data)
                    && let Ok(ev) = serde_json::from_str::<Value>(data)
                    && ev["type"] == "span"
                {
                    let span_id = ev["span_id"].as_str().unwrap_or_default().to_owned();
                    out.lock().unwrap().push((id, span_id));
                }
            }
        }
    });
    (seen, stop_tx)
}

async fn wait_for(seen: &Seen, n: usize) {
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    while seen.lock().unwrap().len() < n && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every span id of `trace` that `/api/traces/{trace}` serves.
async fn api_span_ids(client: &reqwest::Client, base: &str, trace: &str) -> HashSet<String> {
    let t: Value = client
        .get(format!("{base}/api/traces/{trace}"))
        .send()
        .await
        .expect("api")
        .json()
        .await
        .expect("json");
    t["spans"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s["span_id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_serve_one_timeline_in_one_order() {
    let Some(ch) = clickhouse() else { return };
    let db = format!("t{}_{}", std::process::id(), nanos() % 1_000_000_000);
    let dir = tempfile::tempdir().expect("tempdir");
    let client = reqwest::Client::new();
    let a = replica(&ch, &db, dir.path(), "a").await;
    let b = replica(&ch, &db, dir.path(), "b").await;
    let (seen_a, stop_a) = subscribe(&a.base, None).await;
    let (seen_b, stop_b) = subscribe(&b.base, None).await;

    // Two writers, one per replica, at the same time.
    let mut sent = HashSet::new();
    let mut writers = Vec::new();
    for (w, base) in [(0, a.base.clone()), (1, b.base.clone())] {
        let client = client.clone();
        writers.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for k in 0..20 {
                let batch: Vec<Value> = (0..10)
                    .map(|i| span(&format!("w{w}"), &format!("w{w}-{k}-{i}")))
                    .collect();
                assert!(ingest(&client, &base, &batch).await, "ingest to {base}");
                ids.extend(
                    batch
                        .iter()
                        .map(|s| s["span_id"].as_str().unwrap().to_owned()),
                );
            }
            ids
        }));
    }
    for w in writers {
        sent.extend(w.await.expect("writer"));
    }
    assert_eq!(sent.len(), 400);

    // Both replicas serve both writers' events (the other replica's last
    // ones may take a poll to arrive) ...
    for base in [&a.base, &b.base] {
        let deadline = tokio::time::Instant::now() + HANG_GUARD;
        loop {
            let mut all = api_span_ids(&client, base, "w0").await;
            all.extend(api_span_ids(&client, base, "w1").await);
            if all == sent || tokio::time::Instant::now() > deadline {
                assert_eq!(all, sent, "{base} serves every replica's events");
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // ... and both streams carry all of them, in one order, ids rising.
    wait_for(&seen_a, 400).await;
    wait_for(&seen_b, 400).await;
    let _ = (stop_a.send(()), stop_b.send(()));
    let (sa, sb) = (
        seen_a.lock().unwrap().clone(),
        seen_b.lock().unwrap().clone(),
    );
    assert_eq!(sa.len(), 400, "replica a's stream");
    assert_eq!(
        sa, sb,
        "both replicas stream the same events in the same order"
    );
    assert!(sa.windows(2).all(|w| w[0].0 < w[1].0), "ids rise");

    // A subscriber of b that reconnects with a's Last-Event-ID gets the rest.
    let cut = sa[199].0;
    let (replay, stop) = subscribe(&b.base, Some(cut)).await;
    wait_for(&replay, 200).await;
    let _ = stop.send(());
    assert_eq!(replay.lock().unwrap().as_slice(), &sa[200..]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sigkilled_replica_loses_nothing_acknowledged() {
    let Some(ch) = clickhouse() else { return };
    let db = format!("k{}_{}", std::process::id(), nanos() % 1_000_000_000);
    let dir = tempfile::tempdir().expect("tempdir");
    let client = reqwest::Client::new();
    let a = replica(&ch, &db, dir.path(), "a").await;
    let mut b = replica(&ch, &db, dir.path(), "b").await;
    let (seen_a, stop_a) = subscribe(&a.base, None).await;

    // Writers on both; b is SIGKILLed while they run.
    let acked: Arc<Mutex<HashSet<String>>> = Arc::default();
    let mut writers = Vec::new();
    for (w, base) in [(0, a.base.clone()), (1, b.base.clone())] {
        let (client, acked) = (client.clone(), acked.clone());
        writers.push(tokio::spawn(async move {
            for k in 0..60 {
                let batch: Vec<Value> = (0..5)
                    .map(|i| span("load", &format!("w{w}-{k}-{i}")))
                    .collect();
                if !ingest(&client, &base, &batch).await {
                    // The replica died under us: not acknowledged.
                    return;
                }
                acked.lock().unwrap().extend(
                    batch
                        .iter()
                        .map(|s| s["span_id"].as_str().unwrap().to_owned()),
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _ = b.child.kill();
    let _ = b.child.wait();
    for w in writers {
        w.await.expect("writer");
    }
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() >= 300,
        "a kept ingesting ({} acked)",
        acked.len()
    );

    // Everything acknowledged, by either replica, is served by a and reached
    // its live stream (after the dead replica stopped being waited on).
    // The dead replica is waited on until its newest row is 12.5 s old.
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    let served = loop {
        let served = api_span_ids(&client, &a.base, "load").await;
        if acked.is_subset(&served) || tokio::time::Instant::now() > deadline {
            break served;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut missing: Vec<&String> = acked.difference(&served).collect();
    missing.sort();
    assert!(
        missing.is_empty(),
        "a serves every acknowledged event; missing {} of {}: {:?}",
        missing.len(),
        acked.len(),
        &missing[..missing.len().min(12)]
    );
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    loop {
        let streamed: HashSet<String> = seen_a
            .lock()
            .unwrap()
            .iter()
            .map(|(_, s)| s.clone())
            .collect();
        if acked.is_subset(&streamed) || tokio::time::Instant::now() > deadline {
            assert!(
                acked.is_subset(&streamed),
                "a's stream has every acknowledged event"
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = stop_a.send(());

    // A replica started after the kill replays the same stream from the store.
    let c = replica(&ch, &db, dir.path(), "c").await;
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    let served_c = loop {
        let got = api_span_ids(&client, &c.base, "load").await;
        if got == served || tokio::time::Instant::now() > deadline {
            break got;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(served_c, served, "a new replica serves the same events");
    let streamed_a = seen_a.lock().unwrap().clone();
    let (replay, stop) = subscribe(&c.base, Some(0)).await;
    wait_for(&replay, streamed_a.len()).await;
    let _ = stop.send(());
    let replay = replay.lock().unwrap().clone();
    assert_eq!(
        &replay[..streamed_a.len()],
        streamed_a.as_slice(),
        "the replay is a's live stream, in its order"
    );
}
