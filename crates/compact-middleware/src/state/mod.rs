//! Session state stores (docs/design.md §13): where the manager keeps each
//! session's [`SessionRecord`] between calls, so that separate processes, a
//! restarted server or several replicas continue one summary chain.
//!
//! - [`SessionStore`]: the trait (object safe, async like `Summarizer`):
//!   [`SessionStore::lock`] holds a session for one preflight, across
//!   processes, and the [`SessionGuard`] it returns loads and saves the
//!   record under that lock. `load`, `save` and `delete` at the store level
//!   take the lock for one operation.
//! - [`MemorySessionStore`]: records in this process, shared by the managers
//!   given it (tests, embedding). A manager without a store keeps its
//!   sessions in its own map and never serializes them: the library default.
//! - [`SqliteSessionStore`]: one SQLite file, the default of `compact serve`
//!   and of `compact preflight --state FILE`. Calls run on the blocking pool;
//!   the cross-process lock is an advisory file lock.
//! - [`PostgresSessionStore`]: one PostgreSQL table shared by many replicas;
//!   a session is held by a transaction-scoped advisory lock, so a dead
//!   replica never leaves one locked.
//!
//! The SQL stores keep a record in parts (`parts`): a small head, and rows
//! for the summary, each ledger item, each message of the last output and
//! so on; a save writes the head and the rows that changed, so a preflight
//! of a long session writes kilobytes, not the whole record. Records an
//! earlier version stored whole still load, and are stored in parts from
//! their next save.
//!
//! Private modules: `record` (the record and its encoding), `parts` (a
//! record as rows, and what a save writes), `memory`, `sqlite`,
//! `postgres`, `filelock` (the advisory lock files).

mod filelock;
mod memory;
mod parts;
mod postgres;
mod record;
mod sqlite;

pub use memory::MemorySessionStore;
pub use postgres::PostgresSessionStore;
pub use record::{
    BreakerRecord, LastCallRecord, MarkRecord, RECORD_FORMAT, SessionRecord, SummaryRecord,
};
pub use sqlite::SqliteSessionStore;

use std::fmt;

use crate::BoxFuture;
use crate::archive::SessionId;

/// An opaque version of a stored record: it changes at every save, so a
/// process that cached a record knows whether another one wrote since.
pub type Etag = u64;

/// A session store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    /// The backend failed (connection, I/O, SQL).
    #[error("session store: {0}")]
    Backend(String),
    /// A stored record cannot be read, or a record cannot be written.
    #[error("session record: {0}")]
    Encoding(String),
    /// The store cannot be opened with the given settings.
    #[error("session store configuration: {0}")]
    Config(String),
    /// The session could not be held in time (`state.wait_ms`): every
    /// connection was in use, or another call held the session. Nothing
    /// was read or written; a retry (on another replica) may succeed.
    #[error("session store busy: {0}")]
    Busy(String),
}

/// What a store wrote, counted since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Saves that succeeded.
    pub saves: u64,
    /// Bytes of record text those saves wrote (heads and rows; for a store
    /// that keeps records whole, whole records; 0 for one that serializes
    /// nothing).
    pub bytes: u64,
}

/// The counters behind [`WriteStats`].
#[derive(Debug, Default)]
pub(crate) struct Written {
    saves: std::sync::atomic::AtomicU64,
    bytes: std::sync::atomic::AtomicU64,
}

impl Written {
    /// Counts one save of `bytes`.
    pub(crate) fn add(&self, bytes: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        self.saves.fetch_add(1, Relaxed);
        self.bytes.fetch_add(bytes, Relaxed);
    }

    pub(crate) fn stats(&self) -> WriteStats {
        use std::sync::atomic::Ordering::Relaxed;
        WriteStats {
            saves: self.saves.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
        }
    }
}

/// What [`SessionGuard::load`] found.
#[derive(Debug)]
pub enum Fetched {
    /// No record for the session.
    Absent,
    /// The stored record is the one the caller already has (same etag).
    Unchanged,
    /// The stored record and its etag.
    Record(Etag, Box<SessionRecord>),
}

