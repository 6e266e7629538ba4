//! [`SqliteStore`]: the embedded memory store. One SQLite file (WAL mode)
//! holds the sliding-window `memory` table and the cross-session summaries; a
//! partial unique index makes "at most one `processing` row per
//! conversation" a database guarantee, across threads and processes.
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::store::{MemoryError, MemoryRecord, MemoryStatus, MemoryStore, SessionMemory, now_ms};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS memory (
    memory_id          INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id    TEXT    NOT NULL,
    memory_text        TEXT    NOT NULL DEFAULT '',
    start_sequence     INTEGER NOT NULL,
    end_sequence       INTEGER NOT NULL,
    base_memory_id     INTEGER REFERENCES memory(memory_id),
    status             TEXT    NOT NULL DEFAULT 'completed'
                       CHECK (status IN ('processing', 'completed', 'failed')),
    created_at         INTEGER NOT NULL,
    generation_time_ms INTEGER DEFAULT NULL
);
CREATE INDEX IF NOT EXISTS idx_memory_conversation_status
    ON memory (conversation_id, status, end_sequence DESC);
CREATE UNIQUE INDEX IF NOT EXISTS idx_memory_one_processing
    ON memory (conversation_id) WHERE status = 'processing';
CREATE TABLE IF NOT EXISTS session_memory (
    memory_key   TEXT PRIMARY KEY,
    summary_text TEXT NOT NULL,
    session_id   TEXT NOT NULL,
    updated_at   INTEGER NOT NULL
);
";

const COLUMNS: &str = "memory_id, conversation_id, memory_text, start_sequence, end_sequence, \
                       base_memory_id, status, created_at, generation_time_ms";

/// The embedded SQLite memory store.
#[derive(Debug)]
pub struct SqliteStore {
    conn: Mutex<Connection>,
}

fn db(e: rusqlite::Error) -> MemoryError {
    MemoryError::Store(e.to_string())
}

fn record(row: &Row<'_>) -> rusqlite::Result<(MemoryRecord, String)> {
    let status: String = row.get(6)?;
    Ok((
        MemoryRecord {
            memory_id: row.get(0)?,
            conversation_id: row.get(1)?,
            memory_text: row.get(2)?,
            start_sequence: row.get(3)?,
            end_sequence: row.get(4)?,
            base_memory_id: row.get(5)?,
            status: MemoryStatus::Failed,
            created_at_ms: row.get(7)?,
            generation_time_ms: row.get(8)?,
        },
        status,
    ))
}

