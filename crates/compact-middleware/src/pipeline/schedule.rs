//! Which layers to keep: the schedule of plans from the configured keep counts down to the least the policy allows, tier 4's reductions, and `trim` mode.

use super::*;

impl Work<'_> {
    /// The plans of tier 4, most kept first: the configured counts, then
    /// fewer recent turns down to 1, then fewer tool pairs down to 1, then
    /// fewer rounds of the latest turn down to its last one. When the latest
    /// turn alone has more than `keep_recent_rounds` rounds, only the
    /// rounds steps, from that count.
    pub(super) fn schedule(&self) -> Vec<Plan> {
        let k = self.policy.keep_recent_turns.max(1);
        let t = self.policy.keep_tool_io_pairs;
        let rounds = self.latest_rounds();
        let mut plans = Vec::new();
        let from = if rounds > self.policy.keep_recent_rounds {
            self.policy.keep_recent_rounds
        } else {
            plans.extend((1..=k).rev().map(|k| self.layout.plan(k, t)));
            plans.extend((1..t).rev().map(|t| self.layout.plan(1, t)));
            rounds.saturating_sub(1)
        };
        plans.extend(
            (1..=from)
                .rev()
                .map(|r| self.layout.plan_rounds(&self.msgs, r, t.min(r))),
        );
        plans
    }

    /// Tiers 3 and 4: choose the largest keep counts whose kept layers plus a
    /// summary fit, then summarize the rest once.
    pub(super) async fn summarize_and_reduce(
        &mut self,
        summarizer: &dyn Summarizer,
    ) -> Result<(), Insufficient> {
        // Tier 3 with the configured counts if the kept layers plus the
        // summary fit the target; otherwise tier 4: the first reduction that
        // does. When none reaches the target, the most reduced one that fits
        // the budget; else the last resort.
        //
        // The summary's part is what the ledger wants to show every fact at
        // its short form (up to the cap), not a token minimum: a fact folded
        // into the summary costs a line, the same fact in a kept turn costs
        // its whole turn, tool outputs included. Each plan's remainder goes
        // to the ledger as the plan is weighed (remainders only grow along
        // the schedule, so nothing is taken in that is then kept).
        let plans = self.schedule();
        let mut chosen = None;
        let mut reserve = 0;
        for (i, p) in plans.iter().enumerate() {
            reserve = self.summary_reserve(p);
            let need = self.kept_tokens(p) + reserve;
            let last = i + 1 == plans.len();
            if need <= self.limits.target || (last && need <= self.limits.budget) {
                chosen = Some(p.clone());
                break;
            }
        }
        let plan = match chosen {
            Some(p) => p,
            None => self.minimal_plan(reserve)?,
        };
        if (plan.recent_turns < self.policy.keep_recent_turns.min(self.layout.turns())
            || plan.tool_pairs < self.policy.keep_tool_io_pairs
            || plan.recent_rounds.is_some())
            && !self.out.tiers.contains(&Tier::ReduceKeep)
        {
            self.out.tiers.push(Tier::ReduceKeep);
        }
        self.apply_summary(plan, summarizer).await;
        Ok(())
    }

    /// Last resort: pinned groups, the task, the latest turn's opening
    /// message and its last round. That round's tool outputs are capped
    /// harder, down to the minimum; `Insufficient` only when those alone
    /// cannot fit (the error's tail is the task, the opening message and
    /// the round).
    pub(super) fn minimal_plan(&mut self, reserve: usize) -> Result<Plan, Insufficient> {
        let mut plan = self.layout.plan_rounds(&self.msgs, 1, 0);
        plan.tool_pairs = 0;
        let budget = self.limits.budget;
        // Capping the round's outputs also makes room for the summary; the
        // smallest cap only for the budget.
        let roomy = budget.saturating_sub(reserve).max(budget / 2);
        let kept: Vec<usize> = (0..plan.class.len())
            .filter(|&gi| plan.class[gi] == Class::Recent)
            .flat_map(|gi| self.layout.groups[gi].clone())
            .collect();
        let base = self.policy.tool_result_max_chars.max(1);
        for (max_chars, goal) in [
            (base / 4, roomy),
            (base / 16, roomy),
            (MIN_CAP_CHARS, budget),
        ] {
            if self.kept_tokens(&plan) <= goal {
                continue;
            }
            self.cap_indices(kept.clone(), max_chars.max(MIN_CAP_CHARS));
        }
        let kept = self.kept_tokens(&plan);
        if kept > budget {
            let pinned = self.pinned_tokens();
            return Err(Insufficient {
                pinned_tokens: pinned,
                tail_tokens: kept - pinned - self.fixed,
                fixed_tokens: self.fixed,
                budget,
            });
        }
        if !self.out.tiers.contains(&Tier::ReduceKeep) {
            self.out.tiers.push(Tier::ReduceKeep);
        }
        Ok(plan)
    }

    /// `trim`'s last resort: the latest turn's opening message and its last
    /// group, unchanged (trim drops, it never caps or clears).
    pub(super) fn minimal_trim_plan(&mut self) -> Result<Plan, Insufficient> {
        let mut plan = self.layout.plan(1, 0);
        let tail = self.layout.minimal_tail(&self.msgs);
        for gi in 0..plan.class.len() {
            if plan.class[gi] == Class::Recent && !tail.contains(&gi) {
                plan.class[gi] = Class::Remainder;
            }
        }
        plan.tool_pairs = 0;
        let kept = self.kept_tokens(&plan);
        if kept > self.limits.budget {
            let pinned = self.pinned_tokens();
            return Err(Insufficient {
                pinned_tokens: pinned,
                tail_tokens: kept - pinned - self.fixed,
                fixed_tokens: self.fixed,
                budget: self.limits.budget,
            });
        }
        if !self.out.tiers.contains(&Tier::ReduceKeep) {
            self.out.tiers.push(Tier::ReduceKeep);
        }
        Ok(plan)
    }

    /// `trim` mode: drop the oldest whole turns, keep the last N (fewer if
    /// the budget demands), no summary.
    pub(super) fn trim(&mut self) -> Result<(), Insufficient> {
        let k0 = self.policy.keep_recent_turns.max(1);
        let mut chosen = None;
        for k in (1..=k0).rev() {
            let mut plan = self.layout.plan(k, 0);
            // Trim keeps no summary: an old one goes with the oldest turns.
            for c in plan.class.iter_mut() {
                if *c == Class::Summary {
                    *c = Class::Remainder;
                }
            }
            if self.kept_tokens(&plan) <= self.limits.budget {
                chosen = Some(plan);
                break;
            }
        }
        let plan = match chosen {
            Some(p) => p,
            None => self.minimal_trim_plan()?,
        };
        self.absorb(plan.messages_in(Class::Remainder).collect::<Vec<_>>());
        let dropped: usize =
            plan.messages_in(Class::Remainder).count() + plan.messages_in(Class::Summary).count();
        if dropped > 0 {
            self.out.tiers.push(Tier::Trim);
            self.out.dropped += plan.messages_in(Class::Remainder).count();
        }
        if plan.recent_turns < k0.min(self.layout.turns()) {
            self.out.tiers.push(Tier::ReduceKeep);
        }
        self.chosen = Some((plan, None));
        Ok(())
    }

    /// Whether message `i` lies in the last `keep_recent_turns` turns as a
    /// reader who cannot tell our summary from a message counts them (one
    /// fed back without `meta`): such a message must come out unchanged,
    /// even when it is our summary.
    pub(super) fn in_recent_turns(&self, i: usize) -> bool {
        let groups = crate::model::groups(&self.msgs);
        let starts: Vec<usize> = groups
            .iter()
            .enumerate()
            .filter(|&(gi, g)| gi == 0 || self.msgs[g.start].starts_turn())
            .map(|(_, g)| g.start)
            .collect();
        let k = self.policy.keep_recent_turns.min(starts.len());
        k > 0 && starts.len() >= k && i >= starts[starts.len() - k]
    }
}
