//! [`PostgresSessionStore`]: session records in one PostgreSQL table that
//! every replica shares, one row per session.
//!
//! A session is held by an open transaction that took
//! `pg_advisory_xact_lock` on the session's [`lock_key`]: a second replica's
//! `lock` waits in the server until the first commits, so concurrent
//! preflights of one session serialize and the summary chain never forks.
//! The lock is transaction-scoped, so a replica that dies mid-preflight
//! leaves nothing locked: the server ends its connection and rolls back.
//! Each held session uses one connection, at most [`MAX_OPEN`] at once per
//! store; released connections wait in an idle list for the next lock.
//! Waiting is bounded (`state.wait_ms`): for a connection when all are
//! held, and in the server for the session's lock (`lock_timeout`); past
//! it `lock` fails with [`StateError::Busy`], having done nothing, so an
//! overloaded replica says so instead of holding a call it cannot start.
//!
//! A record is kept in parts (`parts`): a head in `compact_sessions`, the
//! rest in `compact_session_rows`, and a save writes the head and the rows
//! that changed. Round trips are what a preflight waits for, so each
//! connection prepares its statements once, and a preflight makes four:
//! `BEGIN` with the lock, the load (head and rows pipelined), and the writes
//! pipelined with `COMMIT` at release.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, Statement};

use super::parts::{self, LAYOUT_PARTS, Observed, Plan, Shapes};
use super::{
    Etag, Fetched, SessionGuard, SessionRecord, SessionStore, StateError, WriteStats, Written,
    new_etag,
};
use crate::BoxFuture;
use crate::archive::SessionId;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS compact_sessions (
    session_id TEXT        PRIMARY KEY,
    etag       BIGINT      NOT NULL,
    format     INTEGER     NOT NULL,
    record     TEXT        NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
ALTER TABLE compact_sessions ADD COLUMN IF NOT EXISTS head TEXT;
CREATE TABLE IF NOT EXISTS compact_session_rows (
    session_id TEXT     NOT NULL,
    kind       SMALLINT NOT NULL,
    idx        INTEGER  NOT NULL,
    body       TEXT     NOT NULL,
    PRIMARY KEY (session_id, kind, idx)
)";

/// The two-key advisory lock that serializes schema creation between
/// replicas starting together (two-key locks never collide with the
/// one-key session locks).
const SCHEMA_LOCK: (i32, i32) = (0x636f_6d70, 1);

/// Connections open at once per store (held sessions); a lock past this
/// waits for one to be released, at most `state.wait_ms`. With connections
/// made only when none is idle, this bounds the connections a process
/// opens: several replicas under hundreds of concurrent sessions stay under
/// the server's `max_connections` (100 by default).
const MAX_OPEN: usize = 16;

/// Connections kept open between locks.
const MAX_IDLE: usize = MAX_OPEN;

/// How much longer than `wait` the client itself waits for the server to
/// grant the session's lock: the server's `lock_timeout` answers first
/// with a clear error; this only bounds a server that does not answer at
/// all (a connection that hangs, a server that stopped responding).
const LOCK_GRACE: Duration = Duration::from_secs(1);

/// Session records in a PostgreSQL database.
#[derive(Clone)]
pub struct PostgresSessionStore {
    inner: Arc<Inner>,
}

struct Inner {
    config: crate::db::Postgres,
    /// The URL with its password masked: the only form that is logged.
    label: String,
    idle: Mutex<Vec<Conn>>,
    /// One permit per held session ([`MAX_OPEN`]).
    open: Arc<tokio::sync::Semaphore>,
    /// The longest `lock` waits, for a permit and the session's lock
    /// together (`state.wait_ms`).
    wait: Duration,
    /// What the database holds of each session this store read or wrote last.
    shapes: Shapes,
    written: Written,
}

/// A connection and its prepared statements.
struct Conn {
    client: Client,
    st: Statements,
}

struct Statements {
    load_head: Statement,
    load_rows: Statement,
    put_rows: Statement,
    trim_rows: Statement,
    clear_rows: Statement,
    put_head: Statement,
    delete_head: Statement,
}

impl Statements {
    /// Prepares every statement, pipelined (one round trip).
    async fn prepare(client: &Client) -> Result<Self, tokio_postgres::Error> {
        let (load_head, load_rows, put_rows, trim_rows, clear_rows, put_head, delete_head) =
            tokio::try_join!(
                client.prepare(
                    "SELECT etag, format,
                            CASE WHEN etag = $2 THEN NULL ELSE record END,
                            CASE WHEN etag = $2 THEN NULL ELSE head END
                     FROM compact_sessions WHERE session_id = $1"
                ),
                // The rows only when the head is not the one the caller has.
                client.prepare(
                    "SELECT kind, idx, body FROM compact_session_rows
                     WHERE session_id = $1 AND NOT EXISTS (
                         SELECT 1 FROM compact_sessions WHERE session_id = $1 AND etag = $2)"
                ),
                client.prepare(
                    "INSERT INTO compact_session_rows (session_id, kind, idx, body)
                     SELECT $1, k, i, b FROM unnest($2::int2[], $3::int4[], $4::text[]) AS t(k, i, b)
                     ON CONFLICT (session_id, kind, idx) DO UPDATE SET body = excluded.body"
                ),
                client.prepare(
                    "DELETE FROM compact_session_rows r
                     USING unnest($2::int2[], $3::int4[]) AS t(k, from_idx)
                     WHERE r.session_id = $1 AND r.kind = t.k AND r.idx >= t.from_idx"
                ),
                client.prepare("DELETE FROM compact_session_rows WHERE session_id = $1"),
                client.prepare(
                    "INSERT INTO compact_sessions (session_id, etag, format, record, head, updated_at)
                     VALUES ($1, $2, $3, '', $4, now())
                     ON CONFLICT (session_id) DO UPDATE SET
                         etag = excluded.etag, format = excluded.format, record = excluded.record,
                         head = excluded.head, updated_at = excluded.updated_at"
                ),
                client.prepare("DELETE FROM compact_sessions WHERE session_id = $1"),
            )?;
        Ok(Self {
            load_head,
            load_rows,
            put_rows,
            trim_rows,
            clear_rows,
            put_head,
            delete_head,
        })
    }
}

impl std::fmt::Debug for PostgresSessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresSessionStore")
            .field("url", &self.inner.label)
            .finish_non_exhaustive()
    }
}

