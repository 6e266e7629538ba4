//! The manager's side of the archive and of redaction: archive before
//! anything is dropped (docs/design.md §5 step 7), spool what the backend refuses,
//! redact every event before any exporter and every write before any
//! adapter.
//!
//! The preflight calls [`CompactManager::archive_compaction`] when a
//! compaction changed the history, and hands its events to
//! [`CompactManager::emit`] instead of the dispatcher.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

use super::{Builder, CompactError, CompactManager};
use crate::archive::{
    ArchiveError, Delivery, FsAdapter, SessionId, Spool, SpoolItem, SpoolPayload, StorageAdapter,
    Stored,
};
use crate::config::{Config, StorageAdapterKind};
use crate::events::{Event, SpanBuilder, names, payload};
use crate::model::Message;
use crate::pipeline::NewSummary;
use crate::redact::{RedactCallback, Redactor};

use super::session::Session;
use super::trail::Trail;

/// Which storage the builder was asked for.
#[derive(Default)]
pub(super) enum StorageChoice {
    /// Whatever `storage.adapter` says (`fs`, `none`; `s3` must be given).
    #[default]
    FromConfig,
    /// An adapter the caller built (S3, custom).
    Given(Arc<dyn StorageAdapter>),
    /// No archive, whatever the config says.
    Disabled,
}

/// The builder's archive and redaction options.
#[derive(Default)]
pub(super) struct ArchiveSetup {
    storage: StorageChoice,
    callback: Option<Arc<RedactCallback>>,
    /// Where `redaction.enabled` was set, when the caller knows.
    redaction_source: Option<String>,
}

impl Builder {
    /// Archives to `adapter` instead of what `storage.adapter` selects (the
    /// way to use S3: `compact_s3::S3Adapter`). Spooling still uses
    /// `storage.spool_path`.
    pub fn storage(mut self, adapter: Arc<dyn StorageAdapter>) -> Self {
        self.archive.storage = StorageChoice::Given(adapter);
        self
    }

    /// No archive at all, whatever `storage.adapter` says (tests, tools
    /// that only estimate). Messages that leave the context are then not kept.
    pub fn without_storage(mut self) -> Self {
        self.archive.storage = StorageChoice::Disabled;
        self
    }

    /// Tells the manager where each configuration value came from, so what
    /// it reports (say, that redaction is off) names the file, variable or
    /// flag responsible.
    pub fn provenance(mut self, loaded: &crate::config::Loaded) -> Self {
        use crate::config::Source;
        self.archive.redaction_source = loaded.source_of("redaction.enabled").map(|s| match s {
            Source::Default => String::new(),
            Source::File(p) if p.as_os_str().is_empty() => " (set in the configuration)".into(),
            Source::File(p) => format!(" (set in {})", p.display()),
            Source::Env(name) => format!(" (set by the environment variable {name})"),
            Source::Flag(name) => format!(" (set by the flag {name})"),
        });
        self
    }

    /// A custom redaction step, run on every exported or archived string
    /// after the patterns.
    pub fn redaction_callback(mut self, f: Arc<RedactCallback>) -> Self {
        self.archive.callback = Some(f);
        self
    }
}

/// Redaction and archive state of one manager.
pub(super) struct ArchiveState {
    redactor: Redactor,
    archiver: Option<Archiver>,
    /// `compact.redaction_disabled` was sent.
    disabled_reported: AtomicBool,
    /// Where `redaction.enabled` came from (` (set by …)`, or empty), for
    /// that event's message.
    redaction_source: String,
}

struct Archiver {
    adapter: Arc<dyn StorageAdapter>,
    spool: Spool,
    /// One archive write sequence at a time: spool delivery and a
    /// session's writes must not interleave, and compactions are rare
    /// enough that a single lock costs nothing measurable.
    writes: tokio::sync::Mutex<()>,
    /// The spool may hold items (checked once at start, then set when we spool).
    spool_dirty: AtomicBool,
}

