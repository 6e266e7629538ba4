//! `verify`: is a session's archive whole and as written?

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use super::layout::{FileKind, MANIFEST_FILE};
use super::manifest::{self, Entry, ManifestError};
use super::{Archive, ArchiveError, SessionId, StorageAdapter, sha256_hex};

/// The first thing wrong with a session's archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// There are files but no `manifest.jsonl`.
    ManifestMissing,
    /// The manifest cannot be read as a chain (truncated, malformed, an
    /// entry edited, dropped from the middle or moved).
    Manifest(ManifestError),
    /// A file the manifest records is gone.
    Missing {
        /// The file.
        file: String,
    },
    /// A file's bytes differ from what the manifest recorded.
    Edited {
        /// The file.
        file: String,
    },
    /// A file holds exactly the bytes recorded for another file: files were
    /// swapped or renamed.
    Reordered {
        /// The file.
        file: String,
        /// The file whose recorded bytes it holds.
        holds: String,
    },
    /// A file (or trailing bytes of an appended file) the manifest does not
    /// record.
    Unrecorded {
        /// The file.
        file: String,
        /// Unrecorded bytes at its end; `None` for a whole file.
        trailing_bytes: Option<u64>,
    },
}

impl Problem {
    /// The file the problem is in.
    pub fn file(&self) -> &str {
        match self {
            Problem::ManifestMissing | Problem::Manifest(_) => MANIFEST_FILE,
            Problem::Missing { file }
            | Problem::Edited { file }
            | Problem::Reordered { file, .. }
            | Problem::Unrecorded { file, .. } => file,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::ManifestMissing => write!(f, "{MANIFEST_FILE} is missing"),
            Problem::Manifest(e) => write!(f, "{MANIFEST_FILE}: {e}"),
            Problem::Missing { file } => write!(f, "missing file {file}"),
            Problem::Edited { file } => {
                write!(
                    f,
                    "edited file {file} (its SHA-256 does not match the manifest)"
                )
            }
            Problem::Reordered { file, holds } => write!(
                f,
                "reordered file {file} (it holds the content recorded for {holds})"
            ),
            Problem::Unrecorded {
                file,
                trailing_bytes: None,
            } => write!(f, "unrecorded file {file} (not in the manifest)"),
            Problem::Unrecorded {
                file,
                trailing_bytes: Some(n),
            } => write!(
                f,
                "unrecorded bytes in {file} ({n} bytes after the last recorded entry)"
            ),
        }
    }
}

/// What `verify` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    /// The session.
    pub session: String,
    /// Files present (manifest included).
    pub files: Vec<String>,
    /// Manifest entries read.
    pub entries: usize,
    /// The newest entry's hash (compare with `manifest_head` of the last
    /// `compact.archival` event).
    pub head: Option<String>,
    /// The first problem, or `None` when the archive is whole.
    pub problem: Option<Problem>,
}

impl Verification {
    /// No problem found.
    pub fn is_ok(&self) -> bool {
        self.problem.is_none()
    }
}

/// Checks one session: the manifest's chain, every recorded file's bytes,
/// the order of appended chunks, and that nothing unrecorded is present.
/// Reports the first problem in manifest order. `Err` only for a session
/// with no files at all or a backend failure. Short for
/// `Archive::new(adapter).verify(session)`.
pub async fn verify(
    adapter: &dyn StorageAdapter,
    session: &SessionId,
) -> Result<Verification, ArchiveError> {
    Archive::new(adapter).verify(session).await
}

/// The highest compaction step archived for `session` (0 when none). Short
/// for `Archive::new(adapter).last_step(session)`.
pub async fn last_step(
    adapter: &dyn StorageAdapter,
    session: &SessionId,
) -> Result<u32, ArchiveError> {
    Archive::new(adapter).last_step(session).await
}