fn db(what: &str, e: tokio_postgres::Error) -> StateError {
    StateError::Backend(format!(
        "postgres {what}: {}",
        crate::db::postgres_detail(&e)
    ))
}

impl PostgresSessionStore {
    /// Connects to `url` (`postgres://user:password@host:port/db`), creating
    /// the tables if they are missing. Needs a tokio runtime: each
    /// connection runs as a task on it. `lock` waits at most
    /// `state.wait_ms`'s default ([`connect_with_wait`](Self::connect_with_wait)).
    pub async fn connect(url: &str) -> Result<Self, StateError> {
        let wait = Duration::from_millis(crate::config::DEFAULT_STATE_WAIT_MS);
        Self::connect_with_wait(url, wait).await
    }

    /// [`connect`](Self::connect), with `lock` waiting at most `wait` for a
    /// connection and the session's lock together before it fails with
    /// [`StateError::Busy`] (`state.wait_ms`).
    pub async fn connect_with_wait(url: &str, wait: Duration) -> Result<Self, StateError> {
        let (config, label) = crate::db::postgres_config(url).map_err(StateError::Config)?;
        let store = Self {
            inner: Arc::new(Inner {
                config,
                label,
                idle: Mutex::new(Vec::new()),
                open: Arc::new(tokio::sync::Semaphore::new(MAX_OPEN)),
                wait: wait.max(Duration::from_millis(1)),
                shapes: Shapes::default(),
                written: Written::default(),
            }),
        };
        let client = crate::db::postgres_connect(&store.inner.config, &store.inner.label)
            .await
            .map_err(StateError::Backend)?;
        crate::db::postgres_schema(&client, SCHEMA_LOCK, SCHEMA)
            .await
            .map_err(|(what, e)| match what {
                "creating" => db("creating compact_sessions", e),
                other => db(other, e),
            })?;
        prefer_lz4(&client, &store.inner.label).await;
        let st = Statements::prepare(&client)
            .await
            .map_err(|e| db("prepare", e))?;
        store.inner.put_back(Conn { client, st });
        Ok(store)
    }

