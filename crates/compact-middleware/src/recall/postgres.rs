//! The PostgreSQL backend of [`super::RecallIndex`], for replicas that share
//! one database (`state.store: postgres`): one row per entry in
//! `compact_recall_entries` (unique per session and id, so a history
//! archived again adds only what is new) with its `tsvector` (English
//! stemming; the tool and file weighted above the text) under a GIN index;
//! the index's random secret and schema version in `compact_recall_meta`,
//! so every replica derives the same ids; each session's entry count in
//! `compact_recall_sessions` (kept by the inserts, read by every query).
//!
//! The session is a lexeme of the `tsvector` too (its one-token hash, as
//! in SQLite), and every match is `words && session`: the GIN index
//! intersects the words' postings with the session's, so only that
//! session's rows are read. The session column is checked as well:
//! isolation does not rest on the hash.
//!
//! PostgreSQL's ranks know nothing of how rare a word is, and ranking
//! every entry that holds any word of a natural question (most of them:
//! "test", "line") takes 60–100 ms over 10,000 entries. So a query first
//! counts, per word, the session's entries holding it (capped), weighs each
//! word by BM25's IDF, and scores only the entries holding the rarest words
//! ([`CANDIDATES`] at most): the sum of the weights of the words each
//! holds (half again in the tool or file), `ts_rank` breaking ties.
//! Excerpts are made from the texts of the rows returned (`excerpt.rs`).
//!
//! The text is given to PostgreSQL's parser with every run of characters
//! other than letters and digits as a space (`query::normalized`), so a
//! path or `snake_case` is words, as in SQLite. A `tsvector` holds at most
//! 1 MB and records no word position past 16,383 (a phrase, which is how
//! `snake_case` is matched, no longer matches there), so a long entry is
//! searched in pieces ([`pieces`]: at most [`PIECE_WORDS`] words and about
//! [`PIECE_CHARS`] characters each): the entry's row (`rid`) holds the
//! whole text and the first piece's words, and each further piece is a row
//! of its own (`rid.1`, `rid.2`, …: a piece's id is never a recall id)
//! with that piece's text, for its excerpt. A query scores rows and keeps
//! each entry's best; counts and by-id reads see entries' rows only.
//!
//! PostgreSQL's English configuration drops stop words ("the", "not",
//! "were"), which FTS5 keeps: a query of nothing else would match nothing.
//! It is answered instead by matching its words as whole words
//! (case-insensitive) in the session's [`FALLBACK_ENTRIES`] latest
//! entries, ranked by how many of them each holds, as SQLite answers it.
//!
//! Like the PostgreSQL memory store, the index is synchronous (writes run
//! on the blocking pool, recalls through `RecallIndex::recall_async`) and
//! its connection lives on a small runtime of its own, so a call works from
//! any thread, inside a runtime or not.
//!
//! Schema versions (`compact_recall_meta.version`): 1 is the first; 2
//! writes a long entry's further pieces as rows of their own (the tables
//! are the same: a version-1 database is taken as it is, its long entries
//! searchable in their first 250,000 characters as they were written).

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_postgres::{Client, Row, Statement};

use super::excerpt::excerpt;
use super::index::{Indexed, session_token};
use super::query::{normalized, ts_query};
use super::{Origin, RecallError, RecallHit};

/// The schema version this build writes (see the module's notes).
pub const POSTGRES_SCHEMA_VERSION: i32 = 2;

/// Words (runs of letters and digits, as `query::normalized` leaves them)
/// per searchable piece of an entry: a `tsvector` records positions up to
/// 16,383, and the parser may split a word further (room for a third more).
pub(super) const PIECE_WORDS: usize = 12_000;

/// Characters per searchable piece, about (a piece ends where a word
/// starts): with the words' positions, well under a `tsvector`'s 1 MB.
pub(super) const PIECE_CHARS: usize = 200_000;

/// A word longer than this is cut between pieces: PostgreSQL indexes no
/// word over 2,047 bytes anyway.
const LONGEST_WORD: usize = 4_096;

/// Entries a query of stop words only reads, the latest first: it matches
/// with a regular expression, row by row.
const FALLBACK_ENTRIES: i64 = 1_000;

