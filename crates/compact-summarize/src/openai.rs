//! The `openai` summarizer: any OpenAI-compatible chat-completions endpoint
//! (OpenAI, Azure, vLLM, llama.cpp server, Ollama).
//!
//! # Request
//!
//! One system message (the `system` template) and one user message (the
//! strategy template with the previous summary and the span rendered in).
//! The body is serialized from a struct with a fixed field order, so the same
//! input and configuration give a byte-identical body: golden tests pin it.
//!
//! # Input budget
//!
//! Every request fits `context_window` (less a 5% margin and the messages'
//! framing), counted with the request's exact counter: the prompt
//! templates (never cut), the completion's `max_tokens` (at most a third
//! of what the templates leave), the previous summary and the list of
//! facts the model must keep (together at most five sixths of the rest:
//! the list shortened by rank, the previous summary trimmed to whole lines
//! from the top), and the span. Tool outputs in the span are clipped to
//! `tool_output_max_chars` (head and tail kept); a span that does not fit
//! beside the rest is split into parts, each summarized with the previous
//! part's summary as its previous summary, so the last answer is the
//! merged summary; the facts list goes with the last part. Each body is
//! counted again whole before it is sent, and its `max_tokens` lowered if
//! the pieces added up short.
//!
//! # Answers that are not summaries
//!
//! A refusal (`message.refusal`, `finish_reason: content_filter`), a tool
//! call, a truncated answer (`finish_reason: length`) and an empty answer are
//! errors, never a summary. Whether the text fits its budget and is smaller
//! than what it replaces is checked by the caller (the pipeline's fallback
//! chain), which knows both numbers.
//!
//! # Failures
//!
//! 429, 5xx, timeouts and transport errors are retried `retries` times with
//! exponential backoff and jitter; then, or on 404, the `fallback_model` is
//! tried once (with its own retries).
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::templates::{TemplateError, Templates};
use super::{SummarizeError, Summarizer, Summary, SummaryEntry, SummaryRequest, TokenCountFn};
use crate::{SummarizerSettings, SummaryPrompt};

/// Tokens kept free in the summarizer's window for message framing and the
/// difference between our counter and the summarizer model's tokenizer.
const WINDOW_MARGIN_PCT: f64 = 0.05;
/// Tokens of a request's message framing: two messages and the reply
/// priming (docs/tokens.md: 3 per message, 1 per role, 3 for the reply),
/// with some to spare.
const FRAMING_TOKENS: usize = 16;
/// Tokens counted for each join of separately counted pieces (a newline):
/// the sum of their counts then bounds the count of the whole.
pub(super) const JOIN_TOKENS: usize = 1;
/// Fewest tokens the window must leave beside the prompt templates for a
/// request to be worth sending (completion, previous summary and span).
const MIN_OPEN_TOKENS: usize = 96;
/// Fewest completion tokens a request asks for.
pub(super) const MIN_COMPLETION_TOKENS: usize = 16;
/// Heads the facts the model must keep, in the previous-summary block.
const FACTS_HEADER: &str = "Facts that must appear verbatim in the new summary:";
/// Ends a previous summary trimmed to fit the window.
const TRIM_MARKER: &str = "…[trimmed to fit the summarizer's window]";
/// The marker put where a tool output (or an oversized message) was clipped.
const CLIP_MARKER: &str = "\n…[clipped for summarization]…\n";
/// Longest `Retry-After` honoured.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);
/// Error bodies are quoted up to this many characters.
const ERROR_BODY_CHARS: usize = 300;

/// Settings of an [`OpenAiSummarizer`], resolved from `summarizer:` (the API
/// key already read from its environment variable).
#[derive(Clone)]
pub struct OpenAiConfig {
    /// Base URL up to `/v1`; requests go to `{base_url}/chat/completions`.
    pub base_url: String,
    /// Primary model.
    pub model: String,
    /// Sent as `Authorization: Bearer`; never logged, never in `Debug`.
    pub api_key: Option<String>,
    /// `seed` of the request (omitted when `None`).
    pub seed: Option<u64>,
    /// `temperature` of the request.
    pub temperature: f64,
    /// Upper bound on `max_tokens` of the request.
    pub max_tokens: usize,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Retries after a retryable failure.
    pub retries: usize,
    /// Backoff base.
    pub retry_backoff: Duration,
    /// Tried once when the primary model keeps failing.
    pub fallback_model: Option<String>,
    /// The summarizer model's context window.
    pub context_window: usize,
    /// Per tool output clip in the span.
    pub tool_output_max_chars: usize,
    /// Prompt templates.
    pub templates: Templates,
    /// Ask the model to fold in the facts its summary left out when too
    /// many are missing (`summarizer.repair`).
    pub repair: bool,
    /// Most repair requests per summary.
    pub max_repairs: usize,
    /// Share of the facts to keep that may be missing before a repair is
    /// asked (one that does not fit beside the text always counts).
    pub repair_missing_pct: f64,
    /// What a summary request sends (`summarizer.prompt`): a prompt of its
    /// own, or the agent's request prefix then the instruction.
    pub prompt: SummaryPrompt,
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("seed", &self.seed)
            .field("temperature", &self.temperature)
            .field("max_tokens", &self.max_tokens)
            .field("timeout", &self.timeout)
            .field("retries", &self.retries)
            .field("fallback_model", &self.fallback_model)
            .field("context_window", &self.context_window)
            .field("repair", &self.repair)
            .field("max_repairs", &self.max_repairs)
            .field("repair_missing_pct", &self.repair_missing_pct)
            .field("prompt", &self.prompt)
            .finish_non_exhaustive()
    }
}

