//! Excerpts for the PostgreSQL index, written here rather than by
//! `ts_headline`: the database ranks and returns the few best entries, and
//! the excerpt is the window of [`EXCERPT_TOKENS`] words of the original
//! text that holds the most of the query's stems (as FTS5's `snippet` does
//! for SQLite), cut at word boundaries, `…` where text was left out.
//! `ts_headline` would re-parse the whole text with PostgreSQL's parser,
//! which reads `services/billing/ledger.rs` as one token that the query's
//! words never match.

/// Words an excerpt keeps (SQLite's `snippet` is given the same).
pub(super) const EXCERPT_TOKENS: usize = 48;

/// Whether `word` (lowercased) is a form of `stem`: stems are prefixes of
/// the words they come from (`reserv` of `reserved`), except a final `i`
/// for `y` (`queri` of `query`).
fn matches(word: &str, stem: &str) -> bool {
    if word.starts_with(stem) {
        return true;
    }
    match stem.strip_suffix('i') {
        Some(head) if !head.is_empty() => word
            .strip_prefix(head)
            .is_some_and(|rest| rest.starts_with('y')),
        _ => false,
    }
}

/// The excerpt of `text` around `stems` (the query's stems, lowercase).
pub(super) fn excerpt(text: &str, stems: &[String]) -> String {
    // Byte ranges of the words (runs of letters and digits).
    let mut words: Vec<(usize, usize)> = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                words.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        words.push((s, text.len()));
    }
    if words.is_empty() {
        return text.chars().take(EXCERPT_TOKENS * 6).collect();
    }
    // Which stem each word is a form of, if any.
    let hit: Vec<Option<usize>> = words
        .iter()
        .map(|&(s, e)| {
            let w = text[s..e].to_lowercase();
            stems
                .iter()
                .position(|st| !st.is_empty() && matches(&w, st))
        })
        .collect();
    let n = EXCERPT_TOKENS.min(words.len());
    // The window with the most distinct stems, then the most matches; the
    // first such.
    let mut counts = vec![0usize; stems.len()];
    let (mut distinct, mut total) = (0usize, 0usize);
    let mut add = |h: Option<usize>, sign: bool, distinct: &mut usize, total: &mut usize| {
        if let Some(k) = h {
            if sign {
                counts[k] += 1;
                *total += 1;
                if counts[k] == 1 {
                    *distinct += 1;
                }
            } else {
                counts[k] -= 1;
                *total -= 1;
                if counts[k] == 0 {
                    *distinct -= 1;
                }
            }
        }
    };
    for h in &hit[..n] {
        add(*h, true, &mut distinct, &mut total);
    }
    let (mut best, mut best_at) = ((distinct, total), 0);
    for at in 1..=words.len() - n {
        add(hit[at - 1], false, &mut distinct, &mut total);
        add(hit[at + n - 1], true, &mut distinct, &mut total);
        if (distinct, total) > best {
            best = (distinct, total);
            best_at = at;
        }
    }
    // Start a little before the first match in the window, so that the
    // words leading up to it are shown too.
    let first = (best_at..best_at + n)
        .find(|&i| hit[i].is_some())
        .unwrap_or(best_at);
    let lead = (first - best_at).min(n / 4);
    let from = (first - lead).min(words.len() - n);
    // Whole at either end: what precedes the first word, follows the last.
    let s = if from == 0 { 0 } else { words[from].0 };
    let e = if from + n == words.len() {
        text.len()
    } else {
        words[from + n - 1].1
    };
    let mut out = String::with_capacity(e - s + 6);
    if from > 0 {
        out.push('…');
    }
    out.push_str(&text[s..e]);
    if from + n < words.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stems(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn the_window_holds_the_matched_words() {
        let mut text = String::new();
        for i in 0..200 {
            text.push_str(&format!("filler{i} "));
        }
        text.push_str("the payments service reserved port 48213 for services/billing/ledger.rs ");
        for i in 0..200 {
            text.push_str(&format!("tail{i} "));
        }
        let e = excerpt(&text, &stems(&["reserv", "port", "ledger"]));
        assert!(e.contains("reserved port 48213"), "{e}");
        assert!(e.contains("services/billing/ledger.rs"), "{e}");
        assert!(e.starts_with('…') && e.ends_with('…'), "{e}");
        assert_eq!(
            e.trim_matches('…')
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .count(),
            EXCERPT_TOKENS
        );
    }

    #[test]
    fn short_texts_are_whole_and_stems_match_forms() {
        assert_eq!(
            excerpt("Which query failed?", &stems(&["queri"])),
            "Which query failed?"
        );
        assert_eq!(excerpt("", &stems(&["x"])), "");
        assert_eq!(excerpt("--", &stems(&["x"])), "--");
        assert!(matches("reserved", "reserv"));
        assert!(matches("queries", "queri"));
        assert!(!matches("port", "report"));
    }
}
