//! The sliding-window summary service (`docs/memory.md`).
//!
//! Messages are numbered by sequence (round 1 is seq 0-1, round 2 seq 2-3,
//! ...). After a round ends, [`SlidingWindow::trigger_summarization_if_needed`]
//! inserts a `processing` row for the window ending at the last saved
//! sequence and summarizes it in a background task; the next round never
//! waits for it. At the start of a round,
//! [`SlidingWindow::get_context_for_workflow`] returns the latest *completed*
//! memory and the gap messages after it.
//!
//! Summaries are incremental: the new memory folds only the messages after
//! its base memory's `end_sequence` into the base memory's text; when the
//! window's start moved past the base's start, the summarizer is told to drop
//! what only concerns the messages before it.
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::store::{MemoryError, MemoryRecord, MemoryStatus, MemoryStore};
use crate::pipeline::fallback;
use crate::summarize::{
    Strategy, SummarizeError, Summarizer, Summary, SummaryEntry, SummaryRequest, TokenCountFn,
};

/// The name of the entry that tells the summarizer where the window starts.
pub(crate) const WINDOW_NOTE_NAME: &str = "sliding_window";

/// The service's settings (`memory:` plus the summary budget).
#[derive(Clone)]
pub struct WindowSettings {
    /// Summarize once the last saved sequence reaches this.
    pub summarize_after_seq: usize,
    /// Messages one memory covers.
    pub rolling_window_size: usize,
    /// A `processing` row this old is marked `failed` before a new trigger.
    pub processing_timeout: Duration,
    /// The summary style.
    pub strategy: Strategy,
    /// Token budget of one memory.
    pub max_tokens: usize,
    /// Counts tokens for the budget.
    pub count_tokens: TokenCountFn,
}

impl std::fmt::Debug for WindowSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WindowSettings")
            .field("summarize_after_seq", &self.summarize_after_seq)
            .field("rolling_window_size", &self.rolling_window_size)
            .field("processing_timeout", &self.processing_timeout)
            .field("strategy", &self.strategy)
            .field("max_tokens", &self.max_tokens)
            .finish_non_exhaustive()
    }
}

/// The window: `end = last_saved_seq`,
/// `start = max(0, end - window + 1)`, moved up to an even number so that a
/// user/assistant pair is never split.
pub fn summary_range(last_saved_seq: usize, window: usize) -> (usize, usize) {
    let end = last_saved_seq;
    let mut start = (end + 1).saturating_sub(window.max(1));
    if !start.is_multiple_of(2) {
        start += 1;
    }
    (start, end)
}

/// A background summarization that was started.
#[derive(Debug)]
pub struct Scheduled {
    /// The `processing` row.
    pub memory_id: i64,
    /// The window.
    pub start_sequence: usize,
    /// The window.
    pub end_sequence: usize,
    /// The memory it folds into (the version chain).
    pub base_memory_id: Option<i64>,
    /// Resolves to the row's final status; dropping it does not cancel the task.
    pub handle: tokio::task::JoinHandle<MemoryStatus>,
}

/// What a round starts from.
#[derive(Debug, Clone)]
pub struct WorkflowContext<T> {
    /// The latest completed memory, if any.
    pub memory: Option<MemoryRecord>,
    /// Sequence number of the first gap message.
    pub gap_start: usize,
    /// The messages after the memory, before the current message.
    pub gap_messages: Vec<T>,
}

impl<T> WorkflowContext<T> {
    /// The memory text, if a memory is ready.
    pub fn memory_text(&self) -> Option<&str> {
        self.memory.as_ref().map(|m| m.memory_text.as_str())
    }
}

/// The sliding-window memory service.
#[derive(Clone)]
pub struct SlidingWindow {
    store: Arc<dyn MemoryStore>,
    summarizer: Arc<dyn Summarizer>,
    settings: WindowSettings,
}

impl std::fmt::Debug for SlidingWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlidingWindow")
            .field("store", &self.store)
            .field("summarizer", &self.summarizer.name())
            .field("settings", &self.settings)
            .finish()
    }
}

