//! The SQLite FTS5 backend of [`super::RecallIndex`]: one row per entry in
//! `recall_entries` (unique per session and id, so a history archived again
//! indexes only what is new), its text in the external-content FTS5 table
//! `recall_fts` (Porter stemming, so "reserved" finds "reserve"). The
//! index's random secret (`recall_meta`) keys every session's ids.
//!
//! The session is a column of the FTS5 table too (`sid`, one token: a hash
//! of the session id), so a query matches that session's rows inside FTS5
//! and `ORDER BY rank LIMIT n` lets FTS5 rank only them and write excerpts
//! for the `n` it returns: with the session filtered after the match,
//! every session's matching rows were ranked and excerpted (70 ms p99 over
//! 3,000 entries in a debug build).
//!
//! Schema versions (`recall_version`): 1 is the first layout, which
//! recorded no version; 2 records it. Opening a version-1 file records 2
//! (the tables are the same); a file of a newer version is refused.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};

use super::index::Indexed;
use super::query::fts_expression;
use super::{Origin, RecallError, RecallHit};

/// The schema version this build writes (see the module's notes).
pub const SQLITE_SCHEMA_VERSION: i64 = 2;

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
CREATE TABLE IF NOT EXISTS recall_version (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);
";

/// Characters of context an excerpt keeps around the matched words: FTS5
/// `snippet` tokens (about 5 characters each in code and logs).
const EXCERPT_TOKENS: i64 = 48;

fn db(e: rusqlite::Error) -> RecallError {
    RecallError::Index(e.to_string())
}

/// A SQLite recall index.
#[derive(Debug)]
pub(super) struct SqliteIndex {
    conn: Mutex<Connection>,
}

impl SqliteIndex {
    /// Opens (creating or migrating if needed) the index at `path`; returns
    /// it and its secret.
    pub(super) fn open(path: &Path) -> Result<(Self, Vec<u8>), RecallError> {
        let (mut conn, in_memory) =
            crate::db::open_sqlite(path, Duration::from_secs(10)).map_err(RecallError::Index)?;
        if !in_memory {
            conn.pragma_update(None, "synchronous", "NORMAL")
                .map_err(db)?;
        }
        setup(&mut conn, path)?;
        let secret: Vec<u8> = conn
            .query_row("SELECT secret FROM recall_meta WHERE id = 1", [], |r| {
                r.get(0)
            })
            .map_err(db)?;
        Ok((
            SqliteIndex {
                conn: Mutex::new(conn),
            },
            secret,
        ))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Which of `ids` the session already has (skipped before redaction).
    pub(super) fn known(
        &self,
        session: &str,
        ids: &[&str],
    ) -> Result<HashSet<String>, RecallError> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached("SELECT 1 FROM recall_entries WHERE session = ?1 AND rid = ?2")
            .map_err(db)?;
        let mut out = HashSet::new();
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
    pub(super) fn add(
        &self,
        session: &str,
        step: u32,
        entries: &[Indexed<'_>],
    ) -> Result<usize, RecallError> {
        let mut conn = self.lock();
        // The write lock is taken when the transaction begins, so a second
        // writer on the file (another process, a restarted manager still
        // finishing the last one's writes) waits its busy timeout: a
        // deferred transaction that had to upgrade failed at once with
        // SQLITE_BUSY in WAL mode, and its entries were lost.
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(db)?;
        let mut added = 0;
        let sid = super::index::session_token(session);
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

    /// The best `limit` entries of `session` for the words of `text`.
    pub(super) fn search(
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
            super::index::session_token(session)
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

    /// Entry `id` of `session`: its whole text and origin.
    pub(super) fn entry(
        &self,
        session: &str,
        id: &str,
    ) -> Result<Option<(String, Origin)>, RecallError> {
        let conn = self.lock();
        conn.query_row(
            "SELECT text, step, turn, kind, role, tool, call_id, file
             FROM recall_entries WHERE session = ?1 AND rid = ?2",
            params![session, id],
            |r| Ok((r.get::<_, String>(0)?, origin(r, 1)?)),
        )
        .optional()
        .map_err(db)
    }

    /// How many entries `session` has.
    pub(super) fn count(&self, session: &str) -> Result<usize, RecallError> {
        let conn = self.lock();
        conn.query_row(
            "SELECT count(*) FROM recall_entries WHERE session = ?1",
            params![session],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n as usize)
        .map_err(db)
    }

    /// The schema version the file records.
    pub(super) fn version(&self) -> Result<i64, RecallError> {
        self.lock()
            .query_row("SELECT version FROM recall_version WHERE id = 1", [], |r| {
                r.get(0)
            })
            .map_err(db)
    }
}

/// Creates the tables of a new file, migrates an older one, refuses a newer
/// one; in one write transaction, so processes opening the file together
/// do it once.
fn setup(conn: &mut Connection, path: &Path) -> Result<(), RecallError> {
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(db)?;
    let table = |name: &str| -> Result<bool, RecallError> {
        tx.prepare_cached("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1")
            .and_then(|mut s| s.exists([name]))
            .map_err(db)
    };
    let found: Option<i64> = if table("recall_version")? {
        tx.query_row("SELECT version FROM recall_version WHERE id = 1", [], |r| {
            r.get(0)
        })
        .optional()
        .map_err(db)?
    } else if table("recall_entries")? {
        // The first layout, written before versions were recorded.
        Some(1)
    } else {
        None
    };
    match found {
        Some(v) if v > SQLITE_SCHEMA_VERSION => {
            return Err(RecallError::Index(format!(
                "{} has recall index schema version {v}, newer than this build reads \
                 ({SQLITE_SCHEMA_VERSION}): upgrade compact, or point recall.path at another file",
                path.display()
            )));
        }
        Some(v) if v < 1 => {
            return Err(RecallError::Index(format!(
                "{} has recall index schema version {v}, which no build wrote",
                path.display()
            )));
        }
        Some(v) if v < SQLITE_SCHEMA_VERSION => {
            // 1 → 2: the tables are the same; only the version is new.
            tracing::info!(path = %path.display(), from = v, to = SQLITE_SCHEMA_VERSION, "recall index migrated");
        }
        _ => {}
    }
    tx.execute_batch(SCHEMA).map_err(db)?;
    tx.execute(
        "INSERT INTO recall_version (id, version) VALUES (1, ?1)
         ON CONFLICT (id) DO UPDATE SET version = excluded.version",
        [SQLITE_SCHEMA_VERSION],
    )
    .map_err(db)?;
    tx.commit().map_err(db)
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
