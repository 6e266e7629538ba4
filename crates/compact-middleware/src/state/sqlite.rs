//! [`SqliteSessionStore`]: session records in one SQLite file (WAL mode):
//! a head per session in `compact_sessions`, the rest in
//! `compact_session_rows` (`parts`: a save writes what changed, in one
//! transaction). Every call runs on the blocking pool. A session is
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

use super::parts::{self, LAYOUT_PARTS, Observed, Plan, Shapes};
use super::{
    Etag, Fetched, SessionGuard, SessionRecord, SessionStore, StateError, WriteStats, Written,
    filelock, new_etag, now_ms,
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
CREATE TABLE IF NOT EXISTS compact_session_rows (
    session_id TEXT    NOT NULL,
    kind       INTEGER NOT NULL,
    idx        INTEGER NOT NULL,
    body       TEXT    NOT NULL,
    PRIMARY KEY (session_id, kind, idx)
) WITHOUT ROWID;
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
    /// What the file holds of each session this store read or wrote last.
    shapes: Shapes,
    written: Written,
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
        add_head_column(&conn)?;
        Ok(Self {
            inner: Arc::new(Inner {
                conn: Mutex::new(conn),
                lock_dir,
                path: path.to_owned(),
                local: Mutex::new(HashMap::new()),
                shapes: Shapes::default(),
                written: Written::default(),
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

/// Adds `head` to a `compact_sessions` created by a version that stored
/// records whole (their rows keep `head` NULL and load as before).
fn add_head_column(conn: &Connection) -> Result<(), StateError> {
    let has_head = conn
        .prepare("SELECT 1 FROM pragma_table_info('compact_sessions') WHERE name = 'head'")
        .and_then(|mut s| s.exists([]))
        .map_err(db)?;
    if !has_head {
        conn.execute_batch("ALTER TABLE compact_sessions ADD COLUMN head TEXT")
            .map_err(db)?;
    }
    Ok(())
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
    observed: Observed,
    _file: Option<File>,
    _local: OwnedMutexGuard<()>,
}

impl SessionStore for SqliteSessionStore {
    fn kind(&self) -> &'static str {
        "sqlite"
    }

    fn write_stats(&self) -> WriteStats {
        self.inner.written.stats()
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
                observed: Observed::Unknown,
                _file: file,
                _local: local,
            }) as Box<dyn SessionGuard>)
        })
    }
}

impl SessionGuard for Guard {
    fn load(&mut self, known: Option<Etag>) -> BoxFuture<'_, Result<Fetched, StateError>> {
        let (inner, id) = (self.inner.clone(), self.id.clone());
        Box::pin(async move {
            let (fetched, observed) = blocking(move || {
                let conn = inner.conn();
                type Head = (i64, i64, Option<String>, Option<String>);
                let row: Option<Head> = conn
                    .query_row(
                        "SELECT etag, format,
                                CASE WHEN etag = ?2 THEN NULL ELSE record END,
                                CASE WHEN etag = ?2 THEN NULL ELSE head END
                         FROM compact_sessions WHERE session_id = ?1",
                        params![id.as_str(), known.map(|k| k as i64)],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                    )
                    .optional()
                    .map_err(db)?;
                let Some((etag, format, record, head)) = row else {
                    inner.shapes.forget(&id);
                    return Ok((Fetched::Absent, Observed::Absent));
                };
                let etag = etag as Etag;
                if known == Some(etag) {
                    return Ok((Fetched::Unchanged, Observed::At(etag)));
                }
                let record = match (format == i64::from(LAYOUT_PARTS), head) {
                    (true, Some(head)) => {
                        let mut stmt = conn
                            .prepare_cached(
                                "SELECT kind, idx, body FROM compact_session_rows
                                 WHERE session_id = ?1",
                            )
                            .map_err(db)?;
                        let rows = stmt
                            .query_map([id.as_str()], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                            .map_err(db)?
                            .collect::<Result<Vec<_>, _>>()
                            .map_err(db)?;
                        let (record, shape) = parts::join(&head, rows, etag)?;
                        inner.shapes.put(&id, shape);
                        record
                    }
                    // A record stored whole (an earlier version's): it is
                    // written in parts at its next save.
                    _ => {
                        inner.shapes.forget(&id);
                        SessionRecord::from_json(record.unwrap_or_default().as_bytes())?
                    }
                };
                Ok((Fetched::Record(etag, Box::new(record)), Observed::At(etag)))
            })
            .await?;
            self.observed = observed;
            Ok(fetched)
        })
    }

