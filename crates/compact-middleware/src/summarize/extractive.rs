//! The deterministic extractive summarizer: renders a fact ledger within a
//! token budget.
//!
//! # What it keeps
//!
//! Verbatim: constraints, decisions with their reasons, open actions and
//! errors (sentences with cue words); identifiers (tickets, `#123`, UUIDs,
//! shas, versions, IPs, emails, hosts, regions, ports), file paths, URLs,
//! functions/APIs, and sentences with numbers; the task as first stated and
//! the latest request, shortened. Tool outputs contribute their salient
//! part (prose fields, rows and lines naming what the conversation
//! mentions, cue sentences, error lines) and, at the lowest priority, their
//! identifiers and measurement lines.
//!
//! # Budget: shrink, then drop
//!
//! Each item has a priority ([`rank`]): constraints, then decisions, then
//! identifiers and the facts of prose, then the salient facts of tool
//! output, then open actions, then the narrative (goals, the latest
//! request), then the bulk of tool output. When the rendered body is over
//! `max_tokens`:
//!
//! 1. the bulk of tool output goes, least recently mentioned first;
//! 2. the narrative shrinks to a short line, then goes (the first goal last);
//! 3. every fact shrinks, lowest priority first: the sentence becomes its
//!    clause (the cue and the identifiers with a few words around them),
//!    then its key (the cue and the identifiers alone);
//! 4. facts are dropped, lowest priority and oldest first.
//!
//! What the cut freed is then refilled, most important first. Every fact
//! dropped or shrunk is counted in the [`FactsReport`] of the summary.

use super::facts::{Item, Kind, Ledger, clip, fact_keys, floor_boundary, key_spans};
use super::render::{parse_previous, render};
use super::{FactsReport, SummarizeError, Summarizer, Summary, SummaryRequest};

/// How many dropped items are re-tried after the cut.
pub(super) const FILL_TRIES: usize = 48;

/// Longest display of the task as first stated, in bytes.
const GOAL_CHARS: usize = 240;
/// Longest display of a later request, in bytes.
const REQUEST_CHARS: usize = 160;
/// Most dropped keys named in a report.
const MAX_DROPPED_KEYS: usize = 50;

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
    ) -> crate::BoxFuture<'a, Result<Summary, SummarizeError>> {
        Box::pin(async move { Ok(self.summarize_sync(req)) })
    }
}

/// The priority of an item: higher is kept longer. A redundant item (a
/// sentence without a cue whose identifiers other facts already carry)
/// ranks with the bulk.
pub(crate) fn rank(it: &Item, first_goal: bool, redundant: bool) -> u8 {
    use Kind::*;
    let prose = !it.from_tool;
    if redundant {
        return 2;
    }
    match it.kind {
        Constraint if prose => 10,
        Decision if prose => 9,
        Entity | File | Url | Api | Fact | Error if prose => 8,
        Constraint | Decision | Action | Fact | Error if it.salient => 7,
        Action => 6,
        Goal if first_goal => 5,
        Goal | Latest => 4,
        Constraint | Decision | Error => 3,
        Entity | File | Url | Api => 1,
        Fact => 0,
    }
}

/// Which items say nothing the others do not: a sentence without a cue
/// (a fact of prose or a salient tool line) whose identifiers all appear in
/// a constraint, decision, action or error, or in an earlier such sentence.
fn redundancy(items: &[Item], keys: &[Vec<String>], live: &dyn Fn(usize) -> bool) -> Vec<bool> {
    use std::collections::HashSet;
    let mut claimed: HashSet<&str> = HashSet::new();
    for i in 0..items.len() {
        if live(i)
            && matches!(
                items[i].kind,
                Kind::Constraint | Kind::Decision | Kind::Action | Kind::Error
            )
            && (!items[i].from_tool || items[i].salient)
        {
            claimed.extend(keys[i].iter().map(String::as_str));
        }
    }
    let mut out = vec![false; items.len()];
    let mut facts: Vec<usize> = (0..items.len())
        .filter(|&i| live(i) && items[i].kind == Kind::Fact && !keys[i].is_empty())
        .collect();
    facts.sort_by_key(|&i| (items[i].first, i));
    for i in facts {
        if keys[i].iter().all(|k| claimed.contains(k.as_str())) {
            out[i] = true;
        } else {
            claimed.extend(keys[i].iter().map(String::as_str));
        }
    }
    out
}