impl ArchiveState {
    pub(super) fn build(config: &Config, setup: ArchiveSetup) -> Result<Self, CompactError> {
        let mut redactor = Redactor::from_config(&config.redaction)
            .map_err(|e| CompactError::Config(e.to_string()))?;
        if let Some(cb) = setup.callback {
            redactor = redactor.with_callback(cb);
        }
        let adapter: Option<Arc<dyn StorageAdapter>> = match setup.storage {
            StorageChoice::Given(a) => Some(a),
            StorageChoice::Disabled => None,
            StorageChoice::FromConfig => match config.storage.adapter {
                StorageAdapterKind::Fs => Some(Arc::new(FsAdapter::new(&config.storage.path))),
                StorageAdapterKind::None => None,
                StorageAdapterKind::S3 => {
                    return Err(CompactError::Config(
                        "storage.adapter is s3: build the adapter with compact_s3::S3Adapter and pass it to Builder::storage (the compact binary does this)".into(),
                    ));
                }
            },
        };
        Ok(ArchiveState {
            redactor,
            archiver: adapter.map(|adapter| Archiver {
                adapter,
                spool: Spool::new(&config.storage.spool_path),
                writes: tokio::sync::Mutex::new(()),
                spool_dirty: AtomicBool::new(true),
            }),
            disabled_reported: AtomicBool::new(false),
            redaction_source: setup.redaction_source.unwrap_or_default(),
        })
    }
}

/// What one write sequence did.
#[derive(Default)]
struct Outcome {
    stored: Vec<Stored>,
    spooled: Vec<String>,
    errors: Vec<ArchiveError>,
    delivered: Vec<(String, Stored)>,
}

impl CompactManager {
    /// The storage adapter, if archiving is on.
    pub fn storage_adapter(&self) -> Option<&Arc<dyn StorageAdapter>> {
        self.inner
            .shared
            .archive
            .archiver
            .as_ref()
            .map(|a| &a.adapter)
    }

    /// The redactor applied to everything exported or archived.
    pub fn redactor(&self) -> &Redactor {
        &self.inner.shared.archive.redactor
    }

    /// Delivers spooled archive writes now (they are also retried at every
    /// preflight). `Ok` with an empty [`Delivery`] when archiving is off.
    pub async fn deliver_spool(&self) -> Result<Delivery, ArchiveError> {
        let Some(a) = &self.inner.shared.archive.archiver else {
            return Ok(Delivery::default());
        };
        let _w = a.writes.lock().await;
        let d = a.spool.deliver(a.adapter.as_ref()).await?;
        a.spool_dirty.store(d.remaining > 0, Ordering::Release);
        Ok(d)
    }

    /// The step number of this compaction: one past the highest step the
    /// session, its archive or the spool has seen, so numbering survives a
    /// restart (the archive is read once per session).
    pub(super) async fn next_step(&self, session: &mut Session) -> u32 {
        let base = match session.step {
            Some(step) => step,
            None => match &self.inner.shared.archive.archiver {
                None => 0,
                Some(a) => {
                    let sid = session.id();
                    let stored = crate::archive::last_step(a.adapter.as_ref(), sid)
                        .await
                        .unwrap_or_else(|e| {
                            tracing::warn!(session = %sid, error = %e, "cannot list the archive to continue step numbering");
                            0
                        });
                    let spooled = a.spool.last_step(sid).await.unwrap_or(0);
                    stored.max(spooled)
                }
            },
        };
        session.step = Some(base + 1);
        base + 1
    }