    fn save<'a>(
        &'a mut self,
        record: &'a SessionRecord,
    ) -> BoxFuture<'a, Result<Etag, StateError>> {
        Box::pin(async move {
            let known = match self.observed {
                Observed::At(etag) => self.inner.shapes.take(&self.id, etag),
                Observed::Absent | Observed::Unknown => {
                    self.inner.shapes.forget(&self.id);
                    None
                }
            };
            let plan = parts::plan(record, known.as_ref())?;
            let (inner, id) = (self.inner.clone(), self.id.clone());
            let etag = blocking(move || {
                let etag = new_etag();
                write(&mut inner.conn(), &id, etag, &plan).map_err(db)?;
                inner.written.add(plan.bytes());
                let mut shape = plan.shape;
                shape.etag = etag;
                inner.shapes.put(&id, shape);
                Ok(etag)
            })
            .await?;
            self.observed = Observed::At(etag);
            Ok(etag)
        })
    }

    fn delete(&mut self) -> BoxFuture<'_, Result<bool, StateError>> {
        let (inner, id) = (self.inner.clone(), self.id.clone());
        self.observed = Observed::Unknown;
        Box::pin(blocking(move || {
            inner.shapes.forget(&id);
            let mut conn = inner.conn();
            let tx = conn.transaction().map_err(db)?;
            tx.execute(
                "DELETE FROM compact_session_rows WHERE session_id = ?1",
                [id.as_str()],
            )
            .map_err(db)?;
            let n = tx
                .execute(
                    "DELETE FROM compact_sessions WHERE session_id = ?1",
                    [id.as_str()],
                )
                .map_err(db)?;
            tx.commit().map_err(db)?;
            Ok(n > 0)
        }))
    }

    fn release(self: Box<Self>) -> BoxFuture<'static, Result<(), StateError>> {
        // Every save committed on its own; dropping the file unlocks it.
        drop(self);
        Box::pin(async { Ok(()) })
    }
}

/// Applies `plan` in one transaction: the rows, then the head.
fn write(conn: &mut Connection, id: &SessionId, etag: Etag, plan: &Plan) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    if plan.full {
        tx.execute(
            "DELETE FROM compact_session_rows WHERE session_id = ?1",
            [id.as_str()],
        )?;
    }
    {
        let mut trim = tx.prepare_cached(
            "DELETE FROM compact_session_rows WHERE session_id = ?1 AND kind = ?2 AND idx >= ?3",
        )?;
        for (kind, from) in &plan.trims {
            trim.execute(params![id.as_str(), kind, from])?;
        }
        let mut put = tx.prepare_cached(
            "INSERT INTO compact_session_rows (session_id, kind, idx, body) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(session_id, kind, idx) DO UPDATE SET body = excluded.body",
        )?;
        for row in &plan.rows {
            put.execute(params![id.as_str(), row.kind, row.idx, row.body])?;
        }
        tx.prepare_cached(
            "INSERT INTO compact_sessions (session_id, etag, format, record, head, updated_at)
             VALUES (?1, ?2, ?3, '', ?4, ?5)
             ON CONFLICT(session_id) DO UPDATE SET
                 etag = excluded.etag, format = excluded.format, record = excluded.record,
                 head = excluded.head, updated_at = excluded.updated_at",
        )?
        .execute(params![
            id.as_str(),
            etag as i64,
            LAYOUT_PARTS,
            plan.head,
            now_ms() as i64
        ])?;
    }
    tx.commit()
}
