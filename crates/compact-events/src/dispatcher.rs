//! The non-blocking dispatcher between `emit` and the exporters.
//!
//! Shape: `emit` pushes into a bounded queue under a short lock and returns.
//! A worker thread (its own current-thread tokio runtime, so callers may be
//! sync code, a tokio runtime or any other executor) cuts the queue into
//! batches and hands each batch (shared, not copied) to every exporter's own
//! queue. Every exporter has its own task reading its queue, so a slow or
//! failing exporter only falls behind itself: when its queue holds more
//! than twice `capacity` *events*, it loses its oldest batches (counted as
//! `lagged`), and the others never notice. An exporter that was busy takes
//! every batch that queued meanwhile in one `export` call (up to the batch
//! size), so a backlog costs one round trip, not one per batch.
//!
//! The bound counts events, not batches: a preflight's events are
//! published as soon as it ends (or as each decision is made), a few events
//! a batch, and a bound in batches (a ring of `2 × capacity / batch_size`)
//! let an exporter that was merely slow for a few seconds lose events after
//! some hundred preflights, far below the `capacity` the configuration
//! promises.
//!
//! Events carry sequence numbers assigned under the queue lock, which is
//! what makes `flush` exact: it waits until every exporter has settled
//! (delivered, failed, timed out or lagged past) every sequence number that
//! existed when it was called.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{JoinHandle, ThreadId};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::{Notify, mpsc, oneshot};

use crate::exporter::{ExportError, Exporter};
use crate::span::Event;

/// How often a persistently failing (or lagging) exporter is reported after
/// the first warning: one summary line per window instead of one per batch.
const WARN_WINDOW: Duration = Duration::from_secs(30);

/// How long the worker thread waits for in-flight blocking work
/// (`spawn_blocking` writes) when it stops.
const RUNTIME_STOP_GRACE: Duration = Duration::from_millis(200);

/// Tuning for a [`Dispatcher`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchOptions {
    /// Events the queue in front of the worker holds; `emit` drops (and
    /// counts) events beyond it. Each exporter may also fall about twice
    /// this far behind (in whole batches) before it loses its oldest
    /// batches, counted as `lagged`.
    pub capacity: usize,
    /// Most events per `export` call.
    pub batch_size: usize,
    /// Longest time an event waits for its batch to fill.
    pub flush_interval: Duration,
    /// Longest one `export` (or exporter `flush`) call may take before it is
    /// cancelled and counted as a failure.
    pub export_timeout: Duration,
    /// How long dropping the last [`Dispatcher`] handle waits to deliver
    /// what is queued.
    pub shutdown_timeout: Duration,
}

impl Default for DispatchOptions {
    fn default() -> Self {
        DispatchOptions {
            capacity: 8192,
            batch_size: 256,
            flush_interval: Duration::from_millis(200),
            export_timeout: Duration::from_secs(5),
            shutdown_timeout: Duration::from_secs(5),
        }
    }
}

/// Counters of a [`Dispatcher`], a snapshot.
///
/// Accounting: `emitted = dropped + accepted`, and for every exporter, once
/// flushed, `accepted = exported + failed_events + lagged`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DispatchStats {
    /// Events passed to `emit` / `emit_all`.
    pub emitted: u64,
    /// Events `emit` refused because the queue was full or the dispatcher
    /// was shut down. No exporter sees them.
    pub dropped: u64,
    /// Event deliveries an exporter acknowledged, summed over exporters.
    pub exported: u64,
    /// Failed `export` or exporter `flush` calls (error, timeout, panic),
    /// summed over exporters.
    pub export_failures: u64,
    /// Event deliveries skipped because an exporter fell too far behind,
    /// summed over exporters.
    pub lagged: u64,
    /// The same, per exporter, in the order they were given.
    pub exporters: Vec<ExporterStats>,
}

/// Counters of one exporter behind a [`Dispatcher`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ExporterStats {
    /// [`Exporter::name`].
    pub name: String,
    /// Events it acknowledged.
    pub exported: u64,
    /// Events in batches whose export failed.
    pub failed_events: u64,
    /// Failed `export` or `flush` calls.
    pub failures: u64,
    /// Events it never got because it fell too far behind.
    pub lagged: u64,
}

