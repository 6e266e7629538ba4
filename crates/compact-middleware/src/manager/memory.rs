//! The manager's memory: the summarizer the configuration
//! selects, the memory store, the sliding window applied to the
//! input, and the instructions injection (memory files, cross-session
//! memory, the sliding-window memory).
use std::sync::Arc;
use std::time::Duration;

use super::session::Session;
use super::{CompactError, CompactManager};
use crate::archive::SessionId;
use crate::config::{Config, Mode, StateStoreKind, SummarizerKind};
use crate::estimate::{Estimator, ModelLimits};
use crate::memory::{
    InstructionBlocks, MemoryStore, PostgresMemoryStore, SlidingWindow, SqliteStore,
    WindowSettings, inject_instructions, load_memory_files,
};
use crate::model::Message;
use crate::summarize::{OpenAiSummarizer, Summarizer};

/// What the manager holds for memory (docs/memory.md).
#[derive(Default)]
pub(super) struct MemoryRuntime {
    pub(super) store: Option<Arc<dyn MemoryStore>>,
    pub(super) files: Option<String>,
    pub(super) window: Option<SlidingWindow>,
}

/// The summarizer `summarizer.kind` selects.
pub(super) fn configured_summarizer(config: &Config) -> Result<Arc<dyn Summarizer>, CompactError> {
    match config.summarizer.kind {
        SummarizerKind::Extractive => Ok(Arc::new(crate::summarize::ExtractiveSummarizer)),
        SummarizerKind::Openai => {
            let s = OpenAiSummarizer::from_settings(&config.summarizer)
                .map_err(|e| CompactError::Config(e.to_string()))?;
            tracing::info!(endpoint = s.endpoint(), model = %config.summarizer.model, "openai summarizer");
            // The prefix is in the cache of the model that served the agent
            // only; sent to another it costs more than the fresh prompt.
            if config.summarizer.prompt == crate::config::SummaryPrompt::AgentPrefix
                && config.summarizer.model != config.model
            {
                tracing::warn!(
                    summarizer_model = %config.summarizer.model,
                    model = %config.model,
                    "summarizer.prompt is agent_prefix but summarizer.model is not the agent's model: the provider's prompt cache will not serve the prefix"
                );
            }
            Ok(Arc::new(s))
        }
    }
}

/// The memory store on the session store's backend: PostgreSQL at
/// `state.url` with `state.store: postgres` (replicas share one), else
/// the SQLite file `memory.store_path`.
fn configured_store(config: &Config) -> Result<Arc<dyn MemoryStore>, CompactError> {
    if config.state.store == StateStoreKind::Postgres {
        let url = config.state.postgres_url().ok_or_else(|| {
            CompactError::Config("state.url is required when state.store is postgres".into())
        })?;
        let store = PostgresMemoryStore::shared(&url)
            .map_err(|e| CompactError::Config(format!("state.url (memory store): {e}")))?;
        return Ok(store);
    }
    let s = SqliteStore::open(&config.memory.store_path)
        .map_err(|e| CompactError::Config(format!("memory.store_path: {e}")))?;
    Ok(Arc::new(s))
}

impl MemoryRuntime {
    pub(super) fn build(
        config: &Config,
        store: Option<Arc<dyn MemoryStore>>,
        summarizer: &Arc<dyn Summarizer>,
        estimator: &Estimator,
        limits: &ModelLimits,
    ) -> Result<Self, CompactError> {
        let sliding = config.policy.mode == Mode::SlidingWindow;
        let store = match store {
            Some(s) => Some(s),
            None if config.memory.injection || sliding => Some(configured_store(config)?),
            None => None,
        };
        let files = if config.memory.files_dirs.is_empty() {
            None
        } else {
            let (read, text) = load_memory_files(&config.memory.files_dirs);
            tracing::debug!(files = ?read, "memory files loaded");
            Some(text).filter(|t| !t.is_empty())
        };
        let window = match (&store, sliding) {
            (Some(store), true) => {
                let counter = estimator.counter();
                Some(SlidingWindow::new(
                    store.clone(),
                    summarizer.clone(),
                    WindowSettings {
                        summarize_after_seq: config.memory.summarize_after_seq,
                        rolling_window_size: config.memory.rolling_window_size,
                        processing_timeout: Duration::from_secs(
                            config.memory.processing_timeout_secs,
                        ),
                        strategy: config.policy.strategy,
                        max_tokens: ((config.policy.summary_max_pct * limits.max_tokens as f64)
                            as usize)
                            .max(1),
                        count_tokens: Arc::new(move |s: &str| counter.count(s)),
                    },
                ))
            }
            _ => None,
        };
        Ok(Self {
            store,
            files,
            window,
        })
    }
}

impl CompactManager {
    /// Binds a session to a cross-session memory key (a user or agent
    /// id). Without it the key is `telemetry.agent_name`. Call before
    /// the session's first preflight.
    pub async fn bind_memory_key(&self, session_id: &str, key: &str) {
        let id = match SessionId::parse(session_id) {
            Ok(id) => id,
            Err(e) => {
                tracing::warn!(error = %e, "bind_memory_key: not a usable session id");
                return;
            }
        };
        let handle = self.session_handle(id);
        handle.lock().await.memory_key = Some(key.to_owned());
    }

    /// The memory store, when the configuration uses one (or the builder was given one).
    pub fn memory_store(&self) -> Option<&Arc<dyn MemoryStore>> {
        self.inner.memory.store.as_ref()
    }

    /// The sliding-window service (`policy.mode: sliding_window`).
    pub fn sliding_window(&self) -> Option<&SlidingWindow> {
        self.inner.memory.window.as_ref()
    }

