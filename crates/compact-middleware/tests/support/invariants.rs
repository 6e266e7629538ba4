//! The invariants of docs/design.md §12 (1-5) as reusable checkers.
//!
//! Every checker returns `Err(description)` instead of panicking, so property
//! tests can `prop_assert!` on it and a soak harness can log and count. The
//! definitions are independent of the engine's internals: pinning, turns and
//! token sums are recomputed here from the policy and the public model API.
//!
//! Use a [`Tracker`] per session: it mirrors what the agent sent and what it
//! got back, derives the effective input of each call (mode b: the previous
//! output in place of the raw prefix it replaced) and knows which messages are
//! the manager's own summaries.
#![allow(dead_code)]

use std::collections::HashSet;

use compact_middleware::config::{Mode, Policy};
use compact_middleware::manager::ContinuationKind;
use compact_middleware::model::{Message, Problem, Role, groups, lost_results, validate};
use compact_middleware::pipeline::Tier;
use compact_middleware::tokens::{self, REPLY_PRIMING};
use compact_middleware::{CompactError, CompactManager, PreflightOutcome};
use serde_json::Value;

/// The marker `cap_text` puts between the head and the tail it keeps.
pub(crate) const TRUNCATION_MARKER: &str = "\n⟦truncated: ";

/// What one session has seen so far.
#[derive(Debug, Default, Clone)]
pub(crate) struct Tracker {
    /// The raw input of the last successful call.
    last_raw: Vec<Value>,
    /// The output of the last successful call, without the Anthropic
    /// breakpoints the manager placed on it (what it remembers).
    last_out: Vec<Message>,
    /// The same as the agent got it, breakpoints included.
    last_sent: Vec<Message>,
    /// Every summary message the manager emitted in this session, with and
    /// without `meta`.
    summaries: HashSet<String>,
}

fn key(v: &Value) -> String {
    v.to_string()
}

impl Tracker {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// True when `m` is a summary message this manager emitted earlier.
    pub(crate) fn is_known_summary(&self, m: &Message) -> bool {
        self.summaries.contains(&key(&m.to_value()))
    }

    /// `sent` with the Anthropic breakpoints the manager placed on its last
    /// output taken off the messages that are those marked messages sent
    /// back (as the agent got them or as their provider copies), as the
    /// manager does before anything else.
    fn unmarked(&self, sent: &[Message]) -> Vec<Message> {
        sent.iter()
            .map(|m| {
                let v = m.to_value();
                for (s, o) in self.last_sent.iter().zip(&self.last_out) {
                    if s == o {
                        continue;
                    }
                    if v == s.to_value() {
                        return o.clone();
                    }
                    if v == s.to_provider_value() {
                        return o.provider_copy();
                    }
                }
                m.clone()
            })
            .collect()
    }

    /// The input the manager actually works on for `sent`: when `sent`
    /// starts with the previous raw input (and that input was rewritten),
    /// the previous output replaces that prefix.
    pub(crate) fn effective(&self, sent: &[Message]) -> (Vec<Message>, ContinuationKind) {
        let sent = self.unmarked(sent);
        let raw: Vec<Value> = sent.iter().map(Message::to_value).collect();
        let out: Vec<Value> = self.last_out.iter().map(Message::to_value).collect();
        if !self.last_raw.is_empty() && raw.starts_with(&self.last_raw) && self.last_raw != out {
            let mut eff = self.last_out.clone();
            eff.extend(sent[self.last_raw.len()..].iter().cloned());
            return (eff, ContinuationKind::RawPrefix);
        }
        let prov: Vec<Value> = self
            .last_out
            .iter()
            .map(Message::to_provider_value)
            .collect();
        let continues = !out.is_empty()
            && raw.len() >= out.len()
            && (0..out.len()).all(|i| raw[i] == out[i] || raw[i] == prov[i]);
        if continues {
            (sent, ContinuationKind::OutputPrefix)
        } else {
            (sent, ContinuationKind::Fresh)
        }
    }