/// Live facts that rank above the bulk of tool output: what is worth a
/// summary of its own.
pub(crate) fn ranked_facts(ledger: &Ledger) -> usize {
    ledger
        .items
        .iter()
        .filter(|it| it.superseded_by.is_none() && rank(it, false, false) > BULK)
        .count()
}

/// Ranks at or below this are the bulk of tool output, not facts of the
/// conversation: they go first and are not counted as facts.
const BULK: u8 = 3;

/// How an item is shown: at which size, or not at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Show {
    Full,
    Clause,
    Key,
    Dropped,
}

fn shrinkable(kind: Kind) -> bool {
    !matches!(kind, Kind::Entity | Kind::Api | Kind::File | Kind::Url)
}

/// The text of an item at a size.
fn display(it: &Item, first_goal: bool, show: Show) -> Option<String> {
    let narrative = matches!(it.kind, Kind::Goal | Kind::Latest);
    match show {
        Show::Dropped => None,
        _ if !shrinkable(it.kind) => Some(it.text.clone()),
        Show::Full if narrative => Some(clip(
            &it.text,
            if first_goal {
                GOAL_CHARS
            } else {
                REQUEST_CHARS
            },
        )),
        Show::Clause if narrative => Some(clip(&it.text, 100)),
        Show::Key if narrative => Some(clip(&it.text, 50)),
        Show::Full => Some(it.text.clone()),
        Show::Clause => Some(clause(&it.text)),
        Show::Key => Some(key(&it.text)),
    }
}

/// The `[tool] ` label of a tool fact and the rest.
fn split_label(text: &str) -> (&str, &str) {
    if text.starts_with('[')
        && let Some(end) = text.find("] ")
    {
        return text.split_at(end + 2);
    }
    ("", text)
}

/// The clause of a sentence: its cue and identifiers with a few words
/// around them, at most about 140 bytes.
fn clause(text: &str) -> String {
    let (label, body) = split_label(text);
    let spans = key_spans(body);
    let (Some(first), Some(last)) = (spans.first(), spans.last()) else {
        return format!("{label}{}", clip(body, 100));
    };
    let start = word_start(body, first.0, 3);
    // The reason after the key (`… because the canary passed`) is kept when
    // the rest of the sentence is short.
    let end = if body.len() - start <= 160 {
        body.len()
    } else {
        word_end(body, last.1, 3)
    };
    let mut out = String::from(label);
    if start > 0 {
        out.push('…');
    }
    let core = body[start..end].trim();
    out.push_str(&clip(core, 140));
    if end < body.len() && !out.ends_with('…') {
        out.push('…');
    }
    if out.len() >= text.len() {
        return text.to_owned();
    }
    out
}

/// The key of a sentence: its cue and identifiers, each with the word
/// before it (two when that word is a number: `zone 14`), joined by `…`.
/// A short gap, or one that says `not`/`never`, is kept: eliding it could
/// turn "must never exceed" into "must … exceed".
fn key(text: &str) -> String {
    let (label, body) = split_label(text);
    let spans = key_spans(body);
    if spans.is_empty() {
        return format!("{label}{}", clip(body, 50));
    }
    let mut parts: Vec<(usize, usize)> = Vec::new();
    for &(s, e) in &spans {
        let mut start = word_start(body, s, 1);
        if start < s && body[start..s].trim().bytes().any(|b| b.is_ascii_digit()) {
            start = word_start(body, start, 1);
        }
        match parts.last_mut() {
            Some(last) if start <= last.1 || keep_gap(&body[last.1..start]) => last.1 = e,
            _ => parts.push((start, e)),
        }
    }
    let joined = parts
        .iter()
        .map(|&(s, e)| body[s..e].trim())
        .collect::<Vec<_>>()
        .join(" … ");
    // A key must still say something (`[2024` from a log line's timestamp
    // does not): else the start of the line.
    let says = joined
        .split(|c: char| !c.is_alphanumeric())
        .any(|w| w.chars().filter(|c| c.is_alphabetic()).count() >= 3);
    if !says {
        let out = format!("{label}{}", clip(body, 50));
        return if out.len() >= text.len() {
            text.to_owned()
        } else {
            out
        };
    }
    let out = format!("{label}{}", clip(&joined, 120));
    if out.len() >= text.len() {
        return text.to_owned();
    }
    out
}

