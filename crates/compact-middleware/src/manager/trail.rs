//! The events of one preflight: a `compact.preflight` parent span and one
//! child span per decision, each projected from the value its step
//! produced. Whatever way the preflight ends, [`Trail::close`] returns every
//! span built so far, so an error never loses the spans before it.

use serde_json::json;

use crate::config::Policy;
use crate::estimate::Estimate;
use crate::events::{Event, SpanBuilder, TraceEvent, names, payload};
use crate::pipeline::{Compaction, Insufficient};
use crate::trigger::{Decision, Forced};

use super::error::CompactError;
use super::recall::RecallWrite;
use super::report::Report;
use super::session::{Recognised, Session};

/// Most clauses a `compact.security` event lists (the count says all).
const MAX_NEUTRALIZED: usize = 50;

/// The spans of one preflight, in the order they happened.
pub(super) struct Trail {
    session_id: String,
    root: SpanBuilder,
    events: Vec<Event>,
    /// A compaction was archived: so are this preflight's events.
    archived: bool,
    /// How many of `events` were already handed to the exporters
    /// ([`Trail::ready`]): the rest go at the end.
    sent: usize,
    /// Nothing goes out before the end (see [`Trail::hold`]).
    held: bool,
    /// The recall index writes of this preflight's compactions, started
    /// when it ends.
    recall_writes: Vec<RecallWrite>,
}

/// A finished trail: every event, the preflight span last.
pub(super) struct Closed {
    pub(super) events: Vec<Event>,
    pub(super) archived: bool,
    /// The first `sent` events were exported already; all are archived.
    pub(super) sent: usize,
    /// The recall index writes to start ([`Trail::queue_recall_write`]).
    pub(super) recall_writes: Vec<RecallWrite>,
}

/// A span started when its step started.
pub(super) struct Started(SpanBuilder);

impl Trail {
    /// Opens the preflight span; the session's trace goes first the first
    /// time the session is seen.
    pub(super) fn open(session: &mut Session, agent_name: &str) -> Self {
        let session_id = session.id().as_str().to_owned();
        let mut events = Vec::new();
        if !session.trace_sent {
            events.push(TraceEvent::session(&session_id, agent_name).into());
            session.trace_sent = true;
        }
        Trail {
            root: SpanBuilder::start(&session_id, names::PREFLIGHT).kind(names::KIND_COMPACTION),
            session_id,
            events,
            archived: false,
            sent: 0,
            held: false,
            recall_writes: Vec::new(),
        }
    }

    /// Queues a compaction's recall index write for the end of the
    /// preflight.
    pub(super) fn queue_recall_write(&mut self, write: RecallWrite) {
        self.recall_writes.push(write);
    }

    /// Keeps every event for the end of the preflight: the caller's note
    /// is in the decision span, and only the end knows every secret
    /// fragment this preflight's archive writes teach the session.
    pub(super) fn hold(&mut self) {
        self.held = true;
    }

    /// The events finished since the last call, for exporting before the
    /// preflight ends (they stay in the trail for the archive); none when held.
    pub(super) fn ready(&mut self) -> Vec<Event> {
        if self.held {
            return Vec::new();
        }
        let ready = self.events[self.sent..].to_vec();
        self.sent = self.events.len();
        ready
    }

    pub(super) fn session_id(&self) -> &str {
        &self.session_id
    }

    pub(super) fn root_id(&self) -> &str {
        self.root.span_id()
    }

    /// A child span of this preflight, starting now.
    pub(super) fn start(&self, name: &str) -> Started {
        Started(self.child(SpanBuilder::start(&self.session_id, name)))
    }

    fn child(&self, span: SpanBuilder) -> SpanBuilder {
        span.parent(self.root.span_id())
            .kind(names::KIND_COMPACTION)
    }

    /// Adds an event built elsewhere (archive results).
    pub(super) fn push(&mut self, event: Event) {
        self.events.push(event);
    }

    pub(super) fn mark_archived(&mut self) {
        self.archived = true;
    }

