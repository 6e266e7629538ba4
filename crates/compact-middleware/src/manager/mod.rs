//! [`CompactManager`]: the entry point agents call before every model call.
//!
//! It owns the shared pieces (encoder and count cache, summarizer, event
//! dispatcher) and per-session state behind a per-session lock: concurrent
//! preflights of one session serialize, different sessions run in parallel.

mod archive;
mod error;
mod hook;
mod memory;
mod overlay;
mod persist;
mod preflight;
mod recall;
mod repair;
mod report;
mod session;
mod status;
mod trail;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::archive::SessionId;
use crate::config::{Config, ExporterKind};
use crate::estimate::{Estimate, Estimator, ModelLimits};
use crate::events::{self, DispatchOptions, Dispatcher, Exporter};
use crate::model::Message;
use crate::state::SessionStore;
use crate::summarize::Summarizer;
use crate::tokens::{self, CountCache};
use crate::trigger::Forced;

pub use error::CompactError;
pub use hook::{BeforeModelCall, ModelCallContext};
pub use overlay::{ConfigSource, Overlays};
pub use recall::default_path as recall_default_path;
pub use recall::location as recall_location;
pub use report::{Continuation, PreflightOutcome, Report};
pub use session::Session;
pub use status::{BreakerStatus, Layer, Layers, SessionStatus, SummaryStatus};

/// The former name of [`Continuation`].
pub type ContinuationKind = Continuation;

/// Entries in the shared per-message count cache.
const COUNT_CACHE_CAPACITY: usize = 200_000;

/// One preflight call, with everything optional spelled out.
#[derive(Debug, Clone, Default)]
pub struct PreflightRequest {
    /// The history to send to the model, oldest first.
    pub messages: Vec<Message>,
    /// Tool schemas sent with the model call (counted, never changed).
    pub tools: Vec<Value>,
    /// Compact even if nothing triggers.
    pub forced: Option<Forced>,
    /// Free text carried into the events (manual compaction note, provider error).
    pub note: Option<String>,
    /// Reject input that already has pairing problems: `policy.repair: strict` for
    /// this call, whatever the configuration says.
    pub strict: bool,
    /// The provider's reported `usage.input_tokens` of the last response: the estimate
    /// becomes that figure plus the estimate of what was appended since
    /// (`docs/tokens.md`, usage anchoring). What the last request held is our previous
    /// output when the session recognises it, else everything before the last reply.
    pub usage: Option<usize>,
    /// The provider's whole usage figures of the last response, cache reads
    /// and writes included (`crate::cache::ReportedUsage`): reported on the
    /// call's events and report (`Report::cache`) and priced. Its
    /// `input_tokens` anchors the estimate when `usage` is not given.
    pub usage_details: Option<crate::cache::ReportedUsage>,
    /// The call's strategy overlays (its agent's, its own): applied with the
    /// session's conversation overlay over the configuration, for this call
    /// only (docs/design.md §5, precedence).
    pub overlays: Overlays,
}

/// Builds a [`CompactManager`].
pub struct Builder {
    config: Config,
    summarizer: Option<Arc<dyn Summarizer>>,
    exporters: Vec<Arc<dyn Exporter>>,
    config_exporters: bool,
    cache: Option<Arc<CountCache>>,
    archive: archive::ArchiveSetup,
    memory_store: Option<Arc<dyn crate::memory::MemoryStore>>,
    store: Option<Arc<dyn SessionStore>>,
    recall: Option<Arc<crate::recall::RecallIndex>>,
}