    /// The URL, password masked.
    pub fn url(&self) -> &str {
        &self.inner.label
    }
}

/// Compresses records with lz4 rather than the default pglz when the
/// server can (PostgreSQL 14 or later, built with lz4): a record of a long
/// session is hundreds of kilobytes of JSON, written at every preflight,
/// and lz4 compresses it several times faster. Only new values are
/// affected; a server that cannot keeps pglz, which is merely slower.
async fn prefer_lz4(client: &Client, label: &str) {
    let current = client
        .query_opt(
            "SELECT attcompression::text FROM pg_attribute
             WHERE attrelid = 'compact_sessions'::regclass AND attname = 'record'",
            &[],
        )
        .await;
    match current {
        Ok(Some(row)) if row.try_get::<_, String>(0).is_ok_and(|c| c == "l") => {}
        Ok(_) => {
            if let Err(e) = client
                .batch_execute(
                    "ALTER TABLE compact_sessions ALTER COLUMN record SET COMPRESSION lz4",
                )
                .await
            {
                tracing::debug!(url = %label, error = %e, "records keep the default compression");
            }
        }
        // Before PostgreSQL 14 there is no per-column compression.
        Err(e) => tracing::debug!(url = %label, error = %e, "records keep the default compression"),
    }
}

impl Inner {
    async fn connect(&self) -> Result<Conn, StateError> {
        let client = crate::db::postgres_connect(&self.config, &self.label)
            .await
            .map_err(StateError::Backend)?;
        let st = Statements::prepare(&client)
            .await
            .map_err(|e| db("prepare", e))?;
        Ok(Conn { client, st })
    }

    /// An idle connection that is still open, or a new one.
    async fn checkout(&self) -> Result<Conn, StateError> {
        loop {
            let idle = self
                .idle
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .pop();
            match idle {
                Some(conn) if !conn.client.is_closed() => return Ok(conn),
                Some(_) => continue,
                None => return self.connect().await,
            }
        }
    }

    fn put_back(&self, conn: Conn) {
        let mut idle = self
            .idle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if idle.len() < MAX_IDLE && !conn.client.is_closed() {
            idle.push(conn);
        }
    }
}

/// A session held by an open transaction. Dropped without `release`, its
/// connection is closed rather than reused: the server rolls the
/// transaction back and lets the lock go.
struct Guard {
    inner: Arc<Inner>,
    id: SessionId,
    conn: Conn,
    /// Released with the guard (after the connection went back).
    _permit: tokio::sync::OwnedSemaphorePermit,
    observed: Observed,
    /// A save not sent yet: it goes with the `COMMIT` (one round trip).
    pending: Option<(Plan, Etag)>,
}

