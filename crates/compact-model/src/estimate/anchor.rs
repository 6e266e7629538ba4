//! Usage anchoring (`docs/design.md §4`): the provider's reported `usage.input_tokens`
//! of the last request replaces our estimate of what that request held, so only what
//! was appended since is estimated. The difference between the two is the observed
//! error of the pure estimate, which the report carries.

use serde::Serialize;

use crate::model::{Message, Role};

/// Which figure a token estimate rests on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// The estimator alone: the BPE count (or the characters-per-token estimate of a
    /// model without a public tokenizer) plus the framing rules of `docs/tokens.md`.
    #[default]
    Estimate,
    /// The provider's reported `usage.input_tokens` of the last request, plus the
    /// estimate of what was appended since.
    Usage,
}

/// How an estimate was anchored to the provider's reported usage.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Anchor {
    /// The provider's `usage.input_tokens` of the last request.
    pub usage_tokens: usize,
    /// Leading messages of this request that the last request held (the figure
    /// covers them; the rest is estimated).
    pub covered: usize,
    /// The pure estimate of the last request: the covered messages, the tool schemas
    /// and the reply priming. What `usage_tokens` is compared with.
    pub estimated: usize,
    /// The pure estimate of this whole request (what `t_est` would be unanchored).
    pub pure_t_est: usize,
    /// The anchored estimate: `usage_tokens` plus the estimate of the messages after
    /// the covered ones.
    pub t_est: usize,
    /// Observed relative error of the pure estimate, `(estimated - usage_tokens) /
    /// usage_tokens`, rounded to 4 decimals: positive when the estimate was over.
    /// `None` when `usage_tokens` is 0.
    pub error: Option<f64>,
}

impl Anchor {
    /// Anchors a request whose per-message `counts` (and tool schema and reply priming
    /// tokens, `framing`) make the pure estimate, given that its first `covered`
    /// messages were the last request, which cost `usage_tokens`. `covered` beyond
    /// the end counts as all of them.
    pub fn new(counts: &[usize], framing: usize, covered: usize, usage_tokens: usize) -> Self {
        let covered = covered.min(counts.len());
        let prefix: usize = counts[..covered].iter().sum();
        let appended: usize = counts[covered..].iter().sum();
        let estimated = framing + prefix;
        Anchor {
            usage_tokens,
            covered,
            estimated,
            pure_t_est: estimated + appended,
            t_est: usage_tokens + appended,
            error: relative_error(estimated, usage_tokens),
        }
    }

    /// What anchoring adds to the pure estimate (negative when the estimate was over).
    pub fn correction(&self) -> i64 {
        self.t_est as i64 - self.pure_t_est as i64
    }

    /// How many real tokens one estimated token of this request stands for, at least
    /// 1: `t_est / pure_t_est`. Compaction works in estimated tokens and aims this much
    /// lower. An estimate that was over is not credited (a factor below 1 is 1):
    /// compaction removes the messages it was measured on.
    pub fn scale(&self) -> f64 {
        if self.pure_t_est == 0 {
            return 1.0;
        }
        (self.t_est as f64 / self.pure_t_est as f64).max(1.0)
    }
}

/// `(estimated - actual) / actual`, rounded to 4 decimals; `None` when `actual` is 0.
pub fn relative_error(estimated: usize, actual: usize) -> Option<f64> {
    (actual > 0).then(|| {
        let e = (estimated as f64 - actual as f64) / actual as f64;
        (e * 10_000.0).round() / 10_000.0
    })
}

/// How many leading messages the last request held, when nothing else says so: a
/// reported usage belongs to the response that produced the last run of model output
/// (an assistant message, or the reasoning, tool call and compaction items of one
/// Responses turn), so the request held everything before that run. `None` when the
/// history has no model output, so no response whose usage could be anchored.
pub fn covered_before_last_reply(messages: &[Message]) -> Option<usize> {
    let is_output = |m: &Message| m.role() == Role::Assistant || m.kind().compaction;
    let last = messages.iter().rposition(is_output)?;
    let mut start = last;
    while start > 0 && is_output(&messages[start - 1]) && !messages[start - 1].is_bridge() {
        start -= 1;
    }
    Some(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic() {
        // The last request: 3 messages (10 + 20 + 30) and 7 framing tokens: 67
        // estimated, 80 reported. Then 2 messages (5 + 8) appended.
        let a = Anchor::new(&[10, 20, 30, 5, 8], 7, 3, 80);
        assert_eq!(a.estimated, 67);
        assert_eq!(a.pure_t_est, 80);
        assert_eq!(a.t_est, 93);
        assert_eq!(a.correction(), 13);
        assert_eq!(a.scale(), 93.0 / 80.0);
        assert_eq!(
            Anchor::new(&[10, 20, 30], 0, 3, 30).scale(),
            1.0,
            "over: not credited"
        );
        assert_eq!(a.error, Some(-0.1625));
        // Covering more than there is covers everything.
        let all = Anchor::new(&[10, 20], 3, 9, 40);
        assert_eq!((all.covered, all.t_est, all.error), (2, 40, Some(-0.175)));
        assert_eq!(Anchor::new(&[1], 0, 1, 0).error, None);
    }

    #[test]
    fn the_last_reply_starts_where_the_model_output_run_does() {
        let m = [
            Message::system("s"),
            Message::user("q"),
            Message::assistant("a"),
            Message::user("q2"),
            Message::assistant("a2"),
            Message::assistant("a3"),
        ];
        assert_eq!(covered_before_last_reply(&m), Some(4));
        assert_eq!(covered_before_last_reply(&m[..4]), Some(2));
        assert_eq!(covered_before_last_reply(&m[..2]), None);
    }
}
