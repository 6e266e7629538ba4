//! The event store: a durable segmented log ([`log`]) behind an in-memory
//! index of the retained events ([`memory`]), and the broadcast that feeds
//! the SSE streams.
//!
//! One writer thread owns the log. Ingest requests queue their events to
//! it; it takes every request waiting at that moment, writes them in one
//! go, syncs once (group commit), then publishes them (index, broadcast)
//! and only then answers the requests. So a 200 means on disk, and
//! concurrent requests share the cost of one `fsync`. The sync runs on a
//! thread of its own so that the next group is gathered and written, and
//! the previous one published, while the disk works (a two-stage pipeline).

mod clickhouse;
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
use crate::schema::{EventMeta, Marks, ValidEvent};
pub(crate) use memory::{Badge, Memory, StoredEvent, TraceFilter, TraceSummary};

/// A group commit takes at most this many events at once, so one huge
/// burst does not hold every earlier request behind one giant write.
const MAX_GROUP_EVENTS: usize = 20_000;
/// How often the writer applies age retention when idle.
const SWEEP_EVERY: Duration = Duration::from_secs(5);
/// Events are visible once written, before their sync: after a stop that
/// was not clean, at most the two groups in the pipeline were shown but
/// may be gone, so numbering skips past them rather than give their
/// sequence numbers (a subscriber's Last-Event-ID) to other events.
const UNCLEAN_SKIP: u64 = 2 * MAX_GROUP_EVENTS as u64;
/// Written by a writer that stopped cleanly (everything shown is synced).
const CLEAN_MARKER: &str = "clean";
/// Held by the process whose writer owns the directory.
const LOCK_FILE: &str = ".lock";
/// How long opening waits for a previous writer (in this process, being
/// shut down) to let go of the directory.
const LOCK_WAIT: Duration = Duration::from_secs(10);

pub(crate) struct WriteReq {
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
    /// Counters over every retained event.
    pub totals: crate::schema::Counts,
    /// Sessions (traces) with a retained event.
    pub traces: usize,
}

pub(crate) struct Shared {
    memory: RwLock<Memory>,
    live: broadcast::Sender<Arc<StoredEvent>>,
    disk_bytes: AtomicU64,
    commits: AtomicU64,
    torn_bytes: u64,
    capacity: usize,
    /// Sequence numbers have no holes (the log), so a replay that starts
    /// past `after + 1` lost events; ClickHouse's ids are sparse, and its
    /// store remembers what it evicted instead.
    contiguous: bool,
}

impl Shared {
    fn new(memory: Memory, sse_queue: usize, capacity: usize, contiguous: bool) -> Shared {
        let (live, _) = broadcast::channel(sse_queue.max(1));
        Shared {
            memory: RwLock::new(memory),
            live,
            disk_bytes: AtomicU64::new(0),
            commits: AtomicU64::new(0),
            torn_bytes: 0,
            capacity,
            contiguous,
        }
    }

    /// Makes events visible, in sequence order: the index, then the live
    /// streams (a lagging subscriber skips; the ring is bounded).
    fn publish(&self, published: Vec<Arc<StoredEvent>>) {
        {
            let mut m = write(&self.memory);
            for ev in &published {
                m.push(ev.clone());
            }
        }
        for ev in published {
            let _ = self.live.send(ev);
        }
    }

    /// Applies retention to the index; returns the oldest sequence number kept.
    fn retain(&self, retention: &Retention) -> Option<u64> {
        let mut m = write(&self.memory);
        m.evict(retention.max_events, min_received(retention));
        m.first_seq()
    }
}

/// Where appends go: the log's writer thread, or the ClickHouse writer.
#[derive(Clone)]
enum Sink {
    Log(mpsc::Sender<WriteReq>),
    ClickHouse(clickhouse::Writer),
}

