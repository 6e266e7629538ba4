//! Events: the Ariadne wire shape, span ids, the non-blocking dispatcher and
//! the console / jsonl exporters.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use compact_events::*;
use serde_json::{Value, json};

// ---------------------------------------------------------------- helpers

fn numbered(i: usize) -> Event {
    SpanBuilder::start("session-t", names::TOKEN_ESTIMATE)
        .kind(names::KIND_COMPACTION)
        .data("i", i)
        .finish(SpanStatus::Ok)
}

fn index_of(e: &Event) -> u64 {
    e.as_span()
        .and_then(|s| s.data.get("i"))
        .and_then(Value::as_u64)
        .unwrap_or(u64::MAX)
}

/// Bounds waits that only a hang would exceed; never a measurement.
const HANG_GUARD: Duration = Duration::from_secs(120);

fn wait_until(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    done()
}

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir()
        .join(format!("compact-events-test-{}", new_span_id()))
        .join("nested")
        .join(name)
}

fn opts(capacity: usize, batch_size: usize, flush_interval: Duration) -> DispatchOptions {
    DispatchOptions {
        capacity,
        batch_size,
        flush_interval,
        ..DispatchOptions::default()
    }
}

/// Fails every batch.
#[derive(Debug, Default)]
struct Failing {
    calls: AtomicUsize,
}

impl Exporter for Failing {
    fn name(&self) -> &str {
        "failing"
    }
    fn export<'a>(&'a self, _batch: &'a [Event]) -> BoxFuture<'a, Result<(), ExportError>> {
        Box::pin(async move {
            self.calls.fetch_add(1, Ordering::SeqCst);
            Err(ExportError::Rejected("503 Service Unavailable".into()))
        })
    }
}

/// Takes `delay` per batch and only then counts the events as received.
#[derive(Debug)]
struct Sleepy {
    delay: Duration,
    received: AtomicUsize,
}

impl Exporter for Sleepy {
    fn name(&self) -> &str {
        "sleepy"
    }
    fn export<'a>(&'a self, batch: &'a [Event]) -> BoxFuture<'a, Result<(), ExportError>> {
        Box::pin(async move {
            tokio::time::sleep(self.delay).await;
            self.received.fetch_add(batch.len(), Ordering::SeqCst);
            Ok(())
        })
    }
}

/// Holds every export until the gate opens, then records the batch.
#[derive(Debug)]
struct Gated {
    open: tokio::sync::watch::Sender<bool>,
    got: Mutex<Vec<u64>>,
}

impl Gated {
    fn new() -> Self {
        Gated {
            open: tokio::sync::watch::channel(false).0,
            got: Mutex::new(Vec::new()),
        }
    }
}

impl Exporter for Gated {
    fn name(&self) -> &str {
        "gated"
    }
    fn export<'a>(&'a self, batch: &'a [Event]) -> BoxFuture<'a, Result<(), ExportError>> {
        Box::pin(async move {
            let mut rx = self.open.subscribe();
            let _ = rx.wait_for(|open| *open).await;
            let mut got = self.got.lock().unwrap_or_else(|e| e.into_inner());
            got.extend(batch.iter().map(index_of));
            Ok(())
        })
    }
}

/// Never finishes an export.
#[derive(Debug)]
struct Hanging;

impl Exporter for Hanging {
    fn name(&self) -> &str {
        "hanging"
    }
    fn export<'a>(&'a self, _batch: &'a [Event]) -> BoxFuture<'a, Result<(), ExportError>> {
        Box::pin(std::future::pending())
    }
}

/// Panics on every export.
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

/// A `Write` the test can read back.
#[derive(Clone, Default)]
struct SharedBuf(Arc<Mutex<Vec<u8>>>);

