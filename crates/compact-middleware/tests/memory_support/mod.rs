//! What the memory tests on SQLite (memory.rs) and on PostgreSQL
//! (postgres_memory.rs) share: the window's settings, the seed-002
//! evolution of the memory table, which both stores must reproduce, and
//! the history the cross-session memory tests compact, the conversation
//! they summarize and the crash-recovery scenario both stores must pass.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use compact_middleware::memory::{
    MemoryError, MemoryStatus, MemoryStore, SlidingWindow, WindowSettings,
};
use compact_middleware::summarize::{ExtractiveSummarizer, Strategy, SummaryEntry, TokenCountFn};
use compact_middleware::{CompactManager, Message, PreflightOutcome};

pub(crate) fn o200k() -> TokenCountFn {
    Arc::new(|s: &str| bpe_openai::o200k_base().count(s))
}

/// Session `a` of user `user-42` compacted by `manager` (the
/// [`router_history`], a manual compaction): it has a summary, which the
/// cross-session memory tests then find under the user's key.
pub(crate) async fn compact_users_session_a(manager: &CompactManager) -> PreflightOutcome {
    manager.bind_memory_key("a", "user-42").await;
    let out = manager
        .manual_compact("a", router_history(), "test")
        .await
        .expect("compact");
    assert!(out.report.summary_version.is_some());
    out
}

/// `n` entries of a conversation: seq 2k is round k+1's user message
/// (`ask` R-k+1, e.g. `please check`), 2k+1 its assistant reply (decided to
/// close it).
pub(crate) fn conversation(n: usize, ask: &str) -> Vec<SummaryEntry> {
    (0..n)
        .map(|seq| {
            let round = seq / 2 + 1;
            let (role, verb) = if seq % 2 == 0 {
                ("user", ask)
            } else {
                ("assistant", "decided to close")
            };
            SummaryEntry::new(
                role,
                format!("Round {round}: {verb} R-{round} (seq {seq})."),
            )
        })
        .collect()
}

/// A completed memory of conversation `c` (`messages`, 12 of them), then a process that dies while
/// summarizing (row 2 stays `processing`); `open` is what the next process
/// opens. Within the timeout the stuck row blocks new work; past it the
/// row becomes failed, the next trigger proceeds from the latest completed
/// memory and a late finisher cannot overwrite the recovered row.
pub(crate) async fn crash_mid_summarization_is_recoverable(
    open: impl Fn() -> Arc<dyn MemoryStore>,
    messages: &[SummaryEntry],
) {
    {
        let store = open();
        let window = SlidingWindow::new(store.clone(), Arc::new(ExtractiveSummarizer), settings());
        let s = window
            .trigger_summarization_if_needed("c", messages, 5)
            .expect("trigger")
            .expect("scheduled");
        s.handle.await.expect("task");
        // The process dies while summarizing: its row stays `processing`.
        assert_eq!(store.begin("c", 0, 9, Some(1)).expect("begin"), Some(2));
    }
    let store = open();
    assert_eq!(
        store
            .processing("c")
            .expect("processing")
            .map(|r| r.memory_id),
        Some(2)
    );
    let window = SlidingWindow::new(store.clone(), Arc::new(ExtractiveSummarizer), settings());
    assert!(
        window
            .trigger_summarization_if_needed("c", messages, 11)
            .expect("trigger")
            .is_none(),
        "within the timeout the stuck row still blocks new work"
    );
    let mut fast = settings();
    fast.processing_timeout = Duration::ZERO;
    let window = SlidingWindow::new(store.clone(), Arc::new(ExtractiveSummarizer), fast);
    let s = window
        .trigger_summarization_if_needed("c", messages, 11)
        .expect("trigger")
        .expect("scheduled");
    assert_eq!(
        store.get(2).expect("get").expect("row").status,
        MemoryStatus::Failed
    );
    assert_eq!((s.memory_id, s.base_memory_id), (3, Some(1)));
    assert_eq!(s.handle.await.expect("task"), MemoryStatus::Completed);
    assert!(!store.complete(2, "late", 1).expect("complete"));
    assert_eq!(store.get(2).expect("get").expect("row").memory_text, "");
}

/// Eight `begin`s of conversation `c` per store, each on a blocking
/// thread (store `i` asks for a row ending at `5 + i`): replicas racing
/// to summarize.
pub(crate) fn begins_on_threads<S: MemoryStore + 'static>(
    stores: &[Arc<S>],
) -> Vec<tokio::task::JoinHandle<Result<Option<i64>, MemoryError>>> {
    let mut tasks = Vec::new();
    for (i, store) in stores.iter().enumerate() {
        for _ in 0..8 {
            let store = store.clone();
            tasks.push(tokio::task::spawn_blocking(move || {
                store.begin("c", 0, 5 + i as i64, None)
            }));
        }
    }
    tasks
}

/// Summaries after sequence 5, over a window of 14 messages.
pub(crate) fn settings() -> WindowSettings {
    WindowSettings {
        summarize_after_seq: 5,
        rolling_window_size: 14,
        processing_timeout: Duration::from_secs(300),
        strategy: Strategy::TaskState,
        max_tokens: 600,
        count_tokens: o200k(),
    }
}

/// Seed 002's memory table: nothing below the threshold, then one
/// completed row per trigger at 5, 9, 13, 15 and 19 of `messages` (20
/// entries) in conversation `c1`, each based on the one before and the
/// window sliding from 15 on.
pub(crate) async fn seed_002_evolution(store: Arc<dyn MemoryStore>, messages: &[SummaryEntry]) {
    let window = SlidingWindow::new(store.clone(), Arc::new(ExtractiveSummarizer), settings());
    // Below the threshold nothing happens.
    assert!(
        window
            .trigger_summarization_if_needed("c1", messages, 3)
            .expect("trigger")
            .is_none()
    );
    for last in [5, 9, 13, 15, 19] {
        let scheduled = window
            .trigger_summarization_if_needed("c1", messages, last)
            .expect("trigger")
            .expect("scheduled");
        assert_eq!(
            scheduled.handle.await.expect("task"),
            MemoryStatus::Completed
        );
    }
    let rows: Vec<(i64, i64, i64, Option<i64>, MemoryStatus)> = store
        .history("c1")
        .expect("history")
        .into_iter()
        .map(|r| {
            (
                r.memory_id,
                r.start_sequence,
                r.end_sequence,
                r.base_memory_id,
                r.status,
            )
        })
        .collect();
    use MemoryStatus::Completed as C;
    assert_eq!(
        rows,
        [
            (1, 0, 5, None, C),
            (2, 0, 9, Some(1), C),
            (3, 0, 13, Some(2), C),
            (4, 2, 15, Some(3), C),
            (5, 6, 19, Some(4), C),
        ]
    );
}

/// A support session of four router rounds and a closing question: what
/// the cross-session memory tests compact under user `user-42`'s key.
pub(crate) fn router_history() -> Vec<Message> {
    let mut history = vec![Message::system("You are a support agent.")];
    for i in 0..4 {
        history.push(Message::user(format!(
            "My router RT-{i} drops Wi-Fi every 10 min; firmware 2.{i}."
        )));
        history.push(Message::assistant(format!(
            "Decided: reset RT-{i} to factory settings."
        )));
    }
    history.push(Message::user("Anything else?"));
    history
}