impl Archive<'_> {
    /// See [`verify()`].
    pub async fn verify(&self, session: &SessionId) -> Result<Verification, ArchiveError> {
        let files = self.files(session).await?;
        if files.is_empty() {
            return Err(ArchiveError::NotFound(format!(
                "no archive for session {session} in {}",
                self.adapter().root()
            )));
        }
        let mut v = Verification {
            session: session.to_string(),
            files: files.clone(),
            entries: 0,
            head: None,
            problem: None,
        };
        let manifest_bytes = match self.read(session, MANIFEST_FILE).await {
            Ok(b) => b,
            Err(e) if e.is_not_found() => {
                v.problem = Some(Problem::ManifestMissing);
                return Ok(v);
            }
            Err(e) => return Err(e),
        };
        let entries = match manifest::parse(&manifest_bytes) {
            Ok(es) => es,
            Err(e) => {
                v.problem = Some(Problem::Manifest(e));
                return Ok(v);
            }
        };
        v.entries = entries.len();
        v.head = entries.last().map(|e| e.hash.clone());
        v.problem = check_entries(self, session, &files, &entries).await?;
        Ok(v)
    }
}

async fn check_entries(
    archive: &Archive<'_>,
    session: &SessionId,
    files: &[String],
    entries: &[Entry],
) -> Result<Option<Problem>, ArchiveError> {
    // Content hash of each whole-file entry's latest version -> file name,
    // to tell a swap from an edit.
    let mut by_hash: HashMap<&str, &str> = HashMap::new();
    // For a whole file, the latest entry wins (a retried write replaces the
    // file); appended files (offset > 0 somewhere) are checked chunk by chunk.
    let mut latest: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, e) in entries.iter().enumerate() {
        if e.offset == 0 {
            latest.insert(&e.file, i);
            by_hash.insert(&e.sha256, &e.file);
        }
    }
    let mut cache: HashMap<&str, Option<Vec<u8>>> = HashMap::new();
    let mut ends: BTreeMap<&str, u64> = BTreeMap::new();
    for (i, e) in entries.iter().enumerate() {
        if FileKind::parse(&e.file).is_none_or(|k| k == FileKind::Manifest) {
            return Ok(Some(Problem::Manifest(ManifestError::Malformed {
                line: i + 1,
                reason: format!("{:?} is not an archive file name", e.file),
            })));
        }
        if !cache.contains_key(e.file.as_str()) {
            let data = match archive.read(session, &e.file).await {
                Ok(b) => Some(b),
                Err(err) if err.is_not_found() => None,
                Err(err) => return Err(err),
            };
            cache.insert(&e.file, data);
        }
        let Some(Some(data)) = cache.get(e.file.as_str()) else {
            return Ok(Some(Problem::Missing {
                file: e.file.clone(),
            }));
        };
        let appended = FileKind::parse(&e.file) == Some(FileKind::Events);
        if appended {
            let end = ends.entry(&e.file).or_insert(0);
            if e.offset != *end {
                return Ok(Some(Problem::Manifest(ManifestError::Chain {
                    line: i + 1,
                    file: e.file.clone(),
                    reason: format!(
                        "chunk starts at {} but the previous one ended at {end}",
                        e.offset
                    ),
                })));
            }
            let range = usize::try_from(e.offset)
                .ok()
                .zip(usize::try_from(e.offset + e.len).ok())
                .filter(|(_, b)| *b <= data.len());
            let ok = range.is_some_and(|(a, b)| sha256_hex(&data[a..b]) == e.sha256);
            if !ok {
                return Ok(Some(Problem::Edited {
                    file: e.file.clone(),
                }));
            }
            *end = e.offset + e.len;
        } else if latest.get(e.file.as_str()) == Some(&i) {
            let actual = sha256_hex(data);
            if data.len() as u64 != e.len || actual != e.sha256 {
                if let Some(holds) = by_hash.get(actual.as_str()).filter(|f| **f != e.file) {
                    return Ok(Some(Problem::Reordered {
                        file: e.file.clone(),
                        holds: (*holds).to_string(),
                    }));
                }
                return Ok(Some(Problem::Edited {
                    file: e.file.clone(),
                }));
            }
        }
    }
    for (file, end) in &ends {
        if let Some(Some(data)) = cache.get(file)
            && data.len() as u64 > *end
        {
            return Ok(Some(Problem::Unrecorded {
                file: (*file).to_string(),
                trailing_bytes: Some(data.len() as u64 - end),
            }));
        }
    }
    for f in files {
        if f != MANIFEST_FILE && !cache.contains_key(f.as_str()) {
            return Ok(Some(Problem::Unrecorded {
                file: f.clone(),
                trailing_bytes: None,
            }));
        }
    }
    Ok(None)
}
