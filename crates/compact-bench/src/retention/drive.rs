//! One run: a transcript driven turn by turn through a real
//! `CompactManager`, in one calling mode, and what survived at the end.

use std::collections::BTreeMap;

use compact_middleware::{CompactError, CompactManager, Message, PreflightOutcome};
use serde::Serialize;

use crate::corpus::{ProbeMatch, Transcript};
use crate::probe::{Haystack, flatten};

/// The header every summary message starts with (`COMPACT-SUMMARY vN`):
/// a message holding it twice nests a previous summary.
pub const SUMMARY_MARK: &str = "COMPACT-SUMMARY v";

/// How the agent sends its history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallingMode {
    /// (a) The agent keeps the compacted output and appends the new turn.
    FedBack,
    /// (b) The agent resends its full raw history every call.
    RawResent,
}

impl CallingMode {
    /// Both modes.
    pub const ALL: [CallingMode; 2] = [CallingMode::FedBack, CallingMode::RawResent];

    /// The snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            CallingMode::FedBack => "fed_back",
            CallingMode::RawResent => "raw_resent",
        }
    }
}

/// What one run did and what it kept.
#[derive(Debug, Clone, Default)]
pub struct RunOutcome {
    /// Preflight calls (one per turn).
    pub preflights: usize,
    /// Preflights that compacted (some tier ran).
    pub compactions: usize,
    /// Preflights that wrote a summary.
    pub summaries: usize,
    /// `InsufficientBudget` errors; the agent then sent its history as it was.
    pub insufficient_budget: usize,
    /// Any other error.
    pub other_errors: usize,
    /// Preflight outputs with a message holding [`SUMMARY_MARK`] more than
    /// once (a summary nesting a previous one): must be 0.
    pub nested_summaries: usize,
    /// Tokens of the summary in the final context, if there is one.
    pub final_summary_tokens: Option<usize>,
    /// The largest summary of the run, in tokens.
    pub max_summary_tokens: usize,
    /// `policy.summary_max_pct` of the window.
    pub summary_cap: usize,
    /// Tokens of the final context.
    pub final_tokens: usize,
    /// How the manager recognised each input (`raw_prefix`,
    /// `output_prefix`, `fresh`): in raw-resent mode, `raw_prefix` shows
    /// the resent history was matched to the previous output.
    pub continuations: BTreeMap<String, usize>,
    /// Per fact of the transcript, in order: all its probes on one line of
    /// the final context.
    pub retained: Vec<bool>,
    /// Per fact: a supersession whose replaced statement is in the final
    /// context while the new one is not (the context states a stale value).
    pub stale: Vec<bool>,
    /// The final context fits the window. A run whose last call failed
    /// leaves what the agent sent, which may not: then the model cannot be
    /// called with it, and no fact counts as retained.
    pub final_fits: bool,
    /// The final context.
    pub context: Vec<Message>,
}

/// Which facts `context` retains: all probes on one line of its flattened
/// text. Returns (retained, stale) per fact.
pub fn check(context: &[Message], t: &Transcript) -> (Vec<bool>, Vec<bool>) {
    let text = flatten(context);
    let hay = Haystack::new(&text);
    t.facts
        .iter()
        .map(|f| {
            let kept = match t.probe_match {
                ProbeMatch::Line => hay.has_on_one_line(&f.probes),
                ProbeMatch::Substring => {
                    f.probes.first().is_some_and(|p| text.contains(p.as_str()))
                }
            };
            let stale = !kept
                && f.superseded
                    .as_ref()
                    .is_some_and(|old| hay.has_on_one_line(old));
            (kept, stale)
        })
        .unzip()
}

fn nests_summaries(messages: &[Message]) -> bool {
    messages
        .iter()
        .any(|m| m.plain_text().matches(SUMMARY_MARK).count() > 1)
}

/// Drives `t` through `manager` as session `session`: one preflight per
/// turn with the whole turn appended, as `compact replay` does. In
/// [`CallingMode::FedBack`] the next call is the previous output plus the
/// new turn; in [`CallingMode::RawResent`] it is the whole raw history. A
/// failed preflight leaves the agent with what it sent. Each call's result
/// goes to `seen` with what the agent sent; returns the context the agent
/// holds after the last call.
pub async fn replay(
    manager: &CompactManager,
    session: &str,
    t: &Transcript,
    mode: CallingMode,
    mut seen: impl FnMut(&[Message], &Result<PreflightOutcome, CompactError>),
) -> Vec<Message> {
    let mut context: Vec<Message> = t.opening.clone();
    let mut raw: Vec<Message> = t.opening.clone();
    for turn in &t.turns {
        raw.extend(turn.iter().cloned());
        context.extend(turn.iter().cloned());
        let sent = match mode {
            CallingMode::FedBack => std::mem::take(&mut context),
            CallingMode::RawResent => raw.clone(),
        };
        let result = manager.preflight(session, sent.clone()).await;
        seen(&sent, &result);
        context = match result {
            Ok(o) => o.messages,
            Err(e) => {
                tracing::debug!(session, error = %e, "preflight failed; the agent keeps what it sent");
                sent
            }
        };
    }
    context
}

/// [`replay`]s `t` and measures what the run did and what it kept.
pub async fn measure(
    manager: &CompactManager,
    session: &str,
    t: &Transcript,
    mode: CallingMode,
) -> RunOutcome {
    let policy = &manager.config().policy;
    let window = manager.limits().max_tokens;
    let mut out = RunOutcome {
        summary_cap: (policy.summary_max_pct * window as f64) as usize,
        ..RunOutcome::default()
    };
    let mut last_tokens = None;
    let context = replay(manager, session, t, mode, |_, result| {
        out.preflights += 1;
        match result {
            Ok(o) => {
                let r = &o.report;
                let continuation = serde_json::to_value(r.continuation)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                *out.continuations.entry(continuation).or_default() += 1;
                if r.triggered && !r.tiers.is_empty() {
                    out.compactions += 1;
                }
                if let Some(tokens) = r.summary_tokens {
                    out.summaries += 1;
                    out.max_summary_tokens = out.max_summary_tokens.max(tokens);
                    out.final_summary_tokens = Some(tokens);
                }
                if nests_summaries(&o.messages) {
                    out.nested_summaries += 1;
                }
                last_tokens = Some(r.tokens_after);
            }
            Err(e) => {
                if matches!(e, CompactError::InsufficientBudget { .. }) {
                    out.insufficient_budget += 1;
                } else {
                    out.other_errors += 1;
                }
                last_tokens = None;
            }
        }
    })
    .await;
    // A summary the last call did not rewrite is still the one in context.
    if !context
        .iter()
        .any(|m| m.plain_text().starts_with(SUMMARY_MARK))
    {
        out.final_summary_tokens = None;
    }
    out.final_tokens = last_tokens.unwrap_or_else(|| manager.estimate(&context, &[]).t_est);
    (out.retained, out.stale) = check(&context, t);
    out.final_fits = out.final_tokens <= window;
    if !out.final_fits {
        out.retained.iter_mut().for_each(|k| *k = false);
    }
    out.context = context;
    out
}
