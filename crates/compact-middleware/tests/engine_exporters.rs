//! Exporter isolation (docs/design.md §12, invariant 8): an exporter that fails, blocks or
//! sleeps changes neither what `preflight` returns nor when it returns.
//! Asserted by behaviour, not by wall clock or scheduling: `preflight` has
//! returned while the blocked exporter still holds none of its events, every
//! result is identical to that of a manager without exporters, and the
//! dispatcher's counters account for every event. How many events a full
//! queue drops depends on when its worker thread runs, so no test asserts it.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use compact_middleware::config::{Config, Policy};
use compact_middleware::events::{Event, ExportError, Exporter};
use compact_middleware::model::{Format, Message, Request};
use compact_middleware::{BoxFuture, CompactManager, PreflightOutcome};
use serde_json::{Value, json};
use support::invariants::{Tracker, check_call};

#[derive(Debug)]
struct Failing;

impl Exporter for Failing {
    fn name(&self) -> &str {
        "failing"
    }
    fn export<'a>(&'a self, _batch: &'a [Event]) -> BoxFuture<'a, Result<(), ExportError>> {
        Box::pin(async { Err(ExportError::Other("collector is down".into())) })
    }
    fn flush(&self) -> BoxFuture<'_, Result<(), ExportError>> {
        Box::pin(async { Err(ExportError::Other("collector is down".into())) })
    }
}

#[derive(Debug)]
struct Panicking;

impl Exporter for Panicking {
    fn name(&self) -> &str {
        "panicking"
    }
    fn export<'a>(&'a self, _batch: &'a [Event]) -> BoxFuture<'a, Result<(), ExportError>> {
        Box::pin(async { panic!("exporter bug") })
    }
}

/// Holds every batch until the gate opens; records events only after that.
#[derive(Debug)]
struct Gated {
    gate: tokio::sync::watch::Sender<bool>,
    received: Mutex<Vec<Event>>,
}

impl Gated {
    fn new() -> Self {
        Self {
            gate: tokio::sync::watch::channel(false).0,
            received: Mutex::new(Vec::new()),
        }
    }
    fn received(&self) -> Vec<Event> {
        self.received.lock().unwrap().clone()
    }
}

impl Exporter for Gated {
    fn name(&self) -> &str {
        "gated"
    }
    fn export<'a>(&'a self, batch: &'a [Event]) -> BoxFuture<'a, Result<(), ExportError>> {
        Box::pin(async move {
            let mut rx = self.gate.subscribe();
            let _ = rx.wait_for(|open| *open).await;
            self.received.lock().unwrap().extend(batch.iter().cloned());
            Ok(())
        })
    }
}

/// Sleeps longer than any test runs before it records anything (the
/// dispatcher gives up on each call after its export timeout).
#[derive(Debug, Default)]
struct Sleepy {
    received: Mutex<Vec<Event>>,
}

impl Exporter for Sleepy {
    fn name(&self) -> &str {
        "sleepy"
    }
    fn export<'a>(&'a self, batch: &'a [Event]) -> BoxFuture<'a, Result<(), ExportError>> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            self.received.lock().unwrap().extend(batch.iter().cloned());
            Ok(())
        })
    }
}

fn config() -> Config {
    let mut c = Config {
        max_context_tokens: Some(4_000),
        policy: Policy {
            keep_recent_turns: 2,
            ..Policy::default()
        },
        ..Config::default()
    };
    c.telemetry.flush_interval_ms = 1;
    c.telemetry.batch_size = 1;
    c
}

/// Turn `t`, heavy enough that a few turns trigger every tier.
fn turn(t: usize) -> Vec<Message> {
    let id = format!("call_{t}");
    let rows: String = (0..120).map(|i| format!("row {i} ok; ")).collect();
    Request::from_value(
        json!([
            {"role": "user", "content": format!("Step {t}: ticket REL-{} must ship before Friday.", 100 + t)},
            {"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
              "function": {"name": "search", "arguments": format!("{{\"q\":\"REL-{}\"}}", 100 + t)}}]},
            {"role": "tool", "tool_call_id": id, "content": rows},
            {"role": "assistant", "content": format!("We decided to ship REL-{} behind a flag.", 100 + t)},
        ]),
        Format::Chat,
    )
    .unwrap()
    .messages
}

/// A session of `turns` calls (mode a); every result, reports without timings.
async fn session(m: &CompactManager, turns: usize) -> Vec<(Vec<Value>, Value)> {
    let mut tracker = Tracker::new();
    let mut ctx = vec![Message::system("You ship releases.")];
    let mut results = Vec::new();
    for t in 0..turns {
        ctx.extend(turn(t));
        let sent = ctx.clone();
        // A hang guard only: a preflight that waited on the blocked exporter
        // would never return.
        let r = tokio::time::timeout(HANG_GUARD, m.preflight("s", sent.clone()))
            .await
            .expect("preflight must not wait on an exporter");
        check_call(m, &mut tracker, &sent, &[], &r).unwrap();
        let o: PreflightOutcome = r.unwrap();
        let mut report = serde_json::to_value(&o.report).unwrap();
        report.as_object_mut().unwrap().remove("duration_us");
        results.push((o.messages.iter().map(Message::to_value).collect(), report));
        ctx = o.messages;
    }
    results
}

