//! What a model call costs: list prices per million tokens (input, cached
//! input, cache write, output), the built-in table for the models the
//! configuration knows, and the cost of one call's token figures.
//!
//! The built-in prices are the providers' published list prices, read on
//! [`PRICES_READ_ON`] (sources in `docs/performance.md`, "Prompt cache and
//! cost"). `models.NAME.price` in the configuration replaces them
//! (`Config::price`).

use garde::Validate;
use serde::{Deserialize, Serialize};

/// The day the built-in prices were read from the providers' pricing pages.
pub const PRICES_READ_ON: &str = "2026-11-27";

/// A model's list prices, in US dollars per million tokens
/// (`models.NAME.price`).
///
/// `input` and `output` are required; a price left out defaults to what a
/// provider without that feature charges: `cached_input` and `cache_write`
/// to `input` (no discount, no surcharge), `cache_write_1h` to
/// `cache_write`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, Validate)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Input tokens the provider did not serve from its prompt cache.
    #[garde(custom(price_value))]
    pub input: f64,
    /// Input tokens served from the prompt cache (OpenAI's "cached input",
    /// Anthropic's "cache hits").
    #[garde(custom(opt_price_value))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input: Option<f64>,
    /// Input tokens written to the prompt cache (Anthropic's 5-minute
    /// cache write; OpenAI writes at the input price).
    #[garde(custom(opt_price_value))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
    /// Anthropic's 1-hour cache write.
    #[garde(custom(opt_price_value))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_1h: Option<f64>,
    /// Output tokens.
    #[garde(custom(price_value))]
    pub output: f64,
}

/// How long a provider keeps a prompt-cache entry (Anthropic's `ttl`); it
/// decides the price of a cache write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ttl {
    /// The default `ephemeral` entry: five minutes from its last use.
    FiveMinutes,
    /// `"ttl": "1h"`: one hour from its last use.
    OneHour,
}

impl Ttl {
    /// The lifetime in seconds.
    pub fn secs(self) -> u64 {
        match self {
            Ttl::FiveMinutes => 300,
            Ttl::OneHour => 3_600,
        }
    }

    /// `5m` or `1h`.
    pub fn name(self) -> &'static str {
        match self {
            Ttl::FiveMinutes => "5m",
            Ttl::OneHour => "1h",
        }
    }
}

/// The token figures of one call, split the way providers bill them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallTokens {
    /// Input tokens neither read from nor written to the cache.
    pub input: usize,
    /// Input tokens read from the cache.
    pub cache_read: usize,
    /// Input tokens written to the cache.
    pub cache_write: usize,
    /// Output tokens.
    pub output: usize,
}

impl CallTokens {
    /// Every input token of the call: `input + cache_read + cache_write`.
    pub fn prompt(&self) -> usize {
        self.input + self.cache_read + self.cache_write
    }
}

impl Price {
    /// Prices with every field given.
    pub const fn new(
        input: f64,
        cached_input: f64,
        cache_write: f64,
        cache_write_1h: f64,
        output: f64,
    ) -> Self {
        Self {
            input,
            cached_input: Some(cached_input),
            cache_write: Some(cache_write),
            cache_write_1h: Some(cache_write_1h),
            output,
        }
    }

    /// The price of a cached input token.
    pub fn cached_input(&self) -> f64 {
        self.cached_input.unwrap_or(self.input)
    }

    /// The price of a token written to the cache with `ttl`.
    pub fn cache_write(&self, ttl: Ttl) -> f64 {
        let five = self.cache_write.unwrap_or(self.input);
        match ttl {
            Ttl::FiveMinutes => five,
            Ttl::OneHour => self.cache_write_1h.unwrap_or(five),
        }
    }

    /// What a call with `tokens` costs, in US dollars, its cache writes at
    /// the price of `ttl`.
    pub fn cost(&self, tokens: &CallTokens, ttl: Ttl) -> f64 {
        (tokens.input as f64 * self.input
            + tokens.cache_read as f64 * self.cached_input()
            + tokens.cache_write as f64 * self.cache_write(ttl)
            + tokens.output as f64 * self.output)
            / 1_000_000.0
    }
}

/// OpenAI: no cache-write surcharge.
const fn openai(input: f64, cached_input: f64, output: f64) -> Price {
    Price::new(input, cached_input, input, input, output)
}

/// Anthropic: cache reads at 0.1x the input price, 5-minute writes at
/// 1.25x, 1-hour writes at 2x (written out, not computed, as the pricing
/// page lists them).
const fn anthropic(
    input: f64,
    cache_read: f64,
    write_5m: f64,
    write_1h: f64,
    output: f64,
) -> Price {
    Price::new(input, cache_read, write_5m, write_1h, output)
}

