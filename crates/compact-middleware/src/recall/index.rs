//! [`RecallIndex`]: the SQLite FTS5 index of what left the context. One
//! row per entry in `recall_entries` (unique per session and id, so a
//! history archived again indexes only what is new), its text in the
//! external-content FTS5 table `recall_fts` (Porter stemming, so "reserved"
//! finds "reserve"). The index's random secret (`recall_meta`) keys every
//! session's ids.
//!
//! The session is a column of the FTS5 table too (`sid`, one token: a hash
//! of the session id), so a query matches that session's rows inside FTS5
//! and `ORDER BY rank LIMIT n` lets FTS5 rank only them and write excerpts
//! for the `n` it returns: with the session filtered after the match,
//! every session's matching rows were ranked and excerpted (70 ms p99 over
//! 3,000 entries in a debug build).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};

use super::entries::Entry;
use super::query::fts_expression;
use super::{
    DEFAULT_LIMIT, MAX_LIMIT, Origin, PAGE_CHARS, RecallAnswer, RecallEntry, RecallError,
    RecallHit, RecallKey, RecallQuery, is_recall_id,
};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS recall_meta (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    secret BLOB    NOT NULL
);
INSERT OR IGNORE INTO recall_meta (id, secret) VALUES (1, randomblob(32));
CREATE TABLE IF NOT EXISTS recall_entries (
    id      INTEGER PRIMARY KEY,
    session TEXT    NOT NULL,
    sid     TEXT    NOT NULL,
    rid     TEXT    NOT NULL,
    step    INTEGER NOT NULL,
    turn    INTEGER NOT NULL,
    kind    TEXT    NOT NULL,
    role    TEXT    NOT NULL,
    tool    TEXT,
    call_id TEXT,
    file    TEXT,
    chars   INTEGER NOT NULL,
    text    TEXT    NOT NULL,
    UNIQUE (session, rid)
);
CREATE VIRTUAL TABLE IF NOT EXISTS recall_fts USING fts5(
    sid, text, tool, file,
    content = 'recall_entries', content_rowid = 'id',
    tokenize = 'porter unicode61'
);
";

/// Characters of context an excerpt keeps around the matched words: FTS5
/// `snippet` tokens (about 5 characters each in code and logs).
const EXCERPT_TOKENS: i64 = 48;

fn db(e: rusqlite::Error) -> RecallError {
    RecallError::Index(e.to_string())
}

/// Sessions whose indexed messages [`RecallIndex`] remembers; past this
/// the memory is dropped (and rebuilt by the next compactions: a message
/// is then looked up in the index again, which is slower, not wrong).
const SEEN_SESSIONS: usize = 4_096;

/// The recall index of one process (a SQLite file, or `:memory:`).
#[derive(Debug)]
pub struct RecallIndex {
    conn: Mutex<Connection>,
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
struct Indexed<'a> {
    entry: &'a Entry,
    /// The text to store (redacted).
    text: String,
    tool: Option<String>,
    file: Option<String>,
}

