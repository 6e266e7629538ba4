//! The invariants of docs/design.md §12 as checks anyone can run on a preflight:
//! the property tests, the soak harness, and users' own test suites.
//!
//! Each check compares the history the pipeline received (the *effective*
//! input: what the agent sent, with our previous output substituted for a
//! resent raw prefix) with what came out, without the Anthropic
//! breakpoints compact placed (`Report::cache_breakpoints`): they mark
//! messages, they do not compact them.

use std::collections::HashSet;

use serde::Serialize;

use crate::config::Policy;
use crate::estimate::Estimator;
use crate::manager::{CompactError, Report};
use crate::model::{ItemType, Message, lost_results, validate};
use crate::pipeline::{SUMMARY_HEADER, Tier};

/// One broken invariant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// Which invariant of docs/design.md §12 (1-5).
    pub invariant: u8,
    /// A short stable name, for counting by kind.
    pub kind: &'static str,
    /// What exactly is wrong, for a human (which call id, which message).
    pub detail: String,
}

fn v(invariant: u8, kind: &'static str, detail: String) -> Violation {
    Violation {
        invariant,
        kind,
        detail,
    }
}

/// Pinned as the pipeline sees it: our own summary (and its bridges) is never pinned,
/// whatever its role.
fn pinned(policy: &Policy, m: &Message) -> bool {
    !is_summary(m) && !m.is_bridge() && policy.pins(m)
}

/// Turns as the pipeline counts them: our summary never opens a turn.
fn turns_excluding_summary(input: &[Message]) -> Vec<std::ops::Range<usize>> {
    let gs = crate::model::groups(input);
    let mut starts = vec![0];
    for (gi, g) in gs.iter().enumerate() {
        if gi > 0 && input[g.start].starts_turn() && !is_summary(&input[g.start]) {
            starts.push(gi);
        }
    }
    if gs.is_empty() {
        return Vec::new();
    }
    starts
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            let end = starts.get(i + 1).copied().unwrap_or(gs.len());
            gs[s].start..gs[end - 1].end
        })
        .collect()
}

/// True for a summary message this crate wrote.
pub fn is_summary(m: &Message) -> bool {
    m.meta()
        .is_some_and(|meta| meta.contains_key("compact_summary_version"))
        && m.plain_text().starts_with(SUMMARY_HEADER)
}

/// Checks a successful preflight.
pub fn check_output(
    policy: &Policy,
    estimator: &Estimator,
    input: &[Message],
    tools: &[serde_json::Value],
    output: &[Message],
    report: &Report,
) -> Vec<Violation> {
    let mut out = Vec::new();
    // The Anthropic breakpoints compact placed are not compaction: the
    // invariants hold for the history without them.
    let unmarked;
    let output = if report.cache_breakpoints.is_empty() {
        output
    } else {
        unmarked = crate::cache::breakpoints::without(output, &report.cache_breakpoints);
        &unmarked[..]
    };

    // 1. No orphan, no lost result.
    let input_problems = validate(input);
    let before: HashSet<(u8, &str)> = input_problems.iter().map(|p| p.key()).collect();
    for p in validate(output) {
        if !before.contains(&p.key()) {
            out.push(v(1, "orphan", p.to_string()));
        }
    }
    for id in lost_results(input, output) {
        out.push(v(1, "lost_result", format!("call {id:?} lost its result")));
    }

    // 2. Pinned messages byte-identical, in order.
    let pinned_in: Vec<&Message> = input.iter().filter(|m| pinned(policy, m)).collect();
    let mut cursor = 0;
    for p in &pinned_in {
        match output[cursor..].iter().position(|m| m == *p) {
            Some(k) => cursor += k + 1,
            None => out.push(v(
                2,
                "pinned_changed",
                format!(
                    "pinned {} message missing, changed or out of order: {}",
                    p.role().as_str(),
                    preview(p)
                ),
            )),
        }
    }

    // 3. Within budget, and the report's count is the real count.
    if policy.mode != crate::config::Mode::None && report.tokens_after > report.budget {
        out.push(v(
            3,
            "over_budget",
            format!(
                "{} tokens after compaction, budget {}",
                report.tokens_after, report.budget
            ),
        ));
    }
    let recount = estimator
        .estimate(&report.model, report.max_tokens, output, tools)
        .t_est;
    if recount != report.tokens_after {
        out.push(v(
            3,
            "miscounted",
            format!(
                "report says {} tokens, recount gives {recount}",
                report.tokens_after
            ),
        ));
    }

    // 4. The last keep_recent_turns turns unchanged (unless reduced).
    if report.triggered
        && !report.tiers.contains(&Tier::ReduceKeep)
        && !report.tiers.contains(&Tier::Trim)
    {
        let ts = turns_excluding_summary(input);
        let k = policy.keep_recent_turns.min(ts.len());
        let recent_start = ts.len() - k;
        for t in &ts[recent_start..] {
            for m in &input[t.clone()] {
                // Ours, not turn content: the summary is replaced, bridges redrawn.
                if is_summary(m) || m.is_bridge() {
                    continue;
                }
                let same = output.iter().any(|o| o == m);
                let capped = !same
                    && m.kind().item == ItemType::ToolResult
                    && m.tool_outputs()
                        .iter()
                        .any(|(_, t)| t.chars().count() > policy.tool_result_max_chars)
                    && output.iter().any(|o| is_capped_version(m, o));
                if !same && !capped {
                    out.push(v(
                        4,
                        "recent_changed",
                        format!("recent message changed or dropped: {}", preview(m)),
                    ));
                }
            }
        }
    }

    // 5. At most one summary.
    let n = output.iter().filter(|m| is_summary(m)).count();
    if n > 1 {
        out.push(v(5, "several_summaries", format!("{n} summary messages")));
    }
    out
}