/// The `openai` summarizer could not be built.
#[derive(thiserror::Error, Debug)]
pub enum OpenAiError {
    /// `summarizer.templates_file` is unusable.
    #[error(transparent)]
    Templates(#[from] TemplateError),
    /// `summarizer.api_key_env` names a variable that is not set.
    #[error("summarizer.api_key_env names {0}, which is not set (or not UTF-8)")]
    MissingKey(String),
    /// The HTTP client could not be created.
    #[error("cannot create the HTTP client: {0}")]
    Client(String),
}

impl OpenAiConfig {
    /// Resolves `summarizer:`: reads the key from the variable named by
    /// `api_key_env` through `env` (so tests need not touch the process
    /// environment) and the templates file.
    pub fn from_settings(
        s: &SummarizerSettings,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, OpenAiError> {
        let api_key = match &s.api_key_env {
            Some(name) => Some(env(name).ok_or_else(|| OpenAiError::MissingKey(name.clone()))?),
            None => None,
        };
        let templates = match &s.templates_file {
            Some(path) => Templates::from_file(std::path::Path::new(path))?,
            None => Templates::builtin(),
        };
        Ok(Self {
            base_url: s.base_url.clone(),
            model: s.model.clone(),
            api_key,
            seed: s.seed,
            temperature: s.temperature,
            max_tokens: s.max_tokens,
            timeout: Duration::from_millis(s.timeout_ms),
            retries: s.retries,
            retry_backoff: Duration::from_millis(s.retry_backoff_ms),
            fallback_model: s.fallback_model.clone(),
            context_window: s.context_window,
            tool_output_max_chars: s.tool_output_max_chars,
            templates,
            repair: s.repair,
            max_repairs: s.max_repairs,
            repair_missing_pct: s.repair_missing_pct,
            prompt: s.prompt,
        })
    }
}

/// The chat-completions request body. Field order is the wire order.
#[derive(Debug, Serialize)]
struct ChatRequest<'a> {
    model: &'a str,
    messages: [ChatMessage<'a>; 2],
    #[serde(flatten)]
    sampling: Sampling,
}

/// What ends every request body this summarizer sends, fresh or agent
/// prefix: the sampling settings and the completion's length, one
/// completion, no stream. Field order is the wire order.
#[derive(Debug, Serialize)]
pub(super) struct Sampling {
    temperature: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    max_tokens: usize,
    n: u32,
    stream: bool,
}

impl Sampling {
    /// `config`'s sampling settings with `max_tokens`.
    pub(super) fn of(config: &OpenAiConfig, max_tokens: usize) -> Self {
        Self {
            temperature: config.temperature,
            seed: config.seed,
            max_tokens,
            n: 1,
            stream: false,
        }
    }
}

#[derive(Debug, Serialize)]
pub(super) struct ChatMessage<'a> {
    pub(super) role: &'static str,
    pub(super) content: &'a str,
}

#[derive(Debug, Deserialize)]
struct ChatResponse {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    model: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    #[serde(default)]
    message: Option<ResponseMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ResponseMessage {
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<Value>>,
    #[serde(default)]
    function_call: Option<Value>,
}

#[derive(Debug, Deserialize, Default, Clone, Copy)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
}

/// `usage.prompt_tokens_details`: what the prompt cache served.
#[derive(Debug, Deserialize, Default, Clone, Copy)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

/// One answer that passed the protocol checks.
pub(super) struct Answer {
    pub(super) text: String,
    pub(super) model: String,
    usage: Usage,
}

/// What a summary's requests cost, summed, and the model that wrote the
/// text kept.
pub(super) struct Spent {
    prompt_tokens: u64,
    completion_tokens: u64,
    /// `None` until a provider reports cached tokens.
    cached_tokens: Option<u64>,
    pub(super) model: String,
}

impl Spent {
    fn new(model: &str) -> Self {
        Self {
            prompt_tokens: 0,
            completion_tokens: 0,
            cached_tokens: None,
            model: model.to_owned(),
        }
    }

