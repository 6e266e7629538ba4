//! `summarizer.prompt: agent_prefix`: the summary request starts with the
//! agent's own request (its system message, its tools, its messages up to
//! the last one being folded, byte for byte as the provider received them)
//! and ends with one user message asking for the summary. A provider that
//! served the agent's last call holds that prefix in its prompt cache, so
//! the history is billed at the cached rate instead of again in full (what
//! Claude Code does for its own compaction).
//!
//! It applies when the agent speaks chat completions (the wire this
//! summarizer speaks) and the prefix, the instruction and the completion
//! fit `summarizer.context_window`; otherwise the fresh prompt is sent
//! (`openai.rs`), and the summary says which one wrote it
//! ([`Summary::prompt`](super::Summary::prompt)).
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::openai::{
    ChatMessage, JOIN_TOKENS, MIN_COMPLETION_TOKENS, OpenAiSummarizer, Sampling, Spent,
};
use super::{AgentPrefix, SummarizeError, SummaryRequest};
use compact_model::model::Format;

/// Opens the instruction of an agent-prefix request: the model is mid-task
/// with tools in reach, and must write the summary instead of carrying on.
pub const PREFIX_INTRO: &str = "Stop here: do not continue the task and do not call any tool. The conversation above, up to this message, is being compacted; the messages after it stay in the context. Write the summary that will replace it, following the instructions below, and answer with the summary text only.";
/// Stands for `{conversation}`: the history is the request itself.
pub(crate) const CONVERSATION_ABOVE: &str =
    "(the conversation above this message; its system instructions stay in the context)";
/// Stands for `{previous_summary}` when our previous summary message is
/// in the prefix.
pub(crate) const PREVIOUS_ABOVE: &str = "(the COMPACT-SUMMARY message in the conversation above)";

/// The instruction of one agent-prefix request and its `max_tokens`.
pub(super) struct PrefixLayout {
    pub(super) cap: usize,
    pub(super) instruction: String,
}

/// The chat-completions body of an agent-prefix request. Field order is
/// the wire order; the agent's messages and tools come first, as received.
#[derive(Serialize)]
struct PrefixRequest<'a> {
    model: &'a str,
    messages: Vec<PrefixMessage<'a>>,
    #[serde(skip_serializing_if = "no_tools")]
    tools: &'a [Value],
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'static str>,
    #[serde(flatten)]
    sampling: Sampling,
}

fn no_tools(tools: &&[Value]) -> bool {
    tools.is_empty()
}

