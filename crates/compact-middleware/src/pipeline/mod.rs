//! The compaction pipeline (docs/design.md §5 step 6): tiers, cheapest first,
//! re-estimating after each, stopping as soon as the target is met.
//!
//! This module is pure policy over a message list: no sessions, no events,
//! no I/O except the summarizer call. The manager wraps it.

pub(crate) mod alternate;
mod apply;
mod budget;
mod clearing;
pub(crate) mod fallback;
mod plan;
mod schedule;
mod steps;
pub(crate) mod summary;
mod summary_room;
pub(crate) mod tiers;

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::config::{Mode, Policy};
use crate::estimate::Estimator;
use crate::model::Message;
use crate::summarize::{
    AgentPrefix, FactLedger, FactsReport, Summarizer, SummaryEntry, SummaryRequest,
};
use crate::tokens::REPLY_PRIMING;
use plan::{Class, Layout, Plan};
use tiers::ToolFilter;

pub use fallback::{Outcome as FallbackOutcome, summarize_with_fallbacks};
pub use summary::{SUMMARY_HEADER, summary_message};
pub(crate) use tiers::capped_recall_id;
pub use tiers::{cap_text, cap_text_with_recall};

/// A summary is not worth writing below this many tokens of room, unless
/// the hard budget leaves nothing else.
const MIN_USEFUL_SUMMARY: usize = 256;

/// The hardest cap on a tool output of the latest turn, in characters.
const MIN_CAP_CHARS: usize = 200;

/// The tiers, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// 1: cap oversized tool results, head and tail kept.
    ToolResultBudget,
    /// 2: replace old tool I/O with placeholders.
    ClearToolIo,
    /// 3: fold the remainder into the rolling summary.
    Summarize,
    /// 4: fewer recent turns / tool pairs kept.
    ReduceKeep,
    /// `trim` mode: oldest turns dropped.
    Trim,
}

/// Token limits for one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// The model's window (or `max_context_tokens`).
    pub max_tokens: usize,
    /// Hard ceiling the output must respect: `max_tokens - hard_cap_buffer`.
    pub budget: usize,
    /// Stop as soon as the estimate is at or below this.
    pub target: usize,
}

impl Limits {
    /// The limits in the estimator's own counts when one estimated token stands for
    /// `scale` real ones (usage anchoring, `crate::estimate::Anchor::scale`): the
    /// budget and target shrink by that factor; a factor at or below 1 changes nothing.
    pub fn scaled(self, scale: f64) -> Self {
        if !(scale.is_finite() && scale > 1.0) {
            return self;
        }
        let down = |t: usize| (t as f64 / scale).floor() as usize;
        Limits {
            budget: down(self.budget),
            target: down(self.target),
            ..self
        }
    }
}

/// What the pipeline is given.
pub struct Input<'a> {
    /// The history to compact, oldest first.
    pub messages: Vec<Message>,
    /// Tool schemas of the request (counted as fixed tokens, never changed).
    pub tools: &'a [Value],
    /// Index of our previous summary message in `messages`, if present.
    pub summary_index: Option<usize>,
    /// Body of that summary.
    pub previous_summary: Option<String>,
    /// Version the new summary will carry.
    pub next_version: u32,
    /// The window, budget and target of this run.
    pub limits: Limits,
    /// Summarize the remainder even when an earlier tier met the target
    /// (manual compaction, turn triggers).
    pub summarize_always: bool,
    /// Skip the configured summarizer (circuit breaker open): extractive only.
    pub primary_disabled: bool,
    /// The session's fact ledger: what left the context before this run.
    pub ledger: FactLedger,
    /// The session's recall key when `recall.enabled`: cleared tool
    /// outputs' placeholders then carry their recall ids.
    pub recall: Option<crate::recall::RecallKey>,
    /// `recall.advertise`: the summary message ends with the recall line.
    pub advertise_recall: bool,
}