impl Write for SharedBuf {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A minimal executor that is not tokio: polls on the current thread,
/// parking between wakes.
fn block_on_plain<F: std::future::Future>(fut: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if let std::task::Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

// ------------------------------------------------------------ wire shape

#[test]
fn span_serializes_to_the_exact_ariadne_shape() {
    let mut data = serde_json::Map::new();
    data.insert("triggered".into(), json!(true));
    data.insert("reason".into(), json!("usage_pct >= trigger_pct"));
    data.insert("pruned_count".into(), json!(47));
    let span = Event::Span(SpanEvent {
        trace_id: "session-abc-123".into(),
        span_id: "00000000000000aa".into(),
        parent_id: Some("00000000000000ff".into()),
        kind: Some(names::KIND_COMPACTION.into()),
        name: Some(names::TRIGGER_DECISION.into()),
        started_at: "2026-01-01T00:00:00.000Z".into(),
        ended_at: Some("2026-01-01T00:00:00.042Z".into()),
        data,
        status: SpanStatus::Ok,
    });
    let text = serde_json::to_string(&span).unwrap();
    assert_eq!(
        text,
        r#"{"type":"span","trace_id":"session-abc-123","span_id":"00000000000000aa","parent_id":"00000000000000ff","kind":"compaction","name":"compact.trigger_decision","started_at":"2026-01-01T00:00:00.000Z","ended_at":"2026-01-01T00:00:00.042Z","data":{"triggered":true,"reason":"usage_pct >= trigger_pct","pruned_count":47},"status":"ok"}"#
    );
    let back: Event = serde_json::from_str(&text).unwrap();
    assert_eq!(back, span);
}

#[test]
fn absent_optionals_are_skipped() {
    let span = Event::Span(SpanEvent {
        trace_id: "t".into(),
        span_id: "s".into(),
        parent_id: None,
        kind: None,
        name: None,
        started_at: "2026-01-01T00:00:00.000Z".into(),
        ended_at: None,
        data: serde_json::Map::new(),
        status: SpanStatus::Error,
    });
    assert_eq!(
        serde_json::to_string(&span).unwrap(),
        r#"{"type":"span","trace_id":"t","span_id":"s","started_at":"2026-01-01T00:00:00.000Z","data":{},"status":"error"}"#
    );
    let trace = Event::Trace(TraceEvent {
        trace_id: "t".into(),
        name: None,
        group_id: None,
        started_at: None,
        ended_at: None,
        metadata: None,
    });
    let text = serde_json::to_string(&trace).unwrap();
    assert_eq!(text, r#"{"type":"trace","trace_id":"t"}"#);
    assert_eq!(serde_json::from_str::<Event>(&text).unwrap(), trace);
}

#[test]
fn session_trace_carries_agent_name_and_round_trips() {
    let trace = Event::Trace(TraceEvent::session("session-1", "coder"));
    let value = serde_json::to_value(&trace).unwrap();
    assert_eq!(value["type"], "trace");
    assert_eq!(value["trace_id"], "session-1");
    assert_eq!(value["metadata"], json!({"agent_name": "coder"}));
    let started = value["started_at"].as_str().unwrap();
    assert!(parse_rfc3339_millis(started).is_some(), "{started}");
    let keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["type", "trace_id", "name", "started_at", "metadata"]);
    let back: Event = serde_json::from_value(value).unwrap();
    assert_eq!(back, trace);
}

#[test]
fn builder_fills_every_field_and_round_trips() {
    let parent = SpanBuilder::start("session-1", names::PREFLIGHT).kind(names::KIND_COMPACTION);
    let mut child = SpanBuilder::start("session-1", names::SUMMARY_CREATED)
        .kind(names::KIND_COMPACTION)
        .parent(parent.span_id())
        .data("strategy", "task_state")
        .data_serialize(
            "kept",
            &BTreeMap::from([("pinned", 3), ("recent_turns", 6)]),
        );
    child.insert("summary_tokens", 480);
    let parent_id = parent.span_id().to_owned();
    let child = child.finish(SpanStatus::Ok);
    let span = child.as_span().unwrap();
    assert_eq!(span.parent_id.as_deref(), Some(parent_id.as_str()));
    assert_eq!(span.kind.as_deref(), Some("compaction"));
    assert_eq!(span.name.as_deref(), Some("compact.summary_created"));
    assert_eq!(
        serde_json::Value::Object(span.data.clone()),
        json!({"strategy": "task_state", "kept": {"pinned": 3, "recent_turns": 6}, "summary_tokens": 480})
    );
    let text = serde_json::to_string(&child).unwrap();
    assert!(text.starts_with(r#"{"type":"span","trace_id":"session-1","span_id":""#));
    assert_eq!(serde_json::from_str::<Event>(&text).unwrap(), child);
    let parent = parent.finish(SpanStatus::Error);
    assert_eq!(parent.as_span().unwrap().status, SpanStatus::Error);
}

#[test]
fn timestamps_are_rfc3339_utc_millis_z() {
    let is_shape = |s: &str| {
        let b = s.as_bytes();
        b.len() == 24
            && s.ends_with('Z')
            && b[4] == b'-'
            && b[7] == b'-'
            && b[10] == b'T'
            && b[13] == b':'
            && b[16] == b':'
            && b[19] == b'.'
            && s.chars()
                .enumerate()
                .all(|(i, c)| [4, 7, 10, 13, 16, 19, 23].contains(&i) || c.is_ascii_digit())
    };
    let now = now_rfc3339();
    assert!(is_shape(&now), "{now}");
    let span = numbered(0);
    let span = span.as_span().unwrap();
    assert!(is_shape(&span.started_at));
    assert!(is_shape(span.ended_at.as_deref().unwrap()));
    assert_eq!(
        format_rfc3339_millis(1_767_225_600_042),
        "2026-01-01T00:00:00.042Z"
    );
    assert_eq!(
        parse_rfc3339_millis("2026-01-01T00:00:00.042Z"),
        Some(1_767_225_600_042)
    );
}

#[test]
fn lenient_read_of_a_span_without_status_or_data() {
    let e: Event = serde_json::from_str(
        r#"{"type":"span","trace_id":"t","span_id":"s","started_at":"2026-01-01T00:00:00Z"}"#,
    )
    .unwrap();
    let s = e.as_span().unwrap();
    assert_eq!(s.status, SpanStatus::Ok);
    assert!(s.data.is_empty());
    assert!(serde_json::from_str::<Event>(r#"{"type":"bogus","trace_id":"t"}"#).is_err());
}

#[test]
fn span_ids_are_unique_over_100k_and_16_lower_hex() {
    let mut seen = HashSet::with_capacity(100_000);
    for _ in 0..100_000 {
        let id = new_span_id();
        assert_eq!(id.len(), 16);
        assert!(
            id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
            "{id}"
        );
        assert!(seen.insert(id), "duplicate span id");
    }
    // And across threads.
    let per_thread: Vec<Vec<String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| s.spawn(|| (0..10_000).map(|_| new_span_id()).collect::<Vec<_>>()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for id in per_thread.into_iter().flatten() {
        assert!(seen.insert(id), "duplicate span id across threads");
    }
}

#[test]
fn ended_at_is_never_before_started_at() {
    for i in 0..2_000 {
        let builder = SpanBuilder::start("t", names::ARCHIVAL);
        if i % 500 == 0 {
            std::thread::sleep(Duration::from_millis(3));
        }
        let span = builder.finish_span(SpanStatus::Ok);
        let start = parse_rfc3339_millis(&span.started_at).unwrap();
        let end = parse_rfc3339_millis(span.ended_at.as_deref().unwrap()).unwrap();
        assert!(end >= start, "{span:?}");
        // Fixed width, so the strings order the same way.
        assert!(span.ended_at.as_deref().unwrap() >= span.started_at.as_str());
    }
}

#[test]
fn every_name_is_a_compact_event() {
    assert_eq!(names::ALL.len(), 11);
    assert!(names::ALL.iter().all(|n| n.starts_with("compact.")));
    assert_eq!(names::ALL.iter().collect::<HashSet<_>>().len(), 11);
}

// ------------------------------------------------------------ dispatcher

#[test]
fn emit_does_not_wait_for_slow_or_failing_exporters() {
    const N: usize = 10_000;
    let failing = Arc::new(Failing::default());
    // Slower than the whole test: it never completes a batch, so every
    // assertion about it holds however the threads are scheduled.
    let sleepy = Arc::new(Sleepy {
        delay: Duration::from_secs(3600),
        received: AtomicUsize::new(0),
    });
    let collect = Arc::new(CollectingExporter::new());
    let dispatcher = Dispatcher::new(
        vec![failing.clone(), sleepy.clone(), collect.clone()],
        opts(16_384, 256, Duration::from_millis(20)),
    );

    for i in 0..N {
        dispatcher.emit(numbered(i));
    }
    // Had emit waited for the sleeping exporter, it would never have returned.
    assert_eq!(sleepy.received.load(Ordering::SeqCst), 0);

    assert!(
        wait_until(HANG_GUARD, || collect.len() == N),
        "collector got {} of {N}",
        collect.len()
    );
    let order: Vec<u64> = collect.events().iter().map(index_of).collect();
    assert!(order.iter().copied().eq(0..N as u64), "events out of order");

    let failing_settled = || {
        let s = dispatcher.stats();
        s.exporters[0].failed_events + s.exporters[0].lagged == N as u64
    };
    assert!(wait_until(HANG_GUARD, failing_settled));
    let stats = dispatcher.stats();
    assert_eq!(stats.emitted, N as u64);
    // The queue holds more than N and the ring more than that: nothing can
    // be dropped, and the collector cannot lag.
    assert_eq!(stats.dropped, 0);
    assert_eq!(stats.exporters[0].name, "failing");
    assert_eq!(
        stats.exporters[0].failures,
        failing.calls.load(Ordering::SeqCst) as u64
    );
    assert!(stats.exporters[0].failures > 0);
    assert_eq!(stats.exporters[0].exported, 0);
    assert_eq!(stats.exporters[2].exported, N as u64);
    assert_eq!(stats.exporters[2].lagged, 0);

    // The sleeper still holds its whole backlog; stopping must not wait for
    // it (were it to, this call would not return within the test).
    dispatcher.shutdown(Duration::from_millis(100));
    assert_eq!(sleepy.received.load(Ordering::SeqCst), 0);
    assert_eq!(dispatcher.stats().exporters[1].exported, 0);
}

#[test]
fn overflow_with_a_blocked_exporter_counts_every_drop() {
    const N: u64 = 1_000;
    let gated = Arc::new(Gated::new());
    let dispatcher = Dispatcher::new(vec![gated.clone()], opts(10, 4, Duration::from_millis(1)));
    for i in 0..N {
        dispatcher.emit(numbered(i as usize));
    }
    assert_eq!(dispatcher.stats().emitted, N);

    gated.open.send_replace(true);
    assert!(dispatcher.flush(Duration::from_secs(10)));
    let stats = dispatcher.stats();
    let got = gated.got.lock().unwrap().clone();
    assert_eq!(stats.exported, got.len() as u64);
    // Every event is accounted for exactly once: refused at emit, skipped
    // for lag, or delivered.
    assert_eq!(stats.dropped + stats.lagged + stats.exported, N);
    assert!(got.windows(2).all(|w| w[0] < w[1]), "delivery out of order");
    // Bounded memory: what survives the block is at most the batch in
    // flight (4), the ring (2 * 3 + 1 batches, rounded up to 8: 32), the
    // worker's partial batch (3) and the queue (10).
    assert!(
        stats.exported <= 4 + 32 + 3 + 10,
        "exported {}",
        stats.exported
    );
    assert!(stats.dropped + stats.lagged > 0);

    dispatcher.shutdown(Duration::from_secs(5));
    let dropped = dispatcher.stats().dropped;
    for i in 0..5 {
        dispatcher.emit(numbered(i));
    }
    assert_eq!(dispatcher.stats().dropped, dropped + 5);
}

#[test]
fn flush_delivers_everything_without_waiting_for_the_interval() {
    let collect = Arc::new(CollectingExporter::new());
    // An interval far beyond the test: only flush can cut the last batch.
    let dispatcher = Dispatcher::new(
        vec![collect.clone()],
        opts(4096, 64, Duration::from_secs(3600)),
    );
    for i in 0..1_000 {
        dispatcher.emit(numbered(i));
    }
    assert!(dispatcher.flush(Duration::from_secs(10)));
    assert_eq!(collect.len(), 1_000);
    dispatcher.emit_all((1_000..1_010).map(numbered));
    assert!(dispatcher.flush(Duration::from_secs(10)));
    assert_eq!(collect.len(), 1_010);
    assert_eq!(dispatcher.stats().exported, 1_010);
}

#[test]
fn emit_all_now_publishes_a_complete_group_without_waiting_for_the_interval() {
    let collect = Arc::new(CollectingExporter::new());
    // An interval far beyond the test and batches that never fill: only
    // emit_all_now can send these before the hang guard.
    let dispatcher = Dispatcher::new(
        vec![collect.clone()],
        opts(4096, 1_000, Duration::from_secs(3600)),
    );
    dispatcher.emit_all_now((0..5).map(numbered));
    assert!(wait_until(HANG_GUARD, || collect.len() == 5));
    dispatcher.emit(numbered(5));
    dispatcher.emit_all_now((6..9).map(numbered));
    assert!(wait_until(HANG_GUARD, || collect.len() == 9));
    let order: Vec<u64> = collect.events().iter().map(index_of).collect();
    assert_eq!(order, (0..9).collect::<Vec<u64>>());
}

/// Holds every export until the gate opens; records each call's events.
#[derive(Debug)]
struct GatedCalls {
    open: tokio::sync::watch::Sender<bool>,
    started: AtomicUsize,
    calls: Mutex<Vec<Vec<u64>>>,
}

impl Exporter for GatedCalls {
    fn name(&self) -> &str {
        "gated-calls"
    }
    fn export<'a>(&'a self, batch: &'a [Event]) -> BoxFuture<'a, Result<(), ExportError>> {
        Box::pin(async move {
            self.started.fetch_add(1, Ordering::SeqCst);
            let mut rx = self.open.subscribe();
            let _ = rx.wait_for(|open| *open).await;
            let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
            calls.push(batch.iter().map(index_of).collect());
            Ok(())
        })
    }
}

#[test]
fn batches_that_queue_behind_a_busy_export_go_out_in_one_call() {
    let gated = Arc::new(GatedCalls {
        open: tokio::sync::watch::channel(false).0,
        started: AtomicUsize::new(0),
        calls: Mutex::new(Vec::new()),
    });
    // A second, quick exporter shows when each group has been published.
    let collect = Arc::new(CollectingExporter::new());
    let dispatcher = Dispatcher::new(
        vec![gated.clone(), collect.clone()],
        opts(64, 8, Duration::from_secs(3600)),
    );
    dispatcher.emit_all_now([numbered(0)]);
    assert!(wait_until(HANG_GUARD, || gated
        .started
        .load(Ordering::SeqCst)
        == 1));
    // Five complete groups, each published as its own batch while the
    // first export is held.
    for i in 1..6 {
        dispatcher.emit_all_now([numbered(i)]);
        assert!(wait_until(HANG_GUARD, || collect.len() == i + 1));
    }
    // Three more than one call may carry (8 events) follow in another.
    for i in 6..12 {
        dispatcher.emit_all_now([numbered(i)]);
        assert!(wait_until(HANG_GUARD, || collect.len() == i + 1));
    }
    gated.open.send_replace(true);
    assert!(dispatcher.flush(Duration::from_secs(10)));
    let calls = gated.calls.lock().unwrap().clone();
    assert_eq!(
        calls,
        vec![vec![0], (1..9).collect::<Vec<u64>>(), (9..12).collect()]
    );
    let stats = dispatcher.stats();
    assert_eq!(stats.exporters[0].exported, 12);
    assert_eq!(stats.exporters[0].lagged, 0);
}

#[test]
fn flush_reports_false_when_an_exporter_is_still_busy() {
    let gated = Arc::new(Gated::new());
    let dispatcher = Dispatcher::new(vec![gated.clone()], DispatchOptions::default());
    dispatcher.emit(numbered(0));
    assert!(!dispatcher.flush(Duration::from_millis(100)));
    gated.open.send_replace(true);
    assert!(dispatcher.flush(Duration::from_secs(10)));
}

#[test]
fn a_hanging_exporter_times_out_and_a_panicking_one_is_contained() {
    let collect = Arc::new(CollectingExporter::new());
    let dispatcher = Dispatcher::new(
        vec![Arc::new(Hanging), Arc::new(Panicking), collect.clone()],
        DispatchOptions {
            export_timeout: Duration::from_millis(100),
            ..opts(1024, 10, Duration::from_millis(1))
        },
    );
    dispatcher.emit_all((0..3).map(numbered));
    assert!(dispatcher.flush(Duration::from_secs(10)));
    let stats = dispatcher.stats();
    assert_eq!(collect.len(), 3);
    assert_eq!(stats.exporters[0].failed_events, 3);
    assert_eq!(stats.exporters[1].failed_events, 3);
    assert!(stats.exporters[0].failures >= 1);
    assert!(stats.exporters[1].failures >= 1);
    // The worker survived the panic.
    dispatcher.emit(numbered(3));
    assert!(dispatcher.flush(Duration::from_secs(10)));
    assert_eq!(collect.len(), 4);
}

#[test]
fn shutdown_flushes_is_idempotent_and_so_is_dropping_the_last_handle() {
    let collect = Arc::new(CollectingExporter::new());
    let dispatcher = Dispatcher::new(
        vec![collect.clone()],
        opts(4096, 64, Duration::from_secs(3600)),
    );
    dispatcher.emit_all((0..500).map(numbered));
    dispatcher.shutdown(Duration::from_secs(10));
    assert_eq!(collect.len(), 500);
    dispatcher.shutdown(Duration::from_secs(10));
    assert!(dispatcher.flush(Duration::from_secs(1)));
    dispatcher.emit(numbered(500));
    assert_eq!(dispatcher.stats().dropped, 1);
    assert_eq!(collect.len(), 500);

    let collect = Arc::new(CollectingExporter::new());
    let first = Dispatcher::new(
        vec![collect.clone()],
        opts(4096, 64, Duration::from_secs(3600)),
    );
    let second = first.clone();
    first.emit_all((0..100).map(numbered));
    drop(first);
    second.emit_all((100..200).map(numbered));
    assert!(
        collect.len() < 200,
        "the last partial batch waits for the interval"
    );
    drop(second);
    assert_eq!(collect.len(), 200);
}

#[test]
fn disabled_dispatcher_only_counts() {
    let dispatcher = Dispatcher::disabled();
    assert!(!dispatcher.is_enabled());
    dispatcher.emit_all((0..10).map(numbered));
    assert!(dispatcher.flush(Duration::ZERO));
    let stats = dispatcher.stats();
    assert_eq!(stats.emitted, 10);
    assert_eq!(stats.exported, 0);
    assert!(stats.exporters.is_empty());
    dispatcher.shutdown(Duration::ZERO);
    assert!(!Dispatcher::new(Vec::new(), DispatchOptions::default()).is_enabled());
}

#[test]
fn works_from_plain_sync_code_and_a_non_tokio_executor() {
    let collect = Arc::new(CollectingExporter::new());
    let dispatcher = Dispatcher::new(vec![collect.clone()], DispatchOptions::default());
    dispatcher.emit(numbered(0));
    assert!(dispatcher.flush(Duration::from_secs(10)));
    dispatcher.emit(numbered(1));
    assert!(block_on_plain(
        dispatcher.flush_async(Duration::from_secs(10))
    ));
    assert_eq!(collect.len(), 2);
}

#[tokio::test(flavor = "current_thread")]
async fn works_inside_a_current_thread_runtime() {
    let collect = Arc::new(CollectingExporter::new());
    let dispatcher = Dispatcher::new(vec![collect.clone()], DispatchOptions::default());
    dispatcher.emit(numbered(0));
    assert!(dispatcher.flush_async(Duration::from_secs(10)).await);
    // The blocking flush is also safe here: the worker has its own thread.
    dispatcher.emit(numbered(1));
    assert!(dispatcher.flush(Duration::from_secs(10)));
    assert_eq!(collect.len(), 2);
    // Dropping the last handle inside the runtime must not panic.
    drop(dispatcher);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn works_inside_a_multi_thread_runtime() {
    let collect = Arc::new(CollectingExporter::new());
    let dispatcher = Dispatcher::new(vec![collect.clone()], DispatchOptions::default());
    let tasks: Vec<_> = (0..4)
        .map(|t| {
            let d = dispatcher.clone();
            tokio::spawn(async move { d.emit_all((0..250).map(|i| numbered(t * 250 + i))) })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    assert!(dispatcher.flush_async(Duration::from_secs(10)).await);
    assert_eq!(collect.len(), 1_000);
    dispatcher.shutdown(Duration::from_secs(5));
}

// ------------------------------------------------------------ exporters

#[test]
fn jsonl_concurrent_emitters_write_whole_lines() {
    const THREADS: usize = 16;
    const PER_THREAD: usize = 300;
    let path = temp_path("events.jsonl");
    let jsonl = Arc::new(JsonlExporter::new(&path));
    let dispatcher = Dispatcher::new(
        vec![jsonl],
        opts(THREADS * PER_THREAD, 64, Duration::from_millis(5)),
    );
    let padding = "x".repeat(2_000);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let d = dispatcher.clone();
            let padding = padding.as_str();
            s.spawn(move || {
                for i in 0..PER_THREAD {
                    d.emit(
                        SpanBuilder::start(format!("thread-{t}"), names::ARCHIVAL)
                            .data("i", i)
                            .data("padding", padding)
                            .finish(SpanStatus::Ok),
                    );
                }
            });
        }
    });
    assert!(dispatcher.flush(Duration::from_secs(30)));
    assert_eq!(dispatcher.stats().dropped, 0);

    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.ends_with('\n'));
    let mut next = [0u64; THREADS];
    let mut lines = 0;
    for line in text.lines() {
        let event: Event = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line:.80}"));
        let t: usize = event.trace_id()["thread-".len()..].parse().unwrap();
        // Per emitter, order is preserved.
        assert_eq!(index_of(&event), next[t]);
        next[t] += 1;
        lines += 1;
    }
    assert_eq!(lines, THREADS * PER_THREAD);
    let _ = std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap());
}

#[test]
fn jsonl_independent_writers_on_one_file_never_interleave() {
    let path = temp_path("shared.jsonl");
    let big = "y".repeat(8_000);
    std::thread::scope(|s| {
        for w in 0..8 {
            let path = path.clone();
            let big = big.as_str();
            s.spawn(move || {
                // A separate exporter (its own file handle) per writer,
                // like separate processes appending to one file.
                let exporter = JsonlExporter::create(&path).unwrap();
                for b in 0..50 {
                    let batch: Vec<Event> = (0..4)
                        .map(|i| {
                            SpanBuilder::start(format!("w{w}"), names::ARCHIVAL)
                                .data("i", b * 4 + i)
                                .data("big", big)
                                .finish(SpanStatus::Ok)
                        })
                        .collect();
                    block_on_plain(exporter.export(&batch)).unwrap();
                }
                block_on_plain(exporter.flush()).unwrap();
            });
        }
    });
    let text = std::fs::read_to_string(&path).unwrap();
    let mut count = 0;
    for line in text.lines() {
        let event: Event = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line:.80}"));
        assert_eq!(
            event.as_span().unwrap().data["big"].as_str().unwrap().len(),
            8_000
        );
        count += 1;
    }
    assert_eq!(count, 8 * 50 * 4);
    let _ = std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap());
}

#[test]
fn jsonl_create_reports_a_bad_path() {
    let file = temp_path("a-file");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, b"not a directory").unwrap();
    // A path whose "directory" is a regular file.
    assert!(JsonlExporter::create(file.join("events.jsonl")).is_err());
    let lazy = JsonlExporter::new(file.join("events.jsonl"));
    assert!(block_on_plain(lazy.export(&[numbered(0)])).is_err());
    let _ = std::fs::remove_dir_all(file.parent().unwrap().parent().unwrap());
}

#[test]
fn console_prints_one_short_line_per_event() {
    let buf = SharedBuf::default();
    let console = ConsoleExporter::with_writer(Box::new(buf.clone()));
    let span = Event::Span(SpanEvent {
        trace_id: "s-1".into(),
        span_id: "a".into(),
        parent_id: None,
        kind: Some("compaction".into()),
        name: Some(names::TRIGGER_DECISION.into()),
        started_at: "2026-01-01T00:00:00.000Z".into(),
        ended_at: Some("2026-01-01T00:00:00.042Z".into()),
        data: serde_json::from_value(json!({
            "triggered": true,
            "reason": "usage_pct >= trigger_pct",
            "policy": {"trigger_pct": 0.85},
            "output_text": "line one\nline two",
            "note": "two\nlines",
        }))
        .unwrap(),
        status: SpanStatus::Ok,
    });
    let trace = Event::Trace(TraceEvent::session("s-1", "coder"));
    block_on_plain(console.export(&[span, trace])).unwrap();
    let out = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert_eq!(
        lines[0],
        r#"2026-01-01T00:00:00.042Z compact.trigger_decision ok 42ms session=s-1 triggered=true reason="usage_pct >= trigger_pct" note="two\nlines""#
    );
    assert!(
        lines[1].ends_with(" trace session=s-1 name=coder agent_name=coder"),
        "{}",
        lines[1]
    );
}

#[test]
fn console_and_jsonl_behind_a_dispatcher() {
    let path = temp_path("both.jsonl");
    let buf = SharedBuf::default();
    let dispatcher = Dispatcher::new(
        vec![
            Arc::new(ConsoleExporter::with_writer(Box::new(buf.clone()))),
            Arc::new(JsonlExporter::new(&path)),
        ],
        DispatchOptions::default(),
    );
    dispatcher.emit(TraceEvent::session("s-2", "agent").into());
    dispatcher.emit_all((0..5).map(numbered));
    dispatcher.shutdown(Duration::from_secs(10));
    assert_eq!(
        buf.0
            .lock()
            .unwrap()
            .iter()
            .filter(|&&b| b == b'\n')
            .count(),
        6
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 6);
    let stats = dispatcher.stats();
    assert_eq!(stats.exported, 12);
    assert_eq!(stats.export_failures, 0);
    let _ = std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap());
}

