//! [`PostgresMemoryStore`]: the memory store in PostgreSQL, for replicas
//! that share one database (`state.store: postgres`, `state.url`): the
//! sliding window's rows in `compact_memory`, the cross-session summaries in
//! `compact_session_memory`. A partial unique index makes "at most one
//! `processing` row per conversation" the database's guarantee, across
//! every replica.
//!
//! [`MemoryStore`] is synchronous (its callers run it on the blocking pool,
//! as they do SQLite), and the client is async: each store runs its
//! connection on a small runtime of its own, and a call waits for its query
//! there. So a call works from any thread, inside a runtime or not, and
//! never starts a runtime within a runtime. Stores are shared per URL in a
//! process ([`PostgresMemoryStore::shared`]): managers built for different
//! strategy layers use one connection.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio_postgres::{Client, Row};

use super::store::{MemoryError, MemoryRecord, MemoryStatus, MemoryStore, SessionMemory};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS compact_memory (
    memory_id          BIGSERIAL   PRIMARY KEY,
    conversation_id    TEXT        NOT NULL,
    memory_text        TEXT        NOT NULL DEFAULT '',
    start_sequence     BIGINT      NOT NULL,
    end_sequence       BIGINT      NOT NULL,
    base_memory_id     BIGINT      REFERENCES compact_memory(memory_id),
    status             TEXT        NOT NULL DEFAULT 'completed'
                       CHECK (status IN ('processing', 'completed', 'failed')),
    created_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    generation_time_ms BIGINT      DEFAULT NULL
);
CREATE INDEX IF NOT EXISTS compact_memory_conversation_status
    ON compact_memory (conversation_id, status, end_sequence DESC);
CREATE UNIQUE INDEX IF NOT EXISTS compact_memory_one_processing
    ON compact_memory (conversation_id) WHERE status = 'processing';
CREATE TABLE IF NOT EXISTS compact_session_memory (
    memory_key   TEXT        PRIMARY KEY,
    summary_text TEXT        NOT NULL,
    session_id   TEXT        NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);
";

/// The two-key advisory lock that serializes schema creation between
/// replicas starting together (the session store's is `(…, 1)`).
const SCHEMA_LOCK: (i32, i32) = (0x636f_6d70, 2);

/// How long one call may take, connecting included, before it fails: a
/// database that stopped answering must not hold a preflight forever.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// `created_at` as milliseconds since the Unix epoch, like SQLite's.
const COLUMNS: &str = "memory_id, conversation_id, memory_text, start_sequence, end_sequence, \
     base_memory_id, status, (extract(epoch FROM created_at) * 1000)::BIGINT, generation_time_ms";

/// The memory store in a PostgreSQL database.
#[derive(Clone)]
pub struct PostgresMemoryStore {
    inner: Arc<Inner>,
}

struct Inner {
    config: crate::db::Postgres,
    /// The URL with its password masked: the only form that is logged.
    label: String,
    /// `None` only while dropping.
    rt: Option<tokio::runtime::Runtime>,
    client: Mutex<Option<Arc<Client>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Dropping a runtime inside another one's context panics; this
        // store may well be dropped there.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

impl std::fmt::Debug for PostgresMemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresMemoryStore")
            .field("url", &self.inner.label)
            .finish_non_exhaustive()
    }
}

fn db(what: &str, e: tokio_postgres::Error) -> MemoryError {
    MemoryError::Store(format!(
        "postgres {what}: {}",
        crate::db::postgres_detail(&e)
    ))
}

fn record(row: &Row) -> Result<MemoryRecord, MemoryError> {
    let get = |e| db("reading a memory row", e);
    let memory_id: i64 = row.try_get(0).map_err(get)?;
    let status: String = row.try_get(6).map_err(get)?;
    Ok(MemoryRecord {
        memory_id,
        conversation_id: row.try_get(1).map_err(get)?,
        memory_text: row.try_get(2).map_err(get)?,
        start_sequence: row.try_get(3).map_err(get)?,
        end_sequence: row.try_get(4).map_err(get)?,
        base_memory_id: row.try_get(5).map_err(get)?,
        status: MemoryStatus::parse(&status).ok_or_else(|| {
            MemoryError::Corrupt(format!("memory {memory_id} has status {status:?}"))
        })?,
        created_at_ms: row.try_get(7).map_err(get)?,
        generation_time_ms: row.try_get(8).map_err(get)?,
    })
}

impl PostgresMemoryStore {
    /// Connects to `url` (`postgres://user:password@host:port/db`), creating
    /// the tables if they are missing. Callable from any thread.
    pub fn connect(url: &str) -> Result<Self, MemoryError> {
        let (config, label) = crate::db::postgres_config(url).map_err(MemoryError::Store)?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("compact-memory-pg")
            .enable_all()
            .build()
            .map_err(|e| MemoryError::Store(format!("postgres memory store runtime: {e}")))?;
        let store = Self {
            inner: Arc::new(Inner {
                config,
                label,
                rt: Some(rt),
                client: Mutex::new(None),
            }),
        };
        store.run(|inner| async move {
            let client = inner.client().await?;
            crate::db::postgres_schema(&client, SCHEMA_LOCK, SCHEMA)
                .await
                .map_err(|(what, e)| match what {
                    "creating" => db("creating the memory tables", e),
                    other => db(other, e),
                })
        })?;
        Ok(store)
    }

