//! `replicas`, run by `compact bench server` when `COMPACT_BENCH_CLICKHOUSE_URL`
//! names a ClickHouse it may write to (e.g. one `scripts/clickhouse.sh
//! start DIR` started): `compact serve` processes sharing that ClickHouse
//! (`server.store.backend: clickhouse`, a fresh database per run).
//!
//! - `ingest`: durable ingest (batches of 100 events, acknowledged = the
//!   insert was acknowledged) into 1 replica with 8 clients, then into 2
//!   replicas with 4 clients each at the same time: events/s and the ratio.
//! - `visibility`: one event every 20 ms posted to replica B, seen by an
//!   `/events` subscriber of replica A (across replicas), and posted to A
//!   (same replica): send → arrival p50/p99/max. Both on one machine, so one
//!   clock; the client stamps the send time into the event.

use crate::visibility::read_events;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::server::{BenchOptions, drive_ingest};
use crate::sidecar::{Sidecar, compact_binary, start_serve_with};

/// The ClickHouse to use; without it the measurement is skipped.
const URL_VAR: &str = "COMPACT_BENCH_CLICKHOUSE_URL";
/// Events posted for the visibility measurement, one every [`GAP`].
const VISIBLE_EVENTS: usize = 250;
const GAP: Duration = Duration::from_millis(20);

fn wall_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// `null` (skipped) without `COMPACT_BENCH_CLICKHOUSE_URL`.
pub(crate) async fn run(opts: &BenchOptions) -> Result<Value, String> {
    let Some(url) = std::env::var(URL_VAR).ok().filter(|u| !u.is_empty()) else {
        return Ok(json!({"skipped": format!("set {URL_VAR} to a ClickHouse HTTP URL")}));
    };
    let bin = compact_binary()?;
    let db = format!("bench_{}_{}", std::process::id(), wall_us() % 1_000_000_000);
    let start = |name: &'static str, db: String| {
        let (bin, url) = (bin.clone(), url.clone());
        async move {
            start_serve_with(
                &bin,
                "memory",
                None,
                &[
                    ("COMPACT_SERVER_STORE_BACKEND", "clickhouse"),
                    ("COMPACT_SERVER_STORE_CLICKHOUSE_URL", &url),
                    ("COMPACT_SERVER_STORE_CLICKHOUSE_DATABASE", &db),
                    ("COMPACT_SERVER_STORE_REPLICA", name),
                ],
            )
            .await
        }
    };

    // Visibility first, on idle replicas (after an ingest run each replica
    // is still reading the backlog into its index for a while).
    let vis_a = start("vis-a", format!("{db}_vis")).await?;
    let vis_b = start("vis-b", format!("{db}_vis")).await?;
    let across = visibility(&vis_a, &vis_b).await?;
    let same = visibility(&vis_a, &vis_a).await?;
    drop((vis_a, vis_b));

    // One replica, 8 clients.
    let one = start("one", format!("{db}_one")).await?;
    let (events, secs) = drive_ingest(&one.base, opts).await?;
    let one_rate = events as f64 / secs;
    drop(one);

    // Two replicas, 4 clients each, at once.
    let a = start("a", format!("{db}_two")).await?;
    let b = start("b", format!("{db}_two")).await?;
    let half = BenchOptions {
        ingest_clients: (opts.ingest_clients / 2).max(1),
        ..opts.clone()
    };
    let (ra, rb) = tokio::join!(drive_ingest(&a.base, &half), drive_ingest(&b.base, &half));
    let (ea, sa) = ra?;
    let (eb, sb) = rb?;
    let two_rate = ea as f64 / sa + eb as f64 / sb;

    Ok(json!({
        "ingest": {
            "one_replica_events_per_sec": one_rate.round(),
            "two_replicas_events_per_sec": two_rate.round(),
            "ratio": ((two_rate / one_rate) * 100.0).round() / 100.0,
            "batch": opts.batch,
            "clients": opts.ingest_clients,
            "seconds": opts.ingest_secs,
        },
        "visibility_across_replicas": across,
        "visibility_same_replica": same,
        "database": db,
        "note": "compact serve replicas on one ClickHouse (server.store.backend: clickhouse); a 200 = the insert was acknowledged; visibility = posted to one replica -> parsed by an /events subscriber of the other (or the same)",
    }))
}

/// Posts [`VISIBLE_EVENTS`] single events to `to`, timed by a subscriber of `from`.
async fn visibility(from: &Sidecar, to: &Sidecar) -> Result<Value, String> {
    let run = format!("vis-{}", wall_us());
    let (ready_tx, ready_rx) = oneshot::channel();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let seen = Arc::new(AtomicU64::new(0));
    let viewer = crate::visibility::own_runtime("bench-replica-viewer", 1)?;
    let subscriber = viewer.spawn(subscribe(
        format!("{}/events", from.base),
        run.clone(),
        ready_tx,
        stop_rx,
        seen.clone(),
    ));
    ready_rx
        .await
        .map_err(|_| "the SSE subscriber never connected".to_owned())?;
    let client = reqwest::Client::new();
    let url = format!("{}/ingest", to.base);
    let mut next = Instant::now();
    for i in 0..VISIBLE_EVENTS {
        let body = json!({"type":"span","trace_id":run,"span_id":format!("v{i}"),
            "name":"bench.visibility","data":{"sent_us": wall_us()}});
        crate::server::post(&client, &url, body.to_string()).await?;
        next += GAP;
        tokio::time::sleep_until(next.into()).await;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while (seen.load(Ordering::Relaxed) as usize) < VISIBLE_EVENTS && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _ = stop_tx.send(());
    let mut lat = subscriber.await.map_err(|e| e.to_string())??;
    viewer.shutdown_background();
    lat.sort_by(f64::total_cmp);
    let pct = |p: f64| -> Option<f64> {
        let idx = ((lat.len().checked_sub(1)?) as f64 * p).round() as usize;
        Some((lat[idx] * 100.0).round() / 100.0)
    };
    Ok(json!({
        "events": VISIBLE_EVENTS,
        "seen": lat.len(),
        "p50_ms": pct(0.5),
        "p99_ms": pct(0.99),
        "max_ms": pct(1.0),
    }))
}

async fn subscribe(
    url: String,
    run: String,
    ready: oneshot::Sender<()>,
    stop: oneshot::Receiver<()>,
    seen: Arc<AtomicU64>,
) -> Result<Vec<f64>, String> {
    let mut lat = Vec::new();
    read_events(
        url,
        ready,
        stop,
        wall_us,
        |_| true,
        |ev, now| {
            if ev["trace_id"] == run.as_str()
                && let Some(sent) = ev["data"]["sent_us"].as_u64()
            {
                lat.push(now.saturating_sub(sent) as f64 / 1000.0);
                seen.fetch_add(1, Ordering::Relaxed);
            }
        },
    )
    .await?;
    Ok(lat)
}
