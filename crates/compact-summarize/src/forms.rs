//! The sizes a statement is shown at. When the summary is short of room,
//! every fact shrinks before any fact is dropped:
//!
//! - **full**: the sentence as it was said (a request clipped to 240 bytes);
//! - **short**: without discourse markers ("Also,", "To recap,"), a log
//!   line's level and source, and a justification that names nothing
//!   ("…, because it is cheaper", "…; legal has not cleared it");
//! - **key**: the short form without fillers ("just", "really"); a long sentence
//!   keeps only the words around its cue, its negations, identifiers and
//!   quantities, joined by `…`.
//!
//! Each form is made of the words of the one before it, so a summary never
//! says what the input did not, and every form keeps the identifiers.
use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;

use super::facts::{
    CONSTRAINT, Item, JUSTIFICATIONS as OTHER_JUSTIFICATIONS, Kind, LONG_NUMBER, NEGATIONS,
    QUANTITY, cjk_key, clip, identifiers, key_spans, mostly_cjk, split_label, strip_discourse,
    word_count,
};

/// Most items whose forms a ledger remembers; past it, it starts over.
const MEMO_ITEMS: usize = 8192;

/// The forms of the items a ledger has shown, by what they are made of:
/// the budget is asked for and the summary fitted on every compaction,
/// each time over every live item, and an item's forms (tens of
/// microseconds for a long sentence) change only when it does. Not stored;
/// a clone of the ledger takes a copy.
#[derive(Default)]
pub(crate) struct FormsMemo(std::sync::Mutex<HashMap<u64, (String, [String; 3])>>);

impl Clone for FormsMemo {
    fn clone(&self) -> Self {
        let copy = self.0.lock().map(|m| m.clone()).unwrap_or_default();
        Self(std::sync::Mutex::new(copy))
    }
}

impl std::fmt::Debug for FormsMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.lock().map_or(0, |m| m.len());
        write!(f, "FormsMemo({n} items)")
    }
}

impl FormsMemo {
    /// [`forms`] of `it`, remembered.
    pub(crate) fn of(&self, it: &Item) -> [String; 3] {
        let key = content_hash(it);
        if let Ok(memo) = self.0.lock()
            && let Some((text, forms)) = memo.get(&key)
            && *text == it.text
        {
            return forms.clone();
        }
        let made = forms(it);
        if let Ok(mut memo) = self.0.lock() {
            if memo.len() >= MEMO_ITEMS {
                memo.clear();
            }
            memo.insert(key, (it.text.clone(), made.clone()));
        }
        made
    }
}

/// A hash of everything [`forms`] reads of an item.
fn content_hash(it: &Item) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    it.kind.hash(&mut h);
    it.text.hash(&mut h);
    it.apis.hash(&mut h);
    if let Some(t) = &it.trail {
        t.touches.hash(&mut h);
        t.purpose.hash(&mut h);
        t.outcome.hash(&mut h);
        t.failed.hash(&mut h);
        t.failed_before.hash(&mut h);
        t.failed_ids.hash(&mut h);
    }
    h.finish()
}

/// How an item is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Size {
    Key = 0,
    Short = 1,
    Full = 2,
}

/// Longest display of a request, per size, in bytes.
const REQUEST: [usize; 3] = [120, 160, 240];
/// A key longer than this many words is cut down to its key spans.
const KEY_WORDS: usize = 16;

/// The three forms of an item, smallest first.
pub(crate) fn forms(it: &Item) -> [String; 3] {
    if it.kind.is_trail() {
        let none = super::facts::trail::Trail::default();
        return super::facts::trail::forms(
            it.kind,
            &it.text,
            &it.apis,
            it.trail.as_ref().unwrap_or(&none),
        );
    }
    if !it.kind.is_statement() {
        let t = it.text.clone();
        return [t.clone(), t.clone(), t];
    }
    if it.kind.is_narrative() {
        // An earlier goal is its ask, however much room there is: its
        // padding was context for that turn, and what else it said (a
        // deadline, a constraint) is a fact of its own. The latest request
        // is shown as sent.
        let short = the_ask(strip_discourse(&it.text));
        let full = if it.kind == Kind::Goal {
            short
        } else {
            &it.text
        };
        return [
            clip(short, REQUEST[0]),
            clip(short, REQUEST[1]),
            clip(full, REQUEST[2]),
        ];
    }
    let full = it.text.clone();
    let short = short(&full);
    let key = key(&short);
    [key, short, full]
}