    pub(super) fn add(&mut self, answer: &Answer) {
        self.prompt_tokens += answer.usage.prompt_tokens.unwrap_or(0);
        self.completion_tokens += answer.usage.completion_tokens.unwrap_or(0);
        if let Some(cached) = answer
            .usage
            .prompt_tokens_details
            .and_then(|d| d.cached_tokens)
        {
            *self.cached_tokens.get_or_insert(0) += cached;
        }
    }
}

/// The share of `whole` that `part` is; 0 of nothing.
fn missing_share(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// Why one HTTP attempt failed, and whether retrying may help.
struct AttemptError {
    error: SummarizeError,
    retryable: bool,
    retry_after: Option<Duration>,
}

/// The model-backed summarizer.
pub struct OpenAiSummarizer {
    config: OpenAiConfig,
    endpoint: String,
    client: reqwest::Client,
}

impl fmt::Debug for OpenAiSummarizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiSummarizer")
            .field("endpoint", &self.endpoint)
            .field("config", &self.config)
            .finish()
    }
}

impl OpenAiSummarizer {
    /// A summarizer for `config`.
    pub fn new(config: OpenAiConfig) -> Result<Self, OpenAiError> {
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .build()
            .map_err(|e| OpenAiError::Client(e.to_string()))?;
        let endpoint = format!("{}/chat/completions", config.base_url.trim_end_matches('/'));
        Ok(Self {
            config,
            endpoint,
            client,
        })
    }

    /// From `summarizer:` and the process environment.
    pub fn from_settings(s: &SummarizerSettings) -> Result<Self, OpenAiError> {
        Self::new(OpenAiConfig::from_settings(s, |name| {
            std::env::var(name).ok()
        })?)
    }

    /// The resolved settings.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// The URL requests are posted to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// `max_tokens` of a request for a body budget of `budget`.
    pub(super) fn completion_cap(&self, budget: usize) -> usize {
        budget.clamp(1, self.config.max_tokens.max(1))
    }

    /// The request body for one part: exactly the bytes posted.
    pub fn request_body(
        &self,
        model: &str,
        strategy: super::Strategy,
        max_tokens: usize,
        previous: Option<&str>,
        entries: &[SummaryEntry],
    ) -> Vec<u8> {
        let cap = self.completion_cap(max_tokens);
        let user = self
            .config
            .templates
            .render(strategy, cap, previous, &render_entries(entries));
        self.body(model, &user, cap)
    }

    /// The body of a repair request: `summary` and the facts it left out.
    pub fn repair_body(
        &self,
        model: &str,
        max_tokens: usize,
        summary: &str,
        missing: &[String],
    ) -> Vec<u8> {
        let cap = self.completion_cap(max_tokens);
        let user = self
            .config
            .templates
            .render_repair(cap, summary, &fact_lines(missing));
        self.body(model, &user, cap)
    }

    /// A chat-completions body: the system message, `user`, the sampling
    /// settings and `max_tokens`.
    fn body(&self, model: &str, user: &str, max_tokens: usize) -> Vec<u8> {
        let body = ChatRequest {
            model,
            messages: [
                ChatMessage {
                    role: "system",
                    content: &self.config.templates.system,
                },
                ChatMessage {
                    role: "user",
                    content: user,
                },
            ],
            sampling: Sampling::of(&self.config, max_tokens),
        };
        // Serializing strings and numbers into a Vec cannot fail.
        serde_json::to_vec(&body).unwrap_or_default()
    }

    /// The span as the summarizer sees it: tool outputs clipped, then split
    /// into parts that each fit the summarizer's window next to the
    /// prompt, the previous summary (or the part before's summary), the
    /// facts list (with the last part) and the completion. Empty when not
    /// even the prompt templates fit the window.
    pub fn plan_parts(&self, req: &SummaryRequest) -> Vec<Vec<SummaryEntry>> {
        self.plan(req).map(|p| p.parts).unwrap_or_default()
    }

    /// Tokens a request may take in the summarizer's window, completion
    /// included: the window less its margin and the messages' framing.
    pub(super) fn window_room(&self) -> usize {
        let window = self.config.context_window as f64 * (1.0 - WINDOW_MARGIN_PCT);
        (window as usize).saturating_sub(FRAMING_TOKENS)
    }

