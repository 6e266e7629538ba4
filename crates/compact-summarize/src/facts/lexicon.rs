//! The words and shapes fact extraction looks for: cue words, identifier
//! tokens, quantities, sentence splitting, and the small text helpers
//! (clipping at char boundaries, windows around an offset) every part of
//! the summarizer shares.
use std::sync::LazyLock;

use regex::Regex;

use super::Kind;
use super::lang;
pub(crate) use super::lang::{
    JUSTIFICATIONS, NEGATIONS, STOPWORDS, cjk_bigrams, mostly_cjk, word_count,
};

pub(crate) fn re(pattern: &str) -> Regex {
    // The patterns are constants of this module; a typo is caught by the
    // first test that touches extraction, never by user input.
    #[allow(clippy::expect_used)]
    Regex::new(pattern).expect("constant regex")
}

// ASCII word boundaries everywhere: Unicode `\b` forces the slow engines on
// non-ASCII haystacks, and a megabyte of CJK tool output must stay linear.
// Each cue regex is the English words, then the other languages' words of
// `lang.rs` (CJK ones without boundaries: CJK has no spaces between words).
const EN_CONSTRAINT: &str = r"(?-u:\b)(?:must|never|do not|don't|dont|required|requires|only|always|should not|shouldn't|mustn't|not allowed|forbidden)(?-u:\b)";
const EN_STRONG_CONSTRAINT: &str = r"(?-u:\b)(?:must|do not|don't|required|should not|shouldn't|mustn't|not allowed|forbidden)(?-u:\b)";
const EN_DECISION: &str = r"(?-u:\b)(?:decided|decide to|decision|chose|choose to|chosen|will use|we'll use|going with|go with|(?:i|we)'ll (?:use|run|go|switch|keep|move|split|pin|roll|migrate|ship|adopt|stick)|(?:i|we) will (?:use|run|go|switch|keep|move|split|pin|roll|migrate|ship|adopt|stick)|instead of|opted|settled on|switch(?:ed|ing)? to|switching|switched|change of plan|scratch that|from now on|going forward|rather than|recommend|recommended|approved|agreed)(?-u:\b)";
// `TODO` in capitals only: `todo` is Spanish and Portuguese for "all".
const EN_ACTION: &str = r"(?-u:\b)(?:(?-i:TODO|FIXME|fixme)|to-do|todo list|next step|need to|needs to|pending|waiting on|waiting for|blocked|blocker|follow[- ]up|still have to|still need|not yet)(?-u:\b)";
const EN_ERROR: &str = r"(?-u:\b)(?:error|errors|errno|failed|fails|failure|failing|exception|panic|panicked|traceback|fatal|denied|refused|timed out|segfault|oomkilled|crash(?:ed)?)(?-u:\b)";

/// A case-insensitive regex of the English pattern, the other languages'
/// `words` and their `raw` patterns.
fn cues(english: &str, words: &[&[&str]], raw: &[&[&str]]) -> Regex {
    let mut pattern = format!("(?i){english}");
    for list in words {
        pattern.push('|');
        pattern.push_str(&lang::alternation(list));
    }
    for r in raw.iter().flat_map(|r| r.iter()) {
        pattern.push('|');
        pattern.push_str(r);
    }
    re(&pattern)
}

pub(crate) static CONSTRAINT: LazyLock<Regex> = LazyLock::new(|| {
    cues(
        EN_CONSTRAINT,
        &[lang::CONSTRAINT],
        &[lang::RAW_STRONG_CONSTRAINT, lang::RAW_CONSTRAINT],
    )
});
/// The cues that still mark a constraint when the agent itself says them:
/// "only", "always" and "never" in an assistant's narration are mostly
/// description ("loses only the cache"), not rules.
pub(crate) static STRONG_CONSTRAINT: LazyLock<Regex> = LazyLock::new(|| {
    cues(
        EN_STRONG_CONSTRAINT,
        &[lang::STRONG_CONSTRAINT],
        &[lang::RAW_STRONG_CONSTRAINT],
    )
});
pub(crate) static DECISION: LazyLock<Regex> =
    LazyLock::new(|| cues(EN_DECISION, &[lang::DECISION], &[lang::RAW_DECISION]));
pub(crate) static ACTION: LazyLock<Regex> =
    LazyLock::new(|| cues(EN_ACTION, &[lang::ACTION], &[lang::RAW_ACTION]));
pub(crate) static ERROR: LazyLock<Regex> = LazyLock::new(|| cues(EN_ERROR, &[lang::ERROR], &[]));

/// Whether a constraint cue is one that describes as often as it rules
/// ("only", "always", "solo", "nur", "toujours"): a tool's text saying it is
/// not stating a requirement.
pub(crate) fn is_weak_cue(cue: &str) -> bool {
    let cue = cue.to_lowercase();
    matches!(
        cue.as_str(),
        "only"
            | "always"
            | "solo"
            | "sólo"
            | "solamente"
            | "únicamente"
            | "siempre"
            | "nur"
            | "seulement"
            | "uniquement"
            | "总是"
            | "始终"
            | "のみ"
            | "だけ"
    ) || cue.starts_with('只')
        || cue.starts_with('仅')
}
/// Error words that announce the absence of an error (`0 failed`, `"error": null`).
pub(crate) static NOT_ERROR: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?i)(?-u:\b)(?:0|no) (?:failed|failures|errors?)(?-u:\b)|"?(?:error|errors|exception)"?\s*[:=]\s*(?:null|none|false|0|\[\]|\{\}|""|nil)(?-u:\b)?"#,
    )
});

/// Every identifier-like token, most specific alternative first: leftmost-first
/// semantics then resolve overlaps (a URL wins over the path inside it).
pub(crate) static TOKEN: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        // A URL or path ends where CJK text or full-width punctuation starts:
        // Chinese writes `在https://x.example/a上查看` without spaces.
        r"(?P<url>https?://[^\s<>`'\x22\]\)\}\x{3000}-\x{9FFF}\x{AC00}-\x{D7AF}\x{F900}-\x{FAFF}\x{FF00}-\x{FFEF}]+)",
        r"|(?P<email>[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,})",
        r"|(?P<uuid>(?-u:\b)[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?-u:\b))",
        // Research identifiers: `arXiv:2408.19328`, DOIs `10.1145/3368089.3409766`.
        r"|(?P<arxiv>(?-u:\b)arXiv:\d{4}\.\d{4,5}(?:v\d+)?(?-u:\b))",
        r"|(?P<doi>(?-u:\b)10\.\d{4,9}/[A-Za-z0-9._;()/:-]*[A-Za-z0-9])",
        r"|(?P<win>(?-u:\b)[A-Za-z]:\\[^\s<>|*?\x22',;:\x{3000}-\x{9FFF}\x{AC00}-\x{D7AF}\x{F900}-\x{FAFF}\x{FF00}-\x{FFEF}]+)",
        r"|(?P<abs>(?:\.{1,2}/|~/|/)[A-Za-z0-9_.@+-]+(?:/[A-Za-z0-9_.@+-]+)*/?)",
        r"|(?P<rel>(?-u:\b)[A-Za-z0-9_@+-][A-Za-z0-9_.@+-]*(?:/[A-Za-z0-9_.@+-]+)+/?)",
        r"|(?P<bare>(?-u:\b)[A-Za-z0-9_-][A-Za-z0-9_.-]*\.(?:rs|toml|yaml|yml|json|jsonl|md|py|pyi|ts|tsx|js|jsx|mjs|go|java|kt|c|h|cc|cpp|hpp|cs|rb|php|sh|sql|proto|lock|txt|log|csv|xml|html|css|ini|cfg|conf|env|tf|tfvars|gradle|swift|vue|ipynb|parquet|pdf)(?-u:\b))",
        // Dates and timestamps (`2023-08-15`, `2025-10-09T23:49:00Z`): a
        // value in any language.
        r"|(?P<date>(?-u:\b)\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?(?-u:\b)Z?)",
        r"|(?P<ip>(?-u:\b)\d{1,3}(?:\.\d{1,3}){3}(?::\d{2,5})?(?-u:\b))",
        r"|(?P<ver>(?-u:\b)v\d+(?:\.\d+){1,3}(?:-[0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*)?(?-u:\b)|(?-u:\b)\d+\.\d+\.\d+(?:-[0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*)?(?-u:\b))",
        r"|(?P<ticket>(?-u:\b)[A-Z][A-Z0-9]{0,9}(?:-[A-Z][A-Z0-9]{0,9}){0,2}-\d{1,6}(?-u:\b))",
        r"|(?P<issue>#\d{1,7}(?-u:\b))",
        r"|(?P<hex>(?-u:\b)0x[0-9a-fA-F]{4,}(?-u:\b)|(?-u:\b)[0-9a-f]{7,40}(?-u:\b))",
        // Hosts, regions, zones, branch-like names: lowercase words joined by
        // `-` with a digit somewhere (`web-17`, `eu-west-3`); plain hyphenated
        // words are rejected in `classify_token`.
        r"|(?P<kebab>(?-u:\b)[a-z][a-z0-9]*(?:-[a-z0-9]+)+(?-u:\b))",
        // snake_case names: functions, config keys, tables.
        r"|(?P<snake>(?-u:\b)[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?-u:\b))",
        // SCREAMING_SNAKE codes and constants: `EXPORT_KMS_DENIED`.
        r"|(?P<usnake>(?-u:\b)[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+(?-u:\b))",
        // Names in capitals joined by `-`: datasets, models (`MBPP-Plus`,
        // `GPT-4o`); a capitalised hyphenated word is rejected in
        // `classify_token`.
        r"|(?P<caps>(?-u:\b)[A-Z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)+(?-u:\b))",
        // Letters and digits mixed: builds, instance types, short ids
        // (`b7000`, `m5xlarge`, `p99`).
        r"|(?P<alnum>(?-u:\b)[A-Za-z]+[0-9][A-Za-z0-9]*(?-u:\b))",
    ))
});