/// The soak's "rising drops": each preflight publishes its few events as a
/// batch of their own (`emit_all_now`), and an exporter that was slow for a
/// while (a stalled collector, a loaded machine) must still get every one
/// of them as long as it is less than twice `capacity` events behind. When
/// the lanes were bounded in batches (`2 × capacity / batch_size + 1`), 300
/// groups of 3 events (900 events, capacity 1000) already lost some.
#[test]
fn many_small_groups_behind_a_stalled_exporter_are_all_delivered() {
    let gated = Arc::new(Gated::new());
    let collect = Arc::new(CollectingExporter::new());
    let dispatcher = Dispatcher::new(
        vec![gated.clone(), collect.clone()],
        opts(1000, 100, Duration::from_secs(3600)),
    );
    for g in 0..300 {
        dispatcher.emit_all_now((3 * g..3 * g + 3).map(numbered));
        // Published one group at a time, as preflights end one by one.
        std::thread::sleep(Duration::from_millis(1));
    }
    // The other exporter is not held up by the stalled one.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while collect.len() < 900 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(collect.len(), 900);
    gated.open.send_replace(true);
    assert!(dispatcher.flush(Duration::from_secs(10)));
    let stats = dispatcher.stats();
    assert_eq!((stats.dropped, stats.lagged), (0, 0), "{stats:?}");
    let got = gated.got.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert_eq!(got, (0..900u64).collect::<Vec<_>>());
}

/// Past twice `capacity` events behind, a stalled exporter loses its oldest
/// events, counted, and gets the newest.
#[test]
fn an_exporter_far_behind_loses_its_oldest_events_counted() {
    let gated = Arc::new(Gated::new());
    let dispatcher = Dispatcher::new(
        vec![gated.clone()],
        opts(100, 10, Duration::from_secs(3600)),
    );
    for g in 0..200 {
        dispatcher.emit_all_now((3 * g..3 * g + 3).map(numbered));
        std::thread::sleep(Duration::from_millis(1));
    }
    gated.open.send_replace(true);
    assert!(dispatcher.flush(Duration::from_secs(10)));
    let stats = dispatcher.stats();
    let got = gated.got.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert_eq!(stats.dropped, 0);
    assert!(stats.lagged > 0, "{stats:?}");
    assert_eq!(got.len() as u64 + stats.lagged, 600, "{stats:?}");
    assert_eq!(got.last(), Some(&599));
    // What was kept is at most the bound plus the export in flight.
    assert!(got.len() <= 2 * 100 + 10, "{}", got.len());
}
