//! Folding a template's lines into one: "Parcel held at depot DEP-530
//! because the address label was damaged." and the same sentence with
//! DEP-826 and DEP-452 read as one line that lists the three depots.
//!
//! Machine output and templated prose repeat one sentence with other values
//! (a note per shipment, a firmware per check-in, a log line per request).
//! Shown one fact per line, such a template fills a summary with the same
//! words; dropped as a template's, it takes the values with it. Folded, it
//! costs one line and keeps every value. Two lines fold when they have the
//! same shape (`facts::shape`: digits and hex words blanked, case ignored),
//! which keeps their words in the same places, so the words that differ are
//! the values.

/// Trailing punctuation a value shares with its sentence, not with itself.
const TRAILING: &[char] = &['.', ',', ';', ':', '!', '?', ')', ']', '"', '\''];
/// Opening punctuation a value shares with its sentence.
const LEADING: &[char] = &['(', '[', '"', '\''];

/// `lines` (oldest first) folded into one: the words they share in place,
/// and at the one word where they differ, every value in turn (`DEP-530 /
/// DEP-826`). `None` when the lines do not line up word for word or differ
/// in more than one word.
pub(crate) fn fold(lines: &[&str]) -> Option<String> {
    let first = *lines.first()?;
    if lines.len() == 1 {
        return Some(first.to_owned());
    }
    let words: Vec<Vec<&str>> = lines.iter().map(|l| l.split(' ').collect()).collect();
    let n = words[0].len();
    if words.iter().any(|w| w.len() != n) {
        return None;
    }
    let slots: Vec<usize> = (0..n)
        .filter(|&p| words.iter().any(|w| w[p] != words[0][p]))
        .collect();
    if slots.is_empty() {
        return Some(first.to_owned());
    }
    // The punctuation every value at a slot ends with belongs to the
    // sentence: `4.18.5.` and `4.7.5.` are `4.18.5` and `4.7.5`, then `.`.
    let tail = |p: usize| -> &str {
        let w0 = words[0][p];
        let mut t = &w0[w0.trim_end_matches(TRAILING).len()..];
        while !t.is_empty() && !words.iter().all(|w| w[p].ends_with(t)) {
            t = &t[t.char_indices().nth(1).map_or(t.len(), |(i, _)| i)..];
        }
        t
    };
    // And the punctuation they all open with: `(23.4ms)` and `(19.9ms)`
    // are `23.4ms` and `19.9ms` in one pair of brackets.
    let head = |p: usize| -> &str {
        let w0 = words[0][p];
        let mut h = &w0[..w0.len() - w0.trim_start_matches(LEADING).len()];
        while !h.is_empty() && !words.iter().all(|w| w[p].starts_with(h)) {
            h = &h[..h.char_indices().last().map_or(0, |(i, _)| i)];
        }
        h
    };
    let value = |w: &Vec<&str>, p: usize| -> String {
        let (h, t) = (head(p), tail(p));
        w[p][h.len()..w[p].len() - t.len()].to_owned()
    };
    // Several words that vary together (a value and its timing, a name in
    // two words) are a table's row each: listed apart, they say more.
    let [p] = slots[..] else {
        return None;
    };
    let mut values: Vec<String> = Vec::new();
    for w in &words {
        let v = value(w, p);
        if !values.contains(&v) {
            values.push(v);
        }
    }
    let mut out: Vec<String> = words[0].iter().map(|w| (*w).to_owned()).collect();
    out[p] = format!("{}{}{}", head(p), values.join(" / "), tail(p));
    Some(out.join(" "))
}

#[cfg(test)]
mod tests {
    use super::fold;

    #[test]
    fn one_varying_word_lists_its_values_in_place() {
        let got = fold(&[
            "Parcel held at depot DEP-530 because the address label was damaged.",
            "Parcel held at depot DEP-826 because the address label was damaged.",
            "Parcel held at depot DEP-452 because the address label was damaged.",
        ]);
        assert_eq!(
            got.as_deref(),
            Some(
                "Parcel held at depot DEP-530 / DEP-826 / DEP-452 because the address label was damaged."
            )
        );
    }

    #[test]
    fn a_value_at_the_end_keeps_the_sentences_period_once() {
        let got = fold(&[
            "Last check-in from the device was on firmware 4.18.5.",
            "Last check-in from the device was on firmware 4.7.5.",
            "Last check-in from the device was on firmware 4.18.5.",
        ]);
        assert_eq!(
            got.as_deref(),
            Some("Last check-in from the device was on firmware 4.18.5 / 4.7.5.")
        );
    }

    #[test]
    fn brackets_around_the_values_are_the_sentences() {
        let got = fold(&[
            "[shell] Applied 20241105/migrate keys (23.481ms)",
            "[shell] Applied 20241105/migrate keys (19.902ms)",
        ]);
        assert_eq!(
            got.as_deref(),
            Some("[shell] Applied 20241105/migrate keys (23.481ms / 19.902ms)")
        );
    }

    #[test]
    fn lines_that_differ_in_several_words_stay_apart() {
        assert_eq!(
            fold(&[
                "[api] GET /orders/17 took 41 ms",
                "[api] GET /orders/9 took 7 ms"
            ]),
            None
        );
    }

    #[test]
    fn lines_that_do_not_line_up_do_not_fold() {
        assert_eq!(fold(&["a b c", "a b"]), None);
        assert_eq!(
            fold(&["same line", "same line"]).as_deref(),
            Some("same line")
        );
        assert_eq!(fold(&[]), None);
    }
}
