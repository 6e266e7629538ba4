use serde::Serialize;

use crate::config::Mode;
use crate::estimate::Breakdown;
use crate::model::{Message, Problem};
use crate::pipeline::{Fallback, Kept, Tier};
use crate::trigger::Forced;

use super::session;

/// The result of a preflight: the messages to send, and what was done.
#[derive(Debug, Clone)]
pub struct PreflightOutcome {
    pub messages: Vec<Message>,
    pub report: Report,
}

impl PreflightOutcome {
    /// The messages as the provider must see them (`meta`/`compacted` stripped).
    pub fn provider_messages(&self) -> Vec<serde_json::Value> {
        self.messages
            .iter()
            .map(Message::to_provider_value)
            .collect()
    }
}

/// How this call's input related to the previous call of the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Continuation {
    /// The full raw history again: our previous output replaced its prefix.
    RawPrefix,
    /// Our previous output plus new messages.
    OutputPrefix,
    /// Not recognised (new session or a rewritten history).
    Fresh,
}

impl From<session::Continuation> for Continuation {
    fn from(c: session::Continuation) -> Self {
        match c {
            session::Continuation::RawPrefix(_) => Continuation::RawPrefix,
            session::Continuation::OutputPrefix(_) => Continuation::OutputPrefix,
            session::Continuation::Fresh => Continuation::Fresh,
        }
    }
}

/// What a preflight did, in numbers.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub session_id: String,
    pub mode: Mode,
    pub triggered: bool,
    pub reason: String,
    pub forced: Option<Forced>,
    pub note: Option<String>,
    pub model: String,
    pub max_tokens: usize,
    /// Hard ceiling: `max_tokens - hard_cap_buffer`.
    pub budget: usize,
    /// Where compaction aims: `target_pct` of the window.
    pub target: usize,
    pub tokens_before: usize,
    pub tokens_after: usize,
    pub usage_before: f64,
    pub usage_after: f64,
    /// Breakdown of the input estimate.
    pub breakdown: Breakdown,
    pub tiers: Vec<Tier>,
    pub kept: Kept,
    /// Tool results capped (tier 1).
    pub capped: usize,
    /// Tool results/inputs replaced by placeholders (tier 2).
    pub cleared: usize,
    /// Messages folded into the summary.
    pub summarized: usize,
    /// Messages dropped without summary (trim, pruning-only fallback).
    pub dropped: usize,
    pub summary_version: Option<u32>,
    pub summary_tokens: Option<usize>,
    pub target_reached: bool,
    pub continuation: Continuation,
    /// Raw messages whose compacted form was reused from the previous call.
    pub reused_messages: usize,
    /// Pairing problems already present in the input (never made worse).
    pub input_problems: Vec<Problem>,
    pub fallbacks: Vec<Fallback>,
    /// Blocks injected into the instructions (`memory_files`,
    /// `cross_session`, `conversation_memory`); never the stored history.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub injected: Vec<String>,
    pub duration_us: u64,
}