fn with_status((mut r, status): (MemoryRecord, String)) -> Result<MemoryRecord, MemoryError> {
    r.status = MemoryStatus::parse(&status).ok_or_else(|| {
        MemoryError::Corrupt(format!("memory {} has status {status:?}", r.memory_id))
    })?;
    Ok(r)
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path`; `:memory:` is a
    /// private in-memory store. Parent directories are created.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, MemoryError> {
        // WAL (for a file) lets readers proceed while a background summary
        // commits.
        let (conn, _) = crate::db::open_sqlite(path.as_ref(), Duration::from_secs(5))
            .map_err(MemoryError::Store)?;
        conn.pragma_update(None, "foreign_keys", "ON").map_err(db)?;
        conn.execute_batch(SCHEMA).map_err(db)?;
        Ok(Self {
            conn: Mutex::new(conn),
        })
    }

    /// A private in-memory store.
    pub fn in_memory() -> Result<Self, MemoryError> {
        Self::open(":memory:")
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn one(
        &self,
        sql: &str,
        key: &dyn rusqlite::ToSql,
    ) -> Result<Option<MemoryRecord>, MemoryError> {
        let conn = self.conn();
        let row = conn.query_row(sql, [key], record).optional().map_err(db)?;
        row.map(with_status).transpose()
    }

    fn set_status(
        &self,
        memory_id: i64,
        status: MemoryStatus,
        text: Option<&str>,
        generation_time_ms: Option<i64>,
    ) -> Result<bool, MemoryError> {
        let conn = self.conn();
        let n = conn
            .execute(
                "UPDATE memory SET status = ?1,
                        memory_text = COALESCE(?2, memory_text),
                        generation_time_ms = COALESCE(?3, generation_time_ms)
                 WHERE memory_id = ?4 AND status = 'processing'",
                params![status.as_str(), text, generation_time_ms, memory_id],
            )
            .map_err(db)?;
        tracing::debug!(memory_id, %status, updated = n == 1, "memory status updated");
        Ok(n == 1)
    }
}

impl MemoryStore for SqliteStore {
    fn begin(
        &self,
        conversation_id: &str,
        start_sequence: i64,
        end_sequence: i64,
        base_memory_id: Option<i64>,
    ) -> Result<Option<i64>, MemoryError> {
        let conn = self.conn();
        let inserted = conn.execute(
            "INSERT INTO memory (conversation_id, memory_text, start_sequence, end_sequence,
                                 base_memory_id, status, created_at)
             VALUES (?1, '', ?2, ?3, ?4, 'processing', ?5)",
            params![
                conversation_id,
                start_sequence,
                end_sequence,
                base_memory_id,
                now_ms()
            ],
        );
        match inserted {
            Ok(_) => Ok(Some(conn.last_insert_rowid())),
            // The partial unique index: another summarization is running.
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::ConstraintViolation =>
            {
                Ok(None)
            }
            Err(e) => Err(db(e)),
        }
    }

    fn complete(
        &self,
        memory_id: i64,
        memory_text: &str,
        generation_time_ms: i64,
    ) -> Result<bool, MemoryError> {
        self.set_status(
            memory_id,
            MemoryStatus::Completed,
            Some(memory_text),
            Some(generation_time_ms),
        )
    }

    fn fail(&self, memory_id: i64) -> Result<bool, MemoryError> {
        self.set_status(memory_id, MemoryStatus::Failed, None, None)
    }

    fn get(&self, memory_id: i64) -> Result<Option<MemoryRecord>, MemoryError> {
        self.one(
            &format!("SELECT {COLUMNS} FROM memory WHERE memory_id = ?1"),
            &memory_id,
        )
    }

    fn latest_completed(&self, conversation_id: &str) -> Result<Option<MemoryRecord>, MemoryError> {
        self.one(
            &format!(
                "SELECT {COLUMNS} FROM memory WHERE conversation_id = ?1 AND status = 'completed'
                 ORDER BY end_sequence DESC, memory_id DESC LIMIT 1"
            ),
            &conversation_id,
        )
    }

    fn processing(&self, conversation_id: &str) -> Result<Option<MemoryRecord>, MemoryError> {
        self.one(
            &format!(
                "SELECT {COLUMNS} FROM memory WHERE conversation_id = ?1 AND status = 'processing'
                 LIMIT 1"
            ),
            &conversation_id,
        )
    }

    fn history(&self, conversation_id: &str) -> Result<Vec<MemoryRecord>, MemoryError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {COLUMNS} FROM memory WHERE conversation_id = ?1 ORDER BY memory_id"
            ))
            .map_err(db)?;
        let rows = stmt
            .query_map([conversation_id], record)
            .map_err(db)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db)?;
        rows.into_iter().map(with_status).collect()
    }

    fn recover_stuck(&self, older_than: Duration) -> Result<Vec<i64>, MemoryError> {
        let cutoff = now_ms() - older_than.as_millis() as i64;
        let conn = self.conn();
        let mut stmt = conn
            .prepare(
                "UPDATE memory SET status = 'failed'
                 WHERE status = 'processing' AND created_at <= ?1
                 RETURNING memory_id",
            )
            .map_err(db)?;
        let ids = stmt
            .query_map([cutoff], |r| r.get::<_, i64>(0))
            .map_err(db)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db)?;
        if !ids.is_empty() {
            tracing::warn!(?ids, "stuck processing memories marked failed");
        }
        Ok(ids)
    }

    fn save_session_memory(
        &self,
        memory_key: &str,
        summary_text: &str,
        session_id: &str,
    ) -> Result<(), MemoryError> {
        let conn = self.conn();
        conn.execute(
            "INSERT INTO session_memory (memory_key, summary_text, session_id, updated_at)
             VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(memory_key) DO UPDATE SET
                 summary_text = excluded.summary_text,
                 session_id = excluded.session_id,
                 updated_at = excluded.updated_at",
            params![memory_key, summary_text, session_id, now_ms()],
        )
        .map_err(db)?;
        Ok(())
    }

    fn session_memory(&self, memory_key: &str) -> Result<Option<SessionMemory>, MemoryError> {
        let conn = self.conn();
        conn.query_row(
            "SELECT memory_key, summary_text, session_id, updated_at
             FROM session_memory WHERE memory_key = ?1",
            [memory_key],
            |r| {
                Ok(SessionMemory {
                    memory_key: r.get(0)?,
                    summary_text: r.get(1)?,
                    session_id: r.get(2)?,
                    updated_at_ms: r.get(3)?,
                })
            },
        )
        .optional()
        .map_err(db)
    }
}