/// Whether the words between two key spans must stay: one or two words, or
/// a negation.
fn keep_gap(gap: &str) -> bool {
    let words: Vec<&str> = gap.split_whitespace().collect();
    words.len() <= 2
        || (gap.len() <= 60
            && words.iter().any(|w| {
                let w = w.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'');
                matches!(
                    w.to_ascii_lowercase().as_str(),
                    "not" | "never" | "no" | "without" | "nor" | "neither"
                ) || w.ends_with("n't")
            }))
}

/// The byte offset `words` words before `at` (at a word start).
fn word_start(s: &str, at: usize, words: usize) -> usize {
    let mut i = floor_boundary(s, at);
    let mut left = words;
    while i > 0 && left > 0 {
        let head = s[..i].trim_end();
        match head.char_indices().rev().find(|(_, c)| c.is_whitespace()) {
            Some((ws, c)) => i = ws + c.len_utf8(),
            None => i = 0,
        }
        left -= 1;
    }
    i
}

/// The byte offset `words` words after `at` (at a word end).
fn word_end(s: &str, at: usize, words: usize) -> usize {
    let mut i = floor_boundary(s, at);
    let mut left = words;
    while i < s.len() && left > 0 {
        let rest = &s[i..];
        let skip = rest.len() - rest.trim_start().len();
        let word = rest
            .trim_start()
            .find(char::is_whitespace)
            .unwrap_or(rest.len() - skip);
        i += skip + word;
        left -= 1;
    }
    i.min(s.len())
}

struct Fitting<'a> {
    items: &'a [Item],
    req: &'a SummaryRequest,
    show: Vec<Show>,
    /// Estimated tokens per item per size (index by `Show as usize`).
    cost: Vec<[usize; 3]>,
    /// The text of each item per size.
    forms: Vec<[String; 3]>,
    /// Entities shown inside a kept sentence: not repeated on their own.
    covered_by: Vec<Vec<usize>>,
    /// The reverse: the entities each sentence covers.
    covers: Vec<Vec<usize>>,
    /// Items shown per kind, for the section headers' cost.
    shown_per_kind: std::collections::HashMap<Kind, usize>,
    /// Estimated tokens of the body, kept up to date by `set`.
    total: usize,
}

/// Tokens of a section header line.
const HEADER_TOKENS: usize = 4;

