//! How much room the rolling summary gets and whether this run writes one: its cap, its overhead, what the ledger wants, the bridge an Anthropic history needs.

use super::*;

impl Work<'_> {
    /// New material is worth a new summary: a span to fold, or facts the
    /// ledger learned in this run; with neither, the previous summary stays
    /// as it is (no version churn).
    pub(super) fn needs_summary(&self, plan: &Plan) -> bool {
        plan.count(Class::Remainder) > 0 || (self.ledger_grew() && self.may_rewrite_summary())
    }

    /// Whether the previous summary may be rewritten with nothing folded:
    /// only where a summary belongs, after nothing but pinned messages, and
    /// not inside the last `keep_recent_turns` turns as a reader who cannot
    /// tell it from a message counts them (one fed back with our `meta`
    /// stripped may follow messages that were pinned then, or start a
    /// recent turn; the next compaction that folds a span puts it right),
    /// unless it heads an agent's long run, whose older rounds compact like
    /// older turns: then the rewrite is a reduction (tier 4).
    pub(super) fn may_rewrite_summary(&self) -> bool {
        let Some(si) = self.summary_index else {
            return true;
        };
        let after_unpinned = (0..self.layout.groups.len())
            .take_while(|&gi| self.layout.groups[gi].start < si)
            .any(|gi| !self.layout.anchored(gi) && !self.layout.summary[gi]);
        !after_unpinned && (!self.in_recent_turns(si) || self.heads_long_run(si))
    }

    /// Whether message `si` comes before the last `keep_recent_rounds`
    /// rounds of a latest turn that has more rounds than that: an agent's
    /// run of one task and many tool rounds, where a summary after the task
    /// stands for rounds that are gone.
    pub(super) fn heads_long_run(&self, si: usize) -> bool {
        let rounds = self.layout.latest_rounds(&self.msgs);
        let keep = self.policy.keep_recent_rounds.max(1);
        rounds.len() > keep
            && self
                .layout
                .groups
                .get(rounds.end - keep)
                .is_some_and(|g| si < g.start)
    }

    /// Whether the ledger learned a fact in this run (from a capped or
    /// cleared output), or the artifact trail changed what it shows (a
    /// command run again): the summary must show it, or it would be gone
    /// from the context.
    pub(super) fn ledger_grew(&self) -> bool {
        if self.out.ledger.trail_rev() != self.ledger_at_start.2 {
            return true;
        }
        let len = self.out.ledger.len();
        if len == self.ledger_at_start.0 {
            return false;
        }
        if let Some((at, grew)) = self.grew.get()
            && at == len
        {
            return grew;
        }
        let grew = self.out.ledger.ranked_len() > self.ledger_at_start.1;
        self.grew.set(Some((len, grew)));
        grew
    }

    pub(super) fn summary_cap(&self) -> usize {
        (self.policy.summary_max_pct * self.limits.max_tokens as f64) as usize
    }

    /// The role of our summary: the configured one, except in an Anthropic history,
    /// which has no system messages and whose first message must be the user's.
    pub(super) fn summary_role(&self) -> crate::model::Role {
        if self.anthropic {
            crate::model::Role::User
        } else {
            self.policy.summary_role
        }
    }

    /// The summary message's last line: the recall line with
    /// `recall.advertise`.
    pub(super) fn summary_footer(&self) -> Option<&'static str> {
        self.advertise_recall
            .then_some(crate::recall::tool::SUMMARY_LINE)
    }

    pub(super) fn summary_overhead(&self) -> usize {
        let role = self.summary_role();
        self.est.count_message(&summary::summary_message_with(
            role,
            self.next_version,
            "",
            self.summary_footer(),
        )) + 1
    }

    /// What the bridges of an Anthropic output may cost under `plan`: one per run of
    /// kept groups (where a gap may join two messages of one role), two around the
    /// summary, one before the first message.
    pub(super) fn bridge_allowance(&self, plan: &Plan, replaced: bool) -> usize {
        if !self.anthropic {
            return 0;
        }
        let kept = |gi: usize| match plan.class[gi] {
            Class::Remainder => false,
            Class::Summary => !replaced,
            _ => true,
        };
        let runs = (0..plan.class.len())
            .filter(|&gi| kept(gi) && (gi == 0 || !kept(gi - 1)))
            .count();
        (runs + 3)
            * self
                .est
                .count_message(&alternate::bridge(crate::model::Role::User))
    }

    /// The room a summary message takes next to what `plan` keeps: its
    /// overhead and [`Work::summary_want`], or nothing when `plan` folds
    /// nothing.
    pub(super) fn summary_reserve(&mut self, plan: &Plan) -> usize {
        if self.needs_summary(plan) {
            self.summary_overhead() + self.summary_want(plan)
        } else {
            0
        }
    }

    /// What the summary wants to show every fact of the ledger at its
    /// short form (with `plan`'s remainder folded in), up to the cap.
    pub(super) fn summary_want(&mut self, plan: &Plan) -> usize {
        self.absorb(plan.messages_in(Class::Remainder).collect::<Vec<_>>());
        self.ledger_want()
    }

    /// What the ledger as it is wants to show every fact at its short
    /// form, up to the cap.
    pub(super) fn ledger_want(&self) -> usize {
        let counter = self.est.counter();
        let count: crate::summarize::TokenCountFn = Arc::new(move |s: &str| counter.count(s));
        self.out
            .ledger
            .want_tokens(self.policy.strategy, &count)
            .min(self.summary_cap())
    }
}