    /// Archives the history the pipeline received (everything that may
    /// leave the context) and the new summary as compaction `step`, redacted;
    /// adds `compact.archival` (and `compact.error` when the backend failed
    /// and the write was spooled) to the trail. Never fails the preflight.
    pub(super) async fn archive_compaction(
        &self,
        session: &mut Session,
        trail: &mut Trail,
        step: u32,
        transcript: &[Message],
        summary: Option<&NewSummary>,
    ) {
        let redactor = &self.inner.shared.archive.redactor;
        let scrub = if redactor.is_enabled() {
            let mut found = Vec::new();
            for m in transcript {
                redactor.collect_fragments(&m.to_value(), &mut found);
            }
            let sid = session.id().to_string();
            session.secrets.learn(&sid, found)
        } else {
            Default::default()
        };
        // The index holds what the archive would: the same redaction and
        // learned secrets, archive or not.
        if let Some(write) = self.recall_write(session, step, transcript, &scrub) {
            trail.queue_recall_write(write);
        }
        // The archive's fsyncs come next: the decision spans go now, scrubbed
        // of the fragments just learned (a summary may quote them).
        self.stream(session, trail);
        let Some(a) = &self.inner.shared.archive.archiver else {
            return;
        };
        let messages: Vec<Value> = transcript
            .iter()
            .map(|m| {
                let mut v = redactor.redact_value(&m.to_value());
                scrub.scrub_value(&mut v);
                v
            })
            .collect();
        let mut items = vec![SpoolPayload::Transcript { step, messages }];
        if let Some(s) = summary {
            let doc = json!({
                "session_id": session.id().as_str(),
                "step": step,
                "summary_version": s.version,
                "strategy": s.strategy,
                "summarizer": s.summarizer,
                "input_messages": s.input_messages,
                "input_tokens": s.input_tokens,
                "summary_tokens": s.summary_tokens,
                "message": s.message.to_value(),
            });
            let mut summary = redactor.redact_value(&doc);
            scrub.scrub_value(&mut summary);
            items.push(SpoolPayload::Summary { step, summary });
        }
        let out = self.write_or_spool(a, session.id(), items).await;
        let mut events = Vec::new();
        self.report_archival(
            trail.session_id(),
            trail.root_id(),
            Some(step),
            &out,
            &mut events,
        );
        events.into_iter().for_each(|e| trail.push(e));
        trail.mark_archived();
    }

    /// Delivers the spool if it may hold items, then writes `items` (or
    /// spools them when the backend fails or the spool could not drain,
    /// which keeps a session's writes in order).
    async fn write_or_spool(
        &self,
        a: &Archiver,
        sid: &SessionId,
        items: Vec<SpoolPayload>,
    ) -> Outcome {
        let _w = a.writes.lock().await;
        let mut out = Outcome::default();
        let mut backend_ok = true;
        if a.spool_dirty.load(Ordering::Acquire) {
            match a.spool.deliver(a.adapter.as_ref()).await {
                Ok(d) => {
                    out.delivered = d.delivered;
                    if let Some(e) = d.error {
                        backend_ok = false;
                        out.errors.push(e);
                    } else {
                        a.spool_dirty.store(false, Ordering::Release);
                    }
                }
                Err(e) => {
                    backend_ok = false;
                    out.errors.push(e);
                }
            }
        }
        for payload in items {
            let item = SpoolItem {
                session: sid.to_string(),
                payload,
            };
            if backend_ok {
                match item.deliver(a.adapter.as_ref()).await {
                    Ok(s) => {
                        out.stored.push(s);
                        continue;
                    }
                    Err(e) => {
                        backend_ok = false;
                        out.errors.push(e);
                    }
                }
            }
            match a.spool.push(item).await {
                Ok(path) => {
                    a.spool_dirty.store(true, Ordering::Release);
                    out.spooled.push(path.display().to_string());
                }
                Err(e) => {
                    // Neither the backend nor the local spool took it: say so
                    // loudly; the error event below carries it too.
                    tracing::error!(session = %sid, error = %e, "archive write lost: backend and spool both failed");
                    out.errors.push(e);
                }
            }
        }
        out
    }

    /// `compact.archival` for what was stored or delivered, `compact.error`
    /// for each failure.
    fn report_archival(
        &self,
        session_id: &str,
        root_id: &str,
        step: Option<u32>,
        out: &Outcome,
        emitted: &mut Vec<Event>,
    ) {
        let Some(a) = &self.inner.shared.archive.archiver else {
            return;
        };
        let kind = a.adapter.kind().to_string();
        let span = |name: &str| {
            SpanBuilder::start(session_id, name)
                .parent(root_id)
                .kind(names::KIND_COMPACTION)
        };
        for e in &out.errors {
            tracing::warn!(session = session_id, error = %e, "archive write failed; spooled for retry");
            emitted.push(span(names::ERROR).finish_payload(&payload::Failure {
                error_type: "ArchiveFailed".into(),
                message: e.to_string(),
                storage_adapter: Some(kind.clone()),
                fallback: "spool".into(),
                spool_path: Some(a.spool.path().display().to_string()),
                ..Default::default()
            }));
        }
        if out.stored.is_empty() && out.spooled.is_empty() && out.delivered.is_empty() {
            return;
        }
        let keys: Vec<String> = out.stored.iter().map(|s| s.location.clone()).collect();
        // Without a write of its own, the newest head of this session is
        // that of its last item delivered from the spool.
        let head = out
            .stored
            .last()
            .or_else(|| {
                out.delivered
                    .iter()
                    .rev()
                    .find(|(s, _)| s == session_id)
                    .map(|(_, st)| st)
            })
            .map(|s| s.manifest_head.clone());
        emitted.push(
            span(names::ARCHIVAL).finish_payload(&payload::Archival {
                session_id: session_id.to_owned(),
                step: step.map(u64::from),
                storage_adapter: kind.clone(),
                storage: kind,
                path: keys.first().cloned(),
                bytes: out.stored.iter().map(|s| s.bytes).sum(),
                keys,
                manifest_head: head,
                redacted: self.inner.shared.archive.redactor.is_enabled(),
                spooled: out.spooled.clone(),
                delivered_from_spool: out
                    .delivered
                    .iter()
                    .map(|(s, st)| payload::SpoolDelivery {
                        session_id: s.clone(),
                        key: st.location.clone(),
                        manifest_head: Some(st.manifest_head.clone()),
                    })
                    .collect(),
            }),
        );
    }

