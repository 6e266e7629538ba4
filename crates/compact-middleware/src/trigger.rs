//! The trigger decision (docs/design.md §5 step 5): whether this call compacts, and why.

use serde::Serialize;

use std::collections::HashSet;

use crate::cache::pace::Plan;
use crate::config::{Mode, Policy};
use crate::estimate::Estimate;
use crate::model::Message;

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

/// Adds the cost trigger of `policy.cache: auto` (`crate::cache::pace`) to
/// a decision the token triggers left untriggered: the context grew a
/// planned run past the depth of the last compaction. A decision without a
/// plan (`off`, mode `none`, pace unknown) is returned as it is.
pub fn when_it_pays(decision: Decision, plan: Option<&Plan>, est: &Estimate) -> Decision {
    match plan {
        Some(plan) if !decision.triggered && est.t_est >= plan.trigger => Decision {
            triggered: true,
            reason: format!(
                "cost: t_est >= {} (it pays at {} tokens a call)",
                plan.trigger, plan.growth
            ),
            turn_triggered: false,
        },
        _ => decision,
    }
}

/// The first provider compaction in `messages` that is *fresh*: the provider compacted
/// this context in its last response, so compacting it again now would fold what the
/// provider just summarized. `seen` holds the content hashes of the session's previous
/// call (its input and output); a compaction among them is not fresh. Without a previous
/// call (`None`: a new session, or a new process) a compaction is fresh when at most one
/// user turn follows it: the agent appended the provider's response and at most the
/// next user message.
pub fn fresh_provider_compaction(
    messages: &[Message],
    seen: Option<&HashSet<u128>>,
) -> Option<usize> {
    messages.iter().enumerate().find_map(|(i, m)| {
        if !m.kind().compaction {
            return None;
        }
        let fresh = match seen {
            Some(seen) => !seen.contains(&m.content_hash()) && !seen.contains(&m.provider_hash()),
            None => messages[i + 1..].iter().filter(|m| m.starts_turn()).count() <= 1,
        };
        fresh.then_some(i)
    })
}

/// Step 2 with a provider compaction in the request: a compaction that triggered is
/// skipped when the request carries a fresh provider compaction at `fresh` (message
/// index), and the reason says so. Forced compaction (manual, context overflow) still
/// runs: the caller asked for it, or the provider refused the request.
pub fn defer_to_provider(d: Decision, fresh: Option<usize>, forced: Option<Forced>) -> Decision {
    match fresh {
        Some(at) if d.triggered && forced.is_none() => Decision {
            triggered: false,
            reason: format!(
                "skipped: the provider compacted this context in its last response (fresh compaction at $[{at}]); would have compacted because {}",
                d.reason
            ),
            turn_triggered: false,
        },
        Some(at) if d.triggered => Decision {
            reason: format!(
                "{}; forced despite a fresh provider compaction at $[{at}]",
                d.reason
            ),
            ..d
        },
        _ => d,
    }
}
