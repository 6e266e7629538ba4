//! The manager's side of recall (issue 25, `crate::recall`): where the
//! index lives, indexing what a compaction archives (redacted first), and
//! [`CompactManager::recall`].

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::session::Session;
use super::{Builder, CompactError, CompactManager};
use crate::config::{Config, StateStoreKind};
use crate::events::{SpanBuilder, names, payload};
use crate::model::Message;
use crate::recall::{Location, RecallAnswer, RecallError, RecallIndex, RecallKey, RecallQuery};
use crate::redact::LiteralScrub;

/// Index writes still running, per session (`Shared::recall_pending`).
type PendingWrites = HashMap<String, Vec<tokio::task::JoinHandle<()>>>;

/// One compaction's index write, queued on the preflight's trail and
/// started when the preflight is done with the CPU.
pub(super) struct RecallWrite(Box<dyn FnOnce() + Send>);

impl Builder {
    /// Uses `index` as the recall index instead of the one `recall.path`
    /// (or the state store) selects; recall is on whatever
    /// `recall.enabled` says.
    pub fn recall_index(mut self, index: Arc<RecallIndex>) -> Self {
        self.recall = Some(index);
        self
    }
}

/// Where the index lives when `recall.path` is not set: beside a SQLite
/// session store (so a restarted process or `compact recall` finds it),
/// else in this process's memory, like the sessions it indexes.
pub fn default_path(config: &Config) -> String {
    if let Some(p) = &config.recall.path {
        return p.clone();
    }
    match config.state.store {
        StateStoreKind::Sqlite if config.state.path != ":memory:" => Path::new(&config.state.path)
            .with_file_name("recall.sqlite3")
            .display()
            .to_string(),
        _ => ":memory:".to_owned(),
    }
}

/// Where the index lives: `recall.path` (a file, or a `postgres://` URL),
/// else the session store's PostgreSQL database with `state.store:
/// postgres` (so every replica answers, with the same ids), else
/// [`default_path`].
pub fn location(config: &Config) -> Location {
    if let Some(p) = &config.recall.path {
        return Location::parse(p);
    }
    match config.state.postgres_url() {
        Some(url) if config.state.store == StateStoreKind::Postgres => Location::Postgres(url),
        _ => Location::File(default_path(config)),
    }
}

/// The index `config` asks for, if any. A PostgreSQL index is shared per
/// URL in a process (one connection, one runtime), like the memory store.
pub(super) fn build(
    config: &Config,
    given: Option<Arc<RecallIndex>>,
) -> Result<Option<Arc<RecallIndex>>, CompactError> {
    if let Some(i) = given {
        return Ok(Some(i));
    }
    if !config.recall.enabled {
        return Ok(None);
    }
    let at = location(config);
    let failed = |e: RecallError| {
        let key = if config.recall.path.is_some() {
            "recall.path"
        } else {
            "recall index"
        };
        CompactError::Config(format!("{key} {}: {e}", at.label()))
    };
    match &at {
        Location::File(path) => RecallIndex::open(path).map(Arc::new).map_err(failed),
        Location::Postgres(url) => shared_postgres(url).map_err(failed),
    }
    .map(Some)
}

/// The PostgreSQL index of `url` this process already has open, or a new one.
fn shared_postgres(url: &str) -> Result<Arc<RecallIndex>, RecallError> {
    static OPEN: Mutex<Option<HashMap<String, Weak<RecallIndex>>>> = Mutex::new(None);
    let mut open = OPEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let open = open.get_or_insert_with(HashMap::new);
    open.retain(|_, index| index.strong_count() > 0);
    if let Some(index) = open.get(url).and_then(Weak::upgrade) {
        return Ok(index);
    }
    let index = Arc::new(RecallIndex::connect(url)?);
    open.insert(url.to_owned(), Arc::downgrade(&index));
    Ok(index)
}

fn recall_error(e: RecallError) -> CompactError {
    match e {
        RecallError::Invalid(m) => CompactError::InvalidInput(m),
        RecallError::Index(m) => CompactError::State(format!("recall index: {m}")),
    }
}

impl CompactManager {
    /// The recall index, when recall is on.
    pub fn recall_index(&self) -> Option<&Arc<RecallIndex>> {
        self.inner.shared.recall.as_ref()
    }

    /// Whether preflights add the `compact_recall` tool and the summary's
    /// recall line (`recall.advertise`, with an index).
    pub(super) fn advertises_recall(&self) -> bool {
        self.inner.config.recall.advertise && self.recall_index().is_some()
    }

    /// The recall key of `session` (placeholders' ids), when recall is on.
    pub(super) fn recall_key(&self, session: &Session) -> Option<RecallKey> {
        self.recall_index().map(|i| i.key(session.id().as_str()))
    }

    /// The index write of what compaction `step` archived of `transcript`,
    /// redacted as the archive is (`redact` then `scrub`, the session's
    /// learned secrets); `None` when recall is off. Nothing runs yet: the
    /// preflight starts it once its own work is done
    /// ([`CompactManager::start_recall_writes`]), so the write (finding
    /// what is new, a hash lookup per message the session indexed before;
    /// the redaction; the SQL) never takes CPU from the preflight that
    /// queued it. The messages are shared, not copied.
    pub(super) fn recall_write(
        &self,
        session: &Session,
        step: u32,
        transcript: &[Message],
        scrub: &LiteralScrub,
    ) -> Option<RecallWrite> {
        let index = self.recall_index()?.clone();
        let transcript = transcript.to_vec();
        let redactor = self.redactor().clone();
        let scrub = scrub.clone();
        let sid = session.id().as_str().to_owned();
        let write = move || {
            let pending = index.prepare(&sid, &transcript);
            if pending.is_empty() {
                return;
            }
            let clean = |s: &str| -> String {
                let mut v = Value::String(redactor.redact_str(s).into_owned());
                scrub.scrub_value(&mut v);
                match v {
                    Value::String(s) => s,
                    other => other.to_string(),
                }
            };
            if let Err(e) = index.write(pending, step, &clean) {
                tracing::warn!(session = %sid, error = %e, "recall index write failed; these entries are not indexed");
            }
        };
        Some(RecallWrite(Box::new(write)))
    }