impl Fitting<'_> {
    fn cost_of(&self, i: usize, show: Show) -> usize {
        match show {
            Show::Dropped => 0,
            s => self.cost[i][s as usize],
        }
    }

    /// Whether item `i` is already said by a shown item: an identifier by
    /// a sentence (in any form: every form keeps the identifiers), a
    /// sentence by a request shown whole.
    fn covered(&self, i: usize) -> bool {
        self.covered_by[i].iter().any(|&s| match self.show[s] {
            Show::Dropped => false,
            Show::Full => true,
            Show::Clause | Show::Key => !matches!(self.items[s].kind, Kind::Goal | Kind::Latest),
        })
    }

    /// What item `i` adds to the body now.
    fn contribution(&self, i: usize) -> usize {
        if self.covered(i) {
            0
        } else {
            self.cost_of(i, self.show[i])
        }
    }

    /// What item `i` and the entities it covers add to the body now.
    fn footprint(&self, i: usize) -> usize {
        self.contribution(i)
            + self.covers[i]
                .iter()
                .map(|&e| self.contribution(e))
                .sum::<usize>()
    }

    fn headers(&self) -> usize {
        self.shown_per_kind.values().filter(|&&c| c > 0).count() * HEADER_TOKENS
    }

    fn set(&mut self, i: usize, show: Show) {
        let before = self.footprint(i) + self.headers();
        let was_shown = self.show[i] != Show::Dropped;
        self.show[i] = show;
        let is_shown = show != Show::Dropped;
        if was_shown != is_shown {
            let c = self.shown_per_kind.entry(self.items[i].kind).or_default();
            if is_shown {
                *c += 1;
            } else {
                *c = c.saturating_sub(1);
            }
        }
        let after = self.footprint(i) + self.headers();
        self.total = (self.total + after).saturating_sub(before);
    }

    /// The cheaper way to show a fact at its smallest: its key, or nothing
    /// but the identifiers it covers (listed on their own again).
    fn smallest(&self, i: usize) -> Show {
        if self.covers[i].is_empty() {
            return Show::Key;
        }
        let key = self.cost_of(i, Show::Key);
        let alone: usize = self.covers[i]
            .iter()
            .filter(|&&e| {
                self.covered_by[e]
                    .iter()
                    .all(|&s| s == i || self.show[s] == Show::Dropped)
            })
            .map(|&e| self.cost_of(e, self.show[e]))
            .sum();
        if alone < key && self.carried_by_covers(i) {
            Show::Dropped
        } else {
            Show::Key
        }
    }

    /// Whether a sentence may give way to the entities it covers: a plain
    /// fact or an action says little beyond its identifiers. (Its kind is
    /// the whole test; constraints and decisions always keep their key.)
    fn carried_by_covers(&self, i: usize) -> bool {
        let it = &self.items[i];
        matches!(it.kind, Kind::Fact | Kind::Action)
    }

    fn rendered(&self) -> (String, usize) {
        let shown: Vec<Option<String>> = (0..self.items.len())
            .map(|i| match self.show[i] {
                Show::Dropped => None,
                _ if self.covered(i) => None,
                s => Some(self.forms[i][s as usize].clone()),
            })
            .collect();
        let text = render(self.items, &shown, self.req.strategy);
        let tokens = (self.req.count_tokens)(&text);
        (text, tokens)
    }
}