/// A request without the context it was padded with ("As I mentioned in
/// the standup yesterday, and given what legal said, can you get me …"):
/// from where it asks, when what comes before names nothing.
fn the_ask(text: &str) -> &str {
    const OPENERS: &[&str] = &[
        "can you ",
        "could you ",
        "would you ",
        "will you ",
        "please ",
        "i need you to ",
        "i'd like you to ",
        "can we ",
        "could we ",
    ];
    let lower = text.to_ascii_lowercase();
    let Some(at) = OPENERS.iter().filter_map(|o| lower.find(o)).min() else {
        return text;
    };
    let (before, ask) = text.split_at(at);
    // Padding says nothing of its own: no name, no number, no cue ("CI
    // failed on the integration job, can you look?" is all content).
    // "…, but can you", "…, so could you": the connective belongs to the
    // padding.
    let joint = before.trim_end();
    let joint = ["but", "so", "and"]
        .iter()
        .find_map(|w| {
            joint
                .strip_suffix(w)
                .filter(|rest| rest.ends_with(' '))
                .map(str::trim_end)
        })
        .unwrap_or(joint);
    let padded = before.split_whitespace().count() >= 4
        && joint.ends_with([',', ':', '-', '—'])
        && identifiers(before).next().is_none()
        && !before.bytes().any(|b| b.is_ascii_digit())
        && super::facts::classify(before).is_none();
    if !padded {
        return text;
    }
    // The asking sentence, without the pleasantries after it.
    match ask.find("? ").or_else(|| ask.find(". ")) {
        Some(end) => &ask[..=end],
        None => ask,
    }
}

static LOG_PREFIX: LazyLock<Regex> = LazyLock::new(|| {
    // The patterns are constants of this module; a typo is caught by the
    // first test that renders a tool line, never by user input.
    #[allow(clippy::expect_used)]
    Regex::new(
        r"^\[?(?:ERROR|ERR|WARN|WARNING|INFO|DEBUG|TRACE|FATAL|CRITICAL|NOTICE)\]?\s+(?:[A-Za-z0-9_.\-/\[\]]+:\s+)?",
    )
    .expect("constant regex")
});

/// A time of day (`09:10`, `23:45:01`): a tail that says when is kept.
static CLOCK: LazyLock<Regex> = LazyLock::new(|| {
    #[allow(clippy::expect_used)]
    Regex::new(r"(?-u:\b)\d{1,2}:\d{2}(?::\d{2})?(?-u:\b)").expect("constant regex")
});

/// Where a justification starts: what follows explains, it does not state.
const JUSTIFICATIONS: &[&str] = &[
    ", because ",
    " because ",
    ", since ",
    " since ",
    "; ",
    " — ",
    " – ",
    " - ",
    ", as ",
    ", so ",
    ", which ",
    ", it ",
    ", they ",
    ", this ",
    " so that ",
    ", otherwise ",
];

/// The sentence without its discourse markers, a log prefix, and a
/// justification that names nothing.
pub(crate) fn short(text: &str) -> String {
    let (label, body) = split_label(text);
    let mut body = strip_discourse(body);
    if !label.is_empty()
        && let Some(m) = LOG_PREFIX.find(body)
        && body.len() - m.end() >= 12
    {
        body = &body[m.end()..];
    }
    let body = cut_justification(body);
    let body = body.trim_end_matches(['.', ' ']);
    format!("{label}{body}")
}

fn cut_justification(body: &str) -> &str {
    let lower = body.to_ascii_lowercase();
    let mut cut: Option<usize> = None;
    for marker in JUSTIFICATIONS.iter().chain(OTHER_JUSTIFICATIONS) {
        if let Some(at) = lower.find(marker) {
            cut = Some(cut.map_or(at, |c: usize| c.min(at)));
        }
    }
    let Some(at) = cut else {
        return body;
    };
    let (head, tail) = body.split_at(at);
    // A head of fewer than three words is not a statement on its own.
    if word_count(head) < 3 {
        return body;
    }
    // The tail is kept when it names something, or brings a cue the head
    // lacks ("deploy with the pipeline; never by hand").
    let names = identifiers(tail).next().is_some()
        || QUANTITY.is_match(tail)
        || LONG_NUMBER.is_match(tail)
        || CLOCK.is_match(tail);
    let cue = CONSTRAINT.is_match(tail) && !CONSTRAINT.is_match(head);
    // A parenthesis opened in the head stays whole.
    let open = head.matches('(').count() > head.matches(')').count();
    if names || cue || open {
        return body;
    }
    head.trim_end_matches([',', ';', ' '])
}

/// Words a fact reads the same without.
const FILLER: &[&str] = &[
    "really",
    "just",
    "actually",
    "basically",
    "simply",
    "quite",
    "very",
    "definitely",
];