const TURNS: usize = 12;

/// Bounds waits that only a hang would exceed; never a measurement.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// Waits until the exporter at `lane` has settled every event the queue
/// accepted (delivered, failed or skipped for lag), and returns the counters
/// then. Polls a condition the dispatcher guarantees; the timeout is only a
/// hang guard.
async fn settled(m: &CompactManager, lane: usize) -> compact_middleware::events::DispatchStats {
    let wait = async {
        loop {
            let s = m.dispatcher().stats();
            let e = &s.exporters[lane];
            if e.exported + e.failed_events + e.lagged == s.emitted - s.dropped {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(HANG_GUARD, wait)
        .await
        .expect("the exporter settles every accepted event")
}

#[tokio::test]
async fn failing_panicking_and_blocked_exporters_change_nothing() {
    let plain = CompactManager::builder(config())
        .without_storage()
        .build()
        .unwrap();
    assert!(!plain.dispatcher().is_enabled());
    let expected = session(&plain, TURNS).await;
    assert!(
        expected
            .iter()
            .any(|(_, r)| r["summary_version"].is_number()),
        "the session compacts"
    );

    let gated = Arc::new(Gated::new());
    let sleepy = Arc::new(Sleepy::default());
    let m = CompactManager::builder(config())
        .exporter(Arc::new(Failing))
        .exporter(Arc::new(Panicking))
        .exporter(gated.clone())
        .exporter(sleepy.clone())
        .without_storage()
        .build()
        .unwrap();
    let got = session(&m, TURNS).await;
    // Every preflight has returned; the blocked and sleeping exporters have
    // not been able to take in a single event yet.
    assert!(gated.received().is_empty());
    assert!(sleepy.received.lock().unwrap().is_empty());
    assert_eq!(got, expected, "exporters changed a preflight result");

    // The events were emitted all along: once the gate opens they arrive.
    // (The queue holds 10 000 and the ring twice that, so the gated exporter
    // lags nothing; the only events it can miss are batches whose export
    // timed out, 5 s each, long before the gate opened.)
    gated.gate.send_replace(true);
    let stats = settled(&m, 2).await;
    assert_eq!(stats.dropped, 0, "{stats:?}");
    let names: Vec<String> = gated
        .received()
        .iter()
        .filter_map(|e| e.name().map(str::to_string))
        .collect();
    assert!(names.iter().any(|n| n == "compact.preflight"), "{names:?}");
    assert!(sleepy.received.lock().unwrap().is_empty());
}

#[tokio::test]
async fn an_exporter_that_never_returns_does_not_block_preflight() {
    // One exporter that never returns while the session runs, and the
    // smallest queue: emits beyond it are dropped and counted, never waited
    // for. How many are dropped depends on when the dispatcher's thread
    // runs; what is bounded does not.
    let gated = Arc::new(Gated::new());
    let mut c = config();
    c.telemetry.queue_capacity = 1;
    let (capacity, batch) = (c.telemetry.queue_capacity, c.telemetry.batch_size);
    let m = CompactManager::builder(c)
        .exporter(gated.clone())
        .without_storage()
        .build()
        .unwrap();
    let plain = CompactManager::builder(config())
        .without_storage()
        .build()
        .unwrap();
    let got = session(&m, TURNS).await;
    let expected = session(&plain, TURNS).await;
    assert_eq!(got, expected);
    assert!(gated.received().is_empty());

    // Every event was emitted (the disabled dispatcher counts them too).
    let stuck = m.dispatcher().stats();
    assert_eq!(stuck.emitted, plain.dispatcher().stats().emitted);
    assert_eq!(stuck.exported, 0);

    // Memory is bounded by the queue and the ring, not by what was
    // emitted: once the exporter returns, what the dispatcher still held
    // for it is at most the batch in its hands, the ring (2 * ceil(capacity
    // / batch) + 1 batches, which tokio may round up to twice that), the
    // worker's partial batch and the queue.
    let ring = 2 * (2 * capacity.div_ceil(batch) + 1);
    let bound = (batch + ring * batch + batch + capacity) as u64;
    assert!(
        stuck.emitted > bound,
        "the session emits more than the dispatcher may hold ({} <= {bound})",
        stuck.emitted
    );
    gated.gate.send_replace(true);
    let stats = settled(&m, 0).await;
    let lane = &stats.exporters[0];
    assert_eq!(lane.exported, gated.received().len() as u64);
    assert!(lane.exported <= bound, "{stats:?}");
    // Accounting: emitted = dropped + accepted, and every accepted event
    // was delivered, failed (an export timed out) or skipped for lag.
    assert_eq!(
        stats.emitted,
        stats.dropped + lane.exported + lane.failed_events + lane.lagged,
        "{stats:?}"
    );
    assert_eq!(stats.emitted, stuck.emitted);
}
