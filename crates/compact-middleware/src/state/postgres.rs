//! [`PostgresSessionStore`]: session records in one PostgreSQL table that
//! every replica shares, one row per session.
//!
//! A session is held by an open transaction that took
//! `pg_advisory_xact_lock` on the session's [`lock_key`]: a second replica's
//! `lock` waits in the server until the first commits, so concurrent
//! preflights of one session serialize and the summary chain never forks.
//! The lock is transaction-scoped, so a replica that dies mid-preflight
//! leaves nothing locked: the server ends its connection and rolls back.
//! Each held session uses one connection; released connections wait in a
//! small idle list for the next lock.

use std::sync::{Arc, Mutex};
use tokio_postgres::Client;

use super::{Etag, Fetched, SessionGuard, SessionRecord, SessionStore, StateError, new_etag};
use crate::BoxFuture;
use crate::archive::SessionId;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS compact_sessions (
    session_id TEXT        PRIMARY KEY,
    etag       BIGINT      NOT NULL,
    format     INTEGER     NOT NULL,
    record     TEXT        NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
)";

/// The two-key advisory lock that serializes schema creation between
/// replicas starting together (two-key locks never collide with the
/// one-key session locks).
const SCHEMA_LOCK: (i32, i32) = (0x636f_6d70, 1);

/// Connections kept open between locks; more are opened on demand.
const MAX_IDLE: usize = 16;

/// Session records in a PostgreSQL database.
#[derive(Clone)]
pub struct PostgresSessionStore {
    inner: Arc<Inner>,
}

struct Inner {
    config: tokio_postgres::Config,
    /// The URL with its password masked: the only form that is logged.
    label: String,
    idle: Mutex<Vec<Client>>,
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
    /// the `compact_sessions` table if it is missing. Needs a tokio runtime:
    /// each connection runs as a task on it.
    pub async fn connect(url: &str) -> Result<Self, StateError> {
        let (config, label) = crate::db::postgres_config(url).map_err(StateError::Config)?;
        let store = Self {
            inner: Arc::new(Inner {
                config,
                label,
                idle: Mutex::new(Vec::new()),
            }),
        };
        let client = store.inner.connect().await?;
        crate::db::postgres_schema(&client, SCHEMA_LOCK, SCHEMA)
            .await
            .map_err(|(what, e)| match what {
                "creating" => db("creating compact_sessions", e),
                other => db(other, e),
            })?;
        prefer_lz4(&client, &store.inner.label).await;
        store.inner.put_back(client);
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
    async fn connect(&self) -> Result<Client, StateError> {
        crate::db::postgres_connect(&self.config, &self.label)
            .await
            .map_err(StateError::Backend)
    }

    /// An idle connection that is still open, or a new one.
    async fn checkout(&self) -> Result<Client, StateError> {
        loop {
            let idle = self
                .idle
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .pop();
            match idle {
                Some(client) if !client.is_closed() => return Ok(client),
                Some(_) => continue,
                None => return self.connect().await,
            }
        }
    }

    fn put_back(&self, client: Client) {
        let mut idle = self
            .idle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if idle.len() < MAX_IDLE && !client.is_closed() {
            idle.push(client);
        }
    }
}

/// A session held by an open transaction. Dropped without `release`, its
/// connection is closed rather than reused: the server rolls the
/// transaction back and lets the lock go.
struct Guard {
    inner: Arc<Inner>,
    id: SessionId,
    client: Client,
}

impl SessionStore for PostgresSessionStore {
    fn kind(&self) -> &'static str {
        "postgres"
    }

    fn lock<'a>(
        &'a self,
        id: &'a SessionId,
    ) -> BoxFuture<'a, Result<Box<dyn SessionGuard>, StateError>> {
        Box::pin(async move {
            let client = self.inner.checkout().await?;
            client
                .batch_execute("BEGIN")
                .await
                .map_err(|e| db("lock", e))?;
            client
                .execute("SELECT pg_advisory_xact_lock($1)", &[&super::lock_key(id)])
                .await
                .map_err(|e| db("lock", e))?;
            Ok(Box::new(Guard {
                inner: self.inner.clone(),
                id: id.clone(),
                client,
            }) as Box<dyn SessionGuard>)
        })
    }
}

impl SessionGuard for Guard {
    fn load(&mut self, known: Option<Etag>) -> BoxFuture<'_, Result<Fetched, StateError>> {
        Box::pin(async move {
            let known = known.map(|k| k as i64);
            let row = self
                .client
                .query_opt(
                    "SELECT etag, CASE WHEN etag = $2 THEN NULL ELSE record END
                     FROM compact_sessions WHERE session_id = $1",
                    &[&self.id.as_str(), &known],
                )
                .await
                .map_err(|e| db("load", e))?;
            let Some(row) = row else {
                return Ok(Fetched::Absent);
            };
            let etag: i64 = row.try_get(0).map_err(|e| db("load", e))?;
            let text: Option<String> = row.try_get(1).map_err(|e| db("load", e))?;
            Ok(match text {
                None => Fetched::Unchanged,
                Some(text) => Fetched::Record(
                    etag as Etag,
                    Box::new(SessionRecord::from_json(text.as_bytes())?),
                ),
            })
        })
    }

    fn save<'a>(
        &'a mut self,
        record: &'a SessionRecord,
    ) -> BoxFuture<'a, Result<Etag, StateError>> {
        Box::pin(async move {
            let bytes = record.to_json()?;
            let text = String::from_utf8(bytes).map_err(|e| StateError::Encoding(e.to_string()))?;
            let etag = new_etag();
            let format = i32::try_from(record.format)
                .map_err(|_| StateError::Encoding(format!("format {}", record.format)))?;
            self.client
                .execute(
                    "INSERT INTO compact_sessions (session_id, etag, format, record, updated_at)
                     VALUES ($1, $2, $3, $4, now())
                     ON CONFLICT (session_id) DO UPDATE SET
                         etag = excluded.etag, format = excluded.format,
                         record = excluded.record, updated_at = excluded.updated_at",
                    &[&self.id.as_str(), &(etag as i64), &format, &text],
                )
                .await
                .map_err(|e| db("save", e))?;
            Ok(etag)
        })
    }

    fn delete(&mut self) -> BoxFuture<'_, Result<bool, StateError>> {
        Box::pin(async move {
            let n = self
                .client
                .execute(
                    "DELETE FROM compact_sessions WHERE session_id = $1",
                    &[&self.id.as_str()],
                )
                .await
                .map_err(|e| db("delete", e))?;
            Ok(n > 0)
        })
    }

    fn release(self: Box<Self>) -> BoxFuture<'static, Result<(), StateError>> {
        let Guard { inner, client, .. } = *self;
        Box::pin(async move {
            // COMMIT makes the writes durable and ends the advisory lock.
            client
                .batch_execute("COMMIT")
                .await
                .map_err(|e| db("commit", e))?;
            inner.put_back(client);
            Ok(())
        })
    }
}
