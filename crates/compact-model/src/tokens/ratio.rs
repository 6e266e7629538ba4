//! Token estimates for models without a public tokenizer (Claude, Gemini, open models):
//! characters per token, calibrated per kind of text. The calibration and its measured
//! error are in `docs/tokens.md`; usage anchoring (`crate::estimate::Anchor`) corrects what is
//! left.
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::{Backend, Encoding, TokenCounter};

/// Characters per token of a tokenizer, by kind of text. Whitespace runs count as one
/// character (tokenizers fold indentation into few tokens).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CharsPerToken {
    /// Prose in Latin-script languages (English, French, German, Spanish, ...).
    pub latin: f64,
    /// Chinese, Japanese and Korean text (and emoji), per character.
    pub cjk: f64,
    /// Lines dense in symbols: source code, JSON, shell, logs.
    pub code: f64,
}

// The ratios are validated finite and positive wherever they are read, so equality
// is the equality of their bits.
impl Eq for CharsPerToken {}

impl CharsPerToken {
    /// Calibrated against `o200k_base` on `tests/fixtures/tokens/calibration/`: the
    /// `ratio` estimator's default, for a model whose tokenizer is close to OpenAI's.
    pub const O200K: CharsPerToken = CharsPerToken {
        latin: 4.9,
        cjk: 1.4,
        code: 3.3,
    };
    /// Claude: Anthropic documents about 3.5 characters per token for English; CJK and
    /// code are scaled from the `o200k` calibration by the same factor (Claude has no
    /// public tokenizer to measure them against).
    pub const CLAUDE: CharsPerToken = CharsPerToken {
        latin: 3.5,
        cjk: 1.0,
        code: 2.4,
    };
    /// Gemini: Google documents about 4 characters per token; CJK and code scaled from
    /// the `o200k` calibration likewise.
    pub const GEMINI: CharsPerToken = CharsPerToken {
        latin: 4.0,
        cjk: 1.1,
        code: 2.7,
    };

    /// The first ratio that is not a finite number above zero, by name.
    pub fn invalid(&self) -> Option<(&'static str, f64)> {
        [
            ("latin", self.latin),
            ("cjk", self.cjk),
            ("code", self.code),
        ]
        .into_iter()
        .find(|(_, v)| !(v.is_finite() && *v > 0.0))
    }

    fn bits(&self) -> [u64; 3] {
        [
            self.latin.to_bits(),
            self.cjk.to_bits(),
            self.code.to_bits(),
        ]
    }
}

/// Other alphabetic scripts (Cyrillic, Greek, Arabic, Devanagari, ...) take more tokens
/// per character than Latin prose in every tokenizer we know of: each of their letters
/// counts this many Latin characters (measured on `o200k_base`, `docs/tokens.md`).
const OTHER_SCRIPT_WEIGHT: f64 = 1.25;

/// A line is code when at least this share of its visible characters are symbols prose
/// rarely uses ([`is_code_symbol`]); prose stays well under it, code and JSON above.
const CODE_SYMBOL_SHARE: f64 = 0.05;

/// ASCII symbols of code, markup and data, not of prose (no `,` `.` `'` `:` `!` `?` `-`).
fn is_code_symbol(c: char) -> bool {
    matches!(
        c,
        '{' | '}'
            | '['
            | ']'
            | '('
            | ')'
            | '<'
            | '>'
            | '='
            | '_'
            | '/'
            | '\\'
            | '|'
            | '&'
            | '*'
            | '#'
            | '$'
            | '%'
            | '^'
            | '~'
            | '`'
            | '@'
            | '+'
            | ';'
            | '"'
    )
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x1100..=0x11FF      // Hangul Jamo
        | 0x2E80..=0x2FDF    // CJK radicals
        | 0x3000..=0x303F    // CJK symbols and punctuation
        | 0x3040..=0x30FF    // Hiragana, Katakana
        | 0x3100..=0x31FF    // Bopomofo, Hangul compatibility Jamo, ...
        | 0x3400..=0x4DBF    // CJK extension A
        | 0x4E00..=0x9FFF    // CJK unified ideographs
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xF900..=0xFAFF    // CJK compatibility ideographs
        | 0xFF00..=0xFFEF    // halfwidth and fullwidth forms
        | 0x1F000..=0x1FAFF  // emoji and pictographs
        | 0x20000..=0x3FFFF // CJK extensions B and later
    )
}