/// A number that a sentence names (`port 18443`, `at most 3 retries`,
/// `timeout of 45`, `最多3次`): such a sentence is a fact even without an
/// identifier.
pub(crate) static NAMED_NUMBER: LazyLock<Regex> = LazyLock::new(|| {
    re(&format!(
        r"(?i)(?:(?-u:\b)(?:port|ports|timeout|timeouts|retries|retry|attempts|limit|quota|sla|replicas|workers|threads|budget|deadline|version|at most|at least|up to|no more than|maximum|minimum|max|min)(?-u:\b)|{})[^.\n。]{{0,24}}?(?-u:\b)\d",
        lang::alternation(lang::NAMED_NUMBER)
    ))
});

/// Numbers of four digits or more (ports, ids, amounts): mentioned in prose,
/// they make the tool rows that carry them salient.
pub(crate) static LONG_NUMBER: LazyLock<Regex> = LazyLock::new(|| re(r"(?-u:\b)\d{4,}(?-u:\b)"));

/// A place in a file: "line 195", "Lines 341-343". A sentence that points
/// there says where something is ("Line 473-478 is interesting!").
pub(crate) static LINE_REF: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)(?-u:\b)lines?\s+\d+(?:\s*[-–]\s*\d+)?(?-u:\b)"));

/// Numbers with units: money, percentages, durations, sizes, rates,
/// temperatures; in English, in the other languages' words (`3 Stunden`)
/// and in CJK units written right after the number (`40个小时`, `880元`).
pub(crate) static QUANTITY: LazyLock<Regex> = LazyLock::new(|| {
    re(&format!(
        "{}{}{}{}|(?i:(?-u:\\b)\\d[\\d,]*(?:\\.\\d+)?\\s?(?:{}))",
        r"[$€£]\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:[kKmMbB]|million|billion)(?-u:\b))?",
        r"|(?-u:\b)\d[\d,]*(?:\.\d+)?(?:%",
        r"|\s?(?:ms|µs|us|ns|sec|secs|seconds?|s|mins?|minutes?|hrs?|hours?|h|days?|weeks?|months?|years?|[KMGTPE]i?B|kB|bytes|[kKMG]bps|tokens|req/s|rps|qps|ops/s|GHz|MHz|vCPUs?|cores|USD|EUR|GBP|°[CF]|mg|kg|km|m)(?-u:\b)",
        r"|(?:[CFxkKM])(?-u:\b))",
        lang::alternation(lang::UNITS),
    ))
});

/// A calendar date (`2025-05-12`, `12/05/2025`, `2025年5月12日`, `5月12日`):
/// a deadline or a delivery day is a fact in any language. Not an
/// identifier: log timestamps would make every line of that day salient.
pub(crate) static DATE: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"(?-u:\b)\d{4}-\d{2}-\d{2}(?-u:\b)",
        r"|(?-u:\b)\d{1,2}/\d{1,2}/\d{4}(?-u:\b)",
        r"|\d{4}年\d{1,2}月(?:\d{1,2}[日号])?|\d{1,2}月\d{1,2}[日号]",
    ))
});

/// A quoted value (`'backslashreplace'`, `"utf-8"`): a literal the text is
/// about, in any language.
pub(crate) static QUOTED: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?:^|[\s(\[=:,])(?:'[^'\s][^'\n]{0,40}?'|"[^"\s][^"\n]{0,40}?")(?:$|[\s).,;:\]])|“[^”\n]{1,40}”|「[^」\n]{1,40}」|«[^»\n]{1,40}»"#,
    )
});
pub(crate) static BACKTICK: LazyLock<Regex> = LazyLock::new(|| re(r"`([^`\n]{1,80})`"));
pub(crate) static CALL: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?-u:\b)[A-Za-z_][A-Za-z0-9_]*(?:(?:::|\.)[A-Za-z_][A-Za-z0-9_]*)*\(\)"));
pub(crate) static DECL: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?-u:\b)(?:fn|def|func|function|class|struct|enum|trait|interface)\s+([A-Za-z_][A-Za-z0-9_]*)",
    )
});
pub(crate) static SYMBOL: LazyLock<Regex> = LazyLock::new(|| {
    re(r"^[A-Za-z_][A-Za-z0-9_]*(?:(?:::|\.|#)[A-Za-z_][A-Za-z0-9_]*)*(?:\(\))?!?$")
});
pub(crate) static DIFF_FILE: LazyLock<Regex> =
    LazyLock::new(|| re(r"^(?:\+\+\+ b/|diff --git a/\S+ b/)(\S+)"));

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
    for re in [&*QUANTITY, &*LONG_NUMBER, &*BACKTICK, &*DATE] {
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
pub(crate) const NOT_TICKETS: &[&str] =
    &["UTF", "SHA", "ISO", "AES", "TLS", "HTTP", "UCS", "P", "X"];

/// Who is speaking: the people who set the task (user, system, developer)
/// or the agent narrating its own work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Voice {
    Principal,
    Agent,
    /// The agent thinking aloud beside its tool calls: a working note,
    /// not a reply to anyone. Its cue words set no rule and make no
    /// decision; what it found is a fact when it names what it is about.
    Working,
    /// The agent's reasoning, an item of its own (Responses): read like
    /// its replies, except that an intention it announces ("Let me find
    /// where `parse_token` is defined.") is not a fact.
    Thinking,
}

/// The kind of a sentence of unknown origin (a previous summary's line).
pub(crate) fn classify(sentence: &str) -> Option<Kind> {
    classify_as(sentence, Voice::Principal)
}

