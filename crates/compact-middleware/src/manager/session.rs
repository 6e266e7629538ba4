//! Per-session state: the rolling summary and what the last call looked
//! like, so both ways agents call us are cheap.

use crate::model::Message;

/// What the manager remembers about one session between calls.
#[derive(Debug, Default)]
pub struct SessionState {
    /// Version of the current summary (`0` before the first one).
    pub version: u32,
    /// Body of the current summary.
    pub summary_body: Option<String>,
    /// Content hashes of the current summary message, as we emitted it and
    /// as the provider-facing output carries it (without `meta`).
    pub summary_hashes: Vec<u128>,
    /// Consecutive failures of the configured (non-extractive) summarizer.
    pub consecutive_failures: u32,
    /// Compactions so far (the archive step number).
    pub step: u32,
    /// Hashes of the raw input of the last call.
    pub last_raw: Vec<u128>,
    /// Our output for that call, and its hashes as we returned it and as
    /// its provider-facing copy (an agent may keep either).
    pub last_out: Vec<Message>,
    pub last_out_hashes: Vec<u128>,
    pub last_out_provider_hashes: Vec<u128>,
    /// The trace event for this session was sent.
    pub trace_sent: bool,
    /// Circuit breaker: the configured summarizer is skipped until then.
    pub breaker_until: Option<std::time::Instant>,
    /// The user/agent key of the cross-session memory (seed 000); the
    /// configured agent name when unset.
    pub memory_key: Option<String>,
    /// The cross-session memory injected into this session, read once when
    /// the session starts (`Some(None)`: read, there was none).
    pub cross_session: Option<Option<String>>,
}

/// How the raw input of a call relates to the previous call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Continuation {
    /// The agent sent its full raw history again (mode b): the first `n` raw
    /// messages are the ones we already compacted.
    RawPrefix(usize),
    /// The agent kept our output and appended to it (mode a).
    OutputPrefix(usize),
    /// Neither: a new session, or a history we do not recognise.
    Fresh,
}

impl SessionState {
    /// Recognises whether `hashes` (the raw input) continues the last call.
    pub fn continuation(&self, hashes: &[u128]) -> Continuation {
        let starts_with = |prefix: &[u128]| !prefix.is_empty() && hashes.starts_with(prefix);
        let out_n = self.last_out_hashes.len();
        let continues_output = out_n > 0
            && hashes.len() >= out_n
            && (0..out_n).all(|i| {
                hashes[i] == self.last_out_hashes[i]
                    || self.last_out_provider_hashes.get(i) == Some(&hashes[i])
            });
        if starts_with(&self.last_raw) && self.last_raw != self.last_out_hashes {
            Continuation::RawPrefix(self.last_raw.len())
        } else if continues_output {
            Continuation::OutputPrefix(out_n)
        } else {
            Continuation::Fresh
        }
    }

    /// The index of our current summary message in `messages`, if present.
    pub fn find_summary(&self, messages: &[Message]) -> Option<usize> {
        if self.summary_hashes.is_empty() {
            return None;
        }
        messages
            .iter()
            .position(|m| self.summary_hashes.contains(&m.content_hash()))
    }

    /// Whether the circuit breaker skips the configured summarizer now:
    /// `max_failures` consecutive failures and the cooldown not over. After
    /// the cooldown one attempt is let through (half-open).
    pub fn breaker_open(&self, max_failures: usize, now: std::time::Instant) -> bool {
        self.consecutive_failures as usize >= max_failures
            && self.breaker_until.is_some_and(|until| now < until)
    }

    /// Counts a summary attempt of the configured summarizer: a failure
    /// (re)opens the breaker once `max_failures` is reached, a committed
    /// summary of its own closes it.
    pub fn record_summary_outcome(
        &mut self,
        primary_failed: bool,
        primary_succeeded: bool,
        max_failures: usize,
        cooldown: std::time::Duration,
        now: std::time::Instant,
    ) {
        if primary_failed {
            self.consecutive_failures += 1;
            if self.consecutive_failures as usize >= max_failures {
                self.breaker_until = Some(now + cooldown);
            }
        } else if primary_succeeded {
            self.consecutive_failures = 0;
            self.breaker_until = None;
        }
    }

    /// Records a new summary message.
    pub fn set_summary(&mut self, message: &Message, version: u32, body: String) {
        self.version = version;
        self.summary_body = Some(body);
        self.summary_hashes = vec![message.content_hash(), message.provider_hash()];
    }
}
