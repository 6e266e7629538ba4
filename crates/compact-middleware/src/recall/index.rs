//! [`RecallIndex`]: the index of what left the context, on one of two
//! backends: SQLite FTS5 (`sqlite.rs`, a file or `:memory:`, the embedded
//! default) or PostgreSQL full-text search (`postgres.rs`, when the session
//! state lives there, so that every replica answers). What is common lives
//! here: the index's secret (so ids), which messages a session has indexed
//! already, redaction before a write, paging a by-id answer.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::entries::Entry;
use super::postgres::PgIndex;
use super::sqlite::SqliteIndex;
use super::{
    DEFAULT_LIMIT, Location, MAX_LIMIT, PAGE_CHARS, RecallAnswer, RecallEntry, RecallError,
    RecallKey, RecallQuery, is_recall_id,
};

/// Sessions whose indexed messages [`RecallIndex`] remembers; past this
/// the memory is dropped (and rebuilt by the next compactions: a message
/// is then looked up in the index again, which is slower, not wrong).
const SEEN_SESSIONS: usize = 4_096;

/// Where the entries are.
#[derive(Debug)]
enum Store {
    Sqlite(SqliteIndex),
    Postgres(PgIndex),
}

/// The recall index of one process: a SQLite file (or `:memory:`), or a
/// PostgreSQL database that replicas share.
#[derive(Debug)]
pub struct RecallIndex {
    store: Store,
    secret: Vec<u8>,
    /// Content hashes of the messages each session had indexed, so that a
    /// history archived again is not hashed, parsed and looked up again:
    /// each compaction archives the whole history it received.
    seen: Mutex<HashMap<String, HashSet<u128>>>,
}

/// Entries found by [`RecallIndex::prepare`], not written yet.
#[derive(Debug)]
pub struct Pending {
    session: String,
    entries: Vec<Entry>,
}

impl Pending {
    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

/// One entry, redacted, with where it came from.
pub(super) struct Indexed<'a> {
    pub(super) entry: &'a Entry,
    /// The text to store (redacted).
    pub(super) text: String,
    pub(super) tool: Option<String>,
    pub(super) file: Option<String>,
}

