//! compact's own summary request, priced as if the summarizer were a model
//! (`summarizer.kind: openai`), under both `summarizer.prompt` values
//! ([`Options::summary_prompts`](super::Options::summary_prompts)). The
//! replay runs the extractive summarizer, so the compactions (when, what
//! is folded, the summary's size) are the same under both; only the
//! request differs:
//!
//! - `fresh`: the summarizer's templates, then the folded span (the
//!   agent's leading instructions left out, tool outputs clipped to
//!   `summarizer.tool_output_max_chars`), the previous summary among it:
//!   all plain input.
//! - `agent_prefix`: the agent's messages up to the last folded one, as
//!   the provider received them, then the instruction (the templates and
//!   [`AGENT_PREFIX_INTRO`]): on the OpenAI rule, the leading tokens it
//!   shares with the agent's previous request are read from the cache. The
//!   summarizer speaks chat completions only, so on the Anthropic rules it
//!   sends the fresh prompt; so does a prefix that does not fit
//!   `summarizer.context_window`.
//!
//! Both leave out the facts list (the same in both) and count the
//! completion at the summary's tokens. The agent's own calls are not
//! changed: the caches are read, never written.
use compact_middleware::Message;
use compact_middleware::estimate::Estimator;
use compact_middleware::invariants::is_summary;
use compact_middleware::model::Role;
use compact_middleware::price::CallTokens;
use compact_middleware::summarize::{AGENT_PREFIX_INTRO, Templates};
use compact_middleware::tokens::REPLY_PRIMING;

use super::cache::openai_cached;
use super::{Call, Meter};

/// The sizes the two prompts add to what they carry.
pub(super) struct Prompts {
    /// The `system` and `task_state` templates.
    templates: usize,
    /// The agent-prefix request's opening.
    intro: usize,
    /// `summarizer.tool_output_max_chars`.
    clip_chars: usize,
    /// `summarizer.context_window`, less the 5% margin and the framing the
    /// summarizer keeps free.
    room: usize,
}

impl Prompts {
    pub(super) fn new(e: &Estimator, config: &compact_middleware::config::Config) -> Self {
        let t = Templates::builtin();
        let s = &config.summarizer;
        Self {
            templates: e.count_text(&t.system) + e.count_text(&t.task_state),
            intro: e.count_text(AGENT_PREFIX_INTRO),
            clip_chars: s.tool_output_max_chars,
            room: ((s.context_window as f64 * 0.95) as usize).saturating_sub(16),
        }
    }
}

/// A call all of whose input is plain.
fn plain(input: usize, output: usize) -> Call {
    let t = CallTokens {
        input,
        output,
        ..CallTokens::default()
    };
    Call {
        prompt: input,
        output,
        tokens: [t; 3],
        ..Call::default()
    }
}

/// The (`fresh`, `agent_prefix`) requests of the compaction that turned
/// `sent` into `output` with a summary of `summary_tokens`; `None` when
/// the output holds no summary or the folded span cannot be placed.
pub(super) fn calls(
    meter: &Meter,
    sent: &[Message],
    output: &[Message],
    summary_tokens: usize,
    prompts: &Prompts,
) -> Option<(Call, Call)> {
    // The messages after the summary are the kept tail, the last ones of
    // `sent`: what precedes them was folded (or pinned).
    let si = output.iter().position(is_summary)?;
    let tail = output.len() - si - 1;
    let last = sent.len().checked_sub(tail + 1)?;
    let prefix = &sent[..=last];
    let lead = prefix
        .iter()
        .take_while(|m| matches!(m.role(), Role::System | Role::Developer))
        .count();
    let span: usize = prefix[lead..]
        .iter()
        .map(|m| {
            let tokens = meter.estimator.count_message(m);
            let chars = m.plain_text().chars().count();
            if m.role() == Role::Tool && chars > prompts.clip_chars {
                tokens * prompts.clip_chars / chars
            } else {
                tokens
            }
        })
        .sum();
    let fresh = plain(prompts.templates + span, summary_tokens);
    let mut req = meter.request(prefix);
    // The instruction message follows the agent's messages.
    req.trailer = prompts.templates + prompts.intro + REPLY_PRIMING;
    let total = req.tokens();
    if total + summary_tokens > prompts.room {
        return Some((fresh, fresh));
    }
    let e = meter.estimator.clone();
    let count = move |s: &str| e.count_text(s);
    let cached = meter.last.as_ref().map_or(0, |prev| {
        openai_cached(req.shared_with(prev, &count).tokens).min(total)
    });
    let mut prefixed = fresh;
    prefixed.prompt = total;
    prefixed.tokens[0] = CallTokens {
        input: total - cached,
        cache_read: cached,
        output: summary_tokens,
        ..CallTokens::default()
    };
    Some((fresh, prefixed))
}