    /// `compact.token_estimate`.
    pub(super) fn estimated(
        &mut self,
        span: Started,
        est: &Estimate,
        input: &Recognised,
        injected: &[String],
        problems: &[crate::model::Problem],
        estimate_error: Option<f64>,
    ) {
        self.events.push(
            span.0.finish_payload(&payload::TokenEstimate {
                model: est.model.clone(),
                t_est: est.t_est as u64,
                max_tokens: est.max_tokens as u64,
                usage_pct: est.usage_pct,
                breakdown: json!(est.breakdown),
                messages: input.messages.len() as u64,
                reused_messages: input.reused as u64,
                injected: injected.to_vec(),
                input_problems: json!(problems),
                basis: match est.basis {
                    crate::estimate::Basis::Estimate => "estimate",
                    crate::estimate::Basis::Usage => "usage",
                }
                .to_string(),
                estimate_error,
            }),
        );
    }

    /// `compact.trigger_decision`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn decided(
        &mut self,
        span: Started,
        decision: &Decision,
        est: &Estimate,
        policy: &Policy,
        user_turns: usize,
        forced: Option<Forced>,
        note: Option<&str>,
    ) {
        self.events
            .push(span.0.finish_payload(&payload::TriggerDecision {
                triggered: decision.triggered,
                reason: decision.reason.clone(),
                t_est: est.t_est as u64,
                max_tokens: est.max_tokens as u64,
                trigger_pct: policy.trigger_pct,
                user_turns: user_turns as u64,
                policy: json!({
                    "mode": policy.mode,
                    "trigger_pct": policy.trigger_pct,
                    "target_pct": policy.target_pct,
                    "hard_cap_buffer": policy.hard_cap_buffer,
                    "keep_recent_turns": policy.keep_recent_turns,
                    "keep_tool_io_pairs": policy.keep_tool_io_pairs,
                    "strategy": policy.strategy,
                }),
                forced: json!(forced),
                note: note.map(str::to_owned),
            }));
    }

    /// `compact.error` for a budget the pinned messages do not fit.
    pub(super) fn insufficient(&mut self, ins: &Insufficient, err: &CompactError) {
        let span = self.start(names::ERROR);
        self.events.push(span.0.finish_payload(&payload::Failure {
            error_type: err.kind().into(),
            message: err.to_string(),
            pinned_tokens: Some(ins.pinned_tokens as u64),
            tail_tokens: Some(ins.tail_tokens as u64),
            budget: Some(ins.budget as u64),
            fallback: "none".into(),
            ..Default::default()
        }));
    }

    /// `compact.error` for a call that failed outside the pipeline.
    pub(super) fn failed(&mut self, err: &CompactError) {
        let span = self.start(names::ERROR);
        self.events.push(span.0.finish_payload(&payload::Failure {
            error_type: err.kind().into(),
            message: err.to_string(),
            fallback: "none".into(),
            ..Default::default()
        }));
    }

    /// The spans of a compaction: a `compact.error` per fallback, a
    /// `compact.security` when tool text was kept out, then
    /// `compact.summary_created` when a summary was committed.
    pub(super) fn compacted(&mut self, c: &Compaction) {
        for f in &c.fallbacks {
            let span = self.start(names::ERROR);
            self.events.push(span.0.finish_payload(&payload::Failure {
                error_type: f.error_type.clone(),
                message: f.message.clone(),
                fallback: f.fallback.clone(),
                ..Default::default()
            }));
        }
        self.security(c);
        if let Some(s) = &c.summary {
            let span = self.child(SpanBuilder::started_ago(
                &self.session_id,
                names::SUMMARY_CREATED,
                s.latency_ms,
            ));
            self.events.push(
                span.finish_payload(&payload::SummaryCreated {
                    strategy: s.strategy.to_string(),
                    summarizer: s.summarizer.clone(),
                    version: u64::from(s.version),
                    input_messages: s.input_messages as u64,
                    input_tokens: s.input_tokens as u64,
                    summary_tokens: s.summary_tokens as u64,
                    compression_ratio: s.compression_ratio,
                    model: s.model.clone(),
                    latency_ms: s.latency_ms,
                    prompt_tokens: s.prompt_tokens,
                    completion_tokens: s.completion_tokens,
                    prompt: s.prompt.map(|p| p.as_str().to_owned()),
                    cached_prompt_tokens: s.cached_prompt_tokens,
                    output_text: s.body.clone(),
                    facts_kept: s.facts.as_ref().map(|f| f.kept as u64),
                    facts_dropped: s.facts.as_ref().map(|f| f.dropped as u64),
                    facts_shrunk: s.facts.as_ref().map(|f| f.shrunk as u64),
                    facts_superseded: s.facts.as_ref().map(|f| f.superseded as u64),
                    dropped_keys: s
                        .facts
                        .as_ref()
                        .map(|f| f.dropped_keys.clone())
                        .unwrap_or_default(),
                }),
            );
        }
    }

    /// `compact.security` when the compaction kept tool text that read as
    /// orders to the agent out of the summary.
    pub(super) fn security(&mut self, c: &Compaction) {
        if c.neutralized.is_empty() {
            return;
        }
        let n = c.neutralized.len();
        let span = self.start(names::SECURITY);
        self.events.push(span.0.finish_payload(&payload::Security {
            severity: "medium".into(),
            message: format!(
                "{n} clause{} of tool output that reads as instructions kept out of the summary",
                if n == 1 { "" } else { "s" }
            ),
            count: n as u64,
            neutralized: c.neutralized.iter().take(MAX_NEUTRALIZED).cloned().collect(),
        }));
    }

    /// `compact.pruned_messages`: what left the context at archive `step`.
    pub(super) fn pruned(&mut self, c: &Compaction, tokens_before: usize, step: u32) {
        let span = self.start(names::PRUNED_MESSAGES);
        self.events
            .push(span.0.finish_payload(&payload::PrunedMessages {
                pruned_count: (c.summarized + c.dropped) as u64,
                capped: c.capped as u64,
                cleared: c.cleared as u64,
                summarized: c.summarized as u64,
                dropped: c.dropped as u64,
                kept: json!(c.kept),
                tiers: json!(c.tiers),
                tokens_before: tokens_before as u64,
                tokens_after: c.tokens_after as u64,
                step: u64::from(step),
            }));
    }

    /// Finishes the preflight span with the outcome and returns every event.
    pub(super) fn close(self, outcome: Result<&Report, &CompactError>) -> Closed {
        let Trail {
            session_id,
            root,
            mut events,
            archived,
            sent,
            held: _,
            recall_writes,
        } = self;
        let root = match outcome {
            Ok(r) => {
                let cache = r.cache.as_ref();
                let reported = cache.and_then(|c| c.reported);
                root.finish_payload(&payload::Preflight {
                    session_id,
                    triggered: r.triggered,
                    reason: Some(r.reason.clone()),
                    tokens_before: Some(r.tokens_before as u64),
                    tokens_after: Some(r.tokens_after as u64),
                    tiers: Some(json!(r.tiers)),
                    duration_us: Some(r.duration_us),
                    error: None,
                    cache_read_predicted: cache.map(|c| c.predicted_read as u64),
                    prefix_shared_tokens: cache.map(|c| c.shared_tokens as u64),
                    prefix_broken_tokens: cache.and_then(|c| c.broken_tokens).map(|n| n as u64),
                    cost_predicted_usd: cache.and_then(|c| c.predicted_input_cost_usd),
                    input_tokens_reported: reported.map(|u| u.input_tokens as u64),
                    cache_read_reported: reported.map(|u| u.cache_read as u64),
                    cache_write_reported: reported
                        .map(|u| (u.cache_write + u.cache_write_1h) as u64),
                    cost_reported_usd: cache.and_then(|c| c.reported_cost_usd),
                })
            }
            Err(e) => root.finish_payload(&payload::Preflight {
                session_id,
                // Only a budget failure is known to have triggered.
                triggered: matches!(e, CompactError::InsufficientBudget { .. }),
                error: Some(e.kind().into()),
                ..Default::default()
            }),
        };
        events.push(root);
        Closed {
            events,
            archived,
            sent,
            recall_writes,
        }
    }
}
