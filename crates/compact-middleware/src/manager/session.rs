//! One session's state: everything the manager remembers about a session
//! between calls, as one record behind one lock.
//!
//! Keeping it in one place is what lets `end_session` forget a session
//! completely, and what a session store persists.

use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::archive::SessionId;
use crate::model::Message;
use crate::redact::LiteralScrub;
use crate::summarize::FactLedger;

/// Most secret fragments remembered per session (a memory bound).
const MAX_FRAGMENTS: usize = 10_000;

/// What the manager remembers about one session.
#[derive(Debug)]
pub struct Session {
    id: SessionId,
    /// The rolling summary now in the context, if any.
    pub(super) summary: Option<SummaryState>,
    /// The facts of everything that left the context so far.
    pub(super) ledger: FactLedger,
    /// What the last call received and returned.
    pub(super) last: LastCall,
    /// Compactions archived so far (the archive's step number); `None`
    /// until read from the archive, so numbering survives a restart.
    pub(super) step: Option<u32>,
    pub(super) breaker: Breaker,
    /// The trace event that opens this session was sent.
    pub(super) trace_sent: bool,
    /// The user/agent key of the cross-session memory; the configured
    /// agent name when unset.
    pub(super) memory_key: Option<String>,
    /// The cross-session memory injected into this session, read once
    /// (`Some(None)`: read, there was none).
    pub(super) cross_session: Option<Option<String>>,
    /// Secret fragments seen in messages that left the context, scrubbed
    /// literally from derived text (summaries, events).
    pub(super) secrets: Secrets,
    /// The last observed relative error of the pure token estimate against the
    /// provider's reported usage (`crate::estimate::Anchor::error`).
    pub(super) estimate_error: Option<f64>,
    /// The conversation's strategy layer (docs/design.md §5, precedence).
    pub(super) conversation: Option<serde_json::Value>,
    /// What the last preflight reported, and the layers of its output.
    pub(super) last_report: Option<super::status::LastOutcome>,
    /// The version of the stored record this state was loaded from or
    /// saved as (a session store's etag); `None` when never stored.
    pub(super) etag: Option<crate::state::Etag>,
    /// How fast the context grows and how deep compaction went
    /// (`policy.cache: auto`).
    pub(super) pace: crate::cache::pace::Pace,
}

/// The rolling summary message we put in the context.
#[derive(Debug, Clone)]
pub(super) struct SummaryState {
    pub(super) version: u32,
    pub(super) body: String,
    /// Content hashes of the message as we emitted it and as its
    /// provider-facing copy (an agent may keep either).
    pub(super) hashes: [u128; 2],
}

/// The last call: its raw input and our output, as hashes (and the output
/// itself, which replaces a resent raw prefix).
///
/// The output is remembered without the Anthropic breakpoints compact put
/// on it (`marks` says where they were), so an agent that sends it back
/// with them is recognised once they are taken off again.
#[derive(Debug, Default)]
pub(super) struct LastCall {
    pub(super) raw: Vec<u128>,
    pub(super) out: Vec<Message>,
    pub(super) out_hashes: Vec<u128>,
    pub(super) out_provider_hashes: Vec<u128>,
    pub(super) marks: Vec<OurMark>,
}

/// A breakpoint compact placed on the last output: the marked message's
/// content hashes (as returned, and as its provider copy, which an agent
/// may keep instead) and the marker's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct OurMark {
    /// The message's place in the output.
    pub(super) index: usize,
    pub(super) hashes: [u128; 2],
    pub(super) mark: crate::model::BreakpointMark,
}

/// The circuit breaker of the configured summarizer.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Breaker {
    pub(super) consecutive_failures: u32,
    /// The summarizer is skipped until then (wall clock, so the state can
    /// outlive a process).
    pub(super) open_until: Option<SystemTime>,
}

#[derive(Debug, Default)]
pub(super) struct Secrets {
    fragments: HashSet<String>,
    scrub: LiteralScrub,
}

