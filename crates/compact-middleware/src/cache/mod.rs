//! The provider's prompt cache, per call: what it could serve of the request
//! a preflight returns (predicted from the session's previous request), and
//! what the provider said it served of the previous one (the caller's usage
//! figures), each priced with the model's list prices (`crate::price`).
//!
//! The prediction compares the returned messages with the previous call's
//! output, message by message (the provider view's content hash), and
//! assumes the tool schemas did not change:
//!
//! - OpenAI (and any model not named `claude…`): the shared leading tokens,
//!   nothing below 1,024, then in steps of 128.
//! - Anthropic (`claude…`): nothing without a `cache_control` breakpoint.
//!   With one, the read reaches the end of the shared prefix when a
//!   breakpoint lies at most 20 messages past it (the previous request's
//!   end, where an agent that caches its history placed its own), else
//!   back to the last breakpoint inside it; from the read point to the
//!   last breakpoint is written. Nothing is read or written below 1,024
//!   tokens.
//!
//! [`breakpoints`] decides where compact itself puts Anthropic breakpoints
//! (`policy.cache_breakpoints`), so that this rule has something to read.

pub mod breakpoints;
pub mod pace;

use serde::{Deserialize, Serialize};

use crate::model::Message;
use crate::price::{CallTokens, Price, Ttl};

/// OpenAI serves nothing of a prompt shorter than this.
pub const OPENAI_MIN_TOKENS: usize = 1_024;
/// Past the minimum, OpenAI serves the shared prefix in steps of this many tokens.
pub const OPENAI_STEP_TOKENS: usize = 128;
/// The shortest prefix Anthropic caches (Sonnet 4.x; 4,096 for Opus 4.5-4.6 and Haiku 4.5).
pub const ANTHROPIC_MIN_TOKENS: usize = 1_024;
/// How many blocks before a breakpoint Anthropic looks for an earlier entry.
pub const ANTHROPIC_LOOKBACK: usize = 20;

/// Which provider's cache rule applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheRule {
    /// Automatic prefix caching (OpenAI, and the default).
    Openai,
    /// Explicit `cache_control` breakpoints (Anthropic).
    Anthropic,
}

impl CacheRule {
    /// The rule of `model`: Anthropic's for Claude models (gateway spellings
    /// too), else OpenAI's.
    pub fn for_model(model: &str) -> Self {
        let name = model.rsplit('/').next().unwrap_or(model);
        if name.starts_with("claude") || name.contains("anthropic.claude") {
            CacheRule::Anthropic
        } else {
            CacheRule::Openai
        }
    }
}

/// What OpenAI serves of `shared` identical leading tokens.
pub fn openai_cached(shared: usize) -> usize {
    if shared < OPENAI_MIN_TOKENS {
        0
    } else {
        OPENAI_MIN_TOKENS + (shared - OPENAI_MIN_TOKENS) / OPENAI_STEP_TOKENS * OPENAI_STEP_TOKENS
    }
}

/// Whether `m` carries an Anthropic `cache_control` marker (on the message
/// or on one of its content blocks).
pub fn has_breakpoint(m: &Message) -> bool {
    let raw = m.raw();
    raw.contains_key("cache_control")
        || raw
            .get("content")
            .and_then(|c| c.as_array())
            .is_some_and(|blocks| {
                blocks.iter().any(|b| {
                    b.as_object()
                        .is_some_and(|o| o.contains_key("cache_control"))
                })
            })
}

/// The provider's usage figures of a response, as the caller passed them
/// (`PreflightRequest::usage_details`): OpenAI's
/// `prompt_tokens_details.cached_tokens` / `input_tokens_details.cached_tokens`,
/// Anthropic's `cache_read_input_tokens` and `cache_creation_input_tokens`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportedUsage {
    /// Every input token of the request (cached, written and plain).
    pub input_tokens: usize,
    /// Input tokens read from the cache.
    pub cache_read: usize,
    /// Input tokens written to the cache with a 5-minute lifetime.
    pub cache_write: usize,
    /// Input tokens written to the cache with a 1-hour lifetime (Anthropic's
    /// `cache_creation.ephemeral_1h_input_tokens`).
    #[serde(default)]
    pub cache_write_1h: usize,
    /// Output tokens, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<usize>,
}

impl ReportedUsage {
    /// What the call cost at `price`.
    pub fn cost(&self, price: &Price) -> f64 {
        let written = self.cache_write + self.cache_write_1h;
        let plain = self
            .input_tokens
            .saturating_sub(self.cache_read)
            .saturating_sub(written);
        let base = CallTokens {
            input: plain,
            cache_read: self.cache_read,
            cache_write: self.cache_write,
            output: self.output_tokens.unwrap_or(0),
        };
        price.cost(&base, Ttl::FiveMinutes)
            + self.cache_write_1h as f64 * price.cache_write(Ttl::OneHour) / 1e6
    }
}

