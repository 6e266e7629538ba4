//! Exact token accounting.
//!
//! - [`TokenCounter`] and [`counter`]: BPE counts with the OpenAI vocabularies, two
//!   interchangeable backends that return identical counts.
//! - [`count_item`] and [`count_tools`]: what one message / input item and the tool
//!   schemas of a request cost, under the rules written down in `docs/tokens.md`.
//! - [`ModelProfile`] and [`builtin_profile`]: context window and encoding per model.
//! - [`RatioCounter`] and [`CharsPerToken`]: estimates for models without a public
//!   tokenizer (Claude, Gemini), calibrated per kind of text.
//! - [`item_hash`] and [`CountCache`]: count every item once.
use serde::{Deserialize, Serialize};

mod cache;
mod counter;
mod profiles;
mod ratio;
mod rules;

pub use cache::{CacheStats, CountCache, item_hash};
pub use counter::{TokenCounter, counter};
pub(crate) use profiles::longest_builtin;
pub use profiles::{EstimatorKind, ModelProfile, builtin_models, builtin_profile};
pub use ratio::{CharsPerToken, RatioCounter, estimate as ratio_estimate, ratio_counter};
pub use rules::{
    AUDIO_PART, FILE_PART, IMAGE_ANTHROPIC, IMAGE_HIGH, IMAGE_LOW, PER_MESSAGE, PER_NAME,
    PER_TOOL_CALL, REPLY_PRIMING, count_item, count_tools,
};

/// A BPE vocabulary used by OpenAI models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Encoding {
    /// `o200k_base`: gpt-4o, gpt-4.1, gpt-5, o-series.
    O200k,
    /// `cl100k_base`: gpt-4, gpt-3.5-turbo.
    Cl100k,
}

/// Which tokenizer implementation does the counting. Both give identical counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// `bpe-openai`: the default, linear time even on pathological input.
    #[default]
    Bpe,
    /// `tiktoken-rs`: the reference implementation.
    Tiktoken,
}