impl SessionStore for PostgresSessionStore {
    fn kind(&self) -> &'static str {
        "postgres"
    }

    fn write_stats(&self) -> WriteStats {
        self.inner.written.stats()
    }

    fn lock<'a>(
        &'a self,
        id: &'a SessionId,
    ) -> BoxFuture<'a, Result<Box<dyn SessionGuard>, StateError>> {
        Box::pin(async move {
            let wait = self.inner.wait;
            let deadline = tokio::time::Instant::now() + wait;
            // The semaphore is fair: a call waits behind those that came
            // first, and gives up its place at the deadline.
            let permit = match tokio::time::timeout_at(
                deadline,
                self.inner.open.clone().acquire_owned(),
            )
            .await
            {
                Ok(Ok(permit)) => permit,
                Ok(Err(e)) => return Err(StateError::Backend(format!("postgres lock: {e}"))),
                Err(_) => {
                    return Err(StateError::Busy(format!(
                        "postgres: all {MAX_OPEN} connections of this process stayed held by other calls for {} ms (state.wait_ms); retry, on another replica if there is one",
                        wait.as_millis()
                    )));
                }
            };
            // The rest of the wait goes to the session's lock, enforced by
            // the server (`lock_timeout`, in milliseconds, 0 would mean
            // none) and reset once it is held, so the call's own statements
            // never fail on it. One round trip; the numbers are ours, not
            // input.
            let left = deadline
                .saturating_duration_since(tokio::time::Instant::now())
                .max(Duration::from_millis(1));
            let begin = format!(
                "BEGIN; SET LOCAL lock_timeout = {}; SELECT pg_advisory_xact_lock({}); SET LOCAL lock_timeout = 0",
                left.as_micros().div_ceil(1000),
                super::lock_key(id)
            );
            let held = tokio::time::timeout_at(deadline + LOCK_GRACE, async {
                // An idle connection may have died without its task noticing
                // yet (the server restarted): the next one, or a new one.
                let mut tries = 0;
                loop {
                    let conn = self.inner.checkout().await?;
                    match conn.client.batch_execute(&begin).await {
                        Ok(()) => return Ok(conn),
                        Err(e) if e.is_closed() && tries < MAX_IDLE => tries += 1,
                        Err(e) if e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) => {
                            // The transaction is aborted: end it, and the
                            // connection serves the next call.
                            if conn.client.batch_execute("ROLLBACK").await.is_ok() {
                                self.inner.put_back(conn);
                            }
                            return Err(StateError::Busy(format!(
                                "postgres: session {id} stayed held by another call (on this or another replica) for {} ms (state.wait_ms); retry",
                                wait.as_millis()
                            )));
                        }
                        Err(e) => return Err(db("lock", e)),
                    }
                }
            })
            .await;
            let conn = match held {
                Ok(conn) => conn?,
                // The server did not answer in time; the connection was
                // dropped mid-call, so the server ends its transaction.
                Err(_) => {
                    return Err(StateError::Backend(format!(
                        "postgres lock: no answer from {} within {} ms while taking session {id}",
                        self.inner.label,
                        (wait + LOCK_GRACE).as_millis()
                    )));
                }
            };
            Ok(Box::new(Guard {
                inner: self.inner.clone(),
                id: id.clone(),
                conn,
                _permit: permit,
                observed: Observed::Unknown,
                pending: None,
            }) as Box<dyn SessionGuard>)
        })
    }
}

impl Guard {
    /// Sends `plan`'s writes, pipelined, with `COMMIT` when `commit`.
    async fn write(&self, plan: &Plan, etag: Etag, commit: bool) -> Result<(), StateError> {
        let (client, st, id) = (&self.conn.client, &self.conn.st, self.id.as_str());
        let clear = async {
            if plan.full {
                client.execute(&st.clear_rows, &[&id]).await?;
            } else if !plan.trims.is_empty() {
                let kinds: Vec<i16> = plan.trims.iter().map(|t| t.0).collect();
                let from: Vec<i32> = plan.trims.iter().map(|t| t.1).collect();
                client.execute(&st.trim_rows, &[&id, &kinds, &from]).await?;
            }
            Ok::<_, tokio_postgres::Error>(())
        };
        let rows = async {
            if !plan.rows.is_empty() {
                let kinds: Vec<i16> = plan.rows.iter().map(|r| r.kind).collect();
                let idxs: Vec<i32> = plan.rows.iter().map(|r| r.idx).collect();
                let bodies: Vec<&str> = plan.rows.iter().map(|r| r.body.as_str()).collect();
                client
                    .execute(&st.put_rows, &[&id, &kinds, &idxs, &bodies])
                    .await?;
            }
            Ok(())
        };
        let etag = etag as i64;
        let head_params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
            [&id, &etag, &LAYOUT_PARTS, &plan.head];
        let head = client.execute(&st.put_head, &head_params);
        let commit = async {
            if commit {
                client.batch_execute("COMMIT").await?;
            }
            Ok(())
        };
        // Biased: sent in this order (the removals before the rows).
        tokio::try_join!(biased; clear, rows, head, commit).map_err(|e| db("save", e))?;
        Ok(())
    }
}