/// `text` in searchable pieces, in order (their concatenation is `text`),
/// each at most [`PIECE_WORDS`] words and about [`PIECE_CHARS`] characters,
/// cut where a word starts (never inside one, unless it is longer than
/// [`LONGEST_WORD`]). A short text is one piece.
pub(super) fn pieces(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut words, mut chars, mut word_chars) = (0, 0, 0, 0);
    let mut in_word = false;
    for (i, c) in text.char_indices() {
        let alnum = c.is_alphanumeric();
        let starts_word = alnum && !in_word;
        let full = words >= PIECE_WORDS || chars >= PIECE_CHARS;
        if (starts_word && full) || (alnum && word_chars >= LONGEST_WORD && chars >= PIECE_CHARS) {
            out.push(&text[start..i]);
            (start, words, chars) = (i, 0, 0);
        }
        if starts_word {
            words += 1;
            word_chars = 0;
        }
        if alnum {
            word_chars += 1;
        }
        in_word = alnum;
        chars += 1;
    }
    out.push(&text[start..]);
    out
}

/// Created under the advisory lock, after the version was checked. The GIN
/// index has no pending list (`fastupdate = off`): every scan reads the
/// whole list, 2 ms per word of a query after a few thousand inserts
/// (0.06 ms without it); the inserts, off the preflight's path, pay
/// instead.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS compact_recall_entries (
    id      BIGSERIAL PRIMARY KEY,
    session TEXT     NOT NULL,
    rid     TEXT     NOT NULL,
    step    INTEGER  NOT NULL,
    turn    INTEGER  NOT NULL,
    kind    TEXT     NOT NULL,
    role    TEXT     NOT NULL,
    tool    TEXT,
    call_id TEXT,
    file    TEXT,
    chars   INTEGER  NOT NULL,
    text    TEXT     NOT NULL,
    doc     tsvector NOT NULL,
    UNIQUE (session, rid)
);
CREATE INDEX IF NOT EXISTS compact_recall_entries_doc
    ON compact_recall_entries USING GIN (doc) WITH (fastupdate = off);
CREATE TABLE IF NOT EXISTS compact_recall_sessions (
    session TEXT   PRIMARY KEY,
    entries BIGINT NOT NULL
);
";

/// The meta row: the secret (two random UUIDs' 32 bytes, `gen_random_uuid`
/// being built in since PostgreSQL 13) and the version.
const META: &str = "
CREATE TABLE IF NOT EXISTS compact_recall_meta (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    secret  BYTEA   NOT NULL,
    version INTEGER NOT NULL
)";

/// The two-key advisory lock that serializes schema creation between
/// replicas starting together (the session store's is `(…, 1)`, the
/// memory store's `(…, 2)`).
const SCHEMA_LOCK: (i32, i32) = (0x636f_6d70, 3);

/// How long one call may take, connecting included, before it fails.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Entries a term is counted in, at most: a term in more is common, and
/// counting further costs time (a few ms per thousand) for little.
const DF_CAP: i64 = 400;

/// Entries a query scores, at most: those holding its rarest terms. Each
/// costs reading its `tsvector` (about 20 µs); past this a query of
/// common words only scores the first it finds.
const CANDIDATES: i64 = 400;

/// The weight of each term (BM25's IDF over the session's `n` entries,
/// from its entry count `df`, capped at [`DF_CAP`]; 0 for a term no entry
/// holds) and the terms that choose the candidates: the rarest, as many as
/// hold at most [`CANDIDATES`] entries together (at least one). `None`
/// when no entry holds any term.
fn weights(n: i64, df: &[i64]) -> Option<(Vec<f64>, Vec<usize>)> {
    // A session's count is never below what a word was counted in (it
    // would be for entries written before the count was kept).
    let n = n.max(df.iter().copied().max().unwrap_or(0)) as f64;
    let w: Vec<f64> = df
        .iter()
        .map(|&d| {
            if d <= 0 {
                0.0
            } else {
                let d = d as f64;
                (1.0 + (n - d + 0.5) / (d + 0.5)).ln()
            }
        })
        .collect();
    let mut order: Vec<usize> = (0..df.len()).filter(|&i| df[i] > 0).collect();
    if order.is_empty() {
        return None;
    }
    order.sort_by_key(|&i| df[i]);
    let mut driving = Vec::new();
    let mut total = 0;
    for i in order {
        if !driving.is_empty() && total + df[i] > CANDIDATES {
            break;
        }
        total += df[i];
        driving.push(i);
    }
    Some((w, driving))
}

