//! The deterministic extractive summarizer: renders a fact ledger within a
//! token budget.
//!
//! # What it keeps
//!
//! Verbatim: constraints, decisions, open actions, errors, and sentences
//! that carry an identifier (tickets, paths, URLs, emails, versions, hosts,
//! regions, ports, quantities), from what the people and the agent said;
//! the task as first stated and the latest request; from tool output, what
//! stood out of it (see `facts/tool.rs`), and at the lowest priority its
//! bulk.
//!
//! # Budget: shrink everything, then drop
//!
//! Each statement has a rank ([`rank`]): constraints, decisions,
//! identifiers and open actions of the conversation, the latest request,
//! salient tool facts, the first goal, other goals; then the bulk of tool
//! output. Every statement is first placed at its smallest form (its key,
//! see [`super::forms`]); when even that does not fit, statements are
//! dropped, lowest rank and least recently mentioned first. Then what room
//! is left is spent, most important first: every statement grows to its
//! short form, then to its full sentence; then the bulk of tool output (at
//! most a fifth of the budget); then identifiers no shown statement
//! carries. The body is counted exactly at the end and trimmed in the same
//! order if the per-line estimate was short. Every fact dropped or shrunk
//! is counted in the [`FactsReport`] of the summary.

use std::collections::HashSet;

use super::facts::shape::{KeyMap, shape_key};
use super::facts::{Item, Kind, Ledger, clip, fact_keys};
use super::forms::Size;
use super::render::{parse_previous, render, section_of};
use super::{
    FactsReport, Strategy, SummarizeError, Summarizer, Summary, SummaryRequest, TokenCountFn,
};

/// Most dropped keys named in a report.
const MAX_DROPPED_KEYS: usize = 50;
/// Ranks at or below this are the bulk of tool output, not facts of the
/// conversation: shown only with room to spare, and not counted as facts.
pub(crate) const BULK: u8 = 2;
/// A tool line whose shape the session has seen more often than this is a
/// template's, whatever it looked like when it was first read.
const TEMPLATE_SEEN: u32 = 2;

/// Deterministic, offline summarizer: keeps the facts a successor agent
/// needs, verbatim, and fits them into the budget. Never fails.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExtractiveSummarizer;

impl ExtractiveSummarizer {
    /// Creates the summarizer (it has no state).
    pub fn new() -> Self {
        Self
    }

    /// Summarizes synchronously. The body fits `req.max_tokens` as measured
    /// by `req.count_tokens` (it may be empty when nothing fits) and `tokens`
    /// is that measurement.
    ///
    /// With `req.ledger` (the pipeline's), the ledger is rendered as is: it
    /// already holds the span. Without one, a ledger is built from the
    /// previous summary's text and the span.
    pub fn summarize_sync(&self, req: &SummaryRequest) -> Summary {
        match &req.ledger {
            Some(ledger) => fit(&ledger.0, req),
            None => {
                let mut ledger = Ledger::default();
                if let Some(previous) = req.previous.as_deref() {
                    parse_previous(previous, &mut ledger);
                }
                ledger.absorb(&req.entries);
                fit(&ledger, req)
            }
        }
    }
}

impl Summarizer for ExtractiveSummarizer {
    fn name(&self) -> &str {
        "extractive"
    }

    fn summarize<'a>(
        &'a self,
        req: &'a SummaryRequest,
    ) -> compact_events::BoxFuture<'a, Result<Summary, SummarizeError>> {
        Box::pin(async move { Ok(self.summarize_sync(req)) })
    }
}

/// The priority of an item: higher is kept longer.
pub(crate) fn rank(it: &Item, first_goal: bool, templated: bool) -> u8 {
    use Kind::*;
    if it.kind.is_trail() {
        let none = super::facts::trail::Trail::default();
        return super::facts::trail::rank(it.kind, &it.text, it.trail.as_ref().unwrap_or(&none))
            .unwrap_or(1);
    }
    if !it.from_tool {
        return match it.kind {
            Constraint => 10,
            Decision => 9,
            // What was asked last, in one line, goes before any fact does.
            Latest => 11,
            Action | Fact | Error => 8,
            Goal if first_goal => 5,
            Goal => 3,
            Entity | File | Url | Api => 4,
            // Ranked above, by what was done.
            Touched | Command => 1,
        };
    }
    if it.salient && !templated {
        return match it.kind {
            Entity | File | Url | Api => 2,
            _ => 6,
        };
    }
    match it.kind {
        Error | Constraint | Decision | Action => 2,
        _ => 1,
    }
}

/// Mentions (after the first) that make a name the people or the agent
/// wrote a fact of its own: one they keep coming back to.
pub(crate) const FOCUS_AGAIN: u32 = 2;
/// The rank of a name in focus: the agent's working notes' (which mostly
/// say what it did with those names), and dropped after them.
const FOCUS_RANK: u8 = 7;

/// A name of code (a function, a class, a field) the people or the agent
/// wrote in three sentences or more: the work is about it, and one short
/// entry in the summary's name list keeps it when the sentences that named
/// it are gone.
fn in_focus(it: &Item) -> bool {
    matches!(it.kind, Kind::Api | Kind::Entity)
        && !it.from_tool
        && it.again >= FOCUS_AGAIN
        && names_code(&it.text)
}