/// Checks a failed preflight: `InsufficientBudget` only when what cannot be
/// dropped truly exceeds the budget.
pub fn check_error(
    policy: &Policy,
    estimator: &Estimator,
    input: &[Message],
    err: &CompactError,
) -> Vec<Violation> {
    match err {
        CompactError::InsufficientBudget {
            pinned_tokens,
            tail_tokens,
            fixed_tokens,
            budget,
            ..
        } => {
            let mut out = Vec::new();
            if pinned_tokens + tail_tokens + fixed_tokens <= *budget {
                out.push(v(
                    3,
                    "false_insufficient",
                    format!("InsufficientBudget but {pinned_tokens}+{tail_tokens}+{fixed_tokens} <= {budget}"),
                ));
            }
            // The pinned count must be the real one (whole pinned groups).
            let gs = crate::model::groups(input);
            let real: usize = gs
                .iter()
                .filter(|g| input[(*g).clone()].iter().any(|m| pinned(policy, m)))
                .flat_map(|g| input[g.clone()].iter())
                .map(|m| estimator.count_message(m))
                .sum();
            if real != *pinned_tokens {
                out.push(v(
                    3,
                    "pinned_miscounted",
                    format!("error says pinned {pinned_tokens}, recount gives {real}"),
                ));
            }
            out
        }
        CompactError::Internal(m) => vec![v(1, "internal", m.clone())],
        other => vec![v(0, "unexpected_error", other.to_string())],
    }
}

/// `o` is `m` with its tool outputs capped: same calls, each output the same or its
/// head and tail kept.
fn is_capped_version(m: &Message, o: &Message) -> bool {
    if o.kind().results != m.kind().results {
        return false;
    }
    let (orig, cut) = (m.tool_outputs(), o.tool_outputs());
    orig.len() == cut.len()
        && orig
            .iter()
            .zip(&cut)
            .all(|((_, a), (_, b))| a == b || is_cut_of(a, b))
}

/// `cut` keeps the head and the tail of `orig` around a truncation marker.
fn is_cut_of(orig: &str, cut: &str) -> bool {
    let Some(marker) = cut.find("\n⟦truncated:") else {
        return false;
    };
    let head = &cut[..marker];
    let tail = cut[marker..]
        .split_once("⟧\n")
        .map(|(_, t)| t)
        .unwrap_or("");
    orig.starts_with(head) && orig.ends_with(tail)
}

fn preview(m: &Message) -> String {
    let t = m.plain_text();
    let mut p: String = t.chars().take(80).collect();
    if t.chars().count() > 80 {
        p.push('…');
    }
    p
}