/// Where session records live. Implementations serialize
/// [`SessionStore::lock`] per session across every process that shares the
/// store, so two preflights of one session never fork its summary chain.
///
/// The contract, whatever a store writes: after [`SessionGuard::save`] of a
/// record, the next load (in any process) returns that record, equal field
/// by field; a store may write only what differs from what it holds
/// (`SessionGuard::save` knows what it holds from the guard's own load, or
/// from its own last save), never less.
pub trait SessionStore: Send + Sync + fmt::Debug {
    /// A short name for logs and reports: `memory`, `sqlite`, `postgres`.
    fn kind(&self) -> &'static str;

    /// Waits until no other holder (in any process) has the session, and
    /// holds it until the guard is released or dropped.
    fn lock<'a>(
        &'a self,
        id: &'a SessionId,
    ) -> BoxFuture<'a, Result<Box<dyn SessionGuard>, StateError>>;

    /// What the store wrote since it was opened (zeros when it does not
    /// count).
    fn write_stats(&self) -> WriteStats {
        WriteStats::default()
    }

    /// The session's record, if any (takes the lock for the read).
    fn load<'a>(
        &'a self,
        id: &'a SessionId,
    ) -> BoxFuture<'a, Result<Option<SessionRecord>, StateError>> {
        Box::pin(async move {
            let mut guard = self.lock(id).await?;
            let fetched = guard.load(None).await;
            guard.release().await?;
            Ok(match fetched? {
                Fetched::Record(_, r) => Some(*r),
                Fetched::Absent | Fetched::Unchanged => None,
            })
        })
    }

    /// Replaces the session's record (takes the lock for the write).
    fn save<'a>(
        &'a self,
        id: &'a SessionId,
        record: &'a SessionRecord,
    ) -> BoxFuture<'a, Result<(), StateError>> {
        Box::pin(async move {
            let mut guard = self.lock(id).await?;
            let saved = guard.save(record).await;
            guard.release().await?;
            saved.map(|_| ())
        })
    }

    /// Removes the session's record; true when there was one.
    fn delete<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, Result<bool, StateError>> {
        Box::pin(async move {
            let mut guard = self.lock(id).await?;
            let deleted = guard.delete().await;
            guard.release().await?;
            deleted
        })
    }
}

/// One session held by [`SessionStore::lock`]. Dropping it without
/// [`SessionGuard::release`] also lets the session go, discarding writes
/// that a transactional store had not committed.
pub trait SessionGuard: Send {
    /// The stored record; [`Fetched::Unchanged`] when its etag is `known`.
    fn load(&mut self, known: Option<Etag>) -> BoxFuture<'_, Result<Fetched, StateError>>;

    /// Writes `record`; returns its new etag.
    fn save<'a>(&'a mut self, record: &'a SessionRecord)
    -> BoxFuture<'a, Result<Etag, StateError>>;

    /// Removes the record; true when there was one.
    fn delete(&mut self) -> BoxFuture<'_, Result<bool, StateError>>;

    /// Makes the writes durable and lets the session go.
    fn release(self: Box<Self>) -> BoxFuture<'static, Result<(), StateError>>;
}

/// A fresh etag: unique per save in practice (time, process, counter, hashed).
pub fn new_etag() -> Etag {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut bytes = Vec::with_capacity(32);
    bytes.extend_from_slice(&nanos.to_le_bytes());
    bytes.extend_from_slice(&std::process::id().to_le_bytes());
    bytes.extend_from_slice(&COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    // Stored as a signed 64-bit integer by SQL backends: keep it positive.
    xxhash_rust::xxh3::xxh3_64(&bytes) >> 1
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A stable 64-bit key of a session id, for lock striping and advisory
/// locks (collisions only serialize two sessions, never mix them).
pub fn lock_key(id: &SessionId) -> i64 {
    (xxhash_rust::xxh3::xxh3_64(id.as_str().as_bytes()) >> 1) as i64
}
