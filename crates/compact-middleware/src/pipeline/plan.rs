//! The partition of a history into the layers of docs/design.md §5: pinned, recent
//! turns, kept tool I/O, and the remainder that may be cleared or summarized.

use std::ops::Range;

use crate::model::{ItemType, Message, groups};

/// What each atomic group is, for one choice of keep counts.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The atomic groups, as message index ranges in order.
    pub groups: Vec<Range<usize>>,
    /// The layer of each group (same index as `groups`).
    pub class: Vec<Class>,
    /// Turns that are kept whole (after any reduction).
    pub recent_turns: usize,
    /// Tool groups kept with their I/O (after any reduction).
    pub tool_pairs: usize,
    /// When the latest turn is kept only in part: its opening message and
    /// this many of its last rounds (groups) are kept whole, its older
    /// rounds compact like older turns.
    pub recent_rounds: Option<usize>,
}

/// The layer a group belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// Protected or a never-prune role, or the task: kept byte-identical.
    Pinned,
    /// The previous `COMPACT-SUMMARY`: folded into the new one.
    Summary,
    /// In the last `keep_recent_turns` turns: kept as is.
    Recent,
    /// Among the last `keep_tool_io_pairs` tool groups: kept with its I/O.
    ToolIo,
    /// Everything else: may be cleared, summarized or trimmed.
    Remainder,
}

/// The facts about a history that do not depend on keep counts.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    /// The atomic groups, as message index ranges in order.
    pub groups: Vec<Range<usize>>,
    /// Per group: it holds a pinned message.
    pub pinned: Vec<bool>,
    /// Per group: it holds our previous summary.
    pub summary: Vec<bool>,
    /// Per group: it holds a tool call or a tool result.
    pub has_tools: Vec<bool>,
    /// Group index where each turn starts; a turn runs to the next start.
    pub turn_starts: Vec<usize>,
    /// The task: the group of the first user message that opens a turn
    /// (not pinned otherwise). An agent run is one task and then dozens of
    /// tool rounds: the task is what every later round serves, so it is
    /// kept like a pinned message, but it is not one (invariant 2 and
    /// `InsufficientBudget::pinned_tokens` count only what the policy pins).
    pub task: Option<usize>,
}

impl Layout {
    /// `is_pinned(i)` and `is_summary(i)` are per message.
    pub(crate) fn new(
        messages: &[Message],
        is_pinned: impl Fn(usize) -> bool,
        is_summary: impl Fn(usize) -> bool,
    ) -> Self {
        let groups = groups(messages);
        let pinned = groups.iter().map(|g| g.clone().any(&is_pinned)).collect();
        let summary: Vec<bool> = groups.iter().map(|g| g.clone().any(&is_summary)).collect();
        let has_tools = groups
            .iter()
            .map(|g| {
                messages[g.clone()]
                    .iter()
                    .any(|m| !m.kind().calls.is_empty() || m.kind().item == ItemType::ToolResult)
            })
            .collect();
        // Our own summary is a user message but never opens a turn.
        let mut turn_starts = vec![0];
        for (gi, g) in groups.iter().enumerate() {
            if gi > 0 && !summary[gi] && messages[g.start].starts_turn() {
                turn_starts.push(gi);
            }
        }
        if groups.is_empty() {
            turn_starts.clear();
        }
        Self {
            groups,
            pinned,
            summary,
            has_tools,
            turn_starts,
            task: None,
        }
    }

    /// Keeps the task: the first group that opens a turn with a user
    /// message (after the last provider compaction item), unless it is
    /// pinned already or our summary.
    pub(crate) fn with_task(mut self, messages: &[Message]) -> Self {
        // A provider's compaction item stands for everything before it (the
        // API drops it): the task is the first request after the last one.
        let from = (0..self.groups.len())
            .rev()
            .find(|&gi| {
                messages[self.groups[gi].clone()]
                    .iter()
                    .any(|m| m.kind().compaction)
            })
            .map_or(0, |gi| gi + 1);
        self.task = (from..self.groups.len())
            .find(|&gi| !self.summary[gi] && messages[self.groups[gi].start].starts_turn());
        if self.task.is_some_and(|gi| self.pinned[gi]) {
            self.task = None;
        }
        self
    }

    /// Pinned, or the task: kept whatever the keep counts.
    pub(crate) fn anchored(&self, gi: usize) -> bool {
        self.pinned[gi] || self.task == Some(gi)
    }

