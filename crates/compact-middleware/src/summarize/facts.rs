//! Fact extraction: turns entries (and unparseable lines of a previous summary)
//! into typed, deduplicated items held in a [`Ledger`].
//!
//! Every item's text is a verbatim slice of its source (trimmed, possibly cut
//! at a character boundary and marked with `…`), optionally prefixed with the
//! `[tool]` label of the tool that produced it. Nothing is paraphrased, so the
//! summary can never state something the input did not.
use std::collections::{BTreeSet, HashMap};
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

/// What an item is. The declaration order is the section order of `task_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
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
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    /// A tool fact worth keeping like prose: a sentence with a cue, a
    /// prose field of a JSON document, a row or line naming something the
    /// conversation mentions.
    #[serde(default)]
    pub salient: bool,
    /// A later statement replaced this one (the newer item's index).
    #[serde(default)]
    pub superseded_by: Option<usize>,
}

/// Longest verbatim request kept for a goal or the latest request, in bytes.
pub(crate) const MAX_REQUEST: usize = 1200;
/// Longest sentence kept, in bytes.
const MAX_SENTENCE: usize = 320;
/// Longest tool line (error, measurement) kept, in bytes.
const MAX_TOOL_LINE: usize = 240;
/// Most salient facts taken from one tool output.
const SALIENT_PER_OUTPUT: usize = 12;
/// Of those, most cue sentences from plain text (documents are full of
/// "must" and "only"; a few carry the point).
const SALIENT_CUES_PER_OUTPUT: usize = 4;
/// Arrays longer than this are listings: only elements naming a mentioned
/// identifier are kept.
const LONG_ARRAY: usize = 5;
/// Most identifiers remembered as mentioned in prose.
const MAX_MENTIONED: usize = 20_000;

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
    errors: 6,
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
        // Hosts, regions, zones, branch-like names: lowercase words joined by
        // `-` with a digit somewhere (`web-17`, `eu-west-3`); plain hyphenated
        // words are rejected in `classify_token`.
        r"|(?P<kebab>(?-u:\b)[a-z][a-z0-9]*(?:-[a-z0-9]+)+(?-u:\b))",
        // snake_case names: functions, config keys, tables.
        r"|(?P<snake>(?-u:\b)[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?-u:\b))",
        // Letters and digits mixed: builds, instance types, short ids
        // (`b7000`, `m5xlarge`, `p99`).
        r"|(?P<alnum>(?-u:\b)[A-Za-z]+[0-9][A-Za-z0-9]*(?-u:\b))",
    ))
});

/// A number that a sentence names (`port 18443`, `at most 3 retries`,
/// `timeout of 45`): such a sentence is a fact even without an identifier.
static NAMED_NUMBER: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(?-u:\b)(?:port|ports|timeout|timeouts|retries|retry|attempts|limit|quota|sla|replicas|workers|threads|budget|deadline|version|at most|at least|up to|no more than|maximum|minimum|max|min)(?-u:\b)[^.\n]{0,24}?(?-u:\b)\d",
    )
});

/// Numbers of four digits or more (ports, ids, amounts): mentioned in prose,
/// they make the tool rows that carry them salient.
static LONG_NUMBER: LazyLock<Regex> = LazyLock::new(|| re(r"(?-u:\b)\d{4,}(?-u:\b)"));

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

/// A line with its numbers blanked: log lines of one template share it.
fn shape(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_digits = false;
    for c in line.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('#');
            }
            in_digits = true;
        } else {
            out.push(c);
            in_digits = false;
        }
    }
    out
}

