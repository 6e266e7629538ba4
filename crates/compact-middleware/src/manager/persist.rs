//! Loading and saving a [`Session`] through the manager's
//! [`SessionStore`](crate::state::SessionStore): the session's lock is held
//! in the store for the whole preflight, the record is read at the start
//! (skipped when this process already has the stored version) and written
//! at the end. A manager without a store keeps sessions in its own map only.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::archive::SessionId;
use crate::state::{
    BreakerRecord, Fetched, LastCallRecord, MarkRecord, RECORD_FORMAT, SessionGuard, SessionRecord,
    StateError, SummaryRecord,
};

use super::session::{Breaker, LastCall, OurMark, Secrets, Session, SummaryState};
use super::status::{LastOutcome, LastReport, Layers};
use super::{CompactError, CompactManager};

impl From<StateError> for CompactError {
    fn from(e: StateError) -> Self {
        CompactError::State(e.to_string())
    }
}

/// Milliseconds since the Unix epoch of a wall-clock time.
pub(super) fn system_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn from_ms(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

/// Lets a session go without writing it (a call that ended before its
/// steps): a failure only means the store's lock ends with the connection.
pub(super) async fn release_quietly(guard: Option<Box<dyn SessionGuard>>) {
    if let Some(guard) = guard
        && let Err(e) = guard.release().await
    {
        tracing::warn!(error = %e, "session store: releasing a session failed");
    }
}

impl CompactManager {
    /// `memory` when sessions live in this manager only, else the store's kind.
    pub(super) fn state_store_kind(&self) -> &'static str {
        self.inner
            .shared
            .store
            .as_ref()
            .map_or("memory", |s| s.kind())
    }

    /// Holds the session in the store and brings `session` up to the stored
    /// record. `None` without a store.
    pub(super) async fn load_session(
        &self,
        id: &SessionId,
        session: &mut Session,
    ) -> Result<Option<Box<dyn SessionGuard>>, CompactError> {
        let Some(store) = &self.inner.shared.store else {
            return Ok(None);
        };
        let mut guard = store.lock(id).await?;
        match guard.load(session.etag).await? {
            Fetched::Unchanged => {}
            Fetched::Absent => {
                // Deleted elsewhere, or never stored: start over.
                if session.etag.is_some() || session.is_known() {
                    *session = Session::new(id.clone());
                }
            }
            Fetched::Record(etag, record) => {
                *session = from_record(id.clone(), *record);
                session.etag = Some(etag);
            }
        }
        Ok(Some(guard))
    }

    /// Writes `session` and lets the store's lock go. On failure the session
    /// is marked as not stored, so the next call reloads what the store has.
    pub(super) async fn save_session(
        &self,
        mut guard: Box<dyn SessionGuard>,
        session: &mut Session,
    ) -> Result<(), CompactError> {
        // The ledger moves into the record and back rather than being
        // cloned: for a long session it is most of the record.
        let ledger = std::mem::take(&mut session.ledger);
        let mut record = to_record(session, ledger);
        let saved = match guard.save(&record).await {
            Ok(etag) => guard.release().await.map(|()| etag),
            Err(e) => Err(e),
        };
        session.ledger = std::mem::take(&mut record.ledger);
        match saved {
            Ok(etag) => {
                session.etag = Some(etag);
                Ok(())
            }
            Err(e) => {
                session.etag = None;
                tracing::error!(session = %session.id(), error = %e, "session state not saved");
                Err(e.into())
            }
        }
    }

    /// Drops a session this process holds nothing about (a status read or
    /// a delete of an unknown id must not grow the map).
    pub(super) fn forget_if_unknown(
        &self,
        id: &SessionId,
        handle: &Arc<tokio::sync::Mutex<Session>>,
    ) {
        let mut map = self.sessions();
        let unknown = handle.try_lock().is_ok_and(|s| !s.is_known());
        if unknown && map.get(id).is_some_and(|h| Arc::ptr_eq(h, handle)) {
            map.remove(id);
        }
    }

    /// Forgets a session here and in the session store: its summary chain,
    /// its last call, its conversation layer. Its archive stays. True when
    /// something was remembered.
    pub async fn delete_session(&self, session_id: &str) -> Result<bool, CompactError> {
        let id = SessionId::parse(session_id)
            .map_err(|e| CompactError::InvalidSession(e.to_string()))?;
        let handle = self.session_handle(id.clone());
        let mut session = handle.lock().await;
        let mut existed = session.is_known();
        if let Some(store) = &self.inner.shared.store {
            let mut guard = store.lock(&id).await?;
            existed |= guard.delete().await?;
            guard.release().await?;
        }
        *session = Session::new(id.clone());
        drop(session);
        self.forget_if_unknown(&id, &handle);
        Ok(existed)
    }

    /// Replaces (`None`: removes) the conversation strategy layer of a
    /// session, persisted with the rest of its state. The layer is checked
    /// against the manager's configuration first.
    pub async fn set_conversation_layer(
        &self,
        session_id: &str,
        layer: Option<serde_json::Value>,
    ) -> Result<(), CompactError> {
        let id = SessionId::parse(session_id)
            .map_err(|e| CompactError::InvalidSession(e.to_string()))?;
        if let Some(layer) = &layer {
            crate::strategy::check_layer(&crate::strategy::from_seed_fields(layer))
                .map_err(|e| CompactError::Config(e.to_string()))?;
            crate::strategy::resolve_layers(self.config(), None, Some(layer), None)
                .map_err(|e| CompactError::Config(e.to_string()))?;
        }
        let handle = self.session_handle(id.clone());
        let mut session = handle.lock().await;
        let guard = self.load_session(&id, &mut session).await?;
        session.conversation = layer;
        if let Some(guard) = guard {
            self.save_session(guard, &mut session).await?;
        }
        Ok(())
    }

    /// The conversation strategy layer of a session, if one was set.
    pub async fn conversation_layer(
        &self,
        session_id: &str,
    ) -> Result<Option<serde_json::Value>, CompactError> {
        let id = SessionId::parse(session_id)
            .map_err(|e| CompactError::InvalidSession(e.to_string()))?;
        let handle = self.session_handle(id.clone());
        let mut session = handle.lock().await;
        if let Some(guard) = self.load_session(&id, &mut session).await? {
            guard.release().await?;
        }
        let layer = session.conversation.clone();
        drop(session);
        self.forget_if_unknown(&id, &handle);
        Ok(layer)
    }
}