/// The kind of a prose sentence, by the cue words it contains; the order
/// decides a sentence with several cues (a constraint that also gives a reason
/// is kept as a constraint, the stickier kind).
pub(crate) fn classify_as(sentence: &str, voice: Voice) -> Option<Kind> {
    let constraint = match voice {
        Voice::Principal => &CONSTRAINT,
        Voice::Agent | Voice::Thinking => &STRONG_CONSTRAINT,
        Voice::Working => return None,
    };
    if constraint
        .find_iter(sentence)
        .any(|m| !describes(sentence, m.start(), m.end()))
    {
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

/// Whether the constraint cue at `start..end` of `sentence` describes
/// rather than rules (English): "only" or "never" before a verb in the
/// past or the third person ("I only noticed it", "the page only says",
/// "a code we never received"), "must" that guesses ("how frustrating this
/// must be", "it must have been"), and "don't" of someone's state ("I
/// don't have much technical knowledge", "we don't yet know"). "Only go to",
/// "never touch", "must stay", "please don't ask" still rule.
fn describes(sentence: &str, start: usize, end: usize) -> bool {
    let cue = sentence[start..end].to_ascii_lowercase();
    let before = sentence[..start].to_ascii_lowercase();
    let mut after = sentence[end..]
        .split(|c: char| !(c.is_ascii_alphabetic() || c == '\''))
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase);
    let next = after.next().unwrap_or_default();
    let next = if next == "yet" || next == "really" || next == "even" {
        after.next().unwrap_or_default()
    } else {
        next
    };
    let prev = before
        .split(|c: char| !(c.is_alphabetic() || c == '\''))
        .rfind(|w| !w.is_empty())
        .unwrap_or_default();
    // The words after the cue, lower-cased, for the other languages.
    let following: Vec<String> = sentence[end..]
        .split(|c: char| !c.is_alphabetic())
        .filter(|w| !w.is_empty())
        .take(4)
        .map(str::to_lowercase)
        .collect();
    let first_after = following.first().map_or("", String::as_str);
    match cue.as_str() {
        // Spanish: "solo dice", "nunca recibimos" (a verb said, not asked
        // for), "debe de ser" (a guess), "no sabemos".
        "solo" | "sólo" | "nunca" | "jamás" => {
            let w = first_after;
            [
                "imos", "amos", "ó", "é", "í", "aron", "ieron", "ado", "ido", "ía", "aba",
            ]
            .iter()
            .any(|e| w.len() > 3 && w.ends_with(e))
                || (cue.starts_with("s")
                    && [
                        "dice", "falla", "funciona", "muestra", "aparece", "es", "hay",
                    ]
                    .contains(&w))
        }
        "debe" | "deben" => {
            first_after == "de" || (first_after == "ser" && before.contains(" lo "))
        }
        // German: "sagt nur" (what a page says), "den wir nie erhalten
        // haben" (what happened), "wie frustrierend das sein muss" (a
        // guess), "ich muss mich melden" (the writer's own errand).
        "nur" => {
            prev.ends_with('t')
                && prev.chars().next().is_some_and(char::is_lowercase)
                && prev.len() > 3
        }
        "nie" | "niemals" => following.iter().any(|w| {
            [
                "haben", "hat", "habe", "hatte", "hatten", "ist", "sind", "war", "waren", "wurde",
                "wurden",
            ]
            .contains(&w.as_str())
        }),
        "muss" => {
            prev == "sein" || before.contains("wie ") || prev == "ich" && first_after == "mich"
        }
        // Chinese: 只说 / 只显示 (what a page says or shows), 设备要求
        // (what a device asked for), 让我…一定要 (what someone asked of
        // the writer), 只能 in a past scene (周四…只能用).
        "只能" => [
            "周一", "周二", "周三", "周四", "周五", "周六", "周日", "昨天", "上周",
        ]
        .iter()
        .any(|d| before.contains(d)),
        c if c.starts_with('只') => c.ends_with(['说', '显']),
        "要求" => {
            before.ends_with("设备")
                || before.ends_with("系统")
                || sentence[end..].starts_with("输入")
        }
        "一定要" => before.contains("让我"),
        "only" | "never" => {
            let stem = next.trim_end_matches('\'');
            (stem.len() > 3
                && (stem.ends_with("ed") || stem.ends_with('s') && !stem.ends_with("ss")))
                || [
                    "got", "had", "was", "were", "said", "saw", "knew", "sent", "took", "did",
                ]
                .contains(&stem)
        }
        "must" => {
            next == "have"
                || before.trim_end().ends_with("how")
                || before.contains("how ") && next == "be"
        }
        "don't" | "do not" | "dont" => {
            let subject = before.trim_end();
            (subject.ends_with(" i")
                || subject == "i"
                || subject.ends_with(" we")
                || subject == "we")
                && [
                    "have",
                    "know",
                    "see",
                    "understand",
                    "think",
                    "remember",
                    "mind",
                    "recall",
                    "believe",
                    "get",
                    "seem",
                ]
                .contains(&next.as_str())
        }
        _ => false,
    }
}

pub(crate) fn is_error(line: &str) -> bool {
    if !ERROR.is_match(line) {
        return false;
    }
    if !NOT_ERROR.is_match(line) {
        return true;
    }
    ERROR.is_match(&NOT_ERROR.replace_all(line, ""))
}

/// A date or a timestamp (`2023-08-15`, `2025-10-09T23:49:00Z`): the
/// `date` alternative of [`TOKEN`].
pub(crate) fn is_date(token: &str) -> bool {
    let b = token.as_bytes();
    b.len() >= 10 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-' && b[7] == b'-'
}

/// Validates a raw token match and says what it is; `None` for false
/// positives the regex alone cannot exclude (no lookbehind in `regex`).
pub(crate) fn classify_token<'t>(
    hay: &str,
    start: usize,
    end: usize,
    raw: &'t str,
) -> Option<(Kind, &'t str)> {
    let token = raw.trim_end_matches(['.', ',', ';', ':', '!', '?', ')', ']', '\'', '"']);
    if token.is_empty() || token == "/dev/null" {
        return None;
    }
    if token.starts_with("arXiv:") || (token.starts_with("10.") && token.contains('/')) {
        return Some((Kind::Entity, token));
    }
    if is_date(token) {
        return Some((Kind::Entity, token));
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
        return slashed_kind(token, called, prev).map(|k| (k, token));
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
    name_kind(hay, start, end, token, prev).map(|k| (k, token))
}

/// What a token with a slash is: a path, a branch, or nothing (`km/h`,
/// a slash glued to a word, a call).
fn slashed_kind(token: &str, called: bool, prev: Option<char>) -> Option<Kind> {
    let first = token.as_bytes()[0];
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
            .then_some(Kind::File);
    }
    let last = token.rsplit('/').next().unwrap_or("");
    let has_ext = last.rsplit_once('.').is_some_and(|(stem, ext)| {
        !stem.is_empty() && (1..=10).contains(&ext.len()) && ext.as_bytes()[0].is_ascii_alphabetic()
    });
    let slashes = token.matches('/').count();
    let lettered = token.bytes().any(|b| b.is_ascii_alphabetic());
    if lettered && (has_ext || token.ends_with('/') || slashes >= 2) {
        return Some(Kind::File);
    }
    // A branch: `fix/webhook-quota`, `feature/login`.
    is_branch(token).then_some(Kind::Entity)
}

/// What a token that is no path, URL or file name is: a ticket, a name, a
/// hash, or a word of German prose (nothing).
fn name_kind(hay: &str, start: usize, end: usize, token: &str, prev: Option<char>) -> Option<Kind> {
    let first = token.as_bytes()[0];
    if first == b'#' {
        return prev
            .is_none_or(|c| !(c.is_alphanumeric() || c == '&' || c == '#'))
            .then_some(Kind::Entity);
    }
    // In German text, `E-Mail`, `USB-Stick`, `Support-Team` are nouns
    // (German capitalises them), not names like `MBPP-Plus`.
    if first.is_ascii_uppercase() && lang::is_capitalised_compound(token) {
        let from = floor_boundary(hay, start.saturating_sub(100));
        let to = floor_boundary(hay, end + 100);
        if lang::reads_german(&hay[from..to]) {
            return None;
        }
    }
    if let Some((prefix, number)) = token.rsplit_once('-')
        && prefix
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'-')
        && token.len() < 24
        && !token.contains('.')
    {
        let letters = prefix.bytes().filter(u8::is_ascii_alphabetic).count();
        // `Q-30355`: one letter is a prefix when a long number follows.
        let numbered = number.len() >= 3 && number.bytes().all(|b| b.is_ascii_digit());
        return ((letters >= 2 || letters == 1 && numbered) && !NOT_TICKETS.contains(&prefix))
            .then_some(Kind::Entity);
    }
    // `MBPP-Plus`, `GPT-4o`: a name; `Read-only`: a word.
    if first.is_ascii_uppercase() && token.contains('-') && !token.contains(['/', '.', '@']) {
        let capitals = token.bytes().filter(u8::is_ascii_uppercase).count();
        return (capitals >= 2 || token.bytes().any(|b| b.is_ascii_digit()))
            .then_some(Kind::Entity);
    }
    if token.bytes().all(|b| b.is_ascii_hexdigit()) && token.len() >= 7 {
        let letters = token.bytes().any(|b| b.is_ascii_alphabetic());
        let digits = token.bytes().any(|b| b.is_ascii_digit());
        return (letters && digits).then_some(Kind::Entity);
    }
    Some(Kind::Entity)
}

/// APIs mentioned in a prose sentence: backticked symbols and `name()` calls.
pub(crate) fn scan_apis(sentence: &str) -> Vec<String> {
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
    // Names of code written without backticks: `textwrap.fill`,
    // `self.bases`, `DjangoHelpFormatter`, `lookupValue`.
    for m in CODE_NAME.find_iter(sentence) {
        let name = m.as_str().trim_end_matches('.');
        if is_code_name(name) && !out.iter().any(|a| a.contains(name)) {
            out.push(name.to_owned());
        }
    }
    out
}

/// A word that may be a name of code: dotted, or with a capital inside.
static CODE_NAME: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?-u:\b)[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+(?-u:\b)|(?-u:\b)[A-Za-z][a-z0-9]+(?:[A-Z][a-z0-9]+)+(?-u:\b)",
    )
});

/// Top-level domains and abbreviations a dotted word may end with that
/// make it a host or an abbreviation, not code (`example.com`, `e.g`).
const NOT_CODE_ENDS: &[&str] = &[
    "com",
    "org",
    "net",
    "io",
    "dev",
    "ai",
    "co",
    "uk",
    "de",
    "fr",
    "es",
    "eu",
    "us",
    "cn",
    "jp",
    "info",
    "biz",
    "app",
    "cloud",
    "example",
    "internal",
    "local",
    "localhost",
    "g",
    "e",
];

/// Whether a [`CODE_NAME`] match reads as code: a dotted name whose parts
/// are not a file's extension or a domain, or a word with a capital inside
/// it (not a product name in capitals like `HX-200`, which has none).
fn is_code_name(name: &str) -> bool {
    if let Some((_, last)) = name.rsplit_once('.') {
        let ext = TOKEN
            .find(name)
            .is_some_and(|m| m.start() == 0 && m.end() == name.len());
        return !ext
            && name.len() >= 5
            && !NOT_CODE_ENDS.contains(&last.to_ascii_lowercase().as_str())
            && !name
                .split('.')
                .any(|p| p.bytes().all(|b| b.is_ascii_digit()));
    }
    name.len() >= 6
}