/// The prompt cache around one call (`Report::cache`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PromptCache {
    /// The rule the prediction followed.
    pub rule: CacheRule,
    /// Identical leading tokens of the returned request and the session's
    /// previous one (0 on a session's first call).
    pub shared_tokens: usize,
    /// Of the returned request, tokens the provider's cache can serve.
    pub predicted_read: usize,
    /// Of the returned request, tokens it would write to the cache
    /// (Anthropic; OpenAI bills no write).
    pub predicted_write: usize,
    /// Tokens of the previous request that the returned one no longer
    /// starts with: what this call's rewrite cost the cache (0 when the
    /// previous request is a prefix; `None` on a first call).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broken_tokens: Option<usize>,
    /// The returned request's input priced by the prediction, US dollars
    /// (`None` without a price for the model).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_input_cost_usd: Option<f64>,
    /// The caller's figures for the previous response.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reported: Option<ReportedUsage>,
    /// The previous call priced by the reported figures, US dollars.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reported_cost_usd: Option<f64>,
}

/// The request a preflight returns, seen against the previous one.
pub struct Prediction<'a> {
    /// The returned messages.
    pub messages: &'a [Message],
    /// Tokens of the tool schemas (sent first) and the first `k` messages.
    pub prefix: &'a dyn Fn(usize) -> usize,
    /// Every input token of the request.
    pub total: usize,
    /// Provider-view hashes of the previous call's output (empty on a first call).
    pub previous: &'a [u128],
    /// Tokens of the previous request, when known.
    pub previous_total: Option<usize>,
    /// Whether this is not the session's first call.
    pub has_previous: bool,
    /// Messages that carry a breakpoint compact placed on the request as
    /// sent, besides the ones `messages` carry (which are compared without
    /// them: a breakpoint does not change what the provider caches).
    pub added_breakpoints: &'a [usize],
}