    /// The store of `url` this process already has open, or a new one: every
    /// manager of a process shares one connection per database.
    pub fn shared(url: &str) -> Result<Arc<Self>, MemoryError> {
        static OPEN: Mutex<Option<HashMap<String, Weak<PostgresMemoryStore>>>> = Mutex::new(None);
        let mut open = OPEN
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let open = open.get_or_insert_with(HashMap::new);
        open.retain(|_, store| store.strong_count() > 0);
        if let Some(store) = open.get(url).and_then(Weak::upgrade) {
            return Ok(store);
        }
        let store = Arc::new(Self::connect(url)?);
        open.insert(url.to_owned(), Arc::downgrade(&store));
        Ok(store)
    }

    /// The URL, password masked.
    pub fn url(&self) -> &str {
        &self.inner.label
    }

    /// Runs `f` on the store's runtime and waits for it (at most
    /// [`CALL_TIMEOUT`]).
    fn run<T, F, Fut>(&self, f: F) -> Result<T, MemoryError>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Inner>) -> Fut,
        Fut: Future<Output = Result<T, MemoryError>> + Send + 'static,
    {
        let rt = self
            .inner
            .rt
            .as_ref()
            .ok_or_else(|| MemoryError::Store("postgres memory store is closed".into()))?;
        let fut = f(self.inner.clone());
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        rt.spawn(async move {
            let result = match tokio::time::timeout(CALL_TIMEOUT, fut).await {
                Ok(result) => result,
                Err(_) => Err(MemoryError::Store(format!(
                    "postgres memory store: no answer within {}s",
                    CALL_TIMEOUT.as_secs()
                ))),
            };
            let _ = tx.send(result);
        });
        rx.recv()
            .map_err(|_| MemoryError::Store("postgres memory store: its task was lost".into()))?
    }
}

impl Inner {
    /// The open connection, or a new one (after the server or the network
    /// dropped the last).
    async fn client(&self) -> Result<Arc<Client>, MemoryError> {
        if let Some(client) = self
            .client
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .filter(|c| !c.is_closed())
        {
            return Ok(client.clone());
        }
        let client = crate::db::postgres_connect(&self.config, &self.label)
            .await
            .map_err(MemoryError::Store)?;
        let client = Arc::new(client);
        *self
            .client
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(client.clone());
        Ok(client)
    }

    async fn one(&self, sql: String, key: Key) -> Result<Option<MemoryRecord>, MemoryError> {
        let client = self.client().await?;
        let row = match &key {
            Key::Id(id) => client.query_opt(&sql, &[id]).await,
            Key::Text(text) => client.query_opt(&sql, &[text]).await,
        }
        .map_err(|e| db("query", e))?;
        row.as_ref().map(record).transpose()
    }

    async fn set_status(
        &self,
        memory_id: i64,
        status: MemoryStatus,
        text: Option<String>,
        generation_time_ms: Option<i64>,
    ) -> Result<bool, MemoryError> {
        let client = self.client().await?;
        let n = client
            .execute(
                "UPDATE compact_memory SET status = $1,
                        memory_text = COALESCE($2, memory_text),
                        generation_time_ms = COALESCE($3, generation_time_ms)
                 WHERE memory_id = $4 AND status = 'processing'",
                &[&status.as_str(), &text, &generation_time_ms, &memory_id],
            )
            .await
            .map_err(|e| db("update", e))?;
        tracing::debug!(memory_id, %status, updated = n == 1, "memory status updated");
        Ok(n == 1)
    }
}

/// The one parameter of a single-row query.
enum Key {
    Id(i64),
    Text(String),
}