/// `ts_rank`'s weights of D, C, B, A (the tie-break): the text is B, the
/// tool and file A.
const WEIGHTS: &str = "{0.1, 0.2, 0.4, 1.0}";

fn db(what: &str, e: tokio_postgres::Error) -> RecallError {
    RecallError::Index(format!(
        "postgres {what}: {}",
        crate::db::postgres_detail(&e)
    ))
}

/// A PostgreSQL recall index.
pub(super) struct PgIndex {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for PgIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgIndex")
            .field("url", &self.inner.label)
            .finish_non_exhaustive()
    }
}

struct Inner {
    config: crate::db::Postgres,
    /// The URL with its password masked: the only form that is shown.
    label: String,
    /// `None` only while dropping.
    rt: Option<tokio::runtime::Runtime>,
    conn: Mutex<Option<Arc<Conn>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Dropping a runtime inside another one's context panics; this
        // index may well be dropped there.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// A connection and its prepared statements.
struct Conn {
    client: Client,
    known: Statement,
    add: Statement,
    stats: Statement,
    search: Statement,
    fallback: Statement,
    entry: Statement,
    count: Statement,
}

// Per term: how many of the session's entries hold it (at most
// `$4`), and how many entries the session has (kept by the inserts). The session is
// matched by its lexeme only, in the GIN index: a condition on the
// `session` column lets the planner add its B-tree to every term's
// scan (1 ms each over 10,000 entries), or, with stale statistics,
// filter the session's rows one by one (hundreds of ms). Counts
// are not an answer: the column is checked where rows are returned.
const STATS_SQL: &str =
    "SELECT coalesce((SELECT entries FROM compact_recall_sessions WHERE session = $1), 0),
                    array(SELECT (SELECT count(*) FROM (
                                      SELECT 1 FROM compact_recall_entries x
                                      WHERE numnode(u.q) > 0
                                        AND x.doc @@ (u.q && $3::text::tsquery)
                                      LIMIT $4) c)
                          FROM (SELECT a.i, to_tsquery('english', a.t) AS q
                                FROM unnest($2::text[]) WITH ORDINALITY AS a(t, i)) u
                          ORDER BY u.i),
                    (SELECT coalesce(bool_and(numnode(to_tsquery('english', t)) = 0), true)
                     FROM unnest($2::text[]) AS t)";

// The entries holding a driving term ($5, at most $8 of them), each
// detoasted once (`|| ''`), scored by the terms' weights ($2, $6;
// half again for a term in the tool or file, $9), the frequency
// rank of all the words ($7) breaking ties. The terms are parsed
// once (`MATERIALIZED`: inlined, each candidate parsed them all
// again, half the query's time). The session's lexeme
// selects its rows in the GIN index; the column is checked on the
// rows returned (a 64-bit hash is no isolation).
fn search_sql() -> String {
    format!(
        "WITH terms AS MATERIALIZED (
                 SELECT to_tsquery('english', t.q) AS q, to_tsquery('english', t.qa) AS qa, t.w
                 FROM unnest($2::text[], $9::text[], $6::float8[]) AS t(q, qa, w)
             ), cand AS MATERIALIZED (
                 SELECT x.id, split_part(x.rid, '.', 1) AS entry, x.doc || ''::tsvector AS d
                 FROM compact_recall_entries x, (SELECT to_tsquery('english', $5) AS q) dq
                 WHERE numnode(dq.q) > 0
                   AND x.doc @@ (dq.q && $3::text::tsquery)
                 LIMIT $8
             )
             SELECT split_part(e.rid, '.', 1), r.score, e.text,
                    (SELECT tsvector_to_array(to_tsvector('english', $10))),
                    e.chars, e.step, e.turn, e.kind, e.role, e.tool, e.call_id, e.file
             FROM (SELECT b.id, b.score
                   FROM (SELECT DISTINCT ON (c.entry) c.id,
                                (SELECT coalesce(sum(t.w * ((c.d @@ t.q)::int + 0.5 * (c.d @@ t.qa)::int)), 0)
                                 FROM terms t WHERE t.w > 0)
                                + ts_rank('{WEIGHTS}', c.d, to_tsquery('english', $7), 1) AS score
                         FROM cand c
                         ORDER BY c.entry, score DESC, c.id) b
                   ORDER BY b.score DESC, b.id
                   LIMIT $4) r
             JOIN compact_recall_entries e ON e.id = r.id
             WHERE e.session = $1
             ORDER BY r.score DESC, r.id"
    )
}

