//! One preflight, step by step: lock → prepare → recognise → decide → run →
//! check → archive → emit. Each step returns a value; the report and the
//! events are projections of those values.

use std::time::{Instant, SystemTime};

use crate::archive::SessionId;
use crate::cache::breakpoints::{self, Existing};
use crate::cache::pace::{Costs, Floors, Plan};
use crate::config::{CacheBreakpoints, CachePolicy, Mode, Repair};
use crate::estimate::Estimate;
use crate::events::names;
use crate::model::{Message, Problem, lost_results, validate};
use crate::pipeline::{self, Compaction, Input, Limits};
use crate::trigger::{self, Decision, Forced};

use super::report::{Facts, Report};
use super::session::{Continuation, OurMark, Recognised, Session};
use super::status::Layers;
use super::trail::Trail;
use super::{CompactError, CompactManager, PreflightOutcome, PreflightRequest};

impl CompactManager {
    /// The full preflight: estimate, decide, compact if needed, archive what
    /// left the context, emit an event per decision.
    pub async fn preflight_with(
        &self,
        session_id: &str,
        req: PreflightRequest,
    ) -> Result<PreflightOutcome, CompactError> {
        let id = SessionId::parse(session_id)
            .map_err(|e| CompactError::InvalidSession(e.to_string()))?;
        let started = Instant::now();
        let handle = self.session_handle(id.clone());
        let mut session = handle.lock().await;
        let locked = started.elapsed();
        let guard = self.load_session(&id, &mut session).await?;
        let loaded = started.elapsed();
        // The call runs on the manager of its overlays' configuration
        // (`overlay.rs`), read from the session just loaded.
        let (this, sources, guard) = self.overlaid(&session, &req.overlays, guard).await?;
        let mut trail = Trail::open(&mut session, &this.inner.config.telemetry.agent_name);
        let (result, layers) = match this.run_steps(&mut session, &mut trail, req, started).await {
            Ok((outcome, layers)) => (Ok(outcome.with_sources(sources)), Some(layers)),
            Err(e) => (Err(e), None),
        };
        let ran = started.elapsed();
        let closed = trail.close(result.as_ref().map(|o| &o.report));
        // Still under the session lock, so this session's archive writes
        // stay in order.
        this.emit(&session, closed.events, closed.archived, closed.sent)
            .await;
        let emitted = started.elapsed();
        if let (Ok(outcome), Some(layers)) = (&result, layers) {
            session.last_report = Some(super::status::LastOutcome {
                report: super::status::LastReport::Typed(Box::new(outcome.report.clone())),
                layers,
            });
        }
        let saved = match guard {
            Some(guard) => self.save_session(guard, &mut session).await,
            None => Ok(()),
        };
        // The recall index writes start now that this call is done with the
        // CPU (still under the session lock, so they queue in order), even
        // when the save failed: what they index was archived.
        this.start_recall_writes(id.as_str(), closed.recall_writes);
        saved?;
        // Where a slow preflight spent its time (`COMPACT_LOG=compact_middleware=debug`).
        tracing::debug!(
            session = %id,
            session_ms = locked.as_millis() as u64,
            store_ms = (loaded - locked).as_millis() as u64,
            steps_ms = (ran - loaded).as_millis() as u64,
            emit_ms = (emitted - ran).as_millis() as u64,
            save_ms = (started.elapsed() - emitted).as_millis() as u64,
            "preflight timings"
        );
        result
    }

    /// The layers of the output (without our breakpoints), for `status`.
    fn layers(&self, session: &Session, output: &[Message], report: &Report) -> Layers {
        super::status::layers_of(
            output,
            session.summary.as_ref().map(|s| s.hashes),
            &self.inner.config.policy,
            &self.inner.estimator,
            report.breakdown.tools_schema,
            report.tokens_after,
        )
    }

