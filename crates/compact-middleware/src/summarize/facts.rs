//! Fact extraction: turns entries (and unparseable lines of a previous summary)
//! into typed, deduplicated items held in a [`Ledger`].
//!
//! Every item's text is a verbatim slice of its source (trimmed, possibly cut
//! at a character boundary and marked with `…`), optionally prefixed with the
//! `[tool]` label of the tool that produced it. Nothing is paraphrased, so the
//! summary can never state something the input did not.
use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;

/// What an item is. The declaration order is the section order of `task_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Kind {
    Goal,
    Latest,
    Constraint,
    Decision,
    Action,
    Error,
    Fact,
    Entity,
    Api,
    File,
    Url,
}

/// One fact of the summary.
#[derive(Debug, Clone)]
pub(crate) struct Item {
    pub kind: Kind,
    pub text: String,
    /// For files: the functions/APIs mentioned with it (code_delta).
    pub apis: Vec<String>,
    /// Sequence number of the first mention: the display order.
    pub first: u64,
    /// Sequence number of the latest mention: the age used when dropping.
    pub last: u64,
    /// Came from a tool output (bulk) rather than prose.
    pub from_tool: bool,
}

impl Item {
    /// Contains an identifier, path or URL: kept longer than a generic line.
    pub(super) fn is_specific(&self) -> bool {
        match self.kind {
            Kind::Entity | Kind::Api | Kind::File | Kind::Url => true,
            _ => TOKEN.is_match(&self.text) || BACKTICK.is_match(&self.text),
        }
    }
}

/// Longest verbatim request kept for a goal or the latest request, in bytes.
pub(crate) const MAX_REQUEST: usize = 1200;
/// Longest sentence kept, in bytes.
const MAX_SENTENCE: usize = 320;
/// Longest tool line (error, measurement) kept, in bytes.
const MAX_TOOL_LINE: usize = 240;

/// A flattened tool call contributes its arguments' identifiers only: a
/// `failed` or `300s` inside a query string is not an observation.
const CALL_CAPS: Caps = Caps {
    sentences: 0,
    errors: 0,
    facts: 0,
    entities: 10,
    files: 10,
    urls: 5,
    apis: 0,
};

/// Per-entry caps: a single huge entry must not crowd out everything else.
struct Caps {
    sentences: usize,
    errors: usize,
    facts: usize,
    entities: usize,
    files: usize,
    urls: usize,
    apis: usize,
}

const PROSE_CAPS: Caps = Caps {
    sentences: 60,
    errors: 8,
    facts: 30,
    entities: 40,
    files: 30,
    urls: 15,
    apis: 30,
};

const TOOL_CAPS: Caps = Caps {
    sentences: 0,
    errors: 3,
    facts: 4,
    entities: 15,
    files: 12,
    urls: 5,
    apis: 12,
};

fn re(pattern: &str) -> Regex {
    // The patterns are constants of this module; a typo is caught by the
    // first test that touches extraction, never by user input.
    #[allow(clippy::expect_used)]
    Regex::new(pattern).expect("constant regex")
}