/// Whether a backticked name reads as code of this project rather than a
/// word or a language's own: `_set_pk_val`, `FieldCacheMixin`,
/// `get_cache_name()`, `order.product_id`; not `None`, `self`, `order`,
/// `Ellipsis`.
fn names_code(name: &str) -> bool {
    let bare = name.trim_end_matches("()");
    if [
        "None",
        "True",
        "False",
        "null",
        "nil",
        "undefined",
        "self",
        "this",
        "cls",
    ]
    .contains(&bare)
        || !bare.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        || bare.contains(['@', '/', ' '])
    {
        return false;
    }
    let humps = bare
        .as_bytes()
        .windows(2)
        .filter(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase())
        .count();
    bare.contains(['_', '.', ':']) || humps > 0
}

/// A statement, or a name in focus: what the fitting treats as a fact.
fn is_fact(it: &Item) -> bool {
    it.kind.is_statement() || in_focus(it)
}

/// The rank of `it` in `ledger`: a tool line that turned out to be a
/// template's, and a prose sentence that states nothing but identifiers of
/// the usual kind, rank lower than they first looked.
fn rank_in(ledger: &Ledger, alike: &Alike, it: &Item, first_goal: bool) -> u8 {
    if in_focus(it) {
        return FOCUS_RANK;
    }
    let r = rank(it, first_goal, templated(ledger, alike, it));
    if it.weak {
        return r.min(BULK + 1);
    }
    if it.note {
        return r.min(7);
    }
    if !it.from_tool && it.kind == Kind::Fact && ledger.names_only_the_usual(&it.text) {
        return r.min(4);
    }
    r
}

/// Whether a tool line turned out to be one of a template's many: its
/// shape came up in the output again and again, or the ledger holds many
/// lines like it (`source: ops.sites, generated_at: …` once per query,
/// read from JSON rather than seen as a line).
fn templated(ledger: &Ledger, alike: &Alike, it: &Item) -> bool {
    it.shape.is_some_and(|s| {
        ledger.shapes.count(s) > TEMPLATE_SEEN
            || alike
                .get(&shape_key(&it.text))
                .is_some_and(|&n| n > TEMPLATE_SEEN)
    })
}

/// How many live salient tool lines share each shape.
type Alike = KeyMap<u32>;

fn alike(ledger: &Ledger) -> Alike {
    let mut counts = Alike::default();
    for it in &ledger.items {
        if it.from_tool && it.salient && it.shape.is_some() && it.superseded_by.is_none() {
            *counts.entry(shape_key(&it.text)).or_default() += 1;
        }
    }
    counts
}

/// The first goal: the task as first stated.
fn first_goal(items: &[Item]) -> Option<usize> {
    (0..items.len())
        .filter(|&i| items[i].kind == Kind::Goal && items[i].superseded_by.is_none())
        .min_by_key(|&i| items[i].first)
}

/// Live statements that rank above the bulk (narrative aside): what is
/// worth a summary of its own. A file touched is not, on its own: the call
/// that touched it is what a cleared output leaves in the context.
pub(crate) fn ranked_facts(ledger: &Ledger) -> usize {
    let alike = alike(ledger);
    ledger
        .items
        .iter()
        .filter(|it| {
            it.superseded_by.is_none()
                && is_fact(it)
                && !it.kind.is_narrative()
                && it.kind != Kind::Touched
                && rank_in(ledger, &alike, it, false) > BULK
        })
        .count()
}

/// Tokens of the ledger's facts at their short forms (a sentence cut to
/// its clause, a command with its status and what failed), headers
/// included: the room the summary wants. Less, and facts shrink to their
/// keys, which keep a fact's identifiers but not what it said of them.
pub(crate) fn want_tokens(ledger: &Ledger, strategy: Strategy, count: &TokenCountFn) -> usize {
    let goal = first_goal(&ledger.items);
    let alike = alike(ledger);
    let mut sections: HashSet<usize> = HashSet::new();
    let mut total = 0;
    for (i, it) in ledger.items.iter().enumerate() {
        if it.superseded_by.is_some()
            || !is_fact(it)
            || rank_in(ledger, &alike, it, goal == Some(i)) <= BULK
        {
            continue;
        }
        let Some((section, header, _)) = section_of(strategy, it.kind, it.from_tool) else {
            continue;
        };
        if sections.insert(section) {
            total += count(header) + 1;
        }
        let [_, short, _] = ledger.forms.of(it);
        total += count(&short) + 2;
    }
    total
}

/// One item as the fitting sees it.
struct Row {
    item: usize,
    /// The items a folded row stands for (`fold.rs`), oldest first; empty
    /// for a row of one item.
    members: Vec<usize>,
    rank: u8,
    section: usize,
    forms: [String; 3],
    /// Estimated tokens of the item's line, per size.
    cost: [usize; 3],
}

/// A row of section `sec` went from shown or not to shown or not
/// (`was_now`): a section's header is paid while it shows a row, so the
/// first row shown adds the header's cost to `total` and the last one
/// hidden takes it back. The fitting and the completion of a model's
/// summary both keep their totals this way.
fn count_header(
    per_section: &mut [usize],
    header_cost: &[usize],
    total: &mut usize,
    sec: usize,
    was_now: (bool, bool),
) {
    match was_now {
        (false, true) => {
            if per_section[sec] == 0 {
                *total += header_cost[sec];
            }
            per_section[sec] += 1;
        }
        (true, false) => {
            per_section[sec] -= 1;
            if per_section[sec] == 0 {
                *total -= header_cost[sec];
            }
        }
        _ => {}
    }
}

