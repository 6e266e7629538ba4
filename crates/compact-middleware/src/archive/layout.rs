//! Names, keys and byte encodings of the archive (docs/archive.md, "Layout"),
//! the same for every backend so a session is byte-identical on disk and in
//! S3. Keys are `{session_id}/{name}`:
//!
//! ```text
//! {session_id}/transcript-pre-compact-001.jsonl   one message per line
//!              summary-001.json                   pretty JSON, trailing newline
//!              events.jsonl                       one event per line (backends that append)
//!              events-000001.jsonl                one batch per object (backends that do not)
//!              manifest.jsonl                     the hash chain
//! ```

use serde_json::Value;

use super::{ArchiveError, SessionId};

/// The event log on a filesystem.
pub const EVENTS_FILE: &str = "events.jsonl";
/// The hash-chained manifest.
pub const MANIFEST_FILE: &str = "manifest.jsonl";

const TRANSCRIPT_PREFIX: &str = "transcript-pre-compact-";
const TRANSCRIPT_SUFFIX: &str = ".jsonl";
const SUMMARY_PREFIX: &str = "summary-";
const SUMMARY_SUFFIX: &str = ".json";
const EVENT_OBJECT_PREFIX: &str = "events-";
const EVENT_OBJECT_SUFFIX: &str = ".jsonl";

/// What an archive file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FileKind {
    /// `transcript-pre-compact-{step:03}.jsonl`.
    Transcript(u32),
    /// `summary-{step:03}.json`.
    Summary(u32),
    /// `events.jsonl`, appended to.
    Events,
    /// `events-{seq:06}.jsonl`, one batch per object.
    EventObject(u64),
    /// `manifest.jsonl`.
    Manifest,
}

/// `transcript-pre-compact-{step:03}.jsonl`.
pub fn transcript_name(step: u32) -> String {
    format!("{TRANSCRIPT_PREFIX}{step:03}{TRANSCRIPT_SUFFIX}")
}

/// `summary-{step:03}.json`.
pub fn summary_name(step: u32) -> String {
    format!("{SUMMARY_PREFIX}{step:03}{SUMMARY_SUFFIX}")
}

/// `events-{seq:06}.jsonl`.
pub fn event_object_name(seq: u64) -> String {
    format!("{EVENT_OBJECT_PREFIX}{seq:06}{EVENT_OBJECT_SUFFIX}")
}

fn number<T: std::str::FromStr>(s: &str, min_digits: usize) -> Option<T> {
    // Only the canonical spelling: digits, zero-padded to the minimum width
    // and no wider than needed beyond it, so two names never mean one file.
    if s.len() < min_digits || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if s.len() > min_digits && s.starts_with('0') {
        return None;
    }
    s.parse().ok()
}

impl FileKind {
    /// Recognises an archive file name; `None` for anything else (temporary
    /// files, stray files, traversal attempts).
    pub fn parse(name: &str) -> Option<FileKind> {
        if name == EVENTS_FILE {
            return Some(FileKind::Events);
        }
        if name == MANIFEST_FILE {
            return Some(FileKind::Manifest);
        }
        if let Some(n) = name
            .strip_prefix(TRANSCRIPT_PREFIX)
            .and_then(|r| r.strip_suffix(TRANSCRIPT_SUFFIX))
        {
            return number(n, 3).map(FileKind::Transcript);
        }
        if let Some(n) = name
            .strip_prefix(SUMMARY_PREFIX)
            .and_then(|r| r.strip_suffix(SUMMARY_SUFFIX))
        {
            return number(n, 3).map(FileKind::Summary);
        }
        if let Some(n) = name
            .strip_prefix(EVENT_OBJECT_PREFIX)
            .and_then(|r| r.strip_suffix(EVENT_OBJECT_SUFFIX))
        {
            return number(n, 6).map(FileKind::EventObject);
        }
        None
    }

    /// The file name.
    pub fn name(self) -> String {
        match self {
            FileKind::Transcript(s) => transcript_name(s),
            FileKind::Summary(s) => summary_name(s),
            FileKind::Events => EVENTS_FILE.to_string(),
            FileKind::EventObject(n) => event_object_name(n),
            FileKind::Manifest => MANIFEST_FILE.to_string(),
        }
    }