impl MemoryStore for PostgresMemoryStore {
    fn begin(
        &self,
        conversation_id: &str,
        start_sequence: i64,
        end_sequence: i64,
        base_memory_id: Option<i64>,
    ) -> Result<Option<i64>, MemoryError> {
        let conversation_id = conversation_id.to_owned();
        self.run(|inner| async move {
            let client = inner.client().await?;
            // The partial unique index: a conversation that already has a
            // `processing` row inserts nothing and gets no id back.
            let row = client
                .query_opt(
                    "INSERT INTO compact_memory (conversation_id, memory_text, start_sequence,
                                                 end_sequence, base_memory_id, status)
                     VALUES ($1, '', $2, $3, $4, 'processing')
                     ON CONFLICT (conversation_id) WHERE status = 'processing' DO NOTHING
                     RETURNING memory_id",
                    &[
                        &conversation_id,
                        &start_sequence,
                        &end_sequence,
                        &base_memory_id,
                    ],
                )
                .await
                .map_err(|e| db("insert", e))?;
            row.map(|r| r.try_get::<_, i64>(0).map_err(|e| db("insert", e)))
                .transpose()
        })
    }

    fn complete(
        &self,
        memory_id: i64,
        memory_text: &str,
        generation_time_ms: i64,
    ) -> Result<bool, MemoryError> {
        let text = memory_text.to_owned();
        self.run(|inner| async move {
            inner
                .set_status(
                    memory_id,
                    MemoryStatus::Completed,
                    Some(text),
                    Some(generation_time_ms),
                )
                .await
        })
    }

    fn fail(&self, memory_id: i64) -> Result<bool, MemoryError> {
        self.run(|inner| async move {
            inner
                .set_status(memory_id, MemoryStatus::Failed, None, None)
                .await
        })
    }

    fn get(&self, memory_id: i64) -> Result<Option<MemoryRecord>, MemoryError> {
        self.run(|inner| async move {
            inner
                .one(
                    format!("SELECT {COLUMNS} FROM compact_memory WHERE memory_id = $1"),
                    Key::Id(memory_id),
                )
                .await
        })
    }

    fn latest_completed(&self, conversation_id: &str) -> Result<Option<MemoryRecord>, MemoryError> {
        let key = Key::Text(conversation_id.to_owned());
        self.run(|inner| async move {
            inner
                .one(
                    format!(
                        "SELECT {COLUMNS} FROM compact_memory
                         WHERE conversation_id = $1 AND status = 'completed'
                         ORDER BY end_sequence DESC, memory_id DESC LIMIT 1"
                    ),
                    key,
                )
                .await
        })
    }

    fn processing(&self, conversation_id: &str) -> Result<Option<MemoryRecord>, MemoryError> {
        let key = Key::Text(conversation_id.to_owned());
        self.run(|inner| async move {
            inner
                .one(
                    format!(
                        "SELECT {COLUMNS} FROM compact_memory
                         WHERE conversation_id = $1 AND status = 'processing' LIMIT 1"
                    ),
                    key,
                )
                .await
        })
    }

    fn history(&self, conversation_id: &str) -> Result<Vec<MemoryRecord>, MemoryError> {
        let conversation_id = conversation_id.to_owned();
        self.run(|inner| async move {
            let client = inner.client().await?;
            let rows = client
                .query(
                    &format!(
                        "SELECT {COLUMNS} FROM compact_memory WHERE conversation_id = $1
                         ORDER BY memory_id"
                    ),
                    &[&conversation_id],
                )
                .await
                .map_err(|e| db("query", e))?;
            rows.iter().map(record).collect()
        })
    }

    fn recover_stuck(&self, older_than: Duration) -> Result<Vec<i64>, MemoryError> {
        // The database's clock: every replica agrees on what is stuck.
        let secs = older_than.as_secs_f64();
        self.run(|inner| async move {
            let client = inner.client().await?;
            let rows = client
                .query(
                    "UPDATE compact_memory SET status = 'failed'
                     WHERE status = 'processing'
                       AND created_at <= now() - make_interval(secs => $1)
                     RETURNING memory_id",
                    &[&secs],
                )
                .await
                .map_err(|e| db("recover", e))?;
            let ids = rows
                .iter()
                .map(|r| r.try_get::<_, i64>(0).map_err(|e| db("recover", e)))
                .collect::<Result<Vec<_>, _>>()?;
            if !ids.is_empty() {
                tracing::warn!(?ids, "stuck processing memories marked failed");
            }
            Ok(ids)
        })
    }

    fn save_session_memory(
        &self,
        memory_key: &str,
        summary_text: &str,
        session_id: &str,
    ) -> Result<(), MemoryError> {
        let (key, text, session) = (
            memory_key.to_owned(),
            summary_text.to_owned(),
            session_id.to_owned(),
        );
        self.run(|inner| async move {
            let client = inner.client().await?;
            client
                .execute(
                    "INSERT INTO compact_session_memory (memory_key, summary_text, session_id, updated_at)
                     VALUES ($1, $2, $3, now())
                     ON CONFLICT (memory_key) DO UPDATE SET
                         summary_text = excluded.summary_text,
                         session_id = excluded.session_id,
                         updated_at = excluded.updated_at",
                    &[&key, &text, &session],
                )
                .await
                .map_err(|e| db("save session memory", e))?;
            Ok(())
        })
    }

    fn session_memory(&self, memory_key: &str) -> Result<Option<SessionMemory>, MemoryError> {
        let key = memory_key.to_owned();
        self.run(|inner| async move {
            let client = inner.client().await?;
            let row = client
                .query_opt(
                    "SELECT memory_key, summary_text, session_id,
                            (extract(epoch FROM updated_at) * 1000)::BIGINT
                     FROM compact_session_memory WHERE memory_key = $1",
                    &[&key],
                )
                .await
                .map_err(|e| db("session memory", e))?;
            let Some(row) = row else {
                return Ok(None);
            };
            let get = |e| db("session memory", e);
            Ok(Some(SessionMemory {
                memory_key: row.try_get(0).map_err(get)?,
                summary_text: row.try_get(1).map_err(get)?,
                session_id: row.try_get(2).map_err(get)?,
                updated_at_ms: row.try_get(3).map_err(get)?,
            }))
        })
    }
}