/// The fitting: which rows are shown, at which size.
struct Fit<'a> {
    items: &'a [Item],
    req: &'a SummaryRequest,
    rows: Vec<Row>,
    shown: Vec<Option<Size>>,
    /// Rows shown per section, and each section header's cost.
    per_section: Vec<usize>,
    header_cost: Vec<usize>,
    total: usize,
}

impl Fit<'_> {
    fn cost(&self, r: usize, size: Option<Size>) -> usize {
        size.map_or(0, |s| self.rows[r].cost[s as usize])
    }

    fn set(&mut self, r: usize, size: Option<Size>) {
        let before = self.shown[r];
        let sec = self.rows[r].section;
        self.total = self.total + self.cost(r, size) - self.cost(r, before);
        count_header(
            &mut self.per_section,
            &self.header_cost,
            &mut self.total,
            sec,
            (before.is_some(), size.is_some()),
        );
        self.shown[r] = size;
    }

    /// What `r` would add at `size`, header included.
    fn delta(&self, r: usize, size: Size) -> usize {
        let header = if self.shown[r].is_none() && self.per_section[self.rows[r].section] == 0 {
            self.header_cost[self.rows[r].section]
        } else {
            0
        };
        (self.cost(r, Some(size)) + header).saturating_sub(self.cost(r, self.shown[r]))
    }

    fn text(&self, r: usize) -> Option<&str> {
        self.shown[r].map(|s| self.rows[r].forms[s as usize].as_str())
    }

    fn rendered(&self) -> (String, usize) {
        let mut shown: Vec<Option<String>> = vec![None; self.items.len()];
        for r in 0..self.rows.len() {
            if let Some(t) = self.text(r) {
                shown[self.rows[r].item] = Some(t.to_owned());
            }
        }
        let text = render(self.items, &shown, self.req.strategy);
        let tokens = (self.req.count_tokens)(&text);
        (text, tokens)
    }
}

/// The highest rank at which a statement that repeats what others show
/// goes first: the agent's working notes and tool facts. What the people
/// said (constraints, decisions, requests, their facts) and the trail are
/// dropped by rank and age only.
const REPEATS_GO_FIRST: u8 = 7;

/// Drops facts, least important first, until the body fits. Within one
/// rank, a statement whose identifiers other shown statements all carry
/// (or that names none) goes before one that names something nothing
/// else does, oldest first in each: a summary of forty notes about one
/// variable says less than one of forty notes about forty things.
fn drop_until_fit(f: &mut Fit<'_>, facts: &[usize], budget: usize) {
    // `None`: dropped by rank and age only.
    let keys: Vec<Option<Vec<String>>> = facts
        .iter()
        .map(|&r| {
            let it = &f.items[f.rows[r].item];
            // A folded row's keys are those of all its lines.
            (!(it.kind.is_trail() || in_focus(it) || f.rows[r].rank > REPEATS_GO_FIRST))
                .then(|| fact_keys(&f.rows[r].forms[2]))
        })
        .collect();
    let mut carried: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
    for k in keys.iter().flatten().flatten() {
        *carried.entry(k.as_str()).or_default() += 1;
    }
    let mut at = facts.len();
    while at > 0 && f.total > budget {
        // The rows of the lowest rank still standing: facts[start..at].
        let rank = f.rows[facts[at - 1]].rank;
        let start = facts[..at]
            .iter()
            .rposition(|&r| f.rows[r].rank != rank)
            .map_or(0, |p| p + 1);
        if rank <= REPEATS_GO_FIRST {
            for j in (start..at).rev() {
                if f.total <= budget {
                    return;
                }
                let repeats = keys[j]
                    .as_ref()
                    .is_some_and(|ks| ks.iter().all(|k| carried.get(k.as_str()) > Some(&1)));
                if repeats && f.shown[facts[j]].is_some() {
                    for k in keys[j].iter().flatten() {
                        if let Some(n) = carried.get_mut(k.as_str()) {
                            *n -= 1;
                        }
                    }
                    f.set(facts[j], None);
                }
            }
        }
        // Then the rest, a name in focus after the sentences beside it.
        let order = drop_order(f, facts, start..at, rank <= REPEATS_GO_FIRST);
        for focus in [false, true] {
            for &j in &order {
                if f.total <= budget {
                    return;
                }
                let r = facts[j];
                if f.shown[r].is_some() && in_focus(&f.items[f.rows[r].item]) == focus {
                    for k in keys[j].iter().flatten() {
                        if let Some(n) = carried.get_mut(k.as_str()) {
                            *n -= 1;
                        }
                    }
                    f.set(r, None);
                }
            }
        }
        at = start;
    }
}

/// Spans of the conversation the working notes and tool facts of one rank
/// are spread over when they are dropped.
const SPREAD_SPANS: u64 = 8;

