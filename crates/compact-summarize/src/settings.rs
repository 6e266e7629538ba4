//! The `summarizer:` section: which summarizer the pipeline calls and how
//! it reaches an OpenAI-compatible endpoint. It lives beside the summarizers
//! that read it; `compact_middleware::config` re-exports it, and its keys
//! are in `docs/configuration.md`.

use compact_model::rules;
use garde::{Error, Validate};
use serde::{Deserialize, Serialize};

/// Which summarizer folds evicted spans into the rolling summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SummarizerKind {
    /// The deterministic, offline extractive summarizer (no model).
    #[default]
    Extractive,
    /// Any OpenAI-compatible chat-completions endpoint.
    Openai,
}

/// What the model-backed summarizer sends (`summarizer.prompt`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SummaryPrompt {
    /// A prompt of its own: the summarizer's system message and the span
    /// rendered into the strategy template (tool outputs clipped).
    #[default]
    Fresh,
    /// The agent's own request up to the end of the span being folded
    /// (its system, tools and messages, byte for byte), then one user
    /// message asking for the summary: a provider that served the agent
    /// serves that prefix from its prompt cache. Falls back to `fresh`
    /// when it does not fit `context_window` or the agent's wire is not
    /// chat completions.
    AgentPrefix,
}

impl SummaryPrompt {
    /// The configuration / event name (`fresh`, `agent_prefix`).
    pub fn as_str(self) -> &'static str {
        match self {
            SummaryPrompt::Fresh => "fresh",
            SummaryPrompt::AgentPrefix => "agent_prefix",
        }
    }
}

impl std::fmt::Display for SummaryPrompt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `summarizer:`: the model-backed summarizer's endpoint and limits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Validate)]
#[serde(default, deny_unknown_fields)]
pub struct SummarizerSettings {
    /// `extractive` (default) or `openai`.
    #[garde(skip)]
    pub kind: SummarizerKind,
    /// Base URL of the chat-completions API, up to and including `/v1`.
    #[garde(custom(rules::http_url))]
    pub base_url: String,
    /// Model the summaries are written by.
    #[garde(custom(rules::non_empty))]
    pub model: String,
    /// Name of the environment variable that holds the API key (never the key).
    #[garde(custom(env_var_name))]
    pub api_key_env: Option<String>,
    /// Sampling seed sent with every request (reproducible summaries).
    #[garde(skip)]
    pub seed: Option<u64>,
    /// Sampling temperature; 0 for deterministic summaries.
    #[garde(custom(temperature_range))]
    pub temperature: f64,
    /// Upper bound on completion tokens per summary request.
    #[garde(custom(rules::at_least(16)))]
    pub max_tokens: usize,
    /// Per-request timeout.
    #[garde(custom(rules::at_least_u64(1)))]
    pub timeout_ms: u64,
    /// Retries after a 429, a 5xx, a timeout or a transport error.
    #[garde(skip)]
    pub retries: usize,
    /// Base of the exponential backoff between retries (plus jitter).
    #[garde(skip)]
    pub retry_backoff_ms: u64,
    /// A cheaper model tried when the primary model keeps failing.
    #[garde(custom(rules::opt_non_empty))]
    pub fallback_model: Option<String>,
    /// YAML file overriding templates by name (`system`, `task_state`, ...).
    #[garde(custom(rules::opt_non_empty))]
    pub templates_file: Option<String>,
    /// The summarizer model's context window; larger spans are split.
    #[garde(custom(rules::at_least(1024)))]
    pub context_window: usize,
    /// Each tool output in the span is clipped to this many characters.
    #[garde(custom(rules::at_least(200)))]
    pub tool_output_max_chars: usize,
    /// After `policy.max_compact_failures` consecutive failures the model is
    /// skipped for this long (circuit breaker).
    #[garde(skip)]
    pub breaker_cooldown_secs: u64,
    /// When the model's summary leaves out too many of the facts it was
    /// asked to keep, ask it to fold them in (a repair request).
    #[garde(skip)]
    pub repair: bool,
    /// Most repair requests per summary.
    #[garde(custom(rules::at_most_count(MAX_REPAIRS)))]
    pub max_repairs: usize,
    /// A repair is asked when more than this share of the facts the model
    /// was asked to keep is missing from its summary (or when some of them
    /// do not fit beside it).
    #[garde(custom(rules::fraction))]
    pub repair_missing_pct: f64,
    /// `fresh` (default): a prompt of the summarizer's own; `agent_prefix`:
    /// the agent's request prefix then the summary instruction, so the
    /// provider's prompt cache serves the history (docs/summarizers.md).
    #[garde(skip)]
    pub prompt: SummaryPrompt,
}

/// Upper bound of `summarizer.max_repairs`: each repair is a model call
/// inside a preflight.
pub(crate) const MAX_REPAIRS: usize = 3;

impl Default for SummarizerSettings {
    fn default() -> Self {
        Self {
            kind: SummarizerKind::Extractive,
            base_url: "http://127.0.0.1:8000/v1".to_owned(),
            model: "gpt-4o-mini".to_owned(),
            api_key_env: None,
            seed: Some(42),
            temperature: 0.0,
            max_tokens: 1024,
            timeout_ms: 30_000,
            retries: 2,
            retry_backoff_ms: 500,
            fallback_model: None,
            templates_file: None,
            context_window: 128_000,
            tool_output_max_chars: 2_000,
            breaker_cooldown_secs: 300,
            repair: true,
            max_repairs: 1,
            repair_missing_pct: 0.5,
            prompt: SummaryPrompt::Fresh,
        }
    }
}

fn temperature_range(value: &f64, _: &()) -> garde::Result {
    if (0.0..=2.0).contains(value) {
        Ok(())
    } else {
        Err(Error::new(format!(
            "must be between 0.0 and 2.0 (got {value})"
        )))
    }
}

/// The key lives in the environment; a value that is not a variable name is
/// most likely the key itself pasted into the file, and must not be echoed.
fn env_var_name(value: &Option<String>, _: &()) -> garde::Result {
    let Some(name) = value else { return Ok(()) };
    let valid = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if valid {
        Ok(())
    } else {
        Err(Error::new(
            "must be the name of an environment variable (letters, digits, _), not the key itself",
        ))
    }
}