/// JSON keys whose scalar value names something an agent may need later.
fn is_naming_key(key: &str) -> bool {
    const NAMING: &[&str] = &[
        "ticket",
        "issue",
        "incident",
        "case",
        "host",
        "hostname",
        "server",
        "node",
        "port",
        "region",
        "zone",
        "az",
        "cluster",
        "namespace",
        "env",
        "environment",
        "service",
        "endpoint",
        "url",
        "link",
        "runbook",
        "email",
        "owner",
        "assignee",
        "contact",
        "oncall",
        "version",
        "release",
        "branch",
        "commit",
        "sha",
        "tag",
        "path",
        "file",
        "database",
        "db",
        "bucket",
        "queue",
        "topic",
        "table",
        "error",
        "error_code",
        "code",
        "deadline",
        "due",
        "sla",
        "timeout",
        "limit",
        "quota",
        "account",
        "customer",
        "order",
        "plan",
        "priority",
        "severity",
    ];
    let k = key.to_ascii_lowercase().replace(['-', ' '], "_");
    NAMING
        .iter()
        .any(|n| k == *n || k.ends_with(&format!("_{n}")))
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
/// latest request.
fn is_substantive(request: &str) -> bool {
    request.split_whitespace().count() >= 3
}

/// The byte spans of what a sentence is about: its cue word, its
/// identifiers, quantities and named numbers; sorted, merged.
pub(crate) fn key_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for re in [&*CONSTRAINT, &*DECISION, &*ACTION] {
        if let Some(m) = re.find(text) {
            spans.push((m.start(), m.end()));
            break;
        }
    }
    for m in TOKEN.find_iter(text) {
        if let Some((_, token)) = classify_token(text, m.start(), m.end(), m.as_str()) {
            spans.push((m.start(), m.start() + token.len()));
        }
    }
    for re in [&*QUANTITY, &*LONG_NUMBER, &*BACKTICK] {
        spans.extend(re.find_iter(text).map(|m| (m.start(), m.end())));
    }
    if let Some(m) = NAMED_NUMBER.find(text) {
        // The named number itself: the digits at the end of the match.
        let digits_end = text[m.end()..]
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .map_or(text.len(), |d| m.end() + d);
        spans.push((m.start(), digits_end));
    }
    spans.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (s, e) in spans {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}

/// The identifiers, quantities and long numbers of a line (its `[tool]`
/// label left out): the parts a summary must carry verbatim.
pub(crate) fn fact_keys(line: &str) -> Vec<String> {
    let body = match line.strip_prefix('[').and_then(|r| r.split_once("] ")) {
        Some((_, rest)) => rest,
        None => line,
    };
    let mut keys: Vec<String> = TOKEN
        .find_iter(body)
        .filter_map(|m| classify_token(body, m.start(), m.end(), m.as_str()))
        .map(|(_, t)| t.to_owned())
        .collect();
    keys.extend(LONG_NUMBER.find_iter(body).map(|m| m.as_str().to_owned()));
    keys.sort();
    keys.dedup();
    keys
}

/// Ticket-shaped tokens that are really standards or encodings.
const NOT_TICKETS: &[&str] = &["UTF", "SHA", "ISO", "AES", "TLS", "HTTP", "UCS", "P", "X"];

/// The facts gathered so far, in first-mention order, deduplicated.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct Ledger {
    pub items: Vec<Item>,
    #[serde(skip)]
    index: HashMap<(Kind, String), usize>,
    seq: u64,
    /// Identifiers the people and the agent mentioned in prose: a tool's row
    /// or line that names one of them is salient.
    #[serde(default)]
    pub mentioned: BTreeSet<String>,
    /// A matcher over `mentioned`, rebuilt when it grew.
    #[serde(skip)]
    matcher: Option<(usize, aho_corasick::AhoCorasick)>,
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
        self.add_with(kind, text, from_tool, false)
    }

    /// [`Ledger::add`], marking a tool fact as salient.
    pub(super) fn add_with(
        &mut self,
        kind: Kind,
        text: &str,
        from_tool: bool,
        salient: bool,
    ) -> Option<usize> {
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        if self.index.len() != self.items.len() {
            self.reindex();
        }
        self.seq += 1;
        let key = dedupe_key(kind, text);
        if let Some(&i) = self.index.get(&key) {
            let item = &mut self.items[i];
            item.last = self.seq;
            item.from_tool &= from_tool;
            item.salient |= salient;
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
            salient,
            superseded_by: None,
        });
        self.index.insert(key, i);
        Some(i)
    }

    /// Remembers an identifier the people or the agent said (bounded).
    fn mention(&mut self, token: &str) {
        if self.mentioned.len() < MAX_MENTIONED && token.len() <= 120 {
            self.mentioned.insert(token.to_owned());
        }
    }

    /// Records the identifiers of prose that stays in the context (recent
    /// turns), so tool output that names them is recognised as salient.
    pub(super) fn note_mentions(&mut self, text: &str) {
        for m in TOKEN.find_iter(text) {
            if let Some((_, token)) = classify_token(text, m.start(), m.end(), m.as_str()) {
                self.mention(token);
            }
        }
        for n in LONG_NUMBER.find_iter(text) {
            self.mention(n.as_str());
        }
    }

    /// Takes in a span of entries leaving the context: every entry's facts,
    /// and the user's requests (the newest becomes the latest request; the
    /// one before it, and any others of substance, become goals).
    pub(super) fn absorb(&mut self, entries: &[super::SummaryEntry]) {
        let mut requests: Vec<String> = Vec::new();
        for entry in entries {
            if entry.role == "user"
                && let Some(request) = request_text(&entry.text)
            {
                requests.push(request);
            }
            self.extract_entry(&entry.role, entry.name.as_deref(), &entry.text);
        }
        if let Some(newest) = requests.pop() {
            for r in requests.iter().filter(|r| is_substantive(r)) {
                self.add(Kind::Goal, r, false);
            }
            self.set_latest(&newest);
        }
    }

    /// Makes `text` the latest request; the previous one becomes a goal
    /// when it says something, else it is set aside.
    pub(super) fn set_latest(&mut self, text: &str) {
        let previous: Vec<usize> = (0..self.items.len())
            .filter(|&i| self.items[i].kind == Kind::Latest)
            .collect();
        let Some(i) = self.add(Kind::Latest, text, false) else {
            return;
        };
        for p in previous.into_iter().filter(|&p| p != i) {
            if is_substantive(&self.items[p].text) {
                self.items[p].kind = Kind::Goal;
            } else {
                self.items[p].superseded_by = Some(i);
            }
        }
        self.items[i].kind = Kind::Latest;
        self.items[i].superseded_by = None;
    }

    /// Rebuilds the dedupe index (it is not serialized).
    pub(super) fn reindex(&mut self) {
        self.index = self
            .items
            .iter()
            .enumerate()
            .map(|(i, it)| (dedupe_key(it.kind, &it.text), i))
            .collect();
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
                self.extract_structured(text, &label);
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
        for n in LONG_NUMBER.find_iter(sentence) {
            self.mention(n.as_str());
        }
        let kind = classify_as(sentence, voice).or_else(|| {
            (tokens.any || QUANTITY.is_match(sentence) || NAMED_NUMBER.is_match(sentence))
                .then_some(Kind::Fact)
        });
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

    /// The salient part of a tool output, read by its shape: the prose
    /// fields and the naming fields of a JSON document, the rows of a table
    /// that name something the conversation mentions, and in plain text the
    /// sentences with a cue and the lines that name a mentioned identifier.
    fn extract_structured(&mut self, text: &str, label: &str) {
        let mut left = SALIENT_PER_OUTPUT;
        let trimmed = text.trim();
        if (trimmed.starts_with('{') || trimmed.starts_with('['))
            && let Ok(doc) = serde_json::from_str::<serde_json::Value>(trimmed)
        {
            self.extract_json(&doc, label, false, &mut left);
            return;
        }
        if self.extract_table(text, label, &mut left) {
            return;
        }
        let mut cues = SALIENT_CUES_PER_OUTPUT;
        let mut shapes = std::collections::HashSet::new();
        for line in text.lines() {
            if left == 0 {
                break;
            }
            let line = line.trim();
            if line.len() < 8 || is_error(line) {
                // Error lines are the bulk pass's, salient when they name
                // something mentioned.
                continue;
            }
            // A log repeats its templates: one line per shape says it.
            if self.names_mentioned(line) && shapes.insert(shape(line)) {
                left -= 1;
                let at = line.find(|c: char| c.is_alphanumeric()).unwrap_or(0);
                self.add_with(
                    Kind::Fact,
                    &format!("{label}{}", window(line, at, MAX_TOOL_LINE)),
                    true,
                    true,
                );
                continue;
            }
            if cues == 0 || line.split_whitespace().count() < 5 {
                continue;
            }
            for sentence in split_sentences(line) {
                let sentence = strip_marker(sentence);
                // Kept as a labelled fact, never as a constraint or a
                // decision: a tool's text gives no orders (a fetched page
                // saying "you must…" is not the user speaking).
                if let Some(Kind::Constraint | Kind::Decision | Kind::Action) =
                    classify_as(sentence, Voice::Principal)
                    && cues > 0
                    && left > 0
                {
                    cues -= 1;
                    left -= 1;
                    self.add_with(
                        Kind::Fact,
                        &format!("{label}{}", clip(sentence, MAX_SENTENCE)),
                        true,
                        true,
                    );
                }
            }
        }
    }

    /// Whether `line` names an identifier the people or the agent mentioned.
    fn names_mentioned(&mut self, line: &str) -> bool {
        if self.mentioned.is_empty() {
            return false;
        }
        if self
            .matcher
            .as_ref()
            .is_none_or(|(n, _)| *n != self.mentioned.len())
        {
            let built = aho_corasick::AhoCorasick::builder()
                .match_kind(aho_corasick::MatchKind::LeftmostLongest)
                .build(self.mentioned.iter());
            match built {
                Ok(ac) => self.matcher = Some((self.mentioned.len(), ac)),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot index mentioned identifiers");
                    return false;
                }
            }
        }
        let Some((_, ac)) = &self.matcher else {
            return false;
        };
        let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
        let bytes = line.as_bytes();
        ac.find_iter(line).any(|m| {
            let before = m.start().checked_sub(1).map(|i| bytes[i]);
            let after = bytes.get(m.end()).copied();
            !before.is_some_and(word) && !after.is_some_and(word)
        })
    }

    /// A JSON document: prose fields are read as sentences; an object's
    /// naming fields (`host`, `region`, `ticket`…) become one line. Inside a
    /// long array only the elements that name a mentioned identifier count,
    /// so a 500-row listing does not flood the ledger.
    fn extract_json(
        &mut self,
        v: &serde_json::Value,
        label: &str,
        in_long_array: bool,
        left: &mut usize,
    ) {
        use serde_json::Value;
        if *left == 0 {
            return;
        }
        match v {
            Value::Array(items) => {
                let long = items.len() > LONG_ARRAY;
                for item in items {
                    self.extract_json(item, label, in_long_array || long, left);
                    if *left == 0 {
                        return;
                    }
                }
            }
            Value::Object(map) => {
                let mut pairs: Vec<String> = Vec::new();
                let mut names_mentioned = false;
                for (k, value) in map {
                    match value {
                        Value::String(text) if text.split_whitespace().count() >= 4 => {
                            if !in_long_array || self.names_mentioned(text) {
                                self.extract_json_prose(text, label, left);
                            }
                        }
                        Value::String(_) | Value::Number(_) | Value::Bool(_) => {
                            let scalar = match value {
                                Value::String(t) => t.clone(),
                                other => other.to_string(),
                            };
                            let mentioned = self.names_mentioned(&scalar);
                            names_mentioned |= mentioned;
                            if (mentioned || is_naming_key(k)) && scalar.len() <= 120 {
                                pairs.push(format!("{k}: {scalar}"));
                            }
                        }
                        Value::Array(_) | Value::Object(_) => {
                            self.extract_json(value, label, in_long_array, left);
                        }
                        Value::Null => {}
                    }
                }
                let worth = if in_long_array {
                    names_mentioned
                } else {
                    !pairs.is_empty()
                };
                if worth && *left > 0 {
                    *left -= 1;
                    pairs.truncate(8);
                    self.add_with(
                        Kind::Fact,
                        &format!("{label}{}", pairs.join(", ")),
                        true,
                        true,
                    );
                }
            }
            _ => {}
        }
    }

    /// A prose field of a JSON document: each sentence with a cue, an
    /// identifier or a quantity is kept.
    fn extract_json_prose(&mut self, text: &str, label: &str, left: &mut usize) {
        for line in text.lines() {
            for sentence in split_sentences(line) {
                if *left == 0 {
                    return;
                }
                let sentence = strip_marker(sentence);
                let kind = classify_as(sentence, Voice::Principal).or_else(|| {
                    let specific = TOKEN.find_iter(sentence).any(|m| {
                        classify_token(sentence, m.start(), m.end(), m.as_str()).is_some()
                    });
                    (specific || QUANTITY.is_match(sentence) || NAMED_NUMBER.is_match(sentence))
                        .then_some(Kind::Fact)
                });
                if let Some(kind) = kind {
                    *left -= 1;
                    self.add_with(
                        kind,
                        &format!("{label}{}", clip(sentence, MAX_SENTENCE)),
                        true,
                        true,
                    );
                }
            }
        }
    }

    /// A table (CSV, TSV or `|` columns): the rows that name a mentioned
    /// identifier, as `column=value` pairs. Returns whether `text` was a table.
    fn extract_table(&mut self, text: &str, label: &str, left: &mut usize) -> bool {
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        if lines.len() < 3 {
            return false;
        }
        let Some(sep) = [',', '\t', '|'].into_iter().find(|&sep| {
            let width = lines[0].matches(sep).count();
            width >= 1
                && lines
                    .iter()
                    .filter(|l| l.matches(sep).count() == width)
                    .count()
                    * 10
                    >= lines.len() * 8
        }) else {
            return false;
        };
        let cells = |line: &str| -> Vec<String> {
            line.split(sep)
                .map(|c| c.trim().trim_matches('"').to_owned())
                .filter(|c| !c.chars().all(|ch| ch == '-' || ch == ':'))
                .collect()
        };
        let header = cells(lines[0]);
        for line in &lines[1..] {
            if *left == 0 {
                break;
            }
            if !self.names_mentioned(line) {
                continue;
            }
            let row = cells(line);
            if row.is_empty() {
                continue;
            }
            *left -= 1;
            let pairs: Vec<String> = row
                .iter()
                .enumerate()
                .map(|(i, c)| match header.get(i).filter(|h| !h.is_empty()) {
                    Some(h) => format!("{h}={c}"),
                    None => c.clone(),
                })
                .collect();
            self.add_with(
                Kind::Fact,
                &format!("{label}{}", clip(&pairs.join(", "), MAX_TOOL_LINE)),
                true,
                true,
            );
        }
        true
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
                let salient = !label.is_empty() && self.names_mentioned(trimmed);
                self.add_with(
                    Kind::Error,
                    &format!("{label}{}", window(trimmed, at, MAX_TOOL_LINE)),
                    true,
                    salient,
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

    /// Adds the identifiers a line of a previous summary carries (its
    /// entities, files and URLs): a sentence shown whole does not list
    /// them again, and the next round may show it smaller or not at all.
    pub(super) fn add_identifiers_of(&mut self, line: &str, from_tool: bool) {
        let mut budget = Budget::new(&PROSE_CAPS);
        let scan = self.scan_tokens(line, &mut budget, from_tool);
        for path in &scan.files {
            self.add_file(path, &[], from_tool);
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
            if !from_tool {
                self.mention(token);
            }
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
    let lower_word = |sep: u8| {
        token.as_bytes()[0].is_ascii_lowercase()
            && token.contains(sep as char)
            && token
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == sep)
    };
    if lower_word(b'-') {
        // `eu-west-3`, `web-17`: a name; `long-running`: a word.
        return token
            .bytes()
            .any(|b| b.is_ascii_digit())
            .then_some((Kind::Entity, token));
    }
    if lower_word(b'_') {
        // `call_id=…`, `order_id=…`: the label of a value, not a name;
        // `run_tests(…)`: a call, an API's business.
        if hay[start + token.len()..].starts_with(['=', '(']) {
            return None;
        }
        // `call_9f8e7d6c5b4a3f2e`, `fc_68a1…`: an opaque id, not a name.
        let opaque = token.split('_').skip(1).any(|seg| {
            seg.len() >= 8
                && seg.bytes().any(|b| b.is_ascii_digit())
                && seg.bytes().any(|b| b.is_ascii_lowercase())
        });
        return (!opaque).then_some((Kind::Entity, token));
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
            // A lowercase start still ends a sentence after a full word
            // (`passed. and then`), never after an abbreviation.
            let word: String = line[..i]
                .rsplit(|c: char| !c.is_ascii_alphabetic())
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            let known_abbrev = ABBREVIATIONS.contains(&word.as_str());
            let starts = next.is_ascii_uppercase()
                || matches!(next, b'`' | b'"' | b'(' | b'[')
                || (b == b'.' && next.is_ascii_lowercase() && word.len() >= 3 && !known_abbrev);
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

/// Words that end with a dot without ending a sentence.
const ABBREVIATIONS: &[&str] = &[
    "etc", "vs", "approx", "incl", "excl", "esp", "resp", "cf", "fig", "eq", "no", "nos", "vol",
    "min", "max", "sec", "secs", "est", "dept", "inc", "ltd", "corp", "mr", "mrs", "ms", "dr",
    "prof", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
];

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