/// Reads a [`Dispatcher`]'s counters without keeping it alive
/// ([`Dispatcher::stats_reader`]).
#[derive(Clone)]
pub struct StatsReader(std::sync::Weak<Shared>);

impl std::fmt::Debug for StatsReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("StatsReader").field(&self.stats()).finish()
    }
}

impl StatsReader {
    /// The counters; `None` once the dispatcher is gone.
    pub fn stats(&self) -> Option<DispatchStats> {
        self.0.upgrade().map(|shared| stats_of(&shared))
    }
}

fn stats_of(shared: &Shared) -> DispatchStats {
    let exporters: Vec<ExporterStats> = shared
        .lanes
        .iter()
        .map(|l| ExporterStats {
            name: l.name.clone(),
            exported: l.exported.load(Ordering::Relaxed),
            failed_events: l.failed_events.load(Ordering::Relaxed),
            failures: l.failures.load(Ordering::Relaxed),
            lagged: l.lagged.load(Ordering::Relaxed),
        })
        .collect();
    DispatchStats {
        emitted: shared.emitted.load(Ordering::Relaxed),
        dropped: shared.dropped.load(Ordering::Relaxed),
        exported: exporters.iter().map(|e| e.exported).sum(),
        export_failures: exporters.iter().map(|e| e.failures).sum(),
        lagged: exporters.iter().map(|e| e.lagged).sum(),
        exporters,
    }
}

/// A clonable handle to the background delivery of events to exporters.
///
/// [`emit`](Dispatcher::emit) never blocks on an exporter and never fails.
/// Dropping the last handle shuts the dispatcher down (see
/// [`shutdown`](Dispatcher::shutdown)), waiting up to
/// [`DispatchOptions::shutdown_timeout`].
#[derive(Clone)]
pub struct Dispatcher {
    inner: Arc<Handle>,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self
            .inner
            .shared
            .lanes
            .iter()
            .map(|l| l.name.as_str())
            .collect();
        f.debug_struct("Dispatcher")
            .field("exporters", &names)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

// What the worker and its handles share.
struct Shared {
    queue: Mutex<Queue>,
    // Wakes the worker: an event arrived while it was idle, or a full batch is queued.
    wake: Notify,
    // Wakes the worker: an exporter settled a batch (flush waiters may be done).
    progress: Notify,
    enabled: bool,
    capacity: usize,
    batch_size: usize,
    emitted: AtomicU64,
    dropped: AtomicU64,
    lanes: Vec<Arc<Lane>>,
}

struct Queue {
    events: VecDeque<Event>,
    // Sequence number of the newest accepted event; the first is 1.
    last_seq: u64,
    closed: bool,
    // The worker is asleep with nothing pending, so the next event must wake it.
    worker_idle: bool,
    // A complete group was queued: publish what is queued without waiting
    // for the batch to fill.
    publish_now: bool,
}

impl Shared {
    // A panic while holding the lock cannot leave the queue half-updated
    // (push and counter bump are not interleaved with anything that can
    // panic), so recover the guard rather than poison every later emit.
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn settled(&self, dispatched: u64) -> u64 {
        self.lanes
            .iter()
            .map(|l| l.settled.load(Ordering::Acquire))
            .min()
            .unwrap_or(dispatched)
    }
}

// One exporter, its queue and its counters.
struct Lane {
    exporter: Arc<dyn Exporter>,
    name: String,
    // Batches published and not yet taken by this exporter's task.
    queue: Mutex<LaneQueue>,
    // Wakes the exporter's task: a batch was queued.
    ready: Notify,
    // Highest sequence number this exporter is done with.
    settled: AtomicU64,
    exported: AtomicU64,
    failed_events: AtomicU64,
    failures: AtomicU64,
    lagged: AtomicU64,
}

#[derive(Default)]
struct LaneQueue {
    batches: VecDeque<Arc<Batch>>,
    // Events in `batches`.
    events: usize,
}

impl Lane {
    fn lock_queue(&self) -> MutexGuard<'_, LaneQueue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    // Queues a batch; past `bound` events the oldest batches go (the next
    // export sees the gap in sequence numbers and counts it as lagged). The
    // newest batch always stays, so the gap is always noticed.
    fn push(&self, batch: Arc<Batch>, bound: usize) {
        {
            let mut q = self.lock_queue();
            q.events += batch.events.len();
            q.batches.push_back(batch);
            while q.events > bound && q.batches.len() > 1 {
                if let Some(old) = q.batches.pop_front() {
                    q.events -= old.events.len();
                }
            }
        }
        self.ready.notify_one();
    }