// A query of stop words only: its words ($2, each `\mword\M`) as
// whole words in the latest $4 entries (their rows only: pieces'
// ids hold a `.`), by how many each holds.
const FALLBACK_SQL: &str = "SELECT s.rid, s.score, s.text, $5::text[],
                    s.chars, s.step, s.turn, s.kind, s.role, s.tool, s.call_id, s.file
             FROM (SELECT e.*, (SELECT count(*) FROM unnest($2::text[]) AS p(re)
                                WHERE e.text ~* p.re)::float8 AS score
                   FROM (SELECT * FROM compact_recall_entries
                         WHERE session = $1 AND strpos(rid, '.') = 0
                         ORDER BY id DESC LIMIT $4) e) s
             WHERE s.score > 0
             ORDER BY s.score DESC, s.id DESC
             LIMIT $3";

impl Conn {
    async fn prepare(client: Client) -> Result<Self, tokio_postgres::Error> {
        // Every statement here has an index to use (the GIN index for the
        // words, the B-tree for ids and counts), and a sequential scan is
        // never the better plan for one session's rows; but right after an
        // index grew fast, before autovacuum's ANALYZE, the planner picks
        // it (160 ms instead of 5 over 23,000 entries). This connection
        // is the index's own: the setting touches nothing else.
        client.batch_execute("SET enable_seqscan = off").await?;
        let search = search_sql();
        let (known, add, stats, search, fallback, entry, count) = tokio::try_join!(
            client.prepare(
                "SELECT rid FROM compact_recall_entries WHERE session = $1 AND rid = ANY($2::text[])"
            ),
            // The entries, and the session's count of them (what a query's
            // weights are computed against: counting the session's rows
            // reads every heap page not yet vacuumed, 20 ms over 10,000).
            client.prepare(
                "WITH ins AS (
                 INSERT INTO compact_recall_entries
                 (session, rid, step, turn, kind, role, tool, call_id, file, chars, text, doc)
                 SELECT $1, t.rid, $2, t.turn, t.kind, t.role, t.tool, t.call_id, t.file, t.chars, t.text,
                        array_to_tsvector(ARRAY[$3::text])
                        || setweight(to_tsvector('english', t.label), 'A')
                        || setweight(to_tsvector('english', t.words), 'B')
                 FROM unnest($4::text[], $5::int4[], $6::text[], $7::text[], $8::text[],
                             $9::text[], $10::text[], $11::int4[], $12::text[], $13::text[], $14::text[])
                      AS t(rid, turn, kind, role, tool, call_id, file, chars, text, label, words)
                 ON CONFLICT (session, rid) DO NOTHING
                 RETURNING strpos(rid, '.') = 0 AS entry
                 ), n AS (SELECT count(*) FILTER (WHERE entry) AS c FROM ins),
                 up AS (
                 INSERT INTO compact_recall_sessions (session, entries)
                 SELECT $1, c FROM n WHERE c > 0
                 ON CONFLICT (session) DO UPDATE
                     SET entries = compact_recall_sessions.entries + excluded.entries
                 )
                 SELECT c FROM n"
            ),
            client.prepare(STATS_SQL),
            client.prepare(&search),
            client.prepare(FALLBACK_SQL),
            client.prepare(
                "SELECT text, step, turn, kind, role, tool, call_id, file
                 FROM compact_recall_entries WHERE session = $1 AND rid = $2"
            ),
            client.prepare(
                "SELECT count(*) FROM compact_recall_entries WHERE session = $1 AND strpos(rid, '.') = 0"
            ),
        )?;
        Ok(Conn {
            client,
            known,
            add,
            stats,
            search,
            fallback,
            entry,
            count,
        })
    }
}

