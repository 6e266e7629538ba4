//! Shapes: a value with its variable parts blanked. Machine output repeats
//! its templates (`request req-8f3a2c completed in 41 ms`, `r-05788`, a
//! trace id per line); what an agent needs from it is what stands out. A
//! line or a token whose shape is common, in this output or in the ones the
//! session saw before, is bulk; one whose shape is rare is a candidate fact.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

/// Most shapes remembered per session (they are saved with the session at
/// every preflight); past it the ones seen once are forgotten first: a
/// shape not remembered counts as rare, which is what a shape seen once is.
const MAX_SHAPES: usize = 1024;

/// The shape of `s`: every run of digits, and every hex-like word (six or
/// more hex digits with at least one digit: ids, hashes), becomes `#`;
/// letters are lowercased.
#[cfg(test)]
pub(crate) fn shape(s: &str) -> String {
    let mut out = Vec::with_capacity(s.len());
    walk_shape(s, |bytes| out.extend_from_slice(bytes));
    String::from_utf8_lossy(&out).into_owned()
}

/// Feeds the bytes of `s`'s shape to `emit`, without building it.
fn walk_shape(s: &str, mut emit: impl FnMut(&[u8])) {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if !b.is_ascii_alphanumeric() {
            emit(&bytes[i..=i]);
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_alphanumeric() {
            i += 1;
        }
        let word = &bytes[start..i];
        let hexlike = word.len() >= 6
            && word.iter().all(u8::is_ascii_hexdigit)
            && word.iter().any(u8::is_ascii_digit);
        if hexlike {
            emit(b"#");
            continue;
        }
        let mut in_digits = false;
        for &c in word {
            if c.is_ascii_digit() {
                if !in_digits {
                    emit(b"#");
                }
                in_digits = true;
            } else {
                emit(&[c.to_ascii_lowercase()]);
                in_digits = false;
            }
        }
    }
}

/// A stable 64-bit key for a shape (FNV-1a over its bytes: the same in
/// every process, since it is persisted with the ledger), computed without
/// building the shape.
pub(crate) fn shape_key(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    walk_shape(s, |bytes| {
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    });
    h
}

/// A map keyed by shape keys, which are hashes already: no second hash.
pub(crate) type KeyMap<V> =
    HashMap<u64, V, std::hash::BuildHasherDefault<compact_model::prehashed::Prehashed>>;

/// How often each shape was seen in the tool outputs of a session.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct ShapeStats {
    /// Ordered, so a session record serializes the same way every time.
    seen: BTreeMap<u64, u32>,
    /// Outputs read.
    #[serde(default)]
    outputs: u32,
}

impl ShapeStats {
    /// Times a shape was seen before.
    pub(crate) fn count(&self, key: u64) -> u32 {
        self.seen.get(&key).copied().unwrap_or(0)
    }

    /// Whether a shape seen `count` times before is still rare: at most
    /// `rare` times, or in fewer than one output in eight (a kind of value
    /// that comes up now and then, not a template's field).
    pub(crate) fn is_rare(&self, key: u64, rare: u32) -> bool {
        let n = self.count(key);
        n <= rare || n.saturating_mul(8) <= self.outputs
    }

    /// Whether a shape comes up in at least one output in eight (and four
    /// times or more).
    pub(crate) fn is_common(&self, key: u64) -> bool {
        let n = self.count(key);
        n >= 4 && n.saturating_mul(8) > self.outputs
    }

    /// Adds the counts of one output.
    pub(crate) fn add(&mut self, counts: &KeyMap<u32>) {
        self.outputs = self.outputs.saturating_add(1);
        for (&k, &n) in counts {
            *self.seen.entry(k).or_default() += n;
        }
        if self.seen.len() > MAX_SHAPES {
            // Forget what was seen once; what repeats is what matters here.
            self.seen.retain(|_, n| *n > 1);
            if self.seen.len() > MAX_SHAPES {
                self.seen.retain(|_, n| {
                    *n /= 2;
                    *n > 1
                });
            }
        }
    }
}

/// The shapes of one output: lines and tokens, counted.
#[derive(Debug, Default)]
pub(crate) struct OutputShapes {
    pub(crate) counts: KeyMap<u32>,
}

impl OutputShapes {
    pub(crate) fn note(&mut self, value: &str) -> u64 {
        let k = shape_key(value);
        self.bump(k);
        k
    }

    pub(crate) fn bump(&mut self, key: u64) {
        *self.counts.entry(key).or_default() += 1;
    }

    pub(crate) fn count(&self, key: u64) -> u32 {
        self.counts.get(&key).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::shape;

    #[test]
    fn templates_share_a_shape_and_names_keep_theirs() {
        assert_eq!(
            shape("request req-8f3a2c completed in 41 ms (row 1234)"),
            shape("request req-0b9e77 completed in 7 ms (row 5)")
        );
        assert_eq!(shape("r-05788"), shape("r-31275"));
        assert_ne!(
            shape("etcd-ledger-31.prod.internal"),
            shape("kafka-auth-15.prod.internal")
        );
        assert_eq!(shape("src/mod_12.rs:33"), "src/mod_#.rs:#");
        assert_eq!(shape("2025-03-14T13:53:31.109Z"), "#-#-#t#:#:#.#z");
        assert_eq!(shape("trace=99c6f74190c9"), "trace=#");
        assert_eq!(shape("naïve Café"), "naïve café");
    }
}
