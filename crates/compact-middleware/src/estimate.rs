//! Token estimates of whole requests: the per-message counts (cached by
//! content hash), the tool schemas, the reply priming, and the breakdown
//! the `compact.token_estimate` event reports.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::config::Config;
use crate::model::{Message, Role};
use crate::tokens::{self, CountCache, TokenCounter};

/// The model a manager budgets for: its window and encoding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelLimits {
    /// The configured model name (`model` in the config).
    pub model: String,
    /// The context window in tokens: `max_context_tokens` if set, else the profile's.
    pub max_tokens: usize,
    /// The tokenizer the model's profile names (`o200k` for an unknown model).
    pub encoding: tokens::Encoding,
}

impl ModelLimits {
    /// Resolves `model` against `models` overrides and the built-in profiles;
    /// `max_context_tokens` overrides the window. An unknown model needs
    /// `max_context_tokens`.
    pub fn from_config(config: &Config) -> Result<Self, String> {
        let name = config.model.as_str();
        let profile = config
            .models
            .get(name)
            .map(|m| tokens::ModelProfile {
                context_window: m.context_window as u64,
                encoding: m.encoding,
            })
            .or_else(|| tokens::builtin_profile(name));
        let (window, encoding) = match (profile, config.max_context_tokens) {
            (Some(p), Some(max)) => (max, p.encoding),
            (Some(p), None) => (p.context_window as usize, p.encoding),
            (None, Some(max)) => (max, tokens::Encoding::O200k),
            (None, None) => {
                return Err(format!(
                    "model {name:?} has no built-in profile: set max_context_tokens (and models.{name}.encoding if it does not use o200k), or pick a known model"
                ));
            }
        };
        Ok(Self {
            model: name.to_string(),
            max_tokens: window,
            encoding,
        })
    }
}

/// Where the tokens of a request go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Breakdown {
    /// Tokens of the `system` messages.
    pub system: usize,
    /// Tokens of the `developer` messages.
    pub developer: usize,
    /// Tokens of the tool schemas (0 when the request has no tools).
    pub tools_schema: usize,
    /// Every other message, plus the reply priming.
    pub messages: usize,
}

/// The estimate of one request against the model's window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    /// The model the estimate was made for.
    pub model: String,
    /// Estimated tokens of the whole request: the breakdown's total.
    pub t_est: usize,
    /// The model's context window in tokens.
    pub max_tokens: usize,
    /// `t_est / max_tokens` as a fraction (1.0 = full), rounded to 4
    /// decimals; infinite when `max_tokens` is 0.
    pub usage_pct: f64,
    /// Where the `t_est` tokens go.
    pub breakdown: Breakdown,
}

/// Counts messages with one encoder and a shared cache, so a history whose
/// prefix did not change is only tokenized where it is new.
#[derive(Debug, Clone)]
pub struct Estimator {
    counter: &'static dyn TokenCounter,
    cache: Arc<CountCache>,
}

impl Estimator {
    /// An estimator counting with `counter` and memoising in `cache`.
    pub fn new(counter: &'static dyn TokenCounter, cache: Arc<CountCache>) -> Self {
        Self { counter, cache }
    }

    /// The underlying text counter.
    pub fn counter(&self) -> &'static dyn TokenCounter {
        self.counter
    }

    /// The shared per-message cache.
    pub fn cache(&self) -> &Arc<CountCache> {
        &self.cache
    }

    /// Tokens of plain text.
    pub fn count_text(&self, text: &str) -> usize {
        self.counter.count(text)
    }

    /// Tokens of one message, per-message overhead included.
    pub fn count_message(&self, m: &Message) -> usize {
        self.cache
            .get_or_insert_with(m.content_hash(), self.counter.encoding(), || {
                tokens::count_item(self.counter, m.raw())
            })
    }

    /// Tokens of the tool schemas.
    pub fn count_tools(&self, tools: &[Value]) -> usize {
        if tools.is_empty() {
            0
        } else {
            tokens::count_tools(self.counter, tools)
        }
    }

    /// Per-message counts, in order.
    pub fn counts(&self, messages: &[Message]) -> Vec<usize> {
        messages.iter().map(|m| self.count_message(m)).collect()
    }

    /// The breakdown of a request from per-message counts.
    pub fn breakdown(messages: &[Message], counts: &[usize], tools_schema: usize) -> Breakdown {
        let mut b = Breakdown {
            tools_schema,
            messages: tokens::REPLY_PRIMING,
            ..Breakdown::default()
        };
        for (m, &c) in messages.iter().zip(counts) {
            match m.role() {
                Role::System => b.system += c,
                Role::Developer => b.developer += c,
                _ => b.messages += c,
            }
        }
        b
    }

    /// The full estimate of a request against `max_tokens`.
    pub fn estimate(
        &self,
        model: &str,
        max_tokens: usize,
        messages: &[Message],
        tools: &[Value],
    ) -> Estimate {
        let counts = self.counts(messages);
        let breakdown = Self::breakdown(messages, &counts, self.count_tools(tools));
        Estimate::new(model, max_tokens, breakdown)
    }
}

impl Breakdown {
    /// The total.
    pub fn total(&self) -> usize {
        self.system + self.developer + self.tools_schema + self.messages
    }
}

impl Estimate {
    /// The estimate of a request whose tokens are `breakdown`, against a
    /// window of `max_tokens`.
    pub fn new(model: &str, max_tokens: usize, breakdown: Breakdown) -> Self {
        let t_est = breakdown.total();
        Self {
            model: model.to_string(),
            t_est,
            max_tokens,
            usage_pct: usage(t_est, max_tokens),
            breakdown,
        }
    }
}

/// `t / max`, rounded to 4 decimals for stable reports.
pub fn usage(t: usize, max: usize) -> f64 {
    if max == 0 {
        return f64::INFINITY;
    }
    ((t as f64 / max as f64) * 10_000.0).round() / 10_000.0
}