impl PgIndex {
    /// Connects to `url`, creating the tables if they are missing and
    /// checking the schema version; returns the index and its secret.
    pub(super) fn connect(url: &str) -> Result<(Self, Vec<u8>), RecallError> {
        let (config, label) = crate::db::postgres_config(url).map_err(RecallError::Index)?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("compact-recall-pg")
            .enable_all()
            .build()
            .map_err(|e| RecallError::Index(format!("postgres recall index runtime: {e}")))?;
        let index = PgIndex {
            inner: Arc::new(Inner {
                config,
                label,
                rt: Some(rt),
                conn: Mutex::new(None),
            }),
        };
        let secret = index.run(|inner| async move { inner.setup().await })?;
        Ok((index, secret))
    }

    /// Runs `f` on the index's runtime and waits for it (at most
    /// [`CALL_TIMEOUT`]).
    fn run<T, F, Fut>(&self, f: F) -> Result<T, RecallError>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Inner>) -> Fut,
        Fut: Future<Output = Result<T, RecallError>> + Send + 'static,
    {
        let rt = self
            .inner
            .rt
            .as_ref()
            .ok_or_else(|| RecallError::Index("postgres recall index is closed".into()))?;
        let fut = f(self.inner.clone());
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        rt.spawn(async move {
            let result = match tokio::time::timeout(CALL_TIMEOUT, fut).await {
                Ok(result) => result,
                Err(_) => Err(RecallError::Index(format!(
                    "postgres recall index: no answer within {}s",
                    CALL_TIMEOUT.as_secs()
                ))),
            };
            let _ = tx.send(result);
        });
        rx.recv()
            .map_err(|_| RecallError::Index("postgres recall index: its task was lost".into()))?
    }

    pub(super) fn known(
        &self,
        session: &str,
        ids: &[&str],
    ) -> Result<HashSet<String>, RecallError> {
        let session = session.to_owned();
        let ids: Vec<String> = ids.iter().map(|s| (*s).to_owned()).collect();
        self.run(|inner| async move {
            let conn = inner.conn().await?;
            let rows = conn
                .client
                .query(&conn.known, &[&session, &ids])
                .await
                .map_err(|e| db("reading known ids", e))?;
            rows.iter()
                .map(|r| {
                    r.try_get::<_, String>(0)
                        .map_err(|e| db("reading known ids", e))
                })
                .collect()
        })
    }

    /// Adds `entries` of compaction `step` to `session`'s index, in one
    /// statement; an id the session has already keeps its first entry.
    /// Returns how many were new.
    pub(super) fn add(
        &self,
        session: &str,
        step: u32,
        entries: &[Indexed<'_>],
    ) -> Result<usize, RecallError> {
        let n = entries.len();
        let mut cols = Columns::with_capacity(n);
        for x in entries {
            let e = x.entry;
            let chars = i32::try_from(x.text.chars().count()).unwrap_or(i32::MAX);
            let label = [x.tool.as_deref(), x.file.as_deref()]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" ");
            let label = normalized(&label);
            // The entry's row has the whole text; a further piece's row its
            // own, for the excerpt of a hit there. Each row has the tool and
            // file, so that they weigh wherever the words are found.
            for (k, piece) in pieces(&x.text).into_iter().enumerate() {
                let (rid, text) = if k == 0 {
                    (e.id.clone(), x.text.clone())
                } else {
                    (format!("{}.{k}", e.id), piece.to_owned())
                };
                cols.rid.push(rid);
                cols.turn.push(i32::try_from(e.turn).unwrap_or(i32::MAX));
                cols.kind.push(e.kind.to_owned());
                cols.role.push(e.role.to_owned());
                cols.tool.push(x.tool.clone());
                cols.call_id.push(e.call_id.clone());
                cols.file.push(x.file.clone());
                cols.chars.push(chars);
                cols.label.push(label.clone());
                cols.words.push(normalized(piece));
                cols.text.push(text);
            }
        }
        let session = session.to_owned();
        let sid = session_token(&session);
        let step = i32::try_from(step).unwrap_or(i32::MAX);
        self.run(|inner| async move {
            let conn = inner.conn().await?;
            let c = &cols;
            let row = conn
                .client
                .query_one(
                    &conn.add,
                    &[
                        &session, &step, &sid, &c.rid, &c.turn, &c.kind, &c.role, &c.tool,
                        &c.call_id, &c.file, &c.chars, &c.text, &c.label, &c.words,
                    ],
                )
                .await
                .map_err(|e| db("indexing", e))?;
            let added: i64 = row.try_get(0).map_err(|e| db("indexing", e))?;
            Ok(usize::try_from(added).unwrap_or_default())
        })
    }

    /// The best `limit` entries of `session` for the words of `text`,
    /// ranked as BM25 would weigh the words (see [`weights`]), in two
    /// round trips: the words' frequencies in the session, then the
    /// entries holding the rarer ones, scored.
    pub(super) fn search(
        &self,
        session: &str,
        text: &str,
        limit: usize,
    ) -> Result<Vec<RecallHit>, RecallError> {
        let Some(q) = ts_query(text) else {
            return Ok(Vec::new());
        };
        let session = session.to_owned();
        let sid = session_token(&session);
        let limit = limit as i64;
        self.run(|inner| async move {
            let conn = inner.conn().await?;
            let row = conn
                .client
                .query_one(&conn.stats, &[&session, &q.terms, &sid, &DF_CAP])
                .await
                .map_err(|e| db("searching", e))?;
            let n: i64 = row.try_get(0).map_err(|e| db("searching", e))?;
            let df: Vec<i64> = row.try_get(1).map_err(|e| db("searching", e))?;
            let stop_words_only: bool = row.try_get(2).map_err(|e| db("searching", e))?;
            if stop_words_only {
                let patterns: Vec<String> = q.words.iter().map(|w| format!("\\m{w}\\M")).collect();
                let rows = conn
                    .client
                    .query(
                        &conn.fallback,
                        &[&session, &patterns, &limit, &FALLBACK_ENTRIES, &q.words],
                    )
                    .await
                    .map_err(|e| db("searching", e))?;
                return rows.iter().map(hit).collect();
            }
            let Some((w, driving)) = weights(n, &df) else {
                return Ok(Vec::new());
            };
            let rows = conn
                .client
                .query(
                    &conn.search,
                    &[
                        &session,
                        &q.terms,
                        &sid,
                        &limit,
                        &q.any(driving),
                        &w,
                        &q.any(0..q.terms.len()),
                        &CANDIDATES,
                        &q.weighted_a(),
                        &q.plain,
                    ],
                )
                .await
                .map_err(|e| db("searching", e))?;
            rows.iter().map(hit).collect()
        })
    }

    /// Entry `id` of `session`: its whole text and origin.
    pub(super) fn entry(
        &self,
        session: &str,
        id: &str,
    ) -> Result<Option<(String, Origin)>, RecallError> {
        let (session, id) = (session.to_owned(), id.to_owned());
        self.run(|inner| async move {
            let conn = inner.conn().await?;
            let row = conn
                .client
                .query_opt(&conn.entry, &[&session, &id])
                .await
                .map_err(|e| db("reading an entry", e))?;
            row.map(|r| {
                let get = |e| db("reading an entry", e);
                Ok((r.try_get::<_, String>(0).map_err(get)?, origin(&r, 1)?))
            })
            .transpose()
        })
    }

    /// How many entries `session` has.
    pub(super) fn count(&self, session: &str) -> Result<usize, RecallError> {
        let session = session.to_owned();
        self.run(|inner| async move {
            let conn = inner.conn().await?;
            let row = conn
                .client
                .query_one(&conn.count, &[&session])
                .await
                .map_err(|e| db("counting", e))?;
            let n: i64 = row.try_get(0).map_err(|e| db("counting", e))?;
            Ok(usize::try_from(n).unwrap_or_default())
        })
    }

    /// The schema version the database records.
    pub(super) fn version(&self) -> Result<i64, RecallError> {
        self.run(|inner| async move {
            let conn = inner.conn().await?;
            let row = conn
                .client
                .query_one("SELECT version FROM compact_recall_meta WHERE id = 1", &[])
                .await
                .map_err(|e| db("reading the version", e))?;
            let v: i32 = row.try_get(0).map_err(|e| db("reading the version", e))?;
            Ok(i64::from(v))
        })
    }
}