/// The store handle; cheap to clone.
#[derive(Clone)]
pub(crate) struct Store {
    shared: Arc<Shared>,
    sink: Sink,
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
        let lock = lock_dir(dir)?;
        let clean = dir.join(CLEAN_MARKER);
        let was_clean = clean.exists();
        if was_clean && let Err(e) = std::fs::remove_file(&clean) {
            return Err(StoreError::io(format!("remove {}", clean.display()), e));
        }
        let mut memory = Memory::default();
        let max_events = retention.max_events;
        let (log, mut rec) = log::Log::open(dir, opts.segment_bytes, |r| {
            if let Some(ev) = stored_from_record(r) {
                memory.push(Arc::new(ev));
                // Evict while reading so recovery memory stays bounded too.
                memory.evict(max_events, i64::MIN);
            }
        })?;
        memory.evict(max_events, min_received(retention));
        if (!was_clean || rec.torn_bytes > 0) && rec.next_seq > 1 {
            rec.next_seq += UNCLEAN_SKIP;
            tracing::info!(
                skipped = UNCLEAN_SKIP,
                "the last stop was not clean: sequence numbers continue past any shown before it"
            );
        }
        tracing::info!(
            events = memory.len(),
            next_seq = rec.next_seq,
            torn_bytes = rec.torn_bytes,
            "store recovered"
        );
        let mut shared = Shared::new(memory, sse_queue, max_events, true);
        shared.disk_bytes = AtomicU64::new(log.disk_bytes());
        shared.torn_bytes = rec.torn_bytes;
        let shared = Arc::new(shared);
        let (tx, rx) = mpsc::channel();
        let writer = Writer {
            shared: shared.clone(),
            log,
            next_seq: rec.next_seq,
            retention: retention.clone(),
            clean,
            _lock: lock,
        };
        std::thread::Builder::new()
            .name("ariadne-store".into())
            .spawn(move || writer.run(rx))
            .map_err(|e| StoreError::io("spawn store writer", e))?;
        Ok(Store {
            shared,
            sink: Sink::Log(tx),
        })
    }

    /// Connects to the ClickHouse of `opts` (creating its table if
    /// missing), loads the newest retained events, and starts following it.
    pub(crate) async fn open_clickhouse(
        opts: &StoreOptions,
        retention: &Retention,
        sse_queue: usize,
    ) -> Result<Store, StoreError> {
        let shared = Arc::new(Shared::new(
            Memory::default(),
            sse_queue,
            retention.max_events,
            false,
        ));
        let sink = clickhouse::open(opts, retention, shared.clone()).await?;
        Ok(Store {
            shared,
            sink: Sink::ClickHouse(sink),
        })
    }

    /// Whether the sequence numbers of a replay have holes only where
    /// events were evicted (see [`Shared::contiguous`]).
    pub(crate) fn replay_gap(&self, after: u64) -> bool {
        let memory = self.memory();
        if self.shared.contiguous {
            // Sequence numbers are contiguous, so a first retained one past
            // `after + 1` means events in between were evicted.
            memory
                .first_seq()
                .is_some_and(|first| first > after.saturating_add(1))
        } else {
            memory.evicted_through() > after
        }
    }

    /// Makes `events` durable, then visible; returns the first sequence
    /// number given and the count. Resolves only after the `fsync`.
    pub(crate) async fn append(&self, events: Vec<ValidEvent>) -> Result<(u64, usize), StoreError> {
        if events.is_empty() {
            return Ok((0, 0));
        }
        let (reply, rx) = oneshot::channel();
        let req = WriteReq { events, reply };
        match &self.sink {
            Sink::Log(tx) => tx.send(req).map_err(|_| StoreError::Closed)?,
            Sink::ClickHouse(w) => w.send(req)?,
        }
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
            totals: m.totals(),
            traces: m.trace_count(),
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
    #[serde(default, borrow)]
    ended_at: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    name: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    status: Option<std::borrow::Cow<'a, str>>,
}

fn stored_from_record(r: log::Record) -> Option<StoredEvent> {
    stored_from_json(r.seq, r.received_ms, r.json)
}

/// An event read back from a store: its index fields parsed from its JSON.
fn stored_from_json(seq: u64, received_ms: i64, json: String) -> Option<StoredEvent> {
    let meta: Meta<'_> = match serde_json::from_str(&json) {
        Ok(m) => m,
        Err(e) => {
            // Checksummed but unparsable: not something we wrote; never serve it.
            tracing::error!(seq, error = %e, "skipping an unreadable record");
            return None;
        }
    };
    let is_span = meta.ty == "span";
    // Only compact's spans carry marks beyond span and status: read the
    // whole object for those alone, so recovery stays cheap.
    let marks = if meta
        .name
        .as_deref()
        .is_some_and(|n| n.starts_with("compact."))
    {
        serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&json)
            .map(|o| Marks::of(&o))
            .unwrap_or_default()
    } else {
        Marks::span(is_span, meta.status.as_deref() == Some("error"))
    };
    let meta = EventMeta {
        is_span,
        trace_id: meta.trace_id.as_ref().into(),
        kind: meta.kind.map(|k| k.as_ref().into()),
        started_ms: meta.started_at.as_deref().and_then(parse_rfc3339_millis),
        ended_ms: meta.ended_at.as_deref().and_then(parse_rfc3339_millis),
        marks,
    };
    Some(StoredEvent::new(seq, received_ms, meta, json.into()))
}