/// Splits a line into sentences at `. `, `? `, `! ` followed by something that
/// starts a sentence (abbreviations and versions stay whole), and after a
/// CJK full stop or mark (`。！？；`, which need no space after them: a
/// Chinese paragraph is many sentences) or the sentence end of another
/// script (`।`, `؟`), with the quote or bracket that closes it.
pub(crate) fn split_sentences(line: &str) -> Vec<&str> {
    // Most tool output is ASCII lines with no `. ` / `? ` / `! ` in them
    // (code, paths, log records): one sentence, without the walk below.
    if line.is_ascii()
        && !line
            .as_bytes()
            .windows(2)
            .any(|w| matches!(w[0], b'.' | b'?' | b'!') && w[1] == b' ')
    {
        return if line.is_empty() {
            Vec::new()
        } else {
            vec![line]
        };
    }
    split_sentences_walk(line)
}

/// [`split_sentences`] the long way, character by character.
fn split_sentences_walk(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = line.char_indices().peekable();
    let mut prev: Option<char> = None;
    while let Some((i, c)) = chars.next() {
        let ascii_end = matches!(c, '.' | '?' | '!');
        if lang::is_terminator(c)
            || (ascii_end
                && chars.peek().is_some_and(|&(_, n)| lang::is_cjk_letter(n))
                && (c != '.' || prev.is_some_and(lang::is_cjk_letter)))
        {
            // `。」`: the closing quote belongs to the sentence it closes.
            let mut end = i + c.len_utf8();
            while let Some(&(j, n)) = chars.peek() {
                if !(lang::is_closer(n) || lang::is_terminator(n)) {
                    break;
                }
                end = j + n.len_utf8();
                chars.next();
            }
            if !line[start..end].trim().is_empty() {
                out.push(line[start..end].trim_start());
            }
            start = end;
            // The spaces after it start nothing.
            while let Some(&(j, n)) = chars.peek() {
                if !n.is_whitespace() {
                    break;
                }
                start = j + n.len_utf8();
                chars.next();
            }
            prev = Some(c);
            continue;
        }
        if ascii_end && line[i + 1..].starts_with(' ') {
            let Some(next) = line[i + 2..].chars().next() else {
                break;
            };
            // A lowercase start still ends a sentence after a full word
            // (`passed. and then`), never after an abbreviation.
            let word: String = line[..i]
                .rsplit(|ch: char| !ch.is_alphabetic())
                .next()
                .unwrap_or("")
                .to_lowercase();
            let known_abbrev = ABBREVIATIONS.contains(&word.as_str());
            let starts = lang::opens_sentence(next)
                || (c == '.' && next.is_lowercase() && word.chars().count() >= 3 && !known_abbrev);
            // `e.g. Foo`, `J. Smith`: a one-letter word before the dot is an
            // abbreviation or an initial; `4.3.0. Next` is a sentence end.
            let abbrev = c == '.'
                && prev.is_some_and(char::is_alphabetic)
                && line[..i]
                    .chars()
                    .rev()
                    .nth(1)
                    .is_none_or(|p| !p.is_alphanumeric());
            if starts && !abbrev {
                out.push(&line[start..=i]);
                start = i + 2;
                // Skip the space.
                chars.next();
                prev = Some(' ');
                continue;
            }
        }
        prev = Some(c);
    }
    if start < line.len() {
        out.push(&line[start..]);
    }
    out
}

/// Words that end with a dot without ending a sentence.
pub(crate) const ABBREVIATIONS: &[&str] = &[
    "etc", "vs", "approx", "incl", "excl", "esp", "resp", "cf", "fig", "eq", "no", "nos", "vol",
    "min", "max", "sec", "secs", "est", "dept", "inc", "ltd", "corp", "mr", "mrs", "ms", "dr",
    "prof", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
    // Spanish, German, French.
    "sr", "sra", "srta", "dra", "av", "pág", "bzw", "usw", "vgl", "ca", "nr", "str", "mme", "mlle",
    "env",
];

/// Removes list markers and quote markers, which are layout, not content.
pub(crate) fn strip_marker(s: &str) -> &str {
    let s = s.trim();
    let s = s.trim_start_matches('>').trim_start();
    for marker in ["- [ ] ", "- [x] ", "- ", "* ", "• ", "・"] {
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

/// `s` cut to at most `max` bytes by taking out its middle (`head…tail`):
/// what ends a command (the test it names, the file it runs) matters as much
/// as how it starts.
pub(crate) fn clip_middle(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let half = max.saturating_sub(3) / 2;
    let head = floor_boundary(s, half);
    let mut tail = s.len() - half;
    while tail < s.len() && !s.is_char_boundary(tail) {
        tail += 1;
    }
    format!("{}…{}", s[..head].trim_end(), s[tail..].trim_start())
}

/// A window of at most `max` bytes of `line` showing byte offset `at`, with
/// `…` where it was cut.
pub(crate) fn window(line: &str, at: usize, max: usize) -> String {
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

/// Every identifier token of `text`: (byte start, kind, token).
pub(crate) fn identifiers(text: &str) -> impl Iterator<Item = (usize, Kind, &str)> {
    TOKEN.find_iter(text).filter_map(move |m| {
        classify_token(text, m.start(), m.end(), m.as_str()).map(|(k, t)| (m.start(), k, t))
    })
}

/// Leading words that organise a conversation without stating anything
/// ("Also,", "To recap,", "Note that"): a fact reads the same without them.
const DISCOURSE: &[&str] = &[
    "also",
    "important",
    "fyi",
    "one more thing",
    "note that",
    "note",
    "noted",
    "to recap",
    "recap",
    "for the record",
    "keep in mind",
    "note to self",
    "relevant here",
    "btw",
    "by the way",
    "heads up",
    "reminder",
    "just so you know",
    "as discussed",
    "as agreed",
    "ok so",
    "ok",
    "okay",
    "so",
    "and",
    "plus",
    "update",
    "change of plan",
    "scratch that",
    "actually",
    "in short",
    "to be clear",
    "for context",
];

/// `s` without its leading discourse markers (at most three), in English
/// or another language (`Además,`, `Übrigens,`, `另外，`).
pub(crate) fn strip_discourse(s: &str) -> &str {
    let mut s = s.trim_start();
    for _ in 0..3 {
        let lower = s[..floor_boundary(s, 24)].to_lowercase();
        // Lower-casing can change a prefix's length (`İ`): the cut is only
        // taken from the original when the two agree byte for byte.
        let Some(rest) = DISCOURSE.iter().chain(lang::DISCOURSE).find_map(|m| {
            let after = lower.strip_prefix(m)?;
            let sep = after.chars().next()?;
            // "Note that x", "Also, x", "Important: x"; never "Also-ran".
            let cut = match sep {
                ',' | ':' | '，' | '：' | '、' => m.len() + sep.len_utf8(),
                ' ' if m.ends_with("that") => m.len(),
                _ => return None,
            };
            s.get(..m.len())
                .is_some_and(|head| head.to_lowercase() == *m)
                .then(|| s.get(cut..))
                .flatten()
        }) else {
            break;
        };
        let rest = rest.trim_start();
        if word_count(rest) < 2 {
            break;
        }
        s = rest;
    }
    s
}

/// A message that speaks of the model's last output: "your last reply",
/// "you did not call", "no tool calls found".
static ADDRESSES_LAST_OUTPUT: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"(?i)(?-u:\b)(?:your (?:last|previous|prior) (?:reply|response|output|message|answer|turn|tool ?call|function ?call|action|command)",
        r"|you did(?:n't| not) (?:use|call|include|provide|contain|make|return)",
        r"|no (?:tool|function) ?calls? (?:was |were )?(?:found|detected|provided|made)",
        r"|did(?:n't| not) (?:contain|include|use|make) (?:a|any|exactly one) (?:tool|function) ?call)",
    ))
});
/// The agent protocol: tool calls, their arguments, the reply's format.
static PROTOCOL: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(?-u:\b)(?:tool ?calls?|tool_calls?|function ?calls?|arguments?|json|format(?:ted|ting)?|actions?|commands?)(?-u:\b)",
    )
});
/// A message that opens with an error label about the protocol:
/// "Tool call error:", "Format error:", "Error parsing tool call …".
static PROTOCOL_ERROR_HEAD: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^\s*(?:(?:tool ?call|function ?call|format|formatting|parse|parsing|syntax|output)\s+error\b|error (?:parsing|in) (?:the |your )?(?:tool|function|action|output|response))",
    )
});
/// A harness telling the model to keep going, with nothing new to do.
static KEEP_GOING: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)^\s*please continue (?:working )?on the task\b"));

/// Whether a user message is the agent framework speaking rather than the
/// person who set the task: a complaint about the model's last output
/// ("Your last reply did not contain a tool call", "Tool call error: …
/// not valid JSON") or a bare "please continue". Such a message is neither
/// a request nor a source of facts; the task and what the agent did are.
pub(crate) fn is_framework_nudge(text: &str) -> bool {
    let protocol = || PROTOCOL.is_match(text);
    (ADDRESSES_LAST_OUTPUT.is_match(text) && protocol())
        || (PROTOCOL_ERROR_HEAD.is_match(text) && protocol())
        || KEEP_GOING.is_match(text)
}