// ASCII word boundaries everywhere: Unicode `\b` forces the slow engines on
// non-ASCII haystacks, and a megabyte of CJK tool output must stay linear.
static CONSTRAINT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(?-u:\b)(?:must|never|do not|don't|dont|required|requires|only|always|should not|shouldn't|cannot|can't|mustn't|not allowed|forbidden)(?-u:\b)",
    )
});
/// The cues that still mark a constraint when the agent itself says them:
/// "only", "always" and "never" in an assistant's narration are mostly
/// description ("loses only the cache"), not rules.
static STRONG_CONSTRAINT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(?-u:\b)(?:must|do not|don't|required|should not|shouldn't|mustn't|not allowed|forbidden)(?-u:\b)",
    )
});
static DECISION: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(?-u:\b)(?:decided|decide to|decision|chose|choose to|chosen|will use|we'll use|going with|go with|because|instead of|opted|settled on|switch(?:ed)? to|rather than|recommend|recommended|approved|agreed)(?-u:\b)",
    )
});
static ACTION: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(?-u:\b)(?:todo|fixme|next|need to|needs to|pending|blocked|blocker|follow[- ]up|still have to|still need|not yet)(?-u:\b)",
    )
});
static ERROR: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(?-u:\b)(?:error|errors|errno|failed|fails|failure|failing|exception|panic|panicked|traceback|fatal|denied|refused|timed out|segfault|oomkilled|crash(?:ed)?)(?-u:\b)",
    )
});
/// Error words that announce the absence of an error (`0 failed`, `"error": null`).
static NOT_ERROR: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?i)(?-u:\b)(?:0|no) (?:failed|failures|errors?)(?-u:\b)|"?(?:error|errors|exception)"?\s*[:=]\s*(?:null|none|false|0|\[\]|\{\}|""|nil)(?-u:\b)?"#,
    )
});

/// Every identifier-like token, most specific alternative first: leftmost-first
/// semantics then resolve overlaps (a URL wins over the path inside it).
static TOKEN: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"(?P<url>https?://[^\s<>`'\x22\]\)\}]+)",
        r"|(?P<email>[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,})",
        r"|(?P<uuid>(?-u:\b)[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?-u:\b))",
        r"|(?P<win>(?-u:\b)[A-Za-z]:\\[^\s<>|*?\x22',;:]+)",
        r"|(?P<abs>(?:\.{1,2}/|~/|/)[A-Za-z0-9_.@+-]+(?:/[A-Za-z0-9_.@+-]+)*/?)",
        r"|(?P<rel>(?-u:\b)[A-Za-z0-9_@+-][A-Za-z0-9_.@+-]*(?:/[A-Za-z0-9_.@+-]+)+/?)",
        r"|(?P<bare>(?-u:\b)[A-Za-z0-9_-][A-Za-z0-9_.-]*\.(?:rs|toml|yaml|yml|json|jsonl|md|py|pyi|ts|tsx|js|jsx|mjs|go|java|kt|c|h|cc|cpp|hpp|cs|rb|php|sh|sql|proto|lock|txt|log|csv|xml|html|css|ini|cfg|conf|env|tf|tfvars|gradle|swift|vue|ipynb|parquet|pdf)(?-u:\b))",
        r"|(?P<ip>(?-u:\b)\d{1,3}(?:\.\d{1,3}){3}(?::\d{2,5})?(?-u:\b))",
        r"|(?P<ver>(?-u:\b)v\d+(?:\.\d+){1,3}(?:-[0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*)?(?-u:\b)|(?-u:\b)\d+\.\d+\.\d+(?:-[0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*)?(?-u:\b))",
        r"|(?P<ticket>(?-u:\b)[A-Z][A-Z0-9]{1,9}-\d{1,6}(?-u:\b))",
        r"|(?P<issue>#\d{1,7}(?-u:\b))",
        r"|(?P<hex>(?-u:\b)0x[0-9a-fA-F]{4,}(?-u:\b)|(?-u:\b)[0-9a-f]{7,40}(?-u:\b))",
    ))
});

/// Numbers with units: money, percentages, durations, sizes, rates, temperatures.
static QUANTITY: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"[$€£]\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:[kKmMbB]|million|billion)(?-u:\b))?",
        r"|(?-u:\b)\d[\d,]*(?:\.\d+)?(?:%",
        r"|\s?(?:ms|µs|us|ns|sec|secs|seconds?|s|mins?|minutes?|hrs?|hours?|h|days?|weeks?|months?|years?|[KMGTPE]i?B|kB|bytes|[kKMG]bps|tokens|req/s|rps|qps|ops/s|GHz|MHz|vCPUs?|cores|USD|EUR|GBP|°[CF]|mg|kg|km|m)(?-u:\b)",
        r"|(?:[CFxkKM])(?-u:\b))",
    ))
});