    /// Lays one summarization out in the summarizer's window. Every piece is
    /// counted with the request's exact counter: the instructions (never
    /// cut), the completion (at most a third of what the instructions
    /// leave), then the previous summary and the facts list (together at
    /// most five sixths of the rest: the facts list shortened by rank, the
    /// previous summary trimmed), and the span in the room left, split
    /// into parts.
    fn plan(&self, req: &SummaryRequest) -> Result<Plan, SummarizeError> {
        let count = &req.count_tokens;
        let room = self.window_room();
        let cap = self.completion_cap(req.max_tokens);
        let fixed = count(&self.config.templates.system)
            + count(&self.config.templates.render(req.strategy, cap, None, ""));
        if room < fixed + MIN_OPEN_TOKENS {
            return Err(SummarizeError::Other(format!(
                "summarizer.context_window ({}) cannot hold the prompt templates ({fixed} tokens) and a conversation",
                self.config.context_window
            )));
        }
        let cap = cap.min((room - fixed) / 3).max(1);
        // What the previous summary, the facts list and the span share.
        let open = room - fixed - cap;
        let carry = open - open / 6;

        let previous = req
            .previous
            .as_deref()
            .map(str::trim)
            .filter(|p| !p.is_empty());
        let previous_tokens = previous.map_or(0, |p| count(p));
        // The facts list may take what the larger of the previous summary
        // (up to half) and a later part's previous answer leaves.
        let facts_limit = carry.saturating_sub(cap.max(previous_tokens.min(carry / 2)));
        let lines = ledger_fact_lines(req);
        let (facts, facts_tokens) = facts_block(&lines, facts_limit, count);
        let previous = previous
            .map(|p| trim_to_tokens(p, carry.saturating_sub(facts_tokens), count))
            .filter(|p| !p.is_empty());
        let previous_tokens = previous.as_deref().map_or(0, |p| count(p) + JOIN_TOKENS);

        let first_room = open.saturating_sub(previous_tokens);
        let rest_room = open.saturating_sub(cap + JOIN_TOKENS);
        // Any single message fits any part, the last one's facts included.
        let entry_max = first_room.min(rest_room).saturating_sub(facts_tokens);

        let mut parts: Vec<Vec<(SummaryEntry, usize)>> = Vec::new();
        let mut current: Vec<(SummaryEntry, usize)> = Vec::new();
        let mut used = 0usize;
        for entry in &req.entries {
            let mut entry = entry.clone();
            if entry.role == "tool" {
                entry.text = clip_middle(&entry.text, self.config.tool_output_max_chars);
            }
            let mut tokens = count(&render_entry(&entry)) + JOIN_TOKENS;
            // A single message larger than a whole part is clipped to fit.
            let mut chars = entry.text.chars().count();
            while tokens > entry_max && chars > 0 {
                chars /= 2;
                entry.text = clip_middle(&entry.text, chars);
                tokens = count(&render_entry(&entry)) + JOIN_TOKENS;
            }
            let limit = if parts.is_empty() {
                first_room
            } else {
                rest_room
            };
            if used + tokens > limit && !current.is_empty() {
                parts.push(std::mem::take(&mut current));
                used = 0;
            }
            used += tokens;
            current.push((entry, tokens));
        }
        if !current.is_empty() || parts.is_empty() {
            parts.push(current);
        }
        // The last part carries the facts list too: when it does not fit
        // beside them, its tail becomes a part of its own.
        loop {
            let last = parts.len() - 1;
            let limit = if last == 0 { first_room } else { rest_room };
            let used: usize = parts[last].iter().map(|(_, t)| t).sum();
            if used + facts_tokens <= limit {
                break;
            }
            let tail_room = rest_room.saturating_sub(facts_tokens);
            let mut tail: Vec<(SummaryEntry, usize)> = Vec::new();
            let mut tail_used = 0usize;
            // The part keeps at least one message, so the tail is a later
            // part (whose room is `rest_room`) and the loop moves on.
            while parts[last].len() > 1 {
                let Some(&(_, t)) = parts[last].last() else {
                    break;
                };
                if !tail.is_empty() && tail_used + t > tail_room {
                    break;
                }
                if let Some(moved) = parts[last].pop() {
                    tail_used += moved.1;
                    tail.push(moved);
                }
            }
            if tail.is_empty() {
                // A single message (clipped to fit beside the facts): done.
                break;
            }
            tail.reverse();
            parts.push(tail);
        }
        Ok(Plan {
            cap,
            previous,
            facts,
            parts: parts
                .into_iter()
                .map(|p| p.into_iter().map(|(e, _)| e).collect())
                .collect(),
        })
    }