    async fn run_steps(
        &self,
        session: &mut Session,
        trail: &mut Trail,
        req: PreflightRequest,
        started: Instant,
    ) -> Result<(PreflightOutcome, Layers), CompactError> {
        let policy = &self.inner.config.policy;
        let PreflightRequest {
            messages,
            tools,
            forced,
            note,
            strict,
            usage,
            usage_details,
            overlays: _,
        } = req;
        let usage = usage.or(usage_details.map(|u| u.input_tokens));
        let tools = self.tools_sent(tools, &messages);

        if note.is_some() {
            trail.hold();
        }
        let mut messages = messages;
        session.take_our_marks(&mut messages);
        let (messages, injected) = self.prepare(session, messages).await;
        let mut input = session.recognise(messages);
        let repair = if strict {
            Repair::Strict
        } else {
            policy.repair
        };
        let (input_problems, repaired) =
            self.check_input(session, trail, &mut input, repair).await?;

        let span = trail.start(names::TOKEN_ESTIMATE);
        let estimate = self.anchored_estimate(session, &input, &tools, usage);
        if let Some(error) = estimate.anchor.and_then(|a| a.error) {
            session.estimate_error = Some(error);
        }
        trail.estimated(
            span,
            &estimate,
            &input,
            &injected,
            &input_problems,
            session.estimate_error,
        );

        let plan = self.pace(session, &input, &estimate);
        let decision = self.decide(
            trail,
            &input,
            &estimate,
            plan.as_ref(),
            forced,
            note.as_deref(),
        );
        if decision.triggered {
            // Compaction, summary and archive writes come next: the spans
            // so far are done, so a live viewer gets them now, not then.
            self.stream(session, trail);
        }

        let limits = self.run_limits(forced, plan.as_ref());
        let mut report = Report::new(Facts {
            session_id: session.id().as_str(),
            mode: policy.mode,
            forced,
            note,
            input: &input,
            estimate: &estimate,
            decision: &decision,
            limits,
            input_problems,
            repaired,
            injected,
            estimate_error: session.estimate_error,
        });
        let raw_hashes = std::mem::take(&mut input.raw_hashes);
        let messages = if decision.triggered {
            let limits = limits.scaled(estimate.scale());
            let c = self
                .compact(session, trail, &input, &tools, &decision, forced, limits)
                .await?;
            self.settle(session, trail, &input, c, &mut report).await?
        } else {
            input.messages
        };
        let (messages, layers) = self.finish_output(
            session,
            raw_hashes,
            messages,
            &tools,
            &mut report,
            usage_details,
        );
        report.duration_us = started.elapsed().as_micros() as u64;
        Ok((
            PreflightOutcome {
                messages,
                report,
                tools,
            },
            layers,
        ))
    }

    /// The tools the request goes out with: with `recall.advertise`, the
    /// recall tool too, so it is counted like the caller's own.
    fn tools_sent(
        &self,
        tools: Vec<serde_json::Value>,
        messages: &[Message],
    ) -> Vec<serde_json::Value> {
        if self.advertises_recall() {
            crate::recall::tool::advertised(tools, messages)
        } else {
            tools
        }
    }

    /// Whether this call compacts (`trigger::decide`, then the cost
    /// trigger of `plan`, deferring to a compaction the provider just did),
    /// recorded in the trail.
    fn decide(
        &self,
        trail: &mut Trail,
        input: &Recognised,
        estimate: &Estimate,
        plan: Option<&Plan>,
        forced: Option<Forced>,
        note: Option<&str>,
    ) -> Decision {
        let policy = &self.inner.config.policy;
        let span = trail.start(names::TRIGGER_DECISION);
        let user_turns = user_turns(input);
        let decision = trigger::defer_to_provider(
            trigger::when_it_pays(
                trigger::decide(policy, estimate, user_turns, forced),
                plan,
                estimate,
            ),
            input.fresh_compaction,
            forced,
        );
        trail.decided(span, &decision, estimate, policy, user_turns, forced, note);
        decision
    }