/// The columns of an insert, one array each.
struct Columns {
    rid: Vec<String>,
    turn: Vec<i32>,
    kind: Vec<String>,
    role: Vec<String>,
    tool: Vec<Option<String>>,
    call_id: Vec<Option<String>>,
    file: Vec<Option<String>>,
    chars: Vec<i32>,
    text: Vec<String>,
    label: Vec<String>,
    words: Vec<String>,
}

impl Columns {
    fn with_capacity(n: usize) -> Self {
        Columns {
            rid: Vec::with_capacity(n),
            turn: Vec::with_capacity(n),
            kind: Vec::with_capacity(n),
            role: Vec::with_capacity(n),
            tool: Vec::with_capacity(n),
            call_id: Vec::with_capacity(n),
            file: Vec::with_capacity(n),
            chars: Vec::with_capacity(n),
            text: Vec::with_capacity(n),
            label: Vec::with_capacity(n),
            words: Vec::with_capacity(n),
        }
    }
}

impl Inner {
    /// The open connection, or a new one (after the server or the network
    /// dropped the last), its statements prepared.
    async fn conn(&self) -> Result<Arc<Conn>, RecallError> {
        if let Some(conn) = self
            .conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .filter(|c| !c.client.is_closed())
        {
            return Ok(conn.clone());
        }
        let client = crate::db::postgres_connect(&self.config, &self.label)
            .await
            .map_err(RecallError::Index)?;
        let conn = Arc::new(
            Conn::prepare(client)
                .await
                .map_err(|e| db("preparing statements", e))?,
        );
        *self
            .conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(conn.clone());
        Ok(conn)
    }

