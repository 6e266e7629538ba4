//! The store across restarts: acknowledged events survive, a torn last
//! write is cut and never served, retention bounds what is kept.

mod common;

use std::fs::OpenOptions;

use common::{TestServer, WAIT, batch, span};
use serde_json::json;

fn segments(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn events_and_ids_survive_a_restart() {
    let mut s = TestServer::start().await;
    assert_eq!(
        s.post(
            "/ingest",
            &json!({"type":"trace","trace_id":"t","name":"agent"})
        )
        .await
        .0,
        200
    );
    assert_eq!(s.post("/ingest", &batch("t", 0..50)).await.0, 200);
    s.restart().await;
    let (_, t) = s.get("/api/traces/t").await;
    assert_eq!(t["trace"]["name"], "agent");
    assert_eq!(t["spans"].as_array().unwrap().len(), 50);
    assert_eq!(t["spans"][49]["seq"], 51);
    // New events continue the sequence; replay works across the restart.
    assert_eq!(s.post("/ingest", &span("t", 50)).await.0, 200);
    let mut sse = s.subscribe("", Some(50)).await;
    sse.next_data(WAIT).await.unwrap();
    assert_eq!(sse.next_data(WAIT).await.unwrap().0, Some(51));
    assert_eq!(sse.next_data(WAIT).await.unwrap().0, Some(52));
}

#[tokio::test]
async fn a_torn_last_write_is_cut_and_never_served() {
    let mut s = TestServer::start().await;
    assert_eq!(s.post("/ingest", &batch("t", 0..10)).await.0, 200);
    assert_eq!(s.post("/ingest", &span("t", 10)).await.0, 200);
    if let Some(server) = s.server.take() {
        server.shutdown().await.unwrap();
    }
    // Cut into the last record, as a crash mid-write would leave it.
    let seg = segments(s.dir.path()).pop().unwrap();
    let len = std::fs::metadata(&seg).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(&seg)
        .unwrap()
        .set_len(len - 7)
        .unwrap();
    s.restart().await;
    let (_, t) = s.get("/api/traces/t").await;
    let spans = t["spans"].as_array().unwrap();
    assert_eq!(
        spans.len(),
        10,
        "the torn record is gone, the whole ones stay"
    );
    for (i, sp) in spans.iter().enumerate() {
        assert_eq!(sp["data"]["i"], i);
    }
    let (_, m) = s.get("/metrics").await;
    assert!(
        m.as_str()
            .unwrap()
            .lines()
            .any(|l| l.starts_with("ariadne_store_recovered_torn_bytes ") && !l.ends_with(" 0"))
    );
    // Appends continue after the cut, and survive another restart.
    assert_eq!(s.post("/ingest", &span("t", 99)).await.0, 200);
    s.restart().await;
    let (_, t) = s.get("/api/traces/t").await;
    assert_eq!(t["spans"].as_array().unwrap().len(), 11);
    assert_eq!(t["spans"][10]["data"]["i"], 99);
}

#[tokio::test]
async fn garbage_appended_to_the_log_is_never_served() {
    let mut s = TestServer::start().await;
    assert_eq!(s.post("/ingest", &batch("t", 0..3)).await.0, 200);
    if let Some(server) = s.server.take() {
        server.shutdown().await.unwrap();
    }
    let seg = segments(s.dir.path()).pop().unwrap();
    let mut bytes = std::fs::read(&seg).unwrap();
    // A plausible header (length 40) followed by bytes whose CRC cannot match.
    bytes.extend_from_slice(&40u32.to_le_bytes());
    bytes.extend_from_slice(&[0xAB; 44]);
    std::fs::write(&seg, bytes).unwrap();
    s.restart().await;
    assert_eq!(s.get("/healthz").await.1["events"]["count"], 3);
}

#[tokio::test]
async fn retention_bounds_memory_and_disk() {
    let mut s = TestServer::start_with(|c| {
        c.retention.max_events = 100;
        c.store.segment_bytes = 4096;
    })
    .await;
    for chunk in 0..10 {
        assert_eq!(
            s.post("/ingest", &batch("t", chunk * 50..chunk * 50 + 50))
                .await
                .0,
            200
        );
    }
    let (_, h) = s.get("/healthz").await;
    assert_eq!(h["events"]["count"], 100);
    assert_eq!(h["events"]["capacity"], 100);
    let (_, t) = s.get("/api/traces/t").await;
    assert_eq!(t["spans"][0]["data"]["i"], 400, "the oldest went first");
    // Old segments were deleted: what is on disk is about the retained events.
    let disk: u64 = segments(s.dir.path())
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    assert!(disk < 100 * 400 + 2 * 4096 + 50 * 400, "disk {disk}");
    // A restart with the same retention comes back with the same window.
    if let Some(server) = s.server.take() {
        server.shutdown().await.unwrap();
    }
    let mut cfg = common::config(s.dir.path());
    cfg.retention.max_events = 100;
    let server = ariadne_server::spawn(cfg).await.unwrap();
    s.url = server.url();
    s.server = Some(server);
    let (_, t) = s.get("/api/traces/t").await;
    assert_eq!(t["spans"].as_array().unwrap().len(), 100);
    assert_eq!(t["spans"][0]["data"]["i"], 400);
}