/// How this call's input relates to the previous call of the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Continuation {
    /// The full raw history again (the agent resends everything): our
    /// previous output replaced the prefix it had already compacted.
    RawPrefix,
    /// Our previous output plus new messages (the agent kept our output).
    OutputPrefix,
    /// Not recognised: a new session or a rewritten history.
    Fresh,
}

/// The input of one call as the pipeline sees it.
#[derive(Debug)]
pub(super) struct Recognised {
    /// The raw input with a recognised raw prefix replaced by our output.
    pub(super) messages: Vec<Message>,
    pub(super) raw_hashes: Vec<u128>,
    pub(super) continuation: Continuation,
    /// Raw messages whose compacted form was reused.
    pub(super) reused: usize,
    /// Where our current summary sits in `messages`.
    pub(super) summary_index: Option<usize>,
    /// A provider compaction the previous call did not carry (`trigger::fresh_provider_compaction`).
    pub(super) fresh_compaction: Option<usize>,
}

impl Session {
    pub(super) fn new(id: SessionId) -> Self {
        Session {
            id,
            summary: None,
            ledger: FactLedger::default(),
            last: LastCall::default(),
            step: None,
            breaker: Breaker::default(),
            trace_sent: false,
            memory_key: None,
            cross_session: None,
            secrets: Secrets::default(),
            estimate_error: None,
            conversation: None,
            last_report: None,
            etag: None,
            pace: crate::cache::pace::Pace::default(),
        }
    }

    /// The session's id.
    pub fn id(&self) -> &SessionId {
        &self.id
    }

    /// Whether anything is remembered: a stored record, a call, a summary
    /// or a conversation layer.
    pub fn is_known(&self) -> bool {
        self.etag.is_some()
            || self.summary.is_some()
            || !self.last.raw.is_empty()
            || self.conversation.is_some()
    }

    /// The current summary's version (`0` before the first one).
    pub fn summary_version(&self) -> u32 {
        self.summary.as_ref().map_or(0, |s| s.version)
    }

    /// Takes off the breakpoints compact placed on the last output from the
    /// messages of `messages` that are those marked messages sent back (at
    /// the place they had: an agent that keeps the output appends to it),
    /// so that they read as the output remembered. Returns how many.
    pub(super) fn take_our_marks(&self, messages: &mut [Message]) -> usize {
        let mut n = 0;
        for o in &self.last.marks {
            let Some(m) = messages.get_mut(o.index) else {
                continue;
            };
            let h = m.content_hash();
            if o.hashes.contains(&h) && m.remove_cache_breakpoint(o.mark) {
                n += 1;
            }
        }
        n
    }

    /// Recognises whether `raw` continues the last call, and substitutes
    /// our last output for a resent raw prefix.
    pub(super) fn recognise(&self, raw: Vec<Message>) -> Recognised {
        let raw_hashes: Vec<u128> = raw.iter().map(Message::content_hash).collect();
        let last = &self.last;
        let out_n = last.out_hashes.len();
        let continues_output = out_n > 0
            && raw_hashes.len() >= out_n
            && (0..out_n).all(|i| {
                raw_hashes[i] == last.out_hashes[i]
                    || last.out_provider_hashes.get(i) == Some(&raw_hashes[i])
            });
        let resent_raw = !last.raw.is_empty()
            && raw_hashes.starts_with(&last.raw)
            && last.raw != last.out_hashes;
        let (messages, continuation, reused) = if resent_raw {
            let n = last.raw.len();
            let mut messages = last.out.clone();
            messages.extend(raw.into_iter().skip(n));
            (messages, Continuation::RawPrefix, n)
        } else if continues_output {
            (raw, Continuation::OutputPrefix, out_n)
        } else {
            (raw, Continuation::Fresh, 0)
        };
        let mut recognised = Recognised {
            messages,
            raw_hashes,
            continuation,
            reused,
            summary_index: None,
            fresh_compaction: None,
        };
        self.locate(&mut recognised);
        recognised
    }

