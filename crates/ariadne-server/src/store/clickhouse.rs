//! The shared store: several `compact serve` replicas ingest into one
//! ClickHouse table, and every replica serves every replica's events, in
//! one order, from an index it keeps by following the table.
//!
//! Over ClickHouse's HTTP interface (reqwest): `RowBinary` both ways, so
//! event JSON is never escaped or unescaped, and only `CREATE`, `INSERT`,
//! `SELECT` and `ALTER … DROP PARTITION` are used, which every ClickHouse
//! since 18.16 (Debian's) understands.
//!
//! **Acknowledged means in ClickHouse.** A replica's writer takes every
//! request queued at that moment (group commit) and inserts it with one
//! synchronous `INSERT`; a request is answered 200 only after ClickHouse
//! acknowledged that insert. Each replica has one insert in flight at a time.
//!
//! **One order on every replica.** An event's id (its SSE `id:`) is
//! `(tick << 4) | slot`: `tick` from the replica's hybrid logical clock in
//! microseconds since 2025 (the wall clock, pushed past every id the replica
//! has read, so a later event never gets a smaller id than one it follows),
//! `slot` the replica's number (0-15). Ids stay below 2^53, so JavaScript
//! reads them exactly. Rows become visible per insert, and a replica's
//! inserts are serialized, so the highest id a replica has made visible is
//! its *promise*: it will never commit a smaller one. A follower delivers
//! the events up to the smallest promise of the live replicas (its own it
//! knows locally), in id order; so every replica delivers the same events in
//! the same order, and an event is never delivered after one with a larger
//! id. A replica that has nothing to insert while others wait on it inserts
//! a heartbeat row (a promise without an event), promising up to
//! [`PROMISE_AHEAD`] ahead so that a busy neighbour does not need one per
//! insert. A replica whose newest row is older than [`LIVE_FOR`] is not
//! waited on (after a SIGKILL the others' live streams stall that long at
//! most; longer than any insert may take, so a slow replica is never given
//! up on while it still inserts); before it inserts again it rejoins: a heartbeat, then it reads the table's
//! highest id and continues above it, so it never commits below what
//! anyone may have delivered. A replica that stops cleanly says so with
//! its last row.
//!
//! Retention: each replica's index keeps the newest `retention.max_events`
//! (and evicts by age) as the log store does; in ClickHouse, day partitions
//! older than `retention.max_age_secs` are dropped.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::{Notify, mpsc, oneshot, watch};

use super::{Shared, WriteReq, stored_from_json};
use crate::config::{Retention, StoreOptions};
use crate::error::StoreError;

/// Ids count microseconds from here (2025-01-01T00:00:00Z): with 4 slot
/// bits they stay below 2^53 until 2042.
const EPOCH_US: u64 = 1_735_689_600_000_000;
/// Replica numbers in the low bits of every id.
const SLOT_BITS: u32 = 4;
const SLOTS: u64 = 1 << SLOT_BITS;
/// Longest an insert may take; a slower one is given up (its events are
/// refused, not acknowledged).
const INSERT_TIMEOUT: Duration = Duration::from_secs(5);
/// A replica whose newest row is older than this is not waited on. A
/// replica's newest row is never older than the previous insert plus
/// [`REJOIN_AFTER`] when the next insert starts, and that insert takes at
/// most [`INSERT_TIMEOUT`]: so a replica still inserting is never given up
/// on (which would let the others deliver past rows it has yet to commit).
const LIVE_FOR: Duration = Duration::from_millis(12_500);
/// A replica whose newest row is this old rejoins before inserting.
const REJOIN_AFTER: Duration = Duration::from_millis(1500);
/// How far ahead a heartbeat promises.
const PROMISE_AHEAD: Duration = Duration::from_millis(100);
/// How often a follower reads the table when nothing pokes it.
const POLL: Duration = Duration::from_millis(10);
/// How often the index applies retention, and ClickHouse's partitions are checked.
const SWEEP_EVERY: Duration = Duration::from_secs(5);
const DROP_PARTITIONS_EVERY: Duration = Duration::from_secs(600);

