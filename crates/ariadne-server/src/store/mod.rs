//! The event store: a durable segmented log ([`log`]) behind an in-memory
//! index of the retained events ([`memory`]), and the broadcast that feeds
//! the SSE streams.
//!
//! One writer thread owns the log. Ingest requests queue their events to
//! it; it takes every request waiting at that moment, writes them in one
//! go, syncs once (group commit), then publishes them (index, broadcast)
//! and only then answers the requests. So a 200 means on disk, and
//! concurrent requests share the cost of one `fsync`.

mod log;
mod memory;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use compact_events::{now_millis, parse_rfc3339_millis};
use tokio::sync::{broadcast, oneshot};

use crate::config::{Retention, StoreOptions};
use crate::error::StoreError;
use crate::schema::ValidEvent;
pub(crate) use memory::{Memory, StoredEvent};

/// A group commit takes at most this many events at once, so one huge
/// burst does not hold every earlier request behind one giant write.
const MAX_GROUP_EVENTS: usize = 20_000;
/// How often the writer applies age retention when idle.
const SWEEP_EVERY: Duration = Duration::from_secs(5);

struct WriteReq {
    events: Vec<ValidEvent>,
    reply: oneshot::Sender<Result<(u64, usize), String>>,
}

/// Sizes and counters for `/healthz` and `/metrics`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StoreStats {
    /// Retained events.
    pub count: usize,
    /// Retention bound on the count.
    pub capacity: usize,
    /// Bytes of retained events in memory.
    pub json_bytes: usize,
    /// Bytes of log on disk.
    pub disk_bytes: u64,
    /// Newest retained sequence number.
    pub last_seq: Option<u64>,
    /// Bytes cut from a torn tail at the last start.
    pub recovered_torn_bytes: u64,
    /// Group commits (fsyncs) so far.
    pub commits: u64,
}

struct Shared {
    memory: RwLock<Memory>,
    live: broadcast::Sender<Arc<StoredEvent>>,
    disk_bytes: AtomicU64,
    commits: AtomicU64,
    torn_bytes: u64,
    capacity: usize,
}

/// The store handle; cheap to clone.
#[derive(Clone)]
pub(crate) struct Store {
    shared: Arc<Shared>,
    tx: mpsc::Sender<WriteReq>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("stats", &self.stats())
            .finish()
    }
}

impl Store {
    /// Opens the log in `dir`, recovers the retained events, and starts the
    /// writer thread. `sse_queue` is how far a subscriber may fall behind.
    pub(crate) fn open(
        dir: &Path,
        opts: &StoreOptions,
        retention: &Retention,
        sse_queue: usize,
    ) -> Result<Store, StoreError> {
        let mut memory = Memory::default();
        let max_events = retention.max_events;
        let (log, rec) = log::Log::open(dir, opts.segment_bytes, |r| {
            if let Some(ev) = stored_from_record(r) {
                memory.push(Arc::new(ev));
                // Evict while reading so recovery memory stays bounded too.
                memory.evict(max_events, i64::MIN);
            }
        })?;
        memory.evict(max_events, min_received(retention));
        tracing::info!(
            events = memory.len(),
            next_seq = rec.next_seq,
            torn_bytes = rec.torn_bytes,
            "store recovered"
        );
        let (live, _) = broadcast::channel(sse_queue.max(1));
        let shared = Arc::new(Shared {
            memory: RwLock::new(memory),
            live,
            disk_bytes: AtomicU64::new(log.disk_bytes()),
            commits: AtomicU64::new(0),
            torn_bytes: rec.torn_bytes,
            capacity: max_events,
        });
        let (tx, rx) = mpsc::channel();
        let writer = Writer {
            shared: shared.clone(),
            log,
            next_seq: rec.next_seq,
            retention: retention.clone(),
        };
        std::thread::Builder::new()
            .name("ariadne-store".into())
            .spawn(move || writer.run(rx))
            .map_err(|e| StoreError::io("spawn store writer", e))?;
        Ok(Store { shared, tx })
    }

    /// Makes `events` durable, then visible; returns the first sequence
    /// number given and the count. Resolves only after the `fsync`.
    pub(crate) async fn append(&self, events: Vec<ValidEvent>) -> Result<(u64, usize), StoreError> {
        if events.is_empty() {
            return Ok((0, 0));
        }
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(WriteReq { events, reply })
            .map_err(|_| StoreError::Closed)?;
        match rx.await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(msg)) => Err(StoreError::io(msg, std::io::Error::other("write failed"))),
            Err(_) => Err(StoreError::Closed),
        }
    }

    /// A receiver of every event published from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<StoredEvent>> {
        self.shared.live.subscribe()
    }

    /// Read access to the retained events.
    pub(crate) fn memory(&self) -> RwLockReadGuard<'_, Memory> {
        read(&self.shared.memory)
    }

    /// Current sizes.
    pub(crate) fn stats(&self) -> StoreStats {
        let m = self.memory();
        StoreStats {
            count: m.len(),
            capacity: self.shared.capacity,
            json_bytes: m.json_bytes(),
            disk_bytes: self.shared.disk_bytes.load(Ordering::Relaxed),
            last_seq: m.last_seq(),
            recovered_torn_bytes: self.shared.torn_bytes,
            commits: self.shared.commits.load(Ordering::Relaxed),
        }
    }
}

