//! Exact token accounting.
use serde::{Deserialize, Serialize};

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