/// Row kinds.
const EVENT: u8 = 0;
const HEARTBEAT: u8 = 1;
const LEAVING: u8 = 2;

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .saturating_sub(EPOCH_US)
}

fn id_of(tick: u64, slot: u64) -> u64 {
    (tick << SLOT_BITS) | slot
}

fn tick_of(id: u64) -> u64 {
    id >> SLOT_BITS
}

fn us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// A ClickHouse failure, as the store reports it.
fn ch_error(context: &str, message: impl std::fmt::Display) -> StoreError {
    StoreError::io(
        format!("clickhouse: {context}"),
        std::io::Error::other(message.to_string()),
    )
}

/// The HTTP connection to ClickHouse.
#[derive(Debug, Clone)]
struct Conn {
    client: reqwest::Client,
    url: reqwest::Url,
    user: Option<(String, Option<String>)>,
    database: String,
    table: String,
}

impl Conn {
    fn new(opts: &StoreOptions) -> Result<Conn, StoreError> {
        let raw = opts.clickhouse_url.as_deref().unwrap_or_default();
        let mut url = reqwest::Url::parse(raw)
            .map_err(|e| ch_error("store.clickhouse_url", format!("{e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ch_error(
                "store.clickhouse_url",
                "the scheme must be http or https (ClickHouse's HTTP interface)",
            ));
        }
        // Credentials travel as basic auth, never in a logged URL.
        let user = (!url.username().is_empty()).then(|| {
            (
                url.username().to_owned(),
                url.password().map(ToOwned::to_owned),
            )
        });
        let _ = url.set_username("");
        let _ = url.set_password(None);
        for (what, name) in [
            ("store.clickhouse_database", &opts.clickhouse_database),
            ("store.clickhouse_table", &opts.clickhouse_table),
        ] {
            let ok =
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok {
                return Err(ch_error(
                    what,
                    format!("{name:?}: letters, digits and _ only"),
                ));
            }
        }
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| ch_error("client", e))?;
        Ok(Conn {
            client,
            url,
            user,
            database: opts.clickhouse_database.clone(),
            table: opts.clickhouse_table.clone(),
        })
    }

    fn table(&self) -> String {
        format!("{}.{}", self.database, self.table)
    }

    /// Runs `query`; `data` is the body of an `INSERT … FORMAT …`.
    async fn run(&self, query: &str, data: Option<Vec<u8>>) -> Result<Vec<u8>, StoreError> {
        let mut req = self.client.post(self.url.clone());
        req = match data {
            Some(body) => req.query(&[("query", query)]).body(body),
            None => req.body(query.to_owned()),
        };
        if let Some((user, password)) = &self.user {
            req = req.basic_auth(user, password.as_ref());
        }
        let resp = req.send().await.map_err(|e| ch_error("request", e))?;
        let status = resp.status();
        let body = resp.bytes().await.map_err(|e| ch_error("response", e))?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body);
            return Err(ch_error(
                "query refused",
                format!("{status}: {}", text.trim()),
            ));
        }
        Ok(body.to_vec())
    }
}

/// A SQL string literal.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        if c == '\'' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('\'');
    out
}

/// Reads `RowBinary`.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn done(&self) -> bool {
        self.buf.is_empty()
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.buf.len() < n {
            return None;
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u64(&mut self) -> Option<u64> {
        let b: [u8; 8] = self.take(8)?.try_into().ok()?;
        Some(u64::from_le_bytes(b))
    }

    fn i64(&mut self) -> Option<i64> {
        let b: [u8; 8] = self.take(8)?.try_into().ok()?;
        Some(i64::from_le_bytes(b))
    }

    fn string(&mut self) -> Option<&'a [u8]> {
        let mut len: u64 = 0;
        let mut shift = 0;
        loop {
            let b = self.u8()?;
            len |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 63 {
                return None;
            }
        }
        self.take(usize::try_from(len).ok()?)
    }
}

fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    let mut len = s.len() as u64;
    loop {
        let byte = (len & 0x7f) as u8;
        len >>= 7;
        if len == 0 {
            out.push(byte);
            break;
        }
        out.push(byte | 0x80);
    }
    out.extend_from_slice(s);
}

/// One row: `id UInt64, replica String, kind UInt8, received_ms Int64, json String`.
fn put_row(out: &mut Vec<u8>, id: u64, replica: &str, kind: u8, received_ms: i64, json: &str) {
    out.extend_from_slice(&id.to_le_bytes());
    put_string(out, replica.as_bytes());
    out.push(kind);
    out.extend_from_slice(&received_ms.to_le_bytes());
    put_string(out, json.as_bytes());
}

struct Row {
    id: u64,
    replica: String,
    kind: u8,
    received_ms: i64,
    json: String,
}

fn read_rows(body: &[u8]) -> Result<Vec<Row>, StoreError> {
    let mut r = Reader { buf: body };
    let mut rows = Vec::new();
    while !r.done() {
        let row = (|| {
            Some(Row {
                id: r.u64()?,
                replica: String::from_utf8_lossy(r.string()?).into_owned(),
                kind: r.u8()?,
                received_ms: r.i64()?,
                json: String::from_utf8(r.string()?.to_vec()).ok()?,
            })
        })();
        match row {
            Some(row) => rows.push(row),
            None => return Err(ch_error("read", "a truncated or malformed RowBinary row")),
        }
    }
    Ok(rows)
}

/// This replica's clock and what it has promised.
#[derive(Debug)]
struct Clock {
    slot: u64,
    /// The newest tick handed out, promised, or read from anyone's id.
    last: u64,
    /// While an insert is in flight: its first id (nothing below it can
    /// still come from us, nothing from it is visible yet).
    inflight_first: Option<u64>,
    /// The newest id of ours that is visible in ClickHouse.
    published: u64,
    /// When we last made a row visible (`None`: never, or we may have been
    /// given up on: rejoin first).
    published_at: Option<Instant>,
    /// The newest heartbeat id we made visible: answers waiting neighbours,
    /// but one sent after a quiet spell does not spare the rejoin.
    promised: u64,
}

impl Clock {
    fn observe(&mut self, id: u64) {
        self.last = self.last.max(tick_of(id));
    }

    /// `n` consecutive ticks, the first not before `not_before`.
    fn ticks(&mut self, n: u64, not_before: u64) -> u64 {
        let first = (self.last + 1).max(now_us()).max(not_before);
        self.last = first + n.saturating_sub(1);
        first
    }

    /// What we can promise right now: below the insert in flight, else
    /// everything up to now (the next tick will be later).
    fn promise(&mut self) -> u64 {
        match self.inflight_first {
            Some(first) => first.saturating_sub(1),
            None => {
                self.last = self.last.max(now_us());
                id_of(self.last, SLOTS - 1)
            }
        }
    }

    /// Whether our newest row may be old enough that others stopped
    /// waiting on us (judged by its id's time, as they judge it).
    fn quiet_too_long(&self) -> bool {
        self.published_at.is_none()
            || now_us().saturating_sub(tick_of(self.published)) >= us(REJOIN_AFTER)
    }
}

struct Common {
    conn: Conn,
    replica: String,
    clock: Mutex<Clock>,
    /// Every event up to this id has been delivered to the index.
    delivered: watch::Sender<u64>,
    /// Wakes the follower (our insert landed).
    poke: Notify,
    /// Wakes the writer to insert a heartbeat.
    heartbeat: Notify,
    /// The newest id read from any other replica.
    others_max: std::sync::atomic::AtomicU64,
}

