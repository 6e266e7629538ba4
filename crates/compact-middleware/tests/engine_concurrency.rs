//! Per-session locking: concurrent preflights of one session serialize,
//! different sessions never wait for each other. Proven with a summarizer
//! that blocks until the test opens a gate, not with timings.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use compact_middleware::BoxFuture;
use compact_middleware::config::Config;
use compact_middleware::summarize::{
    ExtractiveSummarizer, SummarizeError, Summarizer, Summary, SummaryRequest,
};
use compact_middleware::{CompactManager, Message};
use tokio::sync::Semaphore;

/// Blocks every summarize call until a permit is added; counts entries.
#[derive(Debug)]
struct Gated {
    gate: Semaphore,
    entered: AtomicUsize,
}

impl Summarizer for Gated {
    fn name(&self) -> &str {
        // Not "extractive": the pipeline runs that one in-line, bypassing the trait.
        "gated"
    }
    fn summarize<'a>(
        &'a self,
        req: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<Summary, SummarizeError>> {
        Box::pin(async move {
            self.entered.fetch_add(1, Ordering::SeqCst);
            let permit = self
                .gate
                .acquire()
                .await
                .map_err(|e| SummarizeError::Other(e.to_string()))?;
            permit.forget();
            Ok(ExtractiveSummarizer.summarize_sync(req))
        })
    }
}

fn history(turns: usize) -> Vec<Message> {
    let mut v = vec![Message::system("You are an agent.")];
    for t in 0..turns {
        v.push(Message::user(format!(
            "Turn {t}: investigate ticket OPS-{t}; we must keep p99 under 200 ms."
        )));
        v.push(Message::assistant(format!(
            "Looked at OPS-{t}: {}",
            "details ".repeat(40)
        )));
    }
    v
}

async fn wait_until(f: impl Fn() -> bool) {
    // The timeout is only a hang guard, far beyond what a loaded machine needs.
    let polled = tokio::time::timeout(Duration::from_secs(120), async {
        while !f() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(polled.is_ok(), "condition never became true");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_session_serializes_other_sessions_proceed() {
    let gated = Arc::new(Gated {
        gate: Semaphore::new(0),
        entered: AtomicUsize::new(0),
    });
    let config = Config {
        max_context_tokens: Some(100_000),
        ..Config::default()
    };
    let manager = CompactManager::builder(config)
        .without_config_exporters()
        .summarizer(gated.clone())
        .without_storage()
        .build()
        .expect("manager");

    // Session A: a forced compaction that blocks inside the summarizer.
    let m = manager.clone();
    let a1 = tokio::spawn(async move { m.manual_compact("A", history(20), "first").await });
    wait_until(|| gated.entered.load(Ordering::SeqCst) == 1).await;

    // Session B is not held up by A: its (non-compacting) preflight completes.
    let b = manager.preflight("B", history(3)).await.expect("B");
    assert!(!b.report.triggered);

    // A second call on session A waits for the first: it never reaches the
    // summarizer. (The pause gives a broken lock the chance to show; a
    // correct one passes however long it is. The versions below are the
    // proof that does not depend on it.)
    let m = manager.clone();
    let a2 = tokio::spawn(async move { m.manual_compact("A", history(22), "second").await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        gated.entered.load(Ordering::SeqCst),
        1,
        "second call on A ran concurrently with the first"
    );
    assert!(!a2.is_finished());

    // Open the gate: A's calls complete in order, each seeing the state the previous left.
    gated.gate.add_permits(2);
    let r1 = a1.await.expect("join").expect("A1");
    let r2 = a2.await.expect("join").expect("A2");
    assert_eq!(r1.report.summary_version, Some(1));
    assert_eq!(r2.report.summary_version, Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_calls_of_one_session_leave_a_consistent_state() {
    let config = Config {
        max_context_tokens: Some(6_000),
        ..Config::default()
    };
    let manager = CompactManager::builder(config)
        .without_config_exporters()
        .without_storage()
        .build()
        .expect("manager");
    let mut tasks = Vec::new();
    for i in 0..16 {
        let m = manager.clone();
        tasks.push(tokio::spawn(async move {
            m.manual_compact("S", history(10 + i), "c").await
        }));
    }
    let mut versions = Vec::new();
    for t in tasks {
        let out = t.await.expect("join").expect("preflight");
        versions.push(
            out.report
                .summary_version
                .expect("forced compaction writes a summary"),
        );
    }
    versions.sort_unstable();
    // Every call got its own version: no two calls interleaved on the session state.
    assert_eq!(versions, (1..=16).collect::<Vec<u32>>());
}
