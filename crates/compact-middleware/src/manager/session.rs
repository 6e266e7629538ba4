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

    /// Records a new summary message.
    pub fn set_summary(&mut self, message: &Message, version: u32, body: String) {
        self.version = version;
        self.summary_body = Some(body);
        self.summary_hashes = vec![message.content_hash(), message.provider_hash()];
    }
}