/// The order in which the rows `facts[span]` (all of one rank) are dropped:
/// oldest first; with `spread`, from the busiest stretch of the
/// conversation first (oldest first within it), so a summary keeps a few
/// findings of every stretch rather than every note of the last one: an
/// agent that reasoned in forty sentences about one thing late in a run
/// does not push out the one line that said what it found early on.
fn drop_order(
    f: &Fit<'_>,
    facts: &[usize],
    span: std::ops::Range<usize>,
    spread: bool,
) -> Vec<usize> {
    let oldest_first = span.clone().rev();
    if !spread || span.len() < 2 {
        return oldest_first.collect();
    }
    let last = |j: usize| f.items[f.rows[facts[j]].item].last;
    let (lo, hi) = span
        .clone()
        .map(last)
        .fold((u64::MAX, 0), |(lo, hi), l| (lo.min(l), hi.max(l)));
    let width = (hi - lo) / SPREAD_SPANS + 1;
    let mut spans: Vec<std::collections::VecDeque<usize>> =
        vec![std::collections::VecDeque::new(); SPREAD_SPANS as usize];
    for j in oldest_first {
        spans[((last(j) - lo) / width) as usize].push_back(j);
    }
    let mut order = Vec::with_capacity(span.len());
    while let Some(busiest) = (0..spans.len())
        .filter(|&s| !spans[s].is_empty())
        .max_by_key(|&s| (spans[s].len(), std::cmp::Reverse(s)))
    {
        order.extend(spans[busiest].pop_front());
    }
    order
}

/// The forms of a row with their costs, each no dearer than the next:
/// a smaller form that costs more (a command's key showing what it printed
/// at more length than its short form) is replaced by the cheaper one, so
/// shrinking a row never grows the body.
fn monotone(mut forms: [String; 3], mut cost: [usize; 3]) -> ([String; 3], [usize; 3]) {
    for i in (0..2).rev() {
        if cost[i] > cost[i + 1] {
            cost[i] = cost[i + 1];
            forms[i] = forms[i + 1].clone();
        }
    }
    (forms, cost)
}

/// Most lines one folded row lists: past it, the oldest stand alone.
const MAX_FOLDED: usize = 16;

/// Whether an item's line may fold with others of its shape: a line
/// quoted from a tool's output (a template's, machine-written). What
/// people say in the same words twice says two things: their lines stand
/// alone.
fn foldable(it: &Item) -> bool {
    it.from_tool && it.kind.is_statement() && !it.kind.is_trail() && !it.kind.is_narrative()
}

/// Folds the rows of one section whose lines share a shape into one row
/// each (`fold.rs`): the template once, every value it took. The folded
/// row ranks as its best member and ages as its newest.
fn fold_templates(items: &[Item], rows: Vec<Row>, req: &SummaryRequest) -> Vec<Row> {
    let mut groups: std::collections::HashMap<(usize, u64), Vec<usize>> =
        std::collections::HashMap::new();
    for (r, row) in rows.iter().enumerate() {
        let it = &items[row.item];
        // A template's bulk (`source: …, generated_at: …` per query) is
        // noise however it is listed.
        if foldable(it) && row.rank > BULK {
            groups
                .entry((row.section, shape_key(&it.text)))
                .or_default()
                .push(r);
        }
    }
    let mut gone = vec![false; rows.len()];
    let mut folded: Vec<Row> = Vec::new();
    for (_, mut group) in groups {
        if group.len() < 2 {
            continue;
        }
        // The newest lines, shown oldest first.
        group.sort_by_key(|&r| std::cmp::Reverse(items[rows[r].item].last));
        group.truncate(MAX_FOLDED);
        group.sort_by_key(|&r| items[rows[r].item].first);
        let fold_form = |k: usize| {
            let lines: Vec<&str> = group.iter().map(|&r| rows[r].forms[k].as_str()).collect();
            super::fold::fold(&lines)
        };
        let (Some(key), Some(short), Some(full)) = (fold_form(0), fold_form(1), fold_form(2))
        else {
            continue;
        };
        let Some(&best) = group.iter().max_by_key(|&&r| {
            let it = &items[rows[r].item];
            (rows[r].rank, it.last)
        }) else {
            continue;
        };
        // Statements are bullets in every strategy.
        let line_cost = |t: &str| (req.count_tokens)(&format!("- {t}\n"));
        let cost = [line_cost(&key), line_cost(&short), line_cost(&full)];
        let (forms, cost) = monotone([key, short, full], cost);
        for &r in &group {
            gone[r] = true;
        }
        folded.push(Row {
            item: rows[best].item,
            members: group.iter().map(|&r| rows[r].item).collect(),
            rank: rows[best].rank,
            section: rows[best].section,
            forms,
            cost,
        });
    }
    rows.into_iter()
        .zip(gone)
        .filter(|(_, g)| !g)
        .map(|(r, _)| r)
        .chain(folded)
        .collect()
}

