//! What the memory tests on SQLite (memory.rs) and on PostgreSQL
//! (postgres_memory.rs) share: the window's settings, the seed-002
//! evolution of the memory table, which both stores must reproduce, and
//! the history the cross-session memory tests compact.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use compact_middleware::Message;
use compact_middleware::memory::{MemoryStatus, MemoryStore, SlidingWindow, WindowSettings};
use compact_middleware::summarize::{ExtractiveSummarizer, Strategy, SummaryEntry, TokenCountFn};

pub(crate) fn o200k() -> TokenCountFn {
    Arc::new(|s: &str| bpe_openai::o200k_base().count(s))
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
