//! Other tools' compaction policies, simulated on the same sessions with the
//! same token counter, so that their prompt-cache cost can be set beside
//! compact's. Thresholds are those of their code (read, not copied):
//!
//! - [`Peer::LangChainLike`], after LangChain's `SummarizationMiddleware`
//!   with `trigger=("fraction", 0.8)` and its default `keep=("messages",
//!   20)`: when the request reaches 80% of the window, everything before
//!   the last 20 messages (moved earlier until no tool call is cut from its
//!   result) becomes one user message holding a summary; the agent's
//!   instructions are not part of its state and stay. Its summary request
//!   is a fresh prompt of at most 4,000 tokens of those messages plus the
//!   instructions (its `trim_tokens_to_summarize`).
//! - [`Peer::CodexLike`], after Codex's inline auto-compaction
//!   (`codex-rs/core/src/compact.rs`, the limit defaulting to 90% of the
//!   window): the history becomes the initial context, the most recent
//!   user messages (newest first, within 20,000 tokens; one that does not
//!   fit whole is cut to what is left, then the selection stops) and a
//!   user message holding the summary. Its summary request is the history
//!   as the agent last sent it plus an instruction, so it reads the warm
//!   cache.
//! - [`Peer::NoCompaction`]: the whole history every call.
//!
//! The summaries' text: compact's own extractive summarizer over what each
//! policy folds (its previous summary carried over), within compact's
//! summary cap (`policy.summary_max_pct` of the window). So a peer's
//! summary is as good as ours and as large as ours may be; what differs is
//! when the policy compacts and what it keeps.

use std::collections::HashMap;
use std::sync::Arc;

use compact_middleware::Message;
use compact_middleware::estimate::Estimator;
use compact_middleware::model::{ItemType, Role, groups};
use compact_middleware::summarize::{
    ExtractiveSummarizer, Strategy, SummaryEntry, SummaryRequest, TokenCountFn,
};
use compact_middleware::tokens::REPLY_PRIMING;

use crate::corpus::Transcript;

/// A peer policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Peer {
    /// LangChain's `SummarizationMiddleware` at 80%, keeping 20 messages.
    LangChainLike,
    /// Codex's auto-compaction at 90%: summary and recent user messages.
    CodexLike,
    /// Never compacts.
    NoCompaction,
}

impl Peer {
    /// Every peer.
    pub const ALL: [Peer; 3] = [Peer::LangChainLike, Peer::CodexLike, Peer::NoCompaction];

    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Peer::LangChainLike => "langchain_like",
            Peer::CodexLike => "codex_like",
            Peer::NoCompaction => "no_compaction",
        }
    }
}

/// LangChain's trigger, a share of the window.
pub const LANGCHAIN_TRIGGER: f64 = 0.8;
/// LangChain's default `keep`, in messages.
pub const LANGCHAIN_KEEP_MESSAGES: usize = 20;
/// LangChain trims what it sends to the summarizer to this many tokens.
pub const LANGCHAIN_SUMMARY_INPUT_TOKENS: usize = 4_000;
/// Codex's default auto-compaction limit, a share of the window.
pub const CODEX_TRIGGER: f64 = 0.9;
/// Codex keeps recent user messages up to this many tokens.
pub const CODEX_USER_MESSAGE_TOKENS: usize = 20_000;

/// Stand-ins for the peers' summary instructions and headers (our words,
/// of about their size).
const LANGCHAIN_PROMPT_TOKENS: usize = 380;
const LANGCHAIN_HEADER: &str = "Summary of the conversation so far:\n\n";
const CODEX_PROMPT: &str = "Your context window is nearly full. Write a handoff summary for the \
model that will continue this task: the goal, what was done and found, decisions, files and \
commands that matter, open problems and the next steps. Be complete and concise.";
const CODEX_HEADER: &str = "A previous model worked on this task and left this summary of what \
it did; continue from it.\n";