/// The record a store keeps of `s`, whose ledger is `ledger`.
pub(super) fn to_record(s: &Session, ledger: crate::summarize::FactLedger) -> SessionRecord {
    SessionRecord {
        format: RECORD_FORMAT,
        summary: s.summary.as_ref().map(|sum| SummaryRecord {
            version: sum.version,
            body: sum.body.clone(),
            hashes: sum.hashes.to_vec(),
        }),
        last: LastCallRecord {
            raw: s.last.raw.clone(),
            out: s.last.out.clone(),
            out_hashes: s.last.out_hashes.clone(),
            out_provider_hashes: s.last.out_provider_hashes.clone(),
            marks: s
                .last
                .marks
                .iter()
                .map(|o| MarkRecord {
                    index: o.index,
                    hashes: o.hashes.to_vec(),
                    block: o.mark.block,
                    from_string: o.mark.from_string,
                })
                .collect(),
        },
        step: s.step,
        breaker: BreakerRecord {
            consecutive_failures: s.breaker.consecutive_failures,
            open_until_ms: s.breaker.open_until.map(system_ms),
        },
        trace_sent: s.trace_sent,
        memory_key: s.memory_key.clone(),
        cross_session_read: s.cross_session.is_some(),
        cross_session: s.cross_session.clone().flatten(),
        secrets: s.secrets.fragments(),
        conversation: s.conversation.clone(),
        last_report: s.last_report.as_ref().map(|l| l.report.to_value()),
        layers: s
            .last_report
            .as_ref()
            .and_then(|l| serde_json::to_value(l.layers).ok()),
        ledger,
        estimate_error: s.estimate_error,
        pace: s.pace,
        updated_at_ms: crate::state::now_ms(),
    }
}

/// The session a stored record describes.
pub(super) fn from_record(id: SessionId, r: SessionRecord) -> Session {
    let mut s = Session::new(id);
    s.summary = r.summary.and_then(|sum| {
        let hashes: [u128; 2] = sum.hashes.try_into().ok()?;
        Some(SummaryState {
            version: sum.version,
            body: sum.body,
            hashes,
        })
    });
    s.last = LastCall {
        raw: r.last.raw,
        out: r.last.out,
        out_hashes: r.last.out_hashes,
        out_provider_hashes: r.last.out_provider_hashes,
        marks: r
            .last
            .marks
            .into_iter()
            .filter_map(|m| {
                Some(OurMark {
                    index: m.index,
                    hashes: m.hashes.try_into().ok()?,
                    mark: crate::model::BreakpointMark {
                        block: m.block,
                        from_string: m.from_string,
                    },
                })
            })
            .collect(),
    };
    s.step = r.step;
    s.breaker = Breaker {
        consecutive_failures: r.breaker.consecutive_failures,
        open_until: r.breaker.open_until_ms.map(from_ms),
    };
    s.trace_sent = r.trace_sent;
    s.memory_key = r.memory_key;
    s.cross_session = r.cross_session_read.then_some(r.cross_session);
    s.secrets = Secrets::from_fragments(r.secrets);
    s.conversation = r.conversation;
    s.ledger = r.ledger;
    s.estimate_error = r.estimate_error;
    s.pace = r.pace;
    s.last_report = r.last_report.map(|report| LastOutcome {
        report: LastReport::Stored(report),
        layers: r
            .layers
            .and_then(|l| serde_json::from_value::<Layers>(l).ok())
            .unwrap_or_default(),
    });
    s
}