    /// Finds our summary and a fresh provider compaction in `input.messages` (again,
    /// after repair moved them).
    pub(super) fn locate(&self, input: &mut Recognised) {
        let messages = &input.messages;
        input.summary_index = self.summary.as_ref().and_then(|s| {
            messages
                .iter()
                .position(|m| s.hashes.contains(&m.content_hash()))
        });
        input.fresh_compaction = if messages.iter().any(|m| m.kind().compaction) {
            let last = &self.last;
            let seen: Option<std::collections::HashSet<u128>> = (!last.raw.is_empty()).then(|| {
                last.raw
                    .iter()
                    .chain(&last.out_hashes)
                    .chain(&last.out_provider_hashes)
                    .copied()
                    .collect()
            });
            crate::trigger::fresh_provider_compaction(messages, seen.as_ref())
        } else {
            None
        };
    }

    /// Remembers what this call returned, for recognising the next one.
    /// The output itself is kept only when it differs from the input: a
    /// resent raw prefix is then replaced by it; an unchanged one needs
    /// nothing but its hashes.
    pub(super) fn remember(&mut self, raw_hashes: Vec<u128>, output: &[Message]) {
        let out_hashes: Vec<u128> = output.iter().map(Message::content_hash).collect();
        let out = if out_hashes == raw_hashes {
            Vec::new()
        } else {
            output.to_vec()
        };
        self.last = LastCall {
            raw: raw_hashes,
            out,
            out_provider_hashes: output.iter().map(Message::provider_hash).collect(),
            out_hashes,
            marks: Vec::new(),
        };
    }

    /// Records the summary message a compaction committed.
    pub(super) fn set_summary(&mut self, message: &Message, version: u32, body: &str) {
        self.summary = Some(SummaryState {
            version,
            body: body.to_owned(),
            hashes: [message.content_hash(), message.provider_hash()],
        });
    }
}

impl Breaker {
    /// Whether the configured summarizer is skipped now: `max_failures`
    /// consecutive failures and the cooldown not over. After the cooldown
    /// one attempt is let through (half-open).
    pub(super) fn is_open(&self, max_failures: usize, now: SystemTime) -> bool {
        self.consecutive_failures as usize >= max_failures
            && self.open_until.is_some_and(|until| now < until)
    }

    /// Counts a summary attempt of the configured summarizer: a failure
    /// (re)opens the breaker once `max_failures` is reached, a committed
    /// summary of its own closes it.
    pub(super) fn record(
        &mut self,
        primary_failed: bool,
        primary_succeeded: bool,
        max_failures: usize,
        cooldown: Duration,
        now: SystemTime,
    ) {
        if primary_failed {
            self.consecutive_failures += 1;
            if self.consecutive_failures as usize >= max_failures {
                self.open_until = Some(now + cooldown);
            }
        } else if primary_succeeded {
            *self = Breaker::default();
        }
    }
}

impl Secrets {
    /// The fragments learned so far, with their scrubber rebuilt (a session
    /// loaded from a store).
    pub(super) fn from_fragments(fragments: Vec<String>) -> Self {
        let fragments: HashSet<String> = fragments.into_iter().collect();
        let scrub = LiteralScrub::new(&fragments);
        Secrets { fragments, scrub }
    }

    /// The fragments, sorted (what a store keeps).
    pub(super) fn fragments(&self) -> Vec<String> {
        let mut v: Vec<String> = self.fragments.iter().cloned().collect();
        v.sort();
        v
    }

    /// Learns `found` fragments and returns the scrubber over all of them.
    pub(super) fn learn(&mut self, session: &str, found: Vec<String>) -> LiteralScrub {
        let before = self.fragments.len();
        for f in found {
            if self.fragments.len() >= MAX_FRAGMENTS {
                tracing::warn!(
                    session,
                    "too many distinct secrets to remember; derived text may keep some"
                );
                break;
            }
            self.fragments.insert(f);
        }
        if self.fragments.len() != before {
            self.scrub = LiteralScrub::new(&self.fragments);
        }
        self.scrub.clone()
    }

    pub(super) fn scrub(&self) -> &LiteralScrub {
        &self.scrub
    }
}