fn fit(ledger: &Ledger, req: &SummaryRequest) -> Summary {
    let items = &ledger.items[..];
    let budget = req.max_tokens;
    let (rows, header_cost) = fit_rows(ledger, req);
    let n = rows.len();
    let mut f = Fit {
        items,
        req,
        rows,
        shown: vec![None; n],
        per_section: vec![0; header_cost.len()],
        header_cost,
        total: 0,
    };
    let statement = |f: &Fit<'_>, r: usize| is_fact(&items[f.rows[r].item]);
    let facts: Vec<usize> = (0..n)
        .filter(|&r| statement(&f, r) && f.rows[r].rank > BULK)
        .collect();

    // 1. Every fact at its key; drop from the least important until it fits.
    for &r in &facts {
        f.set(r, Some(Size::Key));
    }
    if f.total > budget {
        drop_until_fit(&mut f, &facts, budget);
    }
    // 2. Grow: all to their short form, then all to their full sentence.
    for size in [Size::Short, Size::Full] {
        for &r in &facts {
            if f.shown[r].is_some_and(|s| s < size) && f.total + f.delta(r, size) <= budget {
                f.set(r, Some(size));
            }
        }
    }
    // 3. The bulk of tool output, newest first, within its share.
    let bulk_cap = budget / 5;
    let mut bulk_used = 0;
    let mut bulk: Vec<usize> = (0..n)
        .filter(|&r| statement(&f, r) && f.rows[r].rank <= BULK)
        .collect();
    bulk.sort_by_key(|&r| std::cmp::Reverse(items[f.rows[r].item].last));
    for &r in &bulk {
        let d = f.delta(r, Size::Full);
        if bulk_used + d <= bulk_cap && f.total + d <= budget {
            bulk_used += d;
            f.set(r, Some(Size::Full));
        }
    }
    // 4. Identifiers no shown statement carries: the conversation's first,
    // then the tool output's (within the bulk share).
    let carried: String = (0..n)
        .filter_map(|r| f.text(r))
        .collect::<Vec<_>>()
        .join("\n");
    let mut ids: Vec<usize> = (0..n).filter(|&r| !statement(&f, r)).collect();
    ids.sort_by_key(|&r| {
        (
            std::cmp::Reverse(f.rows[r].rank),
            std::cmp::Reverse(items[f.rows[r].item].last),
        )
    });
    let mut listed: HashSet<&str> = HashSet::new();
    for &r in &ids {
        let text = items[f.rows[r].item].text.as_str();
        if carried.contains(text) || !listed.insert(text) {
            continue;
        }
        let d = f.delta(r, Size::Full);
        let from_tool = f.rows[r].rank <= BULK;
        if f.total + d > budget || (from_tool && bulk_used + d > bulk_cap) {
            continue;
        }
        if from_tool {
            bulk_used += d;
        }
        f.set(r, Some(Size::Full));
    }

    // 5. Exact count; trim in reverse order of what was granted.
    let mut best = f.rendered();
    if best.1 > budget {
        let mut order: Vec<(usize, Option<Size>)> = Vec::new();
        order.extend(ids.iter().rev().map(|&r| (r, None)));
        order.extend(bulk.iter().rev().map(|&r| (r, None)));
        for size in [Size::Short, Size::Key] {
            order.extend(facts.iter().rev().map(|&r| (r, Some(size))));
        }
        order.extend(facts.iter().rev().map(|&r| (r, None)));
        best = trim_to_budget(&mut f, order, budget, best);
    }

    let report = report(ledger, &f, &best.0, &facts);
    Summary {
        text: best.0,
        tokens: best.1,
        model: None,
        prompt_tokens: None,
        completion_tokens: None,
        facts: Some(report),
        prompt: None,
        cached_prompt_tokens: None,
    }
}

/// The rows of [`fit`]: live items the strategy has a section for, most
/// important first (then most recently mentioned), with each section's
/// header cost.
fn fit_rows(ledger: &Ledger, req: &SummaryRequest) -> (Vec<Row>, Vec<usize>) {
    let items = &ledger.items[..];
    let count = |t: &str| (req.count_tokens)(t);
    let goal = first_goal(items);
    let alike = alike(ledger);
    let mut header_cost: Vec<usize> = Vec::new();
    let mut rows: Vec<Row> = Vec::new();
    for (i, it) in items.iter().enumerate() {
        if it.superseded_by.is_some() {
            continue;
        }
        let Some((section, header, inline)) = section_of(req.strategy, it.kind, it.from_tool)
        else {
            continue;
        };
        if header_cost.len() <= section {
            header_cost.resize(section + 1, 0);
        }
        if header_cost[section] == 0 {
            header_cost[section] = count(&format!("{header}\n"));
        }
        let forms = ledger.forms.of(it);
        let line_cost = |t: &str| {
            if inline {
                count(t) + 1
            } else {
                count(&format!("- {t}\n"))
            }
        };
        let key = line_cost(&forms[0]);
        let short = if forms[1] == forms[0] {
            key
        } else {
            line_cost(&forms[1])
        };
        let full = if forms[2] == forms[1] {
            short
        } else {
            line_cost(&forms[2])
        };
        let (forms, cost) = monotone(forms, [key, short, full]);
        rows.push(Row {
            item: i,
            members: Vec::new(),
            rank: rank_in(ledger, &alike, it, goal == Some(i)),
            section,
            forms,
            cost,
        });
    }
    let mut rows = fold_templates(items, rows, req);
    rows.sort_by(|a, b| {
        let (x, y) = (&items[a.item], &items[b.item]);
        b.rank
            .cmp(&a.rank)
            .then(y.last.cmp(&x.last))
            .then(y.first.cmp(&x.first))
            .then(a.item.cmp(&b.item))
    });
    (rows, header_cost)
}