    /// Records a successful call.
    pub(crate) fn record(&mut self, sent: &[Message], outcome: &PreflightOutcome) {
        self.last_raw = self.unmarked(sent).iter().map(Message::to_value).collect();
        // What the manager remembers (without its breakpoints) and what the
        // agent got.
        self.last_out = outcome.compacted_messages();
        self.last_sent = outcome.messages.clone();
        for m in &self.last_out {
            if is_summary_shaped(m) {
                self.summaries.insert(key(&m.to_value()));
                self.summaries.insert(key(&m.to_provider_value()));
            }
        }
    }

    /// The output of the last successful call.
    pub(crate) fn last_output(&self) -> &[Message] {
        &self.last_out
    }
}

/// A message the pipeline wrote as a summary: our `meta` marker and the
/// `compacted` flag (an agent cannot produce these by accident).
pub(crate) fn is_summary_shaped(m: &Message) -> bool {
    m.is_compacted()
        && m.meta()
            .and_then(|meta| meta.get("compact_summary_version"))
            .and_then(Value::as_u64)
            .is_some()
}

/// A bridge the pipeline put between two messages of one role in an Anthropic history
/// (never pinned, never content).
pub(crate) fn is_bridge(m: &Message) -> bool {
    m.is_bridge()
}

/// True when the history is Anthropic Messages (the summary is then a user message).
pub(crate) fn is_anthropic(msgs: &[Message]) -> bool {
    msgs.iter().any(|m| m.kind().shape.is_anthropic())
}

/// Pinned per message, groups closed: a group with a pinned message is
/// pinned whole. Known summaries (and their bridges) are never pinned.
pub(crate) fn pinned_mask(policy: &Policy, msgs: &[Message], tracker: &Tracker) -> Vec<bool> {
    let never: Vec<Role> = policy.roles_never_prune.to_vec();
    let own = |m: &Message| {
        !tracker.is_known_summary(m)
            && !is_bridge(m)
            && (never.contains(&m.role())
                || m.is_protected(&policy.protected_flag)
                || m.kind().compaction)
    };
    let mut mask = vec![false; msgs.len()];
    for g in groups(msgs) {
        if msgs[g.clone()].iter().any(own) {
            for i in g {
                mask[i] = true;
            }
        }
    }
    mask
}

/// [`pinned_mask`] plus the task the pipeline keeps (`policy.keep_task`):
/// the first user message that opens a turn after the last provider
/// compaction item.
pub(crate) fn anchored_mask(policy: &Policy, msgs: &[Message], tracker: &Tracker) -> Vec<bool> {
    let mut mask = pinned_mask(policy, msgs, tracker);
    if !policy.keep_task {
        return mask;
    }
    let gs = groups(msgs);
    let from = gs
        .iter()
        .rposition(|g| msgs[g.clone()].iter().any(|m| m.kind().compaction))
        .map_or(0, |gi| gi + 1);
    if let Some(g) = gs[from..].iter().find(|g| {
        let m = &msgs[g.start];
        m.starts_turn() && !tracker.is_known_summary(m)
    }) {
        for i in g.clone() {
            mask[i] = true;
        }
    }
    mask
}

/// Message indices of the last `k` turns of `msgs`. A turn opens at a group
/// whose first message is a user message that is not a tool result and not
/// one of our summaries; groups before the first such message form a
/// leading turn.
pub(crate) fn recent_turn_start(msgs: &[Message], k: usize, tracker: &Tracker) -> usize {
    let gs = groups(msgs);
    let mut starts = Vec::new();
    for (gi, g) in gs.iter().enumerate() {
        let m = &msgs[g.start];
        if gi == 0 || (m.starts_turn() && !tracker.is_known_summary(m)) {
            starts.push(g.start);
        }
    }
    if k == 0 || starts.is_empty() {
        return msgs.len();
    }
    if k >= starts.len() {
        0
    } else {
        starts[starts.len() - k]
    }
}