impl Common {
    fn clock(&self) -> std::sync::MutexGuard<'_, Clock> {
        self.clock.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The writer's handle: where ingest requests go.
#[derive(Clone)]
pub(crate) struct Writer {
    tx: mpsc::UnboundedSender<WriteReq>,
}

impl Writer {
    pub(crate) fn send(&self, req: WriteReq) -> Result<(), StoreError> {
        self.tx.send(req).map_err(|_| StoreError::Closed)
    }
}

/// Connects, creates the table if missing, loads the newest events and
/// starts the writer and the follower.
pub(crate) async fn open(
    opts: &StoreOptions,
    retention: &Retention,
    shared: Arc<Shared>,
) -> Result<Writer, StoreError> {
    let conn = Conn::new(opts)?;
    if conn.database != "default" {
        conn.run(
            &format!("CREATE DATABASE IF NOT EXISTS {}", conn.database),
            None,
        )
        .await?;
    }
    // Day partitions by the id's time: retention drops whole days.
    conn.run(
        &format!(
            "CREATE TABLE IF NOT EXISTS {} (id UInt64, replica String, kind UInt8, \
             received_ms Int64, json String) ENGINE = MergeTree() \
             PARTITION BY toYYYYMMDD(toDateTime(intDiv(id, {div}) + {epoch})) ORDER BY id",
            conn.table(),
            div = SLOTS * 1_000_000,
            epoch = EPOCH_US / 1_000_000,
        ),
        None,
    )
    .await?;

    let replica = opts.replica.clone().unwrap_or_else(default_replica_name);
    let (slot, seen, claim) = claim_slot(&conn, &replica).await?;

    // The newest `max_events` events (and none past the age limit) are loaded.
    let mut floor = 0u64;
    let body = conn
        .run(
            &format!(
                "SELECT id FROM {} WHERE kind = {EVENT} ORDER BY id DESC LIMIT 1 OFFSET {} FORMAT TSV",
                conn.table(),
                retention.max_events
            ),
            None,
        )
        .await?;
    if let Ok(id) = String::from_utf8_lossy(&body).trim().parse::<u64>() {
        floor = id;
    }
    if retention.max_age_secs > 0 {
        let age = retention.max_age_secs.saturating_mul(1_000_000);
        floor = floor.max(id_of(now_us().saturating_sub(age), 0));
    }
    if floor > 0 {
        super::write(&shared.memory).forget_through(floor);
    }

    let mut last = now_us().max(tick_of(claim));
    for id in seen.values() {
        last = last.max(tick_of(*id));
    }
    let (delivered, _) = watch::channel(floor);
    let common = Arc::new(Common {
        conn,
        replica: replica.clone(),
        clock: Mutex::new(Clock {
            slot,
            last,
            inflight_first: None,
            published: 0,
            published_at: None,
            promised: 0,
        }),
        delivered,
        poke: Notify::new(),
        heartbeat: Notify::new(),
        others_max: std::sync::atomic::AtomicU64::new(0),
    });
    tracing::info!(replica = %replica, slot, table = %common.conn.table(), "clickhouse store open");

    let (tx, rx) = mpsc::unbounded_channel();
    let (stop_tx, stop_rx) = oneshot::channel();
    let follower = Follower {
        common: common.clone(),
        shared,
        retention: retention.clone(),
        seen,
        read: HashMap::new(),
        max_read: 0,
        left: HashSet::new(),
        held: BTreeMap::new(),
    };
    tokio::spawn(follower.run(stop_rx));
    tokio::spawn(write_loop(common, rx, stop_tx));
    Ok(Writer { tx })
}

/// The live replicas (newest and oldest id of each in the last
/// [`LIVE_FOR`]).
async fn live_replicas(conn: &Conn) -> Result<HashMap<String, (u64, u64)>, StoreError> {
    let since = id_of(now_us().saturating_sub(us(LIVE_FOR)), 0);
    let body = conn
        .run(
            &format!(
                "SELECT replica, max(id), min(id) FROM {} WHERE id > {since} GROUP BY replica FORMAT TSV",
                conn.table()
            ),
            None,
        )
        .await?;
    let mut live = HashMap::new();
    for line in String::from_utf8_lossy(&body).lines() {
        let mut cols = line.split('\t');
        if let (Some(name), Some(max), Some(min)) = (cols.next(), cols.next(), cols.next())
            && let (Ok(max), Ok(min)) = (max.trim().parse::<u64>(), min.trim().parse::<u64>())
        {
            live.insert(name.to_owned(), (max, min));
        }
    }
    Ok(live)
}

/// Takes a replica slot no live replica has: ids are unique only if slots
/// are. A claim is a heartbeat row in the slot; when two replicas claim one
/// slot at once, the earlier claim (the smaller oldest id, then the name)
/// keeps it and the other claims again, so replicas starting together end
/// up apart. Returns the slot, every replica's newest id, and our claim's id.
async fn claim_slot(
    conn: &Conn,
    replica: &str,
) -> Result<(u64, HashMap<String, u64>, u64), StoreError> {
    let mut claim: Option<(u64, u64)> = None;
    for _ in 0..64 {
        let live = live_replicas(conn).await?;
        let others: Vec<(&String, u64, u64)> = live
            .iter()
            .filter(|(name, _)| name.as_str() != replica)
            .map(|(name, (max, min))| (name, max & (SLOTS - 1), *min))
            .collect();
        if let Some((slot, id)) = claim {
            let beaten = others
                .iter()
                .any(|(name, s, first)| *s == slot && (*first, name.as_str()) < (id, replica));
            if !beaten {
                let seen = live.into_iter().map(|(n, (max, _))| (n, max)).collect();
                return Ok((slot, seen, id));
            }
        }
        let used: HashSet<u64> = others.iter().map(|(_, s, _)| *s).collect();
        let slot = (0..SLOTS)
            .find(|s| !used.contains(s))
            .unwrap_or_else(|| name_hash(replica) % SLOTS);
        let newest = live
            .values()
            .map(|(max, _)| tick_of(*max))
            .max()
            .unwrap_or(0);
        let id = id_of(now_us().max(newest + 1), slot);
        let mut body = Vec::new();
        put_row(&mut body, id, replica, HEARTBEAT, 0, "");
        conn.run(
            &format!(
                "INSERT INTO {} (id, replica, kind, received_ms, json) FORMAT RowBinary",
                conn.table()
            ),
            Some(body),
        )
        .await?;
        claim = Some((slot, id));
    }
    Err(ch_error(
        "replica slot",
        "no free slot could be claimed (more than 16 live replicas?)",
    ))
}

fn default_replica_name() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "replica".to_owned());
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{host}-{}-{nanos:08x}", std::process::id())
}