/// Step 5 of [`fit`]: takes back what was granted, in `order`, until the
/// rendered summary (`best`, its text and exact count) is within `budget`;
/// the summary then.
fn trim_to_budget(
    f: &mut Fit<'_>,
    order: Vec<(usize, Option<Size>)>,
    budget: usize,
    mut best: (String, usize),
) -> (String, usize) {
    let mut steps = order.into_iter();
    while best.1 > budget {
        let over = best.1 - budget;
        let mut freed = 0;
        for (r, size) in steps.by_ref() {
            let Some(current) = f.shown[r] else {
                continue;
            };
            if size.is_some_and(|s| s >= current) {
                continue;
            }
            let before = f.total;
            f.set(r, size);
            freed += before.saturating_sub(f.total);
            if freed >= over {
                break;
            }
        }
        let next = f.rendered();
        if freed == 0 {
            // Nothing left to cut: not even the smallest body fits.
            best = if next.1 <= budget {
                next
            } else {
                (String::new(), (f.req.count_tokens)(""))
            };
            break;
        }
        best = next;
    }
    best
}

/// What the summary kept of the facts: a fact is kept when the summary
/// carries it (all its identifiers, or, without any, the item is shown).
fn report(ledger: &Ledger, f: &Fit<'_>, text: &str, facts: &[usize]) -> FactsReport {
    let present: HashSet<String> = fact_keys(text).into_iter().collect();
    let mut report = FactsReport::default();
    for &r in facts {
        let row = &f.rows[r];
        let one = [row.item];
        let members: &[usize] = if row.members.is_empty() {
            &one
        } else {
            &row.members
        };
        for &m in members {
            let it = &ledger.items[m];
            if it.kind.is_narrative() {
                continue;
            }
            let keys = fact_keys(&it.text);
            let carried = if keys.is_empty() {
                f.shown[r].is_some()
            } else {
                keys.iter().all(|k| present.contains(k))
            };
            let shrunk =
                f.shown[r].is_some_and(|s| s != Size::Full && row.cost[s as usize] < row.cost[2]);
            tally(&mut report, it, carried, shrunk);
        }
    }
    report.superseded = superseded(ledger);
    report
}

/// Counts fact `it` into `report`: kept (`shrunk` when shown in a form
/// cheaper than its full one) or dropped, its text among the first
/// dropped keys.
fn tally(report: &mut FactsReport, it: &Item, carried: bool, shrunk: bool) {
    if carried {
        report.kept += 1;
        if shrunk {
            report.shrunk += 1;
        }
    } else {
        report.dropped += 1;
        if report.dropped_keys.len() < MAX_DROPPED_KEYS {
            report.dropped_keys.push(clip(&it.text, 80));
        }
    }
}

/// Statements a later item superseded (narrative left out).
fn superseded(ledger: &Ledger) -> usize {
    ledger
        .items
        .iter()
        .filter(|it| {
            it.superseded_by.is_some() && it.kind.is_statement() && !it.kind.is_narrative()
        })
        .count()
}

/// Used by the pipeline's LLM path: the fact lines the ledger renders
/// within `max_tokens`, which a model summary must carry.
pub(crate) fn must_keep(ledger: &Ledger, req: &SummaryRequest) -> Vec<String> {
    let s = fit(ledger, req);
    s.text
        .lines()
        .filter_map(|l| l.strip_prefix("- "))
        .map(str::to_owned)
        .collect()
}

// ------------------------------------------------------------ the LLM path
//
// A model summary keeps the model's text; what it left out of the ledger is
// added after it by the rule above (every fact at its key, lowest ranks
// dropped first, then grown), and the model is told beforehand which facts
// to keep. Written apart from `fit` so that the two can change separately.

/// Heads the facts a model summary left out, added after its text.
pub(crate) const OMITTED_HEADER: &str = "Facts the summary above omits, kept verbatim:";

/// A fact a model summary is asked to keep.
#[derive(Debug, Clone)]
pub(crate) struct ModelFact {
    /// What the model is shown: the fact's short form.
    pub(crate) line: String,
    /// A goal or the latest request: what was asked, which a model puts in
    /// its own words; not counted as a fact.
    pub(crate) narrative: bool,
    keys: Vec<String>,
    forms: [String; 3],
}

impl ModelFact {
    /// Whether `text` carries the fact.
    pub(crate) fn carried_by(&self, text: &str) -> bool {
        carries(text, &self.keys, &self.forms)
    }
}

/// A model summary completed from the ledger ([`complete_model_summary`](crate::complete_model_summary)).
#[derive(Debug, Clone)]
pub struct Completed {
    /// The model's text, then, under the omitted-facts header, the facts it left
    /// out that fit the budget beside it.
    pub text: String,
    /// `count_tokens(text)`.
    pub tokens: usize,
    /// What the completed summary keeps of the ledger.
    pub report: FactsReport,
    /// Facts the extractive summary would carry: what the model was asked
    /// to keep (goals and the latest request, which a model words its own
    /// way, not counted).
    pub must: usize,
    /// Of those, the ones the model's text leaves out.
    pub must_missing: usize,
    /// Of those, the ones that did not fit beside the model's text either.
    pub must_dropped: usize,
}

/// Whether `text` carries a fact: every identifier, quantity and number
/// of it appears in `text`; a fact without any, one of its forms whole.
fn carries(text: &str, keys: &[String], forms: &[String; 3]) -> bool {
    if keys.is_empty() {
        forms.iter().any(|f| text.contains(f.as_str()))
    } else {
        keys.iter().all(|k| text.contains(k.as_str()))
    }
}