    /// Hands the trail's finished events to the exporters before the
    /// preflight ends, redacted as [`emit`](Self::emit) does: a live viewer
    /// sees each decision when it is made, not after the compaction's
    /// summary and archive writes. Until `compact.redaction_disabled` has
    /// gone out (it goes first), everything waits for the end.
    pub(super) fn stream(&self, session: &Session, trail: &mut Trail) {
        let st = &self.inner.shared.archive;
        if !self.inner.shared.dispatcher.is_enabled()
            || (!st.redactor.is_enabled() && !st.disabled_reported.load(Ordering::Acquire))
        {
            return;
        }
        let mut ready = trail.ready();
        if ready.is_empty() {
            return;
        }
        let scrub = session.secrets.scrub();
        for e in &mut ready {
            st.redactor.redact_event_in_place(e);
            scrub.scrub_event_in_place(e);
        }
        self.inner.shared.dispatcher.emit_all_now(ready);
    }

    /// Hands `events` of `session` made outside a preflight (a recall) to
    /// the exporters now, redacted as [`emit`](Self::emit) does: the
    /// redactor, then `scrub` (the session's learned secrets, when this
    /// process holds the session), preceded once per manager by
    /// `compact.redaction_disabled` when redaction is off. Without an
    /// exporter they are only counted.
    pub(super) fn emit_now(
        &self,
        session_id: &str,
        mut events: Vec<Event>,
        scrub: Option<&crate::redact::LiteralScrub>,
    ) {
        if !self.inner.shared.dispatcher.is_enabled() {
            self.inner.shared.dispatcher.emit_all(events);
            return;
        }
        self.redact_for_export(session_id, &mut events, scrub);
        self.inner.shared.dispatcher.emit_all_now(events);
    }

    /// Redacts `events` for export (the redactor, then `scrub`, the
    /// session's learned secrets) and puts `compact.redaction_disabled`
    /// first, once per manager, when redaction is off.
    fn redact_for_export(
        &self,
        session_id: &str,
        events: &mut Vec<Event>,
        scrub: Option<&crate::redact::LiteralScrub>,
    ) {
        let st = &self.inner.shared.archive;
        for e in events.iter_mut() {
            st.redactor.redact_event_in_place(e);
            if let Some(scrub) = scrub {
                scrub.scrub_event_in_place(e);
            }
        }
        if !st.redactor.is_enabled() && !st.disabled_reported.swap(true, Ordering::AcqRel) {
            events.insert(
                0,
                SpanBuilder::for_payload::<payload::RedactionDisabled>(session_id).finish_payload(
                    &payload::RedactionDisabled {
                        severity: "high".into(),
                        message: format!(
                            "redaction.enabled is false{}: events and archives are exported without secret scrubbing",
                            st.redaction_source
                        ),
                    },
                ),
            );
        }
    }

