//! Tiers 1 and 2 applied to the work: oversized tool outputs capped (head and tail kept, the cut read into the ledger), old tool I/O replaced by placeholders.

use super::*;

impl Work<'_> {
    /// Tier 1 over every non-pinned message.
    pub(super) fn cap(&mut self) {
        let indices: Vec<usize> = (0..self.layout.groups.len())
            .filter(|&gi| !self.layout.pinned[gi] && !self.layout.summary[gi])
            .flat_map(|gi| self.layout.groups[gi].clone())
            .collect();
        self.cap_indices(indices, self.policy.tool_result_max_chars);
    }

    /// Caps the tool results in `indices` to `max_chars`; the part cut
    /// goes to the ledger first.
    pub(super) fn cap_indices(&mut self, indices: Vec<usize>, max_chars: usize) {
        let original = &self.original;
        let recall_id = self.recall.as_ref().map(|key| {
            move |i: usize, call_id: &str| tiers::received_recall_id(original, key, i, call_id)
        });
        let changed = tiers::cap_tool_results(
            &mut self.msgs,
            indices,
            max_chars,
            &self.names,
            recall_id.as_ref().map(|f| f as tiers::RecallIdOf<'_>),
        );
        let cut: Vec<SummaryEntry> = changed
            .iter()
            .filter_map(|&i| {
                let before = self.original[i].tool_output()?;
                let after = self.msgs[i].tool_output()?;
                let (head, tail) = kept_ends(&before, &after);
                let middle = widen_to_lines(&before, head, before.len() - tail).to_owned();
                Some(self.entry(i, Some(middle)))
            })
            .collect();
        self.out.ledger.absorb(&cut);
        if !changed.is_empty() {
            if !self.out.tiers.contains(&Tier::ToolResultBudget) {
                self.out.tiers.push(Tier::ToolResultBudget);
            }
            self.capped.extend(changed.iter().copied());
            self.out.capped = self.capped.len();
            self.recount(&changed);
        }
    }

    /// Rounds of the latest turn (groups after its opening user message).
    pub(super) fn latest_rounds(&self) -> usize {
        self.layout.latest_rounds(&self.msgs).len()
    }

    /// The configured keep counts as a plan: the last `keep_recent_turns`
    /// turns, unless the latest turn alone has more than
    /// `keep_recent_rounds` rounds (an agent's run): then its opening
    /// message and its last `keep_recent_rounds` rounds, its older rounds
    /// compacting like older turns.
    pub(super) fn initial_plan(&self) -> Plan {
        let rounds = self.policy.keep_recent_rounds;
        if self.latest_rounds() > rounds {
            self.layout
                .plan_rounds(&self.msgs, rounds, self.policy.keep_tool_io_pairs)
        } else {
            self.layout.plan(
                self.policy.keep_recent_turns,
                self.policy.keep_tool_io_pairs,
            )
        }
    }

    /// Tier 2 over the remainder of `plan`.
    pub(super) fn clear(&mut self, plan: &Plan) {
        let filter = ToolFilter {
            include: self.policy.include_tools.clone(),
            exclude: self.policy.exclude_tools.clone(),
        };
        let indices: Vec<usize> = plan.messages_in(Class::Remainder).collect();
        let before = self.cleared.len();
        self.clear_indices(indices, self.policy.clear_tool_inputs, &filter);
        // Clearing inside the recent turns is a reduction of what they keep.
        if plan.recent_rounds.is_some()
            && self.cleared.len() > before
            && !self.out.tiers.contains(&Tier::ReduceKeep)
        {
            self.out.tiers.push(Tier::ReduceKeep);
        }
    }

    /// Replaces the tool I/O in `indices` with placeholders; what it held
    /// goes to the ledger first.
    pub(super) fn clear_indices(
        &mut self,
        indices: Vec<usize>,
        clear_inputs: bool,
        filter: &ToolFilter,
    ) {
        let original = &self.original;
        let recall_id = self.recall.as_ref().map(|key| {
            move |i: usize, call_id: &str| tiers::received_recall_id(original, key, i, call_id)
        });
        let changed = tiers::clear_tool_io(
            &mut self.msgs,
            indices,
            clear_inputs,
            filter,
            &self.names,
            recall_id.as_ref().map(|f| f as tiers::RecallIdOf<'_>),
        );
        self.absorb(changed.iter().copied());
        if !changed.is_empty() {
            if !self.out.tiers.contains(&Tier::ClearToolIo) {
                self.out.tiers.push(Tier::ClearToolIo);
            }
            self.cleared.extend(changed.iter().copied());
            self.out.cleared = self.cleared.len();
            self.recount(&changed);
        }
    }
}

/// The common prefix and suffix of `a` and `b`, in bytes of `a`, at char
/// boundaries: what a cap kept of the original.
fn kept_ends(a: &str, b: &str) -> (usize, usize) {
    let head = a
        .char_indices()
        .zip(b.chars())
        .find(|((_, x), y)| x != y)
        .map_or(a.len().min(b.len()), |((i, _), _)| i);
    let tail = a
        .char_indices()
        .rev()
        .zip(b.chars().rev())
        .find(|((_, x), y)| x != y)
        .map_or(a.len().min(b.len()), |((i, x), _)| {
            a.len() - i - x.len_utf8()
        });
    let tail = tail.min(a.len() - head);
    (head, tail)
}

/// The cut-out part of `text` (`start..end`) widened to whole lines: a cut
/// falls inside a line at each end, and half a line is neither the line nor
/// a fact. The two lines the cut runs through are read whole here, once;
/// later reads of the capped output skip their halves beside the mark
/// (`summarize/facts/tool.rs`).
fn widen_to_lines(text: &str, start: usize, end: usize) -> &str {
    let from = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let to = text[end..].find('\n').map_or(text.len(), |i| end + i);
    &text[from..to]
}