/// The summary request a compaction made (a model call of its own).
#[derive(Debug, Clone)]
pub enum SummaryCall {
    /// A new prompt: nothing of it is in the cache.
    Fresh {
        /// Input tokens.
        input: usize,
        /// Output tokens (the summary).
        output: usize,
    },
    /// The agent's own request plus an instruction: its prefix is the
    /// previous call's.
    OnHistory {
        /// The request.
        request: Vec<Message>,
        /// Output tokens (the summary).
        output: usize,
    },
}

/// One call a peer makes.
#[derive(Debug)]
pub struct PeerCall<'a> {
    /// What the provider receives.
    pub sent: &'a [Message],
    /// The policy rewrote the history before this call.
    pub compacted: bool,
    /// The summary request that compaction made first, if any.
    pub summary: Option<SummaryCall>,
}

/// What a peer needs to know.
#[derive(Clone)]
pub struct Settings {
    /// The context window, in tokens.
    pub window: usize,
    /// The summary's budget, in tokens (compact's cap at this window).
    pub summary_cap: usize,
    /// The counter (and count cache) compact uses.
    pub estimator: Estimator,
}

impl Settings {
    fn request_tokens(&self, messages: &[Message]) -> usize {
        messages
            .iter()
            .map(|m| self.estimator.count_message(m))
            .sum::<usize>()
            + REPLY_PRIMING
    }

    fn count_fn(&self) -> TokenCountFn {
        let e = self.estimator.clone();
        Arc::new(move |s: &str| e.count_text(s))
    }
}