static BACKTICK: LazyLock<Regex> = LazyLock::new(|| re(r"`([^`\n]{1,80})`"));
static CALL: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?-u:\b)[A-Za-z_][A-Za-z0-9_]*(?:(?:::|\.)[A-Za-z_][A-Za-z0-9_]*)*\(\)"));
static DECL: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?-u:\b)(?:fn|def|func|function|class|struct|enum|trait|interface)\s+([A-Za-z_][A-Za-z0-9_]*)",
    )
});
static SYMBOL: LazyLock<Regex> = LazyLock::new(|| {
    re(r"^[A-Za-z_][A-Za-z0-9_]*(?:(?:::|\.|#)[A-Za-z_][A-Za-z0-9_]*)*(?:\(\))?!?$")
});
static DIFF_FILE: LazyLock<Regex> =
    LazyLock::new(|| re(r"^(?:\+\+\+ b/|diff --git a/\S+ b/)(\S+)"));

/// Ticket-shaped tokens that are really standards or encodings.
const NOT_TICKETS: &[&str] = &["UTF", "SHA", "ISO", "AES", "TLS", "HTTP", "UCS", "P", "X"];

/// The facts gathered so far, in first-mention order, deduplicated.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    pub items: Vec<Item>,
    index: HashMap<(Kind, String), usize>,
    seq: u64,
}

fn dedupe_key(kind: Kind, text: &str) -> (Kind, String) {
    match kind {
        // Identifiers are case-sensitive (a sha, a path on Linux).
        Kind::Entity | Kind::Api | Kind::File | Kind::Url => (kind, text.to_owned()),
        _ => {
            let mut key = String::with_capacity(text.len());
            for word in text.split_whitespace() {
                if !key.is_empty() {
                    key.push(' ');
                }
                key.push_str(&word.to_lowercase());
            }
            let key = key.trim_end_matches(['.', '…', ' ']).to_owned();
            // Goals and the latest request share one key space, so a request
            // that moves from "latest" to "goals" stays one item.
            let kind = if kind == Kind::Latest {
                Kind::Goal
            } else {
                kind
            };
            (kind, key)
        }
    }
}

impl Ledger {
    /// Records a mention; returns the item's index.
    pub(super) fn add(&mut self, kind: Kind, text: &str, from_tool: bool) -> Option<usize> {
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        self.seq += 1;
        let key = dedupe_key(kind, text);
        if let Some(&i) = self.index.get(&key) {
            let item = &mut self.items[i];
            item.last = self.seq;
            item.from_tool &= from_tool;
            return Some(i);
        }
        let i = self.items.len();
        self.items.push(Item {
            kind,
            text: text.to_owned(),
            apis: Vec::new(),
            first: self.seq,
            last: self.seq,
            from_tool,
        });
        self.index.insert(key, i);
        Some(i)
    }

    /// Records a file with the APIs mentioned alongside it.
    pub(super) fn add_file(&mut self, path: &str, apis: &[String], from_tool: bool) {
        if let Some(i) = self.add(Kind::File, path, from_tool) {
            let item = &mut self.items[i];
            for api in apis {
                if !item.apis.contains(api) {
                    item.apis.push(api.clone());
                }
            }
        }
    }

    /// Extracts the facts of one entry.
    pub(super) fn extract_entry(&mut self, role: &str, name: Option<&str>, text: &str) {
        // An assistant entry with a tool name is a flattened tool call: its
        // arguments carry paths and ids, not prose.
        let is_call = role == "assistant" && name.is_some_and(|n| !n.trim().is_empty());
        match role {
            _ if is_call => self.extract_bulk(text, "", &CALL_CAPS),
            "tool" | "function" => {
                let label = format!(
                    "[{}] ",
                    name.filter(|n| !n.trim().is_empty())
                        .unwrap_or("tool")
                        .trim()
                );
                self.extract_bulk(text, &label, &TOOL_CAPS);
            }
            "assistant" | "reasoning" => self.extract_prose_as(text, Voice::Agent),
            _ => self.extract_prose(text),
        }
    }