    // The oldest queued batch and those right behind it, up to `max`
    // events (at least one batch).
    fn take(&self, max: usize) -> Vec<Arc<Batch>> {
        let mut q = self.lock_queue();
        let mut group: Vec<Arc<Batch>> = Vec::new();
        let mut events = 0;
        while let Some(next) = q.batches.front() {
            if !group.is_empty() && events + next.events.len() > max {
                break;
            }
            events += next.events.len();
            if let Some(b) = q.batches.pop_front() {
                group.push(b);
            }
        }
        q.events -= events;
        group
    }
}

struct Batch {
    first_seq: u64,
    events: Vec<Event>,
}

impl Batch {
    fn last_seq(&self) -> u64 {
        self.first_seq + self.events.len() as u64 - 1
    }
}

enum Reply {
    Sync(std::sync::mpsc::Sender<bool>),
    Async(oneshot::Sender<bool>),
}

impl Reply {
    fn send(self, ok: bool) {
        // The caller may have given up (timed out, dropped); nothing to do then.
        match self {
            Reply::Sync(tx) => {
                let _ = tx.send(ok);
            }
            Reply::Async(tx) => {
                let _ = tx.send(ok);
            }
        }
    }
}

enum Control {
    Flush {
        target: u64,
        deadline: Instant,
        reply: Reply,
    },
    Shutdown {
        target: u64,
        deadline: Instant,
        reply: Reply,
    },
}

struct Waiter {
    target: u64,
    deadline: Instant,
    reply: Reply,
}

// Owned by the `Dispatcher` handles; its drop is the last handle's drop.
struct Handle {
    shared: Arc<Shared>,
    control: Option<mpsc::UnboundedSender<Control>>,
    worker: Mutex<Option<JoinHandle<()>>>,
    worker_thread: Option<ThreadId>,
    shutdown_timeout: Duration,
    // Whether the final drain at shutdown delivered everything.
    shutdown_clean: Arc<AtomicBool>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shutdown(self.shutdown_timeout);
    }
}

fn deadline_after(timeout: Duration) -> Instant {
    let now = Instant::now();
    // An "infinite" timeout must not overflow `Instant`.
    now.checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400))
}

impl Handle {
    fn shutdown(&self, timeout: Duration) {
        let join = self
            .worker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(join) = join else { return };
        let target = {
            let mut q = self.shared.lock();
            q.closed = true;
            q.last_seq
        };
        let Some(control) = &self.control else { return };
        let (tx, rx) = std::sync::mpsc::channel();
        let sent = control.send(Control::Shutdown {
            target,
            deadline: deadline_after(timeout),
            reply: Reply::Sync(tx),
        });
        // Called on the worker thread itself (an exporter dropping the last
        // handle): waiting for the reply or joining would deadlock.
        if Some(std::thread::current().id()) == self.worker_thread {
            return;
        }
        let replied = match sent {
            Ok(()) => rx
                .recv_timeout(timeout.saturating_add(RUNTIME_STOP_GRACE))
                .ok(),
            Err(_) => None,
        };
        match replied {
            Some(clean) => {
                self.shutdown_clean.store(clean, Ordering::Release);
                // The worker returns right after replying; joining is short.
                let _ = join.join();
            }
            // Stuck in an exporter that blocks its thread: leave it detached
            // rather than hang the caller.
            None => tracing::warn!(
                "event dispatcher did not stop within {timeout:?}; leaving its thread behind"
            ),
        }
    }
}