/// Drives `t` turn by turn under `peer`: before each call the policy may
/// rewrite the history it keeps; `seen` gets every call. Returns the
/// context the agent holds after the last call.
pub fn replay(
    peer: Peer,
    t: &Transcript,
    s: &Settings,
    mut seen: impl FnMut(PeerCall<'_>),
) -> Vec<Message> {
    // The agent's instructions: the leading system and developer messages.
    let lead = t
        .opening
        .iter()
        .take_while(|m| matches!(m.role(), Role::System | Role::Developer))
        .count();
    let instructions: Vec<Message> = t.opening[..lead].to_vec();
    let mut history: Vec<Message> = t.opening[lead..].to_vec();
    // The body of the peer's summary when `history[0]` is one.
    let mut summary: Option<String> = None;
    let mut request: Vec<Message> = Vec::new();
    for turn in &t.turns {
        history.extend(turn.iter().cloned());
        let before: Vec<Message> = instructions.iter().chain(&history).cloned().collect();
        let tokens = s.request_tokens(&before);
        let mut call = None;
        match peer {
            Peer::NoCompaction => {}
            Peer::LangChainLike => {
                if tokens as f64 >= LANGCHAIN_TRIGGER * s.window as f64 {
                    call = langchain(&mut history, &mut summary, s);
                }
            }
            Peer::CodexLike => {
                if tokens as f64 >= CODEX_TRIGGER * s.window as f64 {
                    call = Some(codex(&before, &mut history, &mut summary, s));
                }
            }
        }
        request = instructions.iter().chain(&history).cloned().collect();
        seen(PeerCall {
            sent: &request,
            compacted: call.is_some(),
            summary: call,
        });
    }
    request
}

/// LangChain-like: fold everything before the last 20 messages (at a
/// point that cuts no tool call from its result) into the summary.
fn langchain(
    history: &mut Vec<Message>,
    summary: &mut Option<String>,
    s: &Settings,
) -> Option<SummaryCall> {
    let target = history.len().checked_sub(LANGCHAIN_KEEP_MESSAGES)?;
    let cutoff = groups(history)
        .iter()
        .map(|g| g.start)
        .filter(|&start| start <= target)
        .max()
        .unwrap_or(0);
    // The summary message alone before the cut: nothing new to fold.
    let from = usize::from(summary.is_some());
    if cutoff <= from {
        return None;
    }
    let folded = &history[from..cutoff];
    let input =
        s.request_tokens(folded).min(LANGCHAIN_SUMMARY_INPUT_TOKENS) + LANGCHAIN_PROMPT_TOKENS;
    let body = summarize(summary.as_deref(), folded, s);
    let output = s.estimator.count_text(&body);
    let mut next = vec![Message::user(format!("{LANGCHAIN_HEADER}{body}"))];
    next.extend(history[cutoff..].iter().cloned());
    *history = next;
    *summary = Some(body);
    Some(SummaryCall::Fresh { input, output })
}

/// Codex-like: the summary of the whole history after the recent user
/// messages. `before` is the request the history would have made (the
/// summary request extends it).
fn codex(
    before: &[Message],
    history: &mut Vec<Message>,
    summary: &mut Option<String>,
    s: &Settings,
) -> SummaryCall {
    let from = usize::from(summary.is_some());
    let mut request = before.to_vec();
    request.push(Message::user(CODEX_PROMPT));
    let body = summarize(summary.as_deref(), &history[from..], s);
    let output = s.estimator.count_text(&body);
    // Newest first, within the budget.
    let mut kept: Vec<String> = Vec::new();
    let mut left = CODEX_USER_MESSAGE_TOKENS;
    for m in history[from..].iter().rev() {
        if left == 0 {
            break;
        }
        if m.role() != Role::User || m.kind().item != ItemType::Message {
            continue;
        }
        let text = m.plain_text();
        let tokens = s.estimator.count_text(&text);
        if tokens <= left {
            kept.push(text);
            left -= tokens;
        } else {
            kept.push(cut_to(&text, left, s));
            break;
        }
    }
    kept.reverse();
    let mut next: Vec<Message> = kept.into_iter().map(Message::user).collect();
    next.push(Message::user(format!("{CODEX_HEADER}{body}")));
    *history = next;
    *summary = Some(body);
    SummaryCall::OnHistory { request, output }
}

/// The longest head of `text` within `tokens`.
fn cut_to(text: &str, tokens: usize, s: &Settings) -> String {
    let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
    let (mut lo, mut hi) = (0usize, bounds.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        let end = bounds.get(mid).copied().unwrap_or(text.len());
        if s.estimator.count_text(&text[..end]) <= tokens {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    text[..bounds.get(lo).copied().unwrap_or(text.len())].to_string()
}

/// compact's extractive summary of `span`, the previous body folded in,
/// within the cap.
fn summarize(previous: Option<&str>, span: &[Message], s: &Settings) -> String {
    let req = SummaryRequest {
        previous: previous.map(str::to_string),
        entries: entries(span),
        strategy: Strategy::default(),
        max_tokens: s.summary_cap,
        count_tokens: s.count_fn(),
        ledger: None,
        agent_prefix: None,
    };
    ExtractiveSummarizer::new().summarize_sync(&req).text
}

/// The summarizer's view of `span`: role, tool name and arguments, text.
fn entries(span: &[Message]) -> Vec<SummaryEntry> {
    let mut calls: HashMap<String, (String, Option<String>)> = HashMap::new();
    for m in span {
        let args: HashMap<&str, String> = m.tool_arguments().into_iter().collect();
        for c in &m.kind().calls {
            calls.insert(
                c.call_id.clone(),
                (c.name.clone(), args.get(c.call_id.as_str()).cloned()),
            );
        }
    }
    span.iter()
        .map(|m| {
            let kind = m.kind();
            let role = if kind.item == ItemType::Reasoning {
                "reasoning"
            } else {
                m.role().as_str()
            };
            let call = kind.results.first().and_then(|id| calls.get(id));
            let name = call
                .map(|(n, _)| n.clone())
                .or_else(|| kind.result_name.clone())
                .or_else(|| kind.calls.first().map(|c| c.name.clone()));
            let mut e = SummaryEntry::new(role, m.plain_text());
            e.name = name;
            e.input = call.and_then(|(_, a)| a.clone());
            e
        })
        .collect()
}