/// The short form without fillers; a long one cut down to
/// the words around its key spans.
pub(crate) fn key(short: &str) -> String {
    let (label, body) = split_label(short);
    let mut out = String::with_capacity(body.len());
    for w in body.split(' ') {
        let bare = w.trim_matches(|c: char| !c.is_alphanumeric());
        if bare.len() == w.len() && FILLER.contains(&bare.to_ascii_lowercase().as_str()) {
            continue;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    if word_count(&out) > KEY_WORDS {
        // Text without spaces is cut by clauses, not words.
        out = if mostly_cjk(&out) {
            cjk_key(&out)
        } else {
            around_spans(&out)
        };
    }
    if out.is_empty() {
        return short.to_owned();
    }
    format!("{label}{out}")
}

/// Negations are kept: eliding the gap in "must never exceed" would say
/// the opposite.
fn is_negation(w: &str) -> bool {
    let w = w
        .trim_matches(|c: char| !c.is_alphanumeric() && c != '\'')
        .to_ascii_lowercase();
    matches!(
        w.as_str(),
        "not" | "never" | "no" | "without" | "nor" | "neither"
    ) || w.ends_with("n't")
        || NEGATIONS.contains(&w.as_str())
}

/// The words within two of a key span (a cue, an identifier, a quantity, a
/// number, a negation), the rest elided as `…`.
fn around_spans(s: &str) -> String {
    let spans = key_spans(s);
    // Word start offsets.
    let words: Vec<(usize, &str)> = s
        .split(' ')
        .scan(0usize, |at, w| {
            let start = *at;
            *at += w.len() + 1;
            Some((start, w))
        })
        .filter(|(_, w)| !w.is_empty())
        .collect();
    let mut keep = vec![false; words.len()];
    for (i, &(start, w)) in words.iter().enumerate() {
        let end = start + w.len();
        let in_span = spans.iter().any(|&(a, b)| a < end && start < b);
        if in_span || is_negation(w) || w.bytes().any(|b| b.is_ascii_digit()) {
            let lo = i.saturating_sub(2);
            let hi = (i + 2).min(words.len() - 1);
            keep[lo..=hi].iter_mut().for_each(|k| *k = true);
        }
    }
    if !keep.iter().any(|&k| k) {
        return clip(s, 100);
    }
    let mut out = String::new();
    let mut gap = false;
    for (i, &(_, w)) in words.iter().enumerate() {
        if keep[i] {
            if gap && !out.is_empty() {
                out.push_str(" …");
            }
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(w);
            gap = false;
        } else {
            gap = true;
        }
    }
    if gap {
        out.push_str(" …");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_drops_markers_and_nameless_justifications() {
        assert_eq!(
            short(
                "To recap, we'll use ubi-minimal for the container base image because it has fewer moving parts."
            ),
            "we'll use ubi-minimal for the container base image"
        );
        assert_eq!(
            short("Important: never deploy to eu-west-3; legal has not cleared it."),
            "never deploy to eu-west-3"
        );
        // A tail that names something stays.
        assert_eq!(
            short("We pinned the client, because v2.3.1 breaks auth."),
            "We pinned the client, because v2.3.1 breaks auth"
        );
        assert_eq!(
            short("[run_tests] ERROR worker-2: the job runs on etcd-ledger-31.prod.internal"),
            "[run_tests] the job runs on etcd-ledger-31.prod.internal"
        );
        assert_eq!(
            short(
                "Scratch that, we're switching the feature flag service to GrowthBook (not Flagsmith) since it is cheaper at our volume."
            ),
            "we're switching the feature flag service to GrowthBook (not Flagsmith)"
        );
    }

    #[test]
    fn key_drops_fillers_and_keeps_negations() {
        assert_eq!(
            key("we'll just use ubi-minimal for the container base image"),
            "we'll use ubi-minimal for the container base image"
        );
        let long = "The exporter that runs in zone 14 on the old hardware in the basement must never exceed 114 MB of memory under any load we have seen";
        let k = key(long);
        assert!(k.contains("must never exceed 114 MB"), "{k}");
        assert!(k.contains("zone 14"), "{k}");
        assert!(k.len() < long.len(), "{k}");
    }

    #[test]
    fn an_earlier_goal_is_its_ask_without_the_padding_and_the_pleasantries() {
        for (sent, ask) in [
            (
                "As I mentioned in the standup yesterday, and given what legal said, can you get me the raw rows? Thanks a lot.",
                "can you get me the raw rows?",
            ),
            (
                "Sorry if this is a repeat, I lost track of what we already pulled, but could you check the Iberian routes? I'd like to understand it.",
                "could you check the Iberian routes?",
            ),
            // What comes before names something: it is part of the ask.
            (
                "CI failed on the integration job, can you look? Build 88213.",
                "CI failed on the integration job, can you look? Build 88213.",
            ),
        ] {
            assert_eq!(the_ask(sent), ask);
        }
    }
}
