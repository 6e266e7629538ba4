//! The PostgreSQL session store against a real server: the store contract
//! (load, save, delete, a record round trip with its fact ledger), managers
//! on separate connections continuing one summary chain exactly as one
//! manager does, locks of one session serializing across connections, and a
//! lock that cannot be had within `state.wait_ms` failing as busy.

mod manager_support;
mod postgres_support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use compact_middleware::archive::SessionId;
use compact_middleware::state::{
    Fetched, PostgresSessionStore, SessionRecord, SessionStore, StateError,
};
use compact_middleware::{CompactManager, Message};
use manager_support::{manager, store_config as config, ticket_turn};

/// `turns` turns of session `s1`, the agent feeding our output back; turn
/// `i` goes to `managers[pick(i)]`.
async fn drive(
    managers: &[CompactManager],
    pick: impl Fn(usize) -> usize,
    turns: usize,
) -> Vec<Vec<Message>> {
    manager_support::drive(managers, pick, turns, true, |i| ticket_turn(i, true)).await
}

fn id(s: &str) -> SessionId {
    SessionId::parse(s).expect("session id")
}

async fn connect(url: &str) -> Arc<dyn SessionStore> {
    Arc::new(
        PostgresSessionStore::connect(url)
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
}

#[tokio::test]
async fn the_store_keeps_records_and_their_ledger() {
    let db = postgres_support::database().await;
    let store = connect(&db.url).await;
    assert_eq!(store.kind(), "postgres");
    assert!(store.load(&id("nobody")).await.expect("load").is_none());
    assert!(!store.delete(&id("nobody")).await.expect("delete"));

    // A real record, written by a manager: summary, hashes, ledger.
    let dir = tempfile::tempdir().expect("tempdir");
    drive(
        &[manager(&config(dir.path()), Some(store.clone()))],
        |_| 0,
        12,
    )
    .await;
    let record = store
        .load(&id("s1"))
        .await
        .expect("load")
        .expect("a record");
    assert!(record.summary.as_ref().is_some_and(|s| s.version >= 1));
    assert!(!record.ledger.is_empty(), "the ledger was stored");

    // Round trip: saved elsewhere and read back, byte for byte the same.
    store.save(&id("copy"), &record).await.expect("save");
    let copy = store.load(&id("copy")).await.expect("load").expect("copy");
    assert_eq!(
        copy.to_json().expect("json"),
        record.to_json().expect("json")
    );

    // A second connection (another replica) sees the same rows; the
    // schema is created only once.
    let other = connect(&db.url).await;
    let seen = other.load(&id("copy")).await.expect("load").expect("copy");
    assert_eq!(
        seen.to_json().expect("json"),
        record.to_json().expect("json")
    );

    // Etags: unchanged when known, new at every save.
    let mut guard = store.lock(&id("copy")).await.expect("lock");
    let Fetched::Record(etag, _) = guard.load(None).await.expect("load") else {
        panic!("a record");
    };
    assert!(matches!(
        guard.load(Some(etag)).await.expect("load"),
        Fetched::Unchanged
    ));
    let next = guard.save(&SessionRecord::default()).await.expect("save");
    assert_ne!(next, etag);
    guard.release().await.expect("release");

    // A guard dropped without release discards its writes.
    let mut guard = store.lock(&id("copy")).await.expect("lock");
    assert!(guard.delete().await.expect("delete"));
    drop(guard);
    assert!(store.load(&id("copy")).await.expect("load").is_some());

    assert!(store.delete(&id("copy")).await.expect("delete"));
    assert!(store.load(&id("copy")).await.expect("load").is_none());
}

/// 24 turns on one manager without a session store: what managers
/// sharing the database must answer.
async fn on_one_manager(dir: &std::path::Path) -> Vec<Vec<Message>> {
    drive(&[manager(&config(&dir.join("one")), None)], |_| 0, 24).await
}

#[tokio::test]
async fn alternating_managers_on_one_database_match_one_manager() {
    let db = postgres_support::database().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let one = on_one_manager(dir.path()).await;
    let cfg = config(&dir.path().join("pg"));
    // Two replicas with their own connections, and a third built fresh at
    // turn 10 (a restart).
    let managers = [
        manager(&cfg, Some(connect(&db.url).await)),
        manager(&cfg, Some(connect(&db.url).await)),
        manager(&cfg, Some(connect(&db.url).await)),
    ];
    let shared = drive(
        &managers,
        |i| if i >= 10 && i % 3 == 0 { 2 } else { i % 2 },
        24,
    )
    .await;
    assert_eq!(shared, one, "outputs differ from one manager's");
    let record = connect(&db.url)
        .await
        .load(&id("s1"))
        .await
        .expect("load")
        .expect("a record");
    assert!(record.summary.as_ref().is_some_and(|s| s.version > 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_of_one_session_serialize_across_connections() {
    let db = postgres_support::database().await;
    // Waits long enough that a loaded machine never turns a wait into
    // `Busy`: this is about serializing (the bound has its own test).
    let a = connect_waiting(&db.url, Duration::from_secs(120)).await;
    let b = connect_waiting(&db.url, Duration::from_secs(120)).await;

    // a holds the session; b's lock waits in the server until a commits,
    // then b reads what a wrote.
    let mut held = a.lock(&id("s")).await.expect("lock");
    assert!(matches!(
        held.load(None).await.expect("load"),
        Fetched::Absent
    ));
    let waiter = tokio::spawn({
        let b = b.clone();
        async move {
            let mut guard = b.lock(&id("s")).await.expect("lock");
            let seen = match guard.load(None).await.expect("load") {
                Fetched::Record(_, r) => r.step,
                Fetched::Absent | Fetched::Unchanged => None,
            };
            guard
                .save(&SessionRecord {
                    step: Some(seen.unwrap_or(0) + 1),
                    ..SessionRecord::default()
                })
                .await
                .expect("save");
            guard.release().await.expect("release");
            seen
        }
    });
    // Wait (no deadline) until the server shows b waiting for the lock.
    let (watch, connection) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    loop {
        let waiting: i64 = watch
            .query_one(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
                &[],
            )
            .await
            .expect("pg_locks")
            .get(0);
        if waiting == 1 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(!waiter.is_finished());
    held.save(&SessionRecord {
        step: Some(1),
        ..SessionRecord::default()
    })
    .await
    .expect("save");
    held.release().await.expect("release");
    assert_eq!(waiter.await.expect("waiter"), Some(1), "b saw a's write");
    let last = a.load(&id("s")).await.expect("load").expect("record");
    assert_eq!(last.step, Some(2));

    // Many concurrent read-modify-writes over two replicas lose none.
    let mut tasks = Vec::new();
    for i in 0..16 {
        let store = if i % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(async move {
            let mut guard = store.lock(&id("n")).await.expect("lock");
            let n = match guard.load(None).await.expect("load") {
                Fetched::Record(_, r) => r.step.unwrap_or(0),
                Fetched::Absent | Fetched::Unchanged => 0,
            };
            tokio::task::yield_now().await;
            guard
                .save(&SessionRecord {
                    step: Some(n + 1),
                    ..SessionRecord::default()
                })
                .await
                .expect("save");
            guard.release().await.expect("release");
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    let n = a.load(&id("n")).await.expect("load").expect("record");
    assert_eq!(n.step, Some(16));
}

async fn connect_waiting(url: &str, wait: Duration) -> Arc<dyn SessionStore> {
    Arc::new(
        PostgresSessionStore::connect_with_wait(url, wait)
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
}

/// `state.wait_ms`: a lock that cannot be had in time, because every
/// connection of the process is held or because another replica holds the
/// session, fails as `Busy` after the wait instead of waiting on; and the
/// store works normally once the holders let go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_that_cannot_be_had_in_time_is_busy() {
    let db = postgres_support::database().await;
    let wait = Duration::from_millis(300);
    let a = connect_waiting(&db.url, wait).await;
    let b = connect_waiting(&db.url, wait).await;

    // Every connection of `a` held (16, docs/operations.md): the next lock
    // of any session gives up after the wait.
    let mut held = Vec::new();
    let busy = loop {
        let started = Instant::now();
        match a.lock(&id(&format!("s{}", held.len()))).await {
            Ok(guard) => held.push(guard),
            Err(e) => break (e, started.elapsed()),
        }
        assert!(held.len() <= 64, "the pool never ran out");
    };
    assert_eq!(held.len(), 16, "{}", busy.0);
    assert!(matches!(busy.0, StateError::Busy(_)), "{}", busy.0);
    assert!(busy.0.to_string().contains("state.wait_ms"), "{}", busy.0);
    assert!(busy.1 >= wait / 2, "gave up after {:?}", busy.1);
    // Another process is not affected.
    let other = b.lock(&id("elsewhere")).await.expect("lock");
    other.release().await.expect("release");

    // `s0` held by `a`: `b` waits in the server for the wait, then is busy.
    let started = Instant::now();
    let err = match b.lock(&id("s0")).await {
        Ok(_) => panic!("s0 is held by a"),
        Err(e) => e,
    };
    // After the wait (the server's timer, give or take a millisecond), not at once.
    assert!(started.elapsed() >= wait / 2, "{:?}", started.elapsed());
    assert!(matches!(err, StateError::Busy(_)), "{err}");
    assert!(err.to_string().contains("s0"), "{err}");

    // Let go: `a` locks again, `b` gets `s0` and reads what `a` wrote.
    let mut first = held.remove(0);
    first
        .save(&SessionRecord {
            step: Some(7),
            ..SessionRecord::default()
        })
        .await
        .expect("save");
    first.release().await.expect("release");
    for guard in held {
        guard.release().await.expect("release");
    }
    a.lock(&id("again"))
        .await
        .expect("lock")
        .release()
        .await
        .expect("release");
    let mut guard = b.lock(&id("s0")).await.expect("lock");
    match guard.load(None).await.expect("load") {
        Fetched::Record(_, r) => assert_eq!(r.step, Some(7)),
        other => panic!("{other:?}"),
    }
    guard.release().await.expect("release");
}

#[tokio::test]
async fn a_bad_url_is_a_clear_error_without_the_password() {
    let err = PostgresSessionStore::connect("postgres://u:s3cret@127.0.0.1:1/x")
        .await
        .expect_err("nothing listens on port 1");
    let text = err.to_string();
    assert!(text.contains("cannot connect"), "{text}");
    assert!(!text.contains("s3cret"), "{text}");
    assert!(text.contains("u:***@127.0.0.1:1/x"), "{text}");
}

#[tokio::test]
async fn concurrent_preflights_of_one_session_on_two_replicas_never_fork_the_chain() {
    let db = postgres_support::database().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config(dir.path());
    let a = manager(&cfg, Some(connect(&db.url).await));
    let b = manager(&cfg, Some(connect(&db.url).await));
    let mut history = vec![Message::system("You are an agent.")];
    let mut last = 0;
    for i in 0..10 {
        history.extend(ticket_turn(i, true));
        // Both replicas get the same raw history at once: whichever runs
        // second sees the first's record, so versions only move forward.
        let (x, y) = tokio::join!(
            a.preflight("s1", history.clone()),
            b.preflight("s1", history.clone())
        );
        x.unwrap_or_else(|e| panic!("turn {i}: {e}"));
        y.unwrap_or_else(|e| panic!("turn {i}: {e}"));
        let record = a.status("s1").await.expect("status");
        let version = record.summary.as_ref().map_or(0, |s| s.version);
        assert!(version >= last, "turn {i}: version went back");
        last = version;
    }
    let out = a
        .preflight("s1", history)
        .await
        .expect("preflight")
        .messages;
    let summaries: Vec<&str> = out
        .iter()
        .filter_map(|m| m.raw().get("content").and_then(serde_json::Value::as_str))
        .filter(|t| t.contains("COMPACT-SUMMARY v"))
        .collect();
    assert_eq!(summaries.len(), 1, "one summary: {summaries:?}");
    assert_eq!(
        summaries[0].matches("COMPACT-SUMMARY v").count(),
        1,
        "nested: {}",
        summaries[0]
    );
}

/// Records compress with lz4 when the server supports it (a long session's
/// record is hundreds of kilobytes, written at every preflight).
#[tokio::test]
async fn records_compress_with_lz4_where_the_server_can() {
    let db = postgres_support::database().await;
    let _store = connect(&db.url).await;
    let (client, connection) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    let supported = client
        .batch_execute("CREATE TEMP TABLE probe (t TEXT COMPRESSION lz4)")
        .await
        .is_ok();
    let method: String = client
        .query_one(
            "SELECT attcompression::text FROM pg_attribute
             WHERE attrelid = 'compact_sessions'::regclass AND attname = 'record'",
            &[],
        )
        .await
        .expect("query")
        .get(0);
    assert_eq!(method == "l", supported, "attcompression {method:?}");
    // A second replica starting leaves it as it is.
    let _again = connect(&db.url).await;
}

/// A connection of the test's own, to look at the tables.
async fn raw_client(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    client
}

#[tokio::test]
async fn a_record_stored_whole_by_an_earlier_version_continues_and_is_stored_in_parts() {
    let db = postgres_support::database().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let one = on_one_manager(dir.path()).await;

    // Turns 0-11 on a manager of its own; its record then goes into the
    // table and the row an earlier version wrote: the whole record, as
    // JSON, in `record`, and no `head` column yet.
    let memory = Arc::new(compact_middleware::state::MemorySessionStore::new());
    let cfg = config(&dir.path().join("pg"));
    let first = manager(&cfg, Some(memory.clone()));
    let mut fed = vec![Message::system("You are an agent.")];
    let mut outputs = Vec::new();
    for i in 0..12 {
        fed.extend(ticket_turn(i, true));
        let out = first.preflight("s1", fed.clone()).await.expect("turn");
        fed = out.messages.clone();
        outputs.push(out.messages);
    }
    let record = memory.load(&id("s1")).await.expect("load").expect("record");
    assert!(record.summary.is_some() && !record.ledger.is_empty());
    let old = raw_client(&db.url).await;
    old.batch_execute(
        "CREATE TABLE compact_sessions (
            session_id TEXT        PRIMARY KEY,
            etag       BIGINT      NOT NULL,
            format     INTEGER     NOT NULL,
            record     TEXT        NOT NULL,
            updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
        )",
    )
    .await
    .expect("old schema");
    let text = String::from_utf8(record.to_json().expect("json")).expect("utf-8");
    old.execute(
        "INSERT INTO compact_sessions (session_id, etag, format, record, updated_at)
         VALUES ($1, $2, $3, $4, now())",
        &[&"s1", &12345_i64, &1_i32, &text],
    )
    .await
    .expect("old row");

    // A store of this version opens the old table and reads the record.
    let store = connect(&db.url).await;
    let back = store
        .load(&id("s1"))
        .await
        .expect("load")
        .expect("old record");
    assert_eq!(
        back.to_json().expect("json"),
        record.to_json().expect("json")
    );
    let second = manager(&cfg, Some(store));
    for i in 12..24 {
        fed.extend(ticket_turn(i, true));
        let out = second.preflight("s1", fed.clone()).await.expect("turn");
        fed = out.messages.clone();
        outputs.push(out.messages);
        if i == 12 {
            // Its first save stored it in parts.
            let row = old
                .query_one(
                    "SELECT format, length(record),
                            (SELECT count(*) FROM compact_session_rows WHERE session_id = 's1')
                     FROM compact_sessions WHERE session_id = 's1'",
                    &[],
                )
                .await
                .expect("layout");
            let (format, len, rows): (i32, i32, i64) = (row.get(0), row.get(1), row.get(2));
            assert_eq!((format, len), (2, 0));
            assert!(rows > 10, "{rows} rows");
        }
    }
    assert_eq!(outputs, one, "the chain did not continue");
}
