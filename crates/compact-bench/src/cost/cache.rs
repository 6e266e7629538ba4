//! What a provider's prompt cache could serve of each call of a session.
//!
//! A request is a list of [`Block`]s (one per message, as the codec sends
//! it, with its exact token count) plus the reply priming. Two rules:
//!
//! - [`OpenAiCache`]: the identical leading tokens of this request and the
//!   previous one of the same session, served from 1,024 tokens on in
//!   steps of 128 ([`openai_cached`]). Identity is per message (the
//!   provider view's content hash); inside the first message that differs,
//!   the tokens of the text the two serializations share count too (less
//!   one, for the token the divergence may split).
//! - [`AnthropicCache`]: a request is read from the cache up to the longest
//!   prefix that ends at a breakpoint of an earlier request (or up to 20
//!   blocks before one of this request's breakpoints) and whose entry has
//!   not expired; what lies between that point and the request's last
//!   breakpoint is written (when that prefix reaches the model's minimum);
//!   the rest is plain input. A hit refreshes the entry's lifetime.
//!
//! Blocks are messages here: a message with several content blocks gives
//! the 20-block lookback more reach than the provider does.

use std::collections::HashMap;

use compact_middleware::Message;
use compact_middleware::price::{CallTokens, Ttl};

/// The providers' rules, as the middleware predicts them for its events.
pub use compact_middleware::cache::{
    ANTHROPIC_LOOKBACK as ANTHROPIC_LOOKBACK_BLOCKS, ANTHROPIC_MIN_TOKENS, OPENAI_MIN_TOKENS,
    OPENAI_STEP_TOKENS, openai_cached,
};

/// One message of a request as the provider receives it.
#[derive(Debug, Clone)]
pub struct Block {
    /// Content hash of the provider view (`Message::provider_hash`).
    pub hash: u128,
    /// Its tokens, per-message overhead included (the project's counter).
    pub tokens: usize,
    /// The message, for the text two versions of it share.
    pub message: Message,
}

impl Block {
    /// `m` as sent, counted as `tokens`.
    pub fn new(m: &Message, tokens: usize) -> Self {
        Self {
            hash: m.provider_hash(),
            tokens,
            message: m.clone(),
        }
    }
}

/// One request of a session.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// The messages, in order.
    pub blocks: Vec<Block>,
    /// Tokens after the last message (the reply priming).
    pub trailer: usize,
    /// Where the request carries `cache_control` (Anthropic): after block
    /// `i` for each `i`, ascending.
    pub breakpoints: Vec<usize>,
}

impl Request {
    /// Every input token of the request.
    pub fn tokens(&self) -> usize {
        self.blocks.iter().map(|b| b.tokens).sum::<usize>() + self.trailer
    }

    /// Leading messages and tokens this request shares with `prev`: whole
    /// messages with the same provider view, then the shared leading text of
    /// the first pair that differs (`count` tokenizes it).
    pub fn shared_with(&self, prev: &Request, count: &dyn Fn(&str) -> usize) -> Shared {
        let messages = self
            .blocks
            .iter()
            .zip(&prev.blocks)
            .take_while(|(a, b)| a.hash == b.hash)
            .count();
        let mut tokens: usize = self.blocks[..messages].iter().map(|b| b.tokens).sum();
        if let (Some(a), Some(b)) = (self.blocks.get(messages), prev.blocks.get(messages)) {
            let (ta, tb) = (
                a.message.to_provider_value().to_string(),
                b.message.to_provider_value().to_string(),
            );
            let common = common_prefix(&ta, &tb);
            tokens += count(common).saturating_sub(1).min(a.tokens);
        } else if messages == self.blocks.len() && messages == prev.blocks.len() {
            // The same request again: the priming is shared too.
            tokens += self.trailer.min(prev.trailer);
        }
        Shared {
            messages,
            tokens,
            rewrote: messages < prev.blocks.len(),
        }
    }
}

/// What a request shares with the previous one of its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shared {
    /// Leading messages identical to the previous request's.
    pub messages: usize,
    /// Identical leading tokens.
    pub tokens: usize,
    /// A message the previous request sent is missing or changed here: the
    /// prefix broke.
    pub rewrote: bool,
}

/// The longest common leading text of `a` and `b`, cut at a character
/// boundary.
fn common_prefix<'a>(a: &'a str, b: &str) -> &'a str {
    let mut end = 0;
    for ((i, ca), cb) in a.char_indices().zip(b.chars()) {
        if ca != cb {
            break;
        }
        end = i + ca.len_utf8();
    }
    &a[..end]
}

/// OpenAI's automatic prompt cache, one session.
#[derive(Debug, Default)]
pub struct OpenAiCache {
    prev: Option<Request>,
}