impl Prediction<'_> {
    /// The prediction under `rule`, priced with `price`, its writes priced
    /// for `ttl` (`policy.cache_ttl`, on Anthropic's rule), with the
    /// caller's `reported` figures of the previous response.
    pub fn cache(
        &self,
        rule: CacheRule,
        price: Option<&Price>,
        ttl: Ttl,
        reported: Option<ReportedUsage>,
    ) -> PromptCache {
        let n = self
            .messages
            .iter()
            .zip(self.previous)
            .take_while(|(m, h)| m.provider_hash() == **h)
            .count();
        let prefix = self.prefix;
        let shared = if self.has_previous { prefix(n) } else { 0 };
        let broken_tokens = self.has_previous.then(|| {
            if n == self.previous.len() {
                0
            } else {
                self.previous_total
                    .map_or(0, |prev| prev.saturating_sub(shared))
            }
        });
        let (read, write) = match rule {
            CacheRule::Openai => (openai_cached(shared), 0),
            CacheRule::Anthropic => {
                let marks: Vec<usize> = self
                    .messages
                    .iter()
                    .enumerate()
                    .filter(|(i, m)| has_breakpoint(m) || self.added_breakpoints.contains(i))
                    .map(|(i, _)| i + 1)
                    .collect();
                match marks.last() {
                    None => (0, 0),
                    Some(&last) => {
                        let read_end = if !self.has_previous || n == 0 {
                            0
                        } else if marks
                            .iter()
                            .any(|&end| end >= n && end - n <= ANTHROPIC_LOOKBACK)
                        {
                            n
                        } else {
                            marks
                                .iter()
                                .copied()
                                .filter(|&end| end <= n)
                                .max()
                                .unwrap_or(0)
                        };
                        let read = if read_end == 0 { 0 } else { prefix(read_end) };
                        let read = if read < ANTHROPIC_MIN_TOKENS { 0 } else { read };
                        let upto = prefix(last);
                        let write = if upto >= ANTHROPIC_MIN_TOKENS {
                            upto.saturating_sub(read)
                        } else {
                            0
                        };
                        (read, write)
                    }
                }
            }
        };
        let read = read.min(self.total);
        let write = write.min(self.total - read);
        let predicted_input_cost_usd = price.map(|p| {
            p.cost(
                &CallTokens {
                    input: self.total - read - write,
                    cache_read: read,
                    cache_write: write,
                    output: 0,
                },
                ttl,
            )
        });
        PromptCache {
            rule,
            shared_tokens: shared,
            predicted_read: read,
            predicted_write: write,
            broken_tokens,
            predicted_input_cost_usd,
            reported,
            reported_cost_usd: reported.zip(price).map(|(r, p)| r.cost(p)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msgs(n: usize) -> Vec<Message> {
        (0..n).map(|i| Message::user(format!("m{i}"))).collect()
    }

    fn hashes(m: &[Message]) -> Vec<u128> {
        m.iter().map(Message::provider_hash).collect()
    }

    #[test]
    fn openai_predicts_the_shared_prefix_by_its_rule() {
        let prev = msgs(4);
        let mut now = prev.clone();
        now.push(Message::user("new"));
        let prefix = |k: usize| 100 + 500 * k;
        let p = Prediction {
            messages: &now,
            prefix: &prefix,
            total: 2_603,
            previous: &hashes(&prev),
            previous_total: Some(2_103),
            has_previous: true,
            added_breakpoints: &[],
        };
        let c = p.cache(CacheRule::Openai, None, Ttl::FiveMinutes, None);
        assert_eq!(c.shared_tokens, 2_100);
        assert_eq!(c.predicted_read, 1_024 + 8 * 128);
        assert_eq!(c.broken_tokens, Some(0));
        // A rewrite of the second message: only the tools and the first
        // message are shared (600 tokens, under the minimum).
        let mut rewritten = now.clone();
        rewritten[1] = Message::user("summary");
        let c = Prediction {
            messages: &rewritten,
            ..p
        }
        .cache(CacheRule::Openai, None, Ttl::FiveMinutes, None);
        assert_eq!((c.shared_tokens, c.predicted_read), (600, 0));
        assert_eq!(c.broken_tokens, Some(2_103 - 600));
        // A first call shares nothing and breaks nothing.
        let first = Prediction {
            messages: &now,
            previous: &[],
            previous_total: None,
            has_previous: false,
            ..p
        };
        let c = first.cache(CacheRule::Openai, None, Ttl::FiveMinutes, None);
        assert_eq!(
            (c.shared_tokens, c.predicted_read, c.broken_tokens),
            (0, 0, None)
        );
    }

    #[test]
    fn anthropic_needs_a_breakpoint_and_reads_back_to_the_previous_end() {
        let prev = msgs(4);
        let mut now = prev.clone();
        let marked = crate::model::Request::from_value(
            json!([{"role": "user", "content": [{"type": "text", "text": "new", "cache_control": {"type": "ephemeral"}}]}]),
            crate::model::Format::Chat,
        )
        .ok()
        .and_then(|r| r.messages.into_iter().next());
        let prefix = |k: usize| 500 * k;
        let price = crate::price::builtin_price("claude-sonnet-4-5").expect("price");
        // No breakpoint: Anthropic caches nothing.
        now.push(Message::user("new"));
        let p = Prediction {
            messages: &now,
            prefix: &prefix,
            total: 2_503,
            previous: &hashes(&prev),
            previous_total: Some(2_003),
            has_previous: true,
            added_breakpoints: &[],
        };
        let c = p.cache(CacheRule::Anthropic, Some(&price), Ttl::FiveMinutes, None);
        assert_eq!((c.predicted_read, c.predicted_write), (0, 0));
        // A breakpoint on the new last message: the previous request is read
        // back (within 20 messages), the new message written.
        let Some(marked) = marked else {
            panic!("a valid message")
        };
        assert!(has_breakpoint(&marked));
        let mut with_mark = now.clone();
        with_mark[4] = marked;
        let c = Prediction {
            messages: &with_mark,
            ..p
        }
        .cache(CacheRule::Anthropic, Some(&price), Ttl::FiveMinutes, None);
        assert_eq!((c.predicted_read, c.predicted_write), (2_000, 500));
        // 2,000 x $0.30 + 500 x $3.75 + 3 x $3 per million.
        let cost = c.predicted_input_cost_usd.expect("priced");
        assert!((cost - (2_000.0 * 0.30 + 500.0 * 3.75 + 3.0 * 3.0) / 1e6).abs() < 1e-12);
    }

    #[test]
    fn reported_figures_are_priced_as_billed() {
        let price = crate::price::builtin_price("claude-sonnet-4-5").expect("price");
        let r = ReportedUsage {
            input_tokens: 10_000,
            cache_read: 6_000,
            cache_write: 3_000,
            cache_write_1h: 500,
            output_tokens: Some(200),
        };
        // 500 plain x 3 + 6,000 x 0.30 + 3,000 x 3.75 + 500 x 6 + 200 x 15.
        let want =
            (500.0 * 3.0 + 6_000.0 * 0.30 + 3_000.0 * 3.75 + 500.0 * 6.0 + 200.0 * 15.0) / 1e6;
        assert!((r.cost(&price) - want).abs() < 1e-12);
        assert_eq!(
            CacheRule::for_model("claude-opus-4-5"),
            CacheRule::Anthropic
        );
        assert_eq!(
            CacheRule::for_model("us.anthropic.claude-sonnet-4-5-v1:0"),
            CacheRule::Anthropic
        );
        assert_eq!(CacheRule::for_model("gpt-4o"), CacheRule::Openai);
    }
}
