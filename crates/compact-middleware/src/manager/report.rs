//! What a preflight returns: the messages and the [`Report`], which is
//! derived from the steps' values (estimate, decision, compaction) and
//! from nothing else.

use serde::Serialize;

use crate::config::Mode;
use crate::estimate::{Anchor, Basis, Breakdown, Estimate};
use crate::model::{Message, Problem, Repaired};
use crate::pipeline::{Compaction, Fallback, Kept, Limits, Tier};
use crate::trigger::{Decision, Forced};

use super::session::Recognised;

pub use super::session::Continuation;

/// The result of a preflight: the messages to send, and what was done.
#[derive(Debug, Clone)]
pub struct PreflightOutcome {
    /// The history to send: compacted if the call triggered, else the input.
    pub messages: Vec<Message>,
    /// What the call did.
    pub report: Report,
    /// The tools to send: the request's, and with `recall.advertise` the
    /// `compact_recall` tool last (in the request's wire).
    pub tools: Vec<serde_json::Value>,
}

impl PreflightOutcome {
    /// The history as compaction left it: `messages` without the Anthropic
    /// breakpoints compact placed (`Report::cache_breakpoints`).
    pub fn compacted_messages(&self) -> Vec<Message> {
        crate::cache::breakpoints::without(&self.messages, &self.report.cache_breakpoints)
    }

    /// The messages as the provider must see them (`meta`/`compacted` stripped).
    pub fn provider_messages(&self) -> Vec<serde_json::Value> {
        self.messages
            .iter()
            .map(Message::to_provider_value)
            .collect()
    }
}

/// What a preflight did, in numbers.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The session the call belongs to.
    pub session_id: String,
    /// The compaction mode in effect (`policy.mode`).
    pub mode: Mode,
    /// Whether the call compacted (see [`Decision`]).
    pub triggered: bool,
    /// Every trigger condition that held, joined with `; ` (or why nothing triggered).
    pub reason: String,
    /// Why compaction was forced; `None` when it was not.
    pub forced: Option<Forced>,
    /// The caller's free text (manual compaction note, provider error), if any.
    pub note: Option<String>,
    /// The model budgeted for.
    pub model: String,
    /// The model's context window in tokens.
    pub max_tokens: usize,
    /// Hard ceiling: `max_tokens - hard_cap_buffer`.
    pub budget: usize,
    /// Where compaction aims: `target_pct` of the window.
    pub target: usize,
    /// Estimated tokens of the request as received.
    pub tokens_before: usize,
    /// Estimated tokens of the request as sent (`tokens_before` when nothing ran).
    pub tokens_after: usize,
    /// `tokens_before / max_tokens` as a fraction (1.0 = full).
    pub usage_before: f64,
    /// `tokens_after / max_tokens` as a fraction (1.0 = full).
    pub usage_after: f64,
    /// Breakdown of the input estimate (of the pure estimate when `basis` is `usage`).
    pub breakdown: Breakdown,
    /// Which figure `tokens_before` rests on: the pure estimate, or the provider's
    /// reported usage of the last request plus the estimate of what was appended
    /// (`tokens_after` is then the estimate of the output times
    /// `anchor.t_est / anchor.pure_t_est`, when that is above 1).
    pub basis: Basis,
    /// With `basis: usage`: the provider's figure, what it covered, and the observed
    /// error of the pure estimate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anchor: Option<Anchor>,
    /// The last observed relative error of the pure estimate against the provider's
    /// reported usage in this session (`(estimate - usage) / usage`: positive when
    /// over); `None` until a call passes the usage.
    pub estimate_error: Option<f64>,
    /// The tiers that changed something, in the order they ran.
    pub tiers: Vec<Tier>,
    /// How many messages each kept layer holds in the output.
    pub kept: Kept,
    /// Tool results capped (tier 1).
    pub capped: usize,
    /// Tool results/inputs replaced by placeholders (tier 2).
    pub cleared: usize,
    /// Messages folded into the summary.
    pub summarized: usize,
    /// Messages dropped without summary (trim, pruning-only fallback).
    pub dropped: usize,
    /// Version of the summary this call wrote; `None` when it wrote none.
    pub summary_version: Option<u32>,
    /// Tokens of the summary body this call wrote; `None` when it wrote none.
    pub summary_tokens: Option<usize>,
    /// The prompt a model was sent for that summary (`summarizer.prompt`:
    /// `fresh` or `agent_prefix`, after any fallback to `fresh`); left out
    /// when no model wrote it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary_prompt: Option<crate::config::SummaryPrompt>,
    /// Prompt tokens of that request the provider served from its cache,
    /// when it said (`agent_prefix` is meant to raise it); left out
    /// otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary_cached_prompt_tokens: Option<u64>,
    /// Whether `tokens_after` is at or below `target`.
    pub target_reached: bool,
    /// How the input relates to the session's previous call.
    pub continuation: Continuation,
    /// Raw messages whose compacted form was reused from the previous call.
    pub reused_messages: usize,
    /// Pairing problems already present in the input (never made worse; with
    /// `policy.repair: fix`, the ones that were repaired).
    pub input_problems: Vec<Problem>,
    /// What `policy.repair: fix` did about them (empty otherwise).
    pub repaired: Vec<Repaired>,
    /// Every step down the summarizer's fallback chain, in order.
    pub fallbacks: Vec<Fallback>,
    /// Blocks injected into the instructions (`memory_files`,
    /// `cross_session`, `conversation_memory`); never the stored history.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub injected: Vec<String>,
    /// Wall-clock time of the preflight, in microseconds.
    pub duration_us: u64,
    /// Which strategy level set each key the call's overlays overrode
    /// (empty without overlays).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub config_sources: Vec<super::ConfigSource>,
    /// Tool text that read as orders to the agent and was kept out of the
    /// summary by this call (the `compact.security` event); left out when
    /// none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub neutralized: Vec<crate::summarize::Neutralized>,
    /// The provider's prompt cache around this call: what it can serve of
    /// the returned request (predicted against the session's previous
    /// request), the tokens of that request a rewrite broke, and the
    /// caller's reported figures of the previous response, priced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<crate::cache::PromptCache>,
    /// The Anthropic `cache_control` breakpoints compact put on the returned
    /// history (`policy.cache_breakpoints: auto`): which message, which
    /// layer it closes, which block carries it. Left out when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cache_breakpoints: Vec<crate::cache::breakpoints::Placed>,
}

