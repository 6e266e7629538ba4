//! The deterministic extractive summarizer.
//!
//! # What it keeps
//!
//! Verbatim: the goals (earlier user requests) and the latest user request;
//! constraints, decisions with their reasons, open actions and errors
//! (sentences with cue words); identifiers (tickets, `#123`, UUIDs, shas,
//! versions, IPs, emails), file paths, URLs, functions/APIs, and lines with
//! numbers-with-units. Tool outputs contribute identifiers, paths, URLs, a few
//! error lines and measurement lines, never their bulk text.
//!
//! # Budget: the line-dropping order
//!
//! When the rendered body is over `max_tokens`, whole items are dropped,
//! lowest priority first:
//!
//! 1. key facts from tool output, then key facts from prose
//! 2. errors
//! 3. URLs
//! 4. APIs / functions
//! 5. file paths
//! 6. identifiers
//! 7. open actions
//! 8. decisions
//! 9. later user requests (goals after the first three)
//! 10. the first three goals
//! 11. constraints
//! 12. the latest request
//!
//! Within a class, generic lines (no identifier, path or URL) go before
//! specific ones, and the least recently mentioned before the more recent;
//! goals go newest first, since the task as first stated matters most.
//! Then, to use what the cut freed, up to [`FILL_TRIES`] dropped items are
//! re-admitted (most important first) if they fit on their own. Only when not
//! a single item fits is the most important one truncated.
use super::facts::{Kind, Ledger, MAX_REQUEST, clip, floor_boundary};
use super::render::{parse_previous, render};
use super::{SummarizeError, Summarizer, Summary, SummaryRequest};

/// How many dropped items are re-tried after the cut.
pub(super) const FILL_TRIES: usize = 24;

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
    pub fn summarize_sync(&self, req: &SummaryRequest) -> Summary {
        let mut ledger = Ledger::default();
        let mut goals: Vec<String> = Vec::new();
        let mut latest: Option<String> = None;

        if let Some(previous) = req.previous.as_deref() {
            let parsed = parse_previous(previous, &mut ledger);
            goals = parsed.goals;
            latest = parsed.latest;
        }

        let mut requests: Vec<String> = Vec::new();
        for entry in &req.entries {
            if entry.role == "user"
                && let Some(request) = request_text(&entry.text)
            {
                requests.push(request);
            }
            ledger.extract_entry(&entry.role, entry.name.as_deref(), &entry.text);
        }

        // A newer request demotes the previous latest one to the goals.
        if let Some(newest) = requests.pop() {
            goals.extend(latest.take());
            goals.extend(requests.into_iter().filter(|r| is_substantive(r)));
            latest = Some(newest);
        }
        for goal in &goals {
            ledger.add(Kind::Goal, goal, false);
        }
        if let Some(text) = &latest
            && let Some(i) = ledger.add(Kind::Latest, text, false)
        {
            ledger.items[i].kind = Kind::Latest;
        }
        // Requests are mined like any prose so the constraints inside them
        // exist as items of their own (hidden while the request is shown).
        for text in goals.iter().chain(latest.iter()) {
            ledger.extract_prose(text);
        }

        fit(&ledger, req)
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

/// The verbatim request of a user message: whole if short, else its start
/// (the rest is still mined for facts).
fn request_text(text: &str) -> Option<String> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if text.len() <= MAX_REQUEST {
        return Some(text.to_owned());
    }
    // Cut at a line end when one is reasonably close, so a pasted log after
    // the request itself is not half-included.
    let end = floor_boundary(text, MAX_REQUEST);
    match text[..end].rfind('\n').filter(|&n| n > MAX_REQUEST / 3) {
        Some(n) => Some(format!("{}…", text[..n].trim_end())),
        None => Some(clip(text, MAX_REQUEST)),
    }
}

/// Acknowledgements ("ok", "thanks!") are not goals; they can still be the
/// latest request, which is kept whatever it says.
fn is_substantive(request: &str) -> bool {
    request.split_whitespace().count() >= 3
}

/// Drop class of an item: lower is dropped first (see the module docs).
fn drop_class(kind: Kind, from_tool: bool, early_goal: bool) -> u8 {
    match kind {
        Kind::Fact if from_tool => 0,
        Kind::Fact => 1,
        Kind::Error => 2,
        Kind::Url => 3,
        Kind::Api => 4,
        Kind::File => 5,
        Kind::Entity => 6,
        Kind::Action => 7,
        Kind::Decision => 8,
        Kind::Goal if !early_goal => 9,
        Kind::Goal => 10,
        Kind::Constraint => 11,
        Kind::Latest => 12,
    }
}

