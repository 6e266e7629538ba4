//! The archive (docs/design.md §9): every message that leaves the context is
//! written here first, with the summary that replaced it and the
//! compaction's events, so an auditor can reconstruct the whole session and
//! prove nothing was edited afterwards.
//!
//! Two layers. A backend is a [`StorageAdapter`]: a store of named byte
//! objects (`put`, `get`, `list`, `append`), the filesystem here, S3 in the
//! `compact-s3` crate. Everything else is the [`Archive`] on top of it, once
//! for every backend:
//!
//! - [`Archive`]: saves transcripts, summaries and events under the
//!   layout's names, keeps the manifest, reads sessions back.
//! - [`FsAdapter`]: the default backend, `{root}/{key}` with atomic, fsynced
//!   writes and in-place appends.
//! - [`SessionId`]: a validated session id, the only thing ever joined into
//!   a key; [`check_key`] is what adapters check keys against.
//! - The layout (module `layout`): file names ([`FileKind`],
//!   [`transcript_name`], [`MANIFEST_FILE`], …), keys and their byte
//!   encodings ([`encode_lines`], [`decode_lines`], …).
//! - The manifest (module `manifest`): the hash-chained [`ManifestEntry`]
//!   list each session keeps, read with [`parse_manifest`].
//! - [`verify()`]: checks a session's files against its manifest.
//! - [`Spool`]: the local directory that holds writes a backend refused,
//!   until they can be delivered.
//!
//! Everything handed to the archive must already be redacted (see
//! [`crate::redact`]); it stores bytes, it never looks inside.

mod adapter;
mod error;
mod fs;
mod id;
mod key;
mod layout;
mod manifest;
mod spool;
mod store;
mod verify;

pub use adapter::StorageAdapter;
pub use error::ArchiveError;
pub use fs::FsAdapter;
pub use id::{MAX_SESSION_ID_LEN, SessionId};
pub use key::{MAX_KEY_LEN, check_key, check_prefix};
pub use layout::{
    EVENTS_FILE, FileKind, MANIFEST_FILE, decode_document, decode_lines, encode_lines,
    encode_summary, event_object_name, summary_name, transcript_name, transcript_steps,
};
pub use manifest::{
    Entry as ManifestEntry, GENESIS as MANIFEST_GENESIS, ManifestError, parse as parse_manifest,
};
pub use spool::{Delivery, Spool, SpoolItem, SpoolPayload};
pub use store::{Archive, Step};
pub use verify::{Problem, Verification, last_step, verify};

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
    /// The manifest's newest entry hash after this write: what
    /// `compact archive verify` prints until the next write (it goes into
    /// `compact.archival`).
    pub manifest_head: String,
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