/// The values a report is made of, before compaction.
pub(super) struct Facts<'a> {
    pub(super) session_id: &'a str,
    pub(super) mode: Mode,
    pub(super) forced: Option<Forced>,
    pub(super) note: Option<String>,
    pub(super) input: &'a Recognised,
    pub(super) estimate: &'a Estimate,
    pub(super) decision: &'a Decision,
    pub(super) limits: Limits,
    pub(super) input_problems: Vec<Problem>,
    pub(super) repaired: Vec<Repaired>,
    pub(super) injected: Vec<String>,
    pub(super) estimate_error: Option<f64>,
}

impl Report {
    /// The report of a call that changed nothing (yet).
    pub(super) fn new(f: Facts<'_>) -> Self {
        let est = f.estimate;
        Report {
            session_id: f.session_id.to_owned(),
            mode: f.mode,
            triggered: f.decision.triggered,
            reason: f.decision.reason.clone(),
            forced: f.forced,
            note: f.note,
            model: est.model.clone(),
            max_tokens: f.limits.max_tokens,
            budget: f.limits.budget,
            target: f.limits.target,
            tokens_before: est.t_est,
            tokens_after: est.t_est,
            usage_before: est.usage_pct,
            usage_after: est.usage_pct,
            breakdown: est.breakdown,
            basis: est.basis,
            anchor: est.anchor,
            estimate_error: f.estimate_error,
            tiers: Vec::new(),
            kept: Kept::default(),
            capped: 0,
            cleared: 0,
            summarized: 0,
            dropped: 0,
            summary_version: None,
            summary_tokens: None,
            summary_prompt: None,
            summary_cached_prompt_tokens: None,
            target_reached: est.t_est <= f.limits.target,
            continuation: f.input.continuation,
            reused_messages: f.input.reused,
            input_problems: f.input_problems,
            repaired: f.repaired,
            fallbacks: Vec::new(),
            injected: f.injected,
            duration_us: 0,
            config_sources: Vec::new(),
            neutralized: Vec::new(),
            cache: None,
            cache_breakpoints: Vec::new(),
        }
    }

    /// Adds what a compaction did.
    pub(super) fn apply(&mut self, c: &Compaction) {
        // The pipeline counts in estimated tokens; anchoring says what they stand for
        // (see `Limits::scaled`).
        let scale = self.anchor.map_or(1.0, |a| a.scale());
        self.tokens_after = (c.tokens_after as f64 * scale).round() as usize;
        self.usage_after = crate::estimate::usage(self.tokens_after, self.max_tokens);
        self.tiers = c.tiers.clone();
        self.kept = c.kept;
        self.capped = c.capped;
        self.cleared = c.cleared;
        self.summarized = c.summarized;
        self.dropped = c.dropped;
        self.summary_version = c.summary.as_ref().map(|s| s.version);
        self.summary_tokens = c.summary.as_ref().map(|s| s.summary_tokens);
        self.summary_prompt = c.summary.as_ref().and_then(|s| s.prompt);
        self.summary_cached_prompt_tokens = c.summary.as_ref().and_then(|s| s.cached_prompt_tokens);
        self.target_reached = c.target_reached;
        self.fallbacks = c.fallbacks.clone();
        self.neutralized = c.neutralized.clone();
    }
}
