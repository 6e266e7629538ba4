//! Token estimates of whole requests: the per-message counts (cached by
//! content hash), the tool schemas, the reply priming, and the breakdown
//! the `compact.token_estimate` event reports; anchored to the provider's
//! reported usage when the caller passes it ([`Anchor`]).

mod anchor;

pub use anchor::{Anchor, Basis, covered_before_last_reply, relative_error};

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::model::{Message, Role};
use crate::tokens::{self, CountCache, TokenCounter};

/// The model a manager budgets for: its window and how its tokens are counted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelLimits {
    /// The configured model name (`model` in the config).
    pub model: String,
    /// The context window in tokens: `max_context_tokens` if set, else the profile's.
    pub max_tokens: usize,
    /// The tokenizer the model's profile names (`o200k` for an unknown model).
    pub encoding: tokens::Encoding,
    /// `Some` when the model has no public tokenizer: tokens are estimated with these
    /// characters per token (`tokens::RatioCounter`).
    pub chars_per_token: Option<tokens::CharsPerToken>,
}

/// What [`ModelLimits::from_config`] reads of a configuration: the model,
/// the profile its `models` entry describes, and the window override.
/// `compact_middleware::config::Config` implements it; the trait keeps this
/// crate below the configuration.
pub trait LimitsSource {
    /// The configured model name (`model`).
    fn model_name(&self) -> &str;
    /// The profile the `models` entry of `name` describes, if any.
    fn configured_profile(&self, name: &str) -> Option<tokens::ModelProfile>;
    /// `max_context_tokens`.
    fn max_context_tokens(&self) -> Option<usize>;
}

impl ModelLimits {
    /// Resolves `model` against `models` overrides and the built-in profiles;
    /// `max_context_tokens` overrides the window. An unknown model needs
    /// `max_context_tokens`.
    pub fn from_config(config: &impl LimitsSource) -> Result<Self, String> {
        let name = config.model_name();
        let profile = config
            .configured_profile(name)
            .or_else(|| tokens::builtin_profile(name));
        let ratio = profile.and_then(|p| p.ratio);
        let (window, encoding) = match (profile, config.max_context_tokens()) {
            (Some(p), Some(max)) => (max, p.encoding),
            (Some(p), None) => (p.context_window as usize, p.encoding),
            (None, Some(max)) => (max, tokens::Encoding::O200k),
            (None, None) => {
                return Err(format!(
                    "model {name:?} has no built-in profile: set max_context_tokens (and models.{name}.estimator if it does not count like o200k: bpe-cl100k, or ratio for a model without a public tokenizer), or pick a known model"
                ));
            }
        };
        Ok(Self {
            model: name.to_string(),
            max_tokens: window,
            encoding,
            chars_per_token: ratio,
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
    /// Estimated tokens of the whole request: the breakdown's total, or with
    /// [`Basis::Usage`] the anchored figure ([`Anchor::t_est`]).
    pub t_est: usize,
    /// The model's context window in tokens.
    pub max_tokens: usize,
    /// `t_est / max_tokens` as a fraction (1.0 = full), rounded to 4
    /// decimals; infinite when `max_tokens` is 0.
    pub usage_pct: f64,
    /// Where the tokens of the pure estimate go (with [`Basis::Usage`], `t_est`
    /// differs from its total by [`Anchor::correction`]).
    pub breakdown: Breakdown,
    /// Which figure `t_est` rests on.
    pub basis: Basis,
    /// With [`Basis::Usage`]: the provider's figure, what it covered, and the
    /// observed error of the pure estimate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anchor: Option<Anchor>,
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
        // A ratio counter shares the encoding of a BPE one: the salt keeps their
        // counts apart in the shared cache.
        let salt = u128::from(self.counter.cache_salt());
        self.cache.get_or_insert_with(
            m.content_hash() ^ (salt << 64 | salt),
            self.counter.encoding(),
            || tokens::count_item(self.counter, m.raw()),
        )
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

    /// The estimate of a request anchored to `usage_tokens`, the provider's reported
    /// `usage.input_tokens` of the last request, which held the first `covered`
    /// messages of this one (and the same tool schemas).
    pub fn estimate_anchored(
        &self,
        model: &str,
        max_tokens: usize,
        messages: &[Message],
        tools: &[Value],
        covered: usize,
        usage_tokens: usize,
    ) -> Estimate {
        let counts = self.counts(messages);
        let tools_schema = self.count_tools(tools);
        let breakdown = Self::breakdown(messages, &counts, tools_schema);
        let anchor = Anchor::new(
            &counts,
            tools_schema + tokens::REPLY_PRIMING,
            covered,
            usage_tokens,
        );
        Estimate::new(model, max_tokens, breakdown).anchored(anchor)
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
            basis: Basis::Estimate,
            anchor: None,
        }
    }

    /// This estimate with `t_est` (and `usage_pct`) taken from `anchor`.
    pub fn anchored(mut self, anchor: Anchor) -> Self {
        self.t_est = anchor.t_est;
        self.usage_pct = usage(anchor.t_est, self.max_tokens);
        self.basis = Basis::Usage;
        self.anchor = Some(anchor);
        self
    }

    /// How many real tokens one estimated token stands for ([`Anchor::scale`]; 1 for
    /// [`Basis::Estimate`]).
    pub fn scale(&self) -> f64 {
        self.anchor.as_ref().map_or(1.0, Anchor::scale)
    }
}

/// `t / max`, rounded to 4 decimals for stable reports.
pub fn usage(t: usize, max: usize) -> f64 {
    if max == 0 {
        return f64::INFINITY;
    }
    ((t as f64 / max as f64) * 10_000.0).round() / 10_000.0
}