/// What an agent says before it acts: "Let me look at `related.py`:",
/// "Now I'll run the tests." An intention names what it is about to read,
/// not what it found, and the trail records what it then did.
pub(crate) fn is_narration(sentence: &str) -> bool {
    let t = sentence.trim();
    if t.ends_with(':') || t.ends_with('：') {
        return true;
    }
    let lower = without_leads(t);
    NARRATION_OPENERS
        .iter()
        .chain(lang::NARRATION_OPENERS)
        .any(|o| {
            lower
                .strip_prefix(o)
                .is_some_and(|rest| rest.is_empty() || ends_word(o) || rest.starts_with([' ', ',']))
        })
}

/// `sentence` lower-cased, without the words an agent opens with ("Now,",
/// "Wait,", "So") before what it means.
fn without_leads(sentence: &str) -> String {
    let mut lower = sentence.trim().to_lowercase();
    for _ in 0..2 {
        let trimmed = NARRATION_LEADS
            .iter()
            .find_map(|lead| {
                lower
                    .strip_prefix(lead)
                    .filter(|rest| rest.is_empty() || rest.starts_with([',', '!', '.', ' ']))
            })
            .map(|rest| rest.trim_start_matches([',', '!', '.', ' ']).to_owned());
        match trimmed {
            Some(rest) => lower = rest,
            None => break,
        }
    }
    lower
}

/// Whether an agent's working note is a plan or a guess rather than a
/// finding: "We'll replace persist_tree.", "Now create test.sql with the
/// arrow.", "If encoding_config is \"autodetect\"…", "That likely means
/// they answered 'y'." What it then did is in the trail, and a guess is
/// not what it found; "get_encoding returns the encoding string" is.
pub(crate) fn is_plan(sentence: &str) -> bool {
    let lower = without_leads(sentence);
    let opens = |list: &[&str]| {
        list.iter().any(|o| {
            lower
                .strip_prefix(o)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', ',', ':']))
        })
    };
    if opens(PLAN_OPENERS) || opens(IMPERATIVES) || opens(lang::NARRATION_OPENERS) {
        return true;
    }
    // A fragment ("that's still 'O'") says too little to stand alone.
    if word_count(&lower) < 4 {
        return true;
    }
    HEDGE.is_match(&lower)
}

/// How an agent opens a plan or a branch of one.
const PLAN_OPENERS: &[&str] = &[
    "we'll",
    "we will",
    "we need",
    "we should",
    "we can",
    "we could",
    "we must",
    "we have to",
    "we want",
    "we'd",
    "we may",
    "we might",
    "we also need",
    "i need",
    "i should",
    "i can",
    "i must",
    "i have to",
    "i'll",
    "need to",
    "to fix",
    "to do",
    "to test",
    "to handle",
    "the plan",
    "plan",
    "if",
    "else",
    "otherwise",
    "in that case",
    "for example",
    "e.g.",
    "instead",
    "alternatively",
    "either",
    "one option",
    "another option",
    "option",
];

/// Verbs an agent's instruction to itself opens with ("Create a test.",
/// "Use linter_logger instead.").
const IMPERATIVES: &[&str] = &[
    "add",
    "apply",
    "call",
    "change",
    "check",
    "compute",
    "convert",
    "create",
    "define",
    "delete",
    "determine",
    "edit",
    "ensure",
    "find",
    "fix",
    "get",
    "handle",
    "implement",
    "import",
    "insert",
    "install",
    "keep",
    "look",
    "make",
    "modify",
    "move",
    "open",
    "print",
    "read",
    "remove",
    "rename",
    "replace",
    "restore",
    "return",
    "revert",
    "run",
    "save",
    "search",
    "see",
    "set",
    "test",
    "try",
    "update",
    "use",
    "verify",
    "wrap",
    "write",
];

/// Words that make a note a guess.
static HEDGE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?-u:\b)(?:likely|probably|possibly|perhaps|maybe|might|i think|i guess|i suspect|presumably|should (?:be|work|trigger|fix|pass)|would (?:be|work)|could be|seems? to|assume|suppose)(?-u:\b)",
    )
});

/// Whether a phrase ends where a word may end without a space after it
/// (its last character is CJK or punctuation, as in `请`, `¿`).
fn ends_word(phrase: &str) -> bool {
    phrase
        .chars()
        .next_back()
        .is_some_and(|c| lang::is_cjk(c) || !c.is_alphanumeric())
}

/// Words an agent's sentence may start with before its intention.
const NARRATION_LEADS: &[&str] = &[
    "now",
    "first",
    "next",
    "then",
    "great",
    "perfect",
    "good",
    "ok",
    "okay",
    "alright",
    "so",
    "finally",
    "also",
    "excellent",
    "interesting",
    "hmm",
    "well",
    "wait",
    "actually",
    "but",
    "hold on",
    "oh",
    "ah",
    "right",
];

/// How an agent announces what it is about to do.
const NARRATION_OPENERS: &[&str] = &[
    "let me",
    "let's",
    "lets",
    "i'll",
    "i will",
    "i'm going to",
    "i am going to",
    "i want to",
    "i'd like to",
    "i'll now",
    "time to",
];

/// Words that open a request or a question rather than a statement.
const REQUEST_OPENERS: &[&str] = &[
    "please",
    "can you",
    "could you",
    "would you",
    "will you",
    "can we",
    "could we",
    "let's",
    "lets",
    "let us",
    "pls",
    "kindly",
    "help me",
    "i need you to",
    "i'd like you to",
    "have a look",
    "take a look",
    "check whether",
    "check if",
    "why",
    "what",
    "how",
    "where",
    "when",
    "who",
    "which",
];

static PLEASE: LazyLock<Regex> = LazyLock::new(|| {
    re(&format!(
        r"(?i)(?-u:\b)(?:please|pls|kindly)(?-u:\b)|{}",
        lang::alternation(lang::PLEASE)
    ))
});

/// Whether a sentence of the user's asks for something (a question, or an
/// imperative opened by "please", "can you", "let's", "por favor",
/// "könnten Sie", "请"…) rather than states it.
pub(crate) fn is_request(sentence: &str) -> bool {
    let s = strip_discourse(sentence).trim();
    if s.ends_with(['?', '？', '؟']) || PLEASE.is_match(s) {
        return true;
    }
    // "Round 3: can you…": a label before the request.
    let s = match s.split_once(": ").or_else(|| s.split_once('：')) {
        Some((label, rest)) if word_count(label) <= 3 => rest.trim_start(),
        _ => s,
    };
    let lower = s[..floor_boundary(s, 24)].to_lowercase();
    REQUEST_OPENERS
        .iter()
        .chain(lang::REQUEST_OPENERS)
        .any(|o| {
            lower
                .strip_prefix(o)
                .is_some_and(|rest| ends_word(o) || rest.starts_with([' ', ',']))
        })
}

/// How an English clause that only greets, thanks, apologises or signs off
/// opens; the other languages' openers are `lang::COURTESY`.
const EN_COURTESY: &str = concat!(
    r"(?:hi|hello|hey|dear|greetings|good (?:morning|afternoon|evening|day)",
    r"|(?:many |a lot of )?thanks|thank you|thx|cheers|goodbye|bye",
    r"|(?:i'm |i am |we're |we are )?(?:so |very |really |terribly )?sorry|(?:my )?apologies",
    r"|(?:best|kind|warm|many) regards|regards|best wishes|all the best|sincerely",
    r"|(?:i|we) look forward|looking forward|have a (?:good|nice|great|lovely)",
    r"|i hope (?:you can help|this helps|you're well|you are well|you're doing well|all is well|this gives you)",
    r"|hope (?:you're|you are|this helps|that helps))(?-u:\b)",
);

static COURTESY: LazyLock<Regex> = LazyLock::new(|| {
    re(&format!(
        r"(?i)^(?:(?:and|but|also|so|again|once again|oh)\s+)?(?:{EN_COURTESY}|{})",
        lang::alternation(lang::COURTESY)
    ))
});

/// A clause of courtesy is short: "thanks for getting back to me so
/// quickly", not a paragraph that opens with "thanks".
const MAX_COURTESY_WORDS: usize = 12;

/// Whether a sentence of a message only greets, thanks, apologises or signs
/// off ("Hello again, and thank you for the quick reply yesterday.", "Sorry
/// for the long message.", "I look forward to your answer."): every clause
/// of it is courtesy, and it names nothing (no digit, address, path or
/// code). What a message asks is the rest of it.
pub(crate) fn is_courtesy(sentence: &str) -> bool {
    let s = sentence.trim();
    if s.is_empty() || s.contains(|c: char| c.is_ascii_digit() || matches!(c, '@' | '/' | '`')) {
        return false;
    }
    s.split([',', '，', '、', ';', '；', '!', '！', '。', '?', '？'])
        .map(|c| c.trim().trim_end_matches(['.', '…']))
        .filter(|c| !c.is_empty())
        .all(|c| word_count(c) <= MAX_COURTESY_WORDS && COURTESY.is_match(c))
}

/// A log line's leading timestamp (`2025-03-14T13:53:31.109Z`,
/// `[2025-03-14 13:53:31,109]`, `Mar 14 13:53:31`).
static TIMESTAMP: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"^\[?(?:\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?",
        r"|[A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2})\]?\s*",
    ))
});

