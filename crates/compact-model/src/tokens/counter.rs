//! The two counting backends and the guard that keeps tiktoken-rs alive on long
//! whitespace runs.
use super::{Backend, Encoding};
use bpe_openai::Tokenizer;
use tiktoken_rs::CoreBPE;

/// Counts the BPE tokens of a text with one OpenAI vocabulary.
///
/// Text is encoded as ordinary text: a literal `<|endoftext|>` in a message counts as the
/// characters it is made of, the way the API treats user-supplied text.
pub trait TokenCounter: Send + Sync + std::fmt::Debug {
    /// Number of tokens of `text`.
    fn count(&self, text: &str) -> usize;
    /// The vocabulary this counter uses.
    fn encoding(&self) -> Encoding;
    /// The implementation behind this counter.
    fn backend(&self) -> Backend;
    /// True when the count is the tokenizer's own (a BPE vocabulary); false for an
    /// estimate ([`super::RatioCounter`]).
    fn is_exact(&self) -> bool {
        true
    }
    /// Mixed into the count cache key, so counters that share an encoding but count
    /// differently never share cached counts. `0` for the BPE counters.
    fn cache_salt(&self) -> u64 {
        0
    }
}

/// The shared counter for a backend and encoding.
///
/// The vocabularies are loaded lazily on first use and then live for the whole process,
/// so calling this is cheap and every caller shares the same encoder.
pub fn counter(backend: Backend, encoding: Encoding) -> &'static dyn TokenCounter {
    static BPE_O200K: BpeCounter = BpeCounter(Encoding::O200k);
    static BPE_CL100K: BpeCounter = BpeCounter(Encoding::Cl100k);
    static TIKTOKEN_O200K: TiktokenCounter = TiktokenCounter(Encoding::O200k);
    static TIKTOKEN_CL100K: TiktokenCounter = TiktokenCounter(Encoding::Cl100k);
    match (backend, encoding) {
        (Backend::Bpe, Encoding::O200k) => &BPE_O200K,
        (Backend::Bpe, Encoding::Cl100k) => &BPE_CL100K,
        (Backend::Tiktoken, Encoding::O200k) => &TIKTOKEN_O200K,
        (Backend::Tiktoken, Encoding::Cl100k) => &TIKTOKEN_CL100K,
    }
}

fn bpe_tokenizer(encoding: Encoding) -> &'static Tokenizer {
    match encoding {
        Encoding::O200k => bpe_openai::o200k_base(),
        Encoding::Cl100k => bpe_openai::cl100k_base(),
    }
}

fn tiktoken_core(encoding: Encoding) -> &'static CoreBPE {
    match encoding {
        Encoding::O200k => tiktoken_rs::o200k_base_singleton(),
        Encoding::Cl100k => tiktoken_rs::cl100k_base_singleton(),
    }
}

/// The `bpe-openai` backend.
#[derive(Debug)]
struct BpeCounter(Encoding);

impl TokenCounter for BpeCounter {
    fn count(&self, text: &str) -> usize {
        bpe_tokenizer(self.0).count(text)
    }
    fn encoding(&self) -> Encoding {
        self.0
    }
    fn backend(&self) -> Backend {
        Backend::Bpe
    }
}

/// The `tiktoken-rs` backend.
#[derive(Debug)]
struct TiktokenCounter(Encoding);

impl TokenCounter for TiktokenCounter {
    fn count(&self, text: &str) -> usize {
        tiktoken_guarded_count(self.0, text, SAFE_WHITESPACE_RUN)
    }
    fn encoding(&self) -> Encoding {
        self.0
    }
    fn backend(&self) -> Backend {
        Backend::Tiktoken
    }
}

/// Longest run of non-newline whitespace handed to tiktoken-rs as is.
///
/// tiktoken-rs matches such a run with the `\s+(?!\S)` alternative of its split regex.
/// The look-ahead forces fancy-regex onto its backtracking VM, which pushes one entry per
/// character on a heap stack capped at 1 000 000 entries; past that it returns
/// `RuntimeError(StackOverflow)` and tiktoken-rs `unwrap`s it into a panic. A bigger
/// thread stack does not help (measured with 1 GiB). Measured limit: a run of 999 000
/// characters passes, 999 999 fails, on both encodings; the cutoff here leaves a 15x margin
/// and is small enough that tests can cross-check the split path against tiktoken itself.
const SAFE_WHITESPACE_RUN: usize = 1 << 16;

