//! [`SqliteSessionStore`]: session records in one SQLite file (WAL mode),
//! one row per session. Every call runs on the blocking pool. A session is
//! held across processes by an advisory file lock (`filelock`) and within
//! this process by an async mutex, so waiting never blocks a runtime thread
//! for long.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::OwnedMutexGuard;

use super::{
    Etag, Fetched, SessionGuard, SessionRecord, SessionStore, StateError, filelock, new_etag,
    now_ms,
};
use crate::BoxFuture;
use crate::archive::SessionId;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS compact_sessions (
    session_id TEXT    PRIMARY KEY,
    etag       INTEGER NOT NULL,
    format     INTEGER NOT NULL,
    record     TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
);
";

/// Session records in a SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteSessionStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    conn: Mutex<Connection>,
    /// The lock files' directory; `None` for a private in-memory database.
    lock_dir: Option<PathBuf>,
    path: PathBuf,
    local: Mutex<HashMap<SessionId, Arc<tokio::sync::Mutex<()>>>>,
}

fn db(e: rusqlite::Error) -> StateError {
    StateError::Backend(e.to_string())
}

impl SqliteSessionStore {
    /// Opens (creating if needed) the store at `path`, parent directories
    /// included; `:memory:` is a private in-memory database.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StateError> {
        let path = path.as_ref();
        let (conn, in_memory) =
            crate::db::open_sqlite(path, Duration::from_secs(10)).map_err(StateError::Config)?;
        let lock_dir = if in_memory {
            None
        } else {
            // WAL with NORMAL survives a killed process (the WAL is in the
            // OS's cache); only a power loss can lose the last commits.
            conn.pragma_update(None, "synchronous", "NORMAL")
                .map_err(db)?;
            let dir = filelock::lock_dir(path);
            std::fs::create_dir_all(&dir)
                .map_err(|e| StateError::Config(format!("{}: {e}", dir.display())))?;
            Some(dir)
        };
        conn.execute_batch(SCHEMA).map_err(db)?;
        Ok(Self {
            inner: Arc::new(Inner {
                conn: Mutex::new(conn),
                lock_dir,
                path: path.to_owned(),
                local: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// A private in-memory store.
    pub fn in_memory() -> Result<Self, StateError> {
        Self::open(":memory:")
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }
}

impl Inner {
    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Runs `f` on the blocking pool.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StateError> + Send + 'static,
) -> Result<T, StateError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| StateError::Backend(format!("store task failed: {e}")))?
}

struct Guard {
    inner: Arc<Inner>,
    id: SessionId,
    _file: Option<File>,
    _local: OwnedMutexGuard<()>,
}

impl SessionStore for SqliteSessionStore {
    fn kind(&self) -> &'static str {
        "sqlite"
    }

    fn lock<'a>(
        &'a self,
        id: &'a SessionId,
    ) -> BoxFuture<'a, Result<Box<dyn SessionGuard>, StateError>> {
        Box::pin(async move {
            let local = self
                .inner
                .local
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .entry(id.clone())
                .or_default()
                .clone();
            let local = local.lock_owned().await;
            let file = match self.inner.lock_dir.clone() {
                None => None,
                Some(dir) => {
                    let id = id.clone();
                    Some(blocking(move || filelock::acquire(&dir, &id)).await?)
                }
            };
            Ok(Box::new(Guard {
                inner: self.inner.clone(),
                id: id.clone(),
                _file: file,
                _local: local,
            }) as Box<dyn SessionGuard>)
        })
    }
}

impl SessionGuard for Guard {
    fn load(&mut self, known: Option<Etag>) -> BoxFuture<'_, Result<Fetched, StateError>> {
        let (inner, id) = (self.inner.clone(), self.id.clone());
        Box::pin(blocking(move || {
            let row: Option<(i64, Option<String>)> = inner
                .conn()
                .query_row(
                    "SELECT etag, CASE WHEN etag = ?2 THEN NULL ELSE record END
                     FROM compact_sessions WHERE session_id = ?1",
                    params![id.as_str(), known.map(|k| k as i64)],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()
                .map_err(db)?;
            Ok(match row {
                None => Fetched::Absent,
                Some((_, None)) => Fetched::Unchanged,
                Some((etag, Some(text))) => Fetched::Record(
                    etag as Etag,
                    Box::new(SessionRecord::from_json(text.as_bytes())?),
                ),
            })
        }))
    }

    fn save<'a>(
        &'a mut self,
        record: &'a SessionRecord,
    ) -> BoxFuture<'a, Result<Etag, StateError>> {
        Box::pin(async move {
            let bytes = record.to_json()?;
            let text = String::from_utf8(bytes).map_err(|e| StateError::Encoding(e.to_string()))?;
            let (inner, id, format) = (self.inner.clone(), self.id.clone(), record.format);
            blocking(move || {
                let etag = new_etag();
                inner
                    .conn()
                    .execute(
                        "INSERT INTO compact_sessions (session_id, etag, format, record, updated_at)
                         VALUES (?1, ?2, ?3, ?4, ?5)
                         ON CONFLICT(session_id) DO UPDATE SET
                             etag = excluded.etag, format = excluded.format,
                             record = excluded.record, updated_at = excluded.updated_at",
                        params![id.as_str(), etag as i64, format, text, now_ms() as i64],
                    )
                    .map_err(db)?;
                Ok(etag)
            })
            .await
        })
    }

    fn delete(&mut self) -> BoxFuture<'_, Result<bool, StateError>> {
        let (inner, id) = (self.inner.clone(), self.id.clone());
        Box::pin(blocking(move || {
            let n = inner
                .conn()
                .execute(
                    "DELETE FROM compact_sessions WHERE session_id = ?1",
                    [id.as_str()],
                )
                .map_err(db)?;
            Ok(n > 0)
        }))
    }

    fn release(self: Box<Self>) -> BoxFuture<'static, Result<(), StateError>> {
        // Every write committed on its own; dropping the file unlocks it.
        drop(self);
        Box::pin(async { Ok(()) })
    }
}