/// `line` without a leading timestamp: the time says when, not what.
pub(crate) fn strip_timestamp(line: &str) -> &str {
    match TIMESTAMP.find(line) {
        Some(m) if m.end() < line.len() => &line[m.end()..],
        _ => line,
    }
}

/// The label of a tool fact: `[name] `, or `[name @N] ` when the agent's
/// step the output came at is known (docs/design.md §12): the tool and
/// the step, so a quoted fact says where it came from. `@N` and not
/// `, step N`: two tokens a line instead of four, and a summary at an 8k
/// window quotes dozens of tool lines (docs/performance.md).
pub(crate) fn tool_label(name: Option<&str>, step: Option<u32>) -> String {
    let name = name
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .unwrap_or("tool");
    match step {
        Some(n) => format!("[{name} @{n}] "),
        None => format!("[{name}] "),
    }
}

/// The tool name of a `[name] ` or `[name @N] ` label (the label
/// itself when it is neither).
pub(crate) fn label_name(label: &str) -> &str {
    let Some(inner) = label
        .trim_end()
        .strip_prefix('[')
        .and_then(|l| l.strip_suffix(']'))
    else {
        return label;
    };
    match inner.rsplit_once(" @") {
        Some((name, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => inner,
    }
}

/// The `[tool] ` label of a tool fact and the rest.
pub(crate) fn split_label(text: &str) -> (&str, &str) {
    if text.starts_with('[')
        && let Some(end) = text.find("] ")
    {
        return text.split_at(end + 2);
    }
    ("", text)
}

/// The first word of a branch name by convention.
const BRANCH_PREFIXES: &[&str] = &[
    "feature", "feat", "fix", "hotfix", "bugfix", "release", "chore", "refactor", "docs", "dev",
    "test", "exp", "wip",
];

/// A one-slash token that reads as a branch: a conventional prefix, or a
/// name with `-`, `_` or a digit after the slash (`and/or`, `km/h` are not).
fn is_branch(token: &str) -> bool {
    let Some((head, tail)) = token.trim_end_matches('/').split_once('/') else {
        return false;
    };
    let word = |s: &str| {
        s.len() >= 2
            && s.bytes().any(|b| b.is_ascii_alphabetic())
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    };
    if !word(head) || !word(tail) || tail.contains('/') {
        return false;
    }
    BRANCH_PREFIXES.contains(&head.to_ascii_lowercase().as_str())
        || tail
            .bytes()
            .any(|b| matches!(b, b'-' | b'_') || b.is_ascii_digit())
}

/// What a later statement says it replaces: `instead of X`, `rather than
/// X`, `replacing the earlier X`, `switching from X`, `(not X)`. A number
/// keeps the word after it (`208 connections`).
static REPLACES: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(?:instead of|rather than|replacing(?: the)?(?: earlier| old| previous| former)?|replaces(?: the)?|switch(?:ed|ing)? (?:away )?from|\(not|no longer(?: use| using)?)\s+([A-Za-z0-9][\w./:@+%-]*(?:\s+[A-Za-z][\w-]*)?)",
    )
});
/// The same in other languages, the value after the marker (`en lugar de
/// X`, `statt X`, `au lieu de X`, `而不是X`).
static REPLACES_BEFORE_VALUE: LazyLock<Regex> = LazyLock::new(|| re(lang::REPLACES_BEFORE_VALUE));
/// The value before or inside the marker (`不用X了`, `Xではなく`).
static REPLACES_AROUND_VALUE: LazyLock<Regex> = LazyLock::new(|| re(lang::REPLACES_AROUND_VALUE));

/// The values a statement says it replaces, each a string an earlier
/// statement that held it contains: English as it is said (`instead of
/// Flagsmith`); in other languages what names the value in the words after
/// (or, in Chinese and Japanese, around) the marker: its identifiers, else
/// its name in capitals (`statt des Tarifs Team Plus` → `Team Plus`), else
/// its first word, else a short CJK phrase.
pub(crate) fn replaced_values(text: &str) -> Vec<String> {
    let mut out: Vec<String> = REPLACES
        .captures_iter(text)
        .filter_map(|c| c.get(1))
        .map(|m| {
            m.as_str()
                .trim_end_matches(['.', ',', ')', ';', ':'])
                .to_owned()
        })
        .collect();
    for c in REPLACES_BEFORE_VALUE.captures_iter(text) {
        if let Some(m) = c.get(1) {
            out.extend(value_candidates(m.as_str()));
        }
    }
    for c in REPLACES_AROUND_VALUE.captures_iter(text) {
        for m in c.iter().skip(1).flatten() {
            out.extend(value_candidates(m.as_str()));
        }
    }
    out.retain(|v| v.len() >= 2);
    out.dedup();
    out
}

/// What names a replaced value in the words that hold it (see
/// [`replaced_values`]).
fn value_candidates(region: &str) -> Vec<String> {
    let region = region.trim();
    let ids: Vec<String> = identifiers(region).map(|(_, _, t)| t.to_owned()).collect();
    if !ids.is_empty() {
        return ids;
    }
    // The words in other scripts than CJK, articles left out.
    let words: Vec<&str> = region
        .split(|c: char| c.is_whitespace() || lang::is_cjk(c))
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|w| !w.is_empty())
        .skip_while(|w| lang::ARTICLES.contains(&w.to_lowercase().as_str()))
        .collect();
    let capital = |w: &&str| {
        w.chars()
            .next()
            .is_some_and(|c| c.is_uppercase() || c.is_ascii_digit())
    };
    let run: Vec<&str> = words
        .iter()
        .copied()
        .skip_while(|w| !capital(w))
        .take_while(|w| capital(w))
        .collect();
    if !run.is_empty() {
        // `Tarifs Team Plus`: a German noun may lead the name; its
        // suffixes of two words or more are the candidates.
        let least = run.len().min(2);
        return (0..=run.len() - least)
            .map(|i| run[i..].join(" "))
            .collect();
    }
    if let Some(w) = words.first().filter(|w| w.chars().count() >= 3) {
        return vec![(*w).to_owned()];
    }
    let cjk: String = region
        .chars()
        .take_while(|&c| lang::is_cjk_letter(c))
        .collect();
    if (2..=8).contains(&cjk.chars().count()) {
        return vec![cjk];
    }
    Vec::new()
}