    /// The compaction step a transcript or summary belongs to.
    pub fn step(self) -> Option<u32> {
        match self {
            FileKind::Transcript(s) | FileKind::Summary(s) => Some(s),
            _ => None,
        }
    }
}

/// `{session_id}/`: the listing prefix of one session.
pub(crate) fn session_prefix(session: &SessionId) -> String {
    format!("{session}/")
}

/// `{session_id}/{name}`: the storage key of one archive file.
pub(crate) fn key(session: &SessionId, kind: FileKind) -> String {
    format!("{session}/{}", kind.name())
}

/// The transcript steps among `names` (file names of one session), sorted.
pub fn transcript_steps(names: &[String]) -> Vec<u32> {
    let mut steps: Vec<u32> = names
        .iter()
        .filter_map(|n| match FileKind::parse(n) {
            Some(FileKind::Transcript(s)) => Some(s),
            _ => None,
        })
        .collect();
    steps.sort_unstable();
    steps
}

/// Checks that `name` is an archive file name (the only names the archive
/// reads), so a caller-supplied name can never point elsewhere.
pub(crate) fn check_name(name: &str) -> Result<FileKind, ArchiveError> {
    FileKind::parse(name).ok_or_else(|| ArchiveError::InvalidName(name.to_string()))
}

/// JSON Lines: each value compact on its own line, `\n` after each.
pub fn encode_lines(values: &[Value]) -> Result<Vec<u8>, ArchiveError> {
    let mut out = Vec::new();
    for v in values {
        serde_json::to_writer(&mut out, v)?;
        out.push(b'\n');
    }
    Ok(out)
}

/// The values of a JSON Lines file (blank lines skipped). `file` names it
/// in the error.
pub fn decode_lines(file: &str, bytes: &[u8]) -> Result<Vec<Value>, ArchiveError> {
    bytes
        .split(|b| *b == b'\n')
        .enumerate()
        .filter(|(_, l)| !l.is_empty())
        .map(|(i, l)| {
            serde_json::from_slice(l).map_err(|e| ArchiveError::Corrupt {
                file: file.to_string(),
                reason: format!("line {} is not JSON: {e}", i + 1),
            })
        })
        .collect()
}

/// A JSON document (a summary file). `file` names it in the error.
pub fn decode_document(file: &str, bytes: &[u8]) -> Result<Value, ArchiveError> {
    serde_json::from_slice(bytes).map_err(|e| ArchiveError::Corrupt {
        file: file.to_string(),
        reason: format!("not JSON: {e}"),
    })
}

/// A summary file: pretty JSON and a trailing newline (it is read by people).
pub fn encode_summary(summary: &Value) -> Result<Vec<u8>, ArchiveError> {
    let mut out = serde_json::to_vec_pretty(summary)?;
    out.push(b'\n');
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in [
            FileKind::Transcript(1),
            FileKind::Transcript(1234),
            FileKind::Summary(7),
            FileKind::Events,
            FileKind::EventObject(42),
            FileKind::Manifest,
        ] {
            assert_eq!(FileKind::parse(&k.name()), Some(k));
        }
        assert_eq!(transcript_name(1), "transcript-pre-compact-001.jsonl");
        assert_eq!(summary_name(12), "summary-012.json");
        let s = SessionId::parse("s1").ok();
        assert_eq!(
            s.map(|s| key(&s, FileKind::Transcript(1))).as_deref(),
            Some("s1/transcript-pre-compact-001.jsonl")
        );
    }

    #[test]
    fn lines_round_trip() {
        let values = vec![serde_json::json!({"a": 1}), serde_json::json!("x\ny")];
        let bytes = encode_lines(&values).unwrap_or_default();
        assert_eq!(decode_lines("t", &bytes).ok(), Some(values));
        let err = decode_lines("t.jsonl", b"{}\nnot json\n").err();
        assert_eq!(
            err.map(|e| e.to_string().starts_with("t.jsonl: line 2 is not JSON")),
            Some(true)
        );
    }

    #[test]
    fn rejects_other_names() {
        for n in [
            "../summary-001.json",
            "summary-1.json",
            "summary-0001.json",
            "summary-001.json.tmp",
            ".summary-001.json.tmp-1",
            "events.json",
            "transcript-pre-compact-abc.jsonl",
            "",
        ] {
            assert_eq!(FileKind::parse(n), None, "{n}");
        }
    }
}