/// Every request waiting now (what `waiting` hands over without waiting),
/// after `first`, up to [`MAX_GROUP_EVENTS`]: one group commit, for the log
/// and for ClickHouse alike.
fn gather(first: WriteReq, mut waiting: impl FnMut() -> Option<WriteReq>) -> Vec<WriteReq> {
    let mut n = first.events.len();
    let mut group = vec![first];
    while n < MAX_GROUP_EVENTS {
        let Some(r) = waiting() else { break };
        n += r.events.len();
        group.push(r);
    }
    group
}

/// The answer a request waits for: its first sequence number and count.
type Reply = oneshot::Sender<Result<(u64, usize), String>>;

/// A group written to the log (and already visible), not yet known to be
/// on disk: its requests are answered after its sync.
struct Written {
    replies: Vec<(Reply, u64, usize)>,
    mark: log::Mark,
    file: Arc<std::fs::File>,
}

impl Written {
    fn refuse(self, why: &str) {
        for (reply, _, _) in self.replies {
            let _ = reply.send(Err(why.to_owned()));
        }
    }
}

/// The thread that runs `sync_data`, one file at a time.
struct Syncer {
    files: mpsc::Sender<Arc<std::fs::File>>,
    done: mpsc::Receiver<std::io::Result<()>>,
}

impl Syncer {
    fn start() -> std::io::Result<Syncer> {
        let (files, file_rx) = mpsc::channel::<Arc<std::fs::File>>();
        let (done_tx, done) = mpsc::channel();
        std::thread::Builder::new()
            .name("ariadne-sync".into())
            .spawn(move || {
                for file in file_rx {
                    if done_tx.send(file.sync_data()).is_err() {
                        break;
                    }
                }
            })?;
        Ok(Syncer { files, done })
    }

    /// Starts syncing `w`'s file; `None` (its requests answered) when the
    /// syncer is gone.
    fn start_sync(&self, w: Written) -> Option<Written> {
        match self.files.send(Arc::clone(&w.file)) {
            Ok(()) => Some(w),
            Err(_) => {
                w.refuse("the log syncer stopped");
                None
            }
        }
    }

    /// The result of the sync started last.
    fn wait(&self) -> std::io::Result<()> {
        self.done
            .recv()
            .unwrap_or_else(|_| Err(std::io::Error::other("the log syncer stopped")))
    }
}

struct Writer {
    shared: Arc<Shared>,
    log: log::Log,
    next_seq: u64,
    retention: Retention,
    /// Where a clean stop is recorded.
    clean: std::path::PathBuf,
    /// The directory's lock, released when the writer is done.
    _lock: std::fs::File,
}

/// Locks `dir` for this writer, waiting up to [`LOCK_WAIT`] for a
/// previous one that is stopping.
fn lock_dir(dir: &Path) -> Result<std::fs::File, StoreError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| StoreError::io(format!("create {}", dir.display()), e))?;
    let path = dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| StoreError::io(format!("open {}", path.display()), e))?;
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(StoreError::io(
                    format!("lock {}", path.display()),
                    std::io::Error::other("the data directory is in use by another server"),
                ));
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(StoreError::io(format!("lock {}", path.display()), e));
            }
        }
    }
}