fn fit(ledger: &Ledger, req: &SummaryRequest) -> Summary {
    let items = &ledger.items[..];
    let n = items.len();
    let count = |t: &str| (req.count_tokens)(t);
    let first_goal = (0..n)
        .filter(|&i| items[i].kind == Kind::Goal)
        .min_by_key(|&i| items[i].first);
    let live = |i: usize| items[i].superseded_by.is_none();
    let keys: Vec<Vec<String>> = items.iter().map(|it| fact_keys(&it.text)).collect();
    let redundant = redundancy(items, &keys, &live);
    let ranks: Vec<u8> = (0..n)
        .map(|i| rank(&items[i], first_goal == Some(i), redundant[i]))
        .collect();

    let forms: Vec<[String; 3]> = (0..n)
        .map(|i| {
            let fg = first_goal == Some(i);
            let form = |s: Show| display(&items[i], fg, s).unwrap_or_default();
            if shrinkable(items[i].kind) {
                [form(Show::Full), form(Show::Clause), form(Show::Key)]
            } else {
                let one = form(Show::Full);
                [one.clone(), one.clone(), one]
            }
        })
        .collect();
    let cost: Vec<[usize; 3]> = forms
        .iter()
        .enumerate()
        .map(|(i, [full, clause, key])| {
            if shrinkable(items[i].kind) {
                let c = |s: &str| count(s) + 2;
                let full_cost = c(full);
                let clause_cost = if clause == full { full_cost } else { c(clause) };
                let key_cost = if key == clause { clause_cost } else { c(key) };
                [full_cost, clause_cost, key_cost]
            } else {
                let one = count(full) + 1;
                [one, one, one]
            }
        })
        .collect();
    // An identifier inside a kept fact sentence is not listed again, nor a
    // sentence inside a request shown whole.
    let mut covered_by = vec![Vec::new(); n];
    let mut covers = vec![Vec::new(); n];
    let mut by_key: std::collections::HashMap<&str, Vec<usize>> = Default::default();
    let whole = |i: usize| super::render::shows_whole(req.strategy, items[i].kind);
    // Prose sentences only: a quoted tool line is evidence, not a statement
    // of the conversation, and its standing changes when it is read back.
    for s in
        (0..n).filter(|&i| live(i) && shrinkable(items[i].kind) && whole(i) && !items[i].from_tool)
    {
        for k in &keys[s] {
            by_key.entry(k.as_str()).or_default().push(s);
        }
    }
    // A file shown with its APIs (`code_delta`) says more than its path.
    for e in (0..n).filter(|&i| live(i) && !shrinkable(items[i].kind) && items[i].apis.is_empty()) {
        for &s in by_key.get(items[e].text.as_str()).into_iter().flatten() {
            covered_by[e].push(s);
            covers[s].push(e);
        }
    }
    let requests: Vec<usize> = (0..n)
        .filter(|&i| live(i) && matches!(items[i].kind, Kind::Goal | Kind::Latest) && whole(i))
        .collect();
    for i in (0..n).filter(|&i| {
        live(i) && shrinkable(items[i].kind) && !matches!(items[i].kind, Kind::Goal | Kind::Latest)
    }) {
        for &g in &requests {
            if forms[g][0].contains(items[i].text.as_str()) {
                covered_by[i].push(g);
                covers[g].push(i);
                break;
            }
        }
    }
    let mut f = Fitting {
        items,
        req,
        show: vec![Show::Dropped; n],
        cost,
        forms,
        covered_by,
        covers,
        shown_per_kind: Default::default(),
        total: 0,
    };
    for i in (0..n).filter(|&i| live(i)) {
        f.set(i, Show::Full);
    }
    // The bulk of tool output may take a quarter of the budget at most,
    // even when there is room: a summary is not a log.
    let bulk_cap = req.max_tokens / 4;
    let mut bulk: usize = (0..n)
        .filter(|&i| live(i) && ranks[i] <= BULK)
        .map(|i| f.contribution(i))
        .sum();

    // Drop order: lowest rank first, then least recently mentioned.
    let mut order: Vec<usize> = (0..n).filter(|&i| live(i)).collect();
    order.sort_by_key(|&i| {
        let it = &items[i];
        (ranks[i], it.last, it.first, i)
    });
    let ranked = |i: usize| ranks[i];
    let budget = req.max_tokens;
    for &i in &order {
        if bulk <= bulk_cap || ranked(i) > BULK {
            break;
        }
        bulk = bulk.saturating_sub(f.contribution(i));
        f.set(i, Show::Dropped);
    }

    let mut best = f.rendered();
    if best.1 > budget {
        // Each step changes one item and updates the estimate; the exact
        // count is taken at the end (and once per correction).
        let narrative =
            |i: usize| matches!(items[i].kind, Kind::Goal | Kind::Latest) && Some(i) != first_goal;
        let mut steps: Vec<(usize, Show)> = order
            .iter()
            .filter(|&&i| ranked(i) <= BULK)
            .map(|&i| (i, Show::Dropped))
            .collect();
        // The latest request is what the agent is doing now: it shrinks to
        // its clause with the other requests but goes last.
        let latest = |i: usize| items[i].kind == Kind::Latest;
        steps.extend(
            order
                .iter()
                .filter(|&&i| narrative(i))
                .map(|&i| (i, Show::Clause)),
        );
        for s in [Show::Key, Show::Dropped] {
            steps.extend(
                order
                    .iter()
                    .filter(|&&i| narrative(i) && !latest(i))
                    .map(|&i| (i, s)),
            );
        }
        // Facts shrink one priority level at a time: the sentence, then
        // its clause, then its key (or the identifiers alone).
        let facts: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&i| ranked(i) > BULK && !narrative(i) && shrinkable(items[i].kind))
            .collect();
        let mut r = 0;
        while r < facts.len() {
            let level = ranked(facts[r]);
            let end = facts[r..]
                .iter()
                .position(|&i| ranked(i) != level)
                .map_or(facts.len(), |p| r + p);
            steps.extend(facts[r..end].iter().map(|&i| (i, Show::Clause)));
            // Key: resolved when applied (it may be cheaper to drop).
            steps.extend(facts[r..end].iter().map(|&i| (i, Show::Key)));
            r = end;
        }
        steps.extend(
            order
                .iter()
                .filter(|&&i| ranked(i) > BULK && !narrative(i))
                .map(|&i| (i, Show::Dropped)),
        );
        for s in [Show::Key, Show::Dropped] {
            steps.extend(order.iter().filter(|&&i| latest(i)).map(|&i| (i, s)));
        }
        let mut applied = 0;
        for &(i, s) in &steps {
            if f.total <= budget {
                break;
            }
            applied += 1;
            if f.show[i] == Show::Dropped {
                continue;
            }
            let s = if s == Show::Key { f.smallest(i) } else { s };
            f.set(i, s);
        }
        best = f.rendered();
        // The per-line estimate can be off by a few tokens: keep cutting.
        let mut rest = steps[applied.min(steps.len())..].iter().copied();
        while best.1 > budget {
            let next = rest.by_ref().find(|&(i, _)| f.show[i] != Show::Dropped);
            let (i, s) = match next {
                Some(step) => step,
                None => match order.iter().find(|&&j| f.show[j] != Show::Dropped) {
                    Some(&j) => (j, Show::Dropped),
                    None => break,
                },
            };
            let s = if s == Show::Key { f.smallest(i) } else { s };
            f.set(i, s);
            best = f.rendered();
        }
        // Refill what the cut freed, most important first, at the next
        // size up.
        let mut tries = 0;
        for &i in order.iter().rev() {
            if tries >= FILL_TRIES || best.1 >= budget {
                break;
            }
            let current = f.show[i];
            let better = match current {
                Show::Dropped => Show::Key,
                Show::Key => Show::Clause,
                Show::Clause => Show::Full,
                Show::Full => continue,
            };
            let better = if shrinkable(items[i].kind) {
                better
            } else {
                Show::Full
            };
            let extra = f.cost_of(i, better).saturating_sub(f.cost_of(i, current));
            if extra > budget - best.1 {
                continue;
            }
            tries += 1;
            f.set(i, better);
            let trial = f.rendered();
            if trial.1 <= budget {
                best = trial;
            } else {
                f.set(i, current);
            }
        }
    }

    // A fact is kept when the summary carries it: all its identifiers (or,
    // without any, its text) are in the body, wherever they are shown.
    let present: std::collections::HashSet<String> = fact_keys(&best.0).into_iter().collect();
    let mut report = FactsReport::default();
    for i in (0..n).filter(|&i| live(i) && (ranked(i) > BULK || redundant[i])) {
        let carried = if keys[i].is_empty() {
            f.show[i] != Show::Dropped && !f.covered(i)
        } else {
            keys[i].iter().all(|k| present.contains(k))
        };
        if !carried {
            report.dropped += 1;
            if report.dropped_keys.len() < MAX_DROPPED_KEYS {
                report.dropped_keys.push(clip(&items[i].text, 80));
            }
        } else {
            report.kept += 1;
            if matches!(f.show[i], Show::Clause | Show::Key) {
                report.shrunk += 1;
            }
        }
    }
    report.superseded = (0..n).filter(|&i| !live(i)).count();
    if best.1 > budget {
        // Not even the smallest body fits: an empty body is still valid;
        // the caller decides.
        best = (String::new(), count(""));
    }
    Summary {
        text: best.0,
        tokens: best.1,
        model: None,
        prompt_tokens: None,
        completion_tokens: None,
        facts: Some(report),
    }
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

#[cfg(test)]
mod tests {
    use super::{clause, key};

    #[test]
    fn a_key_keeps_the_negation_and_what_it_is_about() {
        let s = "The exporter in zone 14 must never exceed 114 MB of memory.";
        let k = key(s);
        assert!(k.contains("must never exceed 114 MB"), "{k}");
        assert!(k.contains("zone 14"), "{k}");
        assert!(k.len() < s.len(), "{k}");
        let c = clause(s);
        assert!(c.contains("must never exceed 114 MB"), "{c}");
    }
}