    /// Prose: sentences are classified and kept verbatim; fenced code is
    /// treated like tool output.
    pub(super) fn extract_prose(&mut self, text: &str) {
        self.extract_prose_as(text, Voice::Principal);
    }

    fn extract_prose_as(&mut self, text: &str, voice: Voice) {
        let mut budget = Budget::new(&PROSE_CAPS);
        let mut fence = String::new();
        let mut in_fence = false;
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                if in_fence {
                    self.extract_bulk_with(&fence, "", &mut budget);
                    fence.clear();
                }
                in_fence = !in_fence;
                continue;
            }
            if in_fence {
                fence.push_str(line);
                fence.push('\n');
                continue;
            }
            for sentence in split_sentences(line) {
                self.extract_sentence(sentence, voice, &mut budget);
            }
        }
        if !fence.is_empty() {
            self.extract_bulk_with(&fence, "", &mut budget);
        }
    }

    fn extract_sentence(&mut self, sentence: &str, voice: Voice, budget: &mut Budget) {
        let sentence = strip_marker(sentence);
        if sentence.is_empty() {
            return;
        }
        let tokens = self.scan_tokens(sentence, budget, false);
        let apis = scan_apis(sentence);
        for path in &tokens.files {
            self.add_file(path, &apis, false);
        }
        for api in apis {
            if budget.take_api() {
                self.add(Kind::Api, &api, false);
            }
        }
        let kind = classify_as(sentence, voice)
            .or_else(|| (tokens.any || QUANTITY.is_match(sentence)).then_some(Kind::Fact));
        if let Some(kind) = kind {
            let limit = if kind == Kind::Fact {
                &mut budget.facts
            } else {
                &mut budget.sentences
            };
            if *limit > 0 {
                *limit -= 1;
                self.add(kind, &clip(sentence, MAX_SENTENCE), false);
            }
        }
    }

    /// Bulk text (tool output, code): identifiers, paths, URLs, a few error
    /// lines and measurement lines, never the text itself.
    fn extract_bulk(&mut self, text: &str, label: &str, caps: &Caps) {
        let mut budget = Budget::new(caps);
        self.extract_bulk_with(text, label, &mut budget);
    }

    fn extract_bulk_with(&mut self, text: &str, label: &str, budget: &mut Budget) {
        let mut current_file: Option<String> = None;
        for line in text.lines() {
            let trimmed = line.trim();
            if trimmed.is_empty() {
                continue;
            }
            if trimmed.starts_with("--- ") || trimmed.starts_with("index ") {
                continue;
            }
            if let Some(c) = DIFF_FILE.captures(trimmed) {
                if let Some(path) = c.get(1) {
                    let path = path.as_str().to_owned();
                    if budget.take_file() {
                        self.add_file(&path, &[], true);
                    }
                    current_file = Some(path);
                }
                continue;
            }
            let changed = (line.starts_with('+') && !line.starts_with("+++"))
                || (line.starts_with('-') && !line.starts_with("---"))
                || line.starts_with("@@");
            if changed && let Some(file) = &current_file {
                let apis: Vec<String> = DECL
                    .captures_iter(line)
                    .filter_map(|c| c.get(1).map(|m| m.as_str().to_owned()))
                    .collect();
                if !apis.is_empty() {
                    self.add_file(file, &apis, true);
                }
            }
            if budget.errors > 0 && is_error(trimmed) {
                budget.errors -= 1;
                let at = ERROR.find(trimmed).map_or(0, |m| m.start());
                self.add(
                    Kind::Error,
                    &format!("{label}{}", window(trimmed, at, MAX_TOOL_LINE)),
                    true,
                );
            } else if budget.facts > 0
                && let Some(m) = QUANTITY.find(trimmed)
            {
                budget.facts -= 1;
                let text = format!("{label}{}", window(trimmed, m.start(), MAX_TOOL_LINE));
                self.add(Kind::Fact, &text, true);
            }
            if !budget.exhausted_tokens() {
                let tokens = self.scan_tokens(trimmed, budget, true);
                for path in &tokens.files {
                    self.add_file(path, &[], true);
                }
            }
        }
    }

    /// Adds entities and URLs found in `text`; returns the paths (for the
    /// caller to attach APIs to) and whether anything specific was found.
    fn scan_tokens(&mut self, text: &str, budget: &mut Budget, from_tool: bool) -> Scan {
        let mut scan = Scan::default();
        for m in TOKEN.find_iter(text) {
            if budget.exhausted_tokens() {
                break;
            }
            let Some((kind, token)) = classify_token(text, m.start(), m.end(), m.as_str()) else {
                continue;
            };
            scan.any = true;
            match kind {
                Kind::File => {
                    if budget.take_file() && !scan.files.iter().any(|f| f == token) {
                        scan.files.push(token.to_owned());
                    }
                }
                Kind::Url => {
                    if budget.urls > 0 {
                        budget.urls -= 1;
                        self.add(Kind::Url, token, from_tool);
                    }
                }
                _ => {
                    if budget.entities > 0 {
                        budget.entities -= 1;
                        self.add(Kind::Entity, token, from_tool);
                    }
                }
            }
        }
        scan
    }
}

