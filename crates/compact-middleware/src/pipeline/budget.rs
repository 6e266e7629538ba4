//! What the work holds, in tokens: the running total, the pinned part, a group, the kept layers, and whether the target is met.

use super::*;

impl Work<'_> {
    pub(super) fn total(&self) -> usize {
        self.fixed + self.counts.iter().sum::<usize>() + self.bridge_tokens()
    }

    /// What the bridges of an Anthropic history cost as the messages stand
    /// (the input's were dropped; `finish` draws them anew).
    pub(super) fn bridge_tokens(&self) -> usize {
        if !self.anthropic {
            return 0;
        }
        let inserted = self.inserted_summary;
        let indexed: Vec<(Message, Option<usize>)> = self
            .msgs
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let index = match inserted {
                    Some(at) if i == at => None,
                    Some(at) if i > at => Some(self.input_index[i - 1]),
                    _ => Some(self.input_index[i]),
                };
                (m.clone(), index)
            })
            .collect();
        let bridges =
            alternate::alternate(indexed, self.input_starts_with_user).len() - self.msgs.len();
        bridges
            * self
                .est
                .count_message(&alternate::bridge(crate::model::Role::User))
    }

    pub(super) fn recount(&mut self, changed: &[usize]) {
        for &i in changed {
            self.counts[i] = self.est.count_message(&self.msgs[i]);
        }
    }

    pub(super) fn group_tokens(&self, gi: usize) -> usize {
        self.layout.groups[gi].clone().map(|i| self.counts[i]).sum()
    }

    pub(super) fn pinned_tokens(&self) -> usize {
        (0..self.layout.groups.len())
            .filter(|&gi| self.layout.pinned[gi])
            .map(|gi| self.group_tokens(gi))
            .sum()
    }

    pub(super) fn check_pinned(&self) -> Result<(), Insufficient> {
        let pinned = self.pinned_tokens();
        if self.fixed + pinned > self.limits.budget && self.policy.mode != Mode::None {
            return Err(Insufficient {
                pinned_tokens: pinned,
                tail_tokens: 0,
                fixed_tokens: self.fixed,
                budget: self.limits.budget,
            });
        }
        Ok(())
    }

    pub(super) fn met_target(&self) -> bool {
        !self.summarize_always && self.total() <= self.limits.target
    }

    /// Tokens kept by `plan`: everything but the remainder, and but the old
    /// summary when a new one replaces it.
    pub(super) fn kept_tokens(&self, plan: &Plan) -> usize {
        let replaced = self.needs_summary(plan);
        self.fixed
            + self.bridge_allowance(plan, replaced)
            + (0..plan.groups.len())
                .filter(|&gi| match plan.class[gi] {
                    Class::Remainder => false,
                    Class::Summary => !replaced,
                    _ => true,
                })
                .map(|gi| self.group_tokens(gi))
                .sum::<usize>()
    }

    pub(super) fn kept_counts(&self, plan: &Plan) -> Kept {
        let task = self.layout.task.map(|gi| self.layout.groups[gi].clone());
        Kept {
            pinned: plan
                .messages_in(Class::Pinned)
                .filter(|i| !task.as_ref().is_some_and(|t| t.contains(i)))
                .count(),
            task: task.is_some(),
            recent_turns: plan.recent_turns,
            recent_rounds: plan.recent_rounds,
            tool_pairs: (0..plan.groups.len())
                .filter(|&gi| {
                    self.layout.has_tools[gi]
                        && matches!(plan.class[gi], Class::Recent | Class::ToolIo)
                })
                .count(),
        }
    }
}