    /// Creates the tables (once, under the advisory lock) unless the
    /// database holds a newer schema; returns the secret.
    async fn setup(&self) -> Result<Vec<u8>, RecallError> {
        let client = crate::db::postgres_connect(&self.config, &self.label)
            .await
            .map_err(RecallError::Index)?;
        let step = |what: &'static str| move |e| db(what, e);
        client
            .batch_execute("BEGIN")
            .await
            .map_err(step("schema"))?;
        client
            .execute(
                "SELECT pg_advisory_xact_lock($1, $2)",
                &[&SCHEMA_LOCK.0, &SCHEMA_LOCK.1],
            )
            .await
            .map_err(step("schema"))?;
        client
            .batch_execute(META)
            .await
            .map_err(step("creating the recall tables"))?;
        client
            .execute(
                "INSERT INTO compact_recall_meta (id, secret, version)
                 VALUES (1, decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'), $1)
                 ON CONFLICT (id) DO NOTHING",
                &[&POSTGRES_SCHEMA_VERSION],
            )
            .await
            .map_err(step("creating the recall tables"))?;
        let row = client
            .query_one(
                "SELECT secret, version FROM compact_recall_meta WHERE id = 1",
                &[],
            )
            .await
            .map_err(step("reading the recall index's version"))?;
        let secret: Vec<u8> = row.try_get(0).map_err(step("reading the recall secret"))?;
        let version: i32 = row
            .try_get(1)
            .map_err(step("reading the recall index's version"))?;
        if version > POSTGRES_SCHEMA_VERSION {
            // Nothing created: the transaction is dropped with the client.
            return Err(RecallError::Index(format!(
                "postgres {} has recall index schema version {version}, newer than this build \
                 reads ({POSTGRES_SCHEMA_VERSION}): upgrade compact on every replica",
                self.label
            )));
        }
        if version < 1 {
            return Err(RecallError::Index(format!(
                "postgres {} has recall index schema version {version}, which no build wrote",
                self.label
            )));
        }
        client
            .batch_execute(SCHEMA)
            .await
            .map_err(step("creating the recall tables"))?;
        // Version 1's rows are version 2's (an entry's row; the pieces of a
        // long entry written from now on are rows of their own).
        client
            .execute(
                "UPDATE compact_recall_meta SET version = $1 WHERE version < $1",
                &[&POSTGRES_SCHEMA_VERSION],
            )
            .await
            .map_err(step("recording the recall index's version"))?;
        client
            .batch_execute("COMMIT")
            .await
            .map_err(step("schema"))?;
        Ok(secret)
    }
}

fn hit(r: &Row) -> Result<RecallHit, RecallError> {
    let get = |e| db("reading a hit", e);
    let text: String = r.try_get(2).map_err(get)?;
    let stems: Vec<String> = r
        .try_get::<_, Option<Vec<String>>>(3)
        .map_err(get)?
        .unwrap_or_default();
    Ok(RecallHit {
        id: r.try_get(0).map_err(get)?,
        score: r.try_get(1).map_err(get)?,
        excerpt: excerpt(&text, &stems),
        chars: usize::try_from(r.try_get::<_, i32>(4).map_err(get)?).unwrap_or_default(),
        origin: origin(r, 5)?,
    })
}

fn origin(r: &Row, at: usize) -> Result<Origin, RecallError> {
    let get = |e| db("reading an entry", e);
    let int = |i: usize| -> Result<u32, RecallError> {
        Ok(u32::try_from(r.try_get::<_, i32>(i).map_err(get)?).unwrap_or_default())
    };
    Ok(Origin {
        step: int(at)?,
        turn: int(at + 1)?,
        kind: r.try_get(at + 2).map_err(get)?,
        role: r.try_get(at + 3).map_err(get)?,
        tool: r.try_get(at + 4).map_err(get)?,
        call_id: r.try_get(at + 5).map_err(get)?,
        file: r.try_get(at + 6).map_err(get)?,
    })
}

#[cfg(test)]
mod tests {
    use super::{CANDIDATES, LONGEST_WORD, PIECE_CHARS, PIECE_WORDS, pieces, weights};

