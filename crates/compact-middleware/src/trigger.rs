//! The trigger decision (docs/design.md §5 step 5): whether this call compacts, and why.

use serde::Serialize;

use crate::config::{Mode, Policy};
use crate::estimate::Estimate;

/// Why compaction was forced rather than triggered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Forced {
    /// `manual_compact`.
    Manual,
    /// `on_context_overflow`: the provider rejected the request.
    ContextOverflow,
}

/// The outcome of step 2.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    /// Whether this call compacts (a forced call always does, unless the
    /// mode is `none`).
    pub triggered: bool,
    /// Every condition that held, joined with `; ` (or why nothing triggered).
    pub reason: String,
    /// A turn trigger fired: the remainder is summarized even if the token
    /// target is already met.
    #[serde(skip)]
    pub turn_triggered: bool,
}

/// Decides whether to compact.
pub fn decide(
    policy: &Policy,
    est: &Estimate,
    user_turns: usize,
    forced: Option<Forced>,
) -> Decision {
    if policy.mode == Mode::None {
        return Decision {
            triggered: false,
            reason: "mode none".into(),
            turn_triggered: false,
        };
    }
    let mut reasons: Vec<String> = Vec::new();
    match forced {
        Some(Forced::Manual) => reasons.push("forced: manual".into()),
        Some(Forced::ContextOverflow) => reasons.push("forced: context_overflow".into()),
        None => {}
    }
    if est.usage_pct >= policy.trigger_pct {
        reasons.push("usage_pct >= trigger_pct".into());
    }
    if est.t_est > est.max_tokens.saturating_sub(policy.hard_cap_buffer) {
        reasons.push("t_est > max_tokens - hard_cap_buffer".into());
    }
    if let Some(b) = policy.token_budget
        && est.t_est > b
    {
        reasons.push("t_est > token_budget".into());
    }
    if let Some(b) = policy.token_soft_budget
        && est.t_est > b
    {
        reasons.push("t_est > token_soft_budget".into());
    }
    if let Some(p) = policy.token_remaining_pct
        && 1.0 - est.usage_pct < p
    {
        reasons.push("remaining_pct < token_remaining_pct".into());
    }
    let mut turn_triggered = false;
    if let Some(n) = policy.compact_trigger_turns
        && user_turns > n
    {
        reasons.push("user_turns > compact_trigger_turns".into());
        turn_triggered = true;
    }
    if reasons.is_empty() {
        Decision {
            triggered: false,
            reason: "usage_pct < trigger_pct".into(),
            turn_triggered: false,
        }
    } else {
        Decision {
            triggered: true,
            reason: reasons.join("; "),
            turn_triggered,
        }
    }
}
