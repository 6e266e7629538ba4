//! A query in natural words as an FTS5 expression (SQLite) or a `tsquery`
//! (PostgreSQL): each word quoted or reduced to letters and digits (so no
//! word is read as query syntax), joined with OR so that the ranking
//! orders entries by how many of the words they hold. Words that say
//! nothing ("what", "the") are dropped unless nothing else is left.

/// Words too common to rank by.
const STOP: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "did", "do", "does", "for", "from", "had",
    "has", "have", "how", "i", "in", "is", "it", "its", "me", "my", "of", "on", "or", "our",
    "that", "the", "their", "there", "this", "to", "was", "we", "were", "what", "when", "where",
    "which", "who", "why", "with", "you", "your",
];

/// The most words a query keeps (a pasted paragraph is not a query).
const MAX_WORDS: usize = 32;

/// The words of `q` a query searches for, lowercased, in order, once each.
fn words(q: &str) -> Vec<String> {
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
    kept.into_iter().cloned().collect()
}

/// The FTS5 expression for `q`; `None` when it has no word.
pub(crate) fn fts_expression(q: &str) -> Option<String> {
    let kept = words(q);
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

/// The PostgreSQL form of a query: its terms (each a `to_tsquery` text: a
/// word, or a word with `_` as the phrase of its parts, `<->`, as the index
/// splits it) and the words as plain text (for their stems). Every term is
/// letters and digits only, so nothing in the query is read as `tsquery`
/// syntax.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct TsQuery {
    pub(crate) terms: Vec<String>,
    pub(crate) plain: String,
    /// The words, lowercased (letters, digits and `_` only): what a query
    /// of stop words only matches as whole words.
    pub(crate) words: Vec<String>,
}

impl TsQuery {
    /// The terms of `at` joined with OR.
    pub(crate) fn any(&self, at: impl IntoIterator<Item = usize>) -> String {
        at.into_iter()
            .filter_map(|i| self.terms.get(i).map(String::as_str))
            .collect::<Vec<_>>()
            .join(" | ")
    }

    /// Each term restricted to weight A (the tool and file).
    pub(crate) fn weighted_a(&self) -> Vec<String> {
        self.terms
            .iter()
            .map(|t| {
                t.split(" <-> ")
                    .map(|w| format!("{w}:A"))
                    .collect::<Vec<_>>()
                    .join(" <-> ")
            })
            .collect()
    }
}

/// The PostgreSQL form of `q`; `None` when it has no word.
pub(crate) fn ts_query(q: &str) -> Option<TsQuery> {
    let kept = words(q);
    let terms: Vec<String> = kept
        .iter()
        .map(|w| {
            w.split(|c: char| !c.is_alphanumeric())
                .filter(|p| !p.is_empty())
                .collect::<Vec<_>>()
                .join(" <-> ")
        })
        .filter(|t| !t.is_empty())
        .collect();
    if terms.is_empty() {
        return None;
    }
    Some(TsQuery {
        terms,
        plain: normalized(&kept.join(" ")),
        words: kept,
    })
}

/// `text` with every run of characters other than letters and digits as
/// one space: what PostgreSQL's parser is given, so that a path, a URL or
/// `snake_case` is words (as SQLite's tokenizer splits them) and not one
/// token the query's words never match.
pub(crate) fn normalized(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut gap = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if gap && !out.is_empty() {
                out.push(' ');
            }
            gap = false;
            out.push(c);
        } else {
            gap = true;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{fts_expression, normalized, ts_query};

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

    #[test]
    fn postgres_terms_are_letters_and_digits() {
        let q = ts_query("What did fix_ledger's `port:8080` do?").expect("words");
        assert_eq!(q.any(0..q.terms.len()), "fix <-> ledger | s | port | 8080");
        assert_eq!(q.any([2, 0]), "port | fix <-> ledger");
        assert_eq!(q.weighted_a()[0], "fix:A <-> ledger:A");
        assert_eq!(q.plain, "fix ledger s port 8080");
        assert_eq!(q.words, ["fix_ledger", "s", "port", "8080"]);
        // tsquery syntax in the query is dropped, never passed on.
        let q = ts_query("a & !b | (c <-> d):*").expect("words");
        assert_eq!(q.terms, ["b", "c", "d"]);
        assert_eq!(ts_query(" _ - "), None);
        assert_eq!(
            normalized("services/billing/ledger.rs:42 café"),
            "services billing ledger rs 42 café"
        );
    }
}
