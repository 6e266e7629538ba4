//! The summary step's fallback chain (docs/design.md §5, "failure never destroys
//! history"), in one place:
//!
//! 1. the configured summarizer; a summary is committed only if it is
//!    non-empty, within its budget and smaller than what it replaces; the
//!    facts of the ledger it leaves out are then added after its text, as
//!    many as fit by rank (never a reason to fall back);
//! 2. over budget: retried with `max_tokens` halved, at most twice;
//! 3. a refusal: retried once with the `brief` strategy;
//! 4. anything else (or the above exhausted, or the circuit breaker open):
//!    the deterministic extractive summary;
//! 5. an extractive summary that does not fit either: pruning-only (no
//!    summary; the span is dropped, the archive keeps it).
//!
//! Every step down is a [`Fallback`] record, which the manager turns into a
//! `compact.error` event carrying `fallback`.
use crate::summarize::{
    ExtractiveSummarizer, Strategy, SummarizeError, Summarizer, Summary, SummaryRequest,
};

use super::Fallback;

/// Halvings of `max_tokens` after an over-budget summary.
pub(crate) const MAX_HALVINGS: usize = 2;

/// What the chain produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The committed summary and the name of the summarizer that wrote it.
    pub summary: Option<(Summary, String)>,
    /// The strategy the committed summary was written with.
    pub strategy: Strategy,
    /// Every step down, in order.
    pub fallbacks: Vec<Fallback>,
    /// The configured (non-extractive) summarizer was tried and produced
    /// nothing usable: counts towards the circuit breaker.
    pub primary_failed: bool,
    /// Lines of the committed model summary that repeated tool text
    /// reading as orders, replaced by a note (`summarize/guard.rs`).
    pub neutralized: Vec<crate::summarize::Neutralized>,
}

/// Checks a summary against its budget and what it replaces.
pub(crate) fn validate(
    s: &Summary,
    max_tokens: usize,
    replaced_tokens: usize,
    has_input: bool,
) -> Result<(), SummarizeError> {
    if s.text.trim().is_empty() && has_input && max_tokens > 0 {
        return Err(SummarizeError::Empty);
    }
    if s.tokens > max_tokens {
        return Err(SummarizeError::OverBudget {
            tokens: s.tokens,
            max: max_tokens,
        });
    }
    if replaced_tokens > 0 && s.tokens >= replaced_tokens {
        return Err(SummarizeError::NotSmaller {
            tokens: s.tokens,
            replaced: replaced_tokens,
        });
    }
    Ok(())
}

/// A model summary keeps the model's text. The facts of the ledger it
/// leaves out are added after it, under a header of their own, by the
/// extractive summary's rule (each at its key, the least important dropped
/// when they do not all fit, then grown while they fit); the ones that do
/// not fit are reported as dropped. Missing facts are never a reason to
/// throw the model's answer away: the user paid for it.
pub(crate) fn keep_facts(mut s: Summary, req: &SummaryRequest) -> Summary {
    let Some(ledger) = &req.ledger else {
        return s;
    };
    let done = crate::summarize::complete_model_summary(ledger, req, &s.text);
    if done.must_dropped > 0 {
        tracing::debug!(
            must = done.must,
            missing = done.must_missing,
            dropped = done.must_dropped,
            "model summary kept; some facts it left out did not fit beside it"
        );
    }
    s.text = done.text;
    s.tokens = done.tokens;
    s.facts = Some(done.report);
    s
}

fn record(out: &mut Vec<Fallback>, e: &SummarizeError, fallback: &str) {
    out.push(Fallback {
        error_type: e.kind().to_owned(),
        message: e.to_string(),
        fallback: fallback.to_owned(),
    });
}

/// Runs the chain for `req`. `replaced_tokens` is what the new summary
/// replaces (span plus previous summary); `primary_disabled` is the open
/// circuit breaker.
pub async fn summarize_with_fallbacks(
    summarizer: &dyn Summarizer,
    req: &SummaryRequest,
    replaced_tokens: usize,
    primary_disabled: bool,
) -> Outcome {
    let mut out = Outcome {
        summary: None,
        strategy: req.strategy,
        fallbacks: Vec::new(),
        primary_failed: false,
        neutralized: Vec::new(),
    };
    let has_input = !req.entries.is_empty();
    let is_primary = summarizer.name() != "extractive";
    if is_primary && primary_disabled {
        out.fallbacks.push(Fallback {
            error_type: "CircuitOpen".into(),
            message: format!(
                "{} skipped: circuit breaker open after consecutive failures",
                summarizer.name()
            ),
            fallback: "extractive".into(),
        });
    } else if is_primary {
        let mut attempt = req.clone();
        let mut halvings = 0;
        let mut brief_tried = false;
        loop {
            let result = match summarizer.summarize(&attempt).await {
                Ok(s) => {
                    // Checked before the budget: a note may be longer than
                    // the line it stands for.
                    let (s, held) = crate::summarize::guard_model_summary(
                        s,
                        &req.entries,
                        req.ledger.as_deref(),
                    );
                    validate(&s, req.max_tokens, replaced_tokens, has_input).map(|()| {
                        out.neutralized.extend(held);
                        keep_facts(s, req)
                    })
                }
                Err(e) => Err(e),
            };
            match result {
                Ok(s) => {
                    out.strategy = attempt.strategy;
                    out.summary = Some((s, summarizer.name().to_owned()));
                    return out;
                }
                Err(e @ SummarizeError::OverBudget { .. })
                    if halvings < MAX_HALVINGS && attempt.max_tokens > 1 =>
                {
                    halvings += 1;
                    attempt.max_tokens /= 2;
                    record(&mut out.fallbacks, &e, "retry_half_max_tokens");
                }
                Err(e @ SummarizeError::Refusal(_))
                    if !brief_tried && attempt.strategy != Strategy::Brief =>
                {
                    brief_tried = true;
                    attempt.strategy = Strategy::Brief;
                    record(&mut out.fallbacks, &e, "brief");
                }
                Err(e) => {
                    tracing::warn!(summarizer = summarizer.name(), error = %e, "summary not committed; falling back to extractive");
                    record(&mut out.fallbacks, &e, "extractive");
                    out.primary_failed = true;
                    break;
                }
            }
        }
    } else {
        // The extractive summarizer configured as the primary: no chain.
        return finish_extractive(out, req);
    }
    finish_extractive(out, req)
}

/// The last two steps: the extractive summary, else pruning-only.
fn finish_extractive(mut out: Outcome, req: &SummaryRequest) -> Outcome {
    let s = ExtractiveSummarizer.summarize_sync(req);
    // The extractive body is verbatim facts from the span and always fits
    // by construction (it may be empty when nothing fits): only the budget
    // disqualifies it.
    match validate(&s, req.max_tokens, 0, false) {
        Ok(()) => {
            out.strategy = req.strategy;
            out.summary = Some((s, "extractive".to_owned()));
        }
        Err(e) => record(&mut out.fallbacks, &e, "pruning_only"),
    }
    out
}