/// A fact as the LLM path ranks it.
struct Ranked {
    item: usize,
    narrative: bool,
    section: usize,
    header: &'static str,
    forms: [String; 3],
    keys: Vec<String>,
}

/// The live statements above the bulk that `strategy` has a section for,
/// most important first (then most recently mentioned), as `fit` orders
/// them.
fn ranked(ledger: &Ledger, strategy: Strategy) -> Vec<Ranked> {
    let items = &ledger.items[..];
    let goal = first_goal(items);
    let alike = alike(ledger);
    let mut rows: Vec<(u8, Ranked)> = Vec::new();
    for (i, it) in items.iter().enumerate() {
        if it.superseded_by.is_some() || !is_fact(it) {
            continue;
        }
        let rank = rank_in(ledger, &alike, it, goal == Some(i));
        if rank <= BULK {
            continue;
        }
        let Some((section, header, _)) = section_of(strategy, it.kind, it.from_tool) else {
            continue;
        };
        rows.push((
            rank,
            Ranked {
                item: i,
                narrative: it.kind.is_narrative(),
                section,
                header,
                forms: ledger.forms.of(it),
                keys: fact_keys(&it.text),
            },
        ));
    }
    rows.sort_by(|(ra, a), (rb, b)| {
        let (x, y) = (&items[a.item], &items[b.item]);
        rb.cmp(ra)
            .then(y.last.cmp(&x.last))
            .then(y.first.cmp(&x.first))
            .then(a.item.cmp(&b.item))
    });
    rows.into_iter().map(|(_, r)| r).collect()
}

/// The facts a model summary must keep, most important first: those the
/// extractive summary within `req.max_tokens` carries.
pub(crate) fn model_facts(ledger: &Ledger, req: &SummaryRequest) -> Vec<ModelFact> {
    let extractive = fit(ledger, req).text;
    ranked(ledger, req.strategy)
        .into_iter()
        .filter(|r| carries(&extractive, &r.keys, &r.forms))
        .map(|r| ModelFact {
            line: r.forms[Size::Short as usize].clone(),
            narrative: r.narrative,
            keys: r.keys,
            forms: r.forms,
        })
        .collect()
}

/// Completes the model's summary `model_text` (already within
/// `req.max_tokens`) with the facts of the ledger it leaves out, by the
/// extractive rule: each at its key first, the least important dropped
/// until they fit the room left, then grown to their short form and their
/// full sentence while they fit. The model's text is never cut.
pub(crate) fn complete_model_summary(
    ledger: &Ledger,
    req: &SummaryRequest,
    model_text: &str,
) -> Completed {
    let items = &ledger.items[..];
    let count = |t: &str| (req.count_tokens)(t);
    let rows = ranked(ledger, req.strategy);
    let extractive = fit(ledger, req).text;
    let must: Vec<bool> = rows
        .iter()
        .map(|r| carries(&extractive, &r.keys, &r.forms))
        .collect();
    let base = model_text.trim_end();
    let by_model: Vec<bool> = rows
        .iter()
        .map(|r| carries(base, &r.keys, &r.forms))
        .collect();
    // The facts left out, most important first.
    let missing: Vec<usize> = (0..rows.len()).filter(|&r| !by_model[r]).collect();
    let head = format!("{base}\n\n{OMITTED_HEADER}\n");
    let room = req.max_tokens.saturating_sub(count(&head));
    let mut c = Completion::estimate(&rows, &by_model, &count);
    // 1. Every missing fact at its key; drop the least important until
    // they fit.
    for &r in &missing {
        c.set(r, Some(Size::Key));
    }
    for &r in missing.iter().rev() {
        if c.total <= room {
            break;
        }
        c.set(r, None);
    }
    // 2. Grow, most important first: all to their short form, then all to
    // their full sentence.
    for size in [Size::Short, Size::Full] {
        for &r in &missing {
            let Some(current) = c.shown[r] else { continue };
            if current >= size {
                continue;
            }
            let grown = c.total - c.costs[r][current as usize] + c.costs[r][size as usize];
            if grown <= room {
                c.set(r, Some(size));
            }
        }
    }
    // 3. Exact count; give back in reverse order of what was granted.
    let render_with = |shown: &[Option<Size>]| -> (String, usize) {
        let mut texts: Vec<Option<String>> = vec![None; items.len()];
        for (r, s) in shown.iter().enumerate() {
            if let Some(s) = s {
                texts[rows[r].item] = Some(rows[r].forms[*s as usize].clone());
            }
        }
        let section = render(items, &texts, req.strategy);
        let text = if section.is_empty() {
            base.to_owned()
        } else {
            format!("{head}{section}")
        };
        let tokens = count(&text);
        (text, tokens)
    };
    let best = c.give_back(&missing, req.max_tokens, render_with);
    completed(ledger, &rows, &by_model, &must, &c, best)
}

/// The sizes [`complete_model_summary`] shows the facts at, and what they
/// are estimated to cost: a line per fact shown, a header per section
/// with one (a fact the model's text carries costs nothing).
struct Completion {
    sections: Vec<usize>,
    costs: Vec<[usize; 3]>,
    header_cost: Vec<usize>,
    shown: Vec<Option<Size>>,
    per_section: Vec<usize>,
    total: usize,
}