impl Dispatcher {
    /// Starts a dispatcher delivering to `exporters`, with its own worker
    /// thread. With no exporters it is [`Dispatcher::disabled`].
    pub fn new(exporters: Vec<Arc<dyn Exporter>>, opts: DispatchOptions) -> Self {
        if exporters.is_empty() {
            return Self::disabled();
        }
        let capacity = opts.capacity.max(1);
        let batch_size = opts.batch_size.max(1);
        let lanes: Vec<Arc<Lane>> = exporters
            .into_iter()
            .map(|exporter| {
                Arc::new(Lane {
                    name: exporter.name().to_owned(),
                    exporter,
                    queue: Mutex::new(LaneQueue::default()),
                    ready: Notify::new(),
                    settled: AtomicU64::new(0),
                    exported: AtomicU64::new(0),
                    failed_events: AtomicU64::new(0),
                    failures: AtomicU64::new(0),
                    lagged: AtomicU64::new(0),
                })
            })
            .collect();
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                events: VecDeque::new(),
                last_seq: 0,
                closed: false,
                worker_idle: true,
                publish_now: false,
            }),
            wake: Notify::new(),
            progress: Notify::new(),
            enabled: true,
            capacity,
            batch_size,
            emitted: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            lanes,
        });
        let (control_tx, control_rx) = mpsc::unbounded_channel();
        let worker = Worker {
            shared: Arc::clone(&shared),
            control: control_rx,
            // Twice what a full queue holds, so an exporter that keeps up
            // but was not scheduled yet never loses an event.
            lane_bound: 2 * capacity,
            flush_interval: opts.flush_interval,
            export_timeout: opts.export_timeout,
        };
        let spawned = std::thread::Builder::new()
            .name("compact-events".to_owned())
            .spawn(move || worker.run_on_own_runtime());
        let (join, worker_thread) = match spawned {
            Ok(join) => {
                let id = join.thread().id();
                (Some(join), Some(id))
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not start the event dispatcher thread; events will be dropped");
                shared.lock().closed = true;
                (None, None)
            }
        };
        Dispatcher {
            inner: Arc::new(Handle {
                shared,
                control: Some(control_tx),
                worker: Mutex::new(join),
                worker_thread,
                shutdown_timeout: opts.shutdown_timeout,
                shutdown_clean: Arc::new(AtomicBool::new(false)),
            }),
        }
    }

    /// A dispatcher with no exporters and no thread: `emit` only counts.
    pub fn disabled() -> Self {
        Dispatcher {
            inner: Arc::new(Handle {
                shared: Arc::new(Shared {
                    queue: Mutex::new(Queue {
                        events: VecDeque::new(),
                        last_seq: 0,
                        closed: false,
                        worker_idle: false,
                        publish_now: false,
                    }),
                    wake: Notify::new(),
                    progress: Notify::new(),
                    enabled: false,
                    capacity: 0,
                    batch_size: 1,
                    emitted: AtomicU64::new(0),
                    dropped: AtomicU64::new(0),
                    lanes: Vec::new(),
                }),
                control: None,
                worker: Mutex::new(None),
                worker_thread: None,
                shutdown_timeout: Duration::ZERO,
                shutdown_clean: Arc::new(AtomicBool::new(true)),
            }),
        }
    }

    /// Whether any exporter is behind this dispatcher.
    pub fn is_enabled(&self) -> bool {
        self.inner.shared.enabled
    }

    /// Queues one event for every exporter. Never blocks on an exporter and
    /// never fails: when the queue is full or the dispatcher is shut down
    /// the event is dropped and counted in [`DispatchStats::dropped`].
    pub fn emit(&self, event: Event) {
        let shared = &self.inner.shared;
        shared.emitted.fetch_add(1, Ordering::Relaxed);
        if !shared.enabled {
            return;
        }
        let wake = {
            let mut q = shared.lock();
            if q.closed || q.events.len() >= shared.capacity {
                None
            } else {
                q.events.push_back(event);
                q.last_seq += 1;
                // Waking costs a syscall; only do it when the worker needs to
                // start its batch timer or a full batch is ready.
                let idle = std::mem::replace(&mut q.worker_idle, false);
                Some(idle || q.events.len() == shared.batch_size.min(shared.capacity))
            }
        };
        match wake {
            None => {
                shared.dropped.fetch_add(1, Ordering::Relaxed);
            }
            Some(true) => shared.wake.notify_one(),
            Some(false) => {}
        }
    }

    /// [`emit`](Dispatcher::emit)s each event, in order.
    pub fn emit_all(&self, events: impl IntoIterator<Item = Event>) {
        for event in events {
            self.emit(event);
        }
    }

    /// [`emit_all`](Dispatcher::emit_all), then publishes everything queued
    /// at once instead of waiting up to [`DispatchOptions::flush_interval`]
    /// for a batch to fill: for a group that is complete (a preflight's
    /// events), where waiting would only delay what a live viewer sees.
    /// Events queued concurrently by others go out in the same batch.
    pub fn emit_all_now(&self, events: impl IntoIterator<Item = Event>) {
        self.emit_all(events);
        let shared = &self.inner.shared;
        if !shared.enabled {
            return;
        }
        shared.lock().publish_now = true;
        shared.wake.notify_one();
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> DispatchStats {
        stats_of(&self.inner.shared)
    }

    /// Reads the counters without keeping the dispatcher alive: what a
    /// metrics endpoint holds (the dispatcher's exporters may hold the
    /// server that serves the endpoint, and a strong handle there would
    /// keep both alive and the dispatcher from shutting down).
    pub fn stats_reader(&self) -> StatsReader {
        StatsReader(Arc::downgrade(&self.inner.shared))
    }

    // Registers a flush with the worker; `None` when there is no worker to ask.
    fn request_flush(&self, timeout: Duration, reply: Reply) -> Result<(), ()> {
        let target = self.inner.shared.lock().last_seq;
        let control = self.inner.control.as_ref().ok_or(())?;
        control
            .send(Control::Flush {
                target,
                deadline: deadline_after(timeout),
                reply,
            })
            .map_err(|_| ())
    }

    // What flush reports when the worker is gone.
    fn flush_without_worker(&self) -> bool {
        !self.inner.shared.enabled || self.inner.shutdown_clean.load(Ordering::Acquire)
    }

    /// Blocks until every event emitted before the call has been handed to
    /// every exporter (delivered, failed, or skipped because that exporter
    /// lagged) and every exporter's `flush` has returned, or until
    /// `timeout`. Returns whether that happened in time (and the exporter
    /// flushes succeeded). Usable from sync code and from inside any
    /// runtime (it blocks the calling thread).
    pub fn flush(&self, timeout: Duration) -> bool {
        if !self.is_enabled() {
            return true;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        if self.request_flush(timeout, Reply::Sync(tx)).is_err() {
            return self.flush_without_worker();
        }
        match rx.recv_timeout(timeout) {
            Ok(ok) => ok,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => false,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => self.flush_without_worker(),
        }
    }

    /// [`flush`](Dispatcher::flush) without blocking the thread. Works on
    /// any executor; the worker enforces the timeout.
    pub async fn flush_async(&self, timeout: Duration) -> bool {
        if !self.is_enabled() {
            return true;
        }
        let (tx, rx) = oneshot::channel();
        if self.request_flush(timeout, Reply::Async(tx)).is_err() {
            return self.flush_without_worker();
        }
        // Inside tokio, also time out locally, in case the worker thread is
        // wedged by an exporter that blocks it.
        let answer = if tokio::runtime::Handle::try_current().is_ok() {
            match tokio::time::timeout(timeout.saturating_add(RUNTIME_STOP_GRACE), rx).await {
                Ok(answer) => answer,
                Err(_) => return false,
            }
        } else {
            rx.await
        };
        match answer {
            Ok(ok) => ok,
            Err(_) => self.flush_without_worker(),
        }
    }

    /// Refuses further events, delivers what is queued (up to `timeout`),
    /// flushes every exporter and stops the worker thread. Idempotent; the
    /// first call does the work, later ones return at once. Blocks the
    /// calling thread.
    pub fn shutdown(&self, timeout: Duration) {
        self.inner.shutdown(timeout);
    }
}

struct Worker {
    shared: Arc<Shared>,
    control: mpsc::UnboundedReceiver<Control>,
    lane_bound: usize,
    flush_interval: Duration,
    export_timeout: Duration,
}

impl Worker {
    fn run_on_own_runtime(self) {
        let rt = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                tracing::warn!(error = %e, "could not start the event dispatcher runtime; events will be dropped");
                self.shared.lock().closed = true;
                return;
            }
        };
        rt.block_on(self.run());
        // Lane tasks still running belong to exporters that missed the
        // shutdown deadline; they are cancelled here.
        rt.shutdown_timeout(RUNTIME_STOP_GRACE);
    }

    async fn run(mut self) {
        let shared = Arc::clone(&self.shared);
        for lane in &shared.lanes {
            tokio::spawn(lane_loop(
                Arc::clone(lane),
                Arc::clone(&shared),
                self.export_timeout,
            ));
        }

        let mut pending: VecDeque<Event> = VecDeque::new();
        let mut taken: VecDeque<Event> = VecDeque::new();
        let mut dispatched: u64 = 0;
        let mut batch_deadline: Option<Instant> = None;
        let mut force = false;
        let mut waiters: Vec<Waiter> = Vec::new();
        let mut stopping: Option<Waiter> = None;
        let mut control_open = true;

        loop {
            {
                let mut q = shared.lock();
                // Swap rather than drain so emitters wait only for a pointer swap.
                std::mem::swap(&mut q.events, &mut taken);
                q.worker_idle = taken.is_empty() && pending.is_empty();
                force |= std::mem::take(&mut q.publish_now);
            }
            pending.append(&mut taken);

            let now = Instant::now();
            if !pending.is_empty() && batch_deadline.is_none() {
                batch_deadline = Some(now + self.flush_interval);
            }
            let due = force || batch_deadline.is_some_and(|d| now >= d);
            let sent_any = self.publish(&shared, &mut pending, &mut dispatched, due);
            if pending.is_empty() {
                batch_deadline = None;
            }
            force = false;
            if sent_any {
                // The exporters share this thread: let them take what was
                // just published before the next pull can add more.
                tokio::task::yield_now().await;
            }

            let settled = shared.settled(dispatched);
            waiters = self.answer_flushes(&shared, waiters, settled, now);

            if let Some(stop) = &stopping {
                let delivered = stop.target <= settled;
                if delivered || now >= stop.deadline {
                    let flushed =
                        flush_exporters(&shared.lanes, stop.deadline, self.export_timeout).await;
                    let settled = shared.settled(dispatched);
                    for w in waiters.drain(..) {
                        w.reply.send(w.target <= settled && flushed);
                    }
                    if let Some(stop) = stopping.take() {
                        stop.reply.send(delivered && flushed);
                    }
                    return;
                }
            }

            let next_deadline = [
                batch_deadline,
                waiters.iter().map(|w| w.deadline).min(),
                stopping.as_ref().map(|s| s.deadline),
            ]
            .into_iter()
            .flatten()
            .min();
            let sleep = async {
                match next_deadline {
                    Some(t) => tokio::time::sleep_until(tokio::time::Instant::from_std(t)).await,
                    None => std::future::pending().await,
                }
            };

            tokio::select! {
                biased;
                msg = self.control.recv(), if control_open => match msg {
                    Some(Control::Flush { target, deadline, reply }) => {
                        force = true;
                        waiters.push(Waiter { target, deadline, reply });
                    }
                    Some(Control::Shutdown { target, deadline, reply }) => {
                        force = true;
                        stopping = Some(Waiter { target, deadline, reply });
                    }
                    // Every handle is gone without a shutdown (it always
                    // sends one, so this is a handle that failed to): stop.
                    None => {
                        control_open = false;
                        if stopping.is_none() {
                            shared.lock().closed = true;
                            return;
                        }
                    }
                },
                () = shared.wake.notified() => {}
                () = shared.progress.notified() => {}
                () = sleep => {}
            }
        }
    }

    /// Hands full batches of `pending` (all of it when `due`) to every
    /// lane, numbering them on from `dispatched`. True when one went out.
    fn publish(
        &self,
        shared: &Shared,
        pending: &mut VecDeque<Event>,
        dispatched: &mut u64,
        due: bool,
    ) -> bool {
        let mut sent_any = false;
        while pending.len() >= shared.batch_size || (due && !pending.is_empty()) {
            sent_any = true;
            let n = pending.len().min(shared.batch_size);
            let events: Vec<Event> = pending.drain(..n).collect();
            let batch = Batch {
                first_seq: *dispatched + 1,
                events,
            };
            *dispatched = batch.last_seq();
            let batch = Arc::new(batch);
            for lane in &shared.lanes {
                lane.push(Arc::clone(&batch), self.lane_bound);
            }
        }
        sent_any
    }

    /// Answers the flushes whose events every lane has settled (after
    /// flushing the exporters, off this loop) and those past their
    /// deadline; returns the ones still waiting.
    fn answer_flushes(
        &self,
        shared: &Shared,
        waiters: Vec<Waiter>,
        settled: u64,
        now: Instant,
    ) -> Vec<Waiter> {
        let mut still_waiting = Vec::with_capacity(waiters.len());
        for w in waiters {
            if w.target <= settled {
                let lanes = shared.lanes.clone();
                let timeout = self.export_timeout;
                tokio::spawn(async move {
                    let ok = flush_exporters(&lanes, w.deadline, timeout).await;
                    w.reply.send(ok);
                });
            } else if now >= w.deadline {
                w.reply.send(false);
            } else {
                still_waiting.push(w);
            }
        }
        still_waiting
    }
}