impl OpenAiCache {
    /// A session that has made no call yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The input tokens of `req`, split into cached and not (OpenAI bills no
    /// cache write), and what it shares with the previous call.
    pub fn call(&mut self, req: &Request, count: &dyn Fn(&str) -> usize) -> (CallTokens, Shared) {
        let shared = match &self.prev {
            Some(prev) => req.shared_with(prev, count),
            None => Shared {
                messages: 0,
                tokens: 0,
                rewrote: false,
            },
        };
        let total = req.tokens();
        let cached = openai_cached(shared.tokens).min(total);
        self.prev = Some(req.clone());
        (
            CallTokens {
                input: total - cached,
                cache_read: cached,
                ..CallTokens::default()
            },
            shared,
        )
    }
}

/// Anthropic's prompt cache with explicit breakpoints, one session.
#[derive(Debug)]
pub struct AnthropicCache {
    ttl: Ttl,
    min_tokens: usize,
    /// Prefix hash → (its tokens, when it expires, in seconds).
    entries: HashMap<u128, (usize, u64)>,
}

impl AnthropicCache {
    /// An empty cache whose entries live `ttl` and need `min_tokens`.
    pub fn new(ttl: Ttl, min_tokens: usize) -> Self {
        Self {
            ttl,
            min_tokens,
            entries: HashMap::new(),
        }
    }

    /// The input tokens of `req`, made at `now` (seconds), split into read,
    /// written and plain.
    pub fn call(&mut self, req: &Request, now: u64) -> CallTokens {
        let n = req.blocks.len();
        // prefix[i]: hash and tokens of the first i blocks.
        let mut hashes = Vec::with_capacity(n + 1);
        let mut tokens = Vec::with_capacity(n + 1);
        let (mut h, mut t) = (0u128, 0usize);
        hashes.push(h);
        tokens.push(t);
        for b in &req.blocks {
            h = mix(h, b.hash);
            t += b.tokens;
            hashes.push(h);
            tokens.push(t);
        }
        self.entries.retain(|_, (_, expires)| *expires > now);
        let ends: Vec<usize> = req
            .breakpoints
            .iter()
            .map(|&b| b + 1)
            .filter(|&end| end <= n)
            .collect();
        // The longest live entry a breakpoint can reach back to.
        let mut read_end = 0;
        for &end in &ends {
            let lowest = end.saturating_sub(ANTHROPIC_LOOKBACK_BLOCKS).max(1);
            if let Some(hit) = (lowest..=end)
                .rev()
                .find(|&j| self.entries.contains_key(&hashes[j]))
            {
                read_end = read_end.max(hit);
            }
        }
        let expires = now + self.ttl.secs();
        if read_end > 0
            && let Some(entry) = self.entries.get_mut(&hashes[read_end])
        {
            entry.1 = expires;
        }
        let read = tokens[read_end];
        // Every breakpoint past the read point writes its prefix, if long enough.
        let mut written_end = read_end;
        for &end in &ends {
            if end > read_end && tokens[end] >= self.min_tokens {
                self.entries.insert(hashes[end], (tokens[end], expires));
                written_end = written_end.max(end);
            }
        }
        let write = tokens[written_end] - read;
        CallTokens {
            input: req.tokens() - read - write,
            cache_read: read,
            cache_write: write,
            output: 0,
        }
    }
}

