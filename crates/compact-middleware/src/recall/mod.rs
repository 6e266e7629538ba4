//! Recall (issue 25): what compaction took out of the context, indexed per
//! session so the agent can get it back.
//!
//! At archive time every message and tool output of the compacted history is
//! redacted (the archive's redaction and the session's learned secrets) and
//! indexed ([`RecallIndex`]: SQLite FTS5, or PostgreSQL full-text search when
//! the session state lives there); a cleared tool output's
//! placeholder carries its recall id ([`RecallKey::output_id`]), so the model
//! can ask for exactly that text back. [`crate::CompactManager::recall`]
//! answers a query (BM25-ranked excerpts) or an id (the whole text, paged).

mod entries;
mod excerpt;
mod index;
mod postgres;
mod query;
mod sqlite;
pub mod tool;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub(crate) use entries::entries;
pub use index::{Pending, RecallIndex};
pub use postgres::POSTGRES_SCHEMA_VERSION;
pub use sqlite::SQLITE_SCHEMA_VERSION;

/// The most hits one query returns.
pub const MAX_LIMIT: usize = 20;
/// Hits returned when the query names no limit.
pub const DEFAULT_LIMIT: usize = 5;
/// The most characters of an entry one by-id answer returns; the rest is
/// paged with `offset`.
pub const PAGE_CHARS: usize = 8_000;

/// Where a recall index lives.
#[derive(Clone, PartialEq, Eq)]
pub enum Location {
    /// A SQLite file, or `:memory:`.
    File(String),
    /// A PostgreSQL database (its URL).
    Postgres(String),
}

impl Location {
    /// `postgres://…` and `postgresql://…` are databases, anything else a
    /// file.
    pub fn parse(s: &str) -> Self {
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            Location::Postgres(s.to_owned())
        } else {
            Location::File(s.to_owned())
        }
    }

    /// What to show of it: the path, or the URL with its password masked.
    pub fn label(&self) -> String {
        match self {
            Location::File(p) => p.clone(),
            Location::Postgres(u) => crate::config::redact_url_password(u),
        }
    }
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password.
        match self {
            Location::File(_) => write!(f, "File({:?})", self.label()),
            Location::Postgres(_) => write!(f, "Postgres({:?})", self.label()),
        }
    }
}

/// Why a recall could not be answered.
#[derive(Debug, thiserror::Error)]
pub enum RecallError {
    /// The query is malformed (neither or both of `query` and `id`, …).
    #[error("{0}")]
    Invalid(String),
    /// The index failed (I/O, a corrupt file).
    #[error("recall index: {0}")]
    Index(String),
}

/// What to recall: a `query` in natural words, or an `id` from a placeholder
/// or an earlier hit (exactly one of the two).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecallQuery {
    /// Words to search for (ranked by BM25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// A recall id (`r` and 8 letters or digits): that entry's whole text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Most hits for a query (default 5, at most 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// By id: the character offset to read from (paging; default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<usize>,
}

impl RecallQuery {
    /// A query in natural words.
    pub fn text(q: impl Into<String>) -> Self {
        RecallQuery {
            query: Some(q.into()),
            ..Self::default()
        }
    }

    /// A by-id lookup.
    pub fn id(id: impl Into<String>) -> Self {
        RecallQuery {
            id: Some(id.into()),
            ..Self::default()
        }
    }
}

/// Where an entry came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// The compaction step (archive step) that first indexed it.
    pub step: u32,
    /// The user turn it belongs to (1 = the first user message).
    pub turn: u32,
    /// `tool_output` or `message`.
    pub kind: String,
    /// The message's role (`tool` for a tool output).
    pub role: String,
    /// The tool that produced it, for a tool output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The tool call's id, for a tool output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The file the call named (`path`, `file`, `file_path`, … argument), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// One ranked hit of a query.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecallHit {
    /// The entry's recall id: ask for it to get the whole text.
    pub id: String,
    /// BM25 relevance (higher is better).
    pub score: f64,
    /// The part of the text around the matched words.
    pub excerpt: String,
    /// Its size in characters.
    pub chars: usize,
    /// Where it came from.
    pub origin: Origin,
}

/// One entry's text, by id (a page of it when long).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecallEntry {
    /// The recall id.
    pub id: String,
    /// Where it came from.
    pub origin: Origin,
    /// The text from `offset`, at most [`PAGE_CHARS`] characters.
    pub text: String,
    /// Where this page starts, in characters.
    pub offset: usize,
    /// The whole entry's size in characters.
    pub total_chars: usize,
    /// The offset of the next page; absent on the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<usize>,
}

