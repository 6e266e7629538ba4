//! [`CompactManager`]: the entry point agents call before every model call.
//!
//! It owns the shared pieces (encoder and count cache, summarizer, event
//! dispatcher) and per-session state behind a per-session lock: concurrent
//! preflights of one session serialize, different sessions run in parallel.

mod archive;
mod error;
mod hook;
mod memory;
mod report;
mod session;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::{Value, json};

use crate::config::{Config, ExporterKind};
use crate::estimate::{Estimate, Estimator, ModelLimits};
use crate::events::{self, DispatchOptions, Dispatcher, Event, Exporter, SpanBuilder, SpanStatus};
use crate::model::{Message, validate};
use crate::pipeline::{self, Input, Limits};
use crate::summarize::Summarizer;
use crate::tokens::{self, CountCache};
use crate::trigger::{self, Forced};

pub use error::CompactError;
pub use hook::{BeforeModelCall, ModelCallContext};
pub use report::{Continuation as ContinuationKind, PreflightOutcome, Report};
pub use session::{Continuation, SessionState};

/// Entries in the shared per-message count cache.
const COUNT_CACHE_CAPACITY: usize = 200_000;

/// One preflight call, with everything optional spelled out.
#[derive(Debug, Clone, Default)]
pub struct PreflightRequest {
    pub messages: Vec<Message>,
    /// Tool schemas sent with the model call (counted, never changed).
    pub tools: Vec<Value>,
    /// Compact even if nothing triggers.
    pub forced: Option<Forced>,
    /// Free text carried into the events (manual compaction note, provider error).
    pub note: Option<String>,
    /// Reject input that already has pairing problems instead of reporting them.
    pub strict: bool,
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
}

impl Builder {
    /// Uses `store` for the memory layers instead of opening `memory.store_path`.
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