/// A summary written by this run.
#[derive(Debug, Clone, Serialize)]
pub struct NewSummary {
    /// Its version: the `N` of `COMPACT-SUMMARY vN`.
    pub version: u32,
    /// The summary text, without the header line.
    pub body: String,
    /// The `COMPACT-SUMMARY vN` message that carries `body` in the output:
    /// built once here, hashed by the session and archived as is.
    #[serde(skip)]
    pub message: Message,
    /// The strategy it was written with (`brief` after a refusal).
    pub strategy: crate::summarize::Strategy,
    /// Name of the summarizer that wrote it (`extractive` after a fallback).
    pub summarizer: String,
    /// Messages folded into it (the previous summary excluded).
    pub input_messages: usize,
    /// Tokens of the folded messages plus those of the previous summary.
    pub input_tokens: usize,
    /// Tokens of `body`, as the summarizer counted them.
    pub summary_tokens: usize,
    /// `summary_tokens / input_tokens`, rounded to 4 decimals; 0 when
    /// `input_tokens` is 0.
    pub compression_ratio: f64,
    /// The model that wrote it; `None` for the extractive summarizer.
    pub model: Option<String>,
    /// Prompt tokens billed by the provider; `None` if no model was called.
    pub prompt_tokens: Option<u64>,
    /// Completion tokens billed by the provider; `None` if no model was called.
    pub completion_tokens: Option<u64>,
    /// The prompt the model was sent (`summarizer.prompt`); `None` if no
    /// model wrote the summary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<crate::config::SummaryPrompt>,
    /// Prompt tokens the provider served from its cache, when it said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_prompt_tokens: Option<u64>,
    /// Wall-clock time of the whole fallback chain, in milliseconds.
    pub latency_ms: u64,
    /// What the summary kept of the fact ledger.
    pub facts: Option<FactsReport>,
}

/// A recoverable failure inside the run (the pipeline fell back).
#[derive(Debug, Clone, Serialize)]
pub struct Fallback {
    /// The `error_type` of its `compact.error` event: the error's variant
    /// name (`Timeout`, `OverBudget`, …), `CircuitOpen` or `NoRoomForSummary`.
    pub error_type: String,
    /// The error, for a human.
    pub message: String,
    /// What was done instead: `retry_half_max_tokens`, `brief`,
    /// `extractive` or `pruning_only`.
    pub fallback: String,
}

/// How many messages each layer kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Kept {
    /// Pinned messages (protected, never-prune roles, a previous summary
    /// that no new one replaced).
    pub pinned: usize,
    /// The task (the first user message of the run) was kept.
    pub task: bool,
    /// Recent turns kept whole (after any reduction); 0 when only the
    /// latest turn's last rounds are.
    pub recent_turns: usize,
    /// When the latest turn is kept only in part: its last rounds kept
    /// whole (with its opening message).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recent_rounds: Option<usize>,
    /// Groups kept with their tool I/O, in the recent turns or not.
    pub tool_pairs: usize,
}

/// What the pipeline did: the compacted history and everything the
/// report, the events and the archive say about it.
#[derive(Debug, Clone)]
pub struct Compaction {
    /// The compacted history.
    pub messages: Vec<Message>,
    /// Estimated tokens of the output, tool schemas and reply priming included.
    pub tokens_after: usize,
    /// The tiers that changed something, in the order they ran.
    pub tiers: Vec<Tier>,
    /// Tool results capped by tier 1.
    pub capped: usize,
    /// Messages whose tool I/O tier 2 replaced with placeholders.
    pub cleared: usize,
    /// Messages folded into the summary (the previous summary excluded).
    pub summarized: usize,
    /// Messages dropped without a summary (trim mode, pruning-only fallback).
    pub dropped: usize,
    /// How many messages each kept layer holds.
    pub kept: Kept,
    /// The summary this run wrote; `None` when it wrote none (nothing new
    /// to fold, no room, trim mode, or every summarizer failed).
    pub summary: Option<NewSummary>,
    /// Every step down the summarizer's fallback chain, in order.
    pub fallbacks: Vec<Fallback>,
    /// Whether `tokens_after` is at or below the target.
    pub target_reached: bool,
    /// Summarizer needed to succeed for the circuit breaker's count.
    pub primary_failed: bool,
    /// The fact ledger with everything that left the context in this run.
    pub ledger: FactLedger,
    /// Tool text that read as orders to the agent and was kept out of the
    /// summary in this run (`summarize/guard.rs`): the `compact.security`
    /// event.
    pub neutralized: Vec<crate::summarize::Neutralized>,
}

impl Compaction {
    /// Whether anything in the history changed (capped, cleared, folded
    /// or dropped): only then is there something to archive.
    pub fn changed(&self) -> bool {
        self.capped + self.cleared + self.summarized + self.dropped > 0
    }
}