impl Writer {
    // Pipelined group commit: while the syncer thread runs `sync_data` for
    // group k, this thread takes what queued meanwhile as group k+1, writes
    // it (to the page cache) and makes it visible (index, live streams);
    // when k's sync returns, it starts k+1's and answers k. Nothing is
    // answered before its own sync, so a 200 still means on disk; a viewer
    // sees an event as soon as it is written, without waiting for the disk
    // (an fsync on a busy disk takes tens of milliseconds).
    fn run(mut self, rx: mpsc::Receiver<WriteReq>) {
        let syncer = match Syncer::start() {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "cannot start the log syncer; ingest is refused");
                for req in rx {
                    let _ = req.reply.send(Err(e.to_string()));
                }
                return;
            }
        };
        let mut in_sync: Option<Written> = None;
        loop {
            let next = if in_sync.is_some() {
                // A sync is running: write what is queued, wait for nothing.
                rx.try_recv().ok()
            } else {
                match rx.recv_timeout(SWEEP_EVERY) {
                    Ok(r) => Some(r),
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        self.retain();
                        continue;
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                }
            };
            let written = next.and_then(|first| self.write(gather(first, || rx.try_recv().ok())));
            let Some(prev) = in_sync.take() else {
                in_sync = written.and_then(|w| syncer.start_sync(w));
                continue;
            };
            match syncer.wait() {
                Ok(()) => {
                    in_sync = written.and_then(|w| syncer.start_sync(w));
                    self.shared.commits.fetch_add(1, Ordering::Relaxed);
                    for (reply, start, count) in prev.replies {
                        let _ = reply.send(Ok((start, count)));
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "log sync failed; the batch is refused");
                    // The later group was written after it: undo both. Their
                    // sequence numbers were shown live already, so they are
                    // not given again (the next group continues after them).
                    if let Err(cut) = self.log.cut_back(prev.mark) {
                        tracing::error!(error = %cut, "cannot cut the log back after a failed sync");
                    }
                    self.shared
                        .disk_bytes
                        .store(self.log.disk_bytes(), Ordering::Relaxed);
                    let why = format!("sync the log: {e}");
                    prev.refuse(&why);
                    if let Some(w) = written {
                        w.refuse(&why);
                    }
                }
            }
        }
        if let Some(last) = in_sync.take() {
            match syncer.wait() {
                Ok(()) => {
                    for (reply, start, count) in last.replies {
                        let _ = reply.send(Ok((start, count)));
                    }
                }
                Err(e) => {
                    last.refuse(&format!("sync the log: {e}"));
                    return;
                }
            }
        }
        // Everything shown is on disk: the next start continues the numbering.
        let marked = std::fs::File::create(&self.clean).and_then(|f| f.sync_all());
        if let Err(e) = marked {
            tracing::warn!(error = %e, "could not record a clean stop");
        }
        tracing::debug!("store writer stopped");
    }

    /// Numbers, encodes and writes one group (not yet synced), then makes
    /// it visible; a failed write answers its requests and gives `None`.
    fn write(&mut self, group: Vec<WriteReq>) -> Option<Written> {
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
        match self.log.write(first_seq, &buf) {
            Ok((mark, file)) => {
                self.next_seq = seq;
                self.shared
                    .disk_bytes
                    .fetch_add(buf.len() as u64, Ordering::Relaxed);
                let replies = self.publish(group, first_seq, received_ms);
                Some(Written {
                    replies,
                    mark,
                    file,
                })
            }
            Err(e) => {
                tracing::error!(error = %e, "log append failed; the batch is refused");
                for req in group {
                    let _ = req.reply.send(Err(e.to_string()));
                }
                None
            }
        }
    }

    /// Makes a written group visible (index, live streams); returns what
    /// its requests will be answered once it is synced.
    fn publish(
        &mut self,
        group: Vec<WriteReq>,
        first_seq: u64,
        received_ms: i64,
    ) -> Vec<(Reply, u64, usize)> {
        let mut seq = first_seq;
        let mut published = Vec::new();
        let mut replies = Vec::with_capacity(group.len());
        for req in group {
            let start = seq;
            let count = req.events.len();
            for ev in req.events {
                published.push(Arc::new(StoredEvent::new(
                    seq,
                    received_ms,
                    ev.meta,
                    ev.json,
                )));
                seq += 1;
            }
            replies.push((req.reply, start, count));
        }
        self.shared.publish(published);
        self.retain();
        replies
    }

    fn retain(&mut self) {
        let first = self.shared.retain(&self.retention).unwrap_or(self.next_seq);
        self.log.drop_before(first);
        self.shared
            .disk_bytes
            .store(self.log.disk_bytes(), Ordering::Relaxed);
    }
}