impl RecallIndex {
    /// Opens (creating if needed) the index at `path`; `:memory:` is a
    /// private in-memory index that lives as long as this value.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, RecallError> {
        let (conn, in_memory) = crate::db::open_sqlite(path.as_ref(), Duration::from_secs(10))
            .map_err(RecallError::Index)?;
        if !in_memory {
            conn.pragma_update(None, "synchronous", "NORMAL")
                .map_err(db)?;
        }
        conn.execute_batch(SCHEMA).map_err(db)?;
        let secret: Vec<u8> = conn
            .query_row("SELECT secret FROM recall_meta WHERE id = 1", [], |r| {
                r.get(0)
            })
            .map_err(db)?;
        Ok(RecallIndex {
            conn: Mutex::new(conn),
            secret,
            seen: Mutex::new(HashMap::new()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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
    /// session already has. Returns how many were new.
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
        let known = self.known(&session, &ids)?;
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
        self.add(&session, step, &fresh)
    }

    /// Which of `ids` the session already has (skipped before redaction).
    fn known(
        &self,
        session: &str,
        ids: &[&str],
    ) -> Result<std::collections::HashSet<String>, RecallError> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached("SELECT 1 FROM recall_entries WHERE session = ?1 AND rid = ?2")
            .map_err(db)?;
        let mut out = std::collections::HashSet::new();
        for id in ids {
            if stmt.exists(params![session, id]).map_err(db)? {
                out.insert((*id).to_owned());
            }
        }
        Ok(out)
    }

    /// Adds `entries` of compaction `step` to `session`'s index, in one
    /// transaction; an id the session has already keeps its first entry.
    /// Returns how many were new.
    fn add(&self, session: &str, step: u32, entries: &[Indexed<'_>]) -> Result<usize, RecallError> {
        let mut conn = self.lock();
        let tx = conn.transaction().map_err(db)?;
        let mut added = 0;
        let sid = session_token(session);
        {
            let mut ins = tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO recall_entries
                     (session, sid, rid, step, turn, kind, role, tool, call_id, file, chars, text)
                     VALUES (?1, ?12, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                )
                .map_err(db)?;
            let mut fts = tx
                .prepare_cached(
                    "INSERT INTO recall_fts (rowid, sid, text, tool, file) VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .map_err(db)?;
            for x in entries {
                let e = x.entry;
                let n = ins
                    .execute(params![
                        session,
                        e.id,
                        step,
                        e.turn,
                        e.kind,
                        e.role,
                        x.tool,
                        e.call_id,
                        x.file,
                        x.text.chars().count() as i64,
                        x.text,
                        sid,
                    ])
                    .map_err(db)?;
                if n == 1 {
                    let rowid = tx.last_insert_rowid();
                    fts.execute(params![rowid, sid, x.text, x.tool, x.file])
                        .map_err(db)?;
                    added += 1;
                }
            }
        }
        tx.commit().map_err(db)?;
        Ok(added)
    }

    /// Answers `q` from `session`'s entries only.
    pub fn recall(&self, session: &str, q: &RecallQuery) -> Result<RecallAnswer, RecallError> {
        match (q.query.as_deref(), q.id.as_deref()) {
            (Some(_), Some(_)) => Err(RecallError::Invalid(
                "give either query or id, not both".into(),
            )),
            (None, None) => Err(RecallError::Invalid("give a query or an id".into())),
            (Some(text), None) => {
                let limit = q.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
                Ok(RecallAnswer {
                    hits: self.search(session, text, limit)?,
                    entry: None,
                })
            }
            (None, Some(id)) => Ok(RecallAnswer {
                hits: Vec::new(),
                entry: self.by_id(session, id, q.offset.unwrap_or(0))?,
            }),
        }
    }

    fn search(
        &self,
        session: &str,
        text: &str,
        limit: usize,
    ) -> Result<Vec<RecallHit>, RecallError> {
        let Some(words) = fts_expression(text) else {
            return Ok(Vec::new());
        };
        // The session's rows only, the words in the text, tool and file.
        let expr = format!(
            "sid : \"{}\" AND {{text tool file}} : ({words})",
            session_token(session)
        );
        let conn = self.lock();
        // The session is checked again on the entries: the token is a
        // 64-bit hash, and isolation must not rest on its uniqueness.
        let mut stmt = conn
            .prepare_cached(
                "SELECT e.rid, f.score, f.excerpt,
                        e.chars, e.step, e.turn, e.kind, e.role, e.tool, e.call_id, e.file
                 FROM (SELECT rowid AS id, rank AS score,
                              snippet(recall_fts, 1, '', '', '…', ?3) AS excerpt
                       FROM recall_fts
                       WHERE recall_fts MATCH ?1 AND rank MATCH 'bm25(0.0, 1.0, 2.0, 2.0)'
                       ORDER BY rank LIMIT ?4) f
                 JOIN recall_entries e ON e.id = f.id
                 WHERE e.session = ?2
                 ORDER BY f.score",
            )
            .map_err(db)?;
        let rows = stmt
            .query_map(params![expr, session, EXCERPT_TOKENS, limit as i64], |r| {
                Ok(RecallHit {
                    id: r.get(0)?,
                    // FTS5's bm25 is lower-is-better; ours reads the other way.
                    score: -r.get::<_, f64>(1)?,
                    excerpt: r.get(2)?,
                    chars: r.get::<_, i64>(3)? as usize,
                    origin: origin(r, 4)?,
                })
            })
            .map_err(db)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(db)
    }

    fn by_id(
        &self,
        session: &str,
        id: &str,
        offset: usize,
    ) -> Result<Option<RecallEntry>, RecallError> {
        if !is_recall_id(id) {
            return Ok(None);
        }
        let conn = self.lock();
        let row = conn
            .query_row(
                "SELECT text, step, turn, kind, role, tool, call_id, file
                 FROM recall_entries WHERE session = ?1 AND rid = ?2",
                params![session, id],
                |r| Ok((r.get::<_, String>(0)?, origin(r, 1)?)),
            )
            .optional()
            .map_err(db)?;
        Ok(row.map(|(text, origin)| page(id, origin, &text, offset)))
    }

    /// How many entries `session` has.
    pub fn count(&self, session: &str) -> Result<usize, RecallError> {
        let conn = self.lock();
        conn.query_row(
            "SELECT count(*) FROM recall_entries WHERE session = ?1",
            params![session],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n as usize)
        .map_err(db)
    }
}

/// The one-token form of a session id in the FTS5 table: `s` and 16 hex
/// digits of its SHA-256 (session ids hold `-` and `.`, which the
/// tokenizer would split on).
fn session_token(session: &str) -> String {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(session.as_bytes());
    let mut s = String::with_capacity(17);
    s.push('s');
    for b in &d[..8] {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

fn origin(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<Origin> {
    Ok(Origin {
        step: r.get(at)?,
        turn: r.get(at + 1)?,
        kind: r.get(at + 2)?,
        role: r.get(at + 3)?,
        tool: r.get(at + 4)?,
        call_id: r.get(at + 5)?,
        file: r.get(at + 6)?,
    })
}

/// The page of `text` from character `offset`.
fn page(id: &str, origin: Origin, text: &str, offset: usize) -> RecallEntry {
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