    /// The end of every preflight: archives this preflight's events when
    /// it archived a compaction, retries the spool when it holds items, and
    /// hands the events not [`stream`](Self::stream)ed yet (the first
    /// `sent` were) to the exporters, redacted, preceded once per manager
    /// by `compact.redaction_disabled` when redaction is off. Every event
    /// but `compact.archival` goes out before the archive writes;
    /// `compact.archival` carries the manifest head after them, and ends
    /// when they are done.
    pub(super) async fn emit(
        &self,
        session: &Session,
        events: Vec<Event>,
        archived: bool,
        sent: usize,
    ) {
        let st = &self.inner.shared.archive;
        if !archived && st.archiver.is_none() && !self.inner.shared.dispatcher.is_enabled() {
            // No exporter and no archive: nobody reads these events, so they
            // are counted, not redacted.
            self.inner.shared.dispatcher.emit_all(events);
            return;
        }
        let session_id = session.id().as_str();
        let mut emitted = events;
        self.redact_for_export(session_id, &mut emitted, Some(session.secrets.scrub()));
        // `sent` counts from the trail's first event; an inserted
        // `compact.redaction_disabled` only happens while nothing was sent.
        let sent = sent.min(emitted.len());
        let (mut held_back, now): (Vec<Event>, Vec<Event>) = emitted[sent..]
            .iter()
            .cloned()
            .partition(|e| st.archiver.is_some() && e.name() == Some(names::ARCHIVAL));
        if !now.is_empty() {
            self.inner.shared.dispatcher.emit_all_now(now);
        }
        if let Some(a) = &st.archiver {
            let root_id = emitted
                .last()
                .and_then(Event::as_span)
                .map(|s| s.span_id.clone())
                .unwrap_or_default();
            let mut extra = Vec::new();
            if archived {
                let values: Vec<Value> = emitted
                    .iter()
                    .filter_map(|e| serde_json::to_value(e).ok())
                    .collect();
                let out = self
                    .write_or_spool(
                        a,
                        session.id(),
                        vec![SpoolPayload::Events { events: values }],
                    )
                    .await;
                let head = out.stored.last().map(|s| s.manifest_head.clone());
                // Only failures and spool deliveries are news here: the
                // archival event of this compaction is already in the batch.
                if !out.errors.is_empty() || !out.delivered.is_empty() {
                    let report = Outcome {
                        stored: Vec::new(),
                        ..out
                    };
                    self.report_archival(session_id, &root_id, None, &report, &mut extra);
                }
                if let Some(head) = head {
                    stamp_manifest_head(&mut held_back, session_id, &head);
                    stamp_manifest_head(&mut extra, session_id, &head);
                }
                // The archival span ends with the archive writes its
                // manifest head describes, the events batch's included.
                let now = crate::events::now_rfc3339();
                for e in &mut held_back {
                    if let Event::Span(s) = e {
                        s.ended_at = Some(now.clone());
                    }
                }
            } else if a.spool_dirty.load(Ordering::Acquire) {
                let _w = a.writes.lock().await;
                let d = a.spool.deliver(a.adapter.as_ref()).await;
                let mut out = Outcome::default();
                match d {
                    Ok(d) => {
                        a.spool_dirty.store(d.remaining > 0, Ordering::Release);
                        out.delivered = d.delivered;
                        // A still-failing backend was reported when the item
                        // was spooled; log instead of an error event per call.
                        if let Some(e) = d.error {
                            tracing::debug!(error = %e, remaining = d.remaining, "spool delivery still failing");
                        }
                    }
                    Err(e) => out.errors.push(e),
                }
                self.report_archival(session_id, &root_id, None, &out, &mut extra);
            }
            held_back.extend(extra.iter().map(|e| st.redactor.redact_event(e)));
        }
        // A preflight's events are complete here: a live viewer should see
        // them now, not after the dispatcher's batch timer.
        if !held_back.is_empty() {
            self.inner.shared.dispatcher.emit_all_now(held_back);
        }
    }
}

/// Sets `manifest_head` on the session's `compact.archival` events to `head`,
/// the head after the events batch was archived: what `compact archive
/// verify` prints until the next write. The copies inside that batch keep the
/// head before it (an entry's hash cannot be inside the bytes it covers); see
/// docs/archive.md, "Auditing".
fn stamp_manifest_head(batch: &mut [Event], session_id: &str, head: &str) {
    for e in batch {
        if let Event::Span(s) = e
            && s.name.as_deref() == Some(names::ARCHIVAL)
            && s.data.get("session_id").and_then(Value::as_str) == Some(session_id)
        {
            s.data.insert("manifest_head".into(), json!(head));
        }
    }
}
