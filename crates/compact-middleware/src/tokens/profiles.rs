//! Built-in model profiles: context window and encoding of current OpenAI models.
use super::Encoding;
use serde::{Deserialize, Serialize};

/// What the token accounting needs to know about a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelProfile {
    /// Total context window in tokens (input plus output).
    pub context_window: u64,
    /// The model's BPE vocabulary.
    pub encoding: Encoding,
}

const fn o200k(context_window: u64) -> ModelProfile {
    ModelProfile {
        context_window,
        encoding: Encoding::O200k,
    }
}

const fn cl100k(context_window: u64) -> ModelProfile {
    ModelProfile {
        context_window,
        encoding: Encoding::Cl100k,
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
/// name `ft:BASE:org::id` resolves as `BASE`.
pub fn builtin_profile(model: &str) -> Option<ModelProfile> {
    let model = match model.strip_prefix("ft:") {
        Some(rest) => rest.split(':').next().unwrap_or(rest),
        None => model,
    };
    MODELS
        .iter()
        .filter(|(name, _)| {
            model
                .strip_prefix(name)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
        })
        .max_by_key(|(name, _)| name.len())
        .map(|(_, profile)| *profile)
}