    /// The output's last touches, placed on it as compaction left it,
    /// which is what the cache prediction compares, the session remembers
    /// and `status` shows: the Anthropic breakpoints (marked so the next
    /// call takes them off), the prompt cache prediction in `report`, and
    /// the layers.
    fn finish_output(
        &self,
        session: &mut Session,
        raw_hashes: Vec<u128>,
        mut messages: Vec<Message>,
        tools: &[serde_json::Value],
        report: &mut Report,
        usage_details: Option<crate::cache::ReportedUsage>,
    ) -> (Vec<Message>, Layers) {
        let planned = self.plan_breakpoints(session, &messages, tools);
        let added: Vec<usize> = planned.iter().map(|p| p.index).collect();
        report.cache = Some(self.prompt_cache(session, &messages, report, usage_details, &added));
        let layers = self.layers(session, &messages, report);
        session.remember(raw_hashes, &messages);
        let placed = breakpoints::place(&mut messages, &planned);
        session.last.marks = placed
            .iter()
            .map(|p| OurMark {
                index: p.index,
                hashes: [
                    messages[p.index].content_hash(),
                    messages[p.index].provider_hash(),
                ],
                mark: p.mark,
            })
            .collect();
        report.cache_breakpoints = placed;
        (messages, layers)
    }

    /// Where the Anthropic breakpoints of `policy.cache_breakpoints: auto`
    /// go on `messages` (`crate::cache::breakpoints`). None for `off` and
    /// for other formats.
    fn plan_breakpoints(
        &self,
        session: &Session,
        messages: &[Message],
        tools: &[serde_json::Value],
    ) -> Vec<breakpoints::Planned> {
        let policy = &self.inner.config.policy;
        if policy.cache_breakpoints == CacheBreakpoints::Off
            || !messages.iter().any(|m| m.kind().shape.is_anthropic())
        {
            return Vec::new();
        }
        let existing = Existing::of(messages, tools);
        let summary_index = session.summary.as_ref().and_then(|s| {
            messages
                .iter()
                .position(|m| s.hashes.contains(&m.content_hash()))
        });
        // The previous request ends inside this one when this one starts
        // with all of it: the last output as remembered (without our
        // breakpoints), or its provider copy, which the agent may have kept.
        let last = &session.last;
        let k = last.out_hashes.len();
        let previous_end = (k > 0
            && k < messages.len()
            && messages.iter().enumerate().take(k).all(|(i, m)| {
                let h = m.content_hash();
                h == last.out_hashes[i] || last.out_provider_hashes.get(i) == Some(&h)
            }))
        .then(|| k - 1);
        breakpoints::plan(
            &breakpoints::Request {
                messages,
                existing: &existing,
                summary_index,
                previous_end,
            },
            policy,
            &Message::can_carry_cache_breakpoint,
        )
    }

    /// What the provider's prompt cache can serve of `messages` (the
    /// request this call returns) given the session's previous request, and
    /// the caller's `reported` figures of the previous response, priced
    /// with the model's price (`crate::cache`).
    fn prompt_cache(
        &self,
        session: &Session,
        messages: &[Message],
        report: &Report,
        reported: Option<crate::cache::ReportedUsage>,
        added_breakpoints: &[usize],
    ) -> crate::cache::PromptCache {
        let inner = &*self.inner;
        let count = |from: usize| -> usize {
            messages[from.min(messages.len())..]
                .iter()
                .map(|m| inner.estimator.count_message(m))
                .sum()
        };
        // Unanchored, `tokens_after` is the tool schemas, the messages and
        // the priming: a prefix is the total less the messages after it,
        // and only those (usually the newest turn) are looked up. Anchored,
        // it is scaled: count the prefix itself.
        let tools = report.breakdown.tools_schema;
        let messages_total = report
            .tokens_after
            .saturating_sub(tools + crate::tokens::REPLY_PRIMING);
        let anchored = report.anchor.is_some();
        let prefix = move |k: usize| -> usize {
            if anchored {
                tools + count(0) - count(k)
            } else {
                tools + messages_total.saturating_sub(count(k))
            }
        };
        let previous = &session.last.out_provider_hashes;
        crate::cache::Prediction {
            messages,
            prefix: &prefix,
            total: report.tokens_after,
            previous,
            previous_total: session
                .last_report
                .as_ref()
                .and_then(|o| o.report.tokens_after()),
            has_previous: !previous.is_empty(),
            added_breakpoints,
        }
        .cache(
            crate::cache::CacheRule::for_model(&inner.limits.model),
            inner.config.price_of(&inner.limits.model).as_ref(),
            inner.config.policy.cache_ttl.ttl(),
            reported,
        )
    }