    /// The summarizer in use (`extractive`, `openai`, or the builder's).
    pub fn summarizer(&self) -> &Arc<dyn Summarizer> {
        &self.inner.summarizer
    }

    fn memory_key(&self, session: &Session) -> String {
        session
            .memory_key
            .clone()
            .unwrap_or_else(|| self.inner.config.telemetry.agent_name.clone())
    }

    /// The input as the pipeline sees it: the sliding window applied
    /// (`sliding_window` mode), then the instruction blocks injected. Returns
    /// the names of the injected blocks. The memory store is synchronous
    /// (SQLite, or PostgreSQL through its own runtime): its calls run on
    /// the blocking pool, never on the async path.
    pub(super) async fn prepare(
        &self,
        session: &mut Session,
        messages: Vec<Message>,
    ) -> (Vec<Message>, Vec<String>) {
        let config = &self.inner.config;
        let memory = &self.inner.memory;
        let (messages, conversation_memory) = match &memory.window {
            Some(window) => {
                let (this, window, id) = (self.clone(), window.clone(), session.id().clone());
                let original = messages.clone();
                tokio::task::spawn_blocking(move || {
                    this.apply_window(&window, id.as_str(), messages)
                })
                .await
                .unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "sliding-window task failed");
                    (original, None)
                })
            }
            None => (messages, None),
        };
        if config.memory.injection && session.cross_session.is_none() {
            let key = self.memory_key(session);
            let loaded = match memory.store.clone() {
                None => None,
                Some(store) => tokio::task::spawn_blocking(move || store.session_memory(&key))
                    .await
                    .map_err(|e| e.to_string())
                    .and_then(|r| r.map_err(|e| e.to_string()))
                    .unwrap_or_else(|e| {
                        tracing::warn!(error = %e, "cannot read cross-session memory");
                        None
                    })
                    .map(|m| m.summary_text),
            };
            session.cross_session = Some(loaded);
        }
        let blocks = InstructionBlocks {
            memory_files: memory.files.clone(),
            cross_session: session.cross_session.clone().flatten(),
            conversation_memory,
        };
        let labels = blocks.labels();
        let (messages, _) = inject_instructions(messages, &blocks);
        (messages, labels)
    }

    /// The sliding window in the manager: the conversation's messages (everything not
    /// pinned) are numbered by sequence; the finished rounds trigger a
    /// background summary; the output keeps the pinned messages and the
    /// messages after the latest completed memory, whose text goes to the
    /// instructions.
    fn apply_window(
        &self,
        window: &SlidingWindow,
        session_id: &str,
        messages: Vec<Message>,
    ) -> (Vec<Message>, Option<String>) {
        let policy = &self.inner.config.policy;
        let conv: Vec<usize> = (0..messages.len())
            .filter(|&i| !policy.pins(&messages[i]))
            .collect();
        if conv.len() < 2 {
            return (messages, None);
        }
        let names = crate::pipeline::tiers::call_names(&messages);
        let entries: Vec<_> = conv
            .iter()
            .map(|&i| {
                let m = &messages[i];
                let name = m
                    .kind()
                    .results
                    .first()
                    .and_then(|id| names.get(id))
                    .map(String::as_str)
                    .or(m.kind().calls.first().map(|c| c.name.as_str()));
                crate::pipeline::summary::entry(m, name)
            })
            .collect();
        // The last message is the current one; the round before it ended.
        let last_saved = conv.len() - 2;
        // The round's context is read before the finished rounds trigger a
        // summary: a memory started now serves the next round, never this
        // one, however fast it completes.
        let context = window.get_context_for_workflow(session_id, &conv);
        if let Err(e) = window.trigger_summarization_if_needed(session_id, &entries, last_saved) {
            tracing::warn!(error = %e, "sliding-window trigger failed");
        }
        let context = match context {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "sliding-window memory unavailable");
                return (messages, None);
            }
        };
        let Some(memory) = context.memory else {
            return (messages, None);
        };
        // Never start inside an atomic group (a tool result without its call).
        let conv_msgs: Vec<Message> = conv.iter().map(|&i| messages[i].clone()).collect();
        let gap_start = crate::model::groups(&conv_msgs)
            .into_iter()
            .find(|g| g.contains(&context.gap_start))
            .map_or(context.gap_start, |g| g.start);
        let first_kept = conv.get(gap_start).copied().unwrap_or(messages.len());
        let dropped: std::collections::HashSet<usize> =
            conv.iter().copied().filter(|&i| i < first_kept).collect();
        let kept = messages
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !dropped.contains(i))
            .map(|(_, m)| m)
            .collect();
        let label = format!(
            "(messages {}-{}) {}",
            memory.start_sequence, memory.end_sequence, memory.memory_text
        );
        (kept, Some(label))
    }

    /// A session's summary is persisted under its memory key (cross-session
    /// memory), on the blocking pool; a failure is logged, never fatal.
    pub(super) async fn persist_cross_session(&self, session: &Session, body: &str) {
        if !self.inner.config.memory.injection || body.trim().is_empty() {
            return;
        }
        let Some(store) = self.inner.memory.store.clone() else {
            return;
        };
        let (key, id, body) = (
            self.memory_key(session),
            session.id().to_string(),
            body.to_owned(),
        );
        let write = move || {
            if let Err(e) = store.save_session_memory(&key, &body, &id) {
                tracing::warn!(error = %e, "cannot persist cross-session memory");
            }
        };
        if let Err(e) = tokio::task::spawn_blocking(write).await {
            tracing::warn!(error = %e, "cross-session memory task failed");
        }
    }
}