fn mix(h: u128, block: u128) -> u128 {
    // An order-sensitive fold: the prefix [a, b] differs from [b, a].
    h.rotate_left(7)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835)
        ^ block
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(texts: &[&str], tokens: usize, breakpoints: &[usize]) -> Request {
        Request {
            blocks: texts
                .iter()
                .map(|t| Block::new(&Message::user(*t), tokens))
                .collect(),
            trailer: 3,
            breakpoints: breakpoints.to_vec(),
        }
    }

    fn chars(s: &str) -> usize {
        s.len()
    }

    #[test]
    fn openai_serves_from_1024_tokens_in_steps_of_128() {
        assert_eq!(openai_cached(0), 0);
        assert_eq!(openai_cached(1_023), 0);
        assert_eq!(openai_cached(1_024), 1_024);
        assert_eq!(openai_cached(1_151), 1_024);
        assert_eq!(openai_cached(1_152), 1_152);
        assert_eq!(openai_cached(10_000), 1_024 + 70 * 128);
    }

    #[test]
    fn openai_reads_the_previous_request_when_it_is_a_prefix() {
        let mut cache = OpenAiCache::new();
        let a = req(&["s", "u1", "a1"], 500, &[]);
        let (first, shared) = cache.call(&a, &chars);
        assert_eq!((first.cache_read, first.input), (0, 1_503));
        assert!(!shared.rewrote);
        // Appending keeps the whole previous request: 1,500 tokens shared,
        // 1,408 served (1,024 + 3 x 128).
        let b = req(&["s", "u1", "a1", "u2"], 500, &[]);
        let (second, shared) = cache.call(&b, &chars);
        assert_eq!(shared.messages, 3);
        assert!(!shared.rewrote);
        assert_eq!(second.cache_read, 1_408);
        assert_eq!(second.prompt(), 2_003);
        // Rewriting the second message keeps only the first one (and the
        // few tokens of text the two versions of the second share), under
        // the minimum: nothing served, and the prefix broke.
        let c = req(&["s", "summary", "u2"], 500, &[]);
        let (third, shared) = cache.call(&c, &chars);
        assert_eq!(shared.messages, 1);
        assert!(shared.rewrote);
        assert!(shared.tokens > 500 && shared.tokens < 1_000, "{shared:?}");
        assert_eq!(third.cache_read, 0);
    }

    #[test]
    fn openai_counts_the_shared_text_of_the_first_changed_message() {
        let mut cache = OpenAiCache::new();
        let long = "x".repeat(3_000);
        let a = req(&[&long], 3_000, &[]);
        cache.call(&a, &chars);
        let edited = format!("{long}y");
        let b = req(&[&edited], 3_001, &[]);
        let (tokens, shared) = cache.call(&b, &chars);
        // The JSON text shares everything up to the edit: about 3,000
        // characters (here one token each), capped at the message.
        assert!(
            shared.tokens >= 3_000 && shared.tokens <= 3_001,
            "{shared:?}"
        );
        assert_eq!(tokens.cache_read, openai_cached(shared.tokens));
        assert!(shared.rewrote);
    }

    #[test]
    fn anthropic_reads_up_to_the_last_breakpoint_an_earlier_call_wrote() {
        let mut cache = AnthropicCache::new(Ttl::FiveMinutes, 1_024);
        // Breakpoints after the system message and at the end.
        let a = req(&["s", "u1", "a1"], 600, &[0, 2]);
        let first = cache.call(&a, 0);
        // The system prefix (600) is under the minimum: only the end is written.
        assert_eq!(
            (first.cache_read, first.cache_write, first.input),
            (0, 1_800, 3)
        );
        let b = req(&["s", "u1", "a1", "u2", "a2"], 600, &[0, 4]);
        let second = cache.call(&b, 30);
        assert_eq!(second.cache_read, 1_800, "read back to the previous end");
        assert_eq!(second.cache_write, 1_200);
        assert_eq!(second.input, 3);
        // A rewrite after the system message: nothing earlier was written
        // at a point this request still has.
        let c = req(&["s", "summary", "u3"], 600, &[0, 2]);
        let third = cache.call(&c, 60);
        assert_eq!((third.cache_read, third.cache_write), (0, 1_800));
    }

    #[test]
    fn anthropic_reaches_back_at_most_twenty_blocks() {
        let texts: Vec<String> = (0..40).map(|i| format!("m{i}")).collect();
        let all: Vec<&str> = texts.iter().map(String::as_str).collect();
        let after = |blocks: usize| {
            let mut cache = AnthropicCache::new(Ttl::OneHour, 1_024);
            cache.call(&req(&all[..5], 300, &[4]), 0);
            cache.call(&req(&all[..blocks], 300, &[blocks - 1]), 10)
        };
        // 20 blocks past the entry it is still in reach...
        assert_eq!(after(25).cache_read, 5 * 300);
        // ...21 blocks past it, it is not: everything is written again.
        let far = after(26);
        assert_eq!(far.cache_read, 0);
        assert_eq!(far.cache_write, 26 * 300);
    }

    #[test]
    fn an_entry_expires_after_its_ttl_unless_read() {
        let a = req(&["s", "u1", "a1"], 600, &[2]);
        let b = req(&["s", "u1", "a1", "u2"], 600, &[3]);
        for (ttl, gap, hit) in [
            (Ttl::FiveMinutes, 299, true),
            (Ttl::FiveMinutes, 300, false),
            (Ttl::OneHour, 3_000, true),
            (Ttl::OneHour, 3_600, false),
        ] {
            let mut cache = AnthropicCache::new(ttl, 1_024);
            cache.call(&a, 0);
            let second = cache.call(&b, gap);
            assert_eq!(second.cache_read > 0, hit, "{ttl:?} after {gap}s");
        }
        // A hit refreshes the entry: read at 200 s, still there at 450 s.
        let mut cache = AnthropicCache::new(Ttl::FiveMinutes, 1_024);
        cache.call(&a, 0);
        cache.call(&req(&["s", "u1", "a1", "x"], 600, &[2]), 200);
        assert_eq!(cache.call(&b, 450).cache_read, 1_800);
    }

    #[test]
    fn without_breakpoints_nothing_is_cached() {
        let mut cache = AnthropicCache::new(Ttl::FiveMinutes, 1_024);
        let a = req(&["s", "u1"], 2_000, &[]);
        cache.call(&a, 0);
        let again = cache.call(&a, 1);
        assert_eq!(
            (again.cache_read, again.cache_write, again.input),
            (0, 0, 4_003)
        );
    }
}