/// A recall's answer: hits for a query, the entry for an id (absent when the
/// session has no such id: another session's ids answer nothing).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RecallAnswer {
    /// Ranked hits, best first (a query).
    #[serde(default)]
    pub hits: Vec<RecallHit>,
    /// The entry (an id that this session has).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<RecallEntry>,
}

/// The per-session key recall ids are derived from: a hash of the index's
/// random secret and the session id, so ids are stable for as long as the
/// index lives, differ between sessions, and cannot be guessed without the
/// secret.
#[derive(Clone, PartialEq, Eq)]
pub struct RecallKey([u8; 32]);

impl std::fmt::Debug for RecallKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecallKey(…)")
    }
}

/// Base-32 without the look-alikes (no `0`, `1`, `l`, `o`).
const ALPHABET: &[u8; 32] = b"abcdefghijkmnpqrstuvwxyz23456789";
/// Characters after the `r`: 40 bits, so a 10,000-entry session has about a
/// 1 in 20,000 chance of any collision (the first entry keeps the id).
const ID_CHARS: usize = 8;

impl RecallKey {
    pub(crate) fn derive(secret: &[u8], session: &str) -> Self {
        let mut h = Sha256::new();
        h.update(b"compact-recall-session\0");
        h.update(secret);
        h.update([0]);
        h.update(session.as_bytes());
        RecallKey(h.finalize().into())
    }

    fn id(&self, parts: &[&str]) -> String {
        let mut h = Sha256::new();
        h.update(self.0);
        for p in parts {
            h.update((p.len() as u64).to_le_bytes());
            h.update(p.as_bytes());
        }
        let d = h.finalize();
        let mut bits: u64 = 0;
        for b in &d[..5] {
            bits = (bits << 8) | u64::from(*b);
        }
        let mut out = String::with_capacity(ID_CHARS + 1);
        out.push('r');
        for i in (0..ID_CHARS).rev() {
            out.push(ALPHABET[((bits >> (i * 5)) & 31) as usize] as char);
        }
        out
    }

    /// The id of tool output `text` answering `call_id`, as received (before
    /// any cap or redaction): what the placeholder that clears it shows.
    pub fn output_id(&self, call_id: &str, text: &str) -> String {
        self.id(&["out", call_id, text])
    }

    /// The id of tool output `text` answering `call_id` as a compaction
    /// receives it: an output that an earlier compaction capped (its marker
    /// carrying the original's id: `crate::pipeline::cap_text_with_recall`)
    /// keeps that id, so the cap marker, the placeholder that clears it
    /// later and the index entry of the whole original all name one id,
    /// whether the caller sends the original again or the capped text;
    /// any other output gets [`output_id`](Self::output_id).
    pub fn received_output_id(&self, call_id: &str, text: &str) -> String {
        match crate::pipeline::capped_recall_id(text) {
            Some(rid) => rid.to_owned(),
            None => self.output_id(call_id, text),
        }
    }

    /// The id of a message of `role` with `text`.
    pub fn message_id(&self, role: &str, text: &str) -> String {
        self.id(&["msg", role, text])
    }
}

/// Whether `id` has the shape of a recall id (checked before any lookup).
pub fn is_recall_id(id: &str) -> bool {
    id.len() == ID_CHARS + 1
        && id.starts_with('r')
        && id.bytes().skip(1).all(|b| ALPHABET.contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_per_session_and_differ_between_sessions() {
        let a = RecallKey::derive(b"secret", "s1");
        let b = RecallKey::derive(b"secret", "s2");
        let id = a.output_id("call_1", "hello");
        assert_eq!(id, a.output_id("call_1", "hello"));
        assert_ne!(id, b.output_id("call_1", "hello"));
        assert_ne!(id, a.output_id("call_1", "hello!"));
        assert_ne!(id, a.message_id("call_1", "hello"));
        assert!(is_recall_id(&id), "{id}");
        let other = RecallKey::derive(b"other secret", "s1");
        assert_ne!(id, other.output_id("call_1", "hello"));
    }

    #[test]
    fn id_shape_is_checked() {
        assert!(!is_recall_id("r1234567"));
        assert!(!is_recall_id("xabcdefgh"));
        assert!(!is_recall_id("rabcdefgl"));
        assert!(is_recall_id("rabcdefgh"));
    }
}
