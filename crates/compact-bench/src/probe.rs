//! Whether a fact is in a text: all of its probes on one line.
//!
//! Matching ignores ASCII case and is bounded by words: `OPS-482` is not
//! found in `OPS-4821`, nor `3 retries` in `13 retries`. A probe that
//! starts or ends with a non-word character (`50%`) is not bounded on that
//! side. The first probe of a fact is its anchor: the value the generator
//! guarantees occurs once in the whole session; the others (cue words,
//! subjects, keys) only have to share its line.

use compact_middleware::Message;

/// The text an agent's context shows a reader: every message's
/// [`Message::plain_text`], joined by newlines.
pub fn flatten(messages: &[Message]) -> String {
    messages
        .iter()
        .map(Message::plain_text)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A text prepared for probing (lowercased once).
#[derive(Debug, Clone)]
pub struct Haystack(String);

impl Haystack {
    /// Prepares `text`.
    pub fn new(text: &str) -> Self {
        Self(text.to_ascii_lowercase())
    }

    /// How many bounded occurrences of `probe` there are, anywhere.
    pub fn occurrences(&self, probe: &str) -> usize {
        let p = probe.to_ascii_lowercase();
        bounded_matches(&self.0, &p).count()
    }

    /// True when some line holds every probe (the first one bounded, the
    /// others bounded too). No probes is never retained.
    pub fn has_on_one_line(&self, probes: &[String]) -> bool {
        let Some((anchor, rest)) = probes.split_first() else {
            return false;
        };
        let anchor = anchor.to_ascii_lowercase();
        let rest: Vec<String> = rest.iter().map(|p| p.to_ascii_lowercase()).collect();
        bounded_matches(&self.0, &anchor).any(|at| {
            let line = line_around(&self.0, at);
            rest.iter()
                .all(|p| bounded_matches(line, p).next().is_some())
        })
    }
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Start offsets of `needle` in `hay` with word boundaries on each side
/// where the needle itself starts or ends with a word character.
fn bounded_matches<'a>(hay: &'a str, needle: &'a str) -> impl Iterator<Item = usize> + 'a {
    let bytes = hay.as_bytes();
    let n = needle.as_bytes();
    let (check_start, check_end) = match (n.first(), n.last()) {
        (Some(&f), Some(&l)) => (is_word(f), is_word(l)),
        _ => (false, false),
    };
    let mut from = 0;
    std::iter::from_fn(move || {
        if n.is_empty() {
            return None;
        }
        while from <= hay.len() {
            let at = from + hay.get(from..)?.find(needle)?;
            from = at + 1;
            // Advance `from` to a char boundary for the next `get`.
            while from < hay.len() && !hay.is_char_boundary(from) {
                from += 1;
            }
            let end = at + n.len();
            let before_ok = !check_start || at == 0 || !is_word(bytes[at - 1]);
            let after_ok = !check_end || end >= bytes.len() || !is_word(bytes[end]);
            if before_ok && after_ok {
                return Some(at);
            }
        }
        None
    })
}

fn line_around(hay: &str, at: usize) -> &str {
    let start = hay[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = hay[at..].find('\n').map_or(hay.len(), |i| at + i);
    &hay[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probes(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn matches_are_bounded_by_words_and_ignore_case() {
        let h = Haystack::new("see OPS-4821 and 13 retries; Never deploy to EU-WEST-3.");
        assert_eq!(h.occurrences("ops-4821"), 1);
        assert_eq!(h.occurrences("OPS-482"), 0);
        assert_eq!(h.occurrences("3 retries"), 0);
        assert_eq!(h.occurrences("13 retries"), 1);
        assert_eq!(h.occurrences("eu-west-3"), 1);
        let h = Haystack::new("discount of 15% off, 115% off");
        assert_eq!(h.occurrences("15% off"), 1);
    }

    #[test]
    fn all_probes_must_share_one_line() {
        let h = Haystack::new("never do that\ndeploy to eu-west-3\nnever deploy to eu-west-2");
        assert!(!h.has_on_one_line(&probes(&["eu-west-3", "never"])));
        assert!(h.has_on_one_line(&probes(&["eu-west-2", "never"])));
        assert!(h.has_on_one_line(&probes(&["eu-west-3"])));
        assert!(!h.has_on_one_line(&[]));
    }

    #[test]
    fn non_ascii_text_does_not_break_matching() {
        let h = Haystack::new("é OPS-1 … naïve OPS-1…");
        assert_eq!(h.occurrences("OPS-1"), 2);
        assert!(h.has_on_one_line(&probes(&["ops-1", "naïve"])));
    }
}
