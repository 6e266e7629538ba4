//! The per-session manifest: `manifest.jsonl`, one entry per write, each
//! holding the SHA-256 of the bytes it covers and of the previous entry.
//!
//! ```json
//! {"seq":1,"file":"transcript-pre-compact-001.jsonl","offset":0,"len":5120,"sha256":"…","prev":"000…0","hash":"…"}
//! ```
//!
//! `offset`/`len` say which bytes of `file` the entry covers: the whole file
//! for transcripts, summaries and event objects, the appended chunk for
//! `events.jsonl`. `hash` is the SHA-256 of the entry's other fields (see
//! [`Entry::compute_hash`]); `prev` is the previous entry's `hash` (64
//! zeros for the first). Editing, dropping or reordering an entry breaks the
//! chain; editing a file breaks its entry's `sha256`.
//!
//! The chain has no secret key: someone who can rewrite every file can
//! rewrite the manifest too. What catches that is comparing the head hash
//! with one kept elsewhere: every `compact.archival` event carries
//! `manifest_head`, and exporters ship it off the machine (docs/archive.md,
//! "Auditing").

use serde::{Deserialize, Serialize};

use super::sha256_hex;

/// `prev` of the first entry.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// One manifest line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// 1, 2, 3, … in write order.
    pub seq: u64,
    /// The file name inside the session.
    pub file: String,
    /// First byte covered.
    pub offset: u64,
    /// Bytes covered.
    pub len: u64,
    /// SHA-256 of those bytes.
    pub sha256: String,
    /// The previous entry's `hash`.
    pub prev: String,
    /// SHA-256 of this entry's other fields.
    pub hash: String,
}

impl Entry {
    /// The entry after `prev` for `data` written to `file` at `offset`.
    pub fn next(prev: Option<&Entry>, file: &str, offset: u64, data: &[u8]) -> Entry {
        Entry::chained(prev, file, offset, data.len() as u64, sha256_hex(data))
    }

    /// The entry after `prev` for `len` bytes with SHA-256 `sha256` written
    /// to `file` at `offset` (when the bytes were handed over before the
    /// offset was known).
    pub fn chained(
        prev: Option<&Entry>,
        file: &str,
        offset: u64,
        len: u64,
        sha256: String,
    ) -> Entry {
        let mut e = Entry {
            seq: prev.map_or(1, |p| p.seq + 1),
            file: file.to_string(),
            offset,
            len,
            sha256,
            prev: prev.map_or_else(|| GENESIS.to_string(), |p| p.hash.clone()),
            hash: String::new(),
        };
        e.hash = e.compute_hash();
        e
    }

    /// SHA-256 over a fixed text form of every field but `hash`:
    /// `compact-manifest-v1\n{seq}\n{file}\n{offset}\n{len}\n{sha256}\n{prev}`.
    /// A text form rather than the JSON line, so the hash does not depend on
    /// how a JSON writer orders or spaces fields.
    pub fn compute_hash(&self) -> String {
        sha256_hex(
            format!(
                "compact-manifest-v1\n{}\n{}\n{}\n{}\n{}\n{}",
                self.seq, self.file, self.offset, self.len, self.sha256, self.prev
            )
            .as_bytes(),
        )
    }

    /// The entry as one manifest line, newline included.
    pub fn to_line(&self) -> String {
        // Serializing a struct of strings and integers cannot fail.
        let mut s = serde_json::to_string(self).unwrap_or_default();
        s.push('\n');
        s
    }
}

/// Why a manifest cannot be read as a chain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// The last line has no newline: the manifest was cut short.
    #[error("manifest is truncated (line {line} is incomplete)")]
    Truncated {
        /// 1-based line number.
        line: usize,
    },
    /// A line is not a manifest entry.
    #[error("manifest line {line} is not a valid entry: {reason}")]
    Malformed {
        /// 1-based line number.
        line: usize,
        /// The parse error.
        reason: String,
    },
    /// An entry's `seq`, `prev` or `hash` does not follow from the one before.
    #[error("manifest chain broken at line {line} ({file}): {reason}")]
    Chain {
        /// 1-based line number.
        line: usize,
        /// The entry's file.
        file: String,
        /// Which link failed.
        reason: String,
    },
}

/// Parses a manifest and checks its chain.
pub fn parse(bytes: &[u8]) -> Result<Vec<Entry>, ManifestError> {
    let mut entries: Vec<Entry> = Vec::new();
    if bytes.is_empty() {
        return Ok(entries);
    }
    let complete = bytes.ends_with(b"\n");
    let lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    // `split` yields an empty piece after the final newline.
    let count = if complete {
        lines.len() - 1
    } else {
        lines.len()
    };
    for (i, line) in lines.iter().take(count).enumerate() {
        let n = i + 1;
        if !complete && n == count {
            return Err(ManifestError::Truncated { line: n });
        }
        let e: Entry = serde_json::from_slice(line).map_err(|err| ManifestError::Malformed {
            line: n,
            reason: err.to_string(),
        })?;
        let chain = |reason: String| ManifestError::Chain {
            line: n,
            file: e.file.clone(),
            reason,
        };
        let expected_seq = entries.last().map_or(1, |p| p.seq + 1);
        if e.seq != expected_seq {
            return Err(chain(format!("seq is {}, expected {expected_seq}", e.seq)));
        }
        let expected_prev = entries.last().map_or(GENESIS, |p| p.hash.as_str());
        if e.prev != expected_prev {
            return Err(chain(
                "prev does not match the previous entry's hash".into(),
            ));
        }
        if e.hash != e.compute_hash() {
            return Err(chain("hash does not match the entry's fields".into()));
        }
        entries.push(e);
    }
    Ok(entries)
}

/// Parses a manifest about to be extended. A last line without its newline
/// is an append of ours that a crash interrupted, not tampering: the next
/// append cuts it (backends that append in place repair their tail), so it
/// is left out here rather than refused.
pub(crate) fn parse_for_append(bytes: &[u8]) -> Result<Vec<Entry>, ManifestError> {
    let complete = match bytes.iter().rposition(|b| *b == b'\n') {
        Some(i) => &bytes[..=i],
        None => &bytes[..0],
    };
    parse(complete)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain() -> Vec<Entry> {
        let a = Entry::next(None, "transcript-pre-compact-001.jsonl", 0, b"a\n");
        let b = Entry::next(Some(&a), "events.jsonl", 0, b"e\n");
        let c = Entry::next(Some(&b), "events.jsonl", 2, b"f\n");
        vec![a, b, c]
    }

    fn text(entries: &[Entry]) -> String {
        entries.iter().map(Entry::to_line).collect()
    }

    #[test]
    fn round_trips() {
        let es = chain();
        assert_eq!(parse(text(&es).as_bytes()), Ok(es));
        assert_eq!(parse(b""), Ok(vec![]));
    }

    #[test]
    fn detects_truncation_reorder_and_edits() {
        let es = chain();
        let t = text(&es);
        assert!(matches!(
            parse(&t.as_bytes()[..t.len() - 5]),
            Err(ManifestError::Truncated { line: 3 })
        ));
        let swapped = text(&[es[1].clone(), es[0].clone(), es[2].clone()]);
        assert!(matches!(
            parse(swapped.as_bytes()),
            Err(ManifestError::Chain { line: 1, .. })
        ));
        let mut edited = es.clone();
        edited[1].sha256 = sha256_hex(b"other");
        assert!(matches!(
            parse(text(&edited).as_bytes()),
            Err(ManifestError::Chain { line: 2, .. })
        ));
    }
}