    pub fn build(self) -> Result<CompactManager, CompactError> {
        let limits = ModelLimits::from_config(&self.config).map_err(CompactError::Config)?;
        let counter = tokens::counter(self.config.tokenizer, limits.encoding);
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
        let summarizer = match self.summarizer {
            Some(s) => s,
            None => memory::configured_summarizer(&self.config)?,
        };
        let estimator = Estimator::new(counter, cache);
        let memory = memory::MemoryRuntime::build(
            &self.config,
            self.memory_store,
            &summarizer,
            &estimator,
            &limits,
        )?;
        Ok(CompactManager {
            inner: Arc::new(Inner {
                config: self.config,
                limits,
                estimator,
                summarizer,
                memory,
                dispatcher,
                sessions: Mutex::new(HashMap::new()),
                archive,
            }),
        })
    }
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
    dispatcher: Dispatcher,
    sessions: Mutex<HashMap<String, Arc<tokio::sync::Mutex<SessionState>>>>,
    archive: archive::ArchiveState,
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
        }
    }

    /// A manager with the configured summarizer (`summarizer.kind`), memory
    /// layers (`memory`) and exporter.
    pub fn new(config: Config) -> Result<Self, CompactError> {
        Self::builder(config).build()
    }

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
        &self.inner.dispatcher
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

    /// DESIGN §5: estimate, decide, compact if needed.
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
        self.preflight_with(
            session_id,
            PreflightRequest {
                messages,
                forced: Some(Forced::Manual),
                note: Some(note.to_string()),
                ..PreflightRequest::default()
            },
        )
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
        self.preflight_with(
            session_id,
            PreflightRequest {
                messages,
                forced: Some(Forced::ContextOverflow),
                note: Some(error.to_string()),
                ..PreflightRequest::default()
            },
        )
        .await
    }

    fn session(&self, id: &str) -> Arc<tokio::sync::Mutex<SessionState>> {
        let mut map = self
            .inner
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        map.entry(id.to_string()).or_default().clone()
    }

    /// Forgets a session's state (its summary version, its last call).
    pub fn end_session(&self, id: &str) {
        let mut map = self
            .inner
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        map.remove(id);
    }

    /// The full preflight.
    pub async fn preflight_with(
        &self,
        session_id: &str,
        req: PreflightRequest,
    ) -> Result<PreflightOutcome, CompactError> {
        if session_id.is_empty() {
            return Err(CompactError::InvalidSession("session id is empty".into()));
        }
        self.check_archive_session(session_id)?;
        let started = Instant::now();
        let session = self.session(session_id);
        let mut state = session.lock().await;
        let inner = &*self.inner;
        let policy = &inner.config.policy;
        let mut emitted: Vec<Event> = Vec::new();
        let root = SpanBuilder::start(session_id, events::names::PREFLIGHT)
            .kind(events::names::KIND_COMPACTION);
        let root_id = root.span_id().to_string();
        if !state.trace_sent {
            emitted.push(
                events::TraceEvent::session(session_id, &inner.config.telemetry.agent_name).into(),
            );
            state.trace_sent = true;
        }

        // Sliding window and instructions injection (never the caller's history).
        let (messages, injected) = self.prepare_input(session_id, &mut state, req.messages);
        let req = PreflightRequest { messages, ..req };

        // Which part of this input we already compacted last time.
        let raw_hashes: Vec<u128> = req.messages.iter().map(Message::content_hash).collect();
        let continuation = state.continuation(&raw_hashes);
        let (effective, reused) = match continuation {
            Continuation::RawPrefix(n) => {
                let mut eff = state.last_out.clone();
                eff.extend(req.messages.into_iter().skip(n));
                (eff, n)
            }
            Continuation::OutputPrefix(n) => (req.messages, n),
            Continuation::Fresh => (req.messages, 0),
        };
        let input_problems = validate(&effective);
        if req.strict && !input_problems.is_empty() {
            return Err(CompactError::InvalidInput(
                input_problems
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; "),
            ));
        }
        let summary_index = state.find_summary(&effective);

        // 1. Estimate.
        let span = SpanBuilder::start(session_id, events::names::TOKEN_ESTIMATE)
            .parent(&root_id)
            .kind(events::names::KIND_COMPACTION);
        let est = self.estimate(&effective, &req.tools);
        emitted.push(
            span.data("model", json!(est.model))
                .data("t_est", json!(est.t_est))
                .data("max_tokens", json!(est.max_tokens))
                .data("usage_pct", json!(est.usage_pct))
                .data("breakdown", json!(est.breakdown))
                .data("messages", json!(effective.len()))
                .data("reused_messages", json!(reused))
                .data("injected", json!(injected))
                .finish(SpanStatus::Ok),
        );

        // 2. Decide.
        let span = SpanBuilder::start(session_id, events::names::TRIGGER_DECISION)
            .parent(&root_id)
            .kind(events::names::KIND_COMPACTION);
        let user_turns = effective
            .iter()
            .enumerate()
            .filter(|(i, m)| m.starts_turn() && Some(*i) != summary_index)
            .count();
        let decision = trigger::decide(policy, &est, user_turns, req.forced);
        let limits = self.run_limits(req.forced);
        emitted.push(
            span.data("triggered", json!(decision.triggered))
                .data("reason", json!(decision.reason))
                .data("t_est", json!(est.t_est))
                .data("max_tokens", json!(est.max_tokens))
                .data("trigger_pct", json!(policy.trigger_pct))
                .data("user_turns", json!(user_turns))
                .data(
                    "policy",
                    json!({
                        "mode": policy.mode,
                        "trigger_pct": policy.trigger_pct,
                        "target_pct": policy.target_pct,
                        "hard_cap_buffer": policy.hard_cap_buffer,
                        "keep_recent_turns": policy.keep_recent_turns,
                        "keep_tool_io_pairs": policy.keep_tool_io_pairs,
                        "strategy": policy.strategy,
                    }),
                )
                .data("forced", json!(req.forced))
                .data("note", json!(req.note))
                .finish(SpanStatus::Ok),
        );

        let mut report = Report {
            session_id: session_id.to_string(),
            mode: policy.mode,
            triggered: decision.triggered,
            reason: decision.reason.clone(),
            forced: req.forced,
            note: req.note.clone(),
            model: est.model.clone(),
            max_tokens: limits.max_tokens,
            budget: limits.budget,
            target: limits.target,
            tokens_before: est.t_est,
            tokens_after: est.t_est,
            usage_before: est.usage_pct,
            usage_after: est.usage_pct,
            breakdown: est.breakdown,
            tiers: Vec::new(),
            kept: Default::default(),
            capped: 0,
            cleared: 0,
            summarized: 0,
            dropped: 0,
            summary_version: None,
            summary_tokens: None,
            target_reached: est.t_est <= limits.target,
            continuation: continuation.into(),
            reused_messages: reused,
            input_problems,
            fallbacks: Vec::new(),
            injected,
            duration_us: 0,
        };

        let mut archived = false;
        let output = if !decision.triggered {
            effective
        } else {
            let breaker_open = state.breaker_open(policy.max_compact_failures, Instant::now());
            let input = Input {
                messages: effective.clone(),
                tools: &req.tools,
                summary_index,
                previous_summary: summary_index.and(state.summary_body.clone()),
                next_version: state.version + 1,
                limits,
                summarize_always: decision.turn_triggered || req.forced == Some(Forced::Manual),
                primary_disabled: breaker_open,
            };
            let run =
                pipeline::run(input, policy, &inner.estimator, inner.summarizer.as_ref()).await;
            let out = match run {
                Ok(out) => out,
                Err(ins) => {
                    let err = CompactError::insufficient(&ins, limits.max_tokens);
                    emitted.push(
                        SpanBuilder::start(session_id, events::names::ERROR)
                            .parent(&root_id)
                            .kind(events::names::KIND_COMPACTION)
                            .data("error_type", json!("InsufficientBudget"))
                            .data("message", json!(err.to_string()))
                            .data("pinned_tokens", json!(ins.pinned_tokens))
                            .data("tail_tokens", json!(ins.tail_tokens))
                            .data("budget", json!(ins.budget))
                            .data("fallback", json!("none"))
                            .finish(SpanStatus::Error),
                    );
                    emitted.push(
                        root.data("session_id", json!(session_id))
                            .data("triggered", json!(true))
                            .data("error", json!("InsufficientBudget"))
                            .finish(SpanStatus::Error),
                    );
                    self.finish_events(session_id, &root_id, false, emitted)
                        .await;
                    return Err(err);
                }
            };
            self.check_output(&effective, &out.messages, &report)?;
            state.record_summary_outcome(
                out.primary_failed,
                out.summary
                    .as_ref()
                    .is_some_and(|s| s.summarizer == inner.summarizer.name()),
                policy.max_compact_failures,
                std::time::Duration::from_secs(inner.config.summarizer.breaker_cooldown_secs),
                Instant::now(),
            );
            for f in &out.fallbacks {
                emitted.push(
                    SpanBuilder::start(session_id, events::names::ERROR)
                        .parent(&root_id)
                        .kind(events::names::KIND_COMPACTION)
                        .data("error_type", json!(f.error_type))
                        .data("message", json!(f.message))
                        .data("fallback", json!(f.fallback))
                        .finish(SpanStatus::Error),
                );
            }
            if let Some(s) = &out.summary {
                let role = crate::model::Role::from(policy.summary_role);
                let msg = crate::pipeline::summary::summary_message(role, s.version, &s.body);
                state.set_summary(&msg, s.version, s.body.clone());
                self.persist_cross_session(session_id, &state, &s.body);
                emitted.push(
                    SpanBuilder::started_ago(
                        session_id,
                        events::names::SUMMARY_CREATED,
                        s.latency_ms,
                    )
                    .parent(&root_id)
                    .kind(events::names::KIND_COMPACTION)
                    .data("strategy", json!(s.strategy))
                    .data("summarizer", json!(s.summarizer))
                    .data("version", json!(s.version))
                    .data("input_messages", json!(s.input_messages))
                    .data("input_tokens", json!(s.input_tokens))
                    .data("summary_tokens", json!(s.summary_tokens))
                    .data("compression_ratio", json!(s.compression_ratio))
                    .data("model", json!(s.model))
                    .data("latency_ms", json!(s.latency_ms))
                    .data("prompt_tokens", json!(s.prompt_tokens))
                    .data("completion_tokens", json!(s.completion_tokens))
                    .data("output_text", json!(s.body))
                    .finish(SpanStatus::Ok),
                );
            }
            let changed = out.capped + out.cleared + out.summarized + out.dropped > 0;
            if changed {
                state.step = self.archive_base_step(session_id, state.step).await;
                state.step += 1;
                emitted.push(
                    SpanBuilder::start(session_id, events::names::PRUNED_MESSAGES)
                        .parent(&root_id)
                        .kind(events::names::KIND_COMPACTION)
                        .data("pruned_count", json!(out.summarized + out.dropped))
                        .data("capped", json!(out.capped))
                        .data("cleared", json!(out.cleared))
                        .data("summarized", json!(out.summarized))
                        .data("dropped", json!(out.dropped))
                        .data("kept", json!(out.kept))
                        .data("tiers", json!(out.tiers))
                        .data("tokens_before", json!(est.t_est))
                        .data("tokens_after", json!(out.tokens_after))
                        .data("step", json!(state.step))
                        .finish(SpanStatus::Ok),
                );
                // DESIGN §5.4: everything that may leave the context is
                // archived before the compacted history is returned.
                archived = self
                    .archive_compaction(
                        session_id,
                        &root_id,
                        state.step,
                        &effective,
                        out.summary.as_ref(),
                        &mut emitted,
                    )
                    .await;
            }
            report.tokens_after = out.tokens_after;
            report.usage_after = crate::estimate::usage(out.tokens_after, limits.max_tokens);
            report.tiers = out.tiers;
            report.kept = out.kept;
            report.capped = out.capped;
            report.cleared = out.cleared;
            report.summarized = out.summarized;
            report.dropped = out.dropped;
            report.summary_version = out.summary.as_ref().map(|s| s.version);
            report.summary_tokens = out.summary.as_ref().map(|s| s.summary_tokens);
            report.target_reached = out.target_reached;
            report.fallbacks = out.fallbacks;
            out.messages
        };

        state.last_raw = raw_hashes;
        state.last_out_hashes = output.iter().map(Message::content_hash).collect();
        state.last_out_provider_hashes = output.iter().map(Message::provider_hash).collect();
        state.last_out = output.clone();

        report.duration_us = started.elapsed().as_micros() as u64;
        emitted.push(
            root.data("session_id", json!(session_id))
                .data("triggered", json!(report.triggered))
                .data("reason", json!(report.reason))
                .data("tokens_before", json!(report.tokens_before))
                .data("tokens_after", json!(report.tokens_after))
                .data("tiers", json!(report.tiers))
                .data("duration_us", json!(report.duration_us))
                .finish(SpanStatus::Ok),
        );
        // Still under the session lock, so this session's archive writes
        // stay in order.
        self.finish_events(session_id, &root_id, archived, emitted)
            .await;
        drop(state);
        Ok(PreflightOutcome {
            messages: output,
            report,
        })
    }

    /// Limits for one run: the reactive path aims lower.
    fn run_limits(&self, forced: Option<Forced>) -> Limits {
        let policy = &self.inner.config.policy;
        let max = self.inner.limits.max_tokens;
        let mut window = max;
        if let Some(b) = policy.token_soft_budget.or(policy.token_budget) {
            window = window.min(b);
        }
        let pct = match forced {
            Some(Forced::ContextOverflow) => policy.reactive_target_pct,
            _ => policy.target_pct,
        };
        let budget = max.saturating_sub(policy.hard_cap_buffer);
        Limits {
            max_tokens: max,
            budget,
            target: ((window as f64 * pct) as usize).min(budget),
        }
    }

    /// The invariants every output must satisfy; a violation is a bug, and
    /// returning a broken history would turn it into a provider 400.
    fn check_output(
        &self,
        input: &[Message],
        output: &[Message],
        report: &Report,
    ) -> Result<(), CompactError> {
        let before_problems = validate(input);
        let before: std::collections::HashSet<_> =
            before_problems.iter().map(|p| p.key()).collect();
        let new: Vec<String> = validate(output)
            .into_iter()
            .filter(|p| !before.contains(&p.key()))
            .map(|p| p.to_string())
            .collect();
        let lost = crate::model::lost_results(input, output);
        if !new.is_empty() || !lost.is_empty() {
            tracing::error!(session = %report.session_id, ?new, ?lost, "compaction produced an invalid history");
            return Err(CompactError::Internal(format!(
                "compaction would have produced an invalid history (new problems: {new:?}, lost results: {lost:?}); input returned unchanged is over budget, please report this"
            )));
        }
        Ok(())
    }
}