/// The key form of a sentence written without spaces (see `forms::key`):
/// its clauses (cut at `，、；：`) that hold a cue, an identifier, a
/// quantity or a number, or open with a negation (`不用X了`), the others
/// elided as `…`. Cut at characters, never inside one.
pub(crate) fn cjk_key(s: &str) -> String {
    let spans = key_spans(s);
    let mut clauses: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let ascii_cut = matches!(c, ',' | ';')
            && chars
                .peek()
                .is_some_and(|&(_, n)| n.is_whitespace() || lang::is_cjk_letter(n));
        if matches!(c, '，' | '、' | '；' | '：') || ascii_cut {
            let end = i + c.len_utf8();
            clauses.push((start, end));
            start = end;
        }
    }
    if start < s.len() {
        clauses.push((start, s.len()));
    }
    let keep: Vec<bool> = clauses
        .iter()
        .map(|&(a, b)| {
            let text = s[a..b].trim_start();
            spans.iter().any(|&(x, y)| x < b && a < y)
                || text.bytes().any(|b| b.is_ascii_digit())
                || text.starts_with(lang::CJK_NEGATIONS)
        })
        .collect();
    if !keep.contains(&true) {
        return clip(s, 100);
    }
    let mut out = String::with_capacity(s.len());
    let mut gap = false;
    for (i, &(a, b)) in clauses.iter().enumerate() {
        if !keep[i] {
            gap = true;
            continue;
        }
        if gap && !out.is_empty() {
            out.push('…');
        }
        let text = s[a..b].trim();
        // A clause before an elided one loses its comma to the `…`.
        let next_kept = keep.get(i + 1).copied().unwrap_or(true);
        if next_kept {
            out.push_str(text);
        } else {
            out.push_str(text.trim_end_matches(['，', '、', '；', '：', ',', ';']));
        }
        gap = false;
    }
    if gap {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frameworks_complaint_about_the_last_output_is_a_nudge_and_a_request_is_not() {
        for nudge in [
            "Your last reply did not contain a tool call. Reply with exactly one tool call.",
            "Tool call error:\n\n<error>\nError parsing tool call arguments: Expecting ':' delimiter\n</error>",
            "No tool calls found in the response. Every response MUST include at least one tool call.",
            "Your last output did not use any tool calls! Please make sure your output includes exactly _ONE_ function call!",
            "Please continue working on the task on whatever approach you think is suitable.",
            "Format error: your previous response had no action in triple backticks.",
        ] {
            assert!(is_framework_nudge(nudge), "{nudge}");
        }
        for request in [
            "Fix the tool call parser: it fails on arguments that are not valid JSON.",
            "The JSON format of the export changed; can you update the reader?",
            "Please continue with the migration once the tests pass.",
            "Error handling in the CLI swallows the exit code, please fix it.",
        ] {
            assert!(!is_framework_nudge(request), "{request}");
        }
    }

    #[test]
    fn names_of_code_are_found_without_backticks_and_hosts_and_files_are_not() {
        let apis = scan_apis(
            "So textwrap.fill doesn't collapse spaces, and DjangoHelpFormatter calls self._fill_text via lookupValue.",
        );
        for name in [
            "textwrap.fill",
            "DjangoHelpFormatter",
            "self._fill_text",
            "lookupValue",
        ] {
            assert!(apis.iter().any(|a| a == name), "{name}: {apis:?}");
        }
        let apis = scan_apis(
            "See api.example.com and config.yaml, e.g. the HX-200 or GitHub, version 4.18.5.",
        );
        assert!(
            apis.iter().all(|a| a != "api.example.com"
                && a != "config.yaml"
                && a != "4.18.5"
                && a != "e.g"),
            "{apis:?}"
        );
    }

    #[test]
    fn a_constraint_cue_that_describes_does_not_make_a_rule() {
        let kind = |s: &str| classify_as(s, Voice::Principal);
        for said in [
            "We were charged twice this month, and I only noticed it on Thursday.",
            "After the reset, the device asked for a setup code that we never received.",
            "I understand how frustrating this must be for your team.",
            "I don't have much technical knowledge.",
            "The error message only says that the connection was refused.",
            "It must have been the update.",
            "El mensaje de error solo dice que se rechazó la conexión.",
            "El equipo pidió un código de configuración que nunca recibimos.",
            "Entiendo lo frustrante que debe de ser esto para su equipo.",
            "Die Fehlermeldung sagt nur, dass die Verbindung abgelehnt wurde.",
            "Das Gerät wollte einen Einrichtungscode, den wir nie erhalten haben.",
            "Ich verstehe, wie frustrierend das für Ihr Team sein muss.",
            "错误信息只说连接被拒绝，别的什么都没有。",
            "重置之后，设备要求输入一个设置码。",
            "我的经理让我今天一定要问清楚时间安排。",
            "周四下午整个团队只能用U盘里的副本工作。",
        ] {
            assert_ne!(kind(said), Some(Kind::Constraint), "{said}");
        }
        for rule in [
            "Please only send invoices to samir.berg@estudio-sol.es, not to me.",
            "Our data must stay in eu-south-2.",
            "Never log the key value itself.",
            "Please don't ask me to reinstall everything.",
            "We don't want the staging data in the report.",
            "Only use the read replica for this.",
            "A partir de ahora las facturas deben ir solo a ana@example.com.",
            "La cuenta debe permanecer en eu-central-1.",
            "Ab sofort sollen Rechnungen nur noch an ana@example.com gehen.",
            "Das Konto muss in eu-central-1 bleiben.",
            "从现在起，发票只发送到ana@example.com。",
            "账户必须保留在eu-central-1。",
            "这是审计的要求：数据只能存放在eu-south-2。",
        ] {
            assert_eq!(kind(rule), Some(Kind::Constraint), "{rule}");
        }
    }

    #[test]
    fn a_chinese_paragraph_is_many_sentences() {
        let p = "您好，我又来了。我们的订单号是ORD-370803，您需要的话可以用。请不要打+86 612 345 6789找我！真的吗？好的!明天见";
        assert_eq!(
            split_sentences(p),
            [
                "您好，我又来了。",
                "我们的订单号是ORD-370803，您需要的话可以用。",
                "请不要打+86 612 345 6789找我！",
                "真的吗？",
                "好的!",
                "明天见",
            ]
        );
        // A closing quote or bracket stays with the sentence it closes.
        assert_eq!(
            split_sentences("他说：「必须今天完成。」然后走了。（见附件。）"),
            ["他说：「必须今天完成。」", "然后走了。", "（见附件。）"]
        );
        // A dot inside a URL or a version is not a full stop.
        assert_eq!(
            split_sentences("请看https://help.example/a.html上的说明，版本4.2.1。谢谢。"),
            [
                "请看https://help.example/a.html上的说明，版本4.2.1。",
                "谢谢。"
            ]
        );
        assert_eq!(
            split_sentences("返品ラベルを送ります。必ず今日中に確認してください。"),
            ["返品ラベルを送ります。", "必ず今日中に確認してください。"]
        );
        assert_eq!(
            split_sentences("यह ठीक है। अगला वाक्य।"),
            ["यह ठीक है।", "अगला वाक्य।"]
        );
    }

    #[test]
    fn latin_sentences_split_before_accented_capitals_and_inverted_marks() {
        assert_eq!(
            split_sentences("Hola. ¿Pueden ayudarme? ¡Gracias! Él dijo que no."),
            ["Hola.", "¿Pueden ayudarme?", "¡Gracias!", "Él dijo que no."]
        );
        assert_eq!(
            split_sentences("Das ist gut. Über das Wochenende geht nichts, z. B. Nr. 4."),
            [
                "Das ist gut.",
                "Über das Wochenende geht nichts, z. B. Nr. 4."
            ]
        );
        // English stays as it was: abbreviations, initials, versions.
        assert_eq!(
            split_sentences(
                "Use e.g. Foo here. Then v4.3.0. Next, ask J. Smith. it passed. and then"
            ),
            [
                "Use e.g. Foo here.",
                "Then v4.3.0.",
                "Next, ask J. Smith.",
                "it passed.",
                "and then"
            ]
        );
    }

    #[test]
    fn identifiers_inside_cjk_text_are_found_whole() {
        let s = "您可以在https://status.hexanet.example/incidents/5431上查看，工单CS-63824（固件4.2.1）、地址192.168.1.20:8443，邮箱laura.moreno@harbourmail.com。设定「max_retries」はeu-west-3で、ファイルsrc/main.rsを確認。";
        let found: Vec<&str> = identifiers(s).map(|(_, _, t)| t).collect();
        assert_eq!(
            found,
            [
                "https://status.hexanet.example/incidents/5431",
                "CS-63824",
                "4.2.1",
                "192.168.1.20:8443",
                "laura.moreno@harbourmail.com",
                "max_retries",
                "eu-west-3",
                "src/main.rs",
            ]
        );
        assert!(QUANTITY.is_match("第一次完整同步最多可能需要40个小时。"));
        assert!(QUANTITY.is_match("Das dauert 3 Stunden."));
        assert!(QUANTITY.is_match("Tarda 12 horas."));
        assert!(!QUANTITY.is_match("我重启了28次。"));
        assert!(DATE.is_match("必须在2025-05-12之前送到。"));
        assert!(DATE.is_match("最晚2025年5月12日。"));
        assert!(NAMED_NUMBER.is_match("升级费用我们最多只能付880.00 EUR。"));
        // German capitalises nouns: a hyphenated one is a word there, a
        // name in English.
        let ids = |s: &str| {
            identifiers(s)
                .map(|(_, _, t)| t.to_owned())
                .collect::<Vec<_>>()
        };
        assert!(ids("Ich schreibe Ihnen per E-Mail mit dem USB-Stick.").is_empty());
        assert_eq!(
            ids("We plot with Vega-Lite and MBPP-Plus."),
            ["Vega-Lite", "MBPP-Plus"]
        );
        assert_eq!(ids("Wir nehmen das Modell GPT-4o."), ["GPT-4o"]);
    }

    fn kind(s: &str) -> Option<Kind> {
        classify_as(s, Voice::Principal)
    }

    #[test]
    fn chinese_and_japanese_cues_need_no_word_boundaries() {
        assert_eq!(
            kind("我们的数据必须留在eu-south-2。"),
            Some(Kind::Constraint)
        );
        assert_eq!(kind("请不要动这个端口的设置。"), Some(Kind::Constraint));
        assert_eq!(kind("发票请只发到财务部。"), Some(Kind::Constraint));
        assert_eq!(kind("这只是一个测试。"), None);
        assert_eq!(kind("员工不得在周末部署。"), Some(Kind::Constraint));
        // 不得不 is "have to", 不得不再 not "no longer": what is left is a follow-up.
        assert_eq!(kind("这件事我不得不再跟进一次。"), Some(Kind::Action));
        assert_eq!(kind("第一次同步最多可能需要30个小时。"), None);
        assert_eq!(kind("我们决定用GLS寄送替换设备。"), Some(Kind::Decision));
        assert_eq!(
            kind("最后还是改用顺丰吧，不用圆通了。"),
            Some(Kind::Decision)
        );
        assert_eq!(kind("我会和财务团队跟进这件事。"), Some(Kind::Action));
        assert_eq!(
            kind("このファイルは削除してはいけません。"),
            Some(Kind::Constraint)
        );
        assert_eq!(kind("配送はヤマト運輸にします。"), Some(Kind::Decision));
        assert_eq!(kind("返金の件は対応中です。"), Some(Kind::Action));
        assert_eq!(kind("現在、お客様の返答待ちです。"), Some(Kind::Action));
        assert_eq!(kind("ご連絡をお待ちしております。"), None);
    }

    #[test]
    fn spanish_german_and_french_cues() {
        assert_eq!(
            kind("Por favor, nunca me llamen al móvil."),
            Some(Kind::Constraint)
        );
        assert_eq!(
            kind("No cambien la configuración del router."),
            Some(Kind::Constraint)
        );
        assert_eq!(
            kind("La cuenta debe permanecer en Madrid."),
            Some(Kind::Constraint)
        );
        assert_eq!(
            kind("Decidimos enviar el equipo con DHL."),
            Some(Kind::Decision)
        );
        assert_eq!(
            kind("Mejor con SEUR en lugar de GLS."),
            Some(Kind::Decision)
        );
        assert_eq!(
            kind("Seguimos a la espera del almacén."),
            Some(Kind::Action)
        );
        assert_eq!(kind("El mensaje llegó ayer."), None);
        assert_eq!(
            kind("Bitte ändern Sie die Adresse nicht."),
            Some(Kind::Constraint)
        );
        assert_eq!(
            kind("Fassen Sie die Einstellungen nicht an."),
            Some(Kind::Constraint)
        );
        assert_eq!(
            kind("Das Konto muss in Frankfurt bleiben."),
            Some(Kind::Constraint)
        );
        assert_eq!(
            kind("Wir haben uns für DPD entschieden."),
            Some(Kind::Decision)
        );
        assert_eq!(kind("Wir nehmen GLS statt DPD."), Some(Kind::Decision));
        assert_eq!(kind("Die Demo findet am Freitag statt."), None);
        assert_eq!(kind("Ne changez pas l'adresse."), Some(Kind::Constraint));
        assert_eq!(
            kind("Nous avons décidé d'utiliser Colissimo."),
            Some(Kind::Decision)
        );
        assert_eq!(
            kind("On passe à Chronopost au lieu de DHL."),
            Some(Kind::Decision)
        );
        assert_eq!(kind("Le remboursement est en attente."), Some(Kind::Action));
        assert_eq!(
            kind("Merci de ne pas redémarrer le serveur."),
            Some(Kind::Constraint)
        );
        assert_eq!(
            kind("J'ai suivi le guide pour ne pas perdre de données."),
            None
        );
        // The agent's "only" is description; its "must" is a rule.
        assert_eq!(classify_as("Le quedan solo dos días.", Voice::Agent), None);
        assert_eq!(classify_as("Es bleibt nur der Cache.", Voice::Agent), None);
        assert_eq!(
            classify_as("Sie müssen das Gerät ausschalten.", Voice::Agent),
            Some(Kind::Constraint)
        );
        assert!(is_weak_cue("Nur") && is_weak_cue("只发") && !is_weak_cue("必须"));
    }

    #[test]
    fn requests_and_discourse_markers_in_other_languages() {
        assert!(is_request("Por favor, envíen todo a a@b.com."));
        assert!(is_request("¿Pueden revisar el pedido"));
        assert!(is_request("Könnten Sie das prüfen."));
        assert!(is_request("Bitte schicken Sie alles an mich."));
        assert!(is_request("请把发票发给我。"));
        assert!(is_request("这个能用吗？"));
        assert!(is_request("您好，请把发票发给我。"));
        assert!(!is_request("我已经申请了退款。"));
        assert!(!is_request("Podría ser un problema de la red."));
        assert!(!is_request(
            "Pueden escribirme a a@b.com en cualquier momento."
        ));
        assert_eq!(
            strip_discourse("Además, nunca me llamen."),
            "nunca me llamen."
        );
        assert_eq!(
            strip_discourse("另外，我们必须今天发货。"),
            "我们必须今天发货。"
        );
        assert_eq!(
            strip_discourse("Planänderung: Das Paket geht mit GLS."),
            "Das Paket geht mit GLS."
        );
        assert_eq!(word_count("我们决定用GLS寄送"), 5);
        assert_eq!(word_count("we decided on GLS"), 4);
        assert!(mostly_cjk("我们的数据必须留在eu-south-2"));
        assert!(!mostly_cjk(
            "We ship the unit to the 東京 office on Monday."
        ));
    }

    #[test]
    fn replaced_values_in_other_languages() {
        let has = |text: &str, v: &str| {
            let got = replaced_values(text);
            assert!(got.iter().any(|g| g == v), "{text}: {got:?}");
        };
        has(
            "计划有变：包裹改用GLS寄送，不用DHL Express了。",
            "DHL Express",
        );
        has("我们改为退回银行卡，不再使用代金券SC-72750。", "SC-72750");
        has("我们更希望改成HX-210，而不是HX-150 Lite。", "HX-150");
        has(
            "Cambio de planes: el plan Team Plus en lugar del plan Office Flex.",
            "Office Flex",
        );
        has(
            "Wir nehmen den Tarif Pro statt des Tarifs Team Plus.",
            "Team Plus",
        );
        has("On passe à Colissimo au lieu de DHL.", "DHL");
        has("銀行振込ではなく、カードで返金します。", "銀行振込");
        // English as it was.
        has("We'll use NATS instead of Redis streams.", "Redis streams");
    }

    #[test]
    fn a_cjk_key_keeps_the_clauses_that_name_something() {
        let s = "我们已经和仓库那边的同事反复确认过很多次了，考虑到各种各样的情况，最后决定改用GLS寄送替换设备，不用DHL Express了，希望这次能顺利一点";
        let k = cjk_key(s);
        assert_eq!(k, "最后决定改用GLS寄送替换设备，不用DHL Express了…");
        assert!(k.len() < s.len());
    }

    /// A megabyte of CJK text goes through every pattern in linear time
    /// (ASCII word boundaries only: Unicode `\b` would fall back to the
    /// slow engines here).
    #[test]
    fn a_megabyte_of_cjk_stays_fast() {
        let unit =
            "我们的数据必须留在eu-south-2，这是审计方的要求。计划有变：改用GLS寄送，不用DHL了。";
        let text = unit.repeat(1_000_000 / unit.len() + 1);
        let started = std::time::Instant::now();
        let mut hits = 0;
        for re in [
            &*CONSTRAINT,
            &*STRONG_CONSTRAINT,
            &*DECISION,
            &*ACTION,
            &*ERROR,
            &*TOKEN,
            &*QUANTITY,
            &*NAMED_NUMBER,
            &*DATE,
            &*QUOTED,
        ] {
            hits += re.find_iter(&text).count();
        }
        hits += split_sentences(&text).len();
        hits += replaced_values(&text).len();
        assert!(hits > 0);
        // Generous for an unoptimised build on a busy machine; a
        // backtracking or quadratic path takes minutes.
        assert!(started.elapsed().as_secs() < 20, "{:?}", started.elapsed());
    }

    #[test]
    fn a_working_note_is_a_plan_or_a_guess_unless_it_states_what_was_found() {
        for plan in [
            "We'll replace persist_tree with a safe writer.",
            "Now create test.sql with the arrow.",
            "If encoding_config is \"autodetect\", return utf-8.",
            "That likely means they answered 'y' to prompts.",
            "Wait, that's still 'O'.",
            "Use linter_logger instead of creating a new logger.",
        ] {
            assert!(is_plan(plan), "{plan}");
        }
        for finding in [
            "get_encoding returns the encoding string, not \"autodetect\".",
            "That's because of the `__str__` method in `NodeNG`.",
            "So the offset is applied twice: 3060 + 3060 = 6120 seconds.",
            "Position 120 is 'D' (the 'D' in ORDER BY).",
        ] {
            assert!(!is_plan(finding), "{finding}");
        }
    }

    #[test]
    fn a_one_letter_prefix_with_a_long_number_is_an_id() {
        let found: Vec<&str> = identifiers("Saved as Q-30355; see P-1 and X-12.")
            .map(|(_, _, t)| t)
            .collect();
        assert_eq!(found, ["Q-30355"]);
    }

    proptest::proptest! {
        /// The short cut for plain ASCII lines splits exactly as the walk.
        #[test]
        fn the_ascii_short_cut_splits_as_the_walk(line in "[a-zA-Z0-9 ._/:()=?!-]{0,80}") {
            proptest::prop_assert_eq!(split_sentences(&line), split_sentences_walk(&line));
        }
    }

    #[test]
    fn courtesy_is_a_sentence_that_only_greets_thanks_apologises_or_signs_off() {
        for s in [
            "Hello again, and thank you for the quick reply yesterday.",
            "Sorry for the long message.",
            "Thanks, and sorry again for the long message.",
            "I look forward to your answer.",
            "Thank you in advance for your help.",
            "Have a good rest of your day.",
            "Good morning, I hope you can help me this time.",
            "Vielen Dank für Ihre Geduld.",
            "Muchas gracias por la rápida respuesta.",
            "谢谢您的耐心。",
        ] {
            assert!(is_courtesy(s), "{s}");
        }
        for s in [
            // Courtesy around something said.
            "Thanks, the deploy on Friday worked.",
            "Sorry, the build still fails on main.",
            "Hi, the HX-200 is offline again.",
            "Please reset the password for ana@example.com, thanks.",
            "谢谢！请把发票发到我的邮箱。",
            // A hope that is a wish about the work.
            "I hope this is fixed by Friday.",
            // A thank-you that names what it is for.
            "Thanks for the logs from build 88213.",
            // Long enough to be more than courtesy.
            "Thank you for explaining why the nightly export skips the archived projects and how the retry queue decides what to resend first.",
        ] {
            assert!(!is_courtesy(s), "{s}");
        }
    }
}