    /// Groups of the latest turn after its opening user message: its rounds.
    pub(crate) fn latest_rounds(&self, messages: &[Message]) -> std::ops::Range<usize> {
        let Some(&start) = self.turn_starts.last() else {
            return 0..0;
        };
        let first = if messages[self.groups[start].start].starts_turn() {
            start + 1
        } else {
            start
        };
        first.min(self.groups.len())..self.groups.len()
    }

    /// Number of turns (a leading run before the first user message counts as one).
    pub(crate) fn turns(&self) -> usize {
        self.turn_starts.len()
    }

    /// The first group index of the last `k` turns (`groups.len()` when k == 0).
    pub(crate) fn recent_start(&self, k: usize) -> usize {
        if k == 0 {
            return self.groups.len();
        }
        let n = self.turn_starts.len();
        if k >= n { 0 } else { self.turn_starts[n - k] }
    }

    /// The layer of every group when the last `recent_turns` turns and the
    /// last `tool_pairs` tool groups are kept.
    pub(crate) fn plan(&self, recent_turns: usize, tool_pairs: usize) -> Plan {
        self.plan_with(recent_turns, None, tool_pairs, None)
    }

    /// The layer of every group when only the latest turn's opening message
    /// and its last `rounds` rounds (`latest_rounds`) are kept whole, with
    /// the last `tool_pairs` tool groups: an agent's one long turn, reduced.
    pub(crate) fn plan_rounds(
        &self,
        messages: &[Message],
        rounds: usize,
        tool_pairs: usize,
    ) -> Plan {
        let all = self.latest_rounds(messages);
        let from = all.end.saturating_sub(rounds).max(all.start);
        let opener = (all.start > 0 && self.turn_starts.last() == Some(&(all.start - 1)))
            .then(|| all.start - 1);
        self.plan_with(1, Some((from, opener)), tool_pairs, Some(rounds))
    }

    fn plan_with(
        &self,
        recent_turns: usize,
        rounds_from: Option<(usize, Option<usize>)>,
        tool_pairs: usize,
        recent_rounds: Option<usize>,
    ) -> Plan {
        let recent_from = self.recent_start(recent_turns);
        let recent = |gi: usize| match rounds_from {
            Some((from, opener)) => gi >= from || Some(gi) == opener,
            None => gi >= recent_from,
        };
        let mut tools_left = tool_pairs;
        let mut class = vec![Class::Remainder; self.groups.len()];
        for gi in (0..self.groups.len()).rev() {
            let is_tool = self.has_tools[gi];
            class[gi] = if self.summary[gi] {
                Class::Summary
            } else if self.anchored(gi) {
                Class::Pinned
            } else if recent(gi) {
                Class::Recent
            } else if is_tool && tools_left > 0 {
                Class::ToolIo
            } else {
                Class::Remainder
            };
            if is_tool && tools_left > 0 && class[gi] != Class::Summary {
                tools_left -= 1;
            }
        }
        Plan {
            groups: self.groups.clone(),
            class,
            recent_turns: if recent_rounds.is_some() {
                0
            } else {
                recent_turns.min(self.turns())
            },
            tool_pairs,
            recent_rounds,
        }
    }
    /// The smallest tail `trim` keeps: the latest turn's opening user
    /// message (if any) and the last group. Trim never rewrites content, so
    /// when the whole latest turn does not fit it drops the turn's middle.
    pub(crate) fn minimal_tail(&self, messages: &[Message]) -> Vec<usize> {
        let mut keep = Vec::new();
        if let Some(&start) = self.turn_starts.last()
            && messages[self.groups[start].start].starts_turn()
        {
            keep.push(start);
        }
        if let Some(last) = self.groups.len().checked_sub(1)
            && keep.last() != Some(&last)
        {
            keep.push(last);
        }
        keep
    }
}

impl Plan {
    /// Message indices of groups in `class`.
    pub(crate) fn messages_in(&self, class: Class) -> impl Iterator<Item = usize> + '_ {
        self.groups
            .iter()
            .zip(&self.class)
            .filter(move |(_, c)| **c == class)
            .flat_map(|(g, _)| g.clone())
    }

    /// Number of groups in `class`.
    pub(crate) fn count(&self, class: Class) -> usize {
        self.class.iter().filter(|c| **c == class).count()
    }
}