/// tiktoken-rs count that never lets its regex see a whitespace run longer than `max_run`.
///
/// Both split regexes (o200k and cl100k) tokenize a maximal whitespace run `S = [s, e)`
/// followed by a non-whitespace character the same way: everything up to and including
/// the last `\r`/`\n` of `S` ends a piece at `q` (the position after it, or `s` if there is
/// none); then the tail `[q, e)`, which holds no newline, is split into one piece
/// `[q, e - 1 char)` (`\s+(?!\S)`) and its last character, which starts the next piece
/// together with whatever follows. The regexes have no look-behind and no anchors that see
/// across `q` or `e - 1`, so counting `text[..q]`, the tail piece and `text[e-1..]`
/// separately gives exactly the count of the whole. At the end of the text the o200k tail
/// `[q, len)` is one piece (`\s+(?!\S)` succeeds at the end); cl100k matches a trailing run
/// with its possessive `\s++$`, which does not grow the VM stack (measured at 4 MB), so that
/// case is left to tiktoken.
///
/// tiktoken-rs exports no linear-time encoder for a single piece (`byte_pair_split` is
/// quadratic), so the long tail piece is counted by `bpe`'s `BytePairEncoding` over the same
/// vocabulary with the same merge rule. The unit tests force `max_run = 2` to send every
/// tail through this path and compare with plain tiktoken.
fn tiktoken_guarded_count(encoding: Encoding, text: &str, max_run: usize) -> usize {
    let core = tiktoken_core(encoding);
    let plain = |s: &str| {
        if s.is_empty() {
            0
        } else {
            core.encode_ordinary(s).len()
        }
    };
    let piece = |s: &str| {
        if s.is_empty() {
            0
        } else {
            bpe_tokenizer(encoding).bpe.count(s.as_bytes())
        }
    };
    // A tail shorter than 2 characters never needs splitting, and the split relies on the
    // tail piece being non-empty.
    let max_run = max_run.max(2);

    let mut total = 0;
    let mut cursor = 0; // start of the text not yet counted
    let mut tail_start = 0; // q: start of the current newline-free whitespace tail
    let mut tail_chars = 0; // length of that tail in characters
    let mut tail_last = 0; // byte offset of the tail's last character
    for (i, ch) in text.char_indices() {
        if ch == '\r' || ch == '\n' {
            tail_chars = 0;
        } else if ch.is_whitespace() {
            if tail_chars == 0 {
                tail_start = i;
            }
            tail_chars += 1;
            tail_last = i;
        } else {
            if tail_chars >= max_run {
                total += plain(&text[cursor..tail_start]);
                total += piece(&text[tail_start..tail_last]);
                cursor = tail_last;
            }
            tail_chars = 0;
        }
    }
    if tail_chars >= max_run && encoding == Encoding::O200k {
        total += plain(&text[cursor..tail_start]);
        total += piece(&text[tail_start..]);
        cursor = text.len();
    }
    total + plain(&text[cursor..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(encoding: Encoding, text: &str) -> usize {
        tiktoken_core(encoding).encode_ordinary(text).len()
    }

    const SAMPLES: &[&str] = &[
        "",
        " ",
        "  ",
        "a  b",
        "a   b",
        "  \n  x",
        "x \t \u{3000}\u{a0} y",
        "end   ",
        "   ",
        "\n\n   ",
        ".\n\n   x",
        ".\r\n \t 1",
        "hello   world!   \n\n\t\tfoo   ,bar  's   'S  12345  ",
        "  \u{0301}   é   日本語   😀😀  ",
        "fn main() {\n    let x = 1;\n        \n    }\n   ",
        "{\"a\":  [1,  2],\n  \"b\":   \"  c  \"}   ",
        "tab\t\t\tsep\u{b}\u{c}\u{85}x\u{2028}y\u{2029}  z",
        "/   /\n/  \n",
    ];

    #[test]
    fn split_path_matches_tiktoken_on_every_tail() {
        for encoding in [Encoding::O200k, Encoding::Cl100k] {
            for text in SAMPLES {
                assert_eq!(
                    tiktoken_guarded_count(encoding, text, 2),
                    reference(encoding, text),
                    "{encoding:?} {text:?}"
                );
            }
        }
    }

    #[test]
    fn split_path_matches_tiktoken_just_below_its_limit() {
        // 900 000 characters: tiktoken can still do it alone, so this checks the split of a
        // realistic long run against the reference.
        for encoding in [Encoding::O200k, Encoding::Cl100k] {
            for text in [
                format!("a{}b", " ".repeat(900_000)),
                format!("a{}", " \t".repeat(450_000)),
                format!("x\n{}. y", "\u{3000} ".repeat(200_000)),
            ] {
                assert_eq!(
                    tiktoken_guarded_count(encoding, &text, 1000),
                    reference(encoding, &text),
                    "{encoding:?} len {}",
                    text.len()
                );
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        #[test]
        fn split_path_matches_tiktoken_on_whitespace_heavy_text(
            text in "([ \t\r\n\u{a0}\u{3000}]{0,6}|[a-zA-Z0-9.,'/]{0,4}|[é日😀\u{301}]){0,24}"
        ) {
            for encoding in [Encoding::O200k, Encoding::Cl100k] {
                proptest::prop_assert_eq!(
                    tiktoken_guarded_count(encoding, &text, 2),
                    reference(encoding, &text)
                );
            }
        }
    }
}