/// The built-in prices, by the names of `tokens::builtin_models` (dated and
/// gateway spellings resolve the same way). Models with no prompt-cache
/// price on the providers' pages (gpt-4, gpt-3.5-turbo, Gemini: their
/// cache is priced per stored hour) have no entry: give one in
/// `models.NAME.price`.
static PRICES: &[(&str, Price)] = &[
    ("gpt-5.1", openai(1.25, 0.125, 10.0)),
    ("gpt-5", openai(1.25, 0.125, 10.0)),
    ("gpt-5-chat-latest", openai(1.25, 0.125, 10.0)),
    ("gpt-5-mini", openai(0.25, 0.025, 2.0)),
    ("gpt-5-nano", openai(0.05, 0.005, 0.40)),
    ("gpt-4.1", openai(2.0, 0.50, 8.0)),
    ("gpt-4.1-mini", openai(0.40, 0.10, 1.60)),
    ("gpt-4.1-nano", openai(0.10, 0.025, 0.40)),
    ("gpt-4o", openai(2.50, 1.25, 10.0)),
    ("gpt-4o-mini", openai(0.15, 0.075, 0.60)),
    ("o1", openai(15.0, 7.50, 60.0)),
    ("o3", openai(2.0, 0.50, 8.0)),
    ("o3-mini", openai(1.10, 0.55, 4.40)),
    ("o4-mini", openai(1.10, 0.275, 4.40)),
    ("claude-opus-4-7", anthropic(5.0, 0.50, 6.25, 10.0, 25.0)),
    ("claude-opus-4-6", anthropic(5.0, 0.50, 6.25, 10.0, 25.0)),
    ("claude-opus-4-5", anthropic(5.0, 0.50, 6.25, 10.0, 25.0)),
    ("claude-opus-4-1", anthropic(15.0, 1.50, 18.75, 30.0, 75.0)),
    ("claude-opus-4", anthropic(15.0, 1.50, 18.75, 30.0, 75.0)),
    ("claude-sonnet-4-6", anthropic(3.0, 0.30, 3.75, 6.0, 15.0)),
    ("claude-sonnet-4-5", anthropic(3.0, 0.30, 3.75, 6.0, 15.0)),
    ("claude-sonnet-4", anthropic(3.0, 0.30, 3.75, 6.0, 15.0)),
    ("claude-3-7-sonnet", anthropic(3.0, 0.30, 3.75, 6.0, 15.0)),
    ("claude-haiku-4-5", anthropic(1.0, 0.10, 1.25, 2.0, 5.0)),
    ("claude-3-5-haiku", anthropic(0.80, 0.08, 1.0, 1.6, 4.0)),
];

/// Every built-in `(model name, price)` pair.
pub fn builtin_prices() -> &'static [(&'static str, Price)] {
    PRICES
}

/// The built-in price of `model`, resolved as `tokens::builtin_profile`
/// resolves a name (a dated snapshot is its model, gateway prefixes are
/// ignored); `None` for a model without one.
pub fn builtin_price(model: &str) -> Option<Price> {
    crate::tokens::longest_builtin(PRICES, model).copied()
}

fn price_value(value: &f64, _: &()) -> garde::Result {
    if value.is_finite() && *value >= 0.0 {
        Ok(())
    } else {
        Err(garde::Error::new(format!(
            "must be a number >= 0 (US dollars per million tokens) (got {value})"
        )))
    }
}

fn opt_price_value(value: &Option<f64>, ctx: &()) -> garde::Result {
    value.as_ref().map_or(Ok(()), |v| price_value(v, ctx))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_costs_each_kind_of_token_at_its_price() {
        let p = builtin_price("claude-sonnet-4-5-20250929").expect("known");
        let t = CallTokens {
            input: 1_000_000,
            cache_read: 2_000_000,
            cache_write: 1_000_000,
            output: 100_000,
        };
        // 3 + 2 x 0.30 + 3.75 + 0.1 x 15
        assert!((p.cost(&t, Ttl::FiveMinutes) - 8.85).abs() < 1e-9);
        // The 1-hour write costs 6 instead of 3.75.
        assert!((p.cost(&t, Ttl::OneHour) - 11.10).abs() < 1e-9);
        assert_eq!(t.prompt(), 4_000_000);
    }

    #[test]
    fn missing_prices_default_to_no_discount_and_no_surcharge() {
        let p = Price {
            input: 2.0,
            cached_input: None,
            cache_write: None,
            cache_write_1h: None,
            output: 8.0,
        };
        assert_eq!(p.cached_input(), 2.0);
        assert_eq!(p.cache_write(Ttl::FiveMinutes), 2.0);
        assert_eq!(p.cache_write(Ttl::OneHour), 2.0);
        let p = Price {
            cache_write: Some(2.5),
            ..p
        };
        assert_eq!(p.cache_write(Ttl::OneHour), 2.5);
    }

    #[test]
    fn names_resolve_like_profiles() {
        let exact = |m: &str| builtin_price(m).map(|p| p.input);
        assert_eq!(exact("gpt-4o-2024-08-06"), Some(2.50));
        assert_eq!(exact("gpt-4o-mini"), Some(0.15));
        assert_eq!(exact("gpt-5.1"), Some(1.25));
        assert_eq!(exact("gpt-5-mini-2025-08-07"), Some(0.25));
        assert_eq!(
            exact("us.anthropic.claude-opus-4-1-20250805-v1:0"),
            Some(15.0)
        );
        assert_eq!(exact("claude-opus-4-5@20251101"), Some(5.0));
        assert_eq!(exact("gpt-4"), None, "no cache price listed");
        assert_eq!(exact("my-model"), None);
        // Every built-in price names a model with a built-in profile.
        for (name, p) in builtin_prices() {
            assert!(crate::tokens::builtin_profile(name).is_some(), "{name}");
            assert!(p.validate().is_ok(), "{name}");
            assert!(p.cached_input() <= p.input, "{name}");
        }
    }
}