    /// The estimate of this call, anchored to the reported `usage` of the last request
    /// when given: the last request was our previous output when the input continues
    /// it, else everything before the last reply.
    fn anchored_estimate(
        &self,
        session: &Session,
        input: &Recognised,
        tools: &[serde_json::Value],
        usage: Option<usize>,
    ) -> crate::estimate::Estimate {
        let Some(usage) = usage else {
            return self.estimate(&input.messages, tools);
        };
        let covered = match input.continuation {
            Continuation::Fresh => crate::estimate::covered_before_last_reply(&input.messages),
            Continuation::RawPrefix | Continuation::OutputPrefix => {
                Some(session.last.out_hashes.len())
            }
        };
        match covered {
            Some(covered) => self.inner.estimator.estimate_anchored(
                &self.inner.limits.model,
                self.inner.limits.max_tokens,
                &input.messages,
                tools,
                covered,
                usage,
            ),
            None => self.estimate(&input.messages, tools),
        }
    }

    /// Runs the pipeline over the recognised input.
    #[allow(clippy::too_many_arguments)]
    async fn compact(
        &self,
        session: &Session,
        trail: &mut Trail,
        input: &Recognised,
        tools: &[serde_json::Value],
        decision: &Decision,
        forced: Option<Forced>,
        limits: Limits,
    ) -> Result<Compaction, CompactError> {
        let inner = &*self.inner;
        let policy = &inner.config.policy;
        let run = pipeline::run(
            Input {
                messages: input.messages.clone(),
                tools,
                summary_index: input.summary_index,
                previous_summary: input
                    .summary_index
                    .and(session.summary.as_ref().map(|s| s.body.clone())),
                next_version: session.summary_version() + 1,
                limits,
                summarize_always: decision.turn_triggered || forced == Some(Forced::Manual),
                primary_disabled: session
                    .breaker
                    .is_open(policy.max_compact_failures, SystemTime::now()),
                ledger: session.ledger.clone(),
                recall: self.recall_key(session),
                advertise_recall: self.advertises_recall(),
            },
            policy,
            &inner.estimator,
            inner.summarizer.as_ref(),
        )
        .await;
        run.map_err(|ins| {
            let err = CompactError::insufficient(&ins, limits.max_tokens);
            trail.insufficient(&ins, &err);
            err
        })
    }

    /// After the pipeline: check the output, commit what the session keeps,
    /// archive everything that may leave the context before the compacted
    /// history is returned, and account for it all in the report and the
    /// trail.
    async fn settle(
        &self,
        session: &mut Session,
        trail: &mut Trail,
        input: &Recognised,
        mut c: Compaction,
        report: &mut Report,
    ) -> Result<Vec<Message>, CompactError> {
        if let Err(e) = check_output(&input.messages, &c.messages, &report.input_problems) {
            tracing::error!(session = %session.id(), error = %e, "compaction produced an invalid history");
            trail.failed(&e);
            return Err(e);
        }
        self.commit(session, &mut c).await;
        trail.compacted(&c);
        if c.changed() {
            let step = self.next_step(session).await;
            trail.pruned(&c, report.tokens_before, step);
            self.archive_compaction(session, trail, step, &input.messages, c.summary.as_ref())
                .await;
        }
        report.apply(&c);
        // The depth this compaction reached, for the cost model.
        session.pace.compacted(report.tokens_after);
        Ok(c.messages)
    }