/// The pinned messages (plus the minimal tail) do not fit the budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Insufficient {
    /// Tokens of the pinned groups.
    pub pinned_tokens: usize,
    /// Tokens of the minimal tail beyond the pinned groups; 0 when the
    /// pinned groups alone overflow.
    pub tail_tokens: usize,
    /// Tokens of the tool schemas plus the reply priming.
    pub fixed_tokens: usize,
    /// The hard budget that was exceeded.
    pub budget: usize,
}

/// Runs the pipeline for `policy.mode`.
pub async fn run(
    input: Input<'_>,
    policy: &Policy,
    est: &Estimator,
    summarizer: &dyn Summarizer,
) -> Result<Compaction, Insufficient> {
    // The tool schemas go with the summary request only when the
    // summarizer sends the agent's prefix (`summarizer.prompt`).
    let prefix_tools = summarizer
        .wants_agent_prefix()
        .then(|| input.tools.to_vec());
    let mut w = Work::new(input, policy, est);
    w.prefix_tools = prefix_tools;
    w.check_pinned()?;
    match policy.mode {
        Mode::None => {}
        // The sliding window is applied to the input by the manager; what
        // it returns is budgeted like `auto`.
        Mode::Auto | Mode::SlidingWindow => w.auto(summarizer).await?,
        Mode::Compact => {
            let plan = w.initial_plan();
            w.clear(&plan);
            if w.total() > w.limits.budget {
                w.auto(summarizer).await?;
            }
        }
        Mode::Summarize => {
            w.summarize_always = true;
            w.summarize_and_reduce(summarizer).await?;
        }
        Mode::Trim => w.trim()?,
    }
    Ok(w.finish())
}

struct Work<'a> {
    policy: &'a Policy,
    est: &'a Estimator,
    original: Vec<Message>,
    msgs: Vec<Message>,
    counts: Vec<usize>,
    fixed: usize,
    layout: Layout,
    names: HashMap<String, String>,
    /// The arguments of every call, by call id: what produced each result.
    inputs: HashMap<String, String>,
    limits: Limits,
    summary_index: Option<usize>,
    /// The history is Anthropic Messages: the summary is a user message, and the
    /// output is bridged so that roles alternate (`alternate`).
    anthropic: bool,
    /// Index in the input of each message of `msgs` (bridges are not in `msgs`).
    input_index: Vec<usize>,
    /// The agent's step of each message of `original` (`steps.rs`): what
    /// its tool facts are labelled with.
    steps: Vec<Option<u32>>,
    /// Where `refresh_summary` inserted a new summary message into `msgs`.
    inserted_summary: Option<usize>,
    /// The input opened with a user message.
    input_starts_with_user: bool,
    previous_summary: Option<String>,
    next_version: u32,
    summarize_always: bool,
    primary_disabled: bool,
    recall: Option<crate::recall::RecallKey>,
    advertise_recall: bool,
    out: Compaction,
    /// Set once the layers are decided: the final message list is assembled from it.
    chosen: Option<(Plan, Option<Message>)>,
    /// Messages capped / cleared so far (a message is counted once).
    capped: std::collections::BTreeSet<usize>,
    cleared: std::collections::BTreeSet<usize>,
    /// Messages whose whole text went to the ledger in this run: taken in
    /// once, however many tiers let go of them.
    absorbed: std::collections::HashSet<usize>,
    /// Tool outputs that stay in the context whose orders were learnt
    /// before a reply after them left (`absorb`).
    learnt: std::collections::HashSet<usize>,
    /// The ledger's items, ranked facts and trail revision before this run.
    ledger_at_start: (usize, usize, u64),
    /// Whether the ledger learned a fact in this run, by the item count it
    /// was computed at.
    grew: std::cell::Cell<Option<(usize, bool)>>,
    /// The request's tools when the summarizer sends the agent's prefix.
    prefix_tools: Option<Vec<Value>>,
}

impl<'a> Work<'a> {
    fn new(input: Input<'_>, policy: &'a Policy, est: &'a Estimator) -> Self {
        let mut w = Self::build(input, policy, est);
        w.ledger_at_start = (
            w.out.ledger.len(),
            w.out.ledger.ranked_len(),
            w.out.ledger.trail_rev(),
        );
        w
    }

