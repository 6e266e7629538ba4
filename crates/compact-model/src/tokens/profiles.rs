//! Built-in model profiles: context window and how tokens are counted, for current
//! OpenAI models (their BPE vocabulary) and current Claude and Gemini models (a
//! characters-per-token estimate: they publish no tokenizer).
use super::{CharsPerToken, Encoding};
use serde::{Deserialize, Serialize};

/// What the token accounting needs to know about a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelProfile {
    /// Total context window in tokens (input plus output).
    pub context_window: u64,
    /// The model's BPE vocabulary (for a `ratio` model, the one whose framing rules
    /// the estimate follows).
    pub encoding: Encoding,
    /// `Some` for a model without a public tokenizer: tokens are estimated with these
    /// characters per token instead of counted with `encoding`.
    pub ratio: Option<CharsPerToken>,
}

/// How a configured model's tokens are counted (`models.NAME.estimator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EstimatorKind {
    /// Exact counts with the `o200k_base` vocabulary.
    BpeO200k,
    /// Exact counts with the `cl100k_base` vocabulary.
    BpeCl100k,
    /// Characters per token (`models.NAME.chars_per_token`, by default the
    /// `o200k`-calibrated [`CharsPerToken::O200K`]).
    Ratio,
}

const fn o200k(context_window: u64) -> ModelProfile {
    ModelProfile {
        context_window,
        encoding: Encoding::O200k,
        ratio: None,
    }
}

const fn cl100k(context_window: u64) -> ModelProfile {
    ModelProfile {
        context_window,
        encoding: Encoding::Cl100k,
        ratio: None,
    }
}

const fn claude(context_window: u64) -> ModelProfile {
    ModelProfile {
        context_window,
        encoding: Encoding::O200k,
        ratio: Some(CharsPerToken::CLAUDE),
    }
}

const fn gemini(context_window: u64) -> ModelProfile {
    ModelProfile {
        context_window,
        encoding: Encoding::O200k,
        ratio: Some(CharsPerToken::GEMINI),
    }
}

/// Some entries exist only so that a dated or variant name does not fall back to a shorter
/// key with a different window (`o1-mini-2024-09-12` is not `o1`, `gpt-4-1106-preview` is a
/// gpt-4-turbo, not a gpt-4).
static MODELS: &[(&str, ModelProfile)] = &[
    ("gpt-5", o200k(400_000)),
    ("gpt-5-mini", o200k(400_000)),
    ("gpt-5-nano", o200k(400_000)),
    ("gpt-5-chat-latest", o200k(128_000)),
    ("gpt-5.1", o200k(400_000)),
    ("gpt-4.1", o200k(1_047_576)),
    ("gpt-4.1-mini", o200k(1_047_576)),
    ("gpt-4.1-nano", o200k(1_047_576)),
    ("gpt-4o", o200k(128_000)),
    ("gpt-4o-mini", o200k(128_000)),
    ("chatgpt-4o-latest", o200k(128_000)),
    ("o1", o200k(200_000)),
    ("o1-mini", o200k(128_000)),
    ("o1-preview", o200k(128_000)),
    ("o3", o200k(200_000)),
    ("o3-mini", o200k(200_000)),
    ("o4-mini", o200k(200_000)),
    ("gpt-4", cl100k(8_192)),
    ("gpt-4-32k", cl100k(32_768)),
    ("gpt-4-turbo", cl100k(128_000)),
    ("gpt-4-1106-preview", cl100k(128_000)),
    ("gpt-4-0125-preview", cl100k(128_000)),
    ("gpt-4-vision-preview", cl100k(128_000)),
    ("gpt-3.5-turbo", cl100k(16_385)),
    // Claude: the standard 200k window (a larger one, where offered, is opt-in: set
    // max_context_tokens).
    ("claude-opus-4-7", claude(200_000)),
    ("claude-opus-4-6", claude(200_000)),
    ("claude-sonnet-4-6", claude(200_000)),
    ("claude-opus-4-5", claude(200_000)),
    ("claude-sonnet-4-5", claude(200_000)),
    ("claude-haiku-4-5", claude(200_000)),
    ("claude-opus-4-1", claude(200_000)),
    ("claude-opus-4", claude(200_000)),
    ("claude-sonnet-4", claude(200_000)),
    ("claude-3-7-sonnet", claude(200_000)),
    ("claude-3-5-sonnet", claude(200_000)),
    ("claude-3-5-haiku", claude(200_000)),
    ("gemini-3-pro-preview", gemini(1_048_576)),
    ("gemini-2.5-pro", gemini(1_048_576)),
    ("gemini-2.5-flash", gemini(1_048_576)),
    ("gemini-2.5-flash-lite", gemini(1_048_576)),
    ("gemini-2.0-flash", gemini(1_048_576)),
    ("gemini-2.0-flash-lite", gemini(1_048_576)),
    ("gemini-1.5-pro", gemini(2_097_152)),
    ("gemini-1.5-flash", gemini(1_048_576)),
];

/// Every built-in `(model name, profile)` pair.
pub fn builtin_models() -> &'static [(&'static str, ModelProfile)] {
    MODELS
}

/// The built-in profile of `model`, or `None` for a model we do not know.
///
/// A dated snapshot or variant resolves to the longest built-in name that is a prefix of it
/// and ends at the end of the string or at a `-`: `gpt-4o-2024-08-06` is `gpt-4o`,
/// `gpt-4.1-mini-2025-04-14` is `gpt-4.1-mini`, and `gpt-4o` is never `gpt-4`. A fine-tuned
/// name `ft:BASE:org::id` resolves as `BASE`. Gateway spellings resolve as the model they
/// name: a `provider/` or `models/` prefix, a Bedrock `…anthropic.` prefix and a Vertex
/// `@version` suffix are ignored (`us.anthropic.claude-sonnet-4-5-20250929-v1:0` and
/// `claude-sonnet-4-5@20250929` are `claude-sonnet-4-5`).
pub fn builtin_profile(model: &str) -> Option<ModelProfile> {
    longest_builtin(MODELS, model).copied()
}

/// The entry of `table` whose name is the longest prefix of `model` ending at
/// its end or at a `-`, after the spelling rules of [`builtin_profile`]; the
/// lookup the built-in profiles and prices share.
pub(crate) fn longest_builtin<'a, T>(table: &'a [(&str, T)], model: &str) -> Option<&'a T> {
    let model = match model.strip_prefix("ft:") {
        Some(rest) => rest.split(':').next().unwrap_or(rest),
        None => model,
    };
    let model = model.rsplit('/').next().unwrap_or(model);
    let model = match model.find("anthropic.") {
        Some(at) => &model[at + "anthropic.".len()..],
        None => model,
    };
    let model = model.split('@').next().unwrap_or(model);
    table
        .iter()
        .filter(|(name, _)| {
            model
                .strip_prefix(name)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
        })
        .max_by_key(|(name, _)| name.len())
        .map(|(_, value)| value)
}