// A panic while holding the lock leaves the index consistent enough to
// read (each push/evict step is small); serve it rather than fail every request.
fn read(lock: &RwLock<Memory>) -> RwLockReadGuard<'_, Memory> {
    lock.read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write(lock: &RwLock<Memory>) -> RwLockWriteGuard<'_, Memory> {
    lock.write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn min_received(r: &Retention) -> i64 {
    if r.max_age_secs == 0 {
        i64::MIN
    } else {
        let age_ms = i64::try_from(r.max_age_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
        now_millis().saturating_sub(age_ms)
    }
}

#[derive(serde::Deserialize)]
struct Meta<'a> {
    #[serde(rename = "type", borrow)]
    ty: &'a str,
    #[serde(borrow)]
    trace_id: std::borrow::Cow<'a, str>,
    #[serde(default, borrow)]
    kind: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    started_at: Option<std::borrow::Cow<'a, str>>,
}

fn stored_from_record(r: log::Record) -> Option<StoredEvent> {
    let meta: Meta<'_> = match serde_json::from_str(&r.json) {
        Ok(m) => m,
        Err(e) => {
            // CRC-valid but unparsable: not something we wrote; never serve it.
            tracing::error!(seq = r.seq, error = %e, "skipping an unreadable record");
            return None;
        }
    };
    Some(StoredEvent::new(
        r.seq,
        r.received_ms,
        meta.ty == "span",
        meta.trace_id.as_ref().into(),
        meta.kind.map(|k| k.as_ref().into()),
        meta.started_at.as_deref().and_then(parse_rfc3339_millis),
        &r.json,
    ))
}

struct Writer {
    shared: Arc<Shared>,
    log: log::Log,
    next_seq: u64,
    retention: Retention,
}

impl Writer {
    fn run(mut self, rx: mpsc::Receiver<WriteReq>) {
        loop {
            let first = match rx.recv_timeout(SWEEP_EVERY) {
                Ok(r) => r,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    self.retain();
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            };
            let mut group = vec![first];
            let mut n = group[0].events.len();
            while n < MAX_GROUP_EVENTS {
                match rx.try_recv() {
                    Ok(r) => {
                        n += r.events.len();
                        group.push(r);
                    }
                    Err(_) => break,
                }
            }
            self.commit(group);
        }
        tracing::debug!("store writer stopped");
    }

    fn commit(&mut self, group: Vec<WriteReq>) {
        let received_ms = now_millis();
        let first_seq = self.next_seq;
        let mut buf = Vec::new();
        let mut seq = first_seq;
        for req in &group {
            for ev in &req.events {
                log::encode(&mut buf, seq, received_ms, &ev.json);
                seq += 1;
            }
        }
        if let Err(e) = self.log.append(first_seq, &buf) {
            tracing::error!(error = %e, "log append failed; the batch is refused");
            for req in group {
                let _ = req.reply.send(Err(e.to_string()));
            }
            return;
        }
        self.next_seq = seq;
        self.shared.commits.fetch_add(1, Ordering::Relaxed);
        self.shared
            .disk_bytes
            .fetch_add(buf.len() as u64, Ordering::Relaxed);

        let mut seq = first_seq;
        let mut published = Vec::with_capacity(group.len());
        let mut replies = Vec::with_capacity(group.len());
        for req in group {
            let start = seq;
            let count = req.events.len();
            for ev in req.events {
                published.push(Arc::new(StoredEvent::new(
                    seq,
                    received_ms,
                    ev.is_span,
                    ev.trace_id.into_boxed_str(),
                    ev.kind.map(String::into_boxed_str),
                    ev.started_ms,
                    &ev.json,
                )));
                seq += 1;
            }
            replies.push((req.reply, start, count));
        }
        {
            let mut m = write(&self.shared.memory);
            for ev in &published {
                m.push(ev.clone());
            }
        }
        for ev in published {
            // No subscribers is fine; a lagging one skips (the ring is bounded).
            let _ = self.shared.live.send(ev);
        }
        self.retain();
        for (reply, start, count) in replies {
            let _ = reply.send(Ok((start, count)));
        }
    }

    fn retain(&mut self) {
        let first = {
            let mut m = write(&self.shared.memory);
            m.evict(self.retention.max_events, min_received(&self.retention));
            m.first_seq().unwrap_or(self.next_seq)
        };
        self.log.drop_before(first);
        self.shared
            .disk_bytes
            .store(self.log.disk_bytes(), Ordering::Relaxed);
    }
}