/// Invariant 1: no new pairing problem, no call that lost its result.
pub(crate) fn check_no_orphans(input: &[Message], output: &[Message]) -> Result<(), String> {
    let input_problems = validate(input);
    let before: HashSet<_> = input_problems.iter().map(|p| p.key()).collect();
    let new: Vec<Problem> = validate(output)
        .into_iter()
        .filter(|p| !before.contains(&p.key()))
        .collect();
    if !new.is_empty() {
        return Err(format!("invariant 1: new pairing problems {new:?}"));
    }
    let lost = lost_results(input, output);
    if !lost.is_empty() {
        return Err(format!("invariant 1: calls lost their results {lost:?}"));
    }
    Ok(())
}

/// Invariant 2: every pinned input message comes out byte-identical, in order.
pub(crate) fn check_pinned(
    policy: &Policy,
    input: &[Message],
    output: &[Message],
    tracker: &Tracker,
) -> Result<(), String> {
    let mask = pinned_mask(policy, input, tracker);
    let out: Vec<Value> = output.iter().map(Message::to_value).collect();
    let mut pos = 0;
    for (i, m) in input.iter().enumerate().filter(|(i, _)| mask[*i]) {
        let v = m.to_value();
        match out[pos..].iter().position(|o| *o == v) {
            Some(p) => pos += p + 1,
            None => {
                return Err(format!(
                    "invariant 2: pinned input message {i} missing, changed or out of order: {v}"
                ));
            }
        }
    }
    Ok(())
}

/// Independent token sums: the estimator's counting rules applied here.
pub(crate) fn count_messages(manager: &CompactManager, msgs: &[Message]) -> usize {
    let c = manager.estimator().counter();
    msgs.iter().map(|m| tokens::count_item(c, m.raw())).sum()
}

pub(crate) fn fixed_tokens(manager: &CompactManager, tools: &[Value]) -> usize {
    let c = manager.estimator().counter();
    let t = if tools.is_empty() {
        0
    } else {
        tokens::count_tools(c, tools)
    };
    t + REPLY_PRIMING
}

/// Invariant 3, both outcomes.
pub(crate) fn check_budget(
    manager: &CompactManager,
    input: &[Message],
    tools: &[Value],
    result: &Result<PreflightOutcome, CompactError>,
    tracker: &Tracker,
) -> Result<(), String> {
    let cfg = manager.config();
    let policy = &cfg.policy;
    let max = manager.limits().max_tokens;
    let budget = max.saturating_sub(policy.hard_cap_buffer);
    match result {
        Ok(o) => {
            let r = &o.report;
            if r.budget != budget {
                return Err(format!(
                    "report.budget {} != max_tokens - hard_cap_buffer {budget}",
                    r.budget
                ));
            }
            // Counted as compaction left it: a breakpoint is no token.
            let messages = o.compacted_messages();
            let t = manager.estimate(&messages, tools).t_est;
            if t != r.tokens_after {
                return Err(format!(
                    "invariant 3: estimate of output {t} != report.tokens_after {}",
                    r.tokens_after
                ));
            }
            let independent = count_messages(manager, &messages) + fixed_tokens(manager, tools);
            if independent != t {
                return Err(format!(
                    "independent count {independent} != estimate {t} of the output"
                ));
            }
            let before = count_messages(manager, input) + fixed_tokens(manager, tools);
            if r.tokens_before != before {
                return Err(format!(
                    "report.tokens_before {} != independent count of the effective input {before}",
                    r.tokens_before
                ));
            }
            if policy.mode != Mode::None && r.tokens_after > r.budget {
                return Err(format!(
                    "invariant 3: tokens_after {} > budget {}; report {}",
                    r.tokens_after,
                    r.budget,
                    serde_json::to_string(r).unwrap_or_default()
                ));
            }
            Ok(())
        }
        Err(CompactError::InsufficientBudget {
            pinned_tokens,
            tail_tokens,
            fixed_tokens: fixed,
            budget: b,
            ..
        }) => {
            if policy.mode == Mode::None {
                return Err("InsufficientBudget in mode none".into());
            }
            if *b != budget {
                return Err(format!("InsufficientBudget.budget {b} != {budget}"));
            }
            if pinned_tokens + tail_tokens + fixed <= *b {
                return Err(format!(
                    "invariant 3: InsufficientBudget but pinned {pinned_tokens} + tail {tail_tokens} + fixed {fixed} <= budget {b}"
                ));
            }
            let mask = pinned_mask(policy, input, tracker);
            let pinned: Vec<Message> = input
                .iter()
                .zip(&mask)
                .filter(|(_, p)| **p)
                .map(|(m, _)| m.clone())
                .collect();
            let mine = count_messages(manager, &pinned);
            if mine != *pinned_tokens {
                return Err(format!(
                    "invariant 3: InsufficientBudget.pinned_tokens {pinned_tokens} != independent sum {mine}"
                ));
            }
            let my_fixed = fixed_tokens(manager, tools);
            if my_fixed != *fixed {
                return Err(format!(
                    "InsufficientBudget.fixed_tokens {fixed} != independent {my_fixed}"
                ));
            }
            Ok(())
        }
        Err(e) => Err(format!("unexpected error: {e}")),
    }
}