/// One message of the body: the agent's bytes, or our instruction.
#[derive(Serialize)]
#[serde(untagged)]
enum PrefixMessage<'a> {
    Agent(&'a RawValue),
    Ours(ChatMessage<'a>),
}

/// Whether a failed agent-prefix request is worth a fresh prompt: the
/// endpoint refused the agent's history (a 4xx other than 429), or the
/// model called a tool. Timeouts, 429 and 5xx would fail the same way.
pub(super) fn retry_fresh(e: &SummarizeError) -> bool {
    match e {
        SummarizeError::Http { status, .. } => (400..500).contains(status) && *status != 429,
        SummarizeError::ToolCall => true,
        _ => false,
    }
}

impl OpenAiSummarizer {
    /// The body of an agent-prefix request: exactly the bytes posted. With
    /// tools, `tool_choice: "none"`.
    pub fn agent_prefix_body(
        &self,
        model: &str,
        prefix: &AgentPrefix,
        instruction: &str,
        max_tokens: usize,
    ) -> Vec<u8> {
        let mut messages: Vec<PrefixMessage<'_>> = prefix
            .messages
            .iter()
            .map(|m| PrefixMessage::Agent(m))
            .collect();
        messages.push(PrefixMessage::Ours(ChatMessage {
            role: "user",
            content: instruction,
        }));
        let body = PrefixRequest {
            model,
            messages,
            tools: &prefix.tools,
            tool_choice: (!prefix.tools.is_empty()).then_some("none"),
            sampling: Sampling::of(self.config(), max_tokens),
        };
        // Raw JSON, strings and numbers: serializing cannot fail.
        serde_json::to_vec(&body).unwrap_or_default()
    }

    /// The final user message: what to do, the summarizer's rules (its
    /// `system` template) and the strategy template, with the previous
    /// summary and facts `block` and the conversation pointing above.
    fn prefix_instruction(&self, req: &SummaryRequest, cap: usize, block: Option<&str>) -> String {
        let templates = &self.config().templates;
        let rendered = templates.render(req.strategy, cap, block, CONVERSATION_ABOVE);
        format!(
            "{PREFIX_INTRO}\n\n{}\n\n{rendered}",
            templates.system.trim_end()
        )
    }

    /// Lays the agent-prefix request out in the summarizer's window: the
    /// prefix and the instruction whole, the completion at the summary's
    /// budget, then the facts list (by rank) in what is left. `Err` says
    /// why the fresh prompt is sent instead.
    pub(super) fn prefix_layout(&self, req: &SummaryRequest) -> Result<PrefixLayout, String> {
        let Some(prefix) = req.agent_prefix.as_deref() else {
            return Err("the request carries no agent prefix".into());
        };
        if prefix.format != Format::Chat {
            return Err(format!(
                "the agent's messages are {:?}; the summarizer speaks chat completions",
                prefix.format
            ));
        }
        if req.entries.is_empty() {
            return Err("no span is being folded".into());
        }
        let count = &req.count_tokens;
        let room = self.window_room();
        let cap = self.completion_cap(req.max_tokens);
        // Our previous summary is in the prefix, or (rarely) after the
        // span: then its text goes with the instruction.
        let previous = if prefix.has_previous {
            Some(PREVIOUS_ABOVE.to_owned())
        } else {
            req.previous
                .as_deref()
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
        };
        let base = prefix.tokens + count(&self.prefix_instruction(req, cap, previous.as_deref()));
        if base + cap > room {
            return Err(format!(
                "the agent's prefix ({} tokens) with the instruction and a {cap}-token completion does not fit summarizer.context_window ({})",
                prefix.tokens,
                self.config().context_window
            ));
        }
        let lines = super::openai::ledger_fact_lines(req);
        let facts_limit = (room - base - cap).saturating_sub(2 * JOIN_TOKENS);
        let (facts, _) = super::openai::facts_block(&lines, facts_limit, count);
        let block = match (previous, facts) {
            (Some(p), Some(f)) => Some(format!("{p}\n\n{f}")),
            (p, f) => p.or(f),
        };
        // Counted again whole, as sent: the completion gives way when the
        // pieces added up short.
        let mut cap = cap;
        for _ in 0..4 {
            let instruction = self.prefix_instruction(req, cap, block.as_deref());
            let total = prefix.tokens + count(&instruction) + cap;
            if total <= room {
                return Ok(PrefixLayout { cap, instruction });
            }
            let over = total - room;
            if cap <= over + MIN_COMPLETION_TOKENS {
                break;
            }
            cap -= over;
        }
        Err(format!(
            "the agent-prefix request does not fit summarizer.context_window ({})",
            self.config().context_window
        ))
    }

    /// Sends the agent-prefix request; the model's summary text.
    pub(super) async fn summarize_prefixed(
        &self,
        req: &SummaryRequest,
        layout: &PrefixLayout,
        spent: &mut Spent,
    ) -> Result<String, SummarizeError> {
        let Some(prefix) = req.agent_prefix.as_deref() else {
            return Err(SummarizeError::Other("no agent prefix".into()));
        };
        let answer = self
            .complete(|m| self.agent_prefix_body(m, prefix, &layout.instruction, layout.cap))
            .await?;
        tracing::debug!(
            model = %answer.model,
            prefix_messages = prefix.messages.len(),
            prefix_tokens = prefix.tokens,
            "summary written from the agent's prefix"
        );
        spent.add(&answer);
        spent.model = answer.model;
        Ok(answer.text)
    }
}

impl AgentPrefix {
    /// The prefix of `messages` (the history as the provider received it)
    /// up to and including `last`, with the request's `tools`;
    /// `summary_index` is where our previous summary sits. Only a chat
    /// completions history is serialized: no other wire can be sent.
    pub fn build(
        messages: &[compact_model::model::Message],
        last: usize,
        tools: &[Value],
        summary_index: Option<usize>,
        est: &compact_model::estimate::Estimator,
    ) -> Self {
        let upto = &messages[..(last + 1).min(messages.len())];
        let format = if upto.iter().any(|m| m.kind().shape.is_anthropic()) {
            Format::Anthropic
        } else if upto
            .iter()
            .all(|m| m.kind().shape == compact_model::model::Shape::ChatMessage)
        {
            Format::Chat
        } else {
            Format::Responses
        };
        let serialized = if format == Format::Chat {
            upto.iter()
                .filter_map(|m| serde_json::value::to_raw_value(&m.to_provider_value()).ok())
                .collect()
        } else {
            Vec::new()
        };
        let tokens = upto
            .iter()
            .map(|m| est.count_message(&m.provider_copy()))
            .sum::<usize>()
            + est.count_tools(tools);
        Self {
            format,
            messages: serialized,
            tools: tools.to_vec(),
            tokens,
            has_previous: summary_index.is_some_and(|si| si <= last),
        }
    }
}