// Calls every exporter's `flush` concurrently, each bounded by the export
// timeout and the caller's deadline. True when all succeeded in time.
async fn flush_exporters(lanes: &[Arc<Lane>], deadline: Instant, export_timeout: Duration) -> bool {
    let limit = deadline
        .saturating_duration_since(Instant::now())
        .min(export_timeout);
    let tasks: Vec<_> = lanes
        .iter()
        .map(|lane| {
            let exporter = Arc::clone(&lane.exporter);
            tokio::spawn(async move { exporter.flush().await })
        })
        .collect();
    let mut ok = true;
    for (lane, mut task) in lanes.iter().zip(tasks) {
        let result = run_bounded(&mut task, limit).await;
        if let Err(e) = result {
            ok = false;
            lane.failures.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(exporter = %lane.name, error = %e, "exporter flush failed");
        }
    }
    ok
}

// Awaits a spawned export/flush, turning a timeout or a panic into an error.
async fn run_bounded(
    task: &mut tokio::task::JoinHandle<Result<(), ExportError>>,
    limit: Duration,
) -> Result<(), ExportError> {
    match tokio::time::timeout(limit, &mut *task).await {
        Ok(Ok(result)) => result,
        Ok(Err(join_error)) => Err(ExportError::Panicked(panic_message(join_error))),
        Err(_) => {
            task.abort();
            Err(ExportError::Timeout(limit))
        }
    }
}

