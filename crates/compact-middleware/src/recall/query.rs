//! A query in natural words as an FTS5 expression: each word quoted (so no
//! word is read as FTS5 syntax), joined with OR so that BM25 ranks entries
//! by how many of the rarer words they hold. Words that say nothing
//! ("what", "the") are dropped unless nothing else is left.

/// Words too common to rank by.
const STOP: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "did", "do", "does", "for", "from", "had",
    "has", "have", "how", "i", "in", "is", "it", "its", "me", "my", "of", "on", "or", "our",
    "that", "the", "their", "there", "this", "to", "was", "we", "were", "what", "when", "where",
    "which", "who", "why", "with", "you", "your",
];

/// The most words a query keeps (a pasted paragraph is not a query).
const MAX_WORDS: usize = 32;

/// The FTS5 expression for `q`; `None` when it has no word.
pub(crate) fn fts_expression(q: &str) -> Option<String> {
    let words: Vec<String> = q
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let mut kept: Vec<&String> = words
        .iter()
        .filter(|w| !STOP.contains(&w.as_str()))
        .collect();
    if kept.is_empty() {
        kept = words.iter().collect();
    }
    let mut seen = std::collections::HashSet::new();
    kept.retain(|w| seen.insert(*w));
    kept.truncate(MAX_WORDS);
    if kept.is_empty() {
        return None;
    }
    Some(
        kept.iter()
            .map(|w| format!("\"{w}\""))
            .collect::<Vec<_>>()
            .join(" OR "),
    )
}

#[cfg(test)]
mod tests {
    use super::fts_expression;

    #[test]
    fn words_are_quoted_and_stop_words_dropped() {
        assert_eq!(
            fts_expression("What port did the user reserve?").as_deref(),
            Some("\"port\" OR \"user\" OR \"reserve\"")
        );
        // FTS5 syntax in the query is just words.
        assert_eq!(
            fts_expression("NEAR(a b) \"x\" AND -y*").as_deref(),
            Some("\"near\" OR \"b\" OR \"x\" OR \"y\"")
        );
        assert_eq!(fts_expression("the").as_deref(), Some("\"the\""));
        assert_eq!(fts_expression(" ?! ").as_deref(), None);
    }
}