/// How many goals count as "the" goals (the task as first stated).
const EARLY_GOALS: usize = 3;

fn fit(ledger: &Ledger, req: &SummaryRequest) -> Summary {
    let items = &ledger.items;
    let n = items.len();
    let count = |text: &str| (req.count_tokens)(text);

    let mut goal_order: Vec<usize> = (0..n).filter(|&i| items[i].kind == Kind::Goal).collect();
    goal_order.sort_by_key(|&i| items[i].first);
    let early: Vec<usize> = goal_order.into_iter().take(EARLY_GOALS).collect();

    // Drop order: ascending priority.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| {
        let it = &items[i];
        let class = drop_class(it.kind, it.from_tool, early.contains(&i));
        if it.kind == Kind::Goal {
            // The task as first stated outranks later additions.
            return (class, false, u64::MAX - it.first, 0, i);
        }
        (class, it.is_specific(), it.last, it.first, i)
    });

    let keep_all_but = |k: usize| {
        let mut keep = vec![true; n];
        for &i in &order[..k] {
            keep[i] = false;
        }
        keep
    };
    let measure = |keep: &[bool]| {
        let text = render(items, keep, req.strategy, None);
        let tokens = count(&text);
        (text, tokens)
    };

    let full = measure(&keep_all_but(0));
    if full.1 <= req.max_tokens {
        return summary(full);
    }

    // Smallest k such that dropping the k lowest items fits. Rendered size is
    // monotone in k up to tokenizer noise; the fill pass and the final check
    // absorb that.
    let (mut lo, mut hi) = (0usize, n);
    while lo + 1 < hi {
        let mid = lo + (hi - lo) / 2;
        if measure(&keep_all_but(mid)).1 <= req.max_tokens {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let mut keep = keep_all_but(hi);
    let mut best = measure(&keep);
    while best.1 > req.max_tokens && keep.iter().any(|&k| k) {
        // Tokenizer noise made the cut non-monotone: drop one more.
        if let Some(&i) = order.iter().find(|&&i| keep[i]) {
            keep[i] = false;
        }
        best = measure(&keep);
    }

    for &i in order[..hi].iter().rev().take(FILL_TRIES) {
        // An item costs at least its own text: skip the render when that
        // alone exceeds the slack.
        let slack = req.max_tokens.saturating_sub(best.1);
        if slack == 0 || count(&items[i].text) > slack {
            continue;
        }
        keep[i] = true;
        let trial = measure(&keep);
        if trial.1 <= req.max_tokens {
            best = trial;
        } else {
            keep[i] = false;
        }
    }

    if best.1 <= req.max_tokens && !best.0.is_empty() {
        return summary(best);
    }
    if let Some(&top) = order.last()
        && let Some(truncated) = truncate_to_fit(ledger, req, top)
    {
        return summary(truncated);
    }
    // Nothing fits: an empty body is still valid; the caller decides.
    let tokens = count("");
    Summary {
        text: String::new(),
        tokens,
        model: None,
        prompt_tokens: None,
        completion_tokens: None,
    }
}

/// The last resort: the single most important item, cut to fit.
fn truncate_to_fit(ledger: &Ledger, req: &SummaryRequest, top: usize) -> Option<(String, usize)> {
    let items = &ledger.items;
    let mut keep = vec![false; items.len()];
    keep[top] = true;
    let text = &items[top].text;
    let attempt = |len: usize| {
        let cut = format!("{}…", text[..floor_boundary(text, len)].trim_end());
        let body = render(items, &keep, req.strategy, Some((top, &cut)));
        let tokens = (req.count_tokens)(&body);
        (body, tokens)
    };
    let (mut lo, mut hi) = (0usize, text.len());
    let mut best = None;
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        let trial = attempt(mid);
        if trial.1 <= req.max_tokens {
            best = Some(trial);
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    // A body of nothing but a header and an ellipsis informs no one.
    best.filter(|(body, _)| body.chars().filter(|c| c.is_alphanumeric()).count() > 20)
}

fn summary((text, tokens): (String, usize)) -> Summary {
    Summary {
        text,
        tokens,
        model: None,
        prompt_tokens: None,
        completion_tokens: None,
    }
}