    /// `max_tokens` for one request, checked against the window with the
    /// exact counter on the very text sent (`user_for(cap)`, the user
    /// message asking for `cap` tokens): when the pieces counted apart add
    /// up to less than the whole, the completion gives way.
    fn fitted_cap(
        &self,
        count: &TokenCountFn,
        cap: usize,
        user_for: impl Fn(usize) -> String,
    ) -> Result<usize, SummarizeError> {
        let room = self.window_room();
        let system = count(&self.config.templates.system);
        let mut cap = cap;
        for _ in 0..4 {
            let total = system + count(&user_for(cap)) + cap;
            if total <= room {
                return Ok(cap);
            }
            let over = total - room;
            if cap <= over + MIN_COMPLETION_TOKENS {
                break;
            }
            cap -= over;
        }
        Err(SummarizeError::Other(format!(
            "a summary request does not fit summarizer.context_window ({})",
            self.config.context_window
        )))
    }

    /// A repair request's `max_tokens` and the missing facts it lists
    /// (most important first, as many as fit the window beside the
    /// instructions and the summary, and about as many as the answer has
    /// room for); `None` when there is no room for one.
    fn repair_layout(
        &self,
        req: &SummaryRequest,
        summary: &str,
        missing: &[String],
    ) -> Option<(usize, Vec<String>)> {
        let count = &req.count_tokens;
        let room = self.window_room();
        let cap = self.completion_cap(req.max_tokens);
        let fixed = count(&self.config.templates.system)
            + count(&self.config.templates.render_repair(cap, "", ""));
        if room < fixed + MIN_OPEN_TOKENS {
            return None;
        }
        let cap = cap.min((room - fixed) / 3).max(1);
        let summary_tokens = count(summary) + JOIN_TOKENS;
        let left = room.checked_sub(fixed + cap + summary_tokens)?;
        // The answer holds the summary and the facts: listing far more than
        // it has room for would only make it overrun.
        let answer_room = cap.saturating_sub(summary_tokens).max(cap / 3);
        let limit = left.min(answer_room);
        let mut listed = Vec::new();
        let mut used = 0usize;
        for line in missing {
            let cost = count(&format!("- {line}")) + JOIN_TOKENS;
            if used + cost > limit {
                break;
            }
            used += cost;
            listed.push(line.clone());
        }
        if listed.is_empty() {
            return None;
        }
        let cap = self
            .fitted_cap(count, cap, |c| {
                self.config
                    .templates
                    .render_repair(c, summary, &fact_lines(&listed))
            })
            .ok()?;
        Some((cap, listed))
    }

    /// Asks the model to fold in the facts of the ledger its summary `text`
    /// left out, when too many are missing (more than `repair_missing_pct`
    /// of those it was asked to keep, or some that would not fit beside
    /// it), at most `max_repairs` times. A repair that fails, overruns the
    /// budget or keeps no more facts is ignored: `text` stands, and the
    /// pipeline adds what it still lacks.
    async fn repair(
        &self,
        req: &SummaryRequest,
        ledger: &super::FactLedger,
        mut text: String,
        spent: &mut Spent,
    ) -> String {
        if !self.config.repair || self.config.max_repairs == 0 {
            return text;
        }
        let count = &req.count_tokens;
        let facts = super::extractive::model_facts(&ledger.0, req);
        for round in 0..self.config.max_repairs {
            if count(&text) > req.max_tokens {
                // Over budget: the fallback chain asks again with less.
                break;
            }
            let now = super::extractive::complete_model_summary(&ledger.0, req, &text);
            let too_many =
                missing_share(now.must_missing, now.must) > self.config.repair_missing_pct;
            if now.must_missing == 0 || !(too_many || now.must_dropped > 0) {
                break;
            }
            // What was asked is in the model's words already; the facts are
            // what it must copy.
            let missing: Vec<String> = facts
                .iter()
                .filter(|f| !f.narrative && !f.carried_by(&text))
                .map(|f| f.line.clone())
                .collect();
            let Some((cap, listed)) = self.repair_layout(req, &text, &missing) else {
                break;
            };
            let answer = match self
                .complete(|m| self.repair_body(m, cap, &text, &listed))
                .await
            {
                Ok(answer) => answer,
                Err(e) => {
                    tracing::warn!(error = %e, "repair request failed; keeping the model's summary");
                    break;
                }
            };
            spent.add(&answer);
            let tokens = count(&answer.text);
            let after = super::extractive::complete_model_summary(&ledger.0, req, &answer.text);
            if tokens > req.max_tokens || after.must_missing >= now.must_missing {
                tracing::info!(
                    tokens,
                    budget = req.max_tokens,
                    missing_before = now.must_missing,
                    missing_after = after.must_missing,
                    "repaired summary not better; keeping the model's summary"
                );
                break;
            }
            tracing::debug!(
                round = round + 1,
                missing_before = now.must_missing,
                missing_after = after.must_missing,
                "summary repaired"
            );
            spent.model = answer.model;
            text = answer.text;
        }
        text
    }