    fn build(input: Input<'_>, policy: &'a Policy, est: &'a Estimator) -> Self {
        let anthropic = input.messages.iter().any(|m| m.kind().shape.is_anthropic());
        let input_starts_with_user = alternate::starts_with_user(&input.messages);
        // Bridges carry nothing: drop them, and bridge the output anew.
        let (msgs, input_index) = if anthropic {
            alternate::strip(input.messages)
        } else {
            let n = input.messages.len();
            (input.messages, (0..n).collect())
        };
        let summary_index = input
            .summary_index
            .and_then(|si| input_index.iter().position(|&i| i == si));
        let counts = est.counts(&msgs);
        let fixed = est.count_tools(input.tools) + REPLY_PRIMING;
        let mut layout = Layout::new(
            &msgs,
            |i| Some(i) != summary_index && policy.pins(&msgs[i]),
            |i| Some(i) == summary_index,
        );
        if policy.keep_task {
            layout = layout.with_task(&msgs);
        }
        let names = tiers::call_names(&msgs);
        let inputs: HashMap<String, String> = msgs
            .iter()
            .flat_map(|m| m.tool_arguments())
            .map(|(id, args)| (id.to_owned(), args))
            .collect();
        let mut ledger = input.ledger;
        let steps = steps::number(&msgs, summary_index, ledger.steps());
        if ledger.is_empty()
            && let Some(previous) = &input.previous_summary
        {
            // A summary we hold no ledger for (written by another process,
            // or before ledgers existed): its facts seed this one.
            ledger.absorb_summary(previous);
        }
        // Tool output that names what the people and the agent talk about
        // is salient; learn those names from all the prose in the context.
        for (i, m) in msgs.iter().enumerate() {
            if Some(i) != summary_index
                && matches!(
                    m.role(),
                    crate::model::Role::User | crate::model::Role::Assistant
                )
                && m.kind().item == crate::model::ItemType::Message
            {
                ledger.note_mentions(&m.plain_text());
            }
        }
        Self {
            policy,
            est,
            original: msgs.clone(),
            msgs,
            counts,
            fixed,
            layout,
            names,
            inputs,
            limits: input.limits,
            summary_index,
            anthropic,
            input_index,
            steps,
            inserted_summary: None,
            input_starts_with_user,
            previous_summary: input.previous_summary,
            next_version: input.next_version,
            summarize_always: input.summarize_always,
            primary_disabled: input.primary_disabled,
            recall: input.recall,
            advertise_recall: input.advertise_recall,
            out: Compaction {
                messages: Vec::new(),
                tokens_after: 0,
                tiers: Vec::new(),
                capped: 0,
                cleared: 0,
                summarized: 0,
                dropped: 0,
                kept: Kept::default(),
                summary: None,
                fallbacks: Vec::new(),
                target_reached: false,
                primary_failed: false,
                ledger,
                neutralized: Vec::new(),
            },
            chosen: None,
            capped: Default::default(),
            cleared: Default::default(),
            absorbed: Default::default(),
            learnt: Default::default(),
            ledger_at_start: (0, 0, 0),
            grew: std::cell::Cell::new(None),
            prefix_tools: None,
        }
    }

    /// The ledger's view of message `i` as it was received, or of `text`
    /// in its place (the part of a capped output that was cut).
    fn entry(&self, i: usize, text: Option<String>) -> SummaryEntry {
        let m = &self.original[i];
        let name = m
            .kind()
            .results
            .first()
            .and_then(|id| self.names.get(id))
            .map(String::as_str)
            .or(m.kind().calls.first().map(|c| c.name.as_str()));
        let mut e = summary::entry(m, name);
        e.input = m
            .kind()
            .results
            .first()
            .and_then(|id| self.inputs.get(id))
            .cloned();
        if let Some(text) = text {
            e.text = text;
            e.part = true;
        }
        e.step = self.steps.get(i).copied().flatten();
        e
    }

