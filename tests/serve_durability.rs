//! `compact serve` is SIGKILLed while clients ingest; after a restart on
//! the same data directory every event that got a 200 is served, and
//! nothing unreadable is.

mod support;

use std::collections::HashSet;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use support::{free_port, serve_command};

fn start(dir: &std::path::Path, port: u16) -> Child {
    serve_command(dir, port)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("compact serve starts")
}

async fn wait_healthy(client: &reqwest::Client, base: &str) {
    // A hang guard only (2 minutes): a debug build on a loaded machine may
    // take a while to start.
    for _ in 0..4800 {
        if let Ok(r) = client.get(format!("{base}/healthz")).send().await
            && r.status().is_success()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("server did not become healthy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_mid_load_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let mut child = start(dir.path(), port);
    wait_healthy(&client, &base).await;

    let acked: Arc<Mutex<HashSet<String>>> = Arc::default();
    let mut writers = Vec::new();
    for w in 0..4 {
        let (client, base, acked) = (client.clone(), base.clone(), acked.clone());
        writers.push(tokio::spawn(async move {
            for b in 0.. {
                let ids: Vec<String> = (0..25).map(|i| format!("w{w}-b{b}-{i}")).collect();
                let batch: Vec<Value> = ids
                    .iter()
                    .map(|id| {
                        json!({"type":"span","trace_id":format!("writer-{w}"),"span_id":id,
                        "name":"load","data":{"pad":"x".repeat(200)}})
                    })
                    .collect();
                let resp = client
                    .post(format!("{base}/ingest"))
                    .header("content-type", "application/json")
                    .body(json!({ "batch": batch }).to_string())
                    .send()
                    .await;
                match resp {
                    Ok(r) if r.status().as_u16() == 200 => acked.lock().unwrap().extend(ids),
                    // The server died under us: this batch was not acknowledged.
                    _ => return,
                }
            }
        }));
    }
    // Kill while the writers are mid-flight.
    while acked.lock().unwrap().len() < 3000 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    for w in writers {
        let _ = w.await;
    }
    let acked = acked.lock().unwrap().clone();

    let mut child = start(dir.path(), port);
    wait_healthy(&client, &base).await;
    let mut served = HashSet::new();
    for w in 0..4 {
        let resp = client
            .get(format!("{base}/api/traces/writer-{w}"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        let t: Value = serde_json::from_str(&resp.text().await.unwrap()).expect("valid JSON");
        for sp in t["spans"].as_array().unwrap() {
            // Whole records only: every served span is exactly what was sent.
            assert_eq!(sp["name"], "load");
            assert_eq!(sp["data"]["pad"].as_str().map(str::len), Some(200));
            served.insert(sp["span_id"].as_str().unwrap().to_owned());
        }
    }
    let lost: Vec<_> = acked.difference(&served).take(5).collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged events lost, e.g. {lost:?}",
        acked.len() - served.len().min(acked.len())
    );
    let _ = child.kill();
    let _ = child.wait();
}
