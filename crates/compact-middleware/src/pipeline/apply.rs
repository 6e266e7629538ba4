//! Writing the summary: the summarizer (and its fallbacks) over what leaves the context, the outcome committed to the work, and the rewrite of a summary whose ledger grew.

use super::*;

impl Work<'_> {
    pub(super) async fn apply_summary(&mut self, plan: Plan, summarizer: &dyn Summarizer) {
        if !self.needs_summary(&plan) {
            // Keep the previous summary where it is.
            let mut plan = plan;
            for c in plan.class.iter_mut() {
                if *c == Class::Summary {
                    *c = Class::Pinned;
                }
            }
            self.chosen = Some((plan, None));
            return;
        }
        let kept = self.kept_tokens(&plan);
        let overhead = self.summary_overhead();
        let cap = self.summary_cap();
        let room_target = self.limits.target.saturating_sub(kept + overhead);
        let room_budget = self.limits.budget.saturating_sub(kept + overhead);
        // The room under the target; when that is less than the ledger
        // needs to keep every fact, what it needs, as far as the budget
        // allows (the next turn compacts again either way).
        let want = self.summary_want(&plan).max(MIN_USEFUL_SUMMARY);
        let max_body = room_target.max(room_budget.min(want)).min(cap);
        if kept + overhead > self.limits.budget || max_body == 0 {
            // Not even an empty summary message fits next to what is kept
            // (the last-resort plan is checked without one): prune only.
            let folded = plan.messages_in(Class::Remainder).count();
            self.absorb(plan.messages_in(Class::Remainder).collect::<Vec<_>>());
            self.out.fallbacks.push(Fallback {
                error_type: "NoRoomForSummary".into(),
                message: format!(
                    "the kept messages need {kept} of {} tokens; no room for a summary",
                    self.limits.budget
                ),
                fallback: "pruning_only".into(),
            });
            self.out.dropped += folded;
            self.chosen = Some((plan, None));
            return;
        }

        // The previous summary is replaced. Fed back without our `meta`, it
        // may head one of the last `keep_recent_turns` turns for a reader
        // who cannot tell it from a user message: for that reader the kept
        // turns are fewer, so tier 4 is reported.
        if self
            .summary_index
            .is_some_and(|si| self.in_recent_turns(si))
            && !self.out.tiers.contains(&Tier::ReduceKeep)
        {
            self.out.tiers.push(Tier::ReduceKeep);
        }
        let remainder: Vec<usize> = plan.messages_in(Class::Remainder).collect();
        let entries: Vec<SummaryEntry> = remainder.iter().map(|&i| self.entry(i, None)).collect();
        let input_messages = remainder.len();
        let mut input_tokens: usize = remainder.iter().map(|&i| self.counts[i]).sum();
        if let Some(si) = self.summary_index {
            input_tokens += self.counts[si];
        }
        self.absorb(remainder.iter().copied());
        let counter = self.est.counter();
        // The history as the agent sent it, up to the last message folded.
        let agent_prefix = match (&self.prefix_tools, remainder.last()) {
            (Some(tools), Some(&last)) => Some(Arc::new(AgentPrefix::build(
                &self.original,
                last,
                tools,
                self.summary_index,
                self.est,
            ))),
            _ => None,
        };
        let req = SummaryRequest {
            previous: self.previous_summary.clone(),
            entries,
            strategy: self.policy.strategy,
            max_tokens: max_body,
            count_tokens: Arc::new(move |s: &str| counter.count(s)),
            ledger: Some(Arc::new(self.out.ledger.clone())),
            agent_prefix,
        };
        let started = std::time::Instant::now();
        let replaced = input_tokens;
        let outcome =
            fallback::summarize_with_fallbacks(summarizer, &req, replaced, self.primary_disabled)
                .await;
        let message = self.commit_outcome(outcome, input_messages, input_tokens, started);
        if message.is_some() {
            self.out.tiers.push(Tier::Summarize);
            self.out.summarized += input_messages;
        } else {
            self.out.dropped += input_messages;
        }
        self.chosen = Some((plan, message));
    }

    /// Records what the summarizer chain returned; the summary message, if
    /// one was written.
    pub(super) fn commit_outcome(
        &mut self,
        outcome: FallbackOutcome,
        input_messages: usize,
        input_tokens: usize,
        started: std::time::Instant,
    ) -> Option<Message> {
        self.out.primary_failed |= outcome.primary_failed;
        self.out.fallbacks.extend(outcome.fallbacks);
        self.out.neutralized.extend(outcome.neutralized);
        let strategy = outcome.strategy;
        let result = outcome.summary;
        let role = self.summary_role();
        result.map(|(s, name)| {
            let m = summary::summary_message_with(
                role,
                self.next_version,
                &s.text,
                self.summary_footer(),
            );
            self.out.summary = Some(NewSummary {
                version: self.next_version,
                body: s.text.clone(),
                message: m.clone(),
                strategy,
                summarizer: name,
                input_messages,
                input_tokens,
                summary_tokens: s.tokens,
                compression_ratio: if input_tokens == 0 {
                    0.0
                } else {
                    (s.tokens as f64 / input_tokens as f64 * 10_000.0).round() / 10_000.0
                },
                model: s.model,
                prompt_tokens: s.prompt_tokens,
                completion_tokens: s.completion_tokens,
                prompt: s.prompt,
                cached_prompt_tokens: s.cached_prompt_tokens,
                latency_ms: started.elapsed().as_millis() as u64,
                facts: s.facts,
            });
            m
        })
    }

    /// Tiers 1 and 2 met the target, but what they removed went to the
    /// ledger only: without a summary those facts would be gone from the
    /// context. When the ledger learned a fact (not bulk) in this run and the
    /// target leaves room, the summary is written (or rewritten) from the
    /// ledger, in place of the previous one, or after the leading pinned
    /// messages.
    pub(super) async fn refresh_summary(&mut self, summarizer: &dyn Summarizer) {
        if !self.ledger_grew() {
            return;
        }
        // A previous summary is rewritten in place.
        if !self.may_rewrite_summary() {
            return;
        }
        let old = self.summary_index.map_or(0, |si| self.counts[si]);
        // An inserted summary may need a bridge on each side.
        let overhead = self.summary_overhead()
            + if self.anthropic {
                2 * self
                    .est
                    .count_message(&alternate::bridge(crate::model::Role::User))
            } else {
                0
            };
        let room_target = (self.limits.target + old).saturating_sub(self.total() + overhead);
        let room_budget = (self.limits.budget + old).saturating_sub(self.total() + overhead);
        let want = self.ledger_want().max(MIN_USEFUL_SUMMARY);
        let max_body = room_target
            .max(room_budget.min(want))
            .min(self.summary_cap());
        if max_body < MIN_USEFUL_SUMMARY / 2 {
            return;
        }
        let counter = self.est.counter();
        let req = SummaryRequest {
            previous: self.previous_summary.clone(),
            entries: Vec::new(),
            strategy: self.policy.strategy,
            max_tokens: max_body,
            count_tokens: Arc::new(move |s: &str| counter.count(s)),
            ledger: Some(Arc::new(self.out.ledger.clone())),
            agent_prefix: None,
        };
        let started = std::time::Instant::now();
        let outcome =
            fallback::summarize_with_fallbacks(summarizer, &req, 0, self.primary_disabled).await;
        let Some(message) = self.commit_outcome(outcome, 0, old, started) else {
            return;
        };
        self.out.tiers.push(Tier::Summarize);
        // Rewriting a summary that heads an agent's long run changes a
        // message a reader counts in the recent turns.
        if self
            .summary_index
            .is_some_and(|si| self.in_recent_turns(si))
            && !self.out.tiers.contains(&Tier::ReduceKeep)
        {
            self.out.tiers.push(Tier::ReduceKeep);
        }
        match self.summary_index {
            Some(si) => {
                self.msgs[si] = message;
                self.counts[si] = self.est.count_message(&self.msgs[si]);
            }
            None => {
                let at = (0..self.layout.groups.len())
                    .find(|&gi| !self.layout.anchored(gi))
                    .map_or(self.msgs.len(), |gi| self.layout.groups[gi].start);
                let n = self.est.count_message(&message);
                self.msgs.insert(at, message);
                self.counts.insert(at, n);
                self.inserted_summary = Some(at);
            }
        }
    }
}