impl RecallIndex {
    /// Opens (creating if needed) the SQLite index at `path`; `:memory:` is
    /// a private in-memory index that lives as long as this value. A file
    /// of an older schema version is migrated; a newer one is refused.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, RecallError> {
        let (store, secret) = SqliteIndex::open(path.as_ref())?;
        Ok(Self::with(Store::Sqlite(store), secret))
    }

    /// Connects to the PostgreSQL index at `url`
    /// (`postgres://user:password@host:port/db`, libpq's `sslmode` and
    /// `sslrootcert` understood), creating its tables if they are missing
    /// (schema version checked as for a file). Callable from any thread.
    pub fn connect(url: &str) -> Result<Self, RecallError> {
        let (store, secret) = PgIndex::connect(url)?;
        Ok(Self::with(Store::Postgres(store), secret))
    }

    /// Opens the index at `location`.
    pub fn open_at(location: &Location) -> Result<Self, RecallError> {
        match location {
            Location::File(path) => Self::open(path),
            Location::Postgres(url) => Self::connect(url),
        }
    }

    fn with(store: Store, secret: Vec<u8>) -> Self {
        RecallIndex {
            store,
            secret,
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// `sqlite` or `postgres`.
    pub fn backend(&self) -> &'static str {
        match self.store {
            Store::Sqlite(_) => "sqlite",
            Store::Postgres(_) => "postgres",
        }
    }

    /// The schema version the index records (after any migration).
    pub fn schema_version(&self) -> Result<i64, RecallError> {
        match &self.store {
            Store::Sqlite(s) => s.version(),
            Store::Postgres(p) => p.version(),
        }
    }

    /// The key of `session`'s recall ids.
    pub fn key(&self, session: &str) -> RecallKey {
        RecallKey::derive(&self.secret, session)
    }

    /// Indexes the entries of `messages` (each tool output, each user or
    /// assistant message; `crate::recall::entries`) as compaction `step` of
    /// `session`, each text passed through `clean` (the redaction) first;
    /// entries the session has already are skipped before `clean`. Returns
    /// how many were new. The manager calls this at archive time.
    pub fn add_messages(
        &self,
        session: &str,
        step: u32,
        messages: &[crate::model::Message],
        clean: &dyn Fn(&str) -> String,
    ) -> Result<usize, RecallError> {
        let pending = self.prepare(session, messages);
        self.write(pending, step, clean)
    }

    /// The first half of [`add_messages`](Self::add_messages), cheap enough
    /// for a preflight: the entries of the messages `session` has not
    /// indexed before (their ids computed), which are from now on taken as
    /// indexed. [`write`](Self::write) them, on a blocking thread if need be.
    pub fn prepare(&self, session: &str, messages: &[crate::model::Message]) -> Pending {
        let lock = || {
            self.seen
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        // Taken out while the entries are hashed, so that other sessions'
        // compactions do not wait (one session's calls are serialized by
        // its own lock).
        let mut seen = lock().remove(session).unwrap_or_default();
        let entries = super::entries(&self.key(session), messages, &|m| {
            seen.contains(&m.content_hash())
        });
        seen.extend(messages.iter().map(crate::model::Message::content_hash));
        {
            let mut map = lock();
            if map.len() >= SEEN_SESSIONS {
                map.clear();
            }
            map.insert(session.to_owned(), seen);
        }
        Pending {
            session: session.to_owned(),
            entries,
        }
    }

    /// The second half of [`add_messages`](Self::add_messages): writes what
    /// [`prepare`](Self::prepare) found as compaction `step`, each text
    /// passed through `clean` (the redaction) first, skipping ids the
    /// session already has. Returns how many were new. Blocks (PostgreSQL:
    /// until the database answers).
    pub fn write(
        &self,
        pending: Pending,
        step: u32,
        clean: &dyn Fn(&str) -> String,
    ) -> Result<usize, RecallError> {
        let Pending { session, entries } = pending;
        if entries.is_empty() {
            return Ok(0);
        }
        let ids: Vec<&str> = entries.iter().map(|e| e.id.as_str()).collect();
        let known = match &self.store {
            Store::Sqlite(s) => s.known(&session, &ids)?,
            Store::Postgres(p) => p.known(&session, &ids)?,
        };
        let fresh: Vec<Indexed<'_>> = entries
            .iter()
            .filter(|e| !known.contains(&e.id))
            .map(|e| Indexed {
                entry: e,
                text: clean(&e.text),
                tool: e.tool.as_deref().map(clean),
                file: e.file.as_deref().map(clean),
            })
            .collect();
        if fresh.is_empty() {
            return Ok(0);
        }
        match &self.store {
            Store::Sqlite(s) => s.add(&session, step, &fresh),
            Store::Postgres(p) => p.add(&session, step, &fresh),
        }
    }

    /// Answers `q` from `session`'s entries only. Blocks (PostgreSQL: until
    /// the database answers); [`recall_async`](Self::recall_async) does not.
    pub fn recall(&self, session: &str, q: &RecallQuery) -> Result<RecallAnswer, RecallError> {
        match (q.query.as_deref(), q.id.as_deref()) {
            (Some(_), Some(_)) => Err(RecallError::Invalid(
                "give either query or id, not both".into(),
            )),
            (None, None) => Err(RecallError::Invalid("give a query or an id".into())),
            (Some(text), None) => {
                let limit = q.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
                let hits = match &self.store {
                    Store::Sqlite(s) => s.search(session, text, limit)?,
                    Store::Postgres(p) => p.search(session, text, limit)?,
                };
                Ok(RecallAnswer { hits, entry: None })
            }
            (None, Some(id)) => {
                if !is_recall_id(id) {
                    return Ok(RecallAnswer::default());
                }
                let found = match &self.store {
                    Store::Sqlite(s) => s.entry(session, id)?,
                    Store::Postgres(p) => p.entry(session, id)?,
                };
                Ok(RecallAnswer {
                    hits: Vec::new(),
                    entry: found
                        .map(|(text, origin)| page(id, origin, &text, q.offset.unwrap_or(0))),
                })
            }
        }
    }

    /// [`recall`](Self::recall) from async code: a SQLite index answers in
    /// place (it is fast, and its lock is short); a PostgreSQL one on the
    /// blocking pool, so that no runtime thread waits for the network.
    pub async fn recall_async(
        self: &Arc<Self>,
        session: &str,
        q: &RecallQuery,
    ) -> Result<RecallAnswer, RecallError> {
        if let Store::Sqlite(_) = self.store {
            return self.recall(session, q);
        }
        let (me, session, q) = (self.clone(), session.to_owned(), q.clone());
        tokio::task::spawn_blocking(move || me.recall(&session, &q))
            .await
            .map_err(|e| RecallError::Index(format!("recall did not finish: {e}")))?
    }

    /// How many entries `session` has.
    pub fn count(&self, session: &str) -> Result<usize, RecallError> {
        match &self.store {
            Store::Sqlite(s) => s.count(session),
            Store::Postgres(p) => p.count(session),
        }
    }
}

/// The one-token form of a session id in the full-text index: `s` and 16
/// hex digits of its SHA-256 (session ids hold `-` and `.`, which the
/// tokenizers would split on).
pub(super) fn session_token(session: &str) -> String {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(session.as_bytes());
    let mut s = String::with_capacity(17);
    s.push('s');
    for b in &d[..8] {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// The page of `text` from character `offset`.
fn page(id: &str, origin: super::Origin, text: &str, offset: usize) -> RecallEntry {
    let total = text.chars().count();
    let start = offset.min(total);
    let piece: String = text.chars().skip(start).take(PAGE_CHARS).collect();
    let end = start + piece.chars().count();
    RecallEntry {
        id: id.to_owned(),
        origin,
        text: piece,
        offset: start,
        total_chars: total,
        next_offset: (end < total).then_some(end),
    }
}