impl Builder {
    /// Keeps session state in `store` (loaded and saved at every call, held
    /// by the store's per-session lock) instead of this manager's memory
    /// only: what lets separate processes or replicas share sessions.
    pub fn session_store(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Uses `store` as the memory store instead of opening `memory.store_path`.
    pub fn memory_store(mut self, store: Arc<dyn crate::memory::MemoryStore>) -> Self {
        self.memory_store = Some(store);
        self
    }

    /// Uses `summarizer` instead of the extractive default.
    pub fn summarizer(mut self, s: Arc<dyn Summarizer>) -> Self {
        self.summarizer = Some(s);
        self
    }

    /// Adds an exporter (in addition to those `telemetry.exporter` selects).
    pub fn exporter(mut self, e: Arc<dyn Exporter>) -> Self {
        self.exporters.push(e);
        self
    }

    /// Do not create the console/jsonl exporter that `telemetry.exporter` names.
    pub fn without_config_exporters(mut self) -> Self {
        self.config_exporters = false;
        self
    }

    /// Shares a count cache between managers (e.g. one per config in a server).
    pub fn count_cache(mut self, cache: Arc<CountCache>) -> Self {
        self.cache = Some(cache);
        self
    }

    /// Resolves the model limits and starts the dispatcher, the archive
    /// and the memory; fails on a configuration that cannot be used.
    pub fn build(self) -> Result<CompactManager, CompactError> {
        let cache = self
            .cache
            .unwrap_or_else(|| Arc::new(CountCache::new(COUNT_CACHE_CAPACITY)));
        let mut exporters = self.exporters;
        if self.config_exporters {
            match self.config.telemetry.exporter {
                ExporterKind::Console => exporters.push(Arc::new(events::ConsoleExporter::new())),
                ExporterKind::Jsonl => exporters.push(Arc::new(events::JsonlExporter::new(
                    &self.config.telemetry.jsonl_path,
                ))),
                ExporterKind::None => {}
                other => {
                    if exporters.is_empty() {
                        tracing::warn!(
                            exporter = ?other,
                            "telemetry.exporter needs an exporter the caller provides (the compact binary wires it); events are not exported"
                        );
                    }
                }
            }
        }
        let dispatcher = if exporters.is_empty() {
            Dispatcher::disabled()
        } else {
            Dispatcher::new(
                exporters,
                DispatchOptions {
                    capacity: self.config.telemetry.queue_capacity,
                    batch_size: self.config.telemetry.batch_size,
                    flush_interval: std::time::Duration::from_millis(
                        self.config.telemetry.flush_interval_ms,
                    ),
                    ..DispatchOptions::default()
                },
            )
        };
        let archive = archive::ArchiveState::build(&self.config, self.archive)?;
        let recall = recall::build(&self.config, self.recall)?;
        let shared = Arc::new(Shared {
            recall,
            recall_pending: Mutex::new(HashMap::new()),
            dispatcher,
            sessions: Mutex::new(HashMap::new()),
            archive,
            store: self.store,
            cache,
            summarizer: self.summarizer,
        });
        let engine = Engine::build(&self.config, &shared, self.memory_store)?;
        Ok(CompactManager::assemble(self.config, engine, shared))
    }
}

/// What one configuration's calls use: the model limits, the estimator,
/// the summarizer and the memory. A call with strategy overlays
/// runs on the engine of its effective configuration (`overlay.rs`).
struct Engine {
    limits: ModelLimits,
    estimator: Estimator,
    summarizer: Arc<dyn Summarizer>,
    memory: memory::MemoryRuntime,
}

impl Engine {
    fn build(
        config: &Config,
        shared: &Shared,
        memory_store: Option<Arc<dyn crate::memory::MemoryStore>>,
    ) -> Result<Self, CompactError> {
        let limits = ModelLimits::from_config(config).map_err(CompactError::Config)?;
        let counter = match limits.chars_per_token {
            Some(cpt) => tokens::ratio_counter(cpt),
            None => tokens::counter(config.tokenizer, limits.encoding),
        };
        let summarizer = match &shared.summarizer {
            Some(s) => s.clone(),
            None => memory::configured_summarizer(config)?,
        };
        let estimator = Estimator::new(counter, shared.cache.clone());
        let memory =
            memory::MemoryRuntime::build(config, memory_store, &summarizer, &estimator, &limits)?;
        Ok(Self {
            limits,
            estimator,
            summarizer,
            memory,
        })
    }
}

/// Every session's state by id, one record each behind its own lock.
type SessionMap = HashMap<SessionId, Arc<tokio::sync::Mutex<Session>>>;

/// What every configuration's calls of one manager share: the dispatcher,
/// the sessions (map and store), the archive, the count cache, and the
/// summarizer the builder was given.
struct Shared {
    dispatcher: Dispatcher,
    /// Every session's state, one record each behind its own lock.
    sessions: Mutex<SessionMap>,
    archive: archive::ArchiveState,
    /// Where session state outlives this manager, if anywhere.
    store: Option<Arc<dyn SessionStore>>,
    cache: Arc<CountCache>,
    /// The builder's summarizer, used whatever the configuration says.
    summarizer: Option<Arc<dyn Summarizer>>,
    /// The index of what left the context, when recall is on.
    recall: Option<Arc<crate::recall::RecallIndex>>,
    /// Index writes still running, per session: a recall of the session
    /// waits for them (`manager/recall.rs`).
    recall_pending: Mutex<HashMap<String, Vec<tokio::task::JoinHandle<()>>>>,
}

/// Compacts agent context before model calls. Cheap to clone; share one
/// across threads and sessions.
#[derive(Clone)]
pub struct CompactManager {
    inner: Arc<Inner>,
}

struct Inner {
    config: Config,
    limits: ModelLimits,
    estimator: Estimator,
    summarizer: Arc<dyn Summarizer>,
    memory: memory::MemoryRuntime,
    /// The managers of the effective configurations that overlays asked
    /// for, built once each (empty in such a manager itself).
    overlaid: overlay::Overlaid,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for CompactManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactManager")
            .field("model", &self.inner.limits.model)
            .field("max_tokens", &self.inner.limits.max_tokens)
            .field("mode", &self.inner.config.policy.mode)
            .finish_non_exhaustive()
    }
}

impl CompactManager {
    /// A manager for `config` on `engine`, sharing `shared` with every
    /// manager built for an overlay of it.
    fn assemble(config: Config, engine: Engine, shared: Arc<Shared>) -> Self {
        CompactManager {
            inner: Arc::new(Inner {
                config,
                limits: engine.limits,
                estimator: engine.estimator,
                summarizer: engine.summarizer,
                memory: engine.memory,
                overlaid: overlay::Overlaid::default(),
                shared,
            }),
        }
    }