#[derive(Default)]
struct Scan {
    files: Vec<String>,
    any: bool,
}

struct Budget {
    sentences: usize,
    errors: usize,
    facts: usize,
    entities: usize,
    files: usize,
    urls: usize,
    apis: usize,
}

impl Budget {
    fn new(c: &Caps) -> Self {
        Self {
            sentences: c.sentences,
            errors: c.errors,
            facts: c.facts,
            entities: c.entities,
            files: c.files,
            urls: c.urls,
            apis: c.apis,
        }
    }
    fn take_file(&mut self) -> bool {
        let ok = self.files > 0;
        self.files = self.files.saturating_sub(1);
        ok
    }
    fn take_api(&mut self) -> bool {
        let ok = self.apis > 0;
        self.apis = self.apis.saturating_sub(1);
        ok
    }
    fn exhausted_tokens(&self) -> bool {
        self.entities == 0 && self.files == 0 && self.urls == 0
    }
}

/// Who is speaking: the people who set the task (user, system, developer)
/// or the agent narrating its own work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Voice {
    Principal,
    Agent,
}

/// The kind of a sentence of unknown origin (a previous summary's line).
pub(crate) fn classify(sentence: &str) -> Option<Kind> {
    classify_as(sentence, Voice::Principal)
}

/// The kind of a prose sentence, by the cue words it contains; the order
/// decides a sentence with several cues (a constraint that also gives a reason
/// is kept as a constraint, the stickier kind).
fn classify_as(sentence: &str, voice: Voice) -> Option<Kind> {
    let constraint = match voice {
        Voice::Principal => &CONSTRAINT,
        Voice::Agent => &STRONG_CONSTRAINT,
    };
    if constraint.is_match(sentence) {
        Some(Kind::Constraint)
    } else if DECISION.is_match(sentence) {
        Some(Kind::Decision)
    } else if ACTION.is_match(sentence) {
        Some(Kind::Action)
    } else if voice == Voice::Principal && is_error(sentence) {
        // The agent's errors are in the tool output it quotes; its prose
        // about them ("map the error to 500") is not an error report.
        Some(Kind::Error)
    } else {
        None
    }
}