    /// Everything in `indices` leaves the context: its facts go to the
    /// ledger first.
    fn absorb(&mut self, indices: impl IntoIterator<Item = usize>) {
        let fresh: Vec<usize> = indices
            .into_iter()
            .filter(|&i| self.absorbed.insert(i))
            .collect();
        // A reply can leave before a tool output it repeats (a tool pair
        // kept while the text around it folds): what reads as orders in
        // the outputs before it that stay is learnt first, so an echo of
        // it is known for one (`FactLedger::learn_orders`).
        let last_prose = fresh
            .iter()
            .copied()
            .filter(|&i| {
                matches!(
                    self.original[i].role(),
                    crate::model::Role::User | crate::model::Role::Assistant
                )
            })
            .max();
        if let Some(last) = last_prose {
            let staying: Vec<usize> = (0..last)
                .filter(|&j| {
                    self.original[j].role() == crate::model::Role::Tool
                        && !self.absorbed.contains(&j)
                        && self.learnt.insert(j)
                })
                .collect();
            for j in staying {
                let e = self.entry(j, None);
                self.out.ledger.learn_orders(&e);
            }
        }
        let entries: Vec<SummaryEntry> = fresh.into_iter().map(|i| self.entry(i, None)).collect();
        if !entries.is_empty() {
            self.out.ledger.absorb(&entries);
        }
    }

    async fn auto(&mut self, summarizer: &dyn Summarizer) -> Result<(), Insufficient> {
        self.cap();
        if self.met_target() {
            self.refresh_summary(summarizer).await;
            return Ok(());
        }
        let plan = self.initial_plan();
        self.clear(&plan);
        if self.met_target() {
            self.refresh_summary(summarizer).await;
            return Ok(());
        }
        self.summarize_and_reduce(summarizer).await
    }

    fn finish(mut self) -> Compaction {
        let caught = self.out.ledger.take_neutralized();
        self.out.neutralized.splice(0..0, caught);
        let indexed: Vec<(Message, Option<usize>)> = match self.chosen.take() {
            None => {
                let plan = self.initial_plan();
                self.out.kept = self.kept_counts(&plan);
                // A summary the refresh inserted has no input index; the
                // messages after it had theirs before it came.
                let inserted = self.inserted_summary;
                std::mem::take(&mut self.msgs)
                    .into_iter()
                    .enumerate()
                    .map(|(i, m)| match inserted {
                        Some(at) if i == at => (m, None),
                        Some(at) if i > at => (m, Some(i - 1)),
                        _ => (m, Some(i)),
                    })
                    .collect()
            }
            Some((plan, summary)) => {
                self.out.kept = self.kept_counts(&plan);
                assemble(&plan, std::mem::take(&mut self.msgs), summary)
            }
        };
        // The next call sends these back: their steps go with the ledger.
        let remembered = steps::remember(indexed.iter().map(|(m, i)| (m, *i)), &self.steps);
        self.out.ledger.set_steps(remembered);
        let messages = if self.anthropic {
            let indexed = indexed
                .into_iter()
                .map(|(m, i)| (m, i.map(|i| self.input_index[i])))
                .collect();
            alternate::alternate(indexed, self.input_starts_with_user)
        } else {
            indexed.into_iter().map(|(m, _)| m).collect()
        };
        let counts = self.est.counts(&messages);
        self.out.tokens_after = self.fixed + counts.iter().sum::<usize>();
        self.out.target_reached = self.out.tokens_after <= self.limits.target;
        self.out.messages = messages;
        self.out
    }
}

/// Pinned groups before the first kept non-pinned group, then the summary,
/// then every other kept group, all in their original order. A pinned group
/// that comes after the folded span (say a protected latest user message)
/// stays after the summary: the summary never ends up behind what followed
/// the messages it replaces.
///
/// Each message comes with its index in `msgs` (`None` for the summary).
fn assemble(
    plan: &Plan,
    msgs: Vec<Message>,
    summary: Option<Message>,
) -> Vec<(Message, Option<usize>)> {
    let last_folded = plan
        .class
        .iter()
        .rposition(|c| matches!(c, Class::Remainder | Class::Summary));
    let mut slots: Vec<Option<Message>> = msgs.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(slots.len() + 1);
    let mut summary = summary;
    for (gi, (g, class)) in plan.groups.iter().zip(&plan.class).enumerate() {
        let after_folded = last_folded.is_some_and(|l| gi > l);
        match class {
            Class::Remainder | Class::Summary => continue,
            Class::Pinned if !after_folded => {}
            Class::Pinned | Class::Recent | Class::ToolIo => {
                if let Some(s) = summary.take() {
                    out.push((s, None));
                }
            }
        }
        for i in g.clone() {
            if let Some(m) = slots[i].take() {
                out.push((m, Some(i)));
            }
        }
    }
    if let Some(s) = summary.take() {
        out.push((s, None));
    }
    out
}