    /// A builder from a validated configuration.
    pub fn builder(config: Config) -> Builder {
        Builder {
            config,
            summarizer: None,
            exporters: Vec::new(),
            config_exporters: true,
            cache: None,
            archive: archive::ArchiveSetup::default(),
            memory_store: None,
            store: None,
            recall: None,
        }
    }

    /// A manager with the configured summarizer (`summarizer.kind`), memory
    /// layers (`memory`) and exporter.
    pub fn new(config: Config) -> Result<Self, CompactError> {
        Self::builder(config).build()
    }

    /// The configuration the manager was built with.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The resolved model limits.
    pub fn limits(&self) -> &ModelLimits {
        &self.inner.limits
    }

    /// The estimator (shared encoder and count cache).
    pub fn estimator(&self) -> &Estimator {
        &self.inner.estimator
    }

    /// The event dispatcher (for stats, flushing at shutdown).
    pub fn dispatcher(&self) -> &Dispatcher {
        &self.inner.shared.dispatcher
    }

    /// The session store, when sessions are stored outside this manager
    /// (for its `write_stats`).
    pub fn session_store(&self) -> Option<&Arc<dyn SessionStore>> {
        self.inner.shared.store.as_ref()
    }

    /// The token estimate of a request, without touching any session.
    pub fn estimate(&self, messages: &[Message], tools: &[Value]) -> Estimate {
        self.inner.estimator.estimate(
            &self.inner.limits.model,
            self.inner.limits.max_tokens,
            messages,
            tools,
        )
    }

    /// The token estimate of a request anchored to `usage_tokens`, the provider's
    /// reported `usage.input_tokens` of the response that produced the last reply of
    /// `messages` (everything before that reply was the request it reports on). With
    /// no reply in `messages` there is nothing to anchor and the estimate is the pure
    /// one ([`crate::estimate::Basis::Estimate`]).
    pub fn estimate_with_usage(
        &self,
        messages: &[Message],
        tools: &[Value],
        usage_tokens: usize,
    ) -> Estimate {
        match crate::estimate::covered_before_last_reply(messages) {
            Some(covered) => self.inner.estimator.estimate_anchored(
                &self.inner.limits.model,
                self.inner.limits.max_tokens,
                messages,
                tools,
                covered,
                usage_tokens,
            ),
            None => self.estimate(messages, tools),
        }
    }

    /// docs/design.md §5: estimate, decide, compact if needed.
    pub async fn preflight(
        &self,
        session_id: &str,
        messages: Vec<Message>,
    ) -> Result<PreflightOutcome, CompactError> {
        self.preflight_with(
            session_id,
            PreflightRequest {
                messages,
                ..PreflightRequest::default()
            },
        )
        .await
    }

    /// Forced compaction, `note` carried into the events.
    pub async fn manual_compact(
        &self,
        session_id: &str,
        messages: Vec<Message>,
        note: &str,
    ) -> Result<PreflightOutcome, CompactError> {
        self.forced(session_id, messages, Forced::Manual, note)
            .await
    }

    /// The reactive path: the provider rejected the request as too long.
    /// Compacts to `reactive_target_pct` and returns messages for one retry.
    pub async fn on_context_overflow(
        &self,
        session_id: &str,
        messages: Vec<Message>,
        error: &str,
    ) -> Result<PreflightOutcome, CompactError> {
        self.forced(session_id, messages, Forced::ContextOverflow, error)
            .await
    }

    /// A compaction whatever the trigger says, for `why`.
    async fn forced(
        &self,
        session_id: &str,
        messages: Vec<Message>,
        why: Forced,
        note: &str,
    ) -> Result<PreflightOutcome, CompactError> {
        let req = PreflightRequest {
            messages,
            forced: Some(why),
            note: Some(note.to_owned()),
            ..PreflightRequest::default()
        };
        self.preflight_with(session_id, req).await
    }

    /// The session's record, created on first use.
    fn session_handle(&self, id: SessionId) -> Arc<tokio::sync::Mutex<Session>> {
        let mut map = self.sessions();
        map.entry(id)
            .or_insert_with_key(|id| Arc::new(tokio::sync::Mutex::new(Session::new(id.clone()))))
            .clone()
    }

    /// Forgets everything this manager holds about a session (its summary,
    /// its last call, its archive step, the secrets it taught the
    /// scrubber). Its archive stays. With a session store the stored record
    /// stays too: [`CompactManager::delete_session`] removes both.
    pub fn end_session(&self, id: &str) {
        let Ok(id) = SessionId::parse(id) else { return };
        let mut map = self.sessions();
        map.remove(&id);
    }

    /// How many sessions the manager holds state for.
    pub fn session_count(&self) -> usize {
        self.sessions().len()
    }

    /// The map of every session's state. A panic while it was held left
    /// no half-made entry (each change is one insert or remove), so a
    /// poisoned lock is used as it is.
    fn sessions(&self) -> std::sync::MutexGuard<'_, SessionMap> {
        self.inner
            .shared
            .sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