fn is_error(line: &str) -> bool {
    if !ERROR.is_match(line) {
        return false;
    }
    if !NOT_ERROR.is_match(line) {
        return true;
    }
    ERROR.is_match(&NOT_ERROR.replace_all(line, ""))
}

/// Validates a raw token match and says what it is; `None` for false
/// positives the regex alone cannot exclude (no lookbehind in `regex`).
fn classify_token<'t>(
    hay: &str,
    start: usize,
    end: usize,
    raw: &'t str,
) -> Option<(Kind, &'t str)> {
    let token = raw.trim_end_matches(['.', ',', ';', ':', '!', '?', ')', ']', '\'', '"']);
    if token.is_empty() || token == "/dev/null" {
        return None;
    }
    // `REGISTRY.lock()`, `config.json()`: a call, not a file.
    let called = hay[end..].starts_with('(');
    let prev = hay[..start].chars().next_back();
    let first = token.as_bytes()[0];
    if token.starts_with("http://") || token.starts_with("https://") {
        return (token.len() > 10).then_some((Kind::Url, token));
    }
    if token.contains('@') && !token.contains('/') && token.contains('.') {
        return Some((Kind::Entity, token));
    }
    if token.len() > 2 && token.as_bytes()[1] == b':' && token.contains('\\') {
        return Some((Kind::File, token));
    }
    if token.contains('/') {
        // `requests/s`, `km/h`, `and/or`: a slash glued to a word is not a path.
        if first == b'/'
            && (called
                || prev.is_some_and(|c| c.is_alphanumeric() || matches!(c, '_' | '/' | ')' | ']')))
        {
            return None;
        }
        if token.starts_with('/')
            || token.starts_with("./")
            || token.starts_with("../")
            || token.starts_with("~/")
        {
            let body = token.trim_start_matches(['.', '~', '/']);
            return (body.len() >= 2 && body.bytes().any(|b| b.is_ascii_alphabetic()))
                .then_some((Kind::File, token));
        }
        let last = token.rsplit('/').next().unwrap_or("");
        let has_ext = last.rsplit_once('.').is_some_and(|(stem, ext)| {
            !stem.is_empty()
                && (1..=10).contains(&ext.len())
                && ext.as_bytes()[0].is_ascii_alphabetic()
        });
        let slashes = token.matches('/').count();
        let lettered = token.bytes().any(|b| b.is_ascii_alphabetic());
        return (lettered && (has_ext || token.ends_with('/') || slashes >= 2))
            .then_some((Kind::File, token));
    }
    if token.contains('.')
        && token
            .bytes()
            .last()
            .is_some_and(|b| b.is_ascii_alphabetic())
        && !token.starts_with('v')
    {
        if called {
            return None;
        }
        // Bare file name (the extension list lives in the regex).
        if !token.bytes().all(|b| b.is_ascii_digit() || b == b'.')
            && token.contains(|c: char| c.is_ascii_alphabetic())
        {
            let dotted_digits = token
                .split('.')
                .next()
                .is_some_and(|s| s.bytes().all(|b| b.is_ascii_digit()));
            if !dotted_digits {
                return Some((Kind::File, token));
            }
        }
    }
    if first == b'#' {
        return prev
            .is_none_or(|c| !(c.is_alphanumeric() || c == '&' || c == '#'))
            .then_some((Kind::Entity, token));
    }
    if let Some((prefix, _)) = token.split_once('-')
        && prefix
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
        && token.len() < 18
        && !token.contains('.')
    {
        return (!NOT_TICKETS.contains(&prefix)).then_some((Kind::Entity, token));
    }
    if token.bytes().all(|b| b.is_ascii_hexdigit()) && token.len() >= 7 {
        let letters = token.bytes().any(|b| b.is_ascii_alphabetic());
        let digits = token.bytes().any(|b| b.is_ascii_digit());
        return (letters && digits).then_some((Kind::Entity, token));
    }
    Some((Kind::Entity, token))
}