impl SessionGuard for Guard {
    fn load(&mut self, known: Option<Etag>) -> BoxFuture<'_, Result<Fetched, StateError>> {
        Box::pin(async move {
            let known = known.map(|k| k as i64);
            let (client, st) = (&self.conn.client, &self.conn.st);
            let id = self.id.as_str();
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&id, &known];
            let (head, rows) = tokio::try_join!(
                client.query_opt(&st.load_head, &params),
                client.query(&st.load_rows, &params),
            )
            .map_err(|e| db("load", e))?;
            let Some(head) = head else {
                self.inner.shapes.forget(&self.id);
                self.observed = Observed::Absent;
                return Ok(Fetched::Absent);
            };
            let etag: i64 = head.try_get(0).map_err(|e| db("load", e))?;
            let format: i32 = head.try_get(1).map_err(|e| db("load", e))?;
            let record: Option<String> = head.try_get(2).map_err(|e| db("load", e))?;
            let parts_head: Option<String> = head.try_get(3).map_err(|e| db("load", e))?;
            let etag = etag as Etag;
            self.observed = Observed::At(etag);
            if known == Some(etag as i64) {
                return Ok(Fetched::Unchanged);
            }
            let record = match (format == LAYOUT_PARTS, parts_head) {
                (true, Some(text)) => {
                    let rows = rows
                        .iter()
                        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
                        .collect::<Result<Vec<_>, tokio_postgres::Error>>()
                        .map_err(|e| db("load", e))?;
                    let (record, shape) = parts::join(&text, rows, etag)?;
                    self.inner.shapes.put(&self.id, shape);
                    record
                }
                // A record stored whole (an earlier version's): it is
                // written in parts at its next save.
                _ => {
                    self.inner.shapes.forget(&self.id);
                    SessionRecord::from_json(record.unwrap_or_default().as_bytes())?
                }
            };
            Ok(Fetched::Record(etag, Box::new(record)))
        })
    }

    fn save<'a>(
        &'a mut self,
        record: &'a SessionRecord,
    ) -> BoxFuture<'a, Result<Etag, StateError>> {
        Box::pin(async move {
            // A second save under one guard: the first one's writes go now.
            if let Some((plan, etag)) = self.pending.take() {
                self.write(&plan, etag, false).await?;
                self.inner.written.add(plan.bytes());
                let mut shape = plan.shape;
                shape.etag = etag;
                self.inner.shapes.put(&self.id, shape);
            }
            let known = match self.observed {
                Observed::At(etag) => self.inner.shapes.take(&self.id, etag),
                Observed::Absent | Observed::Unknown => {
                    self.inner.shapes.forget(&self.id);
                    None
                }
            };
            let plan = parts::plan(record, known.as_ref())?;
            let etag = new_etag();
            self.pending = Some((plan, etag));
            self.observed = Observed::At(etag);
            Ok(etag)
        })
    }

    fn delete(&mut self) -> BoxFuture<'_, Result<bool, StateError>> {
        Box::pin(async move {
            self.pending = None;
            self.observed = Observed::Unknown;
            self.inner.shapes.forget(&self.id);
            let (client, st, id) = (&self.conn.client, &self.conn.st, self.id.as_str());
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&id];
            let (_, n) = tokio::try_join!(
                client.execute(&st.clear_rows, &params),
                client.execute(&st.delete_head, &params),
            )
            .map_err(|e| db("delete", e))?;
            Ok(n > 0)
        })
    }

    fn release(mut self: Box<Self>) -> BoxFuture<'static, Result<(), StateError>> {
        Box::pin(async move {
            match self.pending.take() {
                Some((plan, etag)) => {
                    // The writes and COMMIT in one round trip; COMMIT makes
                    // them durable and ends the advisory lock.
                    if let Err(e) = self.write(&plan, etag, true).await {
                        self.inner.shapes.forget(&self.id);
                        return Err(e);
                    }
                    self.inner.written.add(plan.bytes());
                    let mut shape = plan.shape;
                    shape.etag = etag;
                    self.inner.shapes.put(&self.id, shape);
                }
                None => self
                    .conn
                    .client
                    .batch_execute("COMMIT")
                    .await
                    .map_err(|e| db("commit", e))?,
            }
            let Guard {
                inner,
                conn,
                _permit,
                ..
            } = *self;
            inner.put_back(conn);
            drop(_permit);
            Ok(())
        })
    }
}