    #[test]
    fn pieces_cover_the_text_and_cut_where_a_word_starts() {
        assert_eq!(pieces("short text"), ["short text"]);
        assert_eq!(pieces(""), [""]);
        // Many short words: cut by words.
        let text: String = (0..40_000).map(|i| format!("w{i}, ")).collect();
        let ps = pieces(&text);
        assert_eq!(ps.concat(), text);
        assert_eq!(ps.len(), 4, "{}", ps.len());
        for p in &ps {
            let words = super::normalized(p)
                .split(' ')
                .filter(|w| !w.is_empty())
                .count();
            assert!(words <= PIECE_WORDS, "{words}");
            assert!(p.starts_with('w'), "cut inside a word: {:?}", &p[..10]);
        }
        // Few long words: cut by characters, still at word starts.
        let text: String = (0..3_000).map(|i| format!("{:0>150} ", i)).collect();
        let ps = pieces(&text);
        assert_eq!(ps.concat(), text);
        assert!(ps.len() >= 3);
        assert!(ps.iter().all(|p| p.chars().count() <= PIECE_CHARS + 151));
        // One word longer than any piece: cut inside it.
        let text = "x".repeat(PIECE_CHARS + 2 * LONGEST_WORD);
        let ps = pieces(&text);
        assert_eq!(ps.concat(), text);
        assert_eq!(ps.len(), 2);
    }

    #[test]
    fn rarer_terms_weigh_more_and_choose_the_candidates() {
        let (w, driving) = weights(10_000, &[400, 3, 0, 40]).expect("some term is held");
        assert!(w[1] > w[3] && w[3] > w[0] && w[0] > 0.0, "{w:?}");
        assert_eq!(w[2], 0.0);
        assert_eq!(driving, [1, 3]);
        // The rarest term drives even when it alone is common.
        let (_, driving) = weights(10_000, &[CANDIDATES, CANDIDATES]).expect("held");
        assert_eq!(driving, [0]);
        assert_eq!(weights(10, &[0, 0]), None);
        // A count below a word's is taken as the word's: weights stay > 0.
        let (w, _) = weights(0, &[3, 1]).expect("held");
        assert!(w.iter().all(|x| x.is_finite() && *x > 0.0), "{w:?}");
    }
}
