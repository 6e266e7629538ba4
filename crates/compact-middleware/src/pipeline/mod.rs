//! The compaction pipeline (docs/design.md §5 step 6): tiers, cheapest first,
//! re-estimating after each, stopping as soon as the target is met.
//!
//! This module is pure policy over a message list: no sessions, no events,
//! no I/O except the summarizer call. The manager wraps it.

pub(crate) mod alternate;
pub(crate) mod fallback;
mod plan;
mod steps;
pub(crate) mod summary;
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

    fn total(&self) -> usize {
        self.fixed + self.counts.iter().sum::<usize>() + self.bridge_tokens()
    }

    /// What the bridges of an Anthropic history cost as the messages stand
    /// (the input's were dropped; `finish` draws them anew).
    fn bridge_tokens(&self) -> usize {
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

    fn recount(&mut self, changed: &[usize]) {
        for &i in changed {
            self.counts[i] = self.est.count_message(&self.msgs[i]);
        }
    }

    fn group_tokens(&self, gi: usize) -> usize {
        self.layout.groups[gi].clone().map(|i| self.counts[i]).sum()
    }

    fn pinned_tokens(&self) -> usize {
        (0..self.layout.groups.len())
            .filter(|&gi| self.layout.pinned[gi])
            .map(|gi| self.group_tokens(gi))
            .sum()
    }

    fn check_pinned(&self) -> Result<(), Insufficient> {
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

    fn met_target(&self) -> bool {
        !self.summarize_always && self.total() <= self.limits.target
    }

    /// Tier 1 over every non-pinned message.
    fn cap(&mut self) {
        let indices: Vec<usize> = (0..self.layout.groups.len())
            .filter(|&gi| !self.layout.pinned[gi] && !self.layout.summary[gi])
            .flat_map(|gi| self.layout.groups[gi].clone())
            .collect();
        self.cap_indices(indices, self.policy.tool_result_max_chars);
    }

    /// Caps the tool results in `indices` to `max_chars`; the part cut
    /// goes to the ledger first.
    fn cap_indices(&mut self, indices: Vec<usize>, max_chars: usize) {
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
    fn latest_rounds(&self) -> usize {
        self.layout.latest_rounds(&self.msgs).len()
    }

    /// The configured keep counts as a plan: the last `keep_recent_turns`
    /// turns, unless the latest turn alone has more than
    /// `keep_recent_rounds` rounds (an agent's run): then its opening
    /// message and its last `keep_recent_rounds` rounds, its older rounds
    /// compacting like older turns.
    fn initial_plan(&self) -> Plan {
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
    fn clear(&mut self, plan: &Plan) {
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
    fn clear_indices(&mut self, indices: Vec<usize>, clear_inputs: bool, filter: &ToolFilter) {
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

    /// Tokens kept by `plan`: everything but the remainder, and but the old
    /// summary when a new one replaces it.
    fn kept_tokens(&self, plan: &Plan) -> usize {
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

    /// New material is worth a new summary: a span to fold, or facts the
    /// ledger learned in this run; with neither, the previous summary stays
    /// as it is (no version churn).
    fn needs_summary(&self, plan: &Plan) -> bool {
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
    fn may_rewrite_summary(&self) -> bool {
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
    fn heads_long_run(&self, si: usize) -> bool {
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
    fn ledger_grew(&self) -> bool {
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

    fn summary_cap(&self) -> usize {
        (self.policy.summary_max_pct * self.limits.max_tokens as f64) as usize
    }

    /// The role of our summary: the configured one, except in an Anthropic history,
    /// which has no system messages and whose first message must be the user's.
    fn summary_role(&self) -> crate::model::Role {
        if self.anthropic {
            crate::model::Role::User
        } else {
            self.policy.summary_role
        }
    }

    /// The summary message's last line: the recall line with
    /// `recall.advertise`.
    fn summary_footer(&self) -> Option<&'static str> {
        self.advertise_recall
            .then_some(crate::recall::tool::SUMMARY_LINE)
    }

    fn summary_overhead(&self) -> usize {
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
    fn bridge_allowance(&self, plan: &Plan, replaced: bool) -> usize {
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

    /// The plans of tier 4, most kept first: the configured counts, then
    /// fewer recent turns down to 1, then fewer tool pairs down to 1, then
    /// fewer rounds of the latest turn down to its last one. When the latest
    /// turn alone has more than `keep_recent_rounds` rounds, only the
    /// rounds steps, from that count.
    fn schedule(&self) -> Vec<Plan> {
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
    async fn summarize_and_reduce(
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

    /// The room a summary message takes next to what `plan` keeps: its
    /// overhead and [`Work::summary_want`], or nothing when `plan` folds
    /// nothing.
    fn summary_reserve(&mut self, plan: &Plan) -> usize {
        if self.needs_summary(plan) {
            self.summary_overhead() + self.summary_want(plan)
        } else {
            0
        }
    }

    /// What the summary wants to show every fact of the ledger at its
    /// short form (with `plan`'s remainder folded in), up to the cap.
    fn summary_want(&mut self, plan: &Plan) -> usize {
        self.absorb(plan.messages_in(Class::Remainder).collect::<Vec<_>>());
        self.ledger_want()
    }

    /// What the ledger as it is wants to show every fact at its short
    /// form, up to the cap.
    fn ledger_want(&self) -> usize {
        let counter = self.est.counter();
        let count: crate::summarize::TokenCountFn = Arc::new(move |s: &str| counter.count(s));
        self.out
            .ledger
            .want_tokens(self.policy.strategy, &count)
            .min(self.summary_cap())
    }

    /// Last resort: pinned groups, the task, the latest turn's opening
    /// message and its last round. That round's tool outputs are capped
    /// harder, down to the minimum; `Insufficient` only when those alone
    /// cannot fit (the error's tail is the task, the opening message and
    /// the round).
    fn minimal_plan(&mut self, reserve: usize) -> Result<Plan, Insufficient> {
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
    fn minimal_trim_plan(&mut self) -> Result<Plan, Insufficient> {
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

    async fn apply_summary(&mut self, plan: Plan, summarizer: &dyn Summarizer) {
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
    fn commit_outcome(
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
    async fn refresh_summary(&mut self, summarizer: &dyn Summarizer) {
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

    /// Whether message `i` lies in the last `keep_recent_turns` turns as a
    /// reader who cannot tell our summary from a message counts them (one
    /// fed back without `meta`): such a message must come out unchanged,
    /// even when it is our summary.
    fn in_recent_turns(&self, i: usize) -> bool {
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

    /// `trim` mode: drop the oldest whole turns, keep the last N (fewer if
    /// the budget demands), no summary.
    fn trim(&mut self) -> Result<(), Insufficient> {
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

    fn kept_counts(&self, plan: &Plan) -> Kept {
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
