//! The events of one preflight: a `compact.preflight` parent span and one
//! child span per decision, each projected from the value its step
//! produced. Whatever way the preflight ends, [`Trail::close`] returns every
//! span built so far, so an error never loses the spans before it.

use serde_json::json;

use crate::config::Policy;
use crate::estimate::Estimate;
use crate::events::{Event, SpanBuilder, SpanStatus, TraceEvent, names};
use crate::pipeline::{Compaction, Insufficient};
use crate::trigger::{Decision, Forced};

use super::error::CompactError;
use super::report::Report;
use super::session::{Recognised, Session};

/// The spans of one preflight, in the order they happened.
pub(super) struct Trail {
    session_id: String,
    root: SpanBuilder,
    events: Vec<Event>,
    /// A compaction was archived: so are this preflight's events.
    archived: bool,
}

/// A finished trail: every event, the preflight span last.
pub(super) struct Closed {
    pub(super) events: Vec<Event>,
    pub(super) archived: bool,
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
        }
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
    ) {
        self.events.push(
            span.0
                .data("model", json!(est.model))
                .data("t_est", json!(est.t_est))
                .data("max_tokens", json!(est.max_tokens))
                .data("usage_pct", json!(est.usage_pct))
                .data("breakdown", json!(est.breakdown))
                .data("messages", json!(input.messages.len()))
                .data("reused_messages", json!(input.reused))
                .data("injected", json!(injected))
                .finish(SpanStatus::Ok),
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
        self.events.push(
            span.0
                .data("triggered", json!(decision.triggered))
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
                .data("forced", json!(forced))
                .data("note", json!(note))
                .finish(SpanStatus::Ok),
        );
    }

    /// `compact.error` for a budget the pinned messages do not fit.
    pub(super) fn insufficient(&mut self, ins: &Insufficient, err: &CompactError) {
        let span = self.start(names::ERROR);
        self.events.push(
            span.0
                .data("error_type", json!("InsufficientBudget"))
                .data("message", json!(err.to_string()))
                .data("pinned_tokens", json!(ins.pinned_tokens))
                .data("tail_tokens", json!(ins.tail_tokens))
                .data("budget", json!(ins.budget))
                .data("fallback", json!("none"))
                .finish(SpanStatus::Error),
        );
    }

    /// `compact.error` for a call that failed outside the pipeline.
    pub(super) fn failed(&mut self, error_type: &str, err: &CompactError) {
        let span = self.start(names::ERROR);
        self.events.push(
            span.0
                .data("error_type", json!(error_type))
                .data("message", json!(err.to_string()))
                .data("fallback", json!("none"))
                .finish(SpanStatus::Error),
        );
    }

    /// The spans of a compaction: a `compact.error` per fallback, then
    /// `compact.summary_created` when a summary was committed.
    pub(super) fn compacted(&mut self, c: &Compaction) {
        for f in &c.fallbacks {
            let span = self.start(names::ERROR);
            self.events.push(
                span.0
                    .data("error_type", json!(f.error_type))
                    .data("message", json!(f.message))
                    .data("fallback", json!(f.fallback))
                    .finish(SpanStatus::Error),
            );
        }
        if let Some(s) = &c.summary {
            let span = self.child(SpanBuilder::started_ago(
                &self.session_id,
                names::SUMMARY_CREATED,
                s.latency_ms,
            ));
            self.events.push(
                span.data("strategy", json!(s.strategy))
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
    }

    /// `compact.pruned_messages`: what left the context at archive `step`.
    pub(super) fn pruned(&mut self, c: &Compaction, tokens_before: usize, step: u32) {
        let span = self.start(names::PRUNED_MESSAGES);
        self.events.push(
            span.0
                .data("pruned_count", json!(c.summarized + c.dropped))
                .data("capped", json!(c.capped))
                .data("cleared", json!(c.cleared))
                .data("summarized", json!(c.summarized))
                .data("dropped", json!(c.dropped))
                .data("kept", json!(c.kept))
                .data("tiers", json!(c.tiers))
                .data("tokens_before", json!(tokens_before))
                .data("tokens_after", json!(c.tokens_after))
                .data("step", json!(step))
                .finish(SpanStatus::Ok),
        );
    }

    /// Finishes the preflight span with the outcome and returns every event.
    pub(super) fn close(self, outcome: Result<&Report, &CompactError>) -> Closed {
        let Trail {
            session_id,
            root,
            mut events,
            archived,
        } = self;
        let root = root.data("session_id", json!(session_id));
        let root = match outcome {
            Ok(r) => root
                .data("triggered", json!(r.triggered))
                .data("reason", json!(r.reason))
                .data("tokens_before", json!(r.tokens_before))
                .data("tokens_after", json!(r.tokens_after))
                .data("tiers", json!(r.tiers))
                .data("duration_us", json!(r.duration_us))
                .finish(SpanStatus::Ok),
            Err(e) => {
                let root = if matches!(e, CompactError::InsufficientBudget { .. }) {
                    root.data("triggered", json!(true))
                } else {
                    root
                };
                root.data("error", json!(e.kind()))
                    .finish(SpanStatus::Error)
            }
        };
        events.push(root);
        Closed { events, archived }
    }
}