impl SlidingWindow {
    /// A service over `store`, writing memories with `summarizer`.
    pub fn new(
        store: Arc<dyn MemoryStore>,
        summarizer: Arc<dyn Summarizer>,
        settings: WindowSettings,
    ) -> Self {
        Self {
            store,
            summarizer,
            settings,
        }
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn MemoryStore> {
        &self.store
    }

    /// The settings.
    pub fn settings(&self) -> &WindowSettings {
        &self.settings
    }

    /// The trigger condition: enough messages, and no summarization
    /// already running for the conversation.
    pub fn should_trigger(
        &self,
        conversation_id: &str,
        last_saved_seq: usize,
    ) -> Result<bool, MemoryError> {
        if last_saved_seq < self.settings.summarize_after_seq {
            return Ok(false);
        }
        if self.store.processing(conversation_id)?.is_some() {
            tracing::debug!(conversation_id, "summarization already in progress");
            return Ok(false);
        }
        Ok(true)
    }

    /// Called after a round ends. `messages` are the conversation's messages
    /// by sequence number (at least `last_saved_seq + 1` of them). Starts a
    /// background summarization and returns without waiting for it; `None`
    /// when nothing is due, nothing is new, or one is already running.
    ///
    /// Must be called inside a Tokio runtime.
    pub fn trigger_summarization_if_needed(
        &self,
        conversation_id: &str,
        messages: &[SummaryEntry],
        last_saved_seq: usize,
    ) -> Result<Option<Scheduled>, MemoryError> {
        self.store.recover_stuck(self.settings.processing_timeout)?;
        if !self.should_trigger(conversation_id, last_saved_seq)? {
            return Ok(None);
        }
        if messages.len() <= last_saved_seq {
            return Err(MemoryError::MissingMessages {
                start: 0,
                end: last_saved_seq,
                available: messages.len(),
            });
        }
        let (start, end) = summary_range(last_saved_seq, self.settings.rolling_window_size);
        let base = self.store.latest_completed(conversation_id)?;
        if let Some(b) = &base
            && b.end_sequence >= end as i64
        {
            tracing::debug!(conversation_id, "no new messages to summarize");
            return Ok(None);
        }
        // Incremental: only the messages after the base memory, and never
        // before the window.
        let new_start = base
            .as_ref()
            .map_or(start, |b| ((b.end_sequence + 1) as usize).max(start));
        let mut entries = Vec::with_capacity(end + 2 - new_start);
        if let Some(b) = &base
            && (b.start_sequence as usize) < start
        {
            tracing::info!(
                conversation_id,
                dropped_until = start - 1,
                "sliding window: dropping older messages"
            );
            entries.push(SummaryEntry {
                role: "system".into(),
                name: Some(WINDOW_NOTE_NAME.into()),
                text: format!(
                    "The memory window now starts at message {start}: drop from the summary whatever only concerns messages {}-{}.",
                    b.start_sequence,
                    start - 1
                ),
                input: None,
                part: false,
                step: None,
            });
        }
        entries.extend(messages[new_start..=end].iter().cloned());
        let base_id = base.as_ref().map(|b| b.memory_id);
        let Some(memory_id) =
            self.store
                .begin(conversation_id, start as i64, end as i64, base_id)?
        else {
            tracing::debug!(conversation_id, "summarization already in progress");
            return Ok(None);
        };
        let req = SummaryRequest {
            previous: base.map(|b| b.memory_text),
            entries,
            strategy: self.settings.strategy,
            max_tokens: self.settings.max_tokens,
            count_tokens: self.settings.count_tokens.clone(),
            ledger: None,
            agent_prefix: None,
        };
        let store = self.store.clone();
        let summarizer = self.summarizer.clone();
        let conversation = conversation_id.to_owned();
        let handle = tokio::spawn(async move {
            let started = Instant::now();
            let result = summarizer
                .summarize(&req)
                .await
                .map(|s| {
                    // The memory goes into the instructions: what a tool
                    // told the agent to do never rides along.
                    let (s, held) = crate::summarize::guard_model_summary(
                        s,
                        &req.entries,
                        req.ledger.as_deref(),
                    );
                    for n in &held {
                        tracing::warn!(tool = %n.tool, reason = %n.reason, "memory summary repeated tool text that reads as instructions; replaced by a note");
                    }
                    s
                })
                .and_then(|s| fallback::validate(&s, req.max_tokens, 0, true).map(|()| s));
            let ms = started.elapsed().as_millis() as i64;
            // The store is synchronous: its writes go to the blocking pool.
            let record = move || {
                finish(
                    store.as_ref(),
                    &conversation,
                    memory_id,
                    result,
                    ms,
                    start,
                    end,
                )
            };
            tokio::task::spawn_blocking(record)
                .await
                .unwrap_or(MemoryStatus::Failed)
        });
        Ok(Some(Scheduled {
            memory_id,
            start_sequence: start,
            end_sequence: end,
            base_memory_id: base_id,
            handle,
        }))
    }

    /// Called at the start of a round. `current` is every message so far,
    /// the current user message last. With a completed memory: the memory
    /// and the messages after it (seq `end + 1 ..= len - 2`); without: no
    /// memory and every message but the current one.
    pub fn get_context_for_workflow<T: Clone>(
        &self,
        conversation_id: &str,
        current: &[T],
    ) -> Result<WorkflowContext<T>, MemoryError> {
        let last = current.len().saturating_sub(1);
        let memory = self.store.latest_completed(conversation_id)?;
        let gap_start = memory
            .as_ref()
            .map_or(0, |m| ((m.end_sequence + 1).max(0) as usize).min(last));
        Ok(WorkflowContext {
            gap_messages: current[gap_start..last].to_vec(),
            gap_start,
            memory,
        })
    }
}

/// Records how a background summarization ended: `completed` with its text,
/// or `failed`. A row recovered as failed meanwhile stays failed.
fn finish(
    store: &dyn MemoryStore,
    conversation: &str,
    memory_id: i64,
    result: Result<Summary, SummarizeError>,
    ms: i64,
    start: usize,
    end: usize,
) -> MemoryStatus {
    match result {
        Ok(s) => match store.complete(memory_id, &s.text, ms) {
            Ok(true) => {
                tracing::info!(conversation_id = %conversation, start, end, ms, "summarized messages");
                MemoryStatus::Completed
            }
            // Recovered as failed while we were working.
            Ok(false) => MemoryStatus::Failed,
            Err(e) => {
                tracing::warn!(memory_id, error = %e, "cannot store memory");
                let _ = store.fail(memory_id);
                MemoryStatus::Failed
            }
        },
        Err(e) => {
            tracing::warn!(conversation_id = %conversation, memory_id, error = %e, "sliding-window summary failed");
            if let Err(e) = store.fail(memory_id) {
                tracing::warn!(memory_id, error = %e, "cannot mark memory failed");
            }
            MemoryStatus::Failed
        }
    }
}
