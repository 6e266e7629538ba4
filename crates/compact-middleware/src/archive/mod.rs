//! The archive (DESIGN §9): every message that leaves the context is
//! written here first, with the summary that replaced it and the
//! compaction's events, so an auditor can reconstruct the whole session and
//! prove nothing was edited afterwards.
//!
//! - [`StorageAdapter`]: the async trait every backend implements (the
//!   filesystem here, S3 in the `compact-s3` crate).
//! - [`FsAdapter`]: the default backend, `{root}/{session_id}/...` with atomic,
//!   fsynced writes.
//! - [`SessionId`]: a validated session id, the only thing ever joined into a
//!   path or an object key.
//! - [`layout`]: file names and their byte encodings (shared by every backend).
//! - [`manifest`]: the hash-chained manifest each session keeps.
//! - [`verify()`]: checks a session's files against its manifest.
//! - [`Spool`]: the local directory that holds writes a backend refused, until
//!   they can be delivered.
//!
//! Everything handed to an adapter must already be redacted (see
//! [`crate::redact`]); adapters store bytes, they never look inside.

mod error;
mod fs;
mod id;
pub mod layout;
pub mod manifest;
mod spool;
mod verify;

use serde_json::Value;

pub use error::ArchiveError;
pub use fs::FsAdapter;
pub use id::{MAX_SESSION_ID_LEN, SessionId};
pub use layout::FileKind;
pub use spool::{Delivery, Spool, SpoolItem, SpoolPayload};
pub use verify::{Problem, Verification, last_step, verify};

use crate::BoxFuture;

/// Where one write landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// The file name inside the session (`summary-001.json`).
    pub name: String,
    /// The full path or object URL (`/archive/s1/summary-001.json`,
    /// `s3://bucket/prefix/s1/summary-001.json`).
    pub location: String,
    /// Bytes written.
    pub bytes: u64,
    /// The manifest's newest entry hash after this write: an anchor an
    /// auditor can compare against later (it goes into `compact.archival`).
    pub manifest_head: String,
}

/// A place transcripts, summaries and events are archived.
///
/// Implementations write each object durably (a save that returned `Ok` is
/// on stable storage) and record it in the session's [`manifest`]. A single
/// writer per session is assumed: the manager serializes its own writes, and
/// two processes must not archive the same session id at once.
///
/// The byte encodings are fixed by [`layout`], so every backend stores the
/// same bytes and [`verify()`] works on all of them.
pub trait StorageAdapter: Send + Sync + std::fmt::Debug {
    /// The backend's name in events and errors: `filesystem`, `s3`.
    fn kind(&self) -> &str;

    /// A human-readable root (`./.compact/archive`, `s3://bucket/prefix`).
    fn root(&self) -> String;

    /// Stores the full history before compaction number `step`
    /// (`transcript-pre-compact-{step:03}.jsonl`, one message per line).
    fn save_transcript<'a>(
        &'a self,
        session: &'a SessionId,
        step: u32,
        messages: &'a [Value],
    ) -> BoxFuture<'a, Result<Stored, ArchiveError>>;

    /// Stores the summary that compaction number `step` produced (`summary-{step:03}.json`).
    fn save_summary<'a>(
        &'a self,
        session: &'a SessionId,
        step: u32,
        summary: &'a Value,
    ) -> BoxFuture<'a, Result<Stored, ArchiveError>>;

    /// Appends events (one preflight's worth) to the session's event log:
    /// `events.jsonl` on a filesystem, numbered objects where there is no append.
    fn save_event<'a>(
        &'a self,
        session: &'a SessionId,
        events: &'a [Value],
    ) -> BoxFuture<'a, Result<Stored, ArchiveError>>;

    /// The session ids present, sorted.
    fn list_sessions(&self) -> BoxFuture<'_, Result<Vec<String>, ArchiveError>>;

    /// The file names of one session (manifest included), sorted. Empty when
    /// the session has no archive.
    fn list_files<'a>(
        &'a self,
        session: &'a SessionId,
    ) -> BoxFuture<'a, Result<Vec<String>, ArchiveError>>;

    /// The bytes of one file; [`ArchiveError::NotFound`] when absent. `name`
    /// must be one of the [`layout`] names.
    fn read_file<'a>(
        &'a self,
        session: &'a SessionId,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Vec<u8>, ArchiveError>>;
}

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 0xf) as usize] as char);
    }
    s
}

/// SHA-256 of `data`, lower-case hex.
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    hex(&sha2::Sha256::digest(data))
}