/// Estimates the tokens of `text` with `cpt`.
pub fn estimate(text: &str, cpt: &CharsPerToken) -> usize {
    if text.is_empty() {
        return 0;
    }
    let mut tokens = 0.0;
    for line in text.split_inclusive('\n') {
        let (mut units, mut cjk, mut visible, mut symbols) = (0.0, 0usize, 0usize, 0usize);
        let mut in_space = false;
        for c in line.chars() {
            if c.is_whitespace() {
                if !in_space {
                    units += 1.0;
                }
                in_space = true;
                continue;
            }
            in_space = false;
            visible += 1;
            if is_cjk(c) {
                cjk += 1;
            } else if c.is_ascii() {
                units += 1.0;
                if is_code_symbol(c) {
                    symbols += 1;
                }
            } else if c.is_alphabetic() && (c as u32) > 0x024F {
                units += OTHER_SCRIPT_WEIGHT;
            } else {
                units += 1.0;
            }
        }
        let latin_visible = visible - cjk;
        let per_token =
            if latin_visible > 0 && symbols as f64 >= CODE_SYMBOL_SHARE * latin_visible as f64 {
                cpt.code
            } else {
                cpt.latin
            };
        tokens += units / per_token + cjk as f64 / cpt.cjk;
    }
    (tokens.round() as usize).max(1)
}

/// A [`TokenCounter`] that estimates with characters per token. It reports the `o200k`
/// encoding (the tool-schema framing constants are those of `o200k` models) and is
/// told apart from the BPE counters in the count cache by [`TokenCounter::cache_salt`].
#[derive(Debug)]
pub struct RatioCounter {
    cpt: CharsPerToken,
}

impl RatioCounter {
    /// The ratios it counts with.
    pub fn chars_per_token(&self) -> CharsPerToken {
        self.cpt
    }
}

impl TokenCounter for RatioCounter {
    fn count(&self, text: &str) -> usize {
        estimate(text, &self.cpt)
    }
    fn encoding(&self) -> Encoding {
        Encoding::O200k
    }
    fn backend(&self) -> Backend {
        Backend::Bpe
    }
    fn is_exact(&self) -> bool {
        false
    }
    fn cache_salt(&self) -> u64 {
        let [a, b, c] = self.cpt.bits();
        // Any odd constant mixes well enough for a handful of calibrations; 0 is BPE's.
        (a ^ b.rotate_left(21) ^ c.rotate_left(42)).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1
    }
}

/// The shared ratio counter for `cpt`: one per distinct calibration, for the life of
/// the process (a handful at most: built-in profiles and configured models).
pub fn ratio_counter(cpt: CharsPerToken) -> &'static dyn TokenCounter {
    static COUNTERS: Mutex<Vec<&'static RatioCounter>> = Mutex::new(Vec::new());
    let mut counters = COUNTERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(c) = counters.iter().find(|c| c.cpt.bits() == cpt.bits()) {
        return *c;
    }
    let c: &'static RatioCounter = Box::leak(Box::new(RatioCounter { cpt }));
    counters.push(c);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_and_edges() {
        let c = CharsPerToken::O200K;
        assert_eq!(estimate("", &c), 0);
        assert_eq!(estimate("a", &c), 1);
        // Indentation folds into one unit.
        assert_eq!(
            estimate("        x", &c),
            estimate(" x", &c),
            "whitespace runs are one unit"
        );
        // A symbol-dense line counts at the code ratio.
        let code = "let x = f(a, b)?;";
        let prose = "let us go there now";
        assert!(estimate(code, &c) > estimate(prose, &c));
        // CJK per character.
        assert_eq!(estimate("你好世界", &c), (4.0f64 / c.cjk).round() as usize);
        assert!(CharsPerToken::O200K.invalid().is_none());
        let bad = CharsPerToken {
            latin: 0.0,
            ..CharsPerToken::O200K
        };
        assert_eq!(bad.invalid(), Some(("latin", 0.0)));
    }

    #[test]
    fn counters_are_shared_per_calibration() {
        let a = ratio_counter(CharsPerToken::CLAUDE);
        let b = ratio_counter(CharsPerToken::CLAUDE);
        assert!(std::ptr::eq(
            a as *const dyn TokenCounter as *const u8,
            b as *const dyn TokenCounter as *const u8
        ));
        assert_ne!(a.cache_salt(), 0);
        assert_ne!(
            a.cache_salt(),
            ratio_counter(CharsPerToken::GEMINI).cache_salt()
        );
        assert!(!a.is_exact());
    }
}