    /// What the session keeps of a compaction: the fact ledger, the
    /// breaker's count, the new summary (and its cross-session copy).
    async fn commit(&self, session: &mut Session, c: &mut Compaction) {
        session.ledger = std::mem::take(&mut c.ledger);
        let inner = &*self.inner;
        let primary_succeeded = c
            .summary
            .as_ref()
            .is_some_and(|s| s.summarizer == inner.summarizer.name());
        session.breaker.record(
            c.primary_failed,
            primary_succeeded,
            inner.config.policy.max_compact_failures,
            std::time::Duration::from_secs(inner.config.summarizer.breaker_cooldown_secs),
            SystemTime::now(),
        );
        if let Some(s) = &c.summary {
            session.set_summary(&s.message, s.version, &s.body);
            self.persist_cross_session(session, &s.body).await;
        }
    }

    /// Limits for one run: the reactive path aims lower; with a cost plan
    /// (`policy.cache: auto`) a run aims a planned run below where the next
    /// compaction fires.
    pub(super) fn run_limits(&self, forced: Option<Forced>, plan: Option<&Plan>) -> Limits {
        let policy = &self.inner.config.policy;
        let max = self.inner.limits.max_tokens;
        let mut window = max;
        if let Some(b) = policy.token_soft_budget.or(policy.token_budget) {
            window = window.min(b);
        }
        let pct = match forced {
            Some(Forced::ContextOverflow) => policy.reactive_target_pct,
            _ => policy.target_pct,
        };
        let budget = max.saturating_sub(policy.hard_cap_buffer);
        let mut target = ((window as f64 * pct) as usize).min(budget);
        if let Some(plan) = plan
            && forced != Some(Forced::ContextOverflow)
        {
            let token_trigger = (window as f64 * policy.trigger_pct) as usize;
            target = plan.target(plan.trigger.min(token_trigger), target);
        }
        Limits {
            max_tokens: max,
            budget,
            target,
        }
    }

    /// Records this call in the session's pace and returns the cost plan
    /// (`policy.cache: auto`, `crate::cache::pace`); `None` with `off`, in
    /// mode `none` and until the pace is known.
    fn pace(&self, session: &mut Session, input: &Recognised, estimate: &Estimate) -> Option<Plan> {
        let previous = match input.continuation {
            Continuation::Fresh => None,
            Continuation::RawPrefix | Continuation::OutputPrefix => session
                .last_report
                .as_ref()
                .and_then(|o| o.report.tokens_after()),
        };
        session.pace.observe(estimate.t_est, previous);
        let inner = &self.inner;
        let policy = &inner.config.policy;
        if policy.cache == CachePolicy::Off || policy.mode == Mode::None {
            return None;
        }
        let model = &inner.limits.model;
        let costs = Costs::of(
            inner.config.price_of(model).as_ref(),
            crate::cache::CacheRule::for_model(model),
            policy.cache_ttl.ttl(),
        );
        let floors = Floors {
            min_tokens: policy.cache_min_tokens,
            reactive_target: (inner.limits.max_tokens as f64 * policy.reactive_target_pct) as usize,
        };
        session.pace.plan(&costs, floors)
    }
}

/// User turns, our own summary not counted (it never opens a turn).
fn user_turns(input: &Recognised) -> usize {
    input
        .messages
        .iter()
        .enumerate()
        .filter(|(i, m)| m.starts_turn() && Some(*i) != input.summary_index)
        .count()
}

/// The invariants every output must satisfy: no pairing problem the input
/// did not have, no call that lost its result. A violation is a bug, and
/// returning a broken history would turn it into a provider 400.
fn check_output(
    input: &[Message],
    output: &[Message],
    input_problems: &[Problem],
) -> Result<(), CompactError> {
    let before: std::collections::HashSet<_> = input_problems.iter().map(Problem::key).collect();
    let new: Vec<String> = validate(output)
        .into_iter()
        .filter(|p| !before.contains(&p.key()))
        .map(|p| p.to_string())
        .collect();
    let lost = lost_results(input, output);
    if new.is_empty() && lost.is_empty() {
        return Ok(());
    }
    Err(CompactError::Internal(format!(
        "compaction would have produced an invalid history (new problems: {new:?}, lost results: {lost:?}); input returned unchanged is over budget, please report this"
    )))
}