/// True when `capped` is `original` cut by tier 1: at most `max_chars`
/// characters, the original's head, the marker, the original's tail.
pub(crate) fn is_capped_form(original: &str, capped: &str, max_chars: usize) -> bool {
    if capped.chars().count() > max_chars || original.chars().count() <= max_chars {
        return false;
    }
    let Some(at) = capped.find(TRUNCATION_MARKER) else {
        return false;
    };
    let head = &capped[..at];
    let rest = &capped[at + 1..];
    let Some(end) = rest.find("⟧\n") else {
        return false;
    };
    let tail = &rest[end + "⟧\n".len()..];
    !head.is_empty() && original.starts_with(head) && original.ends_with(tail)
}

/// The value `original` has after tier 1 replaced its outputs with those of `now`.
fn with_outputs(original: &Message, now: &Message) -> Value {
    let mut m = original.clone();
    for (id, text) in now.tool_outputs() {
        m.set_tool_output_for(id, text.into_owned());
    }
    m.set_compacted();
    m.to_value()
}

/// `b` is `a` with some tool outputs capped by tier 1, nothing else changed.
fn is_capped_message(a: &Message, b: &Message, max_chars: usize) -> bool {
    let (before, after) = (a.tool_outputs(), b.tool_outputs());
    !before.is_empty()
        && before.len() == after.len()
        && before
            .iter()
            .zip(&after)
            .all(|((ia, oa), (ib, ob))| ia == ib && (oa == ob || is_capped_form(oa, ob, max_chars)))
        && with_outputs(a, b) == b.to_value()
}

/// Invariant 4: the last `keep_recent_turns` turns come out unchanged unless
/// `ReduceKeep` is reported; oversized tool outputs may be capped.
pub(crate) fn check_recent(
    policy: &Policy,
    input: &[Message],
    outcome: &PreflightOutcome,
    tracker: &Tracker,
) -> Result<(), String> {
    if outcome.report.tiers.contains(&Tier::ReduceKeep) {
        return Ok(());
    }
    let start = recent_turn_start(input, policy.keep_recent_turns, tracker);
    // Our own summaries are not turn content: an old one inside the window
    // (possible once an agent keeps the provider copy, which strips pins) is
    // folded into the new one, which may sit elsewhere. Compare the rest.
    let ours = |m: &Message| is_summary_shaped(m) || tracker.is_known_summary(m) || is_bridge(m);
    let recent: Vec<&Message> = input[start..].iter().filter(|m| !ours(m)).collect();
    let out: Vec<&Message> = outcome.messages.iter().filter(|m| !ours(m)).collect();
    if out.len() < recent.len() {
        return Err(format!(
            "invariant 4: output has {} messages, the last {} turns have {}",
            out.len(),
            policy.keep_recent_turns,
            recent.len()
        ));
    }
    let tail = &out[out.len() - recent.len()..];
    for (i, (a, b)) in recent.iter().zip(tail).enumerate() {
        let (a, b) = (*a, *b);
        if a == b {
            continue;
        }
        let capped_ok = is_capped_message(a, b, policy.tool_result_max_chars);
        if !capped_ok {
            return Err(format!(
                "invariant 4: recent message {} changed (tiers {:?}):\n  in:  {}\n  out: {}",
                start + i,
                outcome.report.tiers,
                a.to_value(),
                b.to_value()
            ));
        }
    }
    Ok(())
}