    /// Starts the index writes a preflight of `session` queued, on the
    /// blocking pool, each after the session's writes still running. Never
    /// fails the preflight: a failure is logged. A recall of the session
    /// waits for them ([`CompactManager::flush_recall`]).
    pub(super) fn start_recall_writes(&self, session: &str, writes: Vec<RecallWrite>) {
        if writes.is_empty() {
            return;
        }
        let mut map = self.recall_pending();
        let list = map.entry(session.to_owned()).or_default();
        list.retain(|h| !h.is_finished());
        for RecallWrite(write) in writes {
            // One session's writes run in order, each after the last: its
            // compactions' steps are recorded in order, and what one found
            // new the next knows.
            let previous = std::mem::take(list);
            list.push(tokio::spawn(async move {
                for h in previous {
                    let _ = h.await;
                }
                if let Err(e) = tokio::task::spawn_blocking(write).await {
                    tracing::warn!(error = %e, "recall index write did not finish");
                }
            }));
        }
    }

    /// The index writes still running, by session (a poisoned lock's map
    /// as it was: a panicked writer leaves nothing half-changed in it).
    fn recall_pending(&self) -> std::sync::MutexGuard<'_, PendingWrites> {
        self.inner
            .shared
            .recall_pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Waits for the index writes of `session` (all sessions: `None`) that
    /// are still running. A recall does this itself; a process that is
    /// about to exit calls it so that nothing queued is dropped.
    pub async fn flush_recall(&self, session: Option<&str>) {
        let handles: Vec<_> = {
            let mut map = self.recall_pending();
            match session {
                Some(s) => map.remove(s).unwrap_or_default(),
                None => map.drain().flat_map(|(_, v)| v).collect(),
            }
        };
        for h in handles {
            if let Err(e) = h.await {
                tracing::warn!(error = %e, "recall index write did not finish");
            }
        }
    }

    /// Recall (issue 25): BM25-ranked excerpts of what left `session`'s
    /// context for a query, or one entry's whole text (paged) for an id.
    /// Only this session's entries answer: another session's id finds
    /// nothing. [`CompactError::Config`] when `recall.enabled` is off,
    /// [`CompactError::InvalidInput`] for a malformed query. Every recall
    /// while recall is on emits one `compact.recall` span (docs/events.md).
    pub async fn recall(
        &self,
        session: &str,
        query: RecallQuery,
    ) -> Result<RecallAnswer, CompactError> {
        let sid = crate::archive::SessionId::parse(session)
            .map_err(|e| CompactError::InvalidSession(e.to_string()))?;
        let Some(index) = self.recall_index() else {
            return Err(CompactError::Config(
                "recall is off: set recall.enabled: true".into(),
            ));
        };
        let span = SpanBuilder::start(sid.as_str(), names::RECALL).kind(names::KIND_COMPACTION);
        let started = Instant::now();
        self.flush_recall(Some(sid.as_str())).await;
        let answer = index
            .recall_async(sid.as_str(), &query)
            .await
            .map_err(recall_error);
        let latency = started.elapsed();
        self.report_recall(&sid, span, &query, &answer, latency)
            .await;
        answer
    }

    /// Emits the `compact.recall` span of one recall: the query (cut to
    /// [`EVENT_QUERY_CHARS`], redacted on the way out like every event),
    /// the ids it answered with, the latency; never the recalled text.
    async fn report_recall(
        &self,
        sid: &crate::archive::SessionId,
        span: SpanBuilder,
        query: &RecallQuery,
        answer: &Result<RecallAnswer, CompactError>,
        latency: Duration,
    ) {
        let (hits, ids, error) = match answer {
            Ok(a) => match &a.entry {
                Some(e) => (1, vec![e.id.clone()], None),
                None => (
                    a.hits.len() as u64,
                    a.hits.iter().map(|h| h.id.clone()).collect(),
                    None,
                ),
            },
            Err(e) => (0, Vec::new(), Some(e.to_string())),
        };
        let by_id = query.id.is_some() && query.query.is_none();
        let p = payload::Recall {
            mode: if by_id { "id" } else { "query" }.into(),
            query: query.query.as_deref().map(|q| cut(q, EVENT_QUERY_CHARS)),
            id: query.id.as_deref().map(|i| cut(i, EVENT_QUERY_CHARS)),
            limit: if by_id {
                None
            } else {
                query.limit.map(|l| l as u64)
            },
            hits,
            ids,
            latency_us: u64::try_from(latency.as_micros()).unwrap_or(u64::MAX),
            error,
        };
        let event = span.finish_payload(&p);
        // The session's learned secrets, when this process holds the
        // session (a recall from another process has the redactor only).
        let handle = if !self.inner.shared.dispatcher.is_enabled() {
            None
        } else {
            let map = self.sessions();
            map.get(sid).cloned()
        };
        let scrub = match handle {
            Some(h) => Some(h.lock().await.secrets.scrub().clone()),
            None => None,
        };
        self.emit_now(sid.as_str(), vec![event], scrub.as_ref());
    }
}

/// The most characters of a query (or an id) a `compact.recall` event keeps.
const EVENT_QUERY_CHARS: usize = 500;

/// `s` cut to `max` characters, `…` marking the cut.
fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_owned(),
    }
}