fn name_hash(s: &str) -> u64 {
    // FNV-1a: stable across processes (std's hasher is seeded).
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Inserts this replica's rows, one insert at a time.
async fn write_loop(
    common: Arc<Common>,
    mut rx: mpsc::UnboundedReceiver<WriteReq>,
    stop_follower: oneshot::Sender<()>,
) {
    loop {
        let first = tokio::select! {
            biased;
            req = rx.recv() => match req {
                Some(r) => Some(r),
                None => break,
            },
            () = common.heartbeat.notified() => None,
        };
        match first {
            Some(first) => {
                let group = super::gather(first, || rx.try_recv().ok());
                insert_events(&common, group).await;
            }
            None => heartbeat(&common).await,
        }
    }
    // Every handle is gone: the server stopped. Tell the others not to wait.
    let tick = common.clock().ticks(1, 0);
    let slot = common.clock().slot;
    let mut body = Vec::new();
    put_row(
        &mut body,
        id_of(tick, slot),
        &common.replica,
        LEAVING,
        0,
        "",
    );
    if let Err(e) = insert(&common, body).await {
        tracing::debug!(error = %e, "could not record this replica's leaving");
    }
    let _ = stop_follower.send(());
}

async fn insert(common: &Common, body: Vec<u8>) -> Result<(), StoreError> {
    let query = format!(
        "INSERT INTO {} (id, replica, kind, received_ms, json) FORMAT RowBinary",
        common.conn.table()
    );
    match tokio::time::timeout(INSERT_TIMEOUT, common.conn.run(&query, Some(body))).await {
        Ok(r) => r.map(|_| ()),
        Err(_) => Err(ch_error(
            "insert",
            format!("not acknowledged within {INSERT_TIMEOUT:?}"),
        )),
    }
}

/// Makes sure nobody has delivered past where our next ids will be: a
/// heartbeat (the others wait for us again from when they read it), then
/// the table's highest id, which our ids will follow.
async fn rejoin(common: &Common) -> Result<(), StoreError> {
    let (id, slot) = {
        let mut c = common.clock();
        let t = c.ticks(1, 0);
        (id_of(t, c.slot), c.slot)
    };
    let mut body = Vec::new();
    put_row(&mut body, id, &common.replica, HEARTBEAT, 0, "");
    insert(common, body).await?;
    let max = common
        .conn
        .run(
            &format!("SELECT max(id) FROM {} FORMAT TSV", common.conn.table()),
            None,
        )
        .await?;
    let max = String::from_utf8_lossy(&max)
        .trim()
        .parse::<u64>()
        .unwrap_or(0);
    let mut c = common.clock();
    c.observe(max);
    c.published = c.published.max(id);
    c.published_at = Some(Instant::now());
    tracing::debug!(slot, max, "rejoined the shared store");
    Ok(())
}

async fn insert_events(common: &Arc<Common>, group: Vec<WriteReq>) {
    if common.clock().quiet_too_long()
        && let Err(e) = rejoin(common).await
    {
        tracing::warn!(error = %e, "clickhouse insert refused");
        for req in group {
            let _ = req.reply.send(Err(e.to_string()));
        }
        return;
    }
    let n: usize = group.iter().map(|r| r.events.len()).sum();
    let received_ms = compact_events::now_millis();
    let (first_tick, slot) = {
        let mut c = common.clock();
        let t = c.ticks(n as u64, 0);
        c.inflight_first = Some(id_of(t, c.slot));
        (t, c.slot)
    };
    let mut body = Vec::with_capacity(n * 512);
    let mut tick = first_tick;
    let mut replies = Vec::with_capacity(group.len());
    for req in group {
        let start = id_of(tick, slot);
        for ev in &req.events {
            put_row(
                &mut body,
                id_of(tick, slot),
                &common.replica,
                EVENT,
                received_ms,
                &ev.json,
            );
            tick += 1;
        }
        replies.push((req.reply, start, req.events.len()));
    }
    let last_id = id_of(tick - 1, slot);
    let result = insert(common, body).await;
    {
        let mut c = common.clock();
        c.inflight_first = None;
        if result.is_ok() {
            c.published = c.published.max(last_id);
            c.published_at = Some(Instant::now());
        }
    }
    match result {
        Ok(()) => {
            // Acknowledged means in ClickHouse: answer now. Waiting for our
            // own index as well (read-your-writes) waits on the other
            // replicas' promises: two replicas then ingested a quarter of
            // what one does. The index follows within a poll.
            common.poke.notify_one();
            for (reply, start, count) in replies {
                let _ = reply.send(Ok((start, count)));
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "clickhouse insert failed; the batch is refused");
            for (reply, _, _) in replies {
                let _ = reply.send(Err(e.to_string()));
            }
        }
    }
}

/// A promise without an event, for replicas waiting on us.
async fn heartbeat(common: &Common) {
    let others = common.others_max.load(std::sync::atomic::Ordering::Acquire);
    let (id, needed, quiet) = {
        let mut c = common.clock();
        // Only when someone may be waiting: they have rows past our promise.
        // Even when we have been quiet: they wait on us for LIVE_FOR, and a
        // promise is always safe to give (only an insert of events after a
        // quiet spell needs a rejoin).
        let needed = others > c.published.max(c.promised);
        let ahead = now_us() + us(PROMISE_AHEAD);
        let t = if needed {
            c.ticks(1, ahead.max(tick_of(others) + 1))
        } else {
            0
        };
        (id_of(t, c.slot), needed, c.quiet_too_long())
    };
    if !needed {
        return;
    }
    let mut body = Vec::new();
    put_row(&mut body, id, &common.replica, HEARTBEAT, 0, "");
    match insert(common, body).await {
        Ok(()) => {
            let mut c = common.clock();
            c.promised = c.promised.max(id);
            // After a quiet spell others may have delivered past where this
            // heartbeat went: our next events still rejoin first.
            if !quiet {
                c.published = c.published.max(id);
                c.published_at = Some(Instant::now());
            }
        }
        Err(e) => tracing::debug!(error = %e, "heartbeat insert failed"),
    }
}

/// Reads the table and delivers what every live replica has promised.
struct Follower {
    common: Arc<Common>,
    shared: Arc<Shared>,
    retention: Retention,
    /// Each replica's newest id known (ours too): for the others, their
    /// promise and whether they are live. Seeded at start from the table.
    seen: HashMap<String, u64>,
    /// Each replica's newest id actually read: its rows up to there (one
    /// insert at a time) are all in hand, so a poll skips them.
    read: HashMap<String, u64>,
    /// The newest id of any row read: delivery never goes past it, so a
    /// replica that (re)joins and continues above the table's highest id is
    /// never behind anyone's cursor.
    max_read: u64,
    /// Replicas that said they stopped.
    left: HashSet<String>,
    /// Events read, not yet delivered, by id.
    held: BTreeMap<(u64, String), Row>,
}

impl Follower {
    async fn run(mut self, mut stop: oneshot::Receiver<()>) {
        let mut swept = Instant::now();
        let mut dropped = Instant::now()
            .checked_sub(DROP_PARTITIONS_EVERY)
            .unwrap_or_else(Instant::now);
        loop {
            if let Err(e) = self.poll().await {
                tracing::warn!(error = %e, "reading the shared store failed; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            if swept.elapsed() >= SWEEP_EVERY {
                swept = Instant::now();
                self.shared.retain(&self.retention);
                self.refresh_disk_bytes().await;
                if self.retention.max_age_secs > 0 && dropped.elapsed() >= DROP_PARTITIONS_EVERY {
                    dropped = Instant::now();
                    self.drop_old_partitions().await;
                }
            }
            tokio::select! {
                _ = &mut stop => return,
                () = self.common.poke.notified() => {}
                () = tokio::time::sleep(POLL) => {}
            }
        }
    }

    async fn poll(&mut self) -> Result<(), StoreError> {
        let delivered = *self.common.delivered.borrow();
        // Our own promise as of before the query: every row of ours up to it
        // was acknowledged before the query began, so the query sees it.
        // Taken after the query, an insert acknowledged meanwhile would be
        // promised but missing from what was read, and skipped for good.
        let own_promise = self.common.clock().promise();
        // Rows a replica wrote up to the newest id we read from it came in
        // one insert or an earlier one: we have them all already.
        let mut skip = String::from("0");
        if !self.read.is_empty() {
            let mut arms = Vec::new();
            for (name, id) in &self.read {
                arms.push(format!("replica = {}, {id}", quote(name)));
            }
            skip = format!("multiIf({}, 0)", arms.join(", "));
        }
        let query = format!(
            "SELECT id, replica, kind, received_ms, json FROM {} WHERE id > {delivered} \
             AND id > {skip} ORDER BY id FORMAT RowBinary",
            self.common.conn.table()
        );
        let body = self.common.conn.run(&query, None).await?;
        let rows = read_rows(&body)?;
        let me = &self.common.replica;
        let mut others_max = 0;
        for row in rows {
            let seen = self.seen.entry(row.replica.clone()).or_insert(0);
            *seen = (*seen).max(row.id);
            let read = self.read.entry(row.replica.clone()).or_insert(0);
            *read = (*read).max(row.id);
            self.max_read = self.max_read.max(row.id);
            if row.replica != *me {
                if row.kind == LEAVING {
                    self.left.insert(row.replica.clone());
                } else {
                    self.left.remove(&row.replica);
                }
            }
            if row.kind == EVENT {
                // Causality: what we write after reading an event sorts
                // after it. Heartbeats are promises, not events: following
                // them would push our ids past every promise at once, and
                // the promiser would have to promise again after each insert.
                self.common.clock().observe(row.id);
                if row.replica != *me {
                    others_max = others_max.max(row.id);
                }
                self.held.insert((row.id, row.replica.clone()), row);
            }
        }
        if others_max > 0 {
            self.common
                .others_max
                .fetch_max(others_max, std::sync::atomic::Ordering::AcqRel);
        }
        let mut upto = own_promise.min(self.max_read);
        let live_since = now_us().saturating_sub(us(LIVE_FOR));
        for (name, id) in &self.seen {
            if name != me && !self.left.contains(name) && tick_of(*id) >= live_since {
                upto = upto.min(*id);
            }
        }
        // Others have events past what we promised: they may wait on us.
        let published = self.common.clock().published;
        if self
            .common
            .others_max
            .load(std::sync::atomic::Ordering::Acquire)
            > published
        {
            self.common.heartbeat.notify_one();
        }
        if upto <= delivered {
            return Ok(());
        }
        let mut out = Vec::new();
        while let Some(entry) = self.held.first_entry() {
            if entry.key().0 > upto {
                break;
            }
            let row = entry.remove();
            if let Some(ev) = stored_from_json(row.id, row.received_ms, row.json) {
                out.push(Arc::new(ev));
            }
        }
        if !out.is_empty() {
            self.shared
                .commits
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.shared.publish(out);
            self.shared.retain(&self.retention);
        }
        self.common.delivered.send_replace(upto);
        Ok(())
    }

    async fn refresh_disk_bytes(&self) {
        let q = format!(
            "SELECT sum(bytes) FROM system.parts WHERE active AND database = {} AND table = {} FORMAT TSV",
            quote(&self.common.conn.database),
            quote(&self.common.conn.table)
        );
        if let Ok(body) = self.common.conn.run(&q, None).await
            && let Ok(n) = String::from_utf8_lossy(&body).trim().parse::<u64>()
        {
            self.shared
                .disk_bytes
                .store(n, std::sync::atomic::Ordering::Relaxed);
        }
    }

    async fn drop_old_partitions(&self) {
        let age = self.retention.max_age_secs;
        let q = format!(
            "SELECT DISTINCT partition FROM system.parts WHERE active AND database = {} AND table = {} \
             AND toUInt32OrZero(partition) < toYYYYMMDD(now() - {age}) FORMAT TSV",
            quote(&self.common.conn.database),
            quote(&self.common.conn.table)
        );
        let Ok(body) = self.common.conn.run(&q, None).await else {
            return;
        };
        for partition in String::from_utf8_lossy(&body).lines() {
            let p = partition.trim();
            if p.is_empty() || !p.chars().all(|c| c.is_ascii_digit()) {
                continue;
            }
            let q = format!(
                "ALTER TABLE {} DROP PARTITION {p}",
                self.common.conn.table()
            );
            if let Err(e) = self.common.conn.run(&q, None).await {
                tracing::debug!(error = %e, partition = p, "dropping an expired partition failed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_binary_round_trips() {
        let mut body = Vec::new();
        let long = "x".repeat(300);
        put_row(&mut body, 42, "r-1", EVENT, -5, "{\"a\":1}");
        put_row(&mut body, 43, "r-2", HEARTBEAT, 7, &long);
        let rows = read_rows(&body).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            (rows[0].id, rows[0].replica.as_str(), rows[0].kind),
            (42, "r-1", EVENT)
        );
        assert_eq!(
            (rows[0].received_ms, rows[0].json.as_str()),
            (-5, "{\"a\":1}")
        );
        assert_eq!((rows[1].id, rows[1].json.len()), (43, 300));
        assert!(read_rows(&body[..body.len() - 1]).is_err());
    }

    #[test]
    fn ids_stay_exact_in_javascript_until_2042() {
        // 2042-01-01 is 17 years after the epoch.
        let tick = 17 * 365 * 86_400 * 1_000_000u64;
        assert!(id_of(tick, SLOTS - 1) < 1 << 53);
        assert_eq!(tick_of(id_of(tick, 3)), tick);
    }

    #[test]
    fn literals_are_quoted() {
        assert_eq!(quote("a'b\\c"), "'a\\'b\\\\c'");
    }
}