/// APIs mentioned in a prose sentence: backticked symbols and `name()` calls.
fn scan_apis(sentence: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in BACKTICK.captures_iter(sentence) {
        let Some(inner) = c.get(1) else { continue };
        let inner = inner.as_str().trim();
        if SYMBOL.is_match(inner) && !inner.contains(',') && !out.iter().any(|a| a == inner) {
            // A backticked path or id is already captured as such.
            let is_token = TOKEN.find(inner).is_some_and(|m| m.len() == inner.len());
            if !is_token && inner.len() >= 2 {
                out.push(inner.to_owned());
            }
        }
    }
    for m in CALL.find_iter(sentence) {
        let api = m.as_str();
        let dup = out
            .iter()
            .any(|a| a == api || a.strip_suffix("()") == api.strip_suffix("()"));
        if !dup {
            out.push(api.to_owned());
        }
    }
    out
}

/// Splits a line into sentences at `. `, `? `, `! ` followed by something that
/// starts a sentence; abbreviations and versions stay whole.
pub(crate) fn split_sentences(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let bytes = line.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i + 2 < bytes.len() {
        let b = bytes[i];
        if matches!(b, b'.' | b'?' | b'!') && bytes[i + 1] == b' ' {
            let next = bytes[i + 2];
            let starts = next.is_ascii_uppercase() || matches!(next, b'`' | b'"' | b'(' | b'[');
            // `e.g. Foo`, `J. Smith`: a one-letter word before the dot is an
            // abbreviation or an initial; `4.3.0. Next` is a sentence end.
            let abbrev = b == b'.'
                && i >= 1
                && bytes[i - 1].is_ascii_alphabetic()
                && (i < 2 || !bytes[i - 2].is_ascii_alphanumeric());
            if starts && !abbrev {
                out.push(&line[start..=i]);
                start = i + 2;
                i += 2;
                continue;
            }
        }
        i += 1;
    }
    if start < line.len() {
        out.push(&line[start..]);
    }
    out
}

/// Removes list markers and quote markers, which are layout, not content.
fn strip_marker(s: &str) -> &str {
    let s = s.trim();
    let s = s.trim_start_matches('>').trim_start();
    for marker in ["- [ ] ", "- [x] ", "- ", "* ", "• "] {
        if let Some(rest) = s.strip_prefix(marker) {
            return rest.trim();
        }
    }
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0
        && digits < 3
        && let Some(rest) = s[digits..]
            .strip_prefix(". ")
            .or_else(|| s[digits..].strip_prefix(") "))
    {
        return rest.trim();
    }
    s
}

/// The largest char boundary `<= i`.
pub(crate) fn floor_boundary(s: &str, i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    let mut i = i;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// `s` cut to at most `max` bytes at a char boundary, marked with `…` if cut.
pub(crate) fn clip(s: &str, max: usize) -> String {
    // Already clipped to this size (a re-folded summary): keep it as is, so
    // folding is idempotent.
    if s.len() <= max || (s.ends_with('…') && s.len() <= max + '…'.len_utf8()) {
        return s.to_owned();
    }
    let end = floor_boundary(s, max);
    // Prefer a word boundary when there is one reasonably close.
    let cut = s[..end].rfind(' ').filter(|&w| w > end / 2).unwrap_or(end);
    format!("{}…", s[..cut].trim_end())
}

/// A window of at most `max` bytes of `line` showing byte offset `at`, with
/// `…` where it was cut.
fn window(line: &str, at: usize, max: usize) -> String {
    if line.len() <= max {
        return line.to_owned();
    }
    let start = floor_boundary(line, at.saturating_sub(max / 4));
    let end = floor_boundary(line, start + max);
    let mut out = String::with_capacity(max + 8);
    if start > 0 {
        out.push('…');
    }
    out.push_str(line[start..end].trim());
    if end < line.len() {
        out.push('…');
    }
    out
}