    /// Posts one body, retrying retryable failures with backoff.
    async fn post_with_retries(&self, body: &[u8]) -> Result<ChatResponse, AttemptError> {
        let mut attempt = 0usize;
        loop {
            match self.post_once(body).await {
                Ok(r) => return Ok(r),
                Err(e) if e.retryable && attempt < self.config.retries => {
                    let delay = backoff(self.config.retry_backoff, attempt)
                        .max(e.retry_after.unwrap_or_default().min(MAX_RETRY_AFTER));
                    tracing::debug!(attempt = attempt + 1, error = %e.error, ?delay, "summarizer request failed; retrying");
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn post_once(&self, body: &[u8]) -> Result<ChatResponse, AttemptError> {
        let mut request = self
            .client
            .post(&self.endpoint)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_vec());
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(transport_error)?;
        let status = response.status();
        if !status.is_success() {
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            let text = response.text().await.unwrap_or_default();
            let code = status.as_u16();
            return Err(AttemptError {
                error: SummarizeError::Http {
                    status: code,
                    message: text.chars().take(ERROR_BODY_CHARS).collect(),
                },
                retryable: code == 429 || status.is_server_error(),
                retry_after,
            });
        }
        let bytes = response.bytes().await.map_err(transport_error)?;
        serde_json::from_slice::<ChatResponse>(&bytes).map_err(|e| AttemptError {
            error: SummarizeError::Other(format!("invalid chat-completions response: {e}")),
            retryable: false,
            retry_after: None,
        })
    }

    /// One part: the primary model, then the fallback model.
    pub(super) async fn complete(
        &self,
        body_for: impl Fn(&str) -> Vec<u8>,
    ) -> Result<Answer, SummarizeError> {
        let primary = self
            .post_with_retries(&body_for(&self.config.model))
            .await
            .map(|r| (r, self.config.model.clone()));
        let (response, model) = match primary {
            Ok(ok) => ok,
            Err(e) => {
                let not_found = matches!(e.error, SummarizeError::Http { status: 404, .. });
                match &self.config.fallback_model {
                    Some(fallback) if e.retryable || not_found => {
                        tracing::warn!(model = %self.config.model, fallback = %fallback, error = %e.error, "summarizer model failed; trying the fallback model");
                        let r = self
                            .post_with_retries(&body_for(fallback))
                            .await
                            .map_err(|e| e.error)?;
                        (r, fallback.clone())
                    }
                    _ => return Err(e.error),
                }
            }
        };
        let model = response.model.clone().unwrap_or(model);
        let usage = response.usage.unwrap_or_default();
        let text = check_answer(response)?;
        Ok(Answer { text, model, usage })
    }
}

/// The protocol checks: what makes an answer not a summary.
fn check_answer(response: ChatResponse) -> Result<String, SummarizeError> {
    let Some(choice) = response.choices.into_iter().next() else {
        return Err(SummarizeError::Empty);
    };
    let finish = choice.finish_reason.unwrap_or_default();
    let message = choice.message.ok_or(SummarizeError::Empty)?;
    if let Some(refusal) = message.refusal.filter(|r| !r.trim().is_empty()) {
        return Err(SummarizeError::Refusal(refusal));
    }
    if finish == "content_filter" {
        return Err(SummarizeError::Refusal("content_filter".into()));
    }
    let called = message.tool_calls.as_ref().is_some_and(|c| !c.is_empty())
        || message.function_call.as_ref().is_some_and(|c| !c.is_null())
        || finish == "tool_calls"
        || finish == "function_call";
    if called {
        return Err(SummarizeError::ToolCall);
    }
    if finish == "length" {
        return Err(SummarizeError::Truncated);
    }
    let text = match message.content {
        Some(Value::String(s)) => s,
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    };
    let text = text.trim().to_owned();
    if text.is_empty() {
        return Err(SummarizeError::Empty);
    }
    Ok(text)
}

fn transport_error(e: reqwest::Error) -> AttemptError {
    if e.is_timeout() {
        AttemptError {
            error: SummarizeError::Timeout,
            retryable: true,
            retry_after: None,
        }
    } else {
        // Without the URL: it is configuration, and the message stays short.
        AttemptError {
            error: SummarizeError::Transport(e.without_url().to_string()),
            retryable: true,
            retry_after: None,
        }
    }
}

/// `base * 2^attempt` plus up to `base` of jitter.
fn backoff(base: Duration, attempt: usize) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    let exp = base.saturating_mul(1u32 << attempt.min(16));
    let base_ms = base.as_millis() as u64;
    if base_ms == 0 {
        return exp;
    }
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_usize(attempt);
    exp + Duration::from_millis(h.finish() % (base_ms + 1))
}

/// One summarization laid out in the summarizer's window.
struct Plan {
    /// `max_tokens` of every request.
    cap: usize,
    /// The previous summary, trimmed to its share.
    previous: Option<String>,
    /// The facts the model must keep (header and lines), sent with the last
    /// part.
    facts: Option<String>,
    /// The span, split into parts.
    parts: Vec<Vec<SummaryEntry>>,
}

/// The ledger's facts a model summary must carry, as lines (none without a
/// ledger): what both the fresh and the agent-prefix prompt list.
pub(super) fn ledger_fact_lines(req: &SummaryRequest) -> Vec<String> {
    match &req.ledger {
        Some(ledger) => super::extractive::model_facts(&ledger.0, req)
            .into_iter()
            .map(|f| f.line)
            .collect(),
        None => Vec::new(),
    }
}

/// The facts list within `limit` tokens: its header, then the lines most
/// important first (`lines` is in rank order) while they fit. `None` when
/// not one fits.
pub(super) fn facts_block(
    lines: &[String],
    limit: usize,
    count: &TokenCountFn,
) -> (Option<String>, usize) {
    let mut block = String::from(FACTS_HEADER);
    let mut used = count(FACTS_HEADER) + 2 * JOIN_TOKENS;
    let mut listed = 0usize;
    for line in lines {
        let cost = count(&format!("- {line}")) + JOIN_TOKENS;
        if used + cost > limit {
            // By rank: a less important fact never takes the place of a
            // more important one that did not fit.
            break;
        }
        block.push_str("\n- ");
        block.push_str(line);
        used += cost;
        listed += 1;
    }
    if listed == 0 {
        return (None, 0);
    }
    (Some(block), used)
}

/// Facts as the prompt lists them: one `- fact` line each.
fn fact_lines(facts: &[String]) -> String {
    facts
        .iter()
        .map(|f| format!("- {f}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `text` within `limit` tokens: whole lines from the top, then a marker.
/// Empty when not even the marker fits.
fn trim_to_tokens(text: &str, limit: usize, count: &TokenCountFn) -> String {
    if count(text) <= limit {
        return text.to_owned();
    }
    let mut budget = limit.saturating_sub(count(TRIM_MARKER) + JOIN_TOKENS);
    // The lines are counted apart; the whole is counted again and the
    // budget lowered by the overshoot until it fits.
    for _ in 0..4 {
        let mut out = String::new();
        let mut used = 0usize;
        for line in text.lines() {
            let cost = count(line) + JOIN_TOKENS;
            if used + cost > budget {
                if out.is_empty() {
                    // A first line longer than the whole budget keeps its head.
                    let mut chars = line.chars().count();
                    let mut head = line.to_owned();
                    while chars > 0 && count(&head) > budget {
                        chars /= 2;
                        head = line.chars().take(chars).collect();
                    }
                    if !head.is_empty() {
                        out.push_str(&head);
                        out.push('\n');
                    }
                }
                break;
            }
            out.push_str(line);
            out.push('\n');
            used += cost;
        }
        if out.is_empty() {
            return String::new();
        }
        out.push_str(TRIM_MARKER);
        let tokens = count(&out);
        if tokens <= limit {
            return out;
        }
        budget = budget.saturating_sub(tokens - limit);
    }
    String::new()
}

/// Keeps the head and tail of `text` within `max_chars` characters, the
/// marker in between.
pub(crate) fn clip_middle(text: &str, max_chars: usize) -> String {
    let n = text.chars().count();
    if n <= max_chars {
        return text.to_owned();
    }
    let keep = max_chars.saturating_sub(CLIP_MARKER.chars().count());
    let head = keep * 2 / 3;
    let tail = keep - head;
    let head_str: String = text.chars().take(head).collect();
    let tail_str: String = text.chars().skip(n - tail).collect();
    format!("{head_str}{CLIP_MARKER}{tail_str}")
}

fn render_entry(e: &SummaryEntry) -> String {
    match (&e.name, e.step) {
        // A tool result says at which step it came, as its facts will.
        (Some(name), Some(step)) if matches!(e.role.as_str(), "tool" | "function") => {
            format!("[{} {} @{step}] {}", e.role, name, e.text.trim())
        }
        (Some(name), _) => format!("[{} {}] {}", e.role, name, e.text.trim()),
        (None, _) => format!("[{}] {}", e.role, e.text.trim()),
    }
}

/// The conversation block of the prompt: one `[role] text` entry per message.
pub(crate) fn render_entries(entries: &[SummaryEntry]) -> String {
    entries
        .iter()
        .map(render_entry)
        .collect::<Vec<_>>()
        .join("\n")
}

impl OpenAiSummarizer {
    /// Today's request: a prompt of the summarizer's own, the span split
    /// into parts that each fit the window. The answer of the last part.
    async fn summarize_fresh(
        &self,
        req: &SummaryRequest,
        spent: &mut Spent,
    ) -> Result<String, SummarizeError> {
        let plan = self.plan(req)?;
        let mut previous = plan.previous.clone();
        let n = plan.parts.len();
        for (i, part) in plan.parts.iter().enumerate() {
            // The facts the model must keep go with the last part, whose
            // answer is the summary.
            let block = match (previous.as_deref(), plan.facts.as_deref()) {
                (Some(p), Some(f)) if i + 1 == n => Some(format!("{p}\n\n{f}")),
                (None, Some(f)) if i + 1 == n => Some(f.to_owned()),
                (p, _) => p.map(str::to_owned),
            };
            let conversation = render_entries(part);
            let cap = self.fitted_cap(&req.count_tokens, plan.cap, |c| {
                self.config
                    .templates
                    .render(req.strategy, c, block.as_deref(), &conversation)
            })?;
            let answer = self
                .complete(|m| self.request_body(m, req.strategy, cap, block.as_deref(), part))
                .await?;
            tracing::debug!(part = i + 1, parts = n, model = %answer.model, "summary part written");
            spent.add(&answer);
            spent.model = answer.model;
            // The next part's room counted this answer at `cap` tokens
            // at most; a tokenizer that differs from ours may exceed it.
            previous = Some(if i + 1 == n {
                answer.text
            } else {
                trim_to_tokens(&answer.text, plan.cap, &req.count_tokens)
            });
        }
        Ok(previous.unwrap_or_default())
    }

    /// The summary text and the prompt that wrote it: the agent's prefix
    /// when `summarizer.prompt: agent_prefix` and it applies, else (or
    /// when the endpoint rejects it) a fresh prompt.
    async fn first_draft(
        &self,
        req: &SummaryRequest,
        spent: &mut Spent,
    ) -> Result<(String, SummaryPrompt), SummarizeError> {
        if self.config.prompt == SummaryPrompt::AgentPrefix {
            match self.prefix_layout(req) {
                Ok(layout) => match self.summarize_prefixed(req, &layout, spent).await {
                    Ok(text) => return Ok((text, SummaryPrompt::AgentPrefix)),
                    // The endpoint would not take the agent's history (a
                    // message shape it does not know), or the model called
                    // a tool all the same: the fresh prompt has neither.
                    Err(e) if super::prefix::retry_fresh(&e) => {
                        tracing::warn!(error = %e, "the agent-prefix summary request failed; sending a fresh prompt");
                    }
                    Err(e) => return Err(e),
                },
                Err(reason) => {
                    tracing::info!(%reason, "summarizer.prompt: agent_prefix does not apply to this summary; sending a fresh prompt");
                }
            }
        }
        let text = self.summarize_fresh(req, spent).await?;
        Ok((text, SummaryPrompt::Fresh))
    }
}

impl Summarizer for OpenAiSummarizer {
    fn name(&self) -> &str {
        "openai"
    }

    fn wants_agent_prefix(&self) -> bool {
        self.config.prompt == SummaryPrompt::AgentPrefix
    }

    fn summarize<'a>(
        &'a self,
        req: &'a SummaryRequest,
    ) -> compact_events::BoxFuture<'a, Result<Summary, SummarizeError>> {
        Box::pin(async move {
            let mut spent = Spent::new(&self.config.model);
            let (mut text, prompt) = self.first_draft(req, &mut spent).await?;
            if let Some(ledger) = &req.ledger {
                text = self.repair(req, ledger, text, &mut spent).await;
            }
            Ok(Summary {
                tokens: (req.count_tokens)(&text),
                text,
                model: Some(spent.model),
                prompt_tokens: Some(spent.prompt_tokens),
                completion_tokens: Some(spent.completion_tokens),
                facts: None,
                prompt: Some(prompt),
                cached_prompt_tokens: spent.cached_tokens,
            })
        })
    }
}