fn panic_message(e: tokio::task::JoinError) -> String {
    match e.try_into_panic() {
        Ok(payload) => {
            if let Some(s) = payload.downcast_ref::<&str>() {
                (*s).to_owned()
            } else if let Some(s) = payload.downcast_ref::<String>() {
                s.clone()
            } else {
                "non-string panic payload".to_owned()
            }
        }
        Err(e) => e.to_string(),
    }
}

async fn lane_loop(lane: Arc<Lane>, shared: Arc<Shared>, export_timeout: Duration) {
    let mut failures = WarnLimiter::default();
    let mut lags = WarnLimiter::default();
    loop {
        // Batches that queued while the last export ran go out together, up
        // to `batch_size` events: under a backlog each one would otherwise
        // wait for a whole round trip per batch ahead of it.
        let group = lane.take(shared.batch_size);
        if group.is_empty() {
            // Ends when the worker's runtime stops (its tasks are cancelled).
            lane.ready.notified().await;
            continue;
        }
        export_group(
            &lane,
            &shared,
            &group,
            export_timeout,
            &mut failures,
            &mut lags,
        )
        .await;
    }
}

// Exports consecutive batches in one call and settles them.
async fn export_group(
    lane: &Arc<Lane>,
    shared: &Shared,
    group: &[Arc<Batch>],
    export_timeout: Duration,
    failures: &mut WarnLimiter,
    lags: &mut WarnLimiter,
) {
    let Some(last) = group.last() else { return };
    let mut expected = lane.settled.load(Ordering::Acquire) + 1;
    for batch in group {
        if batch.first_seq <= expected {
            lags.succeeded();
        } else {
            let skipped = batch.first_seq - expected;
            lane.lagged.fetch_add(skipped, Ordering::Relaxed);
            lags.failed(Instant::now(), skipped, |first, batches, events| {
                if first {
                    tracing::warn!(exporter = %lane.name, events, "exporter fell behind; oldest events skipped for it");
                } else {
                    tracing::warn!(exporter = %lane.name, times = batches, events, "exporter still falling behind");
                }
            });
        }
        expected = batch.last_seq() + 1;
    }

    let exporter = Arc::clone(&lane.exporter);
    let (n, mut task) = if let [one] = group {
        let to_export = Arc::clone(one);
        (
            one.events.len() as u64,
            tokio::spawn(async move { exporter.export(&to_export.events).await }),
        )
    } else {
        let merged: Vec<Event> = group
            .iter()
            .flat_map(|b| b.events.iter().cloned())
            .collect();
        (
            merged.len() as u64,
            tokio::spawn(async move { exporter.export(&merged).await }),
        )
    };
    match run_bounded(&mut task, export_timeout).await {
        Ok(()) => {
            lane.exported.fetch_add(n, Ordering::Relaxed);
            if let Some((batches, events)) = failures.succeeded() {
                tracing::info!(exporter = %lane.name, failed_batches = batches, failed_events = events, "exporter recovered");
            }
        }
        Err(e) => {
            lane.failures.fetch_add(1, Ordering::Relaxed);
            lane.failed_events.fetch_add(n, Ordering::Relaxed);
            failures.failed(Instant::now(), n, |first, batches, events| {
                if first {
                    tracing::warn!(exporter = %lane.name, error = %e, events, "export failed; further failures are summarized every 30s");
                } else {
                    tracing::warn!(exporter = %lane.name, error = %e, failed_batches = batches, failed_events = events, "exports still failing");
                }
            });
        }
    }
    lane.settled.store(last.last_seq(), Ordering::Release);
    shared.progress.notify_one();
}