/// Invariant 5: at most one summary message, and the reported one is there,
/// with its header, version, role, and after the leading pinned messages.
pub(crate) fn check_one_summary(
    policy: &Policy,
    input: &[Message],
    outcome: &PreflightOutcome,
    tracker: &Tracker,
) -> Result<(), String> {
    let out = &outcome.messages;
    let summaries: Vec<usize> = (0..out.len())
        .filter(|&i| !is_bridge(&out[i]))
        .filter(|&i| is_summary_shaped(&out[i]) || tracker.is_known_summary(&out[i]))
        .collect();
    if summaries.len() > 1 {
        return Err(format!(
            "invariant 5: {} summary messages at {summaries:?}",
            summaries.len()
        ));
    }
    if let Some(v) = outcome.report.summary_version {
        let Some(&i) = summaries.first() else {
            return Err(format!("summary v{v} reported but not in the output"));
        };
        let m = &out[i];
        let header = format!("COMPACT-SUMMARY v{v}");
        let text = m.plain_text();
        if !(text == header || text.starts_with(&format!("{header}\n"))) {
            return Err(format!(
                "summary text does not start with {header:?}: {text:?}"
            ));
        }
        if m.meta().and_then(|x| x.get("compact_summary_version")) != Some(&Value::from(v)) {
            return Err("summary meta.compact_summary_version differs from the report".into());
        }
        // An Anthropic history has no system messages and opens with the user's.
        let role = if is_anthropic(input) {
            Role::User
        } else {
            policy.summary_role
        };
        if m.role() != role {
            return Err(format!("summary role {:?} != {role:?}", m.role()));
        }
        // Everything before it is pinned or the task (layout: pinned,
        // task, summary, recent).
        let mask = anchored_mask(policy, input, tracker);
        let pinned: HashSet<String> = input
            .iter()
            .zip(&mask)
            .filter(|(_, p)| **p)
            .map(|(m, _)| key(&m.to_value()))
            .collect();
        if let Some(j) =
            (0..i).find(|&j| !is_bridge(&out[j]) && !pinned.contains(&key(&out[j].to_value())))
        {
            return Err(format!(
                "summary at {i} comes after non-pinned message {j}: {}",
                out[j].to_value()
            ));
        }
    }
    Ok(())
}

/// All of 1-5 for one call. `sent` is what the agent passed; `tracker` must
/// not have recorded this call yet. Records it on success.
pub(crate) fn check_call(
    manager: &CompactManager,
    tracker: &mut Tracker,
    sent: &[Message],
    tools: &[Value],
    result: &Result<PreflightOutcome, CompactError>,
) -> Result<(), String> {
    let policy = &manager.config().policy;
    let (input, cont) = tracker.effective(sent);
    check_budget(manager, &input, tools, result, tracker)?;
    let Ok(sent_back) = result else {
        return Ok(());
    };
    // The invariants are about compaction: checked on the history without
    // the Anthropic breakpoints the manager placed.
    let unmarked = PreflightOutcome {
        messages: sent_back.compacted_messages(),
        report: sent_back.report.clone(),
        tools: sent_back.tools.clone(),
    };
    let o = &unmarked;
    if o.report.continuation != cont {
        return Err(format!(
            "continuation {:?}, expected {cont:?}",
            o.report.continuation
        ));
    }
    if (policy.mode == Mode::None || !o.report.triggered) && o.messages != input {
        return Err("output differs from input without compaction".into());
    }
    check_no_orphans(&input, &o.messages)?;
    check_pinned(policy, &input, &o.messages, tracker)?;
    check_recent(policy, &input, o, tracker)?;
    check_one_summary(policy, &input, o, tracker)?;
    tracker.record(sent, sent_back);
    Ok(())
}