impl Completion {
    /// Nothing shown yet; the costs of `rows`, counted by `count`.
    fn estimate(rows: &[Ranked], by_model: &[bool], count: &impl Fn(&str) -> usize) -> Self {
        let sections = rows.iter().map(|r| r.section + 1).max().unwrap_or(0);
        let mut header_cost = vec![0usize; sections];
        for r in rows {
            header_cost[r.section] = count(&format!("{}\n", r.header));
        }
        let cost = |r: usize, s: Size| count(&format!("- {}\n", rows[r].forms[s as usize]));
        let costs: Vec<[usize; 3]> = (0..rows.len())
            .map(|r| {
                if by_model[r] {
                    [0; 3]
                } else {
                    [
                        cost(r, Size::Key),
                        cost(r, Size::Short),
                        cost(r, Size::Full),
                    ]
                }
            })
            .collect();
        Self {
            sections: rows.iter().map(|r| r.section).collect(),
            costs,
            header_cost,
            shown: vec![None; rows.len()],
            per_section: vec![0; sections],
            total: 0,
        }
    }

    /// Shows row `r` at `size` (`None`: not at all), keeping the total.
    fn set(&mut self, r: usize, size: Option<Size>) {
        let sec = self.sections[r];
        let before = self.shown[r].map_or(0, |s| self.costs[r][s as usize]);
        let after = size.map_or(0, |s| self.costs[r][s as usize]);
        self.total = self.total + after - before;
        count_header(
            &mut self.per_section,
            &self.header_cost,
            &mut self.total,
            sec,
            (self.shown[r].is_some(), size.is_some()),
        );
        self.shown[r] = size;
    }

    /// The rendering (`render_with`: text and exact count) within `max`:
    /// shrinks, then drops, the `missing` facts least important first
    /// until it fits; the model's text alone when nothing does.
    fn give_back(
        &mut self,
        missing: &[usize],
        max: usize,
        render_with: impl Fn(&[Option<Size>]) -> (String, usize),
    ) -> (String, usize) {
        let mut best = render_with(&self.shown);
        if best.1 <= max {
            return best;
        }
        let mut order: Vec<(usize, Option<Size>)> = Vec::new();
        for size in [Size::Short, Size::Key] {
            order.extend(missing.iter().rev().map(|&r| (r, Some(size))));
        }
        order.extend(missing.iter().rev().map(|&r| (r, None)));
        let mut steps = order.into_iter();
        while best.1 > max {
            let over = best.1 - max;
            let mut freed = 0;
            for (r, size) in steps.by_ref() {
                let Some(current) = self.shown[r] else {
                    continue;
                };
                if size.is_some_and(|s| s >= current) {
                    continue;
                }
                let before = self.total;
                self.set(r, size);
                freed += before - self.total;
                if freed >= over {
                    break;
                }
            }
            best = render_with(&self.shown);
            if freed == 0 {
                break;
            }
        }
        if best.1 > max {
            // Nothing fits beside the model's text: it stays alone.
            self.shown.iter_mut().for_each(|s| *s = None);
            best = render_with(&self.shown);
        }
        best
    }
}

/// The completed summary `best` (text, tokens) with what it keeps of the
/// ledger: the facts the model's text or the completion carries, and of
/// those the extractive summary carries (`must`), the ones left out.
fn completed(
    ledger: &Ledger,
    rows: &[Ranked],
    by_model: &[bool],
    must: &[bool],
    c: &Completion,
    best: (String, usize),
) -> Completed {
    let items = &ledger.items[..];
    let (shown, costs) = (&c.shown, &c.costs);
    let mut report = FactsReport::default();
    let (mut must_n, mut must_missing, mut must_dropped) = (0, 0, 0);
    for (r, row) in rows.iter().enumerate() {
        let carried = by_model[r] || shown[r].is_some();
        if must[r] && !row.narrative {
            must_n += 1;
            if !by_model[r] {
                must_missing += 1;
                if shown[r].is_none() {
                    must_dropped += 1;
                }
            }
        }
        let it = &items[row.item];
        if it.kind.is_narrative() {
            continue;
        }
        let shrunk =
            shown[r].is_some_and(|s| s != Size::Full && costs[r][s as usize] < costs[r][2]);
        tally(&mut report, it, carried, shrunk);
    }
    report.superseded = superseded(ledger);
    Completed {
        text: best.0,
        tokens: best.1,
        report,
        must: must_n,
        must_missing,
        must_dropped,
    }
}

#[cfg(test)]
mod tests {
    use super::monotone;

    #[test]
    fn a_smaller_form_never_costs_more_than_a_larger_one() {
        let forms = |k: &str, s: &str, f: &str| [k.to_owned(), s.to_owned(), f.to_owned()];
        // A command whose key shows what it printed at more length than
        // its short form: the key becomes the short form.
        let (f, c) = monotone(forms("long key form", "short", "full form"), [9, 4, 7]);
        assert_eq!(c, [4, 4, 7]);
        assert_eq!(f[0], "short");
        let (f, c) = monotone(forms("k", "a long short form", "full"), [2, 9, 5]);
        assert_eq!(c, [2, 5, 5]);
        assert_eq!(f[1], "full");
        let (_, c) = monotone(forms("k", "s", "f"), [1, 2, 3]);
        assert_eq!(c, [1, 2, 3]);
    }
}