// Turns a stream of failures into one warning at the start of a bad spell
// and one summary per `WARN_WINDOW` while it lasts.
#[derive(Default)]
struct WarnLimiter {
    window_start: Option<Instant>,
    // Since the last line logged.
    batches: u64,
    events: u64,
    // Since the spell began.
    spell_batches: u64,
    spell_events: u64,
}

impl WarnLimiter {
    // `log(first, batches, events)` is called when a line is due.
    fn failed(&mut self, now: Instant, events: u64, log: impl FnOnce(bool, u64, u64)) {
        self.batches += 1;
        self.events += events;
        self.spell_batches += 1;
        self.spell_events += events;
        match self.window_start {
            None => {
                log(true, self.batches, self.events);
                self.window_start = Some(now);
                self.batches = 0;
                self.events = 0;
            }
            Some(start) if now.duration_since(start) >= WARN_WINDOW => {
                log(false, self.batches, self.events);
                self.window_start = Some(now);
                self.batches = 0;
                self.events = 0;
            }
            Some(_) => {}
        }
    }

    // Ends a bad spell; returns its totals if there was one.
    fn succeeded(&mut self) -> Option<(u64, u64)> {
        self.window_start.take()?;
        let totals = (self.spell_batches, self.spell_events);
        *self = WarnLimiter::default();
        Some(totals)
    }
}
