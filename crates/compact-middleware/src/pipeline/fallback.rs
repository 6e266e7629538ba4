//! The summary step's fallback chain (docs/design.md §5, "failure never destroys
//! history"), in one place:
//!
//! 1. the configured summarizer; a summary is committed only if it is
//!    non-empty, within its budget and smaller than what it replaces;
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

/// A model summary must keep every fact the extractive summary would
/// keep: the missing ones are appended under `Facts:`; when that does not
/// fit the budget the summary is rejected (the chain falls back to the
/// extractive one). So a model summary never retains less.
pub(crate) fn keep_facts(mut s: Summary, req: &SummaryRequest) -> Result<Summary, SummarizeError> {
    let Some(ledger) = &req.ledger else {
        return Ok(s);
    };
    let must = crate::summarize::must_keep(ledger, req);
    let missing: Vec<&String> = must.iter().filter(|f| !carries(&s.text, f)).collect();
    if missing.is_empty() {
        return Ok(s);
    }
    let mut text = s.text.trim_end().to_owned();
    text.push_str("\nFacts:");
    for f in &missing {
        text.push_str("\n- ");
        text.push_str(f);
    }
    let tokens = (req.count_tokens)(&text);
    if tokens > req.max_tokens {
        return Err(SummarizeError::LostFacts {
            missing: missing.len(),
        });
    }
    s.text = text;
    s.tokens = tokens;
    Ok(s)
}

/// Whether `text` carries the fact `line`: every identifier, quantity and
/// number of the fact appears in it; a fact without any must appear whole.
fn carries(text: &str, line: &str) -> bool {
    let keys = crate::summarize::fact_keys(line);
    if keys.is_empty() {
        return text.contains(line);
    }
    keys.iter().all(|k| text.contains(k.as_str()))
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
                Ok(s) => validate(&s, req.max_tokens, replaced_tokens, has_input)
                    .and_then(|()| keep_facts(s, req)),
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
